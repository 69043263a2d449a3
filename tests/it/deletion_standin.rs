//! A deletion read from objects written here after HyperShift's own fixture
//! (`hypershift/examples/zz_fixture_TestCreateCluster_azure_minimal_render`
//! in the reference: the HostedCluster and NodePool it renders, with the
//! status, `deletionTimestamp` and finalizer a deletion gives them), served
//! by a Kubernetes list/watch endpoint that holds only what the test puts
//! in it, through the real kube source and the store (docs/design/15-operations.md §15.3).
//!
//! - a cluster deleted hop by hop: one delete operation, started at the
//!   upstream `deletionTimestamp`, each hop done when its object is gone,
//!   one SLO event and one duration, and no series of it left;
//! - a deletion whose HostedCluster keeps its finalizer (HyperShift says
//!   `CloudResourcesDestroyed` False) stays in flight and is stuck at
//!   `hosted_cluster` past the deletion's budget.

use std::time::Duration;

use crate::common::hypershift;
use crate::common::kube::{eventually, harness_waiting_for};
use hcp_flow::metrics::exposition::Format;
use hcp_flow::model::{Hop, OperationKind, Status};
use hcp_flow::sim::kube::KubeApiServer;
use hcp_flow::sources::kube::KubeMode;
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

const NAMESPACE: &str = "clusters";

fn at(t: Timestamp) -> String {
    t.round(jiff::Unit::Second).unwrap_or(t).to_string()
}

/// The fixture's HostedCluster `name` (its spec cut to what a reader
/// needs), Available since `available`, with HyperShift's deletion marks
/// when `deleting` is given: the deletionTimestamp, its finalizer and, when
/// `stuck`, `CloudResourcesDestroyed` False.
fn hosted_cluster(
    name: &str,
    id: &str,
    created: Timestamp,
    deleting: Option<Timestamp>,
    stuck: bool,
) -> Value {
    let available = created + SignedDuration::from_mins(8);
    let mut conditions = vec![
        json!({"type": "Available", "status": "True", "reason": "AsExpected", "message": "The hosted control plane is available", "lastTransitionTime": at(available), "observedGeneration": 1}),
        json!({"type": "Degraded", "status": "False", "reason": "AsExpected", "message": "The hosted cluster is not degraded", "lastTransitionTime": at(available), "observedGeneration": 1}),
    ];
    if let (Some(d), true) = (deleting, stuck) {
        conditions.push(json!({"type": "CloudResourcesDestroyed", "status": "False", "reason": "CloudResourcesDeletionTimedOut", "message": "Timed out waiting for cloud resources to be destroyed", "lastTransitionTime": at(d), "observedGeneration": 2}));
    }
    let mut metadata = json!({
        "name": name,
        "namespace": NAMESPACE,
        "uid": format!("uid-{name}"),
        "creationTimestamp": at(created),
        "annotations": {"hypershift.openshift.io/HasBeenAvailable": "true"},
    });
    if let Some(d) = deleting {
        metadata["deletionTimestamp"] = json!(at(d));
        metadata["finalizers"] = json!(["hypershift.openshift.io/finalizer"]);
    }
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1",
        "kind": "HostedCluster",
        "metadata": metadata,
        "spec": hypershift::hosted_cluster_spec(id),
        "status": {
            "conditions": conditions,
            "version": {"desired": {"version": "4.20.2"}, "history": [{"state": "Completed", "version": "4.20.2", "startedTime": at(created), "completionTime": at(available)}]},
        },
    })
}

/// The fixture's NodePool of `cluster`, its replicas ready.
fn node_pool(cluster: &str, created: Timestamp, deleting: Option<Timestamp>) -> Value {
    let ready = created + SignedDuration::from_mins(12);
    let mut metadata = json!({
        "name": format!("{cluster}-np1"),
        "namespace": NAMESPACE,
        "uid": format!("uid-{cluster}-np1"),
        "creationTimestamp": at(created),
    });
    if let Some(d) = deleting {
        metadata["deletionTimestamp"] = json!(at(d));
        metadata["finalizers"] = json!(["hypershift.openshift.io/finalizer"]);
    }
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1",
        "kind": "NodePool",
        "metadata": metadata,
        "spec": hypershift::node_pool_spec(cluster),
        "status": {
            "replicas": 2,
            "conditions": [{"type": "Ready", "status": "True", "reason": "AsExpected", "message": "", "lastTransitionTime": at(ready), "observedGeneration": 1}],
        },
    })
}

fn series_of(text: &str, id: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.contains(&format!("cluster_id=\"{id}\"")))
        .map(str::to_string)
        .collect()
}

