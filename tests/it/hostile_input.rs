//! Hostile input, zero panics: property tests over every parser (RP, Clusters
//! Service, Maestro with its nested `jsonRaw`, the kube objects, the config
//! file), and a corpus of hostile bodies (tests/fixtures/hostile/) served to
//! every HTTP source through its real poller. Whatever arrives, the exporter
//! never panics, forgets no cluster on an answer that is not a list, and its
//! exposition stays one `promtool` accepts.

use crate::common::store;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{StatusCode, Uri, header};
use hcp_flow::config::{
    ClustersServiceApi, ClustersServiceConfig, Config, HttpSourceConfig, KubeSourceConfig,
    MaestroConfig, RpFrontendConfig,
};
use hcp_flow::metrics::exposition::Format;
use hcp_flow::model::{Batch, Change};
use hcp_flow::sources::clusters_service::{self, ClustersServiceSource, PollKind};
use hcp_flow::sources::http::{HttpClient, RawItem};
use hcp_flow::sources::kube::mapping::{MapperConfig, ToFacts};
use hcp_flow::sources::kube::objects as kube_objects;
use hcp_flow::sources::maestro::{self, MaestroSource};
use hcp_flow::sources::rp_frontend::{self, ArmList, RpFrontendSource};
use hcp_flow::sources::{ObservationSink, SourceContext};
use hcp_flow::store::Store;
use parking_lot::Mutex;
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestRunner};
use serde_json::{Value, json};
use url::Url;

use crate::common::promtool;

const SUB: &str = "6b690bec-0c16-4ecb-8f67-781caf40bba7";

// ---------------------------------------------------------------------------
// Generators: hostile strings, arbitrary JSON, and mutations of valid objects.

fn hostile_string() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("\"".to_string()),
        Just("\\".to_string()),
        Just("\n".to_string()),
        Just("}".to_string()),
        Just("a\"b\\c\nd}e{f=\"g\",h".to_string()),
        Just("\u{0}\u{7f}\u{202e}\u{feff}".to_string()),
        Just("x".repeat(5000)),
        // Values a parser branches on, in the wrong places.
        Just("Succeeded".to_string()),
        Just("ready".to_string()),
        Just("True".to_string()),
        Just("2026-01-01T00:00:00Z".to_string()),
        Just("9999-99-99T99:99:99Z".to_string()),
        Just("{\"conditions\":[{\"type\":\"Available\"}]}".to_string()),
        "\\PC{0,24}",
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "id", "name", "kind", "state", "status", "conditions", "type", "reason",
            "lastTransitionTime", "metadata", "labels", "namespace", "properties",
            "provisioningState", "items", "value", "jsonRaw", "fieldValue", "statusFeedback",
            "values", "resourceStatus", "spec", "replicas", "version", "history", "azure",
            "deletionTimestamp", "creationTimestamp", "created_at", "updated_at",
        ])
        .prop_map(str::to_string),
        1 => hostile_string(),
    ]
}

fn arb_json() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e300f64..1e300).prop_map(Value::from),
        hostile_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
    .boxed()
}

/// Replacements of random nodes of a valid document: what a buggy or newer
/// upstream sends is mostly right, with a few fields wrong.
fn mutations() -> impl Strategy<Value = Vec<(prop::sample::Index, Value)>> {
    prop::collection::vec((any::<prop::sample::Index>(), arb_json()), 1..5)
}

fn count_nodes(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(count_nodes).sum(),
        Value::Object(o) => o.values().map(count_nodes).sum(),
        _ => 0,
    }
}

fn replace_nth(v: &mut Value, n: &mut usize, with: &Value) -> bool {
    if *n == 0 {
        *v = with.clone();
        return true;
    }
    *n -= 1;
    match v {
        Value::Array(a) => a.iter_mut().any(|x| replace_nth(x, n, with)),
        Value::Object(o) => o.values_mut().any(|x| replace_nth(x, n, with)),
        _ => false,
    }
}

fn mutate(seed: &Value, mutations: &[(prop::sample::Index, Value)]) -> Value {
    let mut doc = seed.clone();
    for (at, with) in mutations {
        let mut n = at.index(count_nodes(&doc));
        replace_nth(&mut doc, &mut n, with);
    }
    doc
}

fn raw(v: &Value) -> RawItem {
    serde_json::value::to_raw_value(v).unwrap()
}

fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

