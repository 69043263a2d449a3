//! The simulated Maestro's status events against Maestro's own example
//! status event (tests/fixtures/maestro/, docs/design/10-upstream-facts.md §10.12, §11.8):
//! every attribute the example carries, with the protobuf kind sdk-go's
//! writer gives its JSON value, and nothing else; the same field values and
//! source shape; the same ObjectMeta and payload keys. Deletion events,
//! which upstream has no example of, are held to the same attribute set,
//! since the work agent writes every status the same way, plus what a
//! deletion adds. Every difference is reported, not the first.
//!
//! The events are read over real gRPC with this module's own copy of the
//! messages generated from Maestro's proto, neither the source's nor the
//! simulator's.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::world as testworld;
use hcp_flow::sim::{LatencyModel, SimClock, World, WorldConfig};

#[allow(clippy::all, clippy::pedantic, dead_code)]
mod pb {
    include!(concat!(env!("OUT_DIR"), "/io.cloudevents.v1.rs"));
}

use pb::CloudEvent;
use pb::cloud_event::Data;
use pb::cloud_event_attribute_value::Attr;

/// Attributes of the structured JSON form that the protobuf form keeps in
/// the message's own fields, or as data.
const IN_FIELDS: [&str; 5] = ["specversion", "id", "type", "source", "data"];

fn example() -> Value {
    let path = format!(
        "{}/tests/fixtures/maestro/cloudevents.status.maestro.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The protobuf attributes sdk-go's writer makes of a structured event:
/// `datacontenttype` as `contenttype`, every other attribute `x` as `ce-x`,
/// each of the kind its JSON value has (`time` a timestamp).
fn expected_attributes(example: &Value) -> BTreeMap<String, &'static str> {
    let mut out = BTreeMap::new();
    for (k, v) in example.as_object().unwrap() {
        if IN_FIELDS.contains(&k.as_str()) {
            continue;
        }
        let (key, kind) = match (k.as_str(), v) {
            ("datacontenttype", _) => ("contenttype".to_string(), "string"),
            ("time", _) => ("ce-time".to_string(), "timestamp"),
            (_, Value::String(_)) => (format!("ce-{k}"), "string"),
            (_, Value::Number(n)) if n.is_i64() => (format!("ce-{k}"), "integer"),
            (_, Value::Bool(_)) => (format!("ce-{k}"), "boolean"),
            _ => panic!("the example's {k} has no protobuf kind: {v}"),
        };
        out.insert(key, kind);
    }
    out
}

fn kind(v: &pb::CloudEventAttributeValue) -> &'static str {
    match &v.attr {
        None => "unset",
        Some(Attr::CeBoolean(_)) => "boolean",
        Some(Attr::CeInteger(_)) => "integer",
        Some(Attr::CeString(_)) => "string",
        Some(Attr::CeBytes(_)) => "bytes",
        Some(Attr::CeUri(_)) => "uri",
        Some(Attr::CeUriRef(_)) => "uri-ref",
        Some(Attr::CeTimestamp(_)) => "timestamp",
    }
}

