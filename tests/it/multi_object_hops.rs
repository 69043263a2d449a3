//! Hops that hold several objects (docs/design/02-hops-and-phases.md §2.5, §2.6): a cluster
//! with the HostedCluster's bundle and ManifestWork and one per NodePool,
//! read through the real Maestro poller (over HTTP) and the real kube
//! mapping, into the real store. Each bundle and work is its own object;
//! one going keeps the others; the series never repeat a label set; and a
//! bundle whose feedback is absent or unreadable shows it on the cluster
//! (JSON and metrics), with the nested hops it should have filled present
//! and `unknown`, so the stuck-hop alert fires for them (checked by
//! promtool on the very series the exporter rendered).

use crate::common::store;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hcp_flow::clock::Clock;
use hcp_flow::config::{HttpSourceConfig, MaestroConfig};
use hcp_flow::metrics::exposition::Format;
use hcp_flow::model::{Batch, Hop, ModelConfig, Phase, Via};
use hcp_flow::sim::kube::{ClusterLayout, KubeClusterSpec, objects_at};
use hcp_flow::sources::SourceContext;
use hcp_flow::sources::kube::mapping::{Facts, Mapper, MapperConfig, ObjRef, ToFacts};
use hcp_flow::sources::kube::{KubeMode, KubeSourceConfig, WatchKind, objects};
use hcp_flow::sources::maestro::{self, MaestroSource, PollKind};
use hcp_flow::store::Store;
use jiff::Timestamp;
use parking_lot::Mutex;
use serde_json::{Value, json};

const CREATED: &str = "2026-06-10T22:50:00Z";

fn created() -> Timestamp {
    CREATED.parse().unwrap()
}

// ------------------------------------------------------------ a Maestro stand-in

