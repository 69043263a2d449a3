//! Upgrades as operations (docs/design/15-operations.md §15.10), read the way a
//! self-managed hub serves them: a HostedCluster and a NodePool written here
//! after HyperShift's fixture and the reference CRDs (the version history's
//! `startedTime` / `completionTime`, a NodePool's `status.version` and the
//! `UpdatingVersion` condition with HyperShift's own message), served by a
//! Kubernetes list/watch endpoint that holds only what the test puts in it,
//! read by the real kube source.
//!
//! - a control-plane upgrade is one `upgrade` operation keyed by its target
//!   version, from the history entry's `startedTime` to its
//!   `completionTime`, with one SLO event and one hop duration;
//! - a node pool's upgrade is one `node_pool_upgrade` operation from its
//!   `UpdatingVersion` transition until the pool reports the version with
//!   no update in progress;
//! - each is its own trace, keyed by cluster, kind, pool and version;
//! - the installation's own history entry is no upgrade.

use std::collections::HashMap;
use std::sync::Arc;

use crate::common::hypershift::{self, entry, second};
use crate::common::kube::{KubeHarness, eventually, harness_waiting_for};
use crate::common::otlp;
use hcp_flow::model::{Hop, OperationKind, Phase, Stamp, Timeline, trace_id_hex};
use hcp_flow::sim::kube::KubeApiServer;
use hcp_flow::sources::kube::KubeMode;
use hcp_flow::traces::{CreationTracer, TraceMetrics};
use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

const NAMESPACE: &str = "clusters";
const CLUSTER_ID: &str = "5b1c7d3e-0f2a-4c8b-9d6e-0000000000f3";

fn hosted_cluster(created: Timestamp, desired: &str, history: Vec<Value>) -> Value {
    hypershift::hosted_cluster(CLUSTER_ID, NAMESPACE, created, desired, history)
}

fn node_pool(
    created: Timestamp,
    ready: Timestamp,
    version: &str,
    updating_to: Option<(&str, Timestamp)>,
) -> Value {
    hypershift::node_pool(NAMESPACE, created, ready, version, updating_to)
}

