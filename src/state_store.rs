//! The state store: what only the exporter observed, kept across restarts
//! (docs/design.md §3.8).
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

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use jiff::Timestamp;
use parking_lot::Mutex;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::{Deserialize, Serialize, Serializer};

use crate::model::{ClusterMemory, Memory};

/// The `format` field of the envelope: what the file is.
pub const FORMAT: &str = "hcp-flow/state";
/// The `version` field this exporter writes and reads. A file of another
/// version is ignored (and set aside), never half-read.
pub const VERSION: u32 = 1;
/// The file in the state directory.
pub const FILE_NAME: &str = "state.json.gz";
/// Where a file that could not be read is moved, so it can be inspected and
/// the next write does not destroy the evidence.
pub const IGNORED_FILE_NAME: &str = "state.json.gz.ignored";
const TEMP_FILE_NAME: &str = ".state.json.gz.tmp";
/// How often the memory is written when it changed.
pub const SAVE_INTERVAL: Duration = Duration::from_secs(15);
/// At most this many clusters are written and read (docs/design.md §3.8):
/// ten times the fleet one instance is sized for, so a runaway can neither
/// fill the volume nor make a start take minutes.
pub const MAX_CLUSTERS: usize = 100_000;
/// A file that decompresses to more than this is not one this exporter
/// wrote (about 1 KB per cluster, so about 100 MB at [`MAX_CLUSTERS`]).
const MAX_DECOMPRESSED_BYTES: u64 = 512 << 20;

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

/// The `result` label of `hcpflow_state_store_writes_total`.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum WriteResult {
    ok,
    error,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    pub result: WriteResult,
}

/// The state store's self-metrics (docs/metrics.md).
#[derive(Clone, Debug, Default)]
pub struct StateStoreMetrics {
    pub writes: Family<WriteLabels, Counter>,
    pub last_write: Gauge<f64, AtomicU64>,
    pub clusters: Gauge,
}

impl StateStoreMetrics {
    pub fn register(registry: &mut Registry) -> StateStoreMetrics {
        let metrics = StateStoreMetrics::default();
        for result in [WriteResult::ok, WriteResult::error] {
            let _ = metrics.writes.get_or_create(&WriteLabels { result });
        }
        registry.register(
            "hcpflow_state_store_writes",
            "Writes of the state file (the observed times kept across restarts), by result; none without a state directory",
            metrics.writes.clone(),
        );
        registry.register(
            "hcpflow_state_store_last_write_timestamp_seconds",
            "Unix time of the last successful write of the state file; 0 before the first one",
            metrics.last_write.clone(),
        );
        registry.register(
            "hcpflow_state_store_clusters",
            "Clusters whose memory the state file holds: restored at start, then as last written",
            metrics.clusters.clone(),
        );
        metrics
    }

    fn count(&self, result: WriteResult) {
        self.writes.get_or_create(&WriteLabels { result }).inc();
    }

    /// Writes with `result` so far.
    pub fn writes(&self, result: WriteResult) -> u64 {
        self.writes.get_or_create(&WriteLabels { result }).get()
    }
}

/// The memory of the live clusters, kept by the store as clusters change:
/// added or replaced when a cluster's remembered part changes, removed with
/// the cluster. `generation` counts changes, so a write that raced with a
/// change leaves the memory dirty.
#[derive(Debug, Default)]
pub struct Remembered {
    clusters: BTreeMap<String, Arc<ClusterMemory>>,
    generation: u64,
    saved: u64,
    /// Restored entries not yet confirmed by a first sync of every source
    /// (see [`Remembered::forget_unseen`]).
    unconfirmed: bool,
    /// Kept only with a state store: without one nothing would read it.
    enabled: bool,
}

/// The memory at one instant, cheap to take under the store's lock: the
/// clusters' memory is shared, not copied.
#[derive(Clone, Debug, Default)]
pub struct MemorySnapshot {
    pub generation: u64,
    pub clusters: Vec<(String, Arc<ClusterMemory>)>,
}

impl MemorySnapshot {
    pub fn len(&self) -> usize {
        self.clusters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty()
    }

