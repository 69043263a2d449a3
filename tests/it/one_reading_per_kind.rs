//! One reading per object kind: the same HostedCluster, NodePool and
//! ManifestWork status, read once through Maestro's nested status feedback
//! and once through a kube watch's partial objects, gives the same hop facts
//! and the same `hcpflow_hop_phase` / `hcpflow_hop_condition` series (apart
//! from `via`), also after the model's clock fails a Degraded HostedCluster.

use crate::common::store;
use std::time::Duration;

use hcp_flow::metrics::exposition::Format;
use hcp_flow::model::{Batch, Change, Hop, HopBudgets, HopView, ModelConfig, Observation};
use hcp_flow::sources::kube::mapping::{Mapper, MapperConfig, ObjRef, ToFacts};
use hcp_flow::sources::kube::{KubeMode, KubeSourceConfig, objects};
use hcp_flow::sources::maestro::{self, ResourceBundle};
use hcp_flow::store::Store;
use jiff::Timestamp;
use serde_json::{Value, json};

const ID: &str = "2qrppk0otds3rdmdcojqcqkqq8f0s591";
const NAMESPACE: &str = "ocm-prod-2qrppk0otds3rdmdcojqcqkqq8f0s591";

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn cond(kind: &str, status: &str, reason: &str, at: &str) -> Value {
    json!({"type": kind, "status": status, "reason": reason, "message": format!("{kind} says {reason}"), "lastTransitionTime": at})
}

fn json_raw(name: &str, doc: &Value) -> Value {
    json!({"name": name, "fieldValue": {"type": "JsonRaw", "jsonRaw": doc.to_string()}})
}

/// One status of each kind, as both paths see it.
struct Statuses {
    work: Value,
    hosted_cluster: Value,
    node_pool: Value,
    desired: i64,
}

/// Maestro: bundle → ManifestWork feedback → HostedCluster / NodePool feedback.
fn through_maestro(s: &Statuses) -> Vec<Observation> {
    let manifests = json!([
        {"resourceMeta": {"kind": "HostedCluster", "name": "my-cluster", "namespace": NAMESPACE},
         "conditions": [], "statusFeedback": {"values": [json_raw("status", &s.hosted_cluster)]}},
        {"resourceMeta": {"kind": "NodePool", "name": "workers", "namespace": NAMESPACE},
         "conditions": [], "statusFeedback": {"values": [json_raw("status", &s.node_pool),
            {"name": "replicas", "fieldValue": {"type": "Integer", "integer": s.desired}}]}}
    ]);
    let mut work = s.work.clone();
    work["resourceStatus"] = json!({ "manifests": manifests });
    let bundle = json!({
        "id": "b7f1c9a2-0000-4000-8000-000000000001",
        "created_at": "2026-06-10T22:50:00Z",
        "updated_at": "2026-06-10T23:20:00Z",
        "metadata": {"labels": {"api.openshift.com/id": ID}},
        "status": {
            "conditions": s.work["conditions"].clone(),
            "resourceStatus": [{
                "resourceMeta": {"kind": "ManifestWork", "name": "cluster-work", "namespace": "local-cluster"},
                "conditions": [],
                "statusFeedback": {"values": [json_raw("status", &work)]}
            }]
        }
    });
    let bundle: ResourceBundle = serde_json::from_value(bundle).unwrap();
    let mut unknown = Vec::new();
    let parsed = maestro::parse_bundle(&bundle, &mut unknown);
    assert!(unknown.is_empty(), "{unknown:?}");
    parsed.observations
}

/// Kube: the objects a management cluster's API server lists.
fn through_kube(s: &Statuses) -> Vec<Observation> {
    let meta = |name: &str, ns: &str| {
        json!({"name": name, "namespace": ns, "creationTimestamp": "2026-06-10T22:50:30Z",
               "labels": {"api.openshift.com/id": ID}})
    };
    let work = json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": meta("cluster-work", "local-cluster"), "status": s.work});
    let hc = json!({"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedCluster",
        "metadata": meta("my-cluster", NAMESPACE), "spec": {"platform": {"type": "Azure"}},
        "status": s.hosted_cluster});
    let np = json!({"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "NodePool",
        "metadata": meta("workers", NAMESPACE),
        "spec": {"clusterName": "my-cluster", "replicas": s.desired}, "status": s.node_pool});
    let mut cfg = KubeSourceConfig::new("mgmt-1", KubeMode::Aro);
    cfg.environment = "prod".to_string();
    let cfg = MapperConfig::from(&cfg);
    let mut mapper = Mapper::new(cfg.clone());
    let mut unknown = Vec::new();
    let work: objects::ManifestWork = serde_json::from_value(work).unwrap();
    let hc: objects::HostedCluster = serde_json::from_value(hc).unwrap();
    let np: objects::NodePool = serde_json::from_value(np).unwrap();
    mapper.upsert(ObjRef::of(&work.metadata), work.facts(&cfg, &mut unknown));
    mapper.upsert(ObjRef::of(&hc.metadata), hc.facts(&cfg, &mut unknown));
    mapper.upsert(ObjRef::of(&np.metadata), np.facts(&cfg, &mut unknown));
    assert!(unknown.is_empty(), "{unknown:?}");
    mapper.flush()
}

