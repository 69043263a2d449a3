//! Writing, loading and replacing the state file in its directory.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use jiff::Timestamp;
use parking_lot::Mutex;

use super::format::{
    Envelope, EnvelopeOut, FORMAT, Header, MAX_CLUSTERS, MAX_DECOMPRESSED_BYTES, READS, VERSION,
};
use super::memory::MemorySnapshot;
use super::metrics::{StateStoreMetrics, WriteResult, gauge_value};

/// The JSON reader [`StateStore::parse_file`] hands its parser.
pub(super) type StateJson<'r> =
    serde_json::Deserializer<serde_json::de::IoRead<BufReader<&'r mut dyn Read>>>;
use super::{LoadError, Restored, StateStoreError};
use crate::model::{ClusterMemory, Memory};

/// The file in the state directory.
pub const FILE_NAME: &str = "state.json.gz";
/// Where a file that could not be read is moved, so it can be inspected and
/// the next write does not destroy the evidence.
pub const IGNORED_FILE_NAME: &str = "state.json.gz.ignored";
const TEMP_FILE_NAME: &str = ".state.json.gz.tmp";
/// How often the memory is written when it changed.
pub const SAVE_INTERVAL: Duration = Duration::from_secs(15);

/// One state directory and its file.
#[derive(Debug)]
pub struct StateStore {
    pub(super) dir: PathBuf,
    path: PathBuf,
    max_clusters: usize,
    /// [`MAX_DECOMPRESSED_BYTES`] (smaller in tests).
    pub(super) max_bytes: u64,
    metrics: StateStoreMetrics,
    /// One write at a time: the periodic write may still be running when
    /// the last one at shutdown starts, and both use the same temporary file.
    writing: Mutex<()>,
    /// Failures are logged once when writes start failing and once when
    /// they work again, never once per attempt (docs/design/09-reading-the-upstreams.md §9.7).
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
        if header.format != FORMAT || !READS.iter().any(|v| u64::from(*v) == header.version) {
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

    /// One pass over the decompressed state file, bounded in size.
    fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, LoadError> {
        self.parse_file(&self.path, |json| {
            // As `serde_json::from_reader`: nothing may follow the value.
            let value = serde::Deserialize::deserialize(&mut *json)?;
            json.end()?;
            Ok(value)
        })
    }

    /// One pass of `parse` over the gzip-compressed JSON file at `path`,
    /// bounded to `max_bytes` decompressed: the errors every file of the
    /// directory maps alike. An I/O error while parsing comes from the gzip
    /// layer: not gzip, or cut short.
    pub(super) fn parse_file<T>(
        &self,
        path: &Path,
        parse: impl FnOnce(&mut StateJson<'_>) -> serde_json::Result<T>,
    ) -> Result<T, LoadError> {
        let file = match File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(LoadError::Missing {
                    path: path.to_path_buf(),
                });
            }
            Err(cause) => {
                return Err(LoadError::Read {
                    path: path.to_path_buf(),
                    cause,
                });
            }
        };
        let mut limited = GzDecoder::new(BufReader::new(file)).take(self.max_bytes + 1);
        let parsed = {
            let reader: &mut dyn Read = &mut limited;
            parse(&mut serde_json::Deserializer::from_reader(BufReader::new(
                reader,
            )))
        };
        match parsed {
            Ok(value) => Ok(value),
            Err(_) if limited.limit() == 0 => Err(LoadError::TooLarge {
                path: path.to_path_buf(),
                max: self.max_bytes,
            }),
            Err(e) if e.is_io() => Err(LoadError::Decompress {
                path: path.to_path_buf(),
                cause: io::Error::from(e),
            }),
            Err(cause) => Err(LoadError::Corrupt {
                path: path.to_path_buf(),
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
            write_json(&mut gz, &envelope)?;
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
        self.replace_file(&self.path, TEMP_FILE_NAME, body)
    }

    /// Replace `path` (in the state directory) with what `body` writes,
    /// through the temporary file `tmp_name` beside it, as
    /// [`StateStore::save`] does. One write at a time, whichever file.
    pub(super) fn replace_file(
        &self,
        path: &Path,
        tmp_name: &str,
        body: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<(), StateStoreError> {
        let _one_writer = self.writing.lock();
        let tmp = self.dir.join(tmp_name);
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
            fs::rename(&tmp, path)
        })();
        if let Err(cause) = written {
            // Best effort: the temporary file is never read, and the next
            // write truncates it anyway.
            let _ = fs::remove_file(&tmp);
            return Err(StateStoreError::Write {
                path: path.to_path_buf(),
                cause,
            });
        }
        sync_dir(&self.dir).map_err(|cause| StateStoreError::Write {
            path: path.to_path_buf(),
            cause,
        })
    }

    /// Move an unusable file aside as `ignored_name` (kept to inspect), with
    /// one warning naming why.
    pub(super) fn set_aside(&self, path: &Path, ignored_name: &str, error: &LoadError) {
        let moved_to = self.dir.join(ignored_name);
        let moved = fs::rename(path, &moved_to).is_ok();
        tracing::warn!(
            error = %crate::sources::health::cause_chain(error),
            moved_to = %if moved { moved_to.display().to_string() } else { String::new() },
            "file in the state directory ignored"
        );
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

/// Serialise `value` as JSON into `gz` through a buffer: serde_json writes
/// a token at a time, and each write into a gzip encoder runs the
/// compressor, which made a 12 MB readings file take longer than the
/// whole shutdown grace (docs/design/03-timeline-model.md §3.10).
pub(super) fn write_json(gz: &mut impl Write, value: &impl serde::Serialize) -> io::Result<()> {
    let mut buffered = BufWriter::with_capacity(JSON_BUFFER, gz);
    serde_json::to_writer(&mut buffered, value).map_err(io::Error::other)?;
    buffered.flush()
}

/// The buffer between the JSON serialiser and the gzip encoder.
const JSON_BUFFER: usize = 256 * 1024;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::model::{
        Day2OperationMemory, DeletionHopMemory, DeletionMemory, Hop, HopMemory, ObjectMemory,
        OperationKind, Phase, SloOutcome, Via,
    };
    use crate::state_store::Remembered;

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
                ended_via_maestro: false,
                objects: vec![ObjectMemory {
                    via: Via::Direct,
                    object: String::new(),
                    phase: Phase::Ready,
                    state: "ready".to_string(),
                    since: t(i + 590),
                }],
            }],
            // Every other cluster is being deleted: what version 2 adds.
            deletion: (i % 2 == 1).then(|| DeletionMemory {
                started_at: t(i + 900),
                started_observed: true,
                slo: None,
                hops: vec![DeletionHopMemory {
                    hop: Hop::HostedCluster,
                    started_at: t(i + 905),
                    done_at: Some(t(i + 960)),
                }],
            }),
            // Every third has a node pool being added.
            day2_operations: (i % 3 == 0)
                .then(|| Day2OperationMemory {
                    operation: OperationKind::NodePoolCreate,
                    subject: format!("np-{i}"),
                    started_at: t(i + 700),
                    started_observed: false,
                    slo: None,
                    uncounted: i % 2 == 0,
                })
                .into_iter()
                .collect(),
            // Every fourth has ended an operation: its history.
            history: (i % 4 == 0)
                .then(|| crate::model::EndedOperation {
                    operation: OperationKind::NodePoolCreate,
                    subject: Some(format!("np-{i}").into()),
                    started_at: t(i + 100),
                    ended_at: t(i + 400),
                    outcome: crate::model::Outcome::Succeeded,
                    slo: Some(SloOutcome::Good),
                    hops: vec![crate::model::EndedHop {
                        hop: Hop::NodePool,
                        started_at: t(i + 100),
                        ended_at: Some(t(i + 400)),
                    }],
                })
                .into_iter()
                .collect(),
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
                r#"{"format":"hcp-flow/state","version":3,"written_at":"2026-01-01T00:00:00Z","clusters":{"c1":{"something":"new"}}}"#,
                "hcp-flow/state",
                3,
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

    /// A file the previous version wrote (no deletions in it) is read as
    /// it is: its clusters come back, none of them deleting.
    #[test]
    fn a_version_1_file_is_read_and_its_clusters_have_no_deletion() {
        let dir = scratch("version-1");
        let state = store(&dir);
        let body = r#"{"format":"hcp-flow/state","version":1,"written_at":"2026-01-01T00:00:00Z","exporter_version":"0.2.0","clusters":{"c1":{"created_at":"2026-01-01T00:00:00Z","slo":"good"}}}"#;
        plant(&dir, body.as_bytes());
        let (memory, restored) = state.load();
        assert!(matches!(restored, Restored::Loaded { .. }), "{restored:?}");
        assert_eq!(memory.clusters["c1"].slo, Some(SloOutcome::Good));
        assert_eq!(memory.clusters["c1"].deletion, None);
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