    /// The owned form the model restores from.
    pub fn to_memory(&self) -> Memory {
        Memory {
            clusters: self
                .clusters
                .iter()
                .map(|(id, m)| (id.clone(), (**m).clone()))
                .collect(),
        }
    }
}

impl Remembered {
    /// Start keeping memory, seeded with what a previous run remembered. The
    /// entries are kept until their cluster is read again (and replaced) or
    /// until every source has synced without showing it (and forgotten).
    pub fn restore(&mut self, memory: &Memory) {
        self.enabled = true;
        self.clusters = memory
            .clusters
            .iter()
            .map(|(id, m)| (id.clone(), Arc::new(m.clone())))
            .collect();
        self.unconfirmed = !self.clusters.is_empty();
        // What was just read is on disk already.
        self.saved = self.generation;
    }

    /// A cluster changed: remember its new memory, or forget it when the
    /// model no longer tracks it. Only a real difference makes it dirty.
    pub fn update(&mut self, cluster_id: &str, memory: Option<ClusterMemory>) {
        match memory {
            Some(memory) => {
                if self
                    .clusters
                    .get(cluster_id)
                    .is_some_and(|old| **old == memory)
                {
                    return;
                }
                self.clusters
                    .insert(cluster_id.to_string(), Arc::new(memory));
                self.generation += 1;
            }
            None => self.forget(cluster_id),
        }
    }

    /// A cluster was removed (deleted upstream, or gone from every list).
    pub fn forget(&mut self, cluster_id: &str) {
        if self.clusters.remove(cluster_id).is_some() {
            self.generation += 1;
        }
    }

    /// Whether memory is kept at all (a state store is configured).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Whether restored entries still wait for every source's first sync.
    pub fn unconfirmed(&self) -> bool {
        self.unconfirmed
    }

    /// Every source has synced once: a restored cluster the model does not
    /// track now was deleted while the exporter was down (or belongs to
    /// another shard). Forget those, so the file holds only live clusters.
    /// Returns how many were forgotten.
    pub fn forget_unseen(&mut self, tracked: impl Fn(&str) -> bool) -> usize {
        self.unconfirmed = false;
        let before = self.clusters.len();
        self.clusters.retain(|id, _| tracked(id));
        let forgotten = before - self.clusters.len();
        if forgotten > 0 {
            self.generation += 1;
        }
        forgotten
    }

    pub fn len(&self) -> usize {
        self.clusters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty()
    }

    pub fn get(&self, cluster_id: &str) -> Option<&ClusterMemory> {
        self.clusters.get(cluster_id).map(|m| &**m)
    }

    /// Changed since the last successful write.
    pub fn dirty(&self) -> bool {
        self.generation != self.saved
    }

    pub fn snapshot(&self) -> MemorySnapshot {
        MemorySnapshot {
            generation: self.generation,
            clusters: self
                .clusters
                .iter()
                .map(|(id, m)| (id.clone(), m.clone()))
                .collect(),
        }
    }

    /// The snapshot of `generation` is on disk.
    pub fn saved(&mut self, generation: u64) {
        self.saved = self.saved.max(generation);
    }
}

/// The envelope as written: borrowed, so a write copies nothing.
#[derive(Serialize)]
struct EnvelopeOut<'a> {
    format: &'static str,
    version: u32,
    written_at: Timestamp,
    exporter_version: &'static str,
    #[serde(serialize_with = "clusters_map")]
    clusters: &'a [(String, Arc<ClusterMemory>)],
}

fn clusters_map<S: Serializer>(
    clusters: &&[(String, Arc<ClusterMemory>)],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_map(clusters.iter().map(|(id, m)| (id, &**m)))
}

/// The first read: what the file is, whatever else it holds.
#[derive(Deserialize)]
struct Header {
    format: String,
    version: u64,
}

/// The second read, once the version is known to be this one.
#[derive(Deserialize)]
struct Envelope {
    written_at: Timestamp,
    clusters: CappedClusters,
}

/// The clusters of a file, at most [`MAX_CLUSTERS`] of them parsed: the
/// rest are skipped unparsed and only counted, so an oversized file cannot
/// take the memory a full parse would.
struct CappedClusters {
    kept: BTreeMap<String, ClusterMemory>,
    total: usize,
}