/// The facts a reading decides, without where and when it was read.
fn facts(observations: &[Observation], hop: Hop) -> HopView {
    let o = observations
        .iter()
        .find(|o| o.hop == hop)
        .unwrap_or_else(|| panic!("no {hop} in {observations:?}"));
    let Change::Upsert(view) = &o.change else {
        panic!("{o:?}")
    };
    HopView {
        created_at: None,
        updated_at: None,
        identity: Default::default(),
        ..(**view).clone()
    }
}

fn store() -> std::sync::Arc<Store> {
    let hop_budgets = HopBudgets {
        hosted_cluster: Duration::from_secs(15 * 60),
        ..HopBudgets::default()
    };
    store::builder()
        .model(ModelConfig {
            hop_budgets,
            ..ModelConfig::default()
        })
        .build()
}

/// The `hop_phase` and `hop_condition` series of the management hops, with
/// `via` taken out.
fn series(store: &Store) -> Vec<String> {
    let body = store.scrape(Format::Text);
    let mut lines: Vec<String> = body
        .lines()
        .filter(|l| l.starts_with("hcpflow_hop_phase{") || l.starts_with("hcpflow_hop_condition{"))
        .filter(|l| {
            ["manifestwork", "hosted_cluster", "node_pool"]
                .iter()
                .any(|h| l.contains(&format!("hop=\"{h}\"")))
        })
        .map(|l| {
            l.replace(",via=\"maestro\"", "")
                .replace(",via=\"direct\"", "")
                .replace("via=\"maestro\",", "")
                .replace("via=\"direct\",", "")
        })
        .collect();
    lines.sort();
    lines
}

fn apply(store: &Store, observations: Vec<Observation>, now: Timestamp) {
    store.apply_at(
        Batch {
            source: "test".to_string(),
            initial: false,
            observed_at: now,
            observations,
        },
        now,
    );
}

fn rows() -> Vec<(&'static str, Statuses)> {
    let t = "2026-06-10T23:00:00Z";
    let applied = json!({"conditions": [cond("Applied", "True", "AppliedManifestWorkComplete", t),
                                        cond("Available", "True", "ResourcesAvailable", t)]});
    let pool_ready = json!({"replicas": 3, "conditions": [cond("Ready", "True", "AsExpected", t),
        cond("ValidReleaseImage", "True", "AsExpected", t)]});
    vec![
        (
            "available and rolled out",
            Statuses {
                work: applied.clone(),
                hosted_cluster: json!({"conditions": [cond("Available", "True", "AsExpected", t),
                    cond("Degraded", "False", "AsExpected", t)],
                    "version": {"history": [{"state": "Completed", "version": "4.20.0"}]}}),
                node_pool: pool_ready.clone(),
                desired: 3,
            },
        ),
        (
            "not available and degraded",
            Statuses {
                work: applied.clone(),
                hosted_cluster: json!({"conditions": [
                    cond("Available", "False", "WaitingForAvailable", t),
                    cond("Degraded", "True", "ComponentsNotAvailable", "2026-06-10T23:05:00Z"),
                    cond("Progressing", "True", "Reconciling", t),
                    cond("EtcdAvailable", "False", "EtcdWaitingForQuorum", t)],
                    "version": {"history": [{"state": "Partial", "version": "4.20.0"}]}}),
                node_pool: json!({"replicas": 1, "conditions": [cond("Ready", "False", "WaitingForNodes", t)]}),
                desired: 3,
            },
        ),
        (
            "invalid release image",
            Statuses {
                work: json!({"conditions": [cond("Applied", "False", "AppliedManifestWorkFailed", t)]}),
                hosted_cluster: json!({"conditions": [cond("Available", "False", "WaitingForAvailable", t),
                    cond("ValidReleaseImage", "False", "InvalidImage", t)]}),
                node_pool: json!({"conditions": [cond("ValidPlatformImage", "False", "ImageNotFound", t)]}),
                desired: 2,
            },
        ),
        (
            "no status yet",
            Statuses {
                work: json!({}),
                hosted_cluster: json!({}),
                node_pool: json!({}),
                desired: 0,
            },
        ),
    ]
}

#[test]
fn the_same_object_gives_the_same_facts_whichever_way_it_was_read() {
    for (name, statuses) in rows() {
        let maestro = through_maestro(&statuses);
        let kube = through_kube(&statuses);
        for hop in [Hop::Manifestwork, Hop::HostedCluster, Hop::NodePool] {
            assert_eq!(facts(&maestro, hop), facts(&kube, hop), "{name}: {hop}");
        }
    }
}

#[test]
fn the_same_object_gives_the_same_series_also_after_its_budget_runs_out() {
    for (name, statuses) in rows() {
        let read_at = ts("2026-06-10T23:10:00Z");
        let (via_maestro, via_kube) = (store(), store());
        apply(&via_maestro, through_maestro(&statuses), read_at);
        apply(&via_kube, through_kube(&statuses), read_at);
        let before = series(&via_maestro);
        assert!(!before.is_empty(), "{name}");
        assert_eq!(before, series(&via_kube), "{name}");

        // Degraded since 23:05 with a 15 minute budget: failed at 23:20 by
        // the model's clock alone, on both sides alike.
        let later = ts("2026-06-10T23:20:00Z");
        via_maestro.tick_at(later);
        via_kube.tick_at(later);
        let after = series(&via_maestro);
        assert_eq!(after, series(&via_kube), "{name}");
        if name == "not available and degraded" {
            assert!(
                after.iter().any(|l| l.contains("hop=\"hosted_cluster\"")
                    && l.contains("phase=\"failed\"")),
                "{after:#?}"
            );
            assert_ne!(before, after);
        }
    }
}
