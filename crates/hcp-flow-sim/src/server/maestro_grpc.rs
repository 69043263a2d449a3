//! Maestro's gRPC CloudEvents service (`io.cloudevents.v1.CloudEventService`)
//! on its own port, with the real server's wire shape (docs/design/11-simulated-world.md
//! §11.8): `Subscribe` sends the `subscription-id` header, then the status
//! of each bundle of the subscribed source as it changes — sdk-go's
//! attribute layout, the payload as JSON in `binary_data`, `Deleted` True
//! when the bundle goes — and a heartbeat (type and id only) every
//! heartbeat interval. Nothing is sent for what happened before the
//! subscription: the subscriber lists. Another source hears nothing.
//!
//! With a token required, a call without `authorization: Bearer <token>`
//! fails `Unauthenticated`. `Publish` is refused and counted, so a test
//! can prove no client published.
//!
//! Faults: [`Fault::StreamDrop`](crate::Fault::StreamDrop) ends every
//! open stream (`Unavailable`), and
//! [`Fault::MalformedEvents`](crate::Fault::MalformedEvents) sends
//! broken events before the next real ones.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use crate::plan::{BundlePlan, Ms, Plan};
use crate::{World, wire};
use pb::cloud_event::Data;
use pb::cloud_event_attribute_value::Attr;
use pb::{
    CloudEvent, CloudEventAttributeValue as AttributeValue, PublishRequest, SubscriptionRequest,
};

/// The simulated Maestro's own copy of the messages generated from Maestro's
/// proto (build.rs): not the source's types, so a mistake on one side is
/// not shared by the other (docs/design/10-upstream-facts.md §10.12).
#[allow(clippy::all, clippy::pedantic)]
mod pb {
    include!(concat!(env!("OUT_DIR"), "/io.cloudevents.v1.rs"));
}

/// The service's paths and the names sdk-go gives event types and
/// attributes (sdk-go `generic/types/types.go`), written here apart from
/// the source's, for the same reason.
mod names {
    pub const SUBSCRIBE_PATH: &str = "/io.cloudevents.v1.CloudEventService/Subscribe";
    pub const PUBLISH_PATH: &str = "/io.cloudevents.v1.CloudEventService/Publish";
    pub const HEARTBEAT_TYPE: &str = "io.open-cluster-management.cloudevents.heartbeat";
    pub const STATUS_UPDATE_TYPE: &str =
        "io.open-cluster-management.works.v1alpha1.manifestbundles.status.update_request";
}

/// Attribute keys as sdk-go's protobuf writer names them: `contenttype`
/// bare, every extension `ce-<name>`.
mod attr {
    pub const CONTENT_TYPE: &str = "contenttype";
    pub const TIME: &str = "ce-time";
    pub const RESOURCE_ID: &str = "ce-resourceid";
    pub const RESOURCE_VERSION: &str = "ce-resourceversion";
    pub const SEQUENCE_ID: &str = "ce-sequenceid";
    pub const STATUS_HASH: &str = "ce-statushash";
    pub const CLUSTER_NAME: &str = "ce-clustername";
    pub const ORIGINAL_SOURCE: &str = "ce-originalsource";
    pub const METADATA: &str = "ce-metadata";
    pub const LOG_TRACING: &str = "ce-logtracing";
}

fn string(s: impl Into<String>) -> AttributeValue {
    AttributeValue {
        attr: Some(Attr::CeString(s.into())),
    }
}

fn integer(i: i32) -> AttributeValue {
    AttributeValue {
        attr: Some(Attr::CeInteger(i)),
    }
}

fn timestamp(t: jiff::Timestamp) -> AttributeValue {
    AttributeValue {
        attr: Some(Attr::CeTimestamp(prost_types::Timestamp {
            seconds: t.as_second(),
            nanos: t.subsec_nanosecond(),
        })),
    }
}

/// The source id the simulated bundles were created by (what Clusters
/// Service subscribes as, and so must hcp-flow).
pub const SOURCE_ID: &str = "clusters-service";

/// How often a subscription compares the world with what it sent.
const TICK: Duration = Duration::from_millis(100);