impl<'de> Deserialize<'de> for CappedClusters {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = CappedClusters;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of cluster ids to their memory")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<CappedClusters, A::Error> {
                let mut out = CappedClusters {
                    kept: BTreeMap::new(),
                    total: 0,
                };
                while let Some(id) = map.next_key::<String>()? {
                    out.total += 1;
                    if out.kept.len() < MAX_CLUSTERS {
                        let memory = map.next_value::<ClusterMemory>()?;
                        out.kept.insert(id, memory);
                    } else {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
                Ok(out)
            }
        }
        deserializer.deserialize_map(Visit)
    }
}

/// One state directory and its file.
#[derive(Debug)]
pub struct StateStore {
    dir: PathBuf,
    path: PathBuf,
    max_clusters: usize,
    /// [`MAX_DECOMPRESSED_BYTES`] (smaller in tests).
    max_bytes: u64,
    metrics: StateStoreMetrics,
    /// One write at a time: the periodic write may still be running when
    /// the last one at shutdown starts, and both use the same temporary file.
    writing: Mutex<()>,
    /// Failures are logged once when writes start failing and once when
    /// they work again, never once per attempt (docs/design.md §9.7).
    failing: AtomicBool,
    capped: AtomicBool,
}

impl StateStore {
    /// Use `dir` (created when missing) after proving that a file can be
    /// created, written, synced and removed there.
    pub fn open(dir: &Path, metrics: StateStoreMetrics) -> Result<StateStore, StateStoreError> {
        StateStore::with_cap(dir, metrics, MAX_CLUSTERS)
    }

    /// [`StateStore::open`] with another cap on the clusters kept (tests).
    pub fn with_cap(
        dir: &Path,
        metrics: StateStoreMetrics,
        max_clusters: usize,
    ) -> Result<StateStore, StateStoreError> {
        match fs::metadata(dir) {
            Ok(meta) if !meta.is_dir() => {
                return Err(StateStoreError::NotADirectory {
                    dir: dir.to_path_buf(),
                });
            }
            Ok(_) => {}
            Err(_) => fs::create_dir_all(dir).map_err(|cause| StateStoreError::CreateDir {
                dir: dir.to_path_buf(),
                cause,
            })?,
        }
        let probe = dir.join(".write-probe");
        let written = File::create(&probe)
            .and_then(|mut f| {
                f.write_all(b"hcp-flow")?;
                f.sync_all()
            })
            .and_then(|()| fs::remove_file(&probe));
        if let Err(cause) = written {
            let _ = fs::remove_file(&probe);
            return Err(StateStoreError::NotWritable {
                dir: dir.to_path_buf(),
                cause,
            });
        }
        Ok(StateStore {
            dir: dir.to_path_buf(),
            path: dir.join(FILE_NAME),
            max_clusters,
            max_bytes: MAX_DECOMPRESSED_BYTES,
            metrics,
            writing: Mutex::new(()),
            failing: AtomicBool::new(false),
            capped: AtomicBool::new(false),
        })
    }

