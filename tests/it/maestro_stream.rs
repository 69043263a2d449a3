//! Maestro heard over its gRPC CloudEvents stream (docs/design/09b-reading-the-upstreams.md §9.10),
//! over real gRPC on loopback: against a stand-in whose events are written
//! here from the reference proto's field numbers and sdk-go's attribute
//! layout (not by the code that decodes them), and against the simulated
//! world, whose stream is dropped and sends malformed events.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::common::exporter;
use crate::common::source::harness;
use crate::common::standin::{Behaviour, StandIn};
use crate::common::world as testworld;
use hcp_flow::config::{HttpSourceConfig, MaestroConfig, MaestroGrpcConfig};
use hcp_flow::model::{Change, ClusterKey, Hop, Observation, Phase};
use hcp_flow::sim::{Fault, LatencyModel, Truth, WorldConfig};
use hcp_flow::sources::maestro::{self, MaestroSource};
use hcp_flow::state_store::SavedBundle;

// ---------------------------------------------------------------------------
// The stand-in's own wire types, from `cloudevent.proto` (field numbers as
// there), independent of `hcp_flow::sources::maestro::proto`.

#[derive(Clone, PartialEq, prost::Message)]
struct PbEvent {
    #[prost(string, tag = "1")]
    id: String,
    #[prost(string, tag = "2")]
    source: String,
    #[prost(string, tag = "3")]
    spec_version: String,
    #[prost(string, tag = "4")]
    r#type: String,
    #[prost(map = "string, message", tag = "5")]
    attributes: HashMap<String, PbAttr>,
    #[prost(bytes = "vec", optional, tag = "6")]
    binary_data: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct PbAttr {
    #[prost(bool, optional, tag = "1")]
    ce_boolean: Option<bool>,
    #[prost(int32, optional, tag = "2")]
    ce_integer: Option<i32>,
    #[prost(string, optional, tag = "3")]
    ce_string: Option<String>,
    #[prost(message, optional, tag = "7")]
    ce_timestamp: Option<PbTimestamp>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct PbTimestamp {
    #[prost(int64, tag = "1")]
    seconds: i64,
    #[prost(int32, tag = "2")]
    nanos: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
struct PbSubscribe {
    #[prost(string, tag = "1")]
    source: String,
    #[prost(string, tag = "2")]
    cluster_name: String,
    #[prost(string, tag = "3")]
    data_type: String,
}

fn s(v: &str) -> PbAttr {
    PbAttr {
        ce_string: Some(v.to_string()),
        ..PbAttr::default()
    }
}

const STATUS_TYPE: &str =
    "io.open-cluster-management.works.v1alpha1.manifestbundles.status.update_request";

/// A status event as Maestro's `encodeResourceStatus` and sdk-go's
/// protobuf writer put it on the wire: id/source/specversion/type as
/// fields, `contenttype` bare, extensions `ce-`-prefixed, the
/// `ManifestBundleStatus` JSON in `binary_data`. The ObjectMeta is the
/// agent's, named by the resource id (as in Maestro's own example).
/// The status that makes the stand-in's HostedCluster Available: sequence
/// 20, at 00:10 (the REST bundle `rest_bundle(true, 20, …)` says the same).
fn available_event() -> PbEvent {
    let at = "2025-01-01T00:10:00Z".parse::<jiff::Timestamp>().unwrap();
    status_event(BUNDLE_ID, 20, at.as_second(), &payload(true, 20))
}

fn status_event(id: &str, seq: u64, time_s: i64, payload: &Value) -> PbEvent {
    let meta = json!({"name": id, "namespace": "mgmt-1", "uid": id, "resourceVersion": "0",
        "creationTimestamp": "2025-01-01T00:00:00Z",
        "labels": {"maestro.resource.type": "2d18a7dc-c731-5753-8aa9-6b2f22e3b12b"}});
    let attributes = HashMap::from([
        ("contenttype".to_string(), s("application/json")),
        (
            "ce-time".to_string(),
            PbAttr {
                ce_timestamp: Some(PbTimestamp {
                    seconds: time_s,
                    nanos: 0,
                }),
                ..PbAttr::default()
            },
        ),
        ("ce-resourceid".to_string(), s(id)),
        (
            "ce-resourceversion".to_string(),
            PbAttr {
                ce_integer: Some(1),
                ..PbAttr::default()
            },
        ),
        ("ce-sequenceid".to_string(), s(&seq.to_string())),
        ("ce-statushash".to_string(), s("e3b0c442")),
        ("ce-clustername".to_string(), s("mgmt-1")),
        ("ce-originalsource".to_string(), s("maestro")),
        ("ce-metadata".to_string(), s(&meta.to_string())),
        ("ce-logtracing".to_string(), s("{}")),
    ]);
    PbEvent {
        id: format!("event-{seq}"),
        source: "mgmt-1-work-agent".to_string(),
        spec_version: "1.0".to_string(),
        r#type: STATUS_TYPE.to_string(),
        attributes,
        binary_data: Some(payload.to_string().into_bytes()),
    }
}

fn heartbeat() -> PbEvent {
    PbEvent {
        id: "hb".to_string(),
        spec_version: "1.0".to_string(),
        r#type: "io.open-cluster-management.cloudevents.heartbeat".to_string(),
        ..PbEvent::default()
    }
}

/// What the stand-in saw: each call's path, its subscription's source and
/// `authorization`.
#[derive(Default)]
struct Calls {
    paths: Vec<String>,
    sources: Vec<String>,
    authorization: Vec<Option<String>>,
}

type Events = Arc<Mutex<Option<mpsc::Receiver<Result<PbEvent, tonic::Status>>>>>;

/// A gRPC server that answers `Subscribe` with the events the test sends
/// (one subscription at a time: each takes the current sender's stream)
/// and anything else with Unimplemented, recording every call.
#[derive(Clone)]
struct StandInServer {
    calls: Arc<Mutex<Calls>>,
    events: Events,
}

impl StandInServer {
    /// Serve on loopback; returns the address and a way to hand the next
    /// subscription its event channel.
    async fn start() -> (StandInServer, String) {
        let server = StandInServer {
            calls: Arc::default(),
            events: Arc::default(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let svc = server.clone();
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .serve_with_incoming(
                    svc,
                    tokio_stream::wrappers::TcpListenerStream::new(listener),
                )
                .await
                .unwrap();
        });
        (server, format!("http://{addr}"))
    }

    /// The sender feeding the next subscription.
    fn next_subscription(&self) -> mpsc::Sender<Result<PbEvent, tonic::Status>> {
        let (tx, rx) = mpsc::channel(100);
        *self.events.lock() = Some(rx);
        tx
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type PbStream = Pin<Box<dyn futures::Stream<Item = Result<PbEvent, tonic::Status>> + Send>>;

impl tower::Service<http::Request<tonic::body::Body>> for StandInServer {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let path = req.uri().path().to_string();
        self.calls.lock().paths.push(path.clone());
        let me = self.clone();
        Box::pin(async move {
            if path == "/io.cloudevents.v1.CloudEventService/Subscribe" {
                let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::<
                    PbEvent,
                    PbSubscribe,
                >::default());
                Ok(grpc.server_streaming(Sub(me), req).await)
            } else {
                Ok(tonic::Status::unimplemented("the stand-in takes Subscribe only").into_http())
            }
        })
    }
}

struct Sub(StandInServer);

impl tonic::server::ServerStreamingService<PbSubscribe> for Sub {
    type Response = PbEvent;
    type ResponseStream = PbStream;
    type Future = BoxFuture<Result<tonic::Response<PbStream>, tonic::Status>>;

    fn call(&mut self, req: tonic::Request<PbSubscribe>) -> Self::Future {
        let server = self.0.clone();
        Box::pin(async move {
            let auth = req
                .metadata()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            {
                let mut calls = server.calls.lock();
                calls.authorization.push(auth);
                calls.sources.push(req.get_ref().source.clone());
            }
            let rx = server.events.lock().take();
            let stream: PbStream = match rx {
                Some(rx) => Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx)),
                // No events prepared: an open, silent stream.
                None => Box::pin(futures::stream::pending()),
            };
            let mut response = tonic::Response::new(stream);
            response
                .metadata_mut()
                .insert("subscription-id", "standin".parse().unwrap());
            Ok(response)
        })
    }
}

// ---------------------------------------------------------------------------
// Bundles.

const BUNDLE_ID: &str = "55c61e54-a3f6-563d-9fec-b1fe297bdfdb";

fn work_status(available: bool) -> Value {
    let hc = json!({"conditions": [
        {"type": "Available", "status": if available {"True"} else {"False"}, "reason": "AsExpected",
         "message": "", "lastTransitionTime": "2025-01-01T00:10:00Z"}]});
    json!({
        "conditions": [
            {"type": "Applied", "status": "True", "reason": "AppliedManifestWorkComplete", "message": "", "lastTransitionTime": "2025-01-01T00:01:00Z"},
            {"type": "Available", "status": "True", "reason": "ResourcesAvailable", "message": "", "lastTransitionTime": "2025-01-01T00:02:00Z"}],
        "resourceStatus": {"manifests": [{
            "resourceMeta": {"kind": "HostedCluster", "name": "hc-1", "namespace": "clusters"},
            "statusFeedback": {"values": [{"name": "status", "fieldValue": {"type": "JsonRaw", "jsonRaw": hc.to_string()}}]},
            "conditions": []}]}
    })
}

/// The bundle's `status` (REST) = the event's payload less `manifestBundle`.
fn status(available: bool, seq: u64) -> Value {
    json!({
        "SequenceID": seq.to_string(),
        "conditions": [
            {"type": "Applied", "status": "True", "reason": "AppliedManifestWorkComplete", "message": "", "lastTransitionTime": "2025-01-01T00:01:00Z"},
            {"type": "Available", "status": "True", "reason": "ResourcesAvailable", "message": "", "lastTransitionTime": "2025-01-01T00:02:00Z"}],
        "resourceStatus": [{
            "resourceMeta": {"kind": "ManifestWork", "name": "work-1", "namespace": "local-cluster"},
            "statusFeedback": {"values": [{"name": "status", "fieldValue": {"type": "JsonRaw", "jsonRaw": work_status(available).to_string()}}]},
            "conditions": []}]
    })
}

fn manifests() -> Value {
    json!([{"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
            "metadata": {"name": "work-1"},
            "spec": {"workload": {"manifests": [{"kind": "HostedCluster", "metadata": {"name": "hc-1"}}]}}}])
}

fn rest_bundle(available: bool, seq: u64, updated: &str) -> Value {
    json!({
        "id": BUNDLE_ID, "kind": "ResourceBundle", "name": "work-1", "consumer_name": "mgmt-1",
        "created_at": "2025-01-01T00:00:00.000000Z", "updated_at": updated,
        "metadata": {"name": "work-1", "labels": {"api.openshift.com/id": "cluster-1"}},
        "manifests": manifests(),
        "status": status(available, seq),
    })
}

/// The id of bundle `n` of a test's own few (`work-<n>` of `cluster-<n>`).
fn numbered_id(n: u32) -> String {
    format!("00000000-0000-4000-8000-00000000000{n}")
}

/// Bundle `n`: [`rest_bundle`] Available, named `work-<n>`, of `cluster-<n>`.
fn numbered_bundle(n: u32) -> Value {
    let mut b = rest_bundle(true, 10, "2025-01-01T00:10:00Z");
    b["id"] = json!(numbered_id(n));
    b["name"] = json!(format!("work-{n}"));
    b["metadata"] = json!({"name": format!("work-{n}"), "labels": {"api.openshift.com/id": format!("cluster-{n}")}});
    b
}

/// The status an agent reports once a bundle's manifests are deleted.
fn deleted_status() -> Value {
    json!({"conditions": [{"type": "Deleted", "status": "True", "reason": "ManifestsDeleted",
        "message": "", "lastTransitionTime": "2025-01-01T00:20:00Z"}]})
}

fn payload(available: bool, seq: u64) -> Value {
    let st = status(available, seq);
    json!({"manifestBundle": {"manifests": manifests()}, "conditions": st["conditions"], "resourceStatus": st["resourceStatus"]})
}

fn list(items: Vec<Value>) -> String {
    let n = items.len();
    json!({"kind": "ResourceBundleList", "page": 1, "size": n, "total": n, "items": items})
        .to_string()
}

/// The observations in `batches`, as (hop, object, phase or "gone").
fn readings(batches: &[hcp_flow::model::Batch]) -> Vec<(Hop, String, String)> {
    batches
        .iter()
        .flat_map(|b| &b.observations)
        .map(|o: &Observation| {
            let what = match &o.change {
                Change::Upsert(v) => format!("{:?}", v.phase),
                Change::Gone => "gone".to_string(),
            };
            (o.hop, o.object.clone(), what)
        })
        .collect()
}

/// Maestro read from `stand`'s REST API and `grpc`'s stream, subscribed as
/// `cs-source`, with no relist within a test, reconnecting after 100 ms
/// and calling a stream silent for `heartbeat_timeout` dead.
fn stream_config(stand: &StandIn, grpc: &str, heartbeat_timeout: Duration) -> MaestroConfig {
    let mut http = HttpSourceConfig::new(stand.base.clone());
    http.full_relist_interval = Duration::from_secs(3600);
    let mut g = MaestroGrpcConfig::new(url::Url::parse(grpc).unwrap(), "cs-source");
    g.heartbeat_timeout = heartbeat_timeout;
    g.reconnect_backoff = Duration::from_millis(100);
    MaestroConfig {
        http,
        search_scope: None,
        grpc: Some(Box::new(g)),
    }
}

fn source_on(
    stand: &StandIn,
    grpc: &str,
    name: &str,
) -> (MaestroSource, crate::common::source::Harness) {
    let h = harness(name);
    let cfg = stream_config(stand, grpc, Duration::from_millis(800));
    (MaestroSource::new(cfg, h.ctx.clone()).unwrap(), h)
}

pub(crate) async fn until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_event_reads_as_the_list_would_and_deleted_removes_the_bundle() {
    // The list: the HostedCluster not yet Available.
    let listed = list(vec![rest_bundle(false, 10, "2025-01-01T00:05:00Z")]);
    let stand = StandIn::start(move |_| Behaviour::Answer(200, listed.clone())).await;
    let (grpc, address) = StandInServer::start().await;
    let events = grpc.next_subscription();
    let (source, h) = source_on(&stand, &address, "maestro");
    let task = tokio::spawn(maestro::stream::run_configured(source));

    until("the first list", Duration::from_secs(10), || h.up() == 1).await;
    let first = readings(&h.sink.take());
    assert!(
        first.contains(&(Hop::HostedCluster, String::new(), "InProgress".into()))
            || first.iter().any(|(hop, _, _)| *hop == Hop::HostedCluster),
        "{first:?}"
    );

    // Heartbeats, then the status that makes the HostedCluster Available,
    // then one older than it (queued behind a list, say): skipped.
    events.send(Ok(heartbeat())).await.unwrap();
    let t = "2025-01-01T00:10:00Z".parse::<jiff::Timestamp>().unwrap();
    events.send(Ok(available_event())).await.unwrap();
    events
        .send(Ok(status_event(
            BUNDLE_ID,
            5,
            t.as_second(),
            &payload(false, 5),
        )))
        .await
        .unwrap();
    let mut streamed = Vec::new();
    until("the event's reading", Duration::from_secs(10), || {
        streamed.extend(h.sink.take());
        readings(&streamed)
            .iter()
            .any(|(hop, _, p)| *hop == Hop::HostedCluster && p == "Ready")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    streamed.extend(h.sink.take());

    // The same status read from a list: the same observations, object for
    // object (the bundle keyed by its REST name, not the event's).
    let rest = maestro::parse_items(vec![
        serde_json::from_value(rest_bundle(true, 20, "2025-01-01T00:10:00Z")).unwrap(),
    ]);
    let want: BTreeMap<(Hop, String), String> = rest
        .observations
        .iter()
        .map(|o| ((o.hop, o.object.clone()), format!("{:?}", o.change)))
        .collect();
    let got: BTreeMap<(Hop, String), String> = streamed
        .iter()
        .flat_map(|b| &b.observations)
        .map(|o| ((o.hop, o.object.clone()), format!("{:?}", o.change)))
        .collect();
    assert!(want.contains_key(&(Hop::MaestroBundle, "work-1".to_string())));
    for (key, change) in &got {
        assert_eq!(
            want.get(key),
            Some(change),
            "{key:?}: the stream's reading differs from the list's"
        );
    }
    assert!(
        got.contains_key(&(Hop::HostedCluster, String::new())),
        "{got:?}"
    );

    // Deleted: the bundle and what it carried are gone.
    let deleted = deleted_status();
    events
        .send(Ok(status_event(
            BUNDLE_ID,
            30,
            t.as_second() + 600,
            &deleted,
        )))
        .await
        .unwrap();
    let mut after = Vec::new();
    until("the deletion", Duration::from_secs(10), || {
        after.extend(h.sink.take());
        readings(&after)
            .iter()
            .any(|(hop, o, p)| *hop == Hop::MaestroBundle && o == "work-1" && p == "gone")
    })
    .await;
    assert!(
        readings(&after)
            .iter()
            .any(|(hop, _, p)| *hop == Hop::HostedCluster && p == "gone")
    );

    // Subscribed as the configured source, plaintext without a token, and
    // nothing but Subscribe reached the server: no Publish, no resync.
    let calls = grpc.calls.lock();
    assert_eq!(calls.sources, vec!["cs-source".to_string()]);
    assert_eq!(calls.authorization, vec![None]);
    assert!(
        calls
            .paths
            .iter()
            .all(|p| p == "/io.cloudevents.v1.CloudEventService/Subscribe"),
        "{:?}",
        calls.paths
    );
    drop(calls);
    task.abort();
}

/// A bundle first heard over the stream is read by id; when that read
/// fails (Maestro answers 500 a moment), it is read again a window later,
/// not left to a list that on the stream may be a relist interval away
/// (docs/design/09b-reading-the-upstreams.md §9.10).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_heard_bundle_whose_read_failed_is_read_again() {
    let by_id = list(vec![rest_bundle(true, 20, "2025-01-01T00:10:00Z")]);
    let empty = list(Vec::new());
    let id_reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = id_reads.clone();
    let stand = StandIn::start(move |seen| {
        // The list shows no bundle (it was created after): only a read by
        // id can name it.
        if !seen.target.contains("search=") {
            return Behaviour::Answer(200, empty.clone());
        }
        if counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            Behaviour::Answer(500, r#"{"kind":"Error","reason":"injected"}"#.to_string())
        } else {
            Behaviour::Answer(200, by_id.clone())
        }
    })
    .await;
    let (grpc, address) = StandInServer::start().await;
    let events = grpc.next_subscription();
    let h = harness("maestro");
    let cfg = stream_config(&stand, &address, Duration::from_secs(30));
    let source = MaestroSource::new(cfg, h.ctx.clone()).unwrap();
    let task = tokio::spawn(maestro::stream::run_configured(source));
    until("the first list", Duration::from_secs(10), || h.up() == 1).await;

    events.send(Ok(available_event())).await.unwrap();
    let mut streamed = Vec::new();
    until(
        "the bundle read again after its failed read",
        Duration::from_secs(10),
        || {
            streamed.extend(h.sink.take());
            readings(&streamed)
                .iter()
                .any(|(hop, _, p)| *hop == Hop::HostedCluster && p == "Ready")
        },
    )
    .await;
    assert!(
        id_reads.load(std::sync::atomic::Ordering::SeqCst) >= 2,
        "read by id once only"
    );
    task.abort();
}

/// What the last run's stream knew of a bundle (its bundle-ids file)
/// lets this run apply the bundle's events while the first list is still
/// paging: named as the list names it, older statuses skipped, and never
/// read by id (docs/design/03-timeline-model.md §3.10).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_the_last_run_knew_applies_its_events_unread() {
    // The list's first page shows another cluster's bundle; its second
    // never answers: the list is still paging when the events apply.
    // Its HostedCluster not Available: only the event makes one Ready.
    let mut other = rest_bundle(false, 3, "2025-01-01T00:05:00Z");
    other["id"] = json!("0b6a3b8e-4b8f-5bb1-9a8e-2f1d3c4b5a69");
    other["name"] = json!("work-2");
    other["metadata"] = json!({"name": "work-2", "labels": {"api.openshift.com/id": "cluster-2"}});
    let first_page = json!({"kind": "ResourceBundleList", "page": 1, "size": 1, "total": 2,
        "items": [other]})
    .to_string();
    let stand = StandIn::start(move |seen| {
        if seen.target.contains("page=1") {
            Behaviour::Answer(200, first_page.clone())
        } else {
            Behaviour::Freeze
        }
    })
    .await;
    let (grpc, address) = StandInServer::start().await;
    let events = grpc.next_subscription();
    let h = harness("maestro");
    let mut cfg = stream_config(&stand, &address, Duration::from_secs(30));
    cfg.http.page_size = 1;
    // As the bundle-ids file gives it back: name, cluster, sequence 10.
    let known = maestro::KnownBundles::default();
    known.restore([SavedBundle {
        id: BUNDLE_ID.to_string(),
        name: Some("work-1".to_string()),
        cluster: Some("cluster-1".to_string()),
        created_at: "2025-01-01T00:00:00Z".parse().ok(),
        deleted_at: None,
        sequence: 10,
    }]);
    let source = MaestroSource::new(cfg, h.ctx.clone())
        .unwrap()
        .remembering(known);
    // The subscription's first events, heard before the list's first page
    // ends and applied after it: one older than what the last run applied
    // (skipped), then a newer one.
    let t = "2025-01-01T00:10:00Z".parse::<jiff::Timestamp>().unwrap();
    for (seq, available) in [(5, false), (20, true)] {
        events
            .send(Ok(status_event(
                BUNDLE_ID,
                seq,
                t.as_second(),
                &payload(available, seq),
            )))
            .await
            .unwrap();
    }
    let task = tokio::spawn(maestro::stream::run_configured(source));
    let cluster_1 = ClusterKey::Id("cluster-1".to_string());
    let mut streamed = Vec::new();
    until("the event's reading", Duration::from_secs(10), || {
        streamed.extend(h.sink.take());
        streamed.iter().flat_map(|b| &b.observations).any(|o| {
            o.key == cluster_1
                && o.hop == Hop::HostedCluster
                && matches!(&o.change, Change::Upsert(v) if v.phase == Phase::Ready)
        })
    })
    .await;
    let of_cluster_1: Vec<&Observation> = streamed
        .iter()
        .flat_map(|b| &b.observations)
        .filter(|o| o.key == cluster_1)
        .collect();
    assert!(
        of_cluster_1
            .iter()
            .any(|o| o.hop == Hop::MaestroBundle && o.object == "work-1"),
        "the bundle keyed as the list keys it: {of_cluster_1:?}"
    );
    assert!(
        of_cluster_1.iter().all(|o| o.hop != Hop::HostedCluster
            || matches!(&o.change, Change::Upsert(v) if v.phase == Phase::Ready)),
        "the older status was applied: {of_cluster_1:?}"
    );
    // Nothing but the list's two pages reached the REST API. The list
    // reconciles beside the stream, so its second page may come after the
    // event's reading (under load it does).
    until("the list's second page", Duration::from_secs(10), || {
        stand.seen().iter().any(|s| s.target.contains("page=2"))
    })
    .await;
    // The list's pages search by creation time only: nothing was read by
    // id or by name.
    let seen = stand.seen();
    let searches: Vec<String> = seen
        .iter()
        .filter_map(|s| {
            url::Url::parse(&format!("http://x{}", s.target))
                .unwrap()
                .query_pairs()
                .find(|(k, _)| k == "search")
                .map(|(_, v)| v.into_owned())
        })
        .collect();
    assert!(
        searches.iter().all(|s| s.starts_with("created_at >= ")),
        "{seen:?}"
    );
    task.abort();
}

/// Bundles the stream says were deleted are forgotten together, at most
/// once per window (docs/design/09b-reading-the-upstreams.md §9.10): the second of two deletions
/// heard back to back still goes within the window, with nothing else
/// heard after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletions_heard_back_to_back_go_within_the_window_without_another_event() {
    let listed = list(vec![numbered_bundle(1), numbered_bundle(2)]);
    let stand = StandIn::start(move |_| Behaviour::Answer(200, listed.clone())).await;
    let (grpc, address) = StandInServer::start().await;
    let events = grpc.next_subscription();
    let h = harness("maestro");
    let cfg = stream_config(&stand, &address, Duration::from_secs(30));
    let source = MaestroSource::new(cfg, h.ctx.clone()).unwrap();
    let task = tokio::spawn(maestro::stream::run_configured(source));
    until("the first list", Duration::from_secs(10), || h.up() == 1).await;
    h.sink.take();

