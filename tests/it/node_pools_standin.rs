//! Node pools as operations (docs/design/15-operations.md §15.9), read the way a
//! self-managed hub serves them: a HostedCluster and NodePools written here
//! after HyperShift's fixture, served by a Kubernetes list/watch endpoint
//! that holds only what the test puts in it, read by the real kube source.
//!
//! - a day-2 NodePool is one `node_pool_create` operation, from its
//!   `creationTimestamp` to its Ready condition's `lastTransitionTime`
//!   (the duration observed), with one SLO event, while the cluster's
//!   creation stays done;
//! - a pool given a `deletionTimestamp` and then deleted is one
//!   `node_pool_delete` operation from that timestamp, with one SLO event;
//! - a pool that was ready before the exporter watched starts nothing.

use crate::common::hypershift;
use crate::common::kube::{eventually, harness_waiting_for};
use hcp_flow::model::{Hop, OperationKind, Phase, Stamp};
use hcp_flow::sim::kube::KubeApiServer;
use hcp_flow::sources::kube::KubeMode;
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

const NAMESPACE: &str = "clusters";
const CLUSTER_ID: &str = "5b1c7d3e-0f2a-4c8b-9d6e-0000000000f2";

fn at(t: Timestamp) -> String {
    t.round(jiff::Unit::Second).unwrap_or(t).to_string()
}

fn second(t: Timestamp) -> Timestamp {
    t.round(jiff::Unit::Second).unwrap_or(t)
}

fn hosted_cluster(created: Timestamp, available: Timestamp) -> Value {
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1",
        "kind": "HostedCluster",
        "metadata": {"name": "example", "namespace": NAMESPACE, "uid": "uid-example", "creationTimestamp": at(created)},
        "spec": hypershift::hosted_cluster_spec(CLUSTER_ID),
        "status": {
            "conditions": [{"type": "Available", "status": "True", "reason": "AsExpected", "message": "The hosted control plane is available", "lastTransitionTime": at(available), "observedGeneration": 1}],
            "version": {"desired": {"version": "4.20.2"}, "history": [{"state": "Completed", "version": "4.20.2", "startedTime": at(created), "completionTime": at(available)}]},
        },
    })
}

/// A NodePool of the fixture's cluster, its two replicas ready at `ready`
/// or none yet (waiting for its machines), deleting from `deleting`.
fn node_pool(
    name: &str,
    created: Timestamp,
    ready: Option<Timestamp>,
    deleting: Option<Timestamp>,
) -> Value {
    let (replicas, condition) = match ready {
        Some(t) => (
            2,
            json!({"type": "Ready", "status": "True", "reason": "AsExpected", "message": "", "lastTransitionTime": at(t), "observedGeneration": 1}),
        ),
        None => (
            0,
            json!({"type": "Ready", "status": "False", "reason": "WaitingForAvailableMachines", "message": "", "lastTransitionTime": at(created), "observedGeneration": 1}),
        ),
    };
    let mut metadata = json!({"name": name, "namespace": NAMESPACE, "uid": format!("uid-{name}"), "creationTimestamp": at(created)});
    if let Some(t) = deleting {
        metadata["deletionTimestamp"] = json!(at(t));
        metadata["finalizers"] = json!(["hypershift.openshift.io/finalizer"]);
    }
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1",
        "kind": "NodePool",
        "metadata": metadata,
        "spec": hypershift::node_pool_spec("example"),
        "status": {"replicas": replicas, "conditions": [condition]},
    })
}

