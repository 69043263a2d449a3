//! What the lists said of each bundle the stream follows, kept for the
//! events that do not say it, and kept across restarts (docs/design/03-timeline-model.md
//! §3.10, §9.10).
//!
//! A status event names its bundle by id only. The lists name it as the
//! model keys it (its REST name and cluster id label), so an event of a
//! bundle no list has shown must be read by id. After a restart every
//! restored bundle was such a bundle until the reconciling list reached it,
//! and at 50,000 clusters those reads outnumbered the list's own pages and
//! held it back for more than twenty minutes. So what is known is written
//! beside the readings at shutdown and read back at start: a restored
//! bundle's event applies at once, as before the restart.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::{BundleMetadata, BundleStatus, CLUSTER_ID_LABEL, ResourceBundle};
use crate::model::Stamp;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// One bundle as the bundle-ids file keeps it (the state store writes and
/// reads the file, docs/design/03-timeline-model.md §3.10).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedBundle {
    pub id: String,
    /// The REST name: the model's key for the bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The Clusters Service cluster id label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<Timestamp>,
    /// The newest status sequence id applied; 0: none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sequence: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What the last list said of a bundle that a status event does not say
/// the same way: the REST name (an event's ObjectMeta may carry the
/// resource id as its name), the cluster id label, `created_at` (the
/// database's), `deleted_at`, and the newest status sequence id applied.
///
/// Kept for every followed bundle, some 25,000 at 10,000 clusters, so
/// compactly (docs/performance.md): the name and the cluster id share one
/// allocation, a name that begins with the cluster id (Clusters Service
/// names a cluster's bundles after it) keeps only the rest, and times are
/// stamps. Five strings per bundle cost the stream 8 MiB at 10,000
/// clusters.
#[derive(Debug, Clone, Default)]
pub struct Known {
    /// `name`, [`NAMES_SEP`], cluster id; a name that begins with the
    /// cluster id is stored as [`SAME_PREFIX`] and the rest.
    names: Box<str>,
    created_at: Option<Stamp>,
    deleted_at: Option<Stamp>,
    /// 0: none read.
    sequence: u64,
}

const NAMES_SEP: char = '\u{1f}';
const SAME_PREFIX: char = '\u{1e}';

impl Known {
    pub fn of(bundle: &ResourceBundle) -> Known {
        let name = bundle.name.as_deref().unwrap_or_default();
        let cluster = bundle
            .metadata
            .as_ref()
            .and_then(|m| m.labels.get(CLUSTER_ID_LABEL))
            .map(String::as_str)
            .unwrap_or_default();
        let names = match name.strip_prefix(cluster).filter(|_| !cluster.is_empty()) {
            Some(rest) => format!("{SAME_PREFIX}{rest}{NAMES_SEP}{cluster}"),
            None => format!("{name}{NAMES_SEP}{cluster}"),
        };
        let stamp = |t: Option<&str>| {
            t.and_then(|t| t.parse::<jiff::Timestamp>().ok())
                .map(Stamp::new)
        };
        Known {
            names: names.into_boxed_str(),
            created_at: stamp(bundle.created_at.as_deref()),
            deleted_at: stamp(bundle.deleted_at.as_deref().filter(|d| !d.is_empty())),
            sequence: bundle
                .status
                .as_ref()
                .and_then(BundleStatus::sequence)
                .unwrap_or(0),
        }
    }

    /// The REST name and the cluster id label, each when the list had one.
    fn names(&self) -> (Option<String>, Option<&str>) {
        let (name, cluster) = self
            .names
            .split_once(NAMES_SEP)
            .unwrap_or((&self.names, ""));
        let name = match name.strip_prefix(SAME_PREFIX) {
            Some(rest) => format!("{cluster}{rest}"),
            None => name.to_string(),
        };
        (
            (!name.is_empty()).then_some(name),
            (!cluster.is_empty()).then_some(cluster),
        )
    }

    /// The event's bundle completed with what the list said: the reading
    /// the list would give of this status.
    pub fn fill(&self, bundle: &mut ResourceBundle) {
        let (name, cluster) = self.names();
        if name.is_some() {
            bundle.name = name;
        }
        if let Some(id) = cluster {
            bundle
                .metadata
                .get_or_insert_with(BundleMetadata::default)
                .labels
                .insert(CLUSTER_ID_LABEL.to_string(), id.to_string());
        }
        if let Some(created) = self.created_at {
            bundle.created_at = Some(created.timestamp().to_string());
        }
        if bundle.deleted_at.is_none() {
            bundle.deleted_at = self.deleted_at.map(|d| d.timestamp().to_string());
        }
    }

    /// Whether a status with `sequence` is older than one already applied
    /// (an event queued while a list read a newer state).
    pub fn is_stale(&self, sequence: Option<u64>) -> bool {
        matches!(sequence, Some(s) if self.sequence != 0 && s < self.sequence)
    }
}