/// Serves `bundles` as Maestro's paged bundle list (every page asked for
/// past the first is empty).
async fn maestro(bundles: Arc<Mutex<Vec<Value>>>) -> url::Url {
    let app = axum::Router::new().route(
        maestro::BUNDLES_PATH,
        axum::routing::get(
            move |axum::extract::Query(q): axum::extract::Query<Vec<(String, String)>>| {
                let bundles = bundles.clone();
                async move {
                    let page = q
                        .iter()
                        .find(|(k, _)| k == "page")
                        .and_then(|(_, v)| v.parse::<u64>().ok())
                        .unwrap_or(1);
                    let all = bundles.lock().clone();
                    let items = if page == 1 { all.clone() } else { Vec::new() };
                    axum::Json(json!({
                        "kind": maestro::LIST_KIND, "page": page, "size": items.len(),
                        "total": all.len(), "items": items,
                    }))
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = url::Url::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

fn raw(doc: &Value) -> Value {
    json!({"type": "JsonRaw", "jsonRaw": doc.to_string()})
}

fn conditions(available: bool) -> Value {
    let status = if available { "True" } else { "False" };
    json!([
        {"type": "Applied", "status": "True", "reason": "AppliedManifestWorkComplete", "message": "", "lastTransitionTime": "2026-06-10T22:50:05Z"},
        {"type": "Available", "status": status, "reason": "ResourcesAvailable", "message": "", "lastTransitionTime": "2026-06-10T22:50:10Z"}
    ])
}

/// What a bundle carries: a ManifestWork named like the bundle with one
/// HostedCluster (`pool: None`) or one NodePool.
fn carried(name: &str, pool: Option<&str>) -> Value {
    let object = match pool {
        None => {
            json!({"kind": "HostedCluster", "metadata": {"name": "hc", "namespace": "ocm-prod-c1"}})
        }
        Some(pool) => {
            json!({"kind": "NodePool", "metadata": {"name": pool, "namespace": "ocm-prod-c1"}})
        }
    };
    json!([{"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": "local-cluster"},
        "spec": {"workload": {"manifests": [object]}}}])
}

/// The readable status feedback of the work in bundle `name`.
fn work_feedback(pool: Option<&str>) -> Value {
    let manifest = match pool {
        None => json!({
            "resourceMeta": {"kind": "HostedCluster", "name": "hc", "namespace": "ocm-prod-c1"},
            "statusFeedback": {"values": [{"name": "status", "fieldValue": raw(&json!({
                "conditions": [{"type": "Available", "status": "False", "reason": "WaitingForAvailable", "message": "", "lastTransitionTime": "2026-06-10T22:50:20Z"}],
                "version": {"history": [{"state": "Partial", "version": "4.20.0"}]}
            }))}]}
        }),
        Some(pool) => json!({
            "resourceMeta": {"kind": "NodePool", "name": pool, "namespace": "ocm-prod-c1"},
            "statusFeedback": {"values": [
                {"name": "status", "fieldValue": raw(&json!({
                    "replicas": 0,
                    "conditions": [{"type": "Ready", "status": "False", "reason": "WaitingForNodes", "message": "", "lastTransitionTime": "2026-06-10T22:50:20Z"}]
                }))},
                {"name": "replicas", "fieldValue": {"type": "Integer", "integer": 2}}
            ]}
        }),
    };
    raw(&json!({"conditions": conditions(true), "resourceStatus": {"manifests": [manifest]}}))
}

/// A bundle of cluster `c1`: `feedback` is the ManifestWork's `status`
/// feedback value (`None`: the bundle's status is null).
fn bundle(id: &str, name: &str, pool: Option<&str>, feedback: Option<Value>) -> Value {
    let status = feedback.map(|fv| {
        json!({
            "ObservedVersion": 1, "SequenceID": "1",
            "conditions": conditions(true),
            "resourceStatus": [{
                "resourceMeta": {"kind": "ManifestWork", "name": name, "namespace": "local-cluster"},
                "conditions": conditions(true),
                "statusFeedback": {"values": [{"name": "status", "fieldValue": fv}]}
            }]
        })
    });
    json!({
        "id": id, "kind": "ResourceBundle", "name": name, "consumer_name": "mgmt-1", "version": 1,
        "created_at": CREATED, "updated_at": "2026-06-10T22:50:30Z",
        "metadata": {"name": name, "labels": {"api.openshift.com/id": "c1"}},
        "manifests": carried(name, pool),
        "status": status,
    })
}

struct Exporter {
    store: Arc<Store>,
    source: MaestroSource,
    base: String,
    clock: Clock,
}

/// The real store, served over HTTP, fed by the real Maestro poller; its
/// clock (and the source's) stands one minute after the bundles' creation.
async fn exporter(bundles: Arc<Mutex<Vec<Value>>>) -> Exporter {
    crate::common::init();
    let clock = Clock::manual(created() + jiff::SignedDuration::from_mins(1));
    let store = store::builder()
        .sources(&["maestro"])
        .clock(clock.clone())
        .build();
    let mut http = HttpSourceConfig::new(maestro(bundles).await);
    http.timeout = Duration::from_secs(5);
    let ctx = SourceContext {
        name: "maestro".into(),
        sink: store.clone(),
        metrics: store.exporter_metrics(),
        clock: clock.clone(),
        health: store.health(),
    };
    let source = MaestroSource::new(
        MaestroConfig {
            http,
            search_scope: None,
            grpc: None,
        },
        ctx,
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(hcp_flow::server::serve(
        listener,
        store.clone(),
        std::future::pending(),
    ));
    Exporter {
        store,
        source,
        base,
        clock,
    }
}

async fn cluster_json(base: &str) -> Value {
    let response = reqwest::get(format!("{base}/api/v1/clusters/c1"))
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    response.json().await.unwrap()
}

fn objects_of(hop: &Value) -> Vec<(String, String)> {
    hop["objects"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|o| {
                    (
                        o["name"].as_str().unwrap().to_string(),
                        o["phase"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Every series of the scrape appears once (a duplicate would make every
/// `on(...)` join of the alerts fail as many-to-many).
fn assert_no_duplicate_series(body: &str) {
    let mut seen = BTreeSet::new();
    for line in body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let series = line.rsplit_once(' ').unwrap().0;
        assert!(seen.insert(series.to_string()), "duplicate series {series}");
    }
}

#[tokio::test]
async fn each_bundle_is_its_own_object_and_one_going_keeps_the_others() {
    let bundles = Arc::new(Mutex::new(vec![
        bundle("id-1", "c1", None, Some(work_feedback(None))),
        bundle(
            "id-2",
            "c1-np-1",
            Some("np-1"),
            Some(work_feedback(Some("np-1"))),
        ),
        bundle(
            "id-3",
            "c1-np-2",
            Some("np-2"),
            Some(work_feedback(Some("np-2"))),
        ),
    ]));
    let mut x = exporter(bundles.clone()).await;
    assert!(x.source.poll(PollKind::Full).await);

    let c = cluster_json(&x.base).await;
    let names = |hop: &str| -> Vec<String> {
        objects_of(&c["hops"][hop])
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    };
    assert_eq!(names("maestro_bundle"), ["c1", "c1-np-1", "c1-np-2"]);
    assert_eq!(names("manifestwork"), ["c1", "c1-np-1", "c1-np-2"]);
    assert_eq!(names("node_pool"), ["np-1", "np-2"]);
    assert_eq!(c["hops"]["hosted_cluster"]["phase"], "progressing");
    assert!(c["hops"]["maestro_bundle"]["error"].is_null(), "{c}");

    let body = x.store.scrape(Format::Text);
    assert_no_duplicate_series(&body);
    for object in ["c1", "c1-np-1", "c1-np-2"] {
        assert!(
            body.contains(&format!(
                r#"hcpflow_hop_condition{{cluster_id="c1",hop="maestro_bundle",condition="Applied",status="true",reason="AppliedManifestWorkComplete",object="{object}"}} 1"#
            )),
            "no Applied condition for bundle {object}:\n{body}"
        );
    }
    assert!(!body.contains("hcpflow_hop_feedback_error_info{cluster_id"));

    // One pool's bundle is deleted: its bundle, work and pool go; the rest stays.
    bundles.lock().remove(1);
    x.clock.advance(Duration::from_secs(60));
    assert!(x.source.poll(PollKind::Full).await);
    let c = cluster_json(&x.base).await;
    let names = |hop: &str| -> Vec<String> {
        objects_of(&c["hops"][hop])
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    };
    assert_eq!(names("maestro_bundle"), ["c1", "c1-np-2"]);
    assert_eq!(names("manifestwork"), ["c1", "c1-np-2"]);
    assert_eq!(names("node_pool"), ["np-2"]);
    assert_eq!(c["hops"]["hosted_cluster"]["phase"], "progressing");
}

#[tokio::test]
async fn a_bundle_created_again_under_its_name_keeps_its_objects() {
    let bundles = Arc::new(Mutex::new(vec![
        bundle("id-1", "c1", None, Some(work_feedback(None))),
        bundle(
            "id-2",
            "c1-np-1",
            Some("np-1"),
            Some(work_feedback(Some("np-1"))),
        ),
    ]));
    let mut x = exporter(bundles.clone()).await;
    assert!(x.source.poll(PollKind::Full).await);
    // Deleted and created again between two relists: same name, new id.
    bundles.lock()[1] = bundle(
        "id-2b",
        "c1-np-1",
        Some("np-1"),
        Some(work_feedback(Some("np-1"))),
    );
    assert!(x.source.poll(PollKind::Full).await);
    let c = cluster_json(&x.base).await;
    assert_eq!(
        objects_of(&c["hops"]["maestro_bundle"])
            .into_iter()
            .map(|(n, _)| n)
            .collect::<Vec<_>>(),
        ["c1", "c1-np-1"]
    );
    assert_eq!(objects_of(&c["hops"]["node_pool"]).len(), 1, "{c}");
}

#[tokio::test]
async fn unreadable_or_absent_feedback_shows_on_the_cluster_and_its_hops_age() {
    // The HostedCluster's bundle feeds back garbage; the pool's has no
    // status at all. Nothing nested was ever read.
    let bundles = Arc::new(Mutex::new(vec![
        bundle("id-1", "c1", None, Some(raw(&json!("{not json")))),
        bundle("id-2", "c1-np-1", Some("np-1"), None),
    ]));
    let mut x = exporter(bundles.clone()).await;
    assert!(x.source.poll(PollKind::Full).await);

    let c = cluster_json(&x.base).await;
    let hops = &c["hops"];
    assert_eq!(
        hops["maestro_bundle"]["error"]["code"], "feedback_unreadable",
        "{c}"
    );
    assert!(
        hops["maestro_bundle"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("bundle c1 "),
        "the message names the bundle: {c}"
    );
    for (hop, state) in [
        ("manifestwork", "feedback_unreadable"),
        ("hosted_cluster", "feedback_unreadable"),
        ("node_pool", "no_status"),
    ] {
        assert_eq!(hops[hop]["phase"], "unknown", "{hop}: {c}");
        assert_eq!(hops[hop]["state"], state, "{hop}: {c}");
        assert_eq!(hops[hop]["via"], "maestro", "{hop}: {c}");
        // Unknown since the bundle exists: an upstream time, not ours.
        assert_eq!(hops[hop]["since"]["at"], CREATED, "{hop}: {c}");
    }
    assert_eq!(
        objects_of(&hops["manifestwork"]),
        [
            ("c1".to_string(), "unknown".to_string()),
            ("c1-np-1".to_string(), "unknown".to_string())
        ]
    );

    let body = x.store.scrape(Format::Text);
    assert_no_duplicate_series(&body);
    for (object, code) in [("c1", "feedback_unreadable"), ("c1-np-1", "no_status")] {
        assert!(
            body.contains(&format!(
                r#"hcpflow_hop_feedback_error_info{{cluster_id="c1",hop="maestro_bundle",object="{object}",code="{code}"}} 1"#
            )),
            "no {code} for {object}:\n{body}"
        );
    }
    assert!(
        body.contains(r#"field="statusFeedback.jsonRaw""#),
        "not counted"
    );

    // The stuck-hop alert, evaluated by promtool on these very series: the
    // nested hops exist and age past their budgets.
    stuck_alerts_fire_on(&body);

    // Readable again: real readings replace the placeholders, the error goes.
    bundles.lock()[0] = bundle("id-1", "c1", None, Some(work_feedback(None)));
    bundles.lock()[1] = bundle(
        "id-2",
        "c1-np-1",
        Some("np-1"),
        Some(work_feedback(Some("np-1"))),
    );
    x.clock.advance(Duration::from_secs(60));
    assert!(x.source.poll(PollKind::Full).await);
    let c = cluster_json(&x.base).await;
    assert!(c["hops"]["maestro_bundle"]["error"].is_null(), "{c}");
    assert_eq!(c["hops"]["hosted_cluster"]["phase"], "progressing");
    assert_eq!(c["hops"]["node_pool"]["phase"], "progressing");
    let good = c["hops"]["hosted_cluster"].clone();
    let body = x.store.scrape(Format::Text);
    assert!(!body.contains("hcpflow_hop_feedback_error_info{cluster_id"));

    // Garbled once more: the last good state stays, the error shows again.
    bundles.lock()[0] = bundle(
        "id-1",
        "c1",
        None,
        Some(json!({"type": "String", "string": "oops"})),
    );
    x.clock.advance(Duration::from_secs(60));
    assert!(x.source.poll(PollKind::Full).await);
    let c = cluster_json(&x.base).await;
    assert_eq!(
        c["hops"]["maestro_bundle"]["error"]["code"],
        "feedback_unreadable"
    );
    assert_eq!(
        c["hops"]["hosted_cluster"], good,
        "the last good reading is kept, time and all"
    );
    let body = x.store.scrape(Format::Text);
    assert!(body.contains(
        r#"hcpflow_hop_feedback_error_info{cluster_id="c1",hop="maestro_bundle",object="c1",code="feedback_unreadable"} 1"#
    ));
}

/// Feed the per-cluster series of `body` to promtool (with job/instance as
/// Prometheus adds them, timestamps shifted so the bundles' creation is
/// time 0) and check which hops `HCPOperationStuckAtHop` fires for, one
/// evaluation before and at each hop's budget (alerts/operations.yaml).
fn stuck_alerts_fire_on(body: &str) {
    let base = created().as_second() as f64;
    let mut series = String::new();
    for line in body
        .lines()
        .filter(|l| l.contains(r#"cluster_id="c1""#) && !l.starts_with('#'))
    {
        let (name_labels, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = name_labels.split_once('{').unwrap();
        let mut value: f64 = value.parse().unwrap();
        if name.ends_with("_timestamp_seconds") {
            value -= base;
        }
        let labels = format!(r#"{{job="hcp-flow",instance="x:9464",{labels}"#);
        series.push_str(&format!(
            "      - series: '{name}{labels}'\n        values: '{value}x40'\n"
        ));
    }
    // Budgets: manifestwork 10m, hosted_cluster 15m, node_pool 30m; the
    // bundle hop (progressing: one bundle ready, one pending) since the
    // exporter saw it, one minute after creation.
    let expect = |minutes: u32, hops: &[&str]| {
        let samples: String = hops
            .iter()
            .map(|h| format!("          - labels: '{{hop=\"{h}\"}}'\n            value: 1\n"))
            .collect();
        let samples = if samples.is_empty() {
            "          []\n".to_string()
        } else {
            samples
        };
        format!(
            "      - expr: count by (hop) (ALERTS{{alertname=\"HCPOperationStuckAtHop\", alertstate=\"firing\"}})\n        eval_time: {minutes}m\n        exp_samples:\n{samples}"
        )
    };
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let test = format!(
        "rule_files:\n  - {}\n  - {}\n  - {}\nevaluation_interval: 1m\ngroup_eval_order:\n  - hcp-flow-identity\n  - hcp-flow-budgets\n  - hcp-flow-operations\ntests:\n  - interval: 1m\n    input_series:\n{series}    promql_expr_test:\n{}{}{}{}{}{}",
        repo.join("alerts/identity.yaml").display(),
        repo.join("alerts/budgets.yaml").display(),
        repo.join("alerts/operations.yaml").display(),
        expect(9, &[]),
        expect(10, &["manifestwork"]),
        expect(11, &["maestro_bundle", "manifestwork"]),
        expect(14, &["maestro_bundle", "manifestwork"]),
        expect(15, &["hosted_cluster", "maestro_bundle", "manifestwork"]),
        expect(
            30,
            &[
                "hosted_cluster",
                "maestro_bundle",
                "manifestwork",
                "node_pool"
            ]
        ),
    );
    let dir = std::env::temp_dir().join(format!("hcp-flow-feedback-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("stuck.yaml");
    std::fs::write(&file, &test).unwrap();
    let out = std::process::Command::new("promtool")
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .unwrap_or_else(|e| {
            panic!("promtool not runnable ({e}): install Debian's prometheus; .ci/run does")
        });
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "promtool:\n{}{}\n--- test ---\n{test}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

// ------------------------------------------------------------------ kube side

fn mapper() -> Mapper {
    let mut cfg = KubeSourceConfig::new("mgmt-1", KubeMode::Aro);
    cfg.environment = "prod".to_string();
    Mapper::new(MapperConfig::from(&cfg))
}

fn work_facts(obj: &Value, cfg: &MapperConfig) -> (ObjRef, Facts) {
    let work: objects::ManifestWork = serde_json::from_value(obj.clone()).unwrap();
    let at = ObjRef::new(
        obj["metadata"]["namespace"].as_str().unwrap(),
        obj["metadata"]["name"].as_str().unwrap(),
    );
    (at, work.facts(cfg, &mut Vec::new()))
}

#[test]
fn each_manifestwork_is_its_own_object_and_a_deleted_one_goes_alone() {
    let at = created();
    let spec = KubeClusterSpec {
        node_pools: vec![("np-1".into(), 2, None), ("np-2".into(), 2, None)],
        ..KubeClusterSpec::healthy("c1", ClusterLayout::Aro, at)
    };
    let now = at + jiff::SignedDuration::from_mins(2);
    let works: Vec<Value> = objects_at(&spec, now)
        .into_iter()
        .filter(|o| o["kind"] == "ManifestWork")
        .collect();
    assert_eq!(works.len(), 3, "the HostedCluster's and one per pool");
    let mut m = mapper();
    let cfg = m.config().clone();
    for w in &works {
        let (at, facts) = work_facts(w, &cfg);
        m.upsert(at, facts);
    }
    let mut fleet = hcp_flow::model::Fleet::new(ModelConfig::default());
    let mut apply = |m: &mut Mapper| {
        let observations = m.flush();
        fleet.apply(
            Batch {
                source: "kube/mgmt-1".into(),
                initial: false,
                observed_at: now,
                observations,
            },
            now,
        );
        let hop = fleet.get("c1").unwrap().hop(Hop::Manifestwork).cloned();
        hop.map(|h| {
            let names: Vec<String> = h.objects.keys().map(|(_, n)| n.clone()).collect();
            (names, h.phase, h.via)
        })
    };
    assert_eq!(
        apply(&mut m),
        Some((
            vec!["c1".into(), "c1-np-1".into(), "c1-np-2".into()],
            Phase::Ready,
            Via::Direct
        ))
    );
    m.delete(
        WatchKind::ManifestWork,
        &ObjRef::new("local-cluster", "c1-np-1"),
    );
    assert_eq!(
        apply(&mut m),
        Some((
            vec!["c1".into(), "c1-np-2".into()],
            Phase::Ready,
            Via::Direct
        )),
        "the other works stay"
    );
}

// ------------------------------------------------------- parse_bundle, pure

fn parse(b: &Value) -> maestro::ParsedBundle {
    let bundle: maestro::ResourceBundle = serde_json::from_value(b.clone()).unwrap();
    maestro::parse_bundle(&bundle, &mut Vec::new())
}

fn keys(obs: &[hcp_flow::model::Observation]) -> Vec<(Hop, String, String)> {
    obs.iter()
        .map(|o| {
            let hcp_flow::model::Change::Upsert(v) = &o.change else {
                panic!("not an upsert: {o:?}")
            };
            (o.hop, o.object.clone(), v.state.to_string())
        })
        .collect()
}

#[test]
fn a_readable_work_that_does_not_show_a_carried_object_is_no_status_for_it() {
    // The pool's bundle carries NodePool np-1 but its work's feedback lists
    // no manifest yet (the agent reported the work before the pool).
    let empty_work =
        raw(&json!({"conditions": conditions(true), "resourceStatus": {"manifests": []}}));
    let parsed = parse(&bundle("id-2", "c1-np-1", Some("np-1"), Some(empty_work)));
    assert_eq!(
        parsed.feedback_error,
        Some(hcp_flow::views::work::FeedbackError::NoStatus)
    );
    assert!(parsed.feedback_error.is_some());
    assert_eq!(
        keys(&parsed.observations),
        [
            (Hop::MaestroBundle, "c1-np-1".into(), "Available".into()),
            (Hop::Manifestwork, "c1-np-1".into(), "Available".into()),
        ]
    );
    assert_eq!(
        keys(&parsed.placeholders),
        [(Hop::NodePool, "np-1".into(), "no_status".into())]
    );
    let hcp_flow::model::Change::Upsert(view) = &parsed.observations[0].change else {
        panic!()
    };
    let error = view.error.as_ref().unwrap();
    assert_eq!(error.code, "no_status");
    assert!(error.message.contains("node_pool np-1"), "{error:?}");
}

#[test]
fn a_failed_bundle_keeps_its_failure_as_its_error() {
    let mut b = bundle("id-1", "c1", None, None);
    b["status"] = json!({
        "ObservedVersion": 1, "SequenceID": "1",
        "conditions": [{"type": "Applied", "status": "False", "reason": "AppliedManifestWorkFailed", "message": "webhook denied", "lastTransitionTime": "2026-06-10T22:50:05Z"}],
        "resourceStatus": []
    });
    let parsed = parse(&b);
    assert_eq!(
        parsed.feedback_error,
        Some(hcp_flow::views::work::FeedbackError::NoStatus)
    );
    let hcp_flow::model::Change::Upsert(view) = &parsed.observations[0].change else {
        panic!()
    };
    assert_eq!(view.phase, Phase::Failed);
    assert_eq!(
        view.error.as_ref().unwrap().code,
        "AppliedManifestWorkFailed"
    );
    // What it should fill is still shown, unknown, so the hops exist.
    assert_eq!(
        keys(&parsed.placeholders),
        [
            (Hop::Manifestwork, "c1".into(), "no_status".into()),
            (Hop::HostedCluster, String::new(), "no_status".into()),
        ]
    );
}