fn sample(text: &str, prefix: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_deleted_hop_by_hop_is_one_deletion_then_gone() {
    let (server, url) = KubeApiServer::start().await.unwrap();
    let now = Timestamp::now();
    let created = now - SignedDuration::from_mins(40);
    let id = "5b1c7d3e-0f2a-4c8b-9d6e-0000000000d1";
    server
        .apply(hosted_cluster("example", id, created, None, false))
        .unwrap();
    server.apply(node_pool("example", created, None)).unwrap();
    let mut h = harness_waiting_for("deletion-standin", &["kube/hub"]);
    h.start(&[("hub", &url, KubeMode::SelfManaged)], |_| {})
        .await;
    eventually("the hub synced", || h.store.ready()).await;
    eventually("the creation complete", || {
        h.store
            .with_timeline(id, |t| t.operation_in_flight().is_none())
            .unwrap_or(false)
    })
    .await;

    // The user deletes it: HyperShift marks both objects.
    let deleting = now - SignedDuration::from_secs(90);
    server
        .apply(hosted_cluster(
            "example",
            id,
            created,
            Some(deleting),
            false,
        ))
        .unwrap();
    server
        .apply(node_pool("example", created, Some(deleting)))
        .unwrap();
    eventually("the deletion in flight", || {
        h.store
            .with_timeline(id, |t| t.deletion_in_flight().is_some())
            .unwrap_or(false)
    })
    .await;
    let (start, observed) = h
        .store
        .with_timeline(id, |t| {
            let d = t.deletion.as_deref().unwrap();
            (d.started_at.at, d.started_at.observed)
        })
        .unwrap();
    assert_eq!(
        start.timestamp(),
        deleting.round(jiff::Unit::Second).unwrap()
    );
    assert!(!observed, "the start is the upstream deletionTimestamp");
    let text = h.text();
    assert!(
        text.contains(&format!(
            r#"hcpflow_operation_in_flight{{cluster_id="{id}",operation="delete",node_pool="",target_version=""}} 1"#
        )),
        "{text}"
    );

    // The pools go first, then the HostedCluster's finalizer clears.
    assert!(server.delete("NodePool", Some(NAMESPACE), "example-np1"));
    eventually("the node pool done", || {
        h.store
            .with_timeline(id, |t| {
                t.deletion
                    .as_deref()
                    .and_then(|d| d.hop(Hop::NodePool))
                    .is_some_and(|hop| hop.done_at.is_some())
            })
            .unwrap_or(false)
    })
    .await;
    assert!(
        h.store.with_timeline(id, |_| ()).is_some(),
        "kept while a hop is left"
    );
    assert!(server.delete("HostedCluster", Some(NAMESPACE), "example"));
    eventually("the cluster gone", || {
        h.store.with_timeline(id, |_| ()).is_none()
    })
    .await;

    let text = h.store.scrape(Format::Text);
    assert_eq!(series_of(&text, id), Vec::<String>::new());
    assert_eq!(
        sample(
            &text,
            r#"hcpflow_operation_slo_events_total{operation="delete",outcome="good"}"#
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            r#"hcpflow_operation_slo_events_total{operation="delete""#
        ),
        1.0,
        "one SLO event"
    );
    assert_eq!(
        sample(
            &text,
            r#"hcpflow_operation_duration_seconds_count{operation="delete""#
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            r#"hcpflow_hop_duration_seconds_count{operation="delete",hop="node_pool""#
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            r#"hcpflow_hop_duration_seconds_count{operation="delete",hop="hosted_cluster""#
        ),
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosted_cluster_holding_its_finalizer_is_a_deletion_stuck_there() {
    let (server, url) = KubeApiServer::start().await.unwrap();
    let now = Timestamp::now();
    let created = now - SignedDuration::from_hours(2);
    let id = "5b1c7d3e-0f2a-4c8b-9d6e-0000000000d2";
    // Deleting for 29 minutes of the 30 the deletion gives a HostedCluster;
    // its pools are gone already.
    // Whole seconds, as the object carries it.
    let deleting = (now - SignedDuration::from_mins(29))
        .round(jiff::Unit::Second)
        .unwrap();
    server
        .apply(hosted_cluster("stuck", id, created, Some(deleting), true))
        .unwrap();
    let mut h = harness_waiting_for("deletion-standin-stuck", &["kube/hub"]);
    h.start(&[("hub", &url, KubeMode::SelfManaged)], |_| {})
        .await;
    eventually("the hub synced", || h.store.ready()).await;
    let judge = |h: &crate::common::kube::KubeHarness, at: Timestamp| {
        let mut judge = h.store.judge();
        judge.now = at;
        h.store
            .with_timeline(id, |t| judge.verdict(t))
            .expect("the cluster is tracked")
    };
    let before = judge(
        &h,
        deleting + SignedDuration::from_mins(30) - SignedDuration::from_secs(2),
    );
    assert_eq!(before.operation, Some(OperationKind::Delete));
    assert_eq!(before.status, Status::InProgress, "{before:?}");
    assert_eq!(before.hop, Some(Hop::HostedCluster));
    let past = judge(&h, deleting + SignedDuration::from_mins(30));
    assert_eq!(past.status, Status::Stuck, "{past:?}");
    assert_eq!(past.hop, Some(Hop::HostedCluster));
    assert!(
        past.reason.contains("CloudResourcesDestroyed=False")
            && past.reason.contains("hypershift.openshift.io/finalizer"),
        "{}",
        past.reason
    );
    // Nothing ends it while the finalizer holds.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        h.store
            .with_timeline(id, |t| t.deletion_in_flight().is_some())
            .unwrap_or(false)
    );
    let text = h.text();
    assert!(
        text.contains(&format!(
            r#"hcpflow_hop_condition{{cluster_id="{id}",hop="hosted_cluster",condition="CloudResourcesDestroyed",status="false""#
        )),
        "{}",
        series_of(&text, id).join("\n")
    );
    assert_eq!(
        sample(
            &text,
            r#"hcpflow_operation_slo_events_total{operation="delete""#
        ),
        0.0,
        "not late yet, not ended"
    );
}
