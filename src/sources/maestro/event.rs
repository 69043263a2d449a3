//! A bundle's status CloudEvent → the [`ResourceBundle`] the REST list
//! would show, so the stream and the list are read by the one
//! [`parse_bundle`](super::parse_bundle) (docs/design/09b-reading-the-upstreams.md §9.10).
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
use super::{BundleMetadata, BundleStatus, ResourceBundle};
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
    #[serde(default, deserialize_with = "null_default")]
    annotations: BTreeMap<String, String>,
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
    let mut meta = match event.attribute(attr::METADATA).and_then(|v| v.as_text()) {
        None => EventMeta::default(),
        Some(json) => match serde_json::from_str::<Option<EventMeta>>(&json) {
            Ok(m) => m.unwrap_or_default(),
            Err(err) => {
                unknown(out, "cloudevent.ce-metadata", &err.to_string());
                EventMeta::default()
            }
        },
    };
    // OCM's log tracing travels as an extension of its own, a JSON object
    // of the object's logging annotations (docs/design/15b-operations.md §15.13).
    if let Some(json) = event.attribute(attr::LOG_TRACING).and_then(|v| v.as_text()) {
        match serde_json::from_str::<Option<BTreeMap<String, String>>>(&json) {
            Ok(tracing) => meta.annotations.extend(tracing.unwrap_or_default()),
            Err(err) => unknown(out, "cloudevent.ce-logtracing", &err.to_string()),
        }
    }
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
            annotations: meta.annotations,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::maestro::proto::AttributeValue;

    const ID: &str = "55c61e54-a3f6-563d-9fec-b1fe297bdfdb";

    /// A status event as sdk-go's agent codec writes it for a work in
    /// `namespace`, its ObjectMeta `meta`, its payload `payload`.
    fn status(meta: serde_json::Value, payload: serde_json::Value) -> CloudEvent {
        let mut ev = CloudEvent {
            id: "event".to_string(),
            source: "mgmt-1-work-agent".to_string(),
            spec_version: "1.0".to_string(),
            r#type: proto::STATUS_UPDATE_TYPE.to_string(),
            data: Some(Data::BinaryData(payload.to_string().into())),
            ..CloudEvent::default()
        };
        for (k, v) in [
            (attr::RESOURCE_ID, AttributeValue::string(ID)),
            (attr::SEQUENCE_ID, AttributeValue::string("7")),
            (attr::CLUSTER_NAME, AttributeValue::string("mgmt-1")),
            (attr::METADATA, AttributeValue::string(meta.to_string())),
        ] {
            ev.attributes.insert(k.to_string(), v);
        }
        ev
    }

    fn applied() -> serde_json::Value {
        serde_json::json!({"conditions": [{"type": "Applied", "status": "True",
            "lastTransitionTime": "2025-01-01T00:05:00Z", "reason": "AppliedManifestWorkComplete",
            "message": "Apply manifest work complete"}], "resourceStatus": []})
    }

    /// sdk-go's event builder writes a deletion time as the extension
    /// `deletiontimestamp`, a CloudEvents timestamp (`ce-deletiontimestamp`
    /// on the wire); an ObjectMeta without one leaves it the only source of
    /// the bundle's `deleted_at`.
    #[test]
    fn ce_deletiontimestamp_is_the_bundles_deleted_at() {
        let mut ev = status(
            serde_json::json!({"name": ID, "namespace": "mgmt-1"}),
            applied(),
        );
        let at: jiff::Timestamp = "2025-01-01T00:20:00.5Z".parse().expect("a time");
        ev.attributes.insert(
            attr::DELETION_TIMESTAMP.to_string(),
            AttributeValue::timestamp(at),
        );
        let mut unknown = Vec::new();
        let Some(StatusEvent::Status { bundle, sequence }) = decode(&ev, &mut unknown) else {
            panic!("not read as a status: {unknown:?}");
        };
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(sequence, Some(7));
        assert_eq!(bundle.deleted_at.as_deref(), Some("2025-01-01T00:20:00.5Z"));
        assert_eq!(bundle.consumer_name.as_deref(), Some("mgmt-1"));

        // As RFC 3339 text, as a JSON transport's string extension would be.
        ev.attributes.insert(
            attr::DELETION_TIMESTAMP.to_string(),
            AttributeValue::string("2025-01-01T00:20:00Z"),
        );
        let Some(StatusEvent::Status { bundle, .. }) = decode(&ev, &mut unknown) else {
            panic!("not read as a status: {unknown:?}");
        };
        assert_eq!(bundle.deleted_at.as_deref(), Some("2025-01-01T00:20:00Z"));
    }

    /// A work's last status as the agent sends it once its finalizers are
    /// gone: the ObjectMeta's `deletionTimestamp` and a `Deleted` condition
    /// True, whatever else it carries: the bundle is gone.
    #[test]
    fn the_agents_last_status_of_a_deleted_work_is_a_deletion() {
        let payload = serde_json::json!({"conditions": [{"type": "Deleted", "status": "True",
            "lastTransitionTime": "2025-01-01T00:21:00Z", "reason": "ManifestsDeleted",
            "message": "The manifests are deleted from the cluster mgmt-1"}], "resourceStatus": []});
        let mut ev = status(
            serde_json::json!({"name": ID, "namespace": "mgmt-1",
                "deletionTimestamp": "2025-01-01T00:20:00Z"}),
            payload,
        );
        ev.attributes.insert(
            attr::DELETION_TIMESTAMP.to_string(),
            AttributeValue::string("2025-01-01T00:20:00Z"),
        );
        let mut unknown = Vec::new();
        match decode(&ev, &mut unknown) {
            Some(StatusEvent::Deleted { id, sequence }) => {
                assert_eq!((id.as_str(), sequence), (ID, Some(7)));
            }
            other => panic!("not a deletion: {other:?}, {unknown:?}"),
        }
    }

    /// OCM's log tracing rides on its own extension, a JSON object of the
    /// object's logging annotations; the bundle's observation carries the
    /// ids it names (docs/design/15b-operations.md §15.13), and garbage there is counted.
    #[test]
    fn ce_logtracing_gives_the_bundle_its_upstream_ids() {
        let mut ev = status(
            serde_json::json!({"name": ID, "namespace": "mgmt-1",
                "labels": {"api.openshift.com/id": "c1"}}),
            applied(),
        );
        ev.attributes.insert(
            attr::LOG_TRACING.to_string(),
            AttributeValue::string(
                r#"{"logging.open-cluster-management.io/op-id":"2e9d5cb2","other":"x"}"#,
            ),
        );
        let mut unknown = Vec::new();
        let Some(StatusEvent::Status { bundle, .. }) = decode(&ev, &mut unknown) else {
            panic!("not read as a status: {unknown:?}");
        };
        assert!(unknown.is_empty(), "{unknown:?}");
        let parsed = crate::sources::maestro::parse_bundle(&bundle, &mut unknown);
        let ids: Vec<(String, String)> = parsed
            .observations
            .iter()
            .filter(|o| o.hop == crate::model::Hop::MaestroBundle)
            .filter_map(|o| match &o.change {
                crate::model::Change::Upsert(view) => view.identity.as_ref(),
                crate::model::Change::Gone => None,
            })
            .flat_map(|i| i.upstream_ids.iter())
            .map(|i| (i.name.to_string(), i.value.to_string()))
            .collect();
        assert_eq!(ids, vec![("op-id".to_string(), "2e9d5cb2".to_string())]);

        ev.attributes.insert(
            attr::LOG_TRACING.to_string(),
            AttributeValue::string("not json"),
        );
        let mut unknown = Vec::new();
        assert!(decode(&ev, &mut unknown).is_some(), "still read");
        assert_eq!(unknown.len(), 1);
        assert_eq!(unknown[0].field, "cloudevent.ce-logtracing");
    }
}
