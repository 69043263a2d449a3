//! The state file's envelope: `{format, version, written_at,
//! exporter_version, clusters}`, gzip-compressed JSON, read in two passes
//! (what the file is, then its content) with the clusters capped.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use serde::{Deserialize, Serialize, Serializer};

use crate::model::ClusterMemory;

/// The `format` field of the envelope: what the file is.
pub const FORMAT: &str = "hcp-flow/state";
/// The `version` field this exporter writes. Version 2 added each
/// cluster's deletion; a version-1 file is its subset and is read as it is
/// (its clusters have none). A file of any other version is ignored (and
/// set aside), never half-read.
pub const VERSION: u32 = 2;
/// Versions this exporter reads.
pub const READS: [u32; 2] = [1, 2];
/// At most this many clusters are written and read (docs/design/03-timeline-model.md §3.8):
/// ten times the fleet one instance is sized for, so a runaway can neither
/// fill the volume nor make a start take minutes.
pub const MAX_CLUSTERS: usize = 100_000;
/// A file that decompresses to more than this is not one this exporter
/// wrote (about 1 KB per cluster, so about 100 MB at [`MAX_CLUSTERS`]).
pub(super) const MAX_DECOMPRESSED_BYTES: u64 = 512 << 20;

/// The envelope as written: borrowed, so a write copies nothing.
#[derive(Serialize)]
pub(super) struct EnvelopeOut<'a> {
    pub(super) format: &'static str,
    pub(super) version: u32,
    pub(super) written_at: Timestamp,
    pub(super) exporter_version: &'static str,
    #[serde(serialize_with = "clusters_map")]
    pub(super) clusters: &'a [(String, Arc<ClusterMemory>)],
}

fn clusters_map<S: Serializer>(
    clusters: &&[(String, Arc<ClusterMemory>)],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_map(clusters.iter().map(|(id, m)| (id, &**m)))
}

/// The first read: what the file is, whatever else it holds.
#[derive(Deserialize)]
pub(super) struct Header {
    pub(super) format: String,
    pub(super) version: u64,
}

/// The second read, once the version is known to be this one.
#[derive(Deserialize)]
pub(super) struct Envelope {
    pub(super) written_at: Timestamp,
    pub(super) clusters: CappedClusters,
}

/// The clusters of a file, at most [`MAX_CLUSTERS`] of them parsed: the
/// rest are skipped unparsed and only counted, so an oversized file cannot
/// take the memory a full parse would.
pub(super) struct CappedClusters {
    pub(super) kept: BTreeMap<String, ClusterMemory>,
    pub(super) total: usize,
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