fn sample(text: &str, family: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .find(|l| labels.iter().all(|want| l.contains(want)))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

fn count(text: &str, family: &str, labels: &[&str]) -> f64 {
    sample(text, family, labels).unwrap_or(0.0)
}

fn timeline(h: &KubeHarness) -> Timeline {
    h.store
        .with_timeline(CLUSTER_ID, Timeline::clone)
        .expect("the cluster is tracked")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_plane_and_a_node_pool_upgrade_are_one_operation_each_with_hypershifts_times() {
    let (received, endpoint) = otlp::grpc_receiver();
    let env = HashMap::from([
        ("OTEL_EXPORTER_OTLP_ENDPOINT".to_string(), endpoint),
        (
            "OTEL_EXPORTER_OTLP_PROTOCOL".to_string(),
            "grpc".to_string(),
        ),
    ]);
    let tracer = Arc::new(
        CreationTracer::from_env_map(&env, TraceMetrics::default())
            .expect("a valid OTLP setting")
            .expect("an endpoint is set"),
    );
    let (server, url) = KubeApiServer::start().await.expect("the stand-in serves");
    let now = Timestamp::now();
    let created = now - SignedDuration::from_mins(120);
    let installed = created + SignedDuration::from_mins(15);
    let pool_ready = created + SignedDuration::from_mins(20);
    let installation = entry("Completed", "4.20.2", created, Some(installed));
    server
        .apply(hosted_cluster(
            created,
            "4.20.2",
            vec![installation.clone()],
        ))
        .expect("applied");
    server
        .apply(node_pool(created, pool_ready, "4.20.2", None))
        .expect("applied");
    let mut h = harness_waiting_for("upgrades", &["kube/hub"]);
    h.store.add_listener(tracer.clone());
    h.start(&[("hub", &url, KubeMode::SelfManaged)], |_| {})
        .await;
    eventually("the hub synced", || h.store.ready()).await;
    eventually("the pool read", || {
        h.phase(CLUSTER_ID, Hop::NodePool) == Some(Phase::Ready)
    })
    .await;
    assert!(
        timeline(&h).day2_operations.is_none(),
        "the installation's history entry is the creation's, no upgrade"
    );

    // The version operator started 4.20.5 twenty minutes ago.
    let started = now - SignedDuration::from_mins(20);
    server
        .apply(hosted_cluster(
            created,
            "4.20.5",
            vec![
                entry("Partial", "4.20.5", started, None),
                installation.clone(),
            ],
        ))
        .expect("applied");
    eventually("the upgrade in flight", || {
        sample(
            &h.text(),
            "hcpflow_operation_in_flight",
            &[r#"operation="upgrade""#, r#"target_version="4.20.5""#],
        ) == Some(1.0)
    })
    .await;
    let op = timeline(&h)
        .day2_operation(OperationKind::Upgrade, Some("4.20.5"))
        .cloned()
        .expect("the upgrade");
    assert_eq!(op.started_at.at, Stamp::from(second(started)));
    assert!(!op.started_at.observed, "HyperShift's startedTime");
    assert_eq!(op.key(CLUSTER_ID), format!("{CLUSTER_ID}/upgrade/4.20.5"));
    assert_eq!(
        sample(
            &h.text(),
            "hcpflow_operation_started_timestamp_seconds",
            &[r#"operation="upgrade""#],
        ),
        Some(second(started).as_second() as f64)
    );

    // Completed a minute ago: nineteen minutes, within the hour's target.
    let completed = now - SignedDuration::from_mins(1);
    server
        .apply(hosted_cluster(
            created,
            "4.20.5",
            vec![
                entry("Completed", "4.20.5", started, Some(completed)),
                installation.clone(),
            ],
        ))
        .expect("applied");
    eventually("the upgrade done", || {
        sample(
            &h.text(),
            "hcpflow_operation_slo_events_total",
            &[r#"operation="upgrade""#, r#"outcome="good""#],
        ) == Some(1.0)
    })
    .await;
    let text = h.text();
    assert_eq!(
        sample(
            &text,
            "hcpflow_operation_duration_seconds_sum",
            &[r#"operation="upgrade""#, r#"outcome="succeeded""#],
        ),
        Some(
            second(completed)
                .duration_since(second(started))
                .as_secs_f64()
        ),
        "from startedTime to completionTime"
    );
    assert_eq!(
        count(
            &text,
            "hcpflow_operation_duration_seconds_count",
            &[r#"operation="upgrade""#, r#"version="4.20""#],
        ),
        1.0,
        "counted under the target's minor version"
    );
    assert_eq!(
        count(
            &text,
            "hcpflow_hop_duration_seconds_count",
            &[r#"operation="upgrade""#, r#"hop="hosted_cluster""#],
        ),
        1.0
    );
    for outcome in ["late", "failed"] {
        assert_eq!(
            count(
                &text,
                "hcpflow_operation_slo_events_total",
                &[r#"operation="upgrade""#, &format!(r#"outcome="{outcome}""#)],
            ),
            0.0
        );
    }
    assert_eq!(
        sample(
            &text,
            "hcpflow_operation_in_flight",
            &[r#"operation="upgrade""#]
        ),
        None
    );

    // The pool follows ten minutes ago, HyperShift's UpdatingVersion naming
    // the target.
    let pool_started = now - SignedDuration::from_mins(10);
    server
        .apply(node_pool(
            created,
            pool_ready,
            "4.20.2",
            Some(("4.20.5", pool_started)),
        ))
        .expect("applied");
    eventually("the pool's upgrade in flight", || {
        sample(
            &h.text(),
            "hcpflow_operation_in_flight",
            &[
                r#"operation="node_pool_upgrade""#,
                r#"node_pool="np1""#,
                r#"target_version="4.20.5""#,
            ],
        ) == Some(1.0)
    })
    .await;
    let op = timeline(&h)
        .day2_operation(OperationKind::NodePoolUpgrade, Some("np1/4.20.5"))
        .cloned()
        .expect("the pool's upgrade");
    assert_eq!(op.started_at.at, Stamp::from(second(pool_started)));
    assert!(!op.started_at.observed);

    // Rolled out: the pool runs 4.20.5, HyperShift removed the condition.
    server
        .apply(node_pool(created, pool_ready, "4.20.5", None))
        .expect("applied");
    eventually("the pool's upgrade done", || {
        sample(
            &h.text(),
            "hcpflow_operation_slo_events_total",
            &[r#"operation="node_pool_upgrade""#, r#"outcome="good""#],
        ) == Some(1.0)
    })
    .await;
    let text = h.text();
    let took = sample(
        &text,
        "hcpflow_operation_duration_seconds_sum",
        &[r#"operation="node_pool_upgrade""#, r#"outcome="succeeded""#],
    )
    .expect("a duration");
    // No upstream time dates the end (Ready never changed): when it was seen
    // (the start is rounded to the second, as upstream writes it).
    assert!(
        (595.0..700.0).contains(&took),
        "from UpdatingVersion's transition to when it was seen rolled out: {took}"
    );
    assert!(
        timeline(&h).day2_operations.is_none(),
        "nothing left in flight"
    );
    assert_eq!(
        count(
            &text,
            "hcpflow_operation_slo_events_total",
            &[r#"operation="upgrade""#, r#"outcome="good""#],
        ),
        1.0,
        "one verdict for the control plane's, read again since"
    );

    // One trace each, keyed by kind, pool and target: a root and its hop.
    let spans = |trace: &str| {
        tracer.flush();
        received
            .spans()
            .into_iter()
            .filter(|g| hex(&g.span.trace_id) == trace)
            .collect::<Vec<_>>()
    };
    for (key, root, hop, pool) in [
        (
            format!("{CLUSTER_ID}/upgrade/4.20.5"),
            "hcp.cluster.upgrade",
            "hcp.hop.hosted_cluster",
            None,
        ),
        (
            format!("{CLUSTER_ID}/node_pool_upgrade/np1/4.20.5"),
            "hcp.node_pool.upgrade",
            "hcp.hop.node_pool",
            Some("np1"),
        ),
    ] {
        let trace = trace_id_hex(&key);
        eventually("the upgrade's trace", || spans(&trace).len() >= 2).await;
        let got = spans(&trace);
        let names: Vec<&str> = got.iter().map(|g| g.span.name.as_str()).collect();
        assert_eq!(names.iter().filter(|n| **n == root).count(), 1, "{names:?}");
        assert_eq!(names.iter().filter(|n| **n == hop).count(), 1, "{names:?}");
        for g in &got {
            assert_eq!(g.attr("hcp.target_version").as_deref(), Some("4.20.5"));
            assert_eq!(g.attr("hcp.node_pool").as_deref(), pool);
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