    let deleted = deleted_status();
    let at = "2025-01-01T00:20:00Z"
        .parse::<jiff::Timestamp>()
        .unwrap()
        .as_second();
    let gone = |batches: &[hcp_flow::model::Batch], work: &str| {
        readings(batches)
            .iter()
            .any(|(hop, o, p)| *hop == Hop::MaestroBundle && o == work && p == "gone")
    };
    let window = maestro::FORGET_WINDOW;
    let mut after = Vec::new();
    // The first deletion goes at once (none was forgotten before it)...
    events
        .send(Ok(status_event(&numbered_id(1), 30, at, &deleted)))
        .await
        .unwrap();
    until("the first deletion", Duration::from_secs(5), || {
        after.extend(h.sink.take());
        gone(&after, "work-1")
    })
    .await;
    // ...the second, heard within the window after it, goes at the
    // window's end, with nothing heard after it.
    events
        .send(Ok(status_event(&numbered_id(2), 30, at, &deleted)))
        .await
        .unwrap();
    until(
        "the second deletion",
        window * 4 + Duration::from_secs(1),
        || {
            after.extend(h.sink.take());
            gone(&after, "work-2")
        },
    )
    .await;
    task.abort();
}

/// A list on the stream pages by creation time (docs/design/09b-reading-the-upstreams.md §9.10).
/// Maestro pages by offset, and a bundle deleted from a page already read
/// shifted the rest back by one: the bundle crossing the page boundary was
/// never read, and one the source did not know (created while it was away)
/// stayed unseen until the next relist. The stand-in pages, searches and
/// orders as Maestro's REST API does, and deletes the first bundle just
/// after serving the first page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_on_the_stream_misses_no_bundle_when_one_before_it_goes() {
    let bundle = |n: u32| {
        let mut b = numbered_bundle(n);
        b["created_at"] = json!(format!("2025-01-01T00:0{n}:00.000000Z"));
        b
    };
    let live = Arc::new(Mutex::new((1..=4).map(bundle).collect::<Vec<Value>>()));
    let asked: Arc<Mutex<Vec<HashMap<String, String>>>> = Arc::default();
    let (served, queries) = (live.clone(), asked.clone());
    let stand = StandIn::start(move |seen| {
        let query: HashMap<String, String> = url::Url::parse(&format!("http://x{}", seen.target))
            .unwrap()
            .query_pairs()
            .into_owned()
            .collect();
        queries.lock().push(query.clone());
        let number =
            |key: &str, default: usize| query.get(key).map_or(default, |v| v.parse().unwrap());
        let (page, size) = (number("page", 1), number("size", 100));
        let mut items = served.lock().clone();
        match query.get("search").map(String::as_str) {
            None => {}
            Some(search) => {
                let Some(from) = search
                    .strip_prefix("created_at >= '")
                    .and_then(|rest| rest.strip_suffix('\''))
                else {
                    return Behaviour::Answer(
                        400,
                        json!({"kind": "Error", "reason": "unsupported search"}).to_string(),
                    );
                };
                items.retain(|b| b["created_at"].as_str().unwrap() >= from);
            }
        }
        if let Some(order) = query.get("orderBy") {
            assert_eq!(order, "created_at");
            items.sort_by(|a, b| a["created_at"].as_str().cmp(&b["created_at"].as_str()));
        }
        let total = items.len();
        let page_items: Vec<Value> = items
            .into_iter()
            .skip((page - 1) * size)
            .take(size)
            .collect();
        // The first request read: the first bundle goes, as its cluster is
        // deleted while the list pages.
        if queries.lock().len() == 1 {
            served.lock().remove(0);
        }
        let body = json!({"kind": "ResourceBundleList", "page": page, "size": page_items.len(),
            "total": total, "items": page_items});
        Behaviour::Answer(200, body.to_string())
    })
    .await;
    let (grpc, address) = StandInServer::start().await;
    let _events = grpc.next_subscription();
    let h = harness("maestro");
    let mut cfg = stream_config(&stand, &address, Duration::from_secs(30));
    cfg.http.page_size = 2;
    let source = MaestroSource::new(cfg, h.ctx.clone()).unwrap();
    let task = tokio::spawn(maestro::stream::run_configured(source));
    until("the first list", Duration::from_secs(10), || h.up() == 1).await;
    let listed: std::collections::BTreeSet<String> = readings(&h.sink.take())
        .into_iter()
        .filter(|(hop, _, _)| *hop == Hop::MaestroBundle)
        .map(|(_, object, _)| object)
        .collect();
    for live in ["work-2", "work-3", "work-4"] {
        assert!(
            listed.contains(live),
            "{live} was never read: {listed:?}; requests {:?}",
            asked.lock()
        );
    }
    // Every request after the first asked from the last creation time read.
    let asked = asked.lock().clone();
    assert!(asked.len() >= 3, "{asked:?}");
    assert!(!asked[0].contains_key("search"), "{asked:?}");
    assert!(
        asked[1..].iter().all(|q| q
            .get("search")
            .is_some_and(|s| s.starts_with("created_at >= '"))
            && q.get("page").map(String::as_str) == Some("1")),
        "{asked:?}"
    );
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_stream_is_down_until_resubscribed_and_relisted() {
    let listed = list(vec![rest_bundle(true, 10, "2025-01-01T00:05:00Z")]);
    let stand = StandIn::start(move |_| Behaviour::Answer(200, listed.clone())).await;
    let (grpc, address) = StandInServer::start().await;
    // No events prepared: the first subscription stays silent.
    let (source, h) = source_on(&stand, &address, "maestro");
    let task = tokio::spawn(maestro::stream::run_configured(source));
    until("the first list", Duration::from_secs(10), || h.up() == 1).await;
    // Past the heartbeat deadline the source is down and subscribes again.
    until("the source down", Duration::from_secs(10), || h.up() == 0).await;
    assert!(h.errors(hcp_flow::metrics::exporter::RequestErrorKind::timeout) >= 1);
    // The next subscription hears heartbeats: up again, after a new list.
    let lists_before = stand.seen().len();
    let events = grpc.next_subscription();
    let beat = tokio::spawn(async move {
        while events.send(Ok(heartbeat())).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    until("the source up again", Duration::from_secs(10), || {
        h.up() == 1
    })
    .await;
    assert!(
        stand.seen().len() > lists_before,
        "no re-list after resubscribing"
    );
    // Up and staying up on heartbeats alone, with no list meanwhile.
    let lists = stand.seen().len();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(h.up(), 1);
    assert_eq!(stand.seen().len(), lists, "the stream's source polled");
    assert!(grpc.calls.lock().sources.len() >= 2);
    beat.abort();
    task.abort();
}

// ---------------------------------------------------------------------------
// The simulated world's stream.

const SPEED: f64 = 60.0;

pub(crate) fn world_config() -> WorldConfig {
    WorldConfig {
        clusters: 100,
        speed: SPEED,
        seed: 11,
        faults: false,
        churn: true,
        latency: LatencyModel::none(),
        ..testworld::demo(100, 11)
    }
}

const MAESTRO_HOPS: [Hop; 4] = [
    Hop::MaestroBundle,
    Hop::Manifestwork,
    Hop::HostedCluster,
    Hop::NodePool,
];

pub(crate) fn phases(store: &hcp_flow::store::Store) -> BTreeMap<String, BTreeMap<Hop, Phase>> {
    store.with_timelines(|timelines| {
        timelines
            .map(|t| {
                let hops = t.hops.iter().map(|(hop, h)| (*hop, h.phase)).collect();
                (t.cluster_id.clone(), hops)
            })
            .collect()
    })
}

/// The names of the bundles the exporter holds for `cluster`.
fn bundles_of(store: &hcp_flow::store::Store, cluster: &str) -> Vec<String> {
    store.with_timelines(|timelines| {
        timelines
            .filter(|t| t.cluster_id == cluster)
            .flat_map(|t| {
                t.hop(Hop::MaestroBundle)
                    .into_iter()
                    .flat_map(|h| {
                        h.objects
                            .keys()
                            .map(|(via, name)| format!("{via:?}:{name}"))
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    })
}

fn phase_of(truth: &Truth, cluster: &str, hop: Hop) -> Option<Phase> {
    truth
        .cluster(cluster)
        .and_then(|c| c.hops.get(&hop))
        .map(|h| h.phase)
}

/// Maestro's hops that held for a second (and the read window of bundles
/// first heard) after `window` (with
/// `only_changed`, those that changed or appeared in it), compared with what
/// the exporter shows: returns how many were compared, how many of those changed during the window (only the
/// stream can have told the exporter: no list runs meanwhile), and the
/// disagreements.
pub(crate) async fn mismatches(
    world: &hcp_flow::sim::World,
    store: &hcp_flow::store::Store,
    window: Duration,
    only_changed: bool,
) -> (usize, usize, Vec<String>) {
    let before = world.truth();
    tokio::time::sleep(window).await;
    let changed_by = world.truth();
    // A change of a bundle the exporter knows shows within a second; a
    // bundle first heard is read by id within the source's read window.
    tokio::time::sleep(Duration::from_secs(1) + maestro::UNREAD_WINDOW).await;
    let seen = phases(store);
    let after = world.truth();
    let (mut compared, mut changed) = (0, 0);
    let mut out = Vec::new();
    for cluster in &after.clusters {
        let id = &cluster.cluster_id;
        // A cluster whose bundles are being deleted: the nested hops read
        // the bundle's deletion mark as the list's reading does; the
        // world's truth keeps their last content, a difference this test
        // is not about.
        if [&before, &changed_by, &after]
            .iter()
            .any(|t| phase_of(t, id, Hop::MaestroBundle) == Some(Phase::Deleting))
        {
            continue;
        }
        for hop in MAESTRO_HOPS {
            let Some(truth_hop) = cluster.hops.get(&hop) else {
                continue;
            };
            if phase_of(&changed_by, id, hop) != Some(truth_hop.phase) {
                continue;
            }
            let changed_now = phase_of(&before, id, hop) != Some(truth_hop.phase);
            if only_changed && !changed_now {
                continue;
            }
            compared += 1;
            changed += usize::from(changed_now);
            let shown = seen.get(id).and_then(|h| h.get(&hop));
            if shown != Some(&truth_hop.phase) {
                // The rest of both sides, so a failure says which reading
                // is missing (the bundle's, or only what it carries).
                let truth_hops: BTreeMap<Hop, Phase> =
                    cluster.hops.iter().map(|(h, t)| (*h, t.phase)).collect();
                out.push(format!(
                    "{id} {hop}: truth {:?}, exporter {shown:?} (truth {truth_hops:?}, exporter {:?}, bundles {:?}, created {})",
                    truth_hop.phase,
                    seen.get(id),
                    bundles_of(store, id),
                    cluster.created_at,
                ));
            }
        }
    }
    (compared, changed, out)
}

pub(crate) fn sample(body: &str, family: &str, labels: &[&str]) -> f64 {
    body.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_world_heard_over_the_stream_survives_a_drop_and_malformed_events() {
    // Its assertions are latencies (the exporter within seconds of the
    // world): a heavy share, in the latency pass (docs/development.md).
    let _machine = crate::common::load::heavy();
    let mut w = testworld::start_streaming(world_config()).await;
    let endpoints = w.endpoints.clone().unwrap();
    // No list between the ones after each subscription, and no management
    // cluster watch: the HostedClusters and NodePools are seen only through
    // Maestro's feedback.
    let maestro = w.config.sources.maestro.as_mut().unwrap();
    maestro.http.full_relist_interval = Duration::from_secs(3600);
    w.config.sources.kube.clear();
    let exporter = exporter::of_world(&w).serve().await;
    let stream = w.world.stream_control().clone();
    until("the sources' first sync", Duration::from_secs(30), || {
        exporter.store.ready()
    })
    .await;
    until("a subscription", Duration::from_secs(10), || {
        stream.subscriptions() >= 1
    })
    .await;

    // After the first list (the next is an hour away) Maestro's hops agree
    // with the truth within a second of a change: only the stream can keep
    // them so.
    let window = Duration::from_secs(4);
    let (compared, changed, wrong) = mismatches(&w.world, &exporter.store, window, false).await;
    assert!(compared > 40, "too few hops compared ({compared})");
    assert!(
        changed >= 3,
        "too few hops changed to prove anything ({changed})"
    );
    assert!(
        wrong.is_empty(),
        "{} of {compared} differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert!(stream.events() > 0, "the world sent no status event");

    // The stream drops: the source goes down, subscribes again, re-lists,
    // and nothing is lost.
    let subscriptions = stream.subscriptions();
    w.world.inject(Fault::StreamDrop);
    // How soon is not the point here (the reconnect backs off, the list is
    // paced): that nothing is lost once it is up again is.
    until("a new subscription", Duration::from_secs(20), || {
        stream.subscriptions() > subscriptions
    })
    .await;
    until("the source up again", Duration::from_secs(30), || {
        exporter
            .store
            .health()
            .status()
            .iter()
            .any(|s| s.source == "maestro" && s.up)
    })
    .await;
    let (compared, changed, wrong) = mismatches(&w.world, &exporter.store, window, false).await;
    assert!(
        compared > 40 && changed >= 3,
        "{compared} compared, {changed} changed"
    );
    assert!(
        wrong.is_empty(),
        "after the drop, {} of {compared} differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );

    // Malformed events: counted, skipped, the source stays up.
    w.world.inject(Fault::MalformedEvents { count: 10 });
    let base = exporter.url.clone();
    let mut body = String::new();
    until_async_metrics(&base, &mut body, |b| {
        sample(
            b,
            "hcpflow_unknown_values_total",
            &["source=\"maestro\"", "field=\"cloudevent."],
        ) >= 10.0
    })
    .await;
    assert_eq!(
        sample(&body, "hcpflow_source_up", &["source=\"maestro\""]),
        1.0,
        "{body}"
    );
    let (_, _, wrong) = mismatches(&w.world, &exporter.store, window, false).await;
    assert!(
        wrong.is_empty(),
        "after malformed events: {}",
        wrong.join("\n")
    );

    // Nothing was published, ever; and the REST base still answers (the
    // stream's source lists there).
    assert_eq!(stream.publishes(), 0);
    assert!(endpoints.maestro.as_str().starts_with("http://127.0.0.1"));
}

async fn until_async_metrics(base: &str, body: &mut String, cond: impl Fn(&str) -> bool) {
    let start = Instant::now();
    loop {
        *body = reqwest::get(format!("{base}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if cond(body) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "timed out:\n{body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulated_stream_refuses_a_wrong_token_and_hears_only_its_source() {
    let w = testworld::start_streaming(world_config()).await;
    let endpoints = w.endpoints.clone().unwrap();
    let stream = w.world.stream_control().clone();
    stream.require_token(Some("sesame".to_string()));
    let channel = tonic::transport::Endpoint::from_shared(endpoints.maestro_grpc.to_string())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let subscribe = |source: &str, token: Option<&str>| {
        let mut grpc = tonic::client::Grpc::new(channel.clone());
        let mut req = tonic::Request::new(PbSubscribe {
            source: source.to_string(),
            ..PbSubscribe::default()
        });
        if let Some(t) = token {
            req.metadata_mut()
                .insert("authorization", format!("Bearer {t}").parse().unwrap());
        }
        async move {
            grpc.ready().await.unwrap();
            grpc.server_streaming(
                req,
                http::uri::PathAndQuery::from_static(
                    "/io.cloudevents.v1.CloudEventService/Subscribe",
                ),
                tonic_prost::ProstCodec::<PbSubscribe, PbEvent>::default(),
            )
            .await
        }
    };
    let refused = subscribe(hcp_flow::sim::MAESTRO_SOURCE_ID, Some("wrong"))
        .await
        .err()
        .unwrap();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    let refused = subscribe(hcp_flow::sim::MAESTRO_SOURCE_ID, None)
        .await
        .err()
        .unwrap();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);

    // Another source's subscriber hears heartbeats only; ours hears status.
    stream.set_heartbeat(Duration::from_millis(200));
    let other = subscribe("someone-else", Some("sesame")).await.unwrap();
    assert!(other.metadata().get("subscription-id").is_some());
    let ours = subscribe(hcp_flow::sim::MAESTRO_SOURCE_ID, Some("sesame"))
        .await
        .unwrap();
    let read = |mut s: tonic::Streaming<PbEvent>| async move {
        let mut types = Vec::new();
        let until = Instant::now() + Duration::from_secs(4);
        while Instant::now() < until {
            match tokio::time::timeout(Duration::from_millis(500), s.message()).await {
                Ok(Ok(Some(ev))) => types.push(ev),
                Ok(_) => break,
                Err(_) => {}
            }
        }
        types
    };
    let (theirs, mine) = tokio::join!(read(other.into_inner()), read(ours.into_inner()));
    assert!(
        theirs.iter().all(|e| e.r#type.ends_with(".heartbeat")),
        "another source heard status"
    );
    assert!(theirs.iter().any(|e| e.r#type.ends_with(".heartbeat")));
    // Heartbeats carry spec version and id only.
    for hb in theirs.iter() {
        assert!(hb.attributes.is_empty() && hb.binary_data.is_none() && hb.source.is_empty());
    }
    let status: Vec<&PbEvent> = mine.iter().filter(|e| e.r#type == STATUS_TYPE).collect();
    assert!(
        !status.is_empty(),
        "no status event in 4 s of a world at speed {SPEED}"
    );
    for ev in status {
        assert!(ev.attributes["ce-resourceid"].ce_string.is_some());
        assert!(ev.attributes["ce-time"].ce_timestamp.is_some());
        assert_eq!(
            ev.attributes["contenttype"].ce_string.as_deref(),
            Some("application/json")
        );
        let payload: Value = serde_json::from_slice(ev.binary_data.as_deref().unwrap()).unwrap();
        assert!(payload["conditions"].is_array(), "{payload}");
    }
}

/// A shard's sink in a stream test: follows `followed` only
/// (docs/design/08-scopes-and-scale-out.md §8.3).
struct ShardSink {
    recorder: Arc<crate::common::source::Recorder>,
    followed: &'static str,
}

impl hcp_flow::sources::ObservationSink for ShardSink {
    fn apply(&self, batch: hcp_flow::model::Batch) {
        self.recorder.apply(batch);
    }

    fn follows(&self, cluster_id: &str) -> bool {
        cluster_id == self.followed
    }
}

/// An event names its bundle by id, not by cluster: a shard that heard
/// another shard's bundle on the stream used to take it for a bundle no
/// list had shown and read it by id, every time, so a shard of n read
/// back (n-1)/n of all status events. The list showed whose bundle it is;
/// its events are now dropped unread (docs/design/08-scopes-and-scale-out.md §8.3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_drops_another_shards_events_without_reading_them_by_id() {
    // cluster-1's bundle is another shard's, cluster-2's this shard's.
    let listed = list(vec![
        rest_bundle(false, 10, "2025-01-01T00:05:00Z"),
        numbered_bundle(2),
    ]);
    let searches = Arc::new(Mutex::new(Vec::new()));
    let seen_searches = searches.clone();
    let stand = StandIn::start(move |seen| {
        if seen.target.contains("search=") {
            seen_searches.lock().push(seen.target.clone());
        }
        Behaviour::Answer(200, listed.clone())
    })
    .await;
    let (grpc, address) = StandInServer::start().await;
    let events = grpc.next_subscription();
    let h = harness("maestro");
    let mut ctx = h.ctx.clone();
    ctx.sink = Arc::new(ShardSink {
        recorder: h.sink.clone(),
        followed: "cluster-2",
    });
    let cfg = stream_config(&stand, &address, Duration::from_secs(30));
    let task = tokio::spawn(maestro::stream::run_configured(
        MaestroSource::new(cfg, ctx).unwrap(),
    ));
    until("the first list", Duration::from_secs(10), || h.up() == 1).await;
    h.sink.take();

    // Another shard's bundle turns Available, twice; then this shard's
    // bundle is heard, which shows every event before it was applied.
    let at = "2025-01-01T00:20:00Z".parse::<jiff::Timestamp>().unwrap();
    events.send(Ok(available_event())).await.unwrap();
    events
        .send(Ok(status_event(
            BUNDLE_ID,
            21,
            at.as_second(),
            &payload(true, 21),
        )))
        .await
        .unwrap();
    events
        .send(Ok(status_event(
            &numbered_id(2),
            30,
            at.as_second(),
            &payload(false, 30),
        )))
        .await
        .unwrap();
    let mut streamed = Vec::new();
    until("this shard's event", Duration::from_secs(10), || {
        streamed.extend(h.sink.take());
        !readings(&streamed).is_empty()
    })
    .await;
    // The window in which a bundle first heard would be read by id.
    tokio::time::sleep(Duration::from_millis(300)).await;
    streamed.extend(h.sink.take());
    let clusters: std::collections::BTreeSet<ClusterKey> = streamed
        .iter()
        .flat_map(|b| &b.observations)
        .map(|o| o.key.clone())
        .collect();
    assert_eq!(clusters, [ClusterKey::Id("cluster-2".into())].into());
    assert!(
        searches.lock().is_empty(),
        "another shard's bundle read by id: {:?}",
        searches.lock()
    );
    task.abort();
}

/// Events heard while a first list pages, for bundles on pages it has not
/// reached yet, wait for the list; those the list then shows as another
/// shard's are not read by id after it (a shard of three read thousands
/// back at fleet scale, docs/performance.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_shard_reads_none_of_another_shards_bundles_heard_during_its_first_list() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    // This shard's bundle was created first, so the list reaches it first.
    let own = numbered_bundle(2);
    let mut other = rest_bundle(false, 10, "2025-01-01T00:05:00Z");
    other["created_at"] = json!("2025-01-01T00:01:00.000000Z");
    let all = [own, other];
    let searches = Arc::new(Mutex::new(Vec::new()));
    let seen_searches = searches.clone();
    let release = Arc::new(AtomicBool::new(false));
    let released = release.clone();
    let asked = Arc::new(AtomicUsize::new(0));
    let first_asked = asked.clone();
    let stand = StandIn::start(move |seen| {
        if seen.target.contains("search=id") {
            seen_searches.lock().push(seen.target.clone());
            return Behaviour::Answer(200, list(Vec::new()));
        }
        // The list pages by creation time (`created_at >= '…'`).
        let url = url::Url::parse(&format!("http://standin{}", seen.target)).unwrap();
        let query: HashMap<String, String> = url.query_pairs().into_owned().collect();
        let page: usize = query["page"].parse().unwrap();
        let size: usize = query["size"].parse().unwrap();
        let from = query
            .get("search")
            .and_then(|s| s.strip_prefix("created_at >= '"))
            .and_then(|r| r.strip_suffix('\''));
        let matching: Vec<&Value> = all
            .iter()
            .filter(|b| from.is_none_or(|f| b["created_at"].as_str().unwrap() >= f))
            .collect();
        if from.is_none() && page == 1 {
            // The first page waits until the test has sent its events.
            first_asked.fetch_add(1, Ordering::SeqCst);
            let began = Instant::now();
            while !released.load(Ordering::SeqCst) && began.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let items: Vec<&Value> = matching
            .iter()
            .skip((page - 1) * size)
            .take(size)
            .copied()
            .collect();
        let body = json!({"kind": "ResourceBundleList", "page": page, "size": items.len(),
            "total": matching.len(), "items": items});
        Behaviour::Answer(200, body.to_string())
    })
    .await;
    let (grpc, address) = StandInServer::start().await;
    let events = grpc.next_subscription();
    let h = harness("maestro");
    let mut ctx = h.ctx.clone();
    ctx.sink = Arc::new(ShardSink {
        recorder: h.sink.clone(),
        followed: "cluster-2",
    });
    let mut cfg = stream_config(&stand, &address, Duration::from_secs(30));
    cfg.http.page_size = 1;
    let task = tokio::spawn(maestro::stream::run_configured(
        MaestroSource::new(cfg, ctx).unwrap(),
    ));
    until("the first page asked", Duration::from_secs(10), || {
        asked.load(Ordering::SeqCst) > 0
    })
    .await;
    // cluster-1's bundle changes before the list reaches its page.
    events.send(Ok(available_event())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    release.store(true, Ordering::SeqCst);
    until("the first list", Duration::from_secs(10), || h.up() == 1).await;
    // Bundles heard during a first list are read as soon as it ends.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        searches.lock().is_empty(),
        "another shard's bundle read by id: {:?}",
        searches.lock()
    );
    task.abort();
}
