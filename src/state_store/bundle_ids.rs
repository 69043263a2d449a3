//! The ids of the bundles Maestro's stream followed, with what the lists
//! said of each, kept beside the readings (docs/design/03-timeline-model.md §3.10).
//!
//! The readings keep what the model shows, keyed as the model keys a
//! bundle: by its name. A status event names its bundle by id only, so a
//! restarted exporter could apply no event of a restored bundle until its
//! reconciling list had shown it again, and read each by id meanwhile. This
//! file gives the stream back what it knew.
//!
//! One file, `bundle-ids.json.gz`: gzip-compressed JSON, an envelope
//! `{format: "hcp-flow/bundle-ids", version: 1, written_at, source,
//! bundles: [{id, name?, cluster?, created_at?, deleted_at?, sequence?}]}`.
//! Written at shutdown only, once the source has stopped: while it runs,
//! writing would hold the map the stream's events read. What it says of a
//! bundle never changes but its sequence and deletion mark, so a file older
//! than the readings (the last run was killed) is still right for the
//! bundles it names and merely misses the newer ones, which are read by id
//! as before. Never fatal when reading: a file that cannot be used is set
//! aside and ignored.

use std::path::PathBuf;

use flate2::Compression;
use flate2::write::GzEncoder;
use jiff::Timestamp;
use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Serialize, Serializer};

use super::{LoadError, StateStore, StateStoreError};
pub use crate::sources::maestro::known::SavedBundle;

pub const BUNDLE_IDS_FILE_NAME: &str = "bundle-ids.json.gz";
pub const BUNDLE_IDS_IGNORED_FILE_NAME: &str = "bundle-ids.json.gz.ignored";
const BUNDLE_IDS_TEMP_FILE_NAME: &str = ".bundle-ids.json.gz.tmp";
pub const BUNDLE_IDS_FORMAT: &str = "hcp-flow/bundle-ids";
pub const BUNDLE_IDS_VERSION: u32 = 1;

/// The bundles, serialised one at a time from the iterator.
struct Bundles<'i>(std::cell::RefCell<&'i mut dyn Iterator<Item = SavedBundle>>);

impl Serialize for Bundles<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut bundles = self.0.borrow_mut();
        serializer.collect_seq(&mut **bundles)
    }
}

#[derive(Serialize)]
struct BundleIdsOut<'a, 'i> {
    format: &'static str,
    version: u32,
    written_at: Timestamp,
    source: &'a str,
    bundles: Bundles<'i>,
}

/// What was read back from the bundle-ids file.
#[derive(Debug, Clone, PartialEq)]
pub struct RestoredBundleIds {
    pub written_at: Timestamp,
    pub bundles: usize,
}

/// The envelope, its header checked as it comes and each bundle handed on.
struct Envelope<'f> {
    source: &'f str,
    deliver: &'f mut dyn FnMut(SavedBundle),
    count: usize,
}

/// What the envelope said of itself.
#[derive(Default)]
struct Header {
    format: Option<String>,
    version: Option<u64>,
    written_at: Option<Timestamp>,
    source: Option<String>,
}

impl<'de> Visitor<'de> for &mut Envelope<'_> {
    type Value = Header;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the bundle-ids envelope")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Header, A::Error> {
        let mut header = Header::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "format" => header.format = Some(map.next_value()?),
                "version" => header.version = Some(map.next_value()?),
                "written_at" => header.written_at = Some(map.next_value()?),
                "source" => header.source = Some(map.next_value()?),
                // Written after the header: a file of another format or
                // source is refused before any bundle is taken.
                "bundles" => {
                    if header.format.as_deref() != Some(BUNDLE_IDS_FORMAT)
                        || header.version != Some(BUNDLE_IDS_VERSION.into())
                        || header.source.as_deref() != Some(self.source)
                    {
                        return Err(de::Error::custom(
                            "bundles before a matching format, version and source",
                        ));
                    }
                    map.next_value_seed(&mut *self)?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(header)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Header, A::Error> {
        while let Some(bundle) = seq.next_element::<SavedBundle>()? {
            (self.deliver)(bundle);
            self.count += 1;
        }
        Ok(Header::default())
    }
}