fn runner() -> TestRunner {
    TestRunner::new(RunnerConfig {
        cases: 256,
        failure_persistence: None,
        ..RunnerConfig::default()
    })
}

// ---------------------------------------------------------------------------
// Seeds: one valid object per parser.

fn cs_seed() -> Value {
    let mut c = fixture("cs-cluster-creating.json");
    c["id"] = json!("2a6b3c4d5e6f7g8h9i0j");
    c
}

fn rp_seed() -> Value {
    fixture("rp-2026-09-01-preview-list.json")["responses"]["200"]["body"].clone()
}

fn work_status_seed() -> Value {
    json!({
        "conditions": [
            {"type": "Applied", "status": "True", "reason": "AppliedManifestWorkComplete", "lastTransitionTime": "2026-06-10T22:51:00Z"},
            {"type": "Available", "status": "True", "reason": "ResourcesAvailable", "lastTransitionTime": "2026-06-10T22:52:00Z"}
        ],
        "resourceStatus": {"manifests": [{
            "resourceMeta": {"ordinal": 0, "group": "hypershift.openshift.io", "version": "v1beta1",
                "kind": "HostedCluster", "resource": "hostedclusters", "name": "my-cluster", "namespace": "ocm-prod-x"},
            "conditions": [],
            "statusFeedback": {"values": [{"name": "status", "fieldValue": {"type": "JsonRaw",
                "jsonRaw": json!({"conditions": [{"type": "Available", "status": "False", "reason": "WaitingForAvailable", "lastTransitionTime": "2026-06-10T22:55:00Z"}],
                                  "version": {"history": [{"state": "Partial", "version": "4.20.1"}]}}).to_string()}}]}
        }]}
    })
}

fn bundle_seed(work_status: &Value) -> Value {
    let applied = json!([
        {"type": "Applied", "status": "True", "reason": "AppliedManifestWorkComplete", "lastTransitionTime": "2026-06-10T22:51:00Z"},
        {"type": "Available", "status": "True", "reason": "ResourcesAvailable", "lastTransitionTime": "2026-06-10T22:52:00Z"}
    ]);
    json!({
        "id": "b7f1c9a2-0000-4000-8000-000000000001",
        "kind": "ResourceBundle",
        "name": "cluster-work",
        "consumer_name": "hcp-underlay-usw3gobe-mgmt-1",
        "version": 1,
        "created_at": "2026-06-10T22:50:00Z",
        "updated_at": "2026-06-10T23:20:00.123456Z",
        "metadata": {"name": "cluster-work", "labels": {"api.openshift.com/id": "2a6b3c4d5e6f7g8h9i0j", "api.openshift.com/name": "my-cluster"}},
        "manifests": [],
        "status": {
            "ObservedVersion": 1,
            "conditions": applied,
            "resourceStatus": [{
                "resourceMeta": {"ordinal": 0, "group": "work.open-cluster-management.io", "version": "v1",
                    "kind": "ManifestWork", "resource": "manifestworks", "name": "cluster-work", "namespace": "local-cluster"},
                "conditions": applied,
                "statusFeedback": {"values": [{"name": "status", "fieldValue": {"type": "JsonRaw", "jsonRaw": work_status.to_string()}}]}
            }]
        }
    })
}

fn hosted_cluster_seed() -> Value {
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1",
        "kind": "HostedCluster",
        "metadata": {"name": "my-cluster", "namespace": "ocm-prod-2a6b", "uid": "u-1",
            "creationTimestamp": "2026-06-10T22:50:00Z",
            "labels": {"api.openshift.com/id": "2a6b3c4d5e6f7g8h9i0j"}},
        "spec": {"clusterID": "c-1", "platform": {"type": "Azure"}, "release": {"image": "release.example.com/ocp:4.20.1"}},
        "status": {
            "conditions": [
                {"type": "Available", "status": "False", "reason": "WaitingForAvailable", "lastTransitionTime": "2026-06-10T22:55:00Z"},
                {"type": "Degraded", "status": "True", "reason": "Other", "lastTransitionTime": "2026-06-10T22:56:00Z"}
            ],
            "version": {"history": [{"state": "Partial", "version": "4.20.1", "startedTime": "2026-06-10T22:50:00Z"}]}
        }
    })
}