/// The stream's switches and counters.
pub struct StreamControl {
    /// Bumped to end every open stream.
    drops: watch::Sender<u64>,
    malformed: AtomicU32,
    publishes: AtomicU64,
    subscriptions: AtomicU64,
    events: AtomicU64,
    heartbeat: Mutex<Duration>,
    token: Mutex<Option<String>>,
}

impl Default for StreamControl {
    fn default() -> Self {
        StreamControl {
            drops: watch::Sender::new(0),
            malformed: AtomicU32::new(0),
            publishes: AtomicU64::new(0),
            subscriptions: AtomicU64::new(0),
            events: AtomicU64::new(0),
            heartbeat: Mutex::new(Duration::from_secs(10)),
            token: Mutex::new(None),
        }
    }
}

impl StreamControl {
    pub fn drop_streams(&self) {
        self.drops.send_modify(|n| *n += 1);
    }

    pub fn send_malformed(&self, count: u32) {
        self.malformed.fetch_add(count, Ordering::SeqCst);
    }

    /// `Publish` calls received (all refused).
    pub fn publishes(&self) -> u64 {
        self.publishes.load(Ordering::SeqCst)
    }

    /// `Subscribe` calls accepted.
    pub fn subscriptions(&self) -> u64 {
        self.subscriptions.load(Ordering::SeqCst)
    }

    /// Status events sent, malformed ones included.
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::SeqCst)
    }

    pub fn set_heartbeat(&self, every: Duration) {
        *self.heartbeat.lock() = every;
    }

    pub fn require_token(&self, token: Option<String>) {
        *self.token.lock() = token;
    }
}

/// Serve the stream on `listener` until the runtime ends.
pub(crate) async fn serve(world: World, listener: TcpListener) {
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    if let Err(e) = tonic::transport::Server::builder()
        .serve_with_incoming(Service { world }, incoming)
        .await
    {
        tracing::warn!(error = %e, "simulated Maestro gRPC server stopped");
    }
}

#[derive(Clone)]
struct Service {
    world: World,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type EventStream = Pin<Box<dyn Stream<Item = Result<CloudEvent, tonic::Status>> + Send>>;

impl tower::Service<http::Request<tonic::body::Body>> for Service {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let world = self.world.clone();
        match req.uri().path() {
            names::SUBSCRIBE_PATH => Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::<
                    CloudEvent,
                    SubscriptionRequest,
                >::default());
                Ok(grpc.server_streaming(Subscribe { world }, req).await)
            }),
            names::PUBLISH_PATH => Box::pin(async move {
                // `google.protobuf.Empty` is `()` in prost.
                let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::<
                    (),
                    PublishRequest,
                >::default());
                Ok(grpc.unary(Publish { world }, req).await)
            }),
            _ => Box::pin(
                async move { Ok(tonic::Status::unimplemented("no such method").into_http()) },
            ),
        }
    }
}

fn authorized<T>(world: &World, req: &tonic::Request<T>) -> Result<(), tonic::Status> {
    let ctl = world.stream_control();
    let Some(token) = ctl.token.lock().clone() else {
        return Ok(());
    };
    let sent = req
        .metadata()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    if sent == Some(format!("Bearer {token}").as_str()) {
        Ok(())
    } else {
        Err(tonic::Status::unauthenticated("invalid token"))
    }
}

struct Publish {
    world: World,
}

impl tonic::server::UnaryService<PublishRequest> for Publish {
    type Response = ();
    type Future = BoxFuture<Result<tonic::Response<()>, tonic::Status>>;

    fn call(&mut self, req: tonic::Request<PublishRequest>) -> Self::Future {
        let ctl = self.world.stream_control();
        ctl.publishes.fetch_add(1, Ordering::SeqCst);
        tracing::warn!("a client published to the simulated Maestro");
        let answer = authorized(&self.world, &req).and(Err(tonic::Status::permission_denied(
            "the simulated Maestro takes no Publish",
        )));
        Box::pin(async move { answer })
    }
}

struct Subscribe {
    world: World,
}

impl tonic::server::ServerStreamingService<SubscriptionRequest> for Subscribe {
    type Response = CloudEvent;
    type ResponseStream = EventStream;
    type Future = BoxFuture<Result<tonic::Response<EventStream>, tonic::Status>>;