fn text<'a>(ev: &'a CloudEvent, key: &str) -> Option<&'a str> {
    match ev.attributes.get(key).and_then(|v| v.attr.as_ref()) {
        Some(Attr::CeString(s)) => Some(s),
        _ => None,
    }
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// What differs between `ev` and the example, one line each. `deleted`:
/// the event is a bundle's last (its ObjectMeta deleting, `Deleted` True).
fn differences(example: &Value, ev: &CloudEvent, deleted: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut differ = |what: String| out.push(what);
    let str_of = |k: &str| example[k].as_str().unwrap_or_default();

    // The fields.
    if ev.spec_version != str_of("specversion") {
        differ(format!(
            "spec_version {:?}, upstream {:?}",
            ev.spec_version,
            str_of("specversion")
        ));
    }
    if ev.r#type != str_of("type") {
        differ(format!(
            "type {:?}, upstream {:?}",
            ev.r#type,
            str_of("type")
        ));
    }
    if ev.id.is_empty() {
        differ("an empty id".to_string());
    }
    // Upstream's source is the agent's: `<cluster name>-work-agent`.
    let upstream_agent = format!("{}-work-agent", str_of("clustername"));
    assert_eq!(
        str_of("source"),
        upstream_agent,
        "the example's source shape"
    );
    let cluster = text(ev, "ce-clustername").unwrap_or_default();
    if cluster.is_empty() {
        differ("an empty or missing ce-clustername".to_string());
    }
    if ev.source != format!("{cluster}-work-agent") || cluster.is_empty() {
        differ(format!(
            "source {:?}, upstream <ce-clustername>-work-agent ({upstream_agent:?})",
            ev.source
        ));
    }

    // The attributes: which, and of which kind.
    let expected = expected_attributes(example);
    for (k, want) in &expected {
        match ev.attributes.get(k) {
            None => differ(format!("no attribute {k} ({want})")),
            Some(v) if kind(v) != *want => {
                differ(format!("attribute {k} is a {}, upstream a {want}", kind(v)));
            }
            Some(_) => {}
        }
    }
    for (k, v) in &ev.attributes {
        if !expected.contains_key(k) {
            differ(format!("attribute {k} ({}) is not upstream's", kind(v)));
        }
    }

    // The attributes' values, as far as they are the same in every event.
    for (k, upstream) in [
        ("contenttype", str_of("datacontenttype")),
        ("ce-originalsource", str_of("originalsource")),
    ] {
        if text(ev, k) != Some(upstream) {
            differ(format!("{k} {:?}, upstream {upstream:?}", text(ev, k)));
        }
    }
    let hash = text(ev, "ce-statushash").unwrap_or_default();
    if !is_hex(hash, str_of("statushash").len()) {
        differ(format!("ce-statushash {hash:?} is not 64 hex digits"));
    }
    let seq = text(ev, "ce-sequenceid").unwrap_or_default();
    if seq.is_empty() || !seq.bytes().all(|b| b.is_ascii_digit()) {
        differ(format!("ce-sequenceid {seq:?} is not a decimal number"));
    }
    if text(ev, "ce-logtracing").and_then(|t| serde_json::from_str::<Value>(t).ok())
        != Some(serde_json::json!({}))
    {
        differ(format!(
            "ce-logtracing {:?}, upstream \"{{}}\"",
            text(ev, "ce-logtracing")
        ));
    }

    // The ObjectMeta: the agent's work, named by the resource id.
    let upstream_meta: Value = serde_json::from_str(str_of("metadata")).unwrap();
    let meta: Value = text(ev, "ce-metadata")
        .and_then(|m| serde_json::from_str(m).ok())
        .unwrap_or(Value::Null);
    let mut want_keys = keys(&upstream_meta);
    // A work being deleted carries its deletion time until it is gone; the
    // last status of a gone one always does.
    if deleted || meta.get("deletionTimestamp").is_some() {
        want_keys.insert("deletionTimestamp".to_string());
    }
    if keys(&meta) != want_keys {
        differ(format!(
            "ce-metadata keys {:?}, upstream {want_keys:?}",
            keys(&meta)
        ));
    }
    if keys(&meta["labels"]) != keys(&upstream_meta["labels"]) {
        differ(format!(
            "ce-metadata labels {:?}, upstream {:?}",
            keys(&meta["labels"]),
            keys(&upstream_meta["labels"])
        ));
    }
    let id = text(ev, "ce-resourceid").unwrap_or_default();
    for (k, want) in [("name", id), ("uid", id), ("namespace", cluster)] {
        if meta[k].as_str() != Some(want) {
            differ(format!(
                "ce-metadata {k} {}, upstream the {want:?} of its attribute",
                meta[k]
            ));
        }
    }
    if (deleted || meta.get("deletionTimestamp").is_some())
        && meta["deletionTimestamp"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .is_none()
    {
        differ(format!(
            "ce-metadata deletionTimestamp {} is not a time",
            meta["deletionTimestamp"]
        ));
    }

    // The payload.
    let payload: Value = match &ev.data {
        Some(Data::BinaryData(b)) => serde_json::from_slice(b).unwrap_or(Value::Null),
        other => {
            differ(format!("data {other:?}, upstream JSON in binary_data"));
            Value::Null
        }
    };
    let mut want_keys = keys(&example["data"]);
    if deleted {
        // The agent sends no spec back; whether Maestro adds it to a gone
        // bundle's last status is not in the code read (docs/design/10-upstream-facts.md §10.12).
        want_keys.remove("manifestBundle");
    }
    if keys(&payload) != want_keys {
        differ(format!(
            "payload keys {:?}, upstream {want_keys:?}",
            keys(&payload)
        ));
    }
    if !deleted && keys(&payload["manifestBundle"]) != keys(&example["data"]["manifestBundle"]) {
        differ(format!(
            "manifestBundle keys {:?}, upstream {:?}",
            keys(&payload["manifestBundle"]),
            keys(&example["data"]["manifestBundle"])
        ));
    }
    let conditions = payload["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let gone = conditions
        .iter()
        .any(|c| c["type"] == "Deleted" && c["status"] == "True");
    if gone != deleted {
        differ(format!(
            "a Deleted condition True: {gone}, expected {deleted}"
        ));
    }
    out
}

/// A subscription to `grpc` as `source`.
async fn subscribe(grpc: &url::Url, source: &str) -> tonic::Streaming<CloudEvent> {
    let channel = tonic::transport::Endpoint::from_shared(grpc.to_string())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await.unwrap();
    client
        .server_streaming(
            tonic::Request::new(pb::SubscriptionRequest {
                source: source.to_string(),
                ..pb::SubscriptionRequest::default()
            }),
            http::uri::PathAndQuery::from_static("/io.cloudevents.v1.CloudEventService/Subscribe"),
            tonic_prost::ProstCodec::<pb::SubscriptionRequest, CloudEvent>::default(),
        )
        .await
        .unwrap()
        .into_inner()
}

fn is_deleted(ev: &CloudEvent) -> bool {
    match &ev.data {
        Some(Data::BinaryData(b)) => serde_json::from_slice::<Value>(b)
            .ok()
            .and_then(|p| p["conditions"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .any(|c| c["type"] == "Deleted" && c["status"] == "True"),
        _ => false,
    }
}

/// Status events from `stream` until `enough` says so, at most `bound`.
async fn read_until(
    stream: &mut tonic::Streaming<CloudEvent>,
    into: &mut Vec<CloudEvent>,
    bound: Duration,
    enough: impl Fn(&[CloudEvent]) -> bool,
) {
    let until = Instant::now() + bound;
    while !enough(into) {
        let left = until.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "timed out: {} status events", into.len());
        match tokio::time::timeout(left, stream.message()).await {
            Ok(Ok(Some(ev))) if ev.r#type.ends_with(".heartbeat") => {}
            Ok(Ok(Some(ev))) => into.push(ev),
            Ok(other) => panic!("the stream ended: {other:?}"),
            Err(_) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulated_status_events_have_the_shape_of_maestros_own_example() {
    crate::common::init();
    let clock = SimClock::manual("2026-03-01T12:00:00Z".parse().unwrap());
    let world = World::new(
        WorldConfig {
            speed: 1.0,
            churn: true,
            faults: false,
            latency: LatencyModel::none(),
            ..testworld::demo(20, 5)
        },
        clock.clone(),
    );
    let endpoints = world.serve().await.unwrap();
    let mut stream = subscribe(&endpoints.maestro_grpc, hcp_flow::sim::MAESTRO_SOURCE_ID).await;

    // Creations report status; a world-day later every cluster heard of
    // was deleted (churn deletes each within hours) and its bundles are
    // gone. The simulator compares the world with what it sent every
    // 100 ms, so each jump is heard at its next look.
    let mut events = Vec::new();
    clock.advance(Duration::from_secs(30 * 60));
    read_until(&mut stream, &mut events, Duration::from_secs(20), |evs| {
        evs.iter().any(|e| !is_deleted(e))
    })
    .await;
    clock.advance(Duration::from_secs(24 * 3600));
    read_until(&mut stream, &mut events, Duration::from_secs(20), |evs| {
        evs.iter().any(is_deleted)
    })
    .await;

    let example = example();
    let mut found = BTreeMap::<String, usize>::new();
    for ev in &events {
        for d in differences(&example, ev, is_deleted(ev)) {
            let tag = if is_deleted(ev) { "deletion" } else { "status" };
            *found.entry(format!("{tag}: {d}")).or_default() += 1;
        }
    }
    assert!(
        found.is_empty(),
        "{} status events ({} deletions) differ from Maestro's example:\n{}",
        events.len(),
        events.iter().filter(|e| is_deleted(e)).count(),
        found
            .iter()
            .map(|(d, n)| format!("  {d} (×{n})"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