impl Known {
    /// What a bundle-ids file says of one bundle.
    pub fn of_saved(saved: &SavedBundle) -> Known {
        let mut listed = ResourceBundle {
            id: String::new(),
            name: saved.name.clone(),
            consumer_name: None,
            created_at: saved.created_at.map(|t| t.to_string()),
            updated_at: None,
            deleted_at: saved.deleted_at.map(|t| t.to_string()),
            metadata: None,
            manifests: None,
            status: None,
        };
        if let Some(cluster) = &saved.cluster {
            listed
                .metadata
                .get_or_insert_with(BundleMetadata::default)
                .labels
                .insert(CLUSTER_ID_LABEL.to_string(), cluster.clone());
        }
        Known {
            sequence: saved.sequence,
            ..Known::of(&listed)
        }
    }

    /// What a bundle-ids file keeps of it.
    pub fn saved(&self, id: &str) -> SavedBundle {
        let (name, cluster) = self.names();
        SavedBundle {
            id: id.to_string(),
            name,
            cluster: cluster.map(str::to_string),
            created_at: self.created_at.map(Stamp::timestamp),
            deleted_at: self.deleted_at.map(Stamp::timestamp),
            sequence: self.sequence,
        }
    }
}

/// What a status event's bundle is, by what the lists said of it.
pub enum Lookup {
    /// Filled as the list would show it.
    Filled,
    /// Older than a status already applied: skip it.
    Stale,
    /// Never listed: read it by id.
    Unknown,
}

/// The [`Known`] of every bundle the stream follows, by bundle id: one map
/// shared by the source, its supervised restarts and the exporter's
/// shutdown, which writes it (docs/design/03-timeline-model.md §3.10). The source is the
/// only one that changes it while it runs: the lock is never contended
/// but at shutdown, after the source stopped.
#[derive(Clone, Default)]
pub struct KnownBundles {
    by_id: Arc<Mutex<HashMap<Box<str>, Known>>>,
}

impl std::fmt::Debug for KnownBundles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KnownBundles")
            .field("bundles", &self.len())
            .finish()
    }
}

impl KnownBundles {
    /// Complete `bundle` (its status at `sequence`) with what the lists said.
    pub fn fill(&self, bundle: &mut ResourceBundle, sequence: Option<u64>) -> Lookup {
        match self.by_id.lock().get(bundle.id.as_str()) {
            Some(known) if known.is_stale(sequence) => Lookup::Stale,
            Some(known) => {
                known.fill(bundle);
                Lookup::Filled
            }
            None => Lookup::Unknown,
        }
    }

    pub fn remember(&self, bundle: &ResourceBundle) {
        self.by_id
            .lock()
            .insert(bundle.id.as_str().into(), Known::of(bundle));
    }

    pub fn forget(&self, id: &str) {
        self.by_id.lock().remove(id);
    }