    fn call(&mut self, req: tonic::Request<SubscriptionRequest>) -> Self::Future {
        let world = self.world.clone();
        Box::pin(async move {
            authorized(&world, &req)?;
            let source = req.into_inner().source;
            if source.is_empty() {
                return Err(tonic::Status::invalid_argument(
                    "the source and cluster name of subscribe option cannot both be empty",
                ));
            }
            let ctl = world.stream_control().clone();
            let n = ctl.subscriptions.fetch_add(1, Ordering::SeqCst);
            let (tx, rx) = mpsc::channel(100);
            tokio::spawn(broadcast(world, source, tx));
            let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
            let mut response = tonic::Response::new(Box::pin(stream) as EventStream);
            if let Ok(id) = format!("sim-subscription-{n}").parse() {
                response.metadata_mut().insert("subscription-id", id);
            }
            Ok(response)
        })
    }
}

/// One subscriber: what changed since the subscription, as status events,
/// and heartbeats, until the subscriber leaves or the stream is dropped.
async fn broadcast(
    world: World,
    source: String,
    tx: mpsc::Sender<Result<CloudEvent, tonic::Status>>,
) {
    let ctl = world.stream_control().clone();
    let mut drops = ctl.drops.subscribe();
    drops.mark_unchanged();
    let ours = source == SOURCE_ID;
    let mut sent = if ours {
        snapshot(&world)
    } else {
        Sent::default()
    };
    let mut tick = tokio::time::interval(TICK);
    let heartbeat_every = *ctl.heartbeat.lock();
    let mut heartbeat = tokio::time::interval(heartbeat_every);
    heartbeat.tick().await;
    let mut beats = 0u64;
    loop {
        let out = tokio::select! {
            _ = drops.changed() => {
                let _ = tx.send(Err(tonic::Status::unavailable("the simulated Maestro dropped the stream"))).await;
                return;
            }
            () = tx.closed() => return,
            _ = heartbeat.tick() => {
                beats += 1;
                vec![CloudEvent {
                    id: format!("heartbeat-{beats}"),
                    spec_version: "1.0".to_string(),
                    r#type: names::HEARTBEAT_TYPE.to_string(),
                    ..CloudEvent::default()
                }]
            }
            _ = tick.tick(), if ours => {
                let mut out = Vec::new();
                while ctl.malformed.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
                    out.push(malformed(out.len()));
                }
                out.extend(changes(&world, &mut sent));
                ctl.events.fetch_add(out.len() as u64, Ordering::SeqCst);
                out
            }
        };
        for ev in out {
            // A full buffer blocks, as Maestro's broadcaster does.
            if tx.send(Ok(ev)).await.is_err() {
                return;
            }
        }
    }
}

/// What one subscription has sent, per plan (cluster) of the world: the
/// served status of each of its bundles. Keyed by the plan's allocation,
/// which the entry keeps alive so the address is never another plan's, so a
/// tick costs one cheap lookup per cluster, not a hash of every bundle id:
/// walking the fleet hashing 120,000 ids ten times a second took the
/// simulated world's whole core at 50,000 clusters (docs/performance.md).
#[derive(Default)]
struct Sent {
    plans: HashMap<usize, PlanSent, std::hash::BuildHasherDefault<AddressHasher>>,
    /// Bumped every walk; a plan not seen in the last walk is gone.
    generation: u64,
}

struct PlanSent {
    /// Kept alive so its address is never another plan's, and read for
    /// the consumer and deletion time of a bundle that goes.
    plan: std::sync::Arc<Plan>,
    seen: u64,
    /// Each bundle sent: its id and the status version sent.
    bundles: Vec<(String, (Ms, Option<Ms>))>,
}

/// Allocation addresses are unique and 8-aligned: a multiply spreads them.
#[derive(Default)]
struct AddressHasher(u64);

