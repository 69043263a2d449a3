//! The state store: what only the exporter observed, kept across restarts
//! (docs/design/03-timeline-model.md §3.8).
//!
//! Upstream times read the same after a restart; the times the exporter
//! observed itself, first readiness and verdicts do not. The model says what
//! those are for each cluster ([`ClusterMemory`]); this module keeps the live
//! clusters' memory as one versioned, gzip-compressed JSON file in the state
//! directory, replaced atomically (temporary file in the same directory,
//! fsynced, renamed over the old one, directory fsynced), and reads it back
//! at start, before any source runs.
//!
//! Reading never fails the exporter: a missing file is a first start, and a
//! corrupt, unreadable or other-version file is logged, moved aside and
//! ignored. A state directory that cannot be written is an error at start:
//! the operator asked for restart-safe times and would silently not get them.
//!
//! `format` is the file's envelope, `persist` the writing, loading and
//! replacing of the file, `memory` what is kept between writes, and
//! `metrics` the store's self-metrics.

mod bundle_ids;
mod format;
mod memory;
mod metrics;
mod persist;
mod readings;

use std::io;
use std::path::PathBuf;

use jiff::Timestamp;

pub use bundle_ids::{
    BUNDLE_IDS_FILE_NAME, BUNDLE_IDS_FORMAT, BUNDLE_IDS_IGNORED_FILE_NAME, BUNDLE_IDS_VERSION,
    RestoredBundleIds, SavedBundle,
};
pub use format::{FORMAT, MAX_CLUSTERS, VERSION};
pub use memory::{MemorySnapshot, Remembered};
pub use metrics::{StateStoreMetrics, WriteLabels, WriteResult};
pub use persist::{FILE_NAME, IGNORED_FILE_NAME, SAVE_INTERVAL, StateStore};
pub use readings::{
    READINGS_FILE_NAME, READINGS_FORMAT, READINGS_IGNORED_FILE_NAME, READINGS_INTERVAL,
    READINGS_VERSION, ReadingsOf, RestoredReadings,
};

#[derive(Debug, thiserror::Error)]
pub enum StateStoreError {
    #[error("the state directory {} cannot be created", dir.display())]
    CreateDir {
        dir: PathBuf,
        #[source]
        cause: io::Error,
    },
    #[error("the state directory {} is not a directory", dir.display())]
    NotADirectory { dir: PathBuf },
    #[error(
        "the state directory {} is not writable (the exporter keeps its observed times there; \
         mount a writable volume or leave --state-dir unset)",
        dir.display()
    )]
    NotWritable {
        dir: PathBuf,
        #[source]
        cause: io::Error,
    },
    #[error("cannot write the state file {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        cause: io::Error,
    },
}

/// Why a state file was not restored.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read the state file {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        cause: io::Error,
    },
    #[error("the state file {} is not gzip-compressed, or is cut short", path.display())]
    Decompress {
        path: PathBuf,
        #[source]
        cause: io::Error,
    },
    #[error("the state file {} is larger than {max} bytes decompressed", path.display())]
    TooLarge { path: PathBuf, max: u64 },
    #[error("the state file {} is not a readable hcp-flow state file", path.display())]
    Corrupt {
        path: PathBuf,
        #[source]
        cause: serde_json::Error,
    },
    #[error(
        "the state file {} is {format:?} version {version}; this exporter reads {FORMAT:?} version {VERSION}",
        path.display()
    )]
    OtherVersion {
        path: PathBuf,
        format: String,
        version: u64,
    },
    #[error("the readings file {} holds what source {found:?} read, not {wanted:?}", path.display())]
    OtherSource {
        path: PathBuf,
        found: String,
        wanted: String,
    },
    /// No file to read (a first start).
    #[error("no file at {}", path.display())]
    Missing { path: PathBuf },
}

/// What reading the state file at start gave.
#[derive(Debug)]
pub enum Restored {
    /// No file: the first start with this directory.
    Nothing,
    /// The memory of `clusters` clusters, written at `written_at`;
    /// `dropped` more were in the file beyond [`MAX_CLUSTERS`].
    Loaded {
        clusters: usize,
        written_at: Timestamp,
        dropped: usize,
    },
    /// The file could not be used; it was set aside as `moved_to` when
    /// that worked.
    Ignored {
        error: LoadError,
        moved_to: Option<PathBuf>,
    },
}

impl std::fmt::Display for Restored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Restored::Nothing => write!(f, "nothing (no state file yet)"),
            Restored::Loaded {
                clusters,
                written_at,
                dropped: 0,
            } => write!(f, "{clusters} cluster(s) written at {written_at}"),
            Restored::Loaded {
                clusters,
                written_at,
                dropped,
            } => write!(
                f,
                "{clusters} cluster(s) written at {written_at} ({dropped} more beyond the cap of {MAX_CLUSTERS} left out)"
            ),
            Restored::Ignored { error, .. } => {
                write!(f, "nothing: {}", crate::sources::health::cause_chain(error))
            }
        }
    }
}
