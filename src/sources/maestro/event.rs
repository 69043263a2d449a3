//! A bundle's status CloudEvent → the [`ResourceBundle`] the REST list
//! would show, so the stream and the list are read by the one
//! [`parse_bundle`](super::parse_bundle) (docs/design.md §9.10).
//!
//! Where sdk-go puts things (Maestro's `encodeResourceStatus` and sdk-go's
//! protobuf writer): the bundle's id in `ce-resourceid`, the instant of the
//! status in `ce-time`, the agent's order in `ce-sequenceid`, the consumer
//! in `ce-clustername`, the work's ObjectMeta as a JSON string in
//! `ce-metadata`, and the payload — `{manifestBundle?, conditions[],
//! resourceStatus[]}` — as JSON in `binary_data`. A `Deleted` condition
//! True means the bundle is gone (REST answers 404 for it).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::proto::{self, CloudEvent, Data, attr};
use super::{BundleMetadata, BundleStatus, CLUSTER_ID_LABEL, ResourceBundle};
use crate::model::Stamp;
use crate::sources::UnknownValue;
use crate::sources::http::sanitise;
use crate::views::work::ManifestCondition;
use crate::views::{WireCondition, null_default};

/// What one status event says.
#[derive(Debug)]
pub enum StatusEvent {
    /// The bundle as the list would show it, as far as the event tells;
    /// [`Known`] fills what it does not.
    Status {
        bundle: Box<ResourceBundle>,
        sequence: Option<u64>,
    },
    /// The bundle is gone.
    Deleted { id: String, sequence: Option<u64> },
}

/// The status payload, the fields read.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Payload {
    #[serde(default)]
    manifest_bundle: Option<PayloadBundle>,
    #[serde(default, deserialize_with = "null_default")]
    conditions: Vec<WireCondition>,
    #[serde(default, deserialize_with = "null_default")]
    resource_status: Vec<ManifestCondition>,
}

#[derive(Debug, Deserialize)]
struct PayloadBundle {
    #[serde(default)]
    manifests: Option<Box<serde_json::value::RawValue>>,
}

/// The ObjectMeta in `ce-metadata`, the fields read.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EventMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default, deserialize_with = "null_default")]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    creation_timestamp: Option<String>,
    #[serde(default)]
    deletion_timestamp: Option<String>,
}

/// Longest upstream text kept in an unknown value.
const MAX_VALUE: usize = 120;

fn unknown(out: &mut Vec<UnknownValue>, field: &'static str, value: &str) {
    let mut value = sanitise(value);
    if value.len() > MAX_VALUE {
        let mut end = MAX_VALUE;
        while !value.is_char_boundary(end) {
            end -= 1;
        }
        value.truncate(end);
    }
    out.push(UnknownValue { field, value });
}

/// Decode one event that is not a heartbeat. `None`: not a bundle status
/// hcp-flow can read, counted in `unknown` under the field that failed.
pub fn decode(event: &CloudEvent, out: &mut Vec<UnknownValue>) -> Option<StatusEvent> {
    if event.r#type != proto::STATUS_UPDATE_TYPE {
        unknown(out, "cloudevent.type", &event.r#type);
        return None;
    }
    let id = event
        .attribute(attr::RESOURCE_ID)
        .and_then(proto::AttributeValue::as_text)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let Some(id) = id else {
        unknown(out, "cloudevent.ce-resourceid", &event.id);
        return None;
    };
    let sequence = match event.attribute(attr::SEQUENCE_ID) {
        None => None,
        Some(v) => match v.as_text().and_then(|s| s.trim().parse::<u64>().ok()) {
            Some(s) => Some(s),
            None => {
                unknown(out, "cloudevent.ce-sequenceid", &format!("{v:?}"));
                None
            }
        },
    };
    let payload: Payload = match &event.data {
        Some(Data::BinaryData(bytes)) => match serde_json::from_slice(bytes) {
            Ok(p) => p,
            Err(err) => {
                unknown(out, "cloudevent.data", &err.to_string());
                return None;
            }
        },
        _ => {
            unknown(out, "cloudevent.data", "no binary_data");
            return None;
        }
    };
    if payload
        .conditions
        .iter()
        .any(|c| c.kind == "Deleted" && c.status == "True")
    {
        return Some(StatusEvent::Deleted { id, sequence });
    }
    let meta = match event.attribute(attr::METADATA).and_then(|v| v.as_text()) {
        None => EventMeta::default(),
        Some(json) => match serde_json::from_str::<Option<EventMeta>>(&json) {
            Ok(m) => m.unwrap_or_default(),
            Err(err) => {
                unknown(out, "cloudevent.ce-metadata", &err.to_string());
                EventMeta::default()
            }
        },
    };
    let updated_at = event
        .attribute(attr::TIME)
        .and_then(proto::AttributeValue::as_time)
        .map(|t| t.to_string());
    let deleted_at = meta.deletion_timestamp.or_else(|| {
        event
            .attribute(attr::DELETION_TIMESTAMP)
            .and_then(proto::AttributeValue::as_time)
            .map(|t| t.to_string())
    });
    let bundle = ResourceBundle {
        id,
        name: meta.name,
        consumer_name: event
            .attribute(attr::CLUSTER_NAME)
            .and_then(proto::AttributeValue::as_text),
        created_at: meta.creation_timestamp,
        updated_at,
        deleted_at,
        metadata: Some(BundleMetadata {
            labels: meta.labels,
        }),
        manifests: payload.manifest_bundle.and_then(|b| b.manifests),
        status: Some(BundleStatus {
            conditions: payload.conditions,
            resource_status: payload.resource_status,
            sequence_id: sequence.map(|s| serde_json::Value::String(s.to_string())),
        }),
    };
    Some(StatusEvent::Status {
        bundle: Box::new(bundle),
        sequence,
    })
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

#[cfg(test)]
mod known_tests {
    use super::*;

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
            metadata: Some(BundleMetadata { labels }),
            manifests: None,
            status: None,
        }
    }

    /// What the list said comes back whole, however it was stored: a name
    /// after its cluster, another name, none, no label.
    #[test]
    fn a_known_bundle_fills_an_event_as_the_list_said() {
        for (name, cluster) in [
            (Some("c1"), Some("c1")),
            (Some("c1-np-0"), Some("c1")),
            (Some("work-7"), Some("c1")),
            (None, Some("c1")),
            (Some("work-7"), None),
        ] {
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
}