    /// Forget many at once (one lock).
    pub fn forget_all<'a>(&self, ids: impl IntoIterator<Item = &'a String>) {
        let mut by_id = self.by_id.lock();
        for id in ids {
            by_id.remove(id.as_str());
        }
    }

    /// The ids among `ids` no list has shown.
    pub fn unknown_of(&self, ids: impl IntoIterator<Item = String>) -> Vec<String> {
        let by_id = self.by_id.lock();
        ids.into_iter()
            .filter(|id| !by_id.contains_key(id.as_str()))
            .collect()
    }

    /// Keep only the bundles `keep` says still exist: after a restart, what
    /// the last run knew of bundles deleted while it was down.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.by_id.lock().retain(|id, _| keep(id));
    }

    pub fn len(&self) -> usize {
        self.by_id.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.lock().is_empty()
    }

    /// Add what a bundle-ids file said; what the lists said since wins.
    pub fn restore(&self, saved: impl IntoIterator<Item = SavedBundle>) -> usize {
        let mut by_id = self.by_id.lock();
        let mut added = 0;
        for bundle in saved {
            if bundle.id.is_empty() || by_id.contains_key(bundle.id.as_str()) {
                continue;
            }
            by_id.insert(bundle.id.as_str().into(), Known::of_saved(&bundle));
            added += 1;
        }
        added
    }

    /// Every known bundle as a bundle-ids file keeps it, holding the lock
    /// while `write` runs: call it when the source has stopped.
    pub fn with_saved<T>(
        &self,
        write: impl FnOnce(&mut dyn Iterator<Item = SavedBundle>) -> T,
    ) -> T {
        let by_id = self.by_id.lock();
        let mut saved = by_id.iter().map(|(id, known)| known.saved(id));
        write(&mut saved)
    }

    /// The ids known.
    #[cfg(test)]
    pub fn ids(&self) -> std::collections::HashSet<String> {
        self.by_id.lock().keys().map(|id| id.to_string()).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Every way a name and cluster label are kept: a name after its
    /// cluster, a pool's, another name, none, no label.
    const NAME_SHAPES: [(Option<&str>, Option<&str>); 5] = [
        (Some("c1"), Some("c1")),
        (Some("c1-np-0"), Some("c1")),
        (Some("work-7"), Some("c1")),
        (None, Some("c1")),
        (Some("work-7"), None),
    ];

    fn bundle(name: Option<&str>, cluster: Option<&str>) -> ResourceBundle {
        let mut labels = BTreeMap::new();
        if let Some(c) = cluster {
            labels.insert(CLUSTER_ID_LABEL.to_string(), c.to_string());
        }
        ResourceBundle {
            id: "55c61e54-a3f6-563d-9fec-b1fe297bdfdb".to_string(),
            name: name.map(str::to_string),
            consumer_name: None,
            created_at: Some("2026-11-26T10:00:00.123456Z".to_string()),
            updated_at: None,
            deleted_at: None,
            metadata: Some(BundleMetadata {
                labels,
                ..BundleMetadata::default()
            }),
            manifests: None,
            status: None,
        }
    }

    /// What the list said comes back whole, however it was stored: a name
    /// after its cluster, another name, none, no label.
    #[test]
    fn a_known_bundle_fills_an_event_as_the_list_said() {
        for (name, cluster) in NAME_SHAPES {
            let listed = bundle(name, cluster);
            let known = Known::of(&listed);
            let mut event = bundle(Some("55c61e54-a3f6-563d-9fec-b1fe297bdfdb"), None);
            event.created_at = Some("2026-11-26T11:00:00Z".to_string());
            known.fill(&mut event);
            assert_eq!(
                event.name.as_deref(),
                name.or(Some("55c61e54-a3f6-563d-9fec-b1fe297bdfdb")),
                "{name:?} {cluster:?}"
            );
            assert_eq!(
                event
                    .metadata
                    .as_ref()
                    .and_then(|m| m.labels.get(CLUSTER_ID_LABEL))
                    .map(String::as_str),
                cluster
            );
            let created: jiff::Timestamp = event
                .created_at
                .as_deref()
                .and_then(|t| t.parse().ok())
                .expect("a time");
            assert_eq!(
                created,
                "2026-11-26T10:00:00.123456Z"
                    .parse::<jiff::Timestamp>()
                    .expect("a time")
            );
        }
    }

    /// A bundle as the file keeps it comes back as the list said it, for
    /// every shape of name and label, with its sequence.
    #[test]
    fn a_saved_bundle_reads_back_as_the_list_said() {
        for (name, cluster) in NAME_SHAPES {
            let mut listed = bundle(name, cluster);
            listed.deleted_at = Some("2026-11-26T12:00:00Z".to_string());
            listed.status = Some(BundleStatus {
                sequence_id: Some(serde_json::Value::String("42".to_string())),
                ..BundleStatus::default()
            });
            let known = Known::of(&listed);
            let saved = known.saved(&listed.id);
            let back = Known::of_saved(&saved);
            assert_eq!(back.saved(&listed.id), saved, "{name:?} {cluster:?}");
            assert_eq!(saved.sequence, 42);
            assert!(back.is_stale(Some(41)) && !back.is_stale(Some(42)));
            let (mut from_known, mut from_back) = (
                bundle(Some("55c61e54-a3f6-563d-9fec-b1fe297bdfdb"), None),
                bundle(Some("55c61e54-a3f6-563d-9fec-b1fe297bdfdb"), None),
            );
            known.fill(&mut from_known);
            back.fill(&mut from_back);
            assert_eq!(
                format!("{from_known:?}"),
                format!("{from_back:?}"),
                "{name:?} {cluster:?}"
            );
        }
    }

    /// What the lists said since the restart is not overwritten by the file.
    #[test]
    fn a_restore_keeps_what_the_lists_said_since() {
        let bundles = KnownBundles::default();
        let listed = bundle(Some("c1-np-0"), Some("c1"));
        bundles.remember(&listed);
        let mut older = Known::of(&bundle(Some("elsewhere"), Some("c9"))).saved(&listed.id);
        older.sequence = 7;
        let other = Known::of(&bundle(Some("c2"), Some("c2"))).saved("another-id");
        assert_eq!(bundles.restore([older, other]), 1);
        let mut event = bundle(None, None);
        assert!(matches!(bundles.fill(&mut event, Some(1)), Lookup::Filled));
        assert_eq!(event.name.as_deref(), Some("c1-np-0"));
        assert_eq!(bundles.len(), 2);
        bundles.retain(|id| id != "another-id");
        assert_eq!(
            bundles.ids(),
            std::collections::HashSet::from([listed.id.clone()])
        );
        assert_eq!(
            bundles.unknown_of(["another-id".to_string(), listed.id.clone()]),
            vec!["another-id".to_string()]
        );
    }
}