    /// The state file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Read what the last run wrote. Never fails: anything unusable is
    /// logged with its cause, moved aside, and the exporter starts empty.
    pub fn load(&self) -> (Memory, Restored) {
        let loaded = match fs::metadata(&self.path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return (Memory::default(), Restored::Nothing);
            }
            _ => self.read(),
        };
        match loaded {
            Ok((memory, written_at, dropped)) => {
                if dropped > 0 {
                    tracing::warn!(
                        path = %self.path.display(),
                        kept = memory.len(),
                        dropped,
                        "the state file holds more clusters than the cap; the rest start with fresh observed times"
                    );
                }
                self.metrics.clusters.set(gauge_value(memory.len()));
                let restored = Restored::Loaded {
                    clusters: memory.len(),
                    written_at,
                    dropped,
                };
                (memory, restored)
            }
            Err(error) => {
                let moved_to = self.dir.join(IGNORED_FILE_NAME);
                let moved_to = match fs::rename(&self.path, &moved_to) {
                    Ok(()) => Some(moved_to),
                    Err(rename) => {
                        tracing::warn!(
                            path = %self.path.display(),
                            error = %rename,
                            "cannot move the unusable state file aside; the next write replaces it"
                        );
                        None
                    }
                };
                tracing::warn!(
                    error = %crate::sources::health::cause_chain(&error),
                    moved_to = %moved_to.as_deref().map(|p| p.display().to_string()).unwrap_or_default(),
                    "state file ignored: starting without remembered times (observed times restart now)"
                );
                (Memory::default(), Restored::Ignored { error, moved_to })
            }
        }
    }

    /// Two streaming passes: what the file is, then, if it is this format
    /// and version, its content. Nothing holds the whole file in memory, and
    /// at most [`MAX_CLUSTERS`] clusters are kept while parsing.
    fn read(&self) -> Result<(Memory, Timestamp, usize), LoadError> {
        let header: Header = self.parse()?;
        if header.format != FORMAT || header.version != u64::from(VERSION) {
            return Err(LoadError::OtherVersion {
                path: self.path.clone(),
                format: header.format,
                version: header.version,
            });
        }
        let envelope: Envelope = self.parse()?;
        let total = envelope.clusters.total;
        let clusters: BTreeMap<String, ClusterMemory> = envelope
            .clusters
            .kept
            .into_iter()
            .take(self.max_clusters)
            .collect();
        let dropped = total.saturating_sub(clusters.len());
        Ok((Memory { clusters }, envelope.written_at, dropped))
    }

    /// One pass over the decompressed file, bounded in size. An I/O error
    /// while parsing comes from the gzip layer: not gzip, or cut short.
    fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, LoadError> {
        let file = File::open(&self.path).map_err(|cause| LoadError::Read {
            path: self.path.clone(),
            cause,
        })?;
        let mut limited = GzDecoder::new(BufReader::new(file)).take(self.max_bytes + 1);
        let parsed = serde_json::from_reader(BufReader::new(&mut limited));
        match parsed {
            Ok(value) => Ok(value),
            Err(_) if limited.limit() == 0 => Err(LoadError::TooLarge {
                path: self.path.clone(),
                max: self.max_bytes,
            }),
            Err(e) if e.is_io() => Err(LoadError::Decompress {
                path: self.path.clone(),
                cause: io::Error::from(e),
            }),
            Err(cause) => Err(LoadError::Corrupt {
                path: self.path.clone(),
                cause,
            }),
        }
    }

    /// Write `snapshot` as the new state file, atomically: a crash or a
    /// failure at any point leaves the previous file whole. Returns how many
    /// clusters were written. Failures are counted and logged here (once
    /// when writes start failing); the caller only keeps the memory dirty.
    pub fn save(
        &self,
        snapshot: &MemorySnapshot,
        now: Timestamp,
    ) -> Result<usize, StateStoreError> {
        let clusters = &snapshot.clusters[..snapshot.clusters.len().min(self.max_clusters)];
        if clusters.len() < snapshot.clusters.len() {
            if !self.capped.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    clusters = snapshot.clusters.len(),
                    cap = self.max_clusters,
                    "more clusters than the state store keeps; those beyond the cap will show fresh observed times after a restart"
                );
            }
        } else {
            self.capped.store(false, Ordering::Relaxed);
        }
        let envelope = EnvelopeOut {
            format: FORMAT,
            version: VERSION,
            written_at: now,
            exporter_version: env!("CARGO_PKG_VERSION"),
            clusters,
        };
        let result = self.replace(|out| {
            let mut gz = GzEncoder::new(out, Compression::fast());
            serde_json::to_writer(&mut gz, &envelope).map_err(io::Error::other)?;
            gz.finish()?;
            Ok(())
        });
        match result {
            Ok(()) => {
                self.metrics.count(WriteResult::ok);
                self.metrics
                    .last_write
                    .set(now.as_millisecond() as f64 / 1000.0);
                self.metrics.clusters.set(gauge_value(clusters.len()));
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!(path = %self.path.display(), "the state file is written again");
                }
                Ok(clusters.len())
            }
            Err(error) => {
                self.metrics.count(WriteResult::error);
                let chain = crate::sources::health::cause_chain(&error);
                if self.failing.swap(true, Ordering::Relaxed) {
                    tracing::debug!(error = %chain, "the state file still cannot be written");
                } else {
                    tracing::warn!(
                        error = %chain,
                        "the state file cannot be written; the previous one is kept and the write is retried"
                    );
                }
                Err(error)
            }
        }
    }

    /// Replace the state file with what `body` writes, through a temporary
    /// file in the same directory (a rename is atomic only within one file
    /// system): written, fsynced, renamed over the old file, and the
    /// directory fsynced so the rename itself survives a power loss.
    fn replace(
        &self,
        body: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<(), StateStoreError> {
        let _one_writer = self.writing.lock();
        let tmp = self.dir.join(TEMP_FILE_NAME);
        let written = (|| {
            let file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)?;
            let mut out = BufWriter::new(file);
            body(&mut out)?;
            let file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
            file.sync_all()?;
            drop(file);
            fs::rename(&tmp, &self.path)
        })();
        if let Err(cause) = written {
            // Best effort: the temporary file is never read, and the next
            // write truncates it anyway.
            let _ = fs::remove_file(&tmp);
            return Err(StateStoreError::Write {
                path: self.path.clone(),
                cause,
            });
        }
        sync_dir(&self.dir).map_err(|cause| StateStoreError::Write {
            path: self.path.clone(),
            cause,
        })
    }
}