impl std::hash::Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64 >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// What each bundle's status was at the subscription.
fn snapshot(world: &World) -> Sent {
    let now = world.now_ms();
    let mut sent = Sent::default();
    for p in world.plans(now).iter() {
        let bundles = p
            .bundles_at(now)
            .map(|b| (b.id.clone(), version(p, b, now)))
            .collect();
        sent.plans.insert(
            std::sync::Arc::as_ptr(p) as usize,
            PlanSent {
                plan: p.clone(),
                seen: 0,
                bundles,
            },
        );
    }
    sent
}

/// What identifies one served status of a bundle: its update time and
/// deletion mark.
fn version(p: &Plan, b: &BundlePlan, t: Ms) -> (Ms, Option<Ms>) {
    (p.updated_at(b, t), p.bundle_deleted_at(b, t))
}

/// The status events for what changed since `sent`, which is updated.
fn changes(world: &World, sent: &mut Sent) -> Vec<CloudEvent> {
    let now = world.now_ms();
    let plans = world.plans(now);
    let mut out = Vec::new();
    let mut gone = Vec::new();
    sent.generation += 1;
    let generation = sent.generation;
    for p in plans.iter() {
        let entry = sent
            .plans
            .entry(std::sync::Arc::as_ptr(p) as usize)
            .or_insert_with(|| PlanSent {
                plan: p.clone(),
                seen: generation,
                bundles: Vec::new(),
            });
        entry.seen = generation;
        let before = entry.bundles.len();
        let mut alive = vec![false; before];
        for b in p.bundles_at(now) {
            let v = version(p, b, now);
            let known = entry.bundles.iter().position(|(id, _)| *id == b.id);
            if let Some(i) = known {
                alive[i] = true;
                if entry.bundles[i].1 == v {
                    continue;
                }
            }
            // A bundle with no status yet is not broadcast: Maestro sends
            // status, and there is none.
            let Some(rest) = wire::bundle(p, b, now) else {
                continue;
            };
            if rest["status"].is_null() {
                continue;
            }
            match known {
                Some(i) => entry.bundles[i].1 = v,
                None => entry.bundles.push((b.id.clone(), v)),
            }
            out.push(status_event(&rest, p.shard().consumer_name, false));
        }
        // Sent before and no longer served.
        let mut i = 0;
        entry.bundles.retain(|(id, _)| {
            let keep = i >= before || alive[i];
            i += 1;
            if !keep {
                gone.push((p.clone(), id.clone()));
            }
            keep
        });
    }
    // A plan no longer in the world: every bundle it had sent is gone.
    sent.plans.retain(|_, plan| {
        if plan.seen != generation {
            let p = &plan.plan;
            gone.extend(plan.bundles.drain(..).map(|(id, _)| (p.clone(), id)));
        }
        plan.seen == generation
    });
    for (p, id) in gone {
        out.push(deleted_event(&p, &id, now));
    }
    out
}

/// The last status of a bundle that is gone, as the work agent sends it
/// once the work's finalizers are removed (sdk-go's agent client and
/// codec): the agent's source and cluster name as in every status, its
/// ObjectMeta with the `deletionTimestamp` the deletion set, and a
/// `Deleted` condition True. sdk-go's agent codec writes no
/// `ce-deletiontimestamp` extension on a status (only a source's spec
/// events carry it), so neither does this.
fn deleted_event(p: &Plan, id: &str, now: Ms) -> CloudEvent {
    let b = p.bundles.iter().find(|b| b.id == id);
    let created = b.map(|b| wire::time(b.created, 0));
    // Gone means its deletion time is past; `now` only if the plan lost
    // the bundle some other way.
    let deleted = b.and_then(|b| p.bundle_deleted_at(b, now)).unwrap_or(now);
    let rest = json!({
        "id": id,
        "updated_at": wire::time(now, 6),
        "deleted_at": wire::time(deleted, 0),
        "metadata": { "creationTimestamp": created },
        "status": {
            "SequenceID": ((now as u64) << 16).to_string(),
            "conditions": [{
                "type": "Deleted", "status": "True", "reason": "ManifestsDeleted",
                "message": format!("The manifests are deleted from the cluster {}", p.shard().consumer_name),
                "lastTransitionTime": wire::time(now, 0),
            }],
            "resourceStatus": [],
        },
    });
    status_event(&rest, p.shard().consumer_name, true)
}