fn sample(text: &str, family: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .find(|l| labels.iter().all(|want| l.contains(want)))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// `operation`'s good SLO events in `text`.
fn good(text: &str, operation: &str) -> Option<f64> {
    let operation = format!(r#"operation="{operation}""#);
    sample(
        text,
        "hcpflow_operation_slo_events_total",
        &[&operation, r#"outcome="good""#],
    )
}

/// How many of `operation` succeeded, by its duration histogram.
fn succeeded(text: &str, operation: &str) -> Option<f64> {
    let operation = format!(r#"operation="{operation}""#);
    sample(
        text,
        "hcpflow_operation_duration_seconds_count",
        &[&operation, r#"outcome="succeeded""#],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_two_pool_and_a_pool_removal_are_one_operation_each_with_upstream_times() {
    let (server, url) = KubeApiServer::start().await.expect("the stand-in serves");
    let now = Timestamp::now();
    let created = now - SignedDuration::from_mins(60);
    let available = now - SignedDuration::from_mins(50);
    server
        .apply(hosted_cluster(created, available))
        .expect("applied");
    // np1 came with the cluster and was ready before anyone watched.
    server
        .apply(node_pool("np1", created, Some(available), None))
        .expect("applied");
    let mut h = harness_waiting_for("node-pools", &["kube/hub"]);
    h.start(&[("hub", &url, KubeMode::SelfManaged)], |_| {})
        .await;
    eventually("the hub synced", || h.store.ready()).await;
    eventually("the pool read", || {
        h.phase(CLUSTER_ID, Hop::NodePool) == Some(Phase::Ready)
    })
    .await;
    let timeline = |h: &crate::common::kube::KubeHarness| {
        h.store
            .with_timelines(|ts| {
                let mut found = None;
                for t in ts {
                    if t.cluster_id == CLUSTER_ID {
                        found = Some(t.clone());
                    }
                }
                found
            })
            .expect("the cluster is tracked")
    };
    assert!(
        timeline(&h).day2_operations.is_none(),
        "a pool ready before the watch started is no operation"
    );

    // A day-2 pool, added three minutes ago, waits for its machines.
    let added = now - SignedDuration::from_mins(3);
    server
        .apply(node_pool("np2", added, None, None))
        .expect("applied");
    eventually("np2's creation in flight", || {
        sample(
            &h.text(),
            "hcpflow_operation_in_flight",
            &[r#"operation="node_pool_create""#, r#"node_pool="np2""#],
        ) == Some(1.0)
    })
    .await;
    assert_eq!(
        sample(
            &h.text(),
            "hcpflow_operation_started_timestamp_seconds",
            &[r#"operation="node_pool_create""#, r#"node_pool="np2""#],
        ),
        Some(second(added).as_second() as f64),
        "started at the pool's creationTimestamp"
    );
    let started = timeline(&h)
        .day2_operation(OperationKind::NodePoolCreate, Some("np2"))
        .map(|op| op.started_at)
        .expect("np2's creation");
    assert_eq!(started.at, Stamp::from(second(added)));
    assert!(!started.observed, "an upstream time");
    // Its nodes join a minute ago.
    let ready = now - SignedDuration::from_mins(1);
    server
        .apply(node_pool("np2", added, Some(ready), None))
        .expect("applied");
    eventually("np2's creation done", || {
        good(&h.text(), "node_pool_create") == Some(1.0)
    })
    .await;
    // From its creationTimestamp to its Ready condition's time: two minutes.
    let text = h.text();
    assert_eq!(
        sample(
            &text,
            "hcpflow_operation_duration_seconds_sum",
            &[r#"operation="node_pool_create""#, r#"outcome="succeeded""#],
        ),
        Some(second(ready).duration_since(second(added)).as_secs_f64()),
        "{text}"
    );
    assert_eq!(succeeded(&text, "node_pool_create"), Some(1.0));
    assert_eq!(
        sample(
            &text,
            "hcpflow_hop_duration_seconds_count",
            &[r#"operation="node_pool_create""#, r#"hop="node_pool""#],
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            "hcpflow_operation_in_flight",
            &[r#"node_pool="np2""#]
        ),
        None
    );
    assert!(
        timeline(&h).day2_operations.is_none(),
        "nothing else in flight: np1 was ready before the watch"
    );

    // np1 is removed: HyperShift's finalizer holds it while its machines
    // drain, then it goes.
    let removing = now - SignedDuration::from_secs(30);
    server
        .apply(node_pool("np1", created, Some(available), Some(removing)))
        .expect("applied");
    eventually("np1's removal in flight", || {
        sample(
            &h.text(),
            "hcpflow_operation_in_flight",
            &[r#"operation="node_pool_delete""#, r#"node_pool="np1""#],
        ) == Some(1.0)
    })
    .await;
    assert!(
        timeline(&h).deletion.is_none(),
        "a pool's removal is not the cluster's deletion"
    );
    let started = timeline(&h)
        .day2_operation(OperationKind::NodePoolDelete, Some("np1"))
        .map(|op| op.started_at)
        .expect("np1's removal");
    assert_eq!(started.at, Stamp::from(second(removing)));
    assert!(!started.observed);
    assert!(server.delete("NodePool", Some(NAMESPACE), "np1"));
    eventually("np1's removal done", || {
        good(&h.text(), "node_pool_delete") == Some(1.0)
    })
    .await;
    let text = h.text();
    assert_eq!(succeeded(&text, "node_pool_delete"), Some(1.0));
    assert_eq!(
        sample(
            &text,
            "hcpflow_operation_in_flight",
            &[r#"node_pool="np1""#]
        ),
        None
    );
    // One of each, nothing more, nothing left in flight, the cluster kept.
    assert_eq!(good(&text, "node_pool_create"), Some(1.0));
    assert!(timeline(&h).day2_operations.is_none());
    assert!(timeline(&h).deletion.is_none());
}