/// Make a rename in `dir` durable. File systems that cannot sync a
/// directory say so with `InvalidInput`/`Unsupported`; the rename stands
/// there as well as they allow.
fn sync_dir(dir: &Path) -> io::Result<()> {
    match File::open(dir).and_then(|d| d.sync_all()) {
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::InvalidInput | io::ErrorKind::Unsupported
            ) =>
        {
            Ok(())
        }
        other => other,
    }
}

fn gauge_value(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::model::{Hop, HopMemory, ObjectMemory, Phase, SloOutcome, Via};

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn memory_of(i: i64) -> ClusterMemory {
        ClusterMemory {
            created_at: Some(t(i)),
            completed_at: Some(t(i + 600)),
            failed_at: None,
            slo: Some(SloOutcome::Good),
            hops: vec![HopMemory {
                hop: Hop::ClustersService,
                phase: Phase::Ready,
                since: t(i + 590),
                since_observed: true,
                ready_at: Some(t(i + 590)),
                ended: true,
                objects: vec![ObjectMemory {
                    via: Via::Direct,
                    object: String::new(),
                    phase: Phase::Ready,
                    state: "ready".to_string(),
                    since: t(i + 590),
                }],
            }],
        }
    }

    fn remembered(n: i64) -> Remembered {
        let mut r = Remembered::default();
        r.restore(&Memory::default());
        for i in 0..n {
            r.update(&format!("c{i:03}"), Some(memory_of(i)));
        }
        r
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "hcp-flow-state-store-{}-{name}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    fn store(dir: &Path) -> StateStore {
        StateStore::open(dir, StateStoreMetrics::default()).unwrap()
    }

    #[test]
    fn what_is_saved_is_restored_exactly() {
        let dir = scratch("round-trip");
        let state = store(&dir);
        assert!(matches!(state.load().1, Restored::Nothing));
        let snapshot = remembered(3).snapshot();
        assert_eq!(state.save(&snapshot, t(1000)).unwrap(), 3);

        let again = store(&dir);
        let (memory, restored) = again.load();
        assert_eq!(memory, snapshot.to_memory());
        match restored {
            Restored::Loaded {
                clusters,
                written_at,
                dropped,
            } => assert_eq!((clusters, written_at, dropped), (3, t(1000), 0)),
            other => panic!("{other:?}"),
        }
        assert_eq!(state.metrics.writes(WriteResult::ok), 1);
        assert_eq!(again.metrics.clusters.get(), 3);
        // The file is the documented envelope, readable with zcat | jq.
        let mut text = String::new();
        GzDecoder::new(File::open(dir.join(FILE_NAME)).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["format"], FORMAT);
        assert_eq!(value["version"], VERSION);
        assert!(value["written_at"].is_string());
        assert!(value["clusters"]["c001"]["hops"].is_array());
        assert!(!dir.join(TEMP_FILE_NAME).exists());
        let _ = fs::remove_dir_all(&dir);
    }

    /// Writes `body`, gzip-compressed, as the state file.
    fn plant(dir: &Path, body: &[u8]) {
        let mut gz = GzEncoder::new(
            File::create(dir.join(FILE_NAME)).unwrap(),
            Compression::fast(),
        );
        gz.write_all(body).unwrap();
        gz.finish().unwrap();
    }

    #[test]
    fn a_corrupt_file_is_ignored_set_aside_and_replaced_by_the_next_write() {
        let dir = scratch("corrupt");
        let state = store(&dir);
        for (name, bytes) in [
            ("not gzip", b"{\"format\":\"hcp-flow/state\"".to_vec()),
            ("truncated gzip", {
                // A real state file, cut in the middle of its stream.
                state.save(&remembered(50).snapshot(), t(1)).unwrap();
                let mut all = fs::read(dir.join(FILE_NAME)).unwrap();
                all.truncate(all.len() / 2);
                all
            }),
        ] {
            fs::write(dir.join(FILE_NAME), &bytes).unwrap();
            let (memory, restored) = state.load();
            assert!(memory.is_empty(), "{name}");
            assert!(
                matches!(
                    restored,
                    Restored::Ignored {
                        error: LoadError::Decompress { .. },
                        ..
                    }
                ),
                "{name}: {restored:?}"
            );
        }
        for (name, body) in [
            ("not JSON", &b"\x00\x01garbage"[..]),
            ("cut JSON", br#"{"format":"hcp-flow/state","version":1,"clusters":{"c1":"#),
            ("wrong shape", br#"{"format":"hcp-flow/state","version":1,"written_at":"2026-01-01T00:00:00Z","clusters":{"c1":{"hops":[{"hop":"nowhere"}]}}}"#),
        ] {
            plant(&dir, body);
            let (memory, restored) = state.load();
            assert!(memory.is_empty(), "{name}");
            match restored {
                Restored::Ignored {
                    error: LoadError::Corrupt { .. },
                    moved_to: Some(moved),
                } => assert_eq!(moved, dir.join(IGNORED_FILE_NAME)),
                other => panic!("{name}: {other:?}"),
            }
            assert!(!dir.join(FILE_NAME).exists(), "{name}: set aside");
            assert!(dir.join(IGNORED_FILE_NAME).exists(), "{name}: kept to inspect");
        }
        // The store keeps working: the next write is a good file.
        state.save(&remembered(1).snapshot(), t(5)).unwrap();
        assert_eq!(state.load().0.len(), 1);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_too_large_when_decompressed_is_ignored_without_reading_it_all() {
        let dir = scratch("too-large");
        let mut state = store(&dir);
        state.save(&remembered(20).snapshot(), t(1)).unwrap();
        state.max_bytes = 1024;
        match state.load() {
            (
                memory,
                Restored::Ignored {
                    error: LoadError::TooLarge { max, .. },
                    ..
                },
            ) => {
                assert!(memory.is_empty());
                assert_eq!(max, 1024);
            }
            other => panic!("{other:?}"),
        }
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_of_another_version_or_format_is_ignored() {
        let dir = scratch("version");
        let state = store(&dir);
        for (body, format, version) in [
            (
                r#"{"format":"hcp-flow/state","version":2,"written_at":"2026-01-01T00:00:00Z","clusters":{"c1":{"something":"new"}}}"#,
                "hcp-flow/state",
                2,
            ),
            (
                r#"{"format":"other-tool","version":1,"clusters":{}}"#,
                "other-tool",
                1,
            ),
        ] {
            plant(&dir, body.as_bytes());
            let (memory, restored) = state.load();
            assert!(memory.is_empty());
            match restored {
                Restored::Ignored {
                    error:
                        LoadError::OtherVersion {
                            format: f,
                            version: v,
                            ..
                        },
                    ..
                } => assert_eq!((f.as_str(), v), (format, version)),
                other => panic!("{other:?}"),
            }
        }
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failed_write_leaves_the_previous_file_whole() {
        let dir = scratch("atomic");
        let state = store(&dir);
        let first = remembered(2).snapshot();
        state.save(&first, t(1)).unwrap();

        // Fails half-way through the body, as a full disk would.
        let failed = state.replace(|out| {
            out.write_all(b"\x1f\x8b partial")?;
            Err(io::Error::other("no space left on device"))
        });
        let error = failed.unwrap_err();
        assert!(
            crate::sources::health::cause_chain(&error).contains("no space left"),
            "{error}"
        );
        assert!(
            !dir.join(TEMP_FILE_NAME).exists(),
            "the partial file is removed"
        );
        assert_eq!(state.load().0, first.to_memory());

        // The temporary file cannot even be created.
        fs::create_dir(dir.join(TEMP_FILE_NAME)).unwrap();
        assert!(state.save(&remembered(5).snapshot(), t(2)).is_err());
        assert_eq!(state.metrics.writes(WriteResult::error), 1);
        assert_eq!(state.load().0, first.to_memory());
        fs::remove_dir(dir.join(TEMP_FILE_NAME)).unwrap();
        state.save(&remembered(5).snapshot(), t(3)).unwrap();
        assert_eq!(state.load().0.len(), 5);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_state_dir_that_cannot_be_a_directory_is_an_error_at_open() {
        let dir = scratch("not-a-dir");
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("plain-file");
        fs::write(&file, b"x").unwrap();
        let error = StateStore::open(&file, StateStoreMetrics::default()).unwrap_err();
        assert!(
            matches!(error, StateStoreError::NotADirectory { .. }),
            "{error}"
        );
        let error =
            StateStore::open(&file.join("below"), StateStoreMetrics::default()).unwrap_err();
        assert!(
            matches!(error, StateStoreError::CreateDir { .. }),
            "{error}"
        );
        // A missing directory is created.
        let fresh = dir.join("a/b");
        store(&fresh);
        assert!(fresh.is_dir());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn deleted_clusters_leave_the_memory_and_only_changes_make_it_dirty() {
        assert!(!Remembered::default().enabled(), "off until restored");
        let mut r = remembered(3);
        assert!(r.enabled());
        assert!(r.dirty());
        let snapshot = r.snapshot();
        r.saved(snapshot.generation);
        assert!(!r.dirty());
        // The same memory again is no change.
        r.update("c001", Some(memory_of(1)));
        assert!(!r.dirty());
        // A removed cluster is forgotten.
        r.update("c001", None);
        assert!(r.dirty());
        assert!(r.get("c001").is_none());
        r.forget("c002");
        assert_eq!(r.len(), 1);
        // A change during a write keeps it dirty after that write.
        let during = r.snapshot();
        r.update("c000", Some(memory_of(7)));
        r.saved(during.generation);
        assert!(r.dirty());
    }

    #[test]
    fn restored_clusters_not_seen_after_the_first_sync_are_forgotten() {
        let mut r = Remembered::default();
        r.restore(&remembered(3).snapshot().to_memory());
        assert!(!r.dirty(), "what was just read is on disk");
        assert!(r.unconfirmed());
        // c001 is read again; c000 and c002 were deleted while down.
        r.update("c001", Some(memory_of(11)));
        let forgotten = r.forget_unseen(|id| id == "c001");
        assert_eq!(forgotten, 2);
        assert!(!r.unconfirmed());
        assert_eq!(r.len(), 1);
        assert_eq!(r.get("c001"), Some(&memory_of(11)));
        assert!(r.dirty());
    }

    #[test]
    fn the_cap_bounds_what_is_written_and_read() {
        let dir = scratch("cap");
        let state = StateStore::with_cap(&dir, StateStoreMetrics::default(), 2).unwrap();
        assert_eq!(state.save(&remembered(5).snapshot(), t(1)).unwrap(), 2);
        assert_eq!(state.load().0.len(), 2);
        // A file written with a larger cap is cut when read.
        store(&dir).save(&remembered(5).snapshot(), t(2)).unwrap();
        match state.load() {
            (memory, Restored::Loaded { dropped: 3, .. }) => assert_eq!(memory.len(), 2),
            other => panic!("{other:?}"),
        }
        let _ = fs::remove_dir_all(&dir);
    }
}