impl<'de> de::DeserializeSeed<'de> for &mut Envelope<'_> {
    type Value = Header;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Header, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl StateStore {
    fn bundle_ids_path(&self) -> PathBuf {
        self.dir.join(BUNDLE_IDS_FILE_NAME)
    }

    /// Write `bundles` as the new bundle-ids file of `source`, atomically.
    pub fn save_bundle_ids(
        &self,
        source: &str,
        bundles: &mut dyn Iterator<Item = SavedBundle>,
        now: Timestamp,
    ) -> Result<(), StateStoreError> {
        let out = BundleIdsOut {
            format: BUNDLE_IDS_FORMAT,
            version: BUNDLE_IDS_VERSION,
            written_at: now,
            source,
            bundles: Bundles(std::cell::RefCell::new(bundles)),
        };
        let path = self.bundle_ids_path();
        self.replace_file(&path, BUNDLE_IDS_TEMP_FILE_NAME, |w| {
            let mut gz = GzEncoder::new(w, Compression::fast());
            super::persist::write_json(&mut gz, &out)?;
            gz.finish()?;
            Ok(())
        })
        .inspect_err(|error| {
            tracing::warn!(
                error = %crate::sources::health::cause_chain(error),
                "the bundle-ids file cannot be written; the previous one is kept"
            );
        })
    }

    /// Read the bundle-ids file of `source`, handing each bundle to
    /// `deliver`. `None` when there is none, or it cannot be used (set
    /// aside, with one warning; what was handed on before the damage is
    /// right, as every bundle is read whole).
    pub fn load_bundle_ids(
        &self,
        source: &str,
        deliver: &mut dyn FnMut(SavedBundle),
    ) -> Option<RestoredBundleIds> {
        let path = self.bundle_ids_path();
        let mut envelope = Envelope {
            source,
            deliver,
            count: 0,
        };
        match self.read_bundle_ids(&path, &mut envelope) {
            Ok(header) => Some(RestoredBundleIds {
                written_at: header.written_at.unwrap_or(Timestamp::UNIX_EPOCH),
                bundles: envelope.count,
            }),
            Err(LoadError::Missing { .. }) => None,
            Err(error) => {
                self.set_aside(&path, BUNDLE_IDS_IGNORED_FILE_NAME, &error);
                None
            }
        }
    }

    fn read_bundle_ids(
        &self,
        path: &std::path::Path,
        envelope: &mut Envelope<'_>,
    ) -> Result<Header, LoadError> {
        let header = self.parse_file(path, |json| {
            de::Deserializer::deserialize_map(json, &mut *envelope)
        })?;
        if header.format.as_deref() == Some(BUNDLE_IDS_FORMAT)
            && header.version == Some(BUNDLE_IDS_VERSION.into())
            && header.source.as_deref() == Some(envelope.source)
        {
            Ok(header)
        } else if header.source.is_some() && header.source.as_deref() != Some(envelope.source) {
            Err(LoadError::OtherSource {
                path: path.to_path_buf(),
                found: header.source.unwrap_or_default(),
                wanted: envelope.source.to_string(),
            })
        } else {
            Err(LoadError::OtherVersion {
                path: path.to_path_buf(),
                format: header.format.unwrap_or_default(),
                version: header.version.unwrap_or_default(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::io::Read;

    use flate2::read::GzDecoder;

    use super::*;
    use crate::state_store::StateStoreMetrics;

    fn store(dir: &std::path::Path) -> StateStore {
        StateStore::open(dir, StateStoreMetrics::default()).expect("a state directory")
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("hcp-flow-bundle-ids-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        dir
    }

    fn bundle(id: &str, sequence: u64) -> SavedBundle {
        SavedBundle {
            id: id.to_string(),
            name: Some(format!("{id}-name")),
            cluster: sequence.is_multiple_of(2).then(|| "c1".to_string()),
            created_at: Some(Timestamp::from_second(1_800_000_000).expect("a time")),
            deleted_at: None,
            sequence,
        }
    }

    fn load(state: &StateStore, source: &str) -> (Option<RestoredBundleIds>, Vec<SavedBundle>) {
        let mut read = Vec::new();
        let restored = state.load_bundle_ids(source, &mut |b| read.push(b));
        (restored, read)
    }

    #[test]
    fn what_is_written_reads_back_whole() {
        let dir = scratch("round-trip");
        let state = store(&dir);
        let written: Vec<SavedBundle> = (0..5).map(|i| bundle(&format!("id-{i}"), i)).collect();
        let now = Timestamp::from_second(1_800_000_600).expect("a time");
        state
            .save_bundle_ids("maestro", &mut written.clone().into_iter(), now)
            .expect("written");
        let (restored, read) = load(&state, "maestro");
        assert_eq!(
            restored,
            Some(RestoredBundleIds {
                written_at: now,
                bundles: 5
            })
        );
        assert_eq!(read, written);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn no_file_is_nothing_and_another_source_or_garbage_is_set_aside() {
        let dir = scratch("refused");
        let state = store(&dir);
        assert_eq!(load(&state, "maestro"), (None, Vec::new()));
        let now = Timestamp::from_second(1_800_000_600).expect("a time");
        state
            .save_bundle_ids("other", &mut std::iter::once(bundle("a", 1)), now)
            .expect("written");
        assert_eq!(load(&state, "maestro"), (None, Vec::new()));
        assert!(dir.join(BUNDLE_IDS_IGNORED_FILE_NAME).exists());
        assert!(!dir.join(BUNDLE_IDS_FILE_NAME).exists());
        std::fs::write(dir.join(BUNDLE_IDS_FILE_NAME), b"not gzip").expect("written");
        assert_eq!(load(&state, "maestro"), (None, Vec::new()));
        assert!(!dir.join(BUNDLE_IDS_FILE_NAME).exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_cut_short_keeps_the_bundles_read_before_the_cut() {
        let dir = scratch("cut");
        let state = store(&dir);
        let now = Timestamp::from_second(1_800_000_600).expect("a time");
        let written: Vec<SavedBundle> = (0..200).map(|i| bundle(&format!("id-{i}"), i)).collect();
        state
            .save_bundle_ids("maestro", &mut written.clone().into_iter(), now)
            .expect("written");
        let mut json = String::new();
        GzDecoder::new(File::open(dir.join(BUNDLE_IDS_FILE_NAME)).expect("the file"))
            .read_to_string(&mut json)
            .expect("gzip");
        let cut = &json[..json.len() / 2];
        let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
        std::io::Write::write_all(&mut gz, cut.as_bytes()).expect("compressed");
        std::fs::write(
            dir.join(BUNDLE_IDS_FILE_NAME),
            gz.finish().expect("compressed"),
        )
        .expect("written");
        let (restored, read) = load(&state, "maestro");
        assert_eq!(restored, None, "a damaged file is not used as a whole");
        assert!(
            !read.is_empty() && read.len() < written.len(),
            "{}",
            read.len()
        );
        assert_eq!(read[..], written[..read.len()]);
        assert!(dir.join(BUNDLE_IDS_IGNORED_FILE_NAME).exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