fn managed_cluster_seed() -> Value {
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": {"name": "2a6b3c4d5e6f7g8h9i0j", "creationTimestamp": "2026-06-10T22:50:00Z"},
        "spec": {"hubAcceptsClient": true},
        "status": {"conditions": [
            {"type": "HubAcceptedManagedCluster", "status": "True", "reason": "HubClusterAdminAccepted", "lastTransitionTime": "2026-06-10T22:58:00Z"},
            {"type": "ManagedClusterJoined", "status": "False", "reason": "x", "lastTransitionTime": "2026-06-10T22:59:00Z"}
        ]}
    })
}

// ---------------------------------------------------------------------------
// Property tests: a parser returns an error or observations, never panics.

#[test]
fn clusters_service_items_never_panic() {
    let seed = cs_seed();
    runner()
        .run(&mutations(), |m| {
            let item = mutate(&seed, &m);
            for api in [
                ClustersServiceApi::AroHcpV1alpha1,
                ClustersServiceApi::ClustersMgmtV1,
            ] {
                let _ = clusters_service::parse_items(vec![raw(&item)], api, |_| None);
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn rp_frontend_lists_never_panic() {
    let seed = rp_seed();
    runner()
        .run(&mutations(), |m| {
            let list = mutate(&seed, &m);
            if let Ok(list) = serde_json::from_value::<ArmList>(list) {
                let (clusters, unknown) = rp_frontend::parse_list(list);
                let _ = rp_frontend::to_parsed(clusters, unknown);
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn maestro_bundles_and_their_nested_feedback_never_panic() {
    let work = work_status_seed();
    runner()
        .run(
            &(mutations(), mutations(), mutations()),
            |(outer, middle, inner)| {
                // Three levels: the bundle, the ManifestWork status it feeds
                // back as a JSON string, and the HostedCluster status that one
                // feeds back as a JSON string in turn.
                let mut work = mutate(&work, &middle);
                if let Some(Value::String(hc)) = work
                    .pointer(
                        "/resourceStatus/manifests/0/statusFeedback/values/0/fieldValue/jsonRaw",
                    )
                    .cloned()
                    && let Ok(hc) = serde_json::from_str::<Value>(&hc)
                {
                    let hc = mutate(&hc, &inner).to_string();
                    if let Some(slot) = work.pointer_mut(
                        "/resourceStatus/manifests/0/statusFeedback/values/0/fieldValue/jsonRaw",
                    ) {
                        *slot = Value::String(hc);
                    }
                }
                let bundle = mutate(&bundle_seed(&work), &outer);
                let _ = maestro::parse_items(vec![raw(&bundle)]);
                Ok(())
            },
        )
        .unwrap();
}

/// A status CloudEvent of Maestro's stream (docs/design/10-upstream-facts.md §10.12) with
/// its payload, its ObjectMeta attribute and its raw bytes mutated: decoded
/// and read as a bundle, or counted, never a panic.
#[test]
fn maestro_status_events_never_panic() {
    use hcp_flow::sources::maestro::event::{self, StatusEvent};
    use hcp_flow::sources::maestro::proto::{AttributeValue, CloudEvent, Data, attr};
    use prost::Message;
    let work = work_status_seed();
    let seed = bundle_seed(&work);
    let payload = json!({
        "manifestBundle": {"manifests": seed["manifests"]},
        "conditions": seed["status"]["conditions"],
        "resourceStatus": seed["status"]["resourceStatus"],
    });
    let meta = json!({"name": "b", "labels": {"api.openshift.com/id": "c"}, "creationTimestamp": "2026-06-10T22:50:00Z"});
    runner()
        .run(
            &(
                mutations(),
                mutations(),
                prop::collection::vec(any::<u8>(), 0..64),
            ),
            |(pm, mm, noise)| {
                let mut ev = CloudEvent {
                    id: "e".to_string(),
                    spec_version: "1.0".to_string(),
                    r#type: hcp_flow::sources::maestro::proto::STATUS_UPDATE_TYPE.to_string(),
                    data: Some(Data::BinaryData(
                        mutate(&payload, &pm).to_string().into_bytes().into(),
                    )),
                    ..CloudEvent::default()
                };
                ev.attributes
                    .insert(attr::RESOURCE_ID.to_string(), AttributeValue::string("b"));
                ev.attributes.insert(
                    attr::METADATA.to_string(),
                    AttributeValue::string(mutate(&meta, &mm).to_string()),
                );
                ev.attributes.insert(
                    attr::SEQUENCE_ID.to_string(),
                    AttributeValue::string(String::from_utf8_lossy(&noise)),
                );
                // The event whole, and the same bytes cut and noised on the wire.
                let mut wire = ev.encode_to_vec();
                for ev in [Some(ev), CloudEvent::decode(&noise[..]).ok(), {
                    wire.extend_from_slice(&noise);
                    CloudEvent::decode(&wire[..]).ok()
                }]
                .into_iter()
                .flatten()
                {
                    let mut unknown = Vec::new();
                    if let Some(StatusEvent::Status { bundle, .. }) =
                        event::decode(&ev, &mut unknown)
                    {
                        let _ = maestro::parse_bundle(&bundle, &mut unknown);
                    }
                }
                Ok(())
            },
        )
        .unwrap();
}

fn kube_facts<K>(seed: &Value, m: &[(prop::sample::Index, Value)], cfg: &MapperConfig)
where
    K: serde::de::DeserializeOwned + ToFacts,
{
    if let Ok(obj) = serde_json::from_value::<K>(mutate(seed, m)) {
        let mut unknown = Vec::new();
        let _ = obj.facts(cfg, &mut unknown);
    }
}

#[test]
fn kube_objects_never_panic() {
    let configs: Vec<MapperConfig> = ["aro", "self_managed"]
        .iter()
        .map(|mode| {
            let cfg: KubeSourceConfig = serde_json::from_value(json!({
                "mgmt_cluster": "mgmt-1", "mode": mode, "environment": "prod"
            }))
            .unwrap();
            MapperConfig::from(&cfg)
        })
        .collect();
    let hosted = hosted_cluster_seed();
    let node_pool = fixture("nodepool-real-with-status.json");
    let work = fixture("maestro-manifestwork-watched.json");
    let managed = managed_cluster_seed();
    runner()
        .run(&mutations(), |m| {
            for cfg in &configs {
                kube_facts::<kube_objects::HostedCluster>(&hosted, &m, cfg);
                kube_facts::<kube_objects::NodePool>(&node_pool, &m, cfg);
                kube_facts::<kube_objects::ManifestWork>(&work, &m, cfg);
                kube_facts::<kube_objects::ManagedCluster>(&managed, &m, cfg);
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn the_config_file_parser_never_panics() {
    let example = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/hcp-flow.yaml"),
    )
    .unwrap();
    let edits = prop::collection::vec(
        (any::<prop::sample::Index>(), hostile_string(), 0usize..8),
        1..6,
    );
    runner()
        .run(&edits, |edits| {
            // Character-level edits: YAML that is almost right.
            let mut text: Vec<char> = example.chars().collect();
            for (at, insert, remove) in &edits {
                let i = at.index(text.len().max(1));
                let end = (i + remove).min(text.len());
                text.splice(i..end, insert.chars());
            }
            let text: String = text.into_iter().collect();
            let _ = Config::from_yaml_str(&text, "fuzzed.yaml");
            Ok(())
        })
        .unwrap();
    // And structure-level: any JSON document (YAML is a superset).
    runner()
        .run(&arb_json(), |doc| {
            let _ = Config::from_yaml_str(&doc.to_string(), "fuzzed.yaml");
            Ok(())
        })
        .unwrap();
}

// ---------------------------------------------------------------------------
// The corpus, through the real pollers.

/// Forwards to the store and remembers every batch.
struct Recording {
    store: Arc<Store>,
    batches: Mutex<Vec<Batch>>,
}

impl ObservationSink for Recording {
    fn apply(&self, batch: Batch) {
        self.batches.lock().push(batch.clone());
        self.store.apply(batch);
    }
}

impl Recording {
    /// A fresh store behind a recorder (and the TLS provider the client needs).
    fn new() -> Arc<Recording> {
        crate::common::init();
        Arc::new(Recording {
            store: store(),
            batches: Mutex::default(),
        })
    }

    fn gone_since(&self, from: usize) -> usize {
        self.batches.lock()[from..]
            .iter()
            .flat_map(|b| &b.observations)
            .filter(|o| matches!(o.change, Change::Gone))
            .count()
    }

    fn len(&self) -> usize {
        self.batches.lock().len()
    }
}

/// A stand-in answering every list with `good` until told to answer the
/// hostile body (status 200, with the content type it claims).
#[derive(Clone)]
struct Stand {
    body: Arc<Mutex<(Vec<u8>, &'static str)>>,
    shard: Value,
}

impl Stand {
    async fn start(good: Value) -> (Stand, Url) {
        let stand = Stand {
            body: Arc::new(Mutex::new((
                good.to_string().into_bytes(),
                "application/json",
            ))),
            shard: fixture("cs-provision-shard.json"),
        };
        let s = stand.clone();
        let app = axum::Router::new().fallback(move |uri: Uri| {
            let s = s.clone();
            async move {
                if uri.path().ends_with("/provision_shard") {
                    return (
                        StatusCode::OK,
                        [(header::CONTENT_TYPE, "application/json")],
                        s.shard.to_string().into_bytes(),
                    );
                }
                let (body, content_type) = s.body.lock().clone();
                (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], body)
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (stand, Url::parse(&format!("http://{addr}")).unwrap())
    }

    fn answer(&self, body: Vec<u8>, content_type: &'static str) {
        *self.body.lock() = (body, content_type);
    }
}

fn hostile_corpus() -> BTreeMap<String, Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hostile");
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e != "md"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect()
}

/// Bodies that are not a list of the API at all: a source must keep its
/// last good state on every one of them.
fn not_a_list(name: &str) -> bool {
    !name.starts_with("label-injection")
        && name != "maestro-bad-jsonraw.json"
        && name != "huge-strings.json"
}

fn store() -> Arc<Store> {
    store::default_store()
}

/// The context and HTTP client of source `name`, delivering to `sink`.
fn wiring(
    name: &str,
    http: &HttpSourceConfig,
    sink: &Arc<Recording>,
) -> (SourceContext, HttpClient) {
    let ctx = sink.store.source_context(name).with_sink(sink.clone());
    let client = HttpClient::new(name, http, ctx.metrics.clone()).unwrap();
    (ctx, client)
}

fn http(base: &Url) -> HttpSourceConfig {
    let mut cfg = HttpSourceConfig::new(base.clone());
    cfg.timeout = Duration::from_secs(5);
    cfg.page_size = 100;
    cfg
}

/// Every corpus body, to each HTTP source after a good list. `poll` runs one
/// full poll and says whether it succeeded.
async fn through_the_poller<F, Fut>(
    source: &str,
    stand: &Stand,
    sink: &Arc<Recording>,
    good: &Value,
    clusters_after_good: usize,
    only_for_this_api: &str,
    mut poll: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for (name, body) in hostile_corpus() {
        if name.starts_with("label-injection") && !name.contains(only_for_this_api)
            || name.starts_with("maestro") && only_for_this_api != "maestro"
        {
            continue;
        }
        stand.answer(good.to_string().into_bytes(), "application/json");
        assert!(poll().await, "{source}: the good list reads");
        assert_eq!(
            sink.store.len(),
            clusters_after_good,
            "{source}: after a good list"
        );
        let before = sink.len();
        let content_type = if name.ends_with(".html") {
            "text/html"
        } else {
            "application/json"
        };
        stand.answer(body, content_type);
        let mut ok = false;
        // Answered for a while, not once: several polls in a row.
        for _ in 0..3 {
            ok = poll().await;
        }
        if not_a_list(&name) {
            assert!(!ok, "{source}: {name} is not a list, the poll must fail");
            assert_eq!(
                sink.gone_since(before),
                0,
                "{source}: {name} made the source forget clusters"
            );
            assert_eq!(
                sink.store.len(),
                clusters_after_good,
                "{source}: {name} changed the fleet"
            );
            assert!(
                !sink.store.health().up(source),
                "{source}: down while it answers {name}"
            );
        }
        promtool::check_metrics(&sink.store.scrape(Format::Text));
    }
}

#[tokio::test]
async fn clusters_service_keeps_its_clusters_through_the_hostile_corpus() {
    let sink = Recording::new();
    let mut a = cs_seed();
    a["id"] = json!("cs-a");
    let mut b = cs_seed();
    b["id"] = json!("cs-b");
    let good = json!({"kind": "ClusterList", "page": 1, "size": 2, "total": 2, "items": [a, b]});
    let (stand, base) = Stand::start(good.clone()).await;
    let cfg = ClustersServiceConfig {
        http: http(&base),
        api: ClustersServiceApi::AroHcpV1alpha1,
        search_scope: None,
        node_pool_rotation: hcp_flow::config::defaults::node_pool_rotation(),
    };
    let (ctx, client) = wiring("clusters_service", &cfg.http, &sink);
    let source = Arc::new(tokio::sync::Mutex::new(ClustersServiceSource::with_client(
        cfg, ctx, client,
    )));
    through_the_poller("clusters_service", &stand, &sink, &good, 2, "-cs", || {
        let source = source.clone();
        async move { source.lock().await.poll(PollKind::Full).await }
    })
    .await;
}

#[tokio::test]
async fn maestro_keeps_its_bundles_through_the_hostile_corpus() {
    let sink = Recording::new();
    let work = work_status_seed();
    let mut a = bundle_seed(&work);
    a["id"] = json!("bundle-a");
    a["metadata"]["labels"]["api.openshift.com/id"] = json!("cluster-a");
    let mut b = bundle_seed(&work);
    b["id"] = json!("bundle-b");
    b["metadata"]["labels"]["api.openshift.com/id"] = json!("cluster-b");
    let good =
        json!({"kind": "ResourceBundleList", "page": 1, "size": 2, "total": 2, "items": [a, b]});
    let (stand, base) = Stand::start(good.clone()).await;
    let cfg = MaestroConfig {
        http: http(&base),
        search_scope: None,
        grpc: None,
    };
    let (ctx, client) = wiring("maestro", &cfg.http, &sink);
    let source = Arc::new(tokio::sync::Mutex::new(MaestroSource::with_client(
        cfg, ctx, client,
    )));
    through_the_poller("maestro", &stand, &sink, &good, 2, "maestro", || {
        let source = source.clone();
        async move { source.lock().await.poll(maestro::PollKind::Full).await }
    })
    .await;
}

#[tokio::test]
async fn the_rp_frontend_forgets_no_resource_through_the_hostile_corpus() {
    let sink = Recording::new();
    let mut good = rp_seed();
    // The reference example links to another origin; one page is enough here.
    good.as_object_mut().unwrap().remove("nextLink");
    let (stand, base) = Stand::start(good.clone()).await;
    let cfg = RpFrontendConfig {
        http: http(&base),
        api_version: "2026-09-01-preview".into(),
        subscriptions: vec![SUB.into()],
        resource_ids: vec![],
        node_pool_rotation: hcp_flow::config::defaults::node_pool_rotation(),
    };
    let (ctx, client) = wiring("rp_frontend", &cfg.http, &sink);
    let source = Arc::new(tokio::sync::Mutex::new(RpFrontendSource::with_client(
        cfg, ctx, client,
    )));
    // RP resources are counted in the fleet once they are tracked; what this
    // test holds is that nothing seen is ever reported gone.
    let clusters = {
        let s = source.clone();
        let ok = s.lock().await.poll_all().await;
        assert!(ok, "{:?}", sink.store.health().status());
        sink.store.len()
    };
    through_the_poller("rp_frontend", &stand, &sink, &good, clusters, "-rp", || {
        let source = source.clone();
        async move { source.lock().await.poll_all().await }
    })
    .await;
}

/// A body over the limit is refused whole, counted, and loses nothing.
#[tokio::test]
async fn an_oversized_body_is_refused_and_forgets_nothing() {
    let sink = Recording::new();
    let mut a = cs_seed();
    a["id"] = json!("cs-a");
    let good = json!({"kind": "ClusterList", "page": 1, "size": 1, "total": 1, "items": [a]});
    let (stand, base) = Stand::start(good.clone()).await;
    let cfg = ClustersServiceConfig {
        http: http(&base),
        api: ClustersServiceApi::AroHcpV1alpha1,
        search_scope: None,
        node_pool_rotation: hcp_flow::config::defaults::node_pool_rotation(),
    };
    let (ctx, client) = wiring("clusters_service", &cfg.http, &sink);
    let client = client.with_body_limit(64 * 1024);
    let mut source = ClustersServiceSource::with_client(cfg, ctx, client);
    assert!(source.poll(PollKind::Full).await);
    assert_eq!(sink.store.len(), 1);
    let before = sink.len();
    let huge = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hostile/huge-strings.json"),
    )
    .unwrap();
    assert!(huge.len() > 64 * 1024);
    stand.answer(huge, "application/json");
    assert!(!source.poll(PollKind::Full).await);
    assert_eq!(sink.gone_since(before), 0);
    assert_eq!(sink.store.len(), 1);
    let text = sink.store.scrape(Format::Text);
    assert!(
        text.contains(
            r#"hcpflow_source_request_errors_total{source="clusters_service",kind="body_too_large"} 1"#
        ),
        "{text}"
    );
}