/// The `maestro.resource.type` label Maestro puts on the works it sends
/// agents (the value of its own example status event).
const RESOURCE_TYPE: &str = "2d18a7dc-c731-5753-8aa9-6b2f22e3b12b";

/// The status event Maestro broadcasts for a bundle whose REST shape is
/// `rest`: attributes as sdk-go's protobuf writer places them, the
/// `ManifestBundleStatus` payload as JSON in `binary_data`.
fn status_event(rest: &Value, consumer: &str, deleted: bool) -> CloudEvent {
    let id = rest["id"].as_str().unwrap_or_default();
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let status = &rest["status"];
    let sequence = text(&status["SequenceID"]);
    let time: jiff::Timestamp = rest["updated_at"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let mut payload = json!({
        "conditions": status["conditions"],
        "resourceStatus": status["resourceStatus"],
    });
    if !deleted {
        payload["manifestBundle"] = json!({
            "manifests": rest["manifests"],
            "manifestConfigs": rest["manifest_configs"],
        });
    }
    // The work's ObjectMeta as the agent has it, as in Maestro's own example
    // status event: named by the resource id, labelled with Maestro's
    // resource type, not with Clusters Service's labels (no cluster id).
    let mut meta = json!({
        "name": id,
        "namespace": consumer,
        "uid": id,
        "resourceVersion": "0",
        "creationTimestamp": rest["metadata"]["creationTimestamp"],
        "labels": { "maestro.resource.type": RESOURCE_TYPE },
    });
    if let Some(d) = rest["deleted_at"].as_str() {
        meta["deletionTimestamp"] = json!(d);
    }
    let mut attributes = HashMap::new();
    let mut put = |k: &str, v: AttributeValue| {
        attributes.insert(k.to_string(), v);
    };
    put(attr::CONTENT_TYPE, string("application/json"));
    put(attr::TIME, timestamp(time));
    put(attr::RESOURCE_ID, string(id));
    put(attr::RESOURCE_VERSION, integer(1));
    put(attr::SEQUENCE_ID, string(sequence.clone()));
    put(attr::STATUS_HASH, string(format!("{sequence:0>64}")));
    put(attr::CLUSTER_NAME, string(consumer));
    put(attr::ORIGINAL_SOURCE, string("maestro"));
    put(attr::METADATA, string(meta.to_string()));
    put(attr::LOG_TRACING, string("{}"));
    CloudEvent {
        id: format!("{id}-{sequence}"),
        source: format!("{consumer}-work-agent"),
        spec_version: "1.0".to_string(),
        r#type: names::STATUS_UPDATE_TYPE.to_string(),
        attributes,
        data: Some(Data::BinaryData(payload.to_string().into_bytes().into())),
    }
}

/// A broken event of several kinds in turn: a payload that is not JSON,
/// no resource id, a type nobody knows, the payload as text, a metadata
/// attribute that is not JSON over a payload that is.
fn malformed(n: usize) -> CloudEvent {
    let mut ev = CloudEvent {
        id: format!("malformed-{n}"),
        source: "sim-work-agent".to_string(),
        spec_version: "1.0".to_string(),
        r#type: names::STATUS_UPDATE_TYPE.to_string(),
        attributes: HashMap::from([(
            attr::RESOURCE_ID.to_string(),
            string(format!("malformed-{n}")),
        )]),
        data: Some(Data::BinaryData(b"{\"conditions\": [".to_vec().into())),
    };
    match n % 5 {
        0 => {}
        1 => {
            ev.attributes.remove(attr::RESOURCE_ID);
        }
        2 => ev.r#type = "io.open-cluster-management.works.v1alpha1.frobnicate".to_string(),
        3 => ev.data = Some(Data::TextData("{}".to_string())),
        _ => {
            ev.attributes
                .insert(attr::METADATA.to_string(), string("{not json"));
            ev.attributes
                .insert(attr::SEQUENCE_ID.to_string(), string("minus one"));
            ev.data = Some(Data::BinaryData(
                br#"{"conditions":{"not":"a list"}}"#.to_vec().into(),
            ));
        }
    }
    ev
}
