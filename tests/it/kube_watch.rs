//! Watch semantics end to end: the simulated API server, the real kube
//! client and the exporter's watchers, into the fleet store.

use crate::common::kube::{KubeHarness, eventually, harness, harness_waiting_for};
use hcp_flow::metrics::exporter::{RequestErrorKind, RequestErrorLabels};
use hcp_flow::model::{Hop, Phase};
use hcp_flow::sim::kube::{
    ClusterLayout, KubeApiHandle, KubeApiServer, KubeClusterSpec, objects_at,
};
use hcp_flow::sources::kube::KubeMode;
use jiff::Timestamp;
use serde_json::json;

fn t(minutes: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + minutes * 60).unwrap()
}

fn aro_spec(id: &str) -> KubeClusterSpec {
    KubeClusterSpec::healthy(id, ClusterLayout::Aro, t(0))
}

fn apply_at(server: &KubeApiHandle, spec: &KubeClusterSpec, at: Timestamp) {
    for obj in objects_at(spec, at) {
        server.apply(obj).unwrap();
    }
}

fn delete_all(server: &KubeApiHandle, spec: &KubeClusterSpec) {
    for obj in objects_at(spec, t(60)) {
        let kind = obj["kind"].as_str().unwrap();
        let ns = obj["metadata"]["namespace"].as_str();
        assert!(server.delete(kind, ns, obj["metadata"]["name"].as_str().unwrap()));
    }
}

const MGMT_HOPS: [Hop; 5] = [
    Hop::Manifestwork,
    Hop::HostedCluster,
    Hop::ControlPlane,
    Hop::ManagedCluster,
    Hop::NodePool,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_modify_delete_flow_through_to_the_store() {
    let (server, url) = KubeApiServer::start().await.unwrap();
    let spec = aro_spec("c1");
    apply_at(&server, &spec, t(3));
    let mut h = harness_waiting_for("amd", &["kube/mgmt-a"]);
    h.start(&[("mgmt-a", &url, KubeMode::Aro)], |_| {}).await;

    // Each kind is its own watch (docs/design/09-reading-the-upstreams.md §9.6): the first sync is
    // over when every kind has listed once, not when one of them has.
    eventually("initial sync", || h.store.ready()).await;
    assert_eq!(h.phase("c1", Hop::HostedCluster), Some(Phase::Progressing));
    assert_eq!(h.phase("c1", Hop::Manifestwork), Some(Phase::Ready));
    eventually("source up", || h.up("kube/mgmt-a") == 1).await;
    let initial: Vec<bool> = h.recorder.batches.lock().iter().map(|b| b.1).collect();
    assert!(
        initial.iter().filter(|i| **i).count() >= 6,
        "one initial batch per kind: {initial:?}"
    );

    apply_at(&server, &spec, t(15));
    eventually("all ready", || {
        MGMT_HOPS
            .iter()
            .all(|hop| h.phase("c1", *hop) == Some(Phase::Ready))
    })
    .await;
    assert!(
        h.recorder.batches.lock().iter().any(|b| !b.1 && b.2 > 0),
        "live changes are not initial"
    );
    let mgmt = h
        .store
        .with_timeline("c1", |tl| tl.identity.mgmt_cluster.clone())
        .unwrap();
    assert_eq!(mgmt, "mgmt-a");

    delete_all(&server, &spec);
    eventually("cluster removed", || {
        h.store.with_timeline("c1", |_| ()).is_none()
    })
    .await;
    assert!(h.events("kube/mgmt-a", "delete") >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_after_an_outage_removes_what_vanished() {
    let (server, url) = KubeApiServer::start().await.unwrap();
    let (keep, lose) = (aro_spec("keep"), aro_spec("lose"));
    apply_at(&server, &keep, t(15));
    apply_at(&server, &lose, t(15));
    let mut h = harness("relist");
    h.start(&[("mgmt-a", &url, KubeMode::Aro)], |_| {}).await;
    eventually("both synced", || {
        h.phase("keep", Hop::NodePool) == Some(Phase::Ready)
            && h.phase("lose", Hop::NodePool) == Some(Phase::Ready)
    })
    .await;
    eventually("source up", || h.up("kube/mgmt-a") == 1).await;

    server.stop().await;
    eventually("source down", || h.up("kube/mgmt-a") == 0).await;
    delete_all(&server, &lose);
    assert!(
        h.store.with_timeline("lose", |_| ()).is_some(),
        "last good state is kept while down"
    );
    let batches_before = h.recorder.batches.lock().len();

    server.restart().await.unwrap();
    eventually("source up again", || h.up("kube/mgmt-a") == 1).await;
    eventually("vanished cluster removed", || {
        h.store.with_timeline("lose", |_| ()).is_none()
    })
    .await;
    assert_eq!(h.phase("keep", Hop::HostedCluster), Some(Phase::Ready));
    let after: Vec<bool> = h.recorder.batches.lock()[batches_before..]
        .iter()
        .map(|b| b.1)
        .collect();
    assert!(
        after.iter().all(|initial| !initial),
        "a relist is not a first sync: {after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_resource_version_is_recovered_by_relisting() {
    let (server, url) = KubeApiServer::start().await.unwrap();
    let spec = aro_spec("c410");
    apply_at(&server, &spec, t(3));
    let mut h = harness("gone");
    h.start(&[("mgmt-a", &url, KubeMode::Aro)], |_| {}).await;
    eventually("synced", || {
        h.phase("c410", Hop::HostedCluster) == Some(Phase::Progressing)
    })
    .await;
    eventually("source up", || h.up("kube/mgmt-a") == 1).await;

    // History is compacted and open watches end: resuming gets 410 Gone.
    server.compact();
    apply_at(&server, &spec, t(15));
    eventually("410 seen", || h.events("kube/mgmt-a", "error") >= 1).await;
    let gone = h
        .store
        .exporter_metrics()
        .source_request_errors
        .get_or_create(&RequestErrorLabels {
            source: "kube/mgmt-a".to_string(),
            kind: RequestErrorKind::status_4xx,
        })
        .get();
    assert!(gone >= 1, "the error is the 410, not a dropped connection");
    eventually("relisted state", || {
        h.phase("c410", Hop::HostedCluster) == Some(Phase::Ready)
    })
    .await;
    eventually("source up again", || h.up("kube/mgmt-a") == 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_object_is_skipped_and_counted() {
    let (server, url) = KubeApiServer::start().await.unwrap();
    server
        .insert_raw_malformed("HostedCluster", Some("ocm-prod-bad"), "bad")
        .unwrap();
    let spec = aro_spec("good");
    apply_at(&server, &spec, t(15));
    let mut h = harness("malformed");
    h.start(&[("mgmt-a", &url, KubeMode::Aro)], |_| {}).await;
    eventually("good cluster", || {
        h.phase("good", Hop::HostedCluster) == Some(Phase::Ready)
    })
    .await;
    eventually("source up", || h.up("kube/mgmt-a") == 1).await;
    assert!(h.unknown("kube/mgmt-a", "object") >= 1);
    assert!(h.events("kube/mgmt-a", "malformed") >= 1);
    assert!(h.store.with_timeline("bad", |_| ()).is_none());

    // Live too: a good object turning bad keeps its last good state.
    server
        .insert_raw_malformed("NodePool", Some("ocm-prod-good"), "name-good-workers")
        .unwrap();
    eventually("counted again", || h.unknown("kube/mgmt-a", "object") >= 2).await;
    assert_eq!(h.phase("good", Hop::NodePool), Some(Phase::Ready));
    assert_eq!(h.up("kube/mgmt-a"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_management_cluster_down_does_not_stall_the_other() {
    let (a, url_a) = KubeApiServer::start().await.unwrap();
    let (b, url_b) = KubeApiServer::start().await.unwrap();
    apply_at(&a, &aro_spec("on-a"), t(15));
    apply_at(&b, &aro_spec("on-b"), t(15));
    let mut h = harness("two");
    h.start(
        &[
            ("mgmt-a", &url_a, KubeMode::Aro),
            ("mgmt-b", &url_b, KubeMode::Aro),
        ],
        |_| {},
    )
    .await;
    eventually("both up", || {
        h.up("kube/mgmt-a") == 1 && h.up("kube/mgmt-b") == 1
    })
    .await;
    let mgmt = |id: &str| {
        h.store
            .with_timeline(id, |tl| tl.identity.mgmt_cluster.clone())
    };
    eventually("both seen", || {
        mgmt("on-a").is_some() && mgmt("on-b").is_some()
    })
    .await;
    assert_eq!(mgmt("on-a").as_deref(), Some("mgmt-a"));
    assert_eq!(mgmt("on-b").as_deref(), Some("mgmt-b"));

    a.stop().await;
    eventually("a down", || h.up("kube/mgmt-a") == 0).await;
    apply_at(&b, &aro_spec("later-b"), t(15));
    eventually("b keeps updating", || {
        h.phase("later-b", Hop::HostedCluster) == Some(Phase::Ready)
    })
    .await;
    assert_eq!(h.up("kube/mgmt-b"), 1);

    apply_at(&a, &aro_spec("later-a"), t(15));
    a.restart().await.unwrap();
    eventually("a back", || h.up("kube/mgmt-a") == 1).await;
    eventually("a updates again", || {
        h.phase("later-a", Hop::HostedCluster) == Some(Phase::Ready)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paged_relists_see_every_object() {
    let (server, url) = KubeApiServer::start().await.unwrap();
    for i in 0..7 {
        apply_at(&server, &aro_spec(&format!("p{i}")), t(15));
    }
    let mut h = harness("paged");
    h.start(&[("mgmt-a", &url, KubeMode::Aro)], |cfg| cfg.page_size = 2)
        .await;
    eventually("all seven", || {
        (0..7).all(|i| h.phase(&format!("p{i}"), Hop::NodePool) == Some(Phase::Ready))
    })
    .await;
    // Each page reaches the model as it arrives: no first-sync batch holds
    // a whole kind's seven objects (the old whole-list batch was the
    // management side's memory peak).
    let batches = h.recorder.batches.lock().clone();
    let initial: Vec<usize> = batches
        .iter()
        .filter(|(source, initial, _)| source == "kube/mgmt-a" && *initial)
        .map(|(_, _, n)| *n)
        .collect();
    assert!(initial.iter().sum::<usize>() >= 7 * 5, "{initial:?}");
    assert!(initial.iter().all(|n| *n <= 4), "{initial:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_managed_hub_reports_mce_phase_and_agents() {
    let (server, url) = KubeApiServer::start().await.unwrap();
    let spec = KubeClusterSpec {
        mode: ClusterLayout::SelfManaged,
        cluster_id: "8f0c2a6e-0000-4000-8000-000000000001".to_string(),
        ..aro_spec("unused")
    };
    apply_at(&server, &spec, t(15));
    server
        .apply(json!({"kind": "MultiClusterEngine", "metadata": {"name": "multiclusterengine"}, "status": {"phase": "Progressing"}}))
        .unwrap();
    for (name, approved, stage) in [
        ("a1", true, "Done"),
        ("a2", true, "Done"),
        ("a3", false, ""),
        ("a4", true, "Frobnicating"),
    ] {
        server
            .apply(json!({
                "kind": "Agent",
                "metadata": {"name": name, "namespace": "agents"},
                "spec": {"approved": approved, "clusterDeploymentName": {"name": "c", "namespace": "clusters"}},
                "status": {"progress": {"currentStage": stage}},
            }))
            .unwrap();
    }
    let mut h = harness("hub");
    h.start(&[("hub", &url, KubeMode::SelfManaged)], |_| {})
        .await;
    eventually("cluster", || {
        h.phase(&spec.cluster_id, Hop::ManagedCluster) == Some(Phase::Ready)
    })
    .await;
    eventually("mce", || {
        h.kube_text()
            .contains(r#"hcpflow_mce_phase{mgmt_cluster="hub",phase="Progressing"} 1"#)
    })
    .await;
    // Agents are their own kind, listed on their own: the MultiClusterEngine
    // may be seen first.
    eventually("agents", || {
        h.kube_text()
            .contains(r#"hcpflow_agents{mgmt_cluster="hub",approved="true",stage="Done"} 2"#)
    })
    .await;
    let text = h.kube_text();
    assert!(
        text.contains(r#"hcpflow_agents{mgmt_cluster="hub",approved="false",stage="none"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"hcpflow_agents{mgmt_cluster="hub",approved="true",stage="other"} 1"#),
        "{text}"
    );
    assert!(h.unknown("kube/hub", "status.progress.currentStage") >= 1);

    server
        .apply(json!({"kind": "MultiClusterEngine", "metadata": {"name": "multiclusterengine"}, "status": {"phase": "Available"}}))
        .unwrap();
    server.delete("Agent", Some("agents"), "a4");
    eventually("mce available", || {
        h.kube_text().contains(r#"phase="Available"} 1"#)
    })
    .await;
    eventually("agent gone", || !h.kube_text().contains(r#"stage="other""#)).await;
    assert!(
        !h.kube_text().contains(r#"phase="Progressing""#),
        "only the current phase has a series"
    );
}

fn slo_events(h: &KubeHarness) -> u64 {
    let text = h.store.scrape(hcp_flow::metrics::exposition::Format::Text);
    text.lines()
        .filter(|l| l.starts_with("hcpflow_operation_slo_events_total{operation=\"create\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_exporter_counts_no_old_creation_again() {
    let (server, url) = KubeApiServer::start().await.unwrap();
    apply_at(&server, &aro_spec("old"), t(15));
    let mut h = harness("restart-safety");
    h.start(&[("mgmt-a", &url, KubeMode::Aro)], |_| {}).await;
    eventually("old loaded", || {
        h.phase("old", Hop::HostedCluster) == Some(Phase::Ready)
    })
    .await;
    eventually("source up", || h.up("kube/mgmt-a") == 1).await;
    assert_eq!(
        slo_events(&h),
        0,
        "a creation completed before the first sync is not counted"
    );

    // An outage and relist does not count it either.
    server.restart().await.unwrap();
    eventually("relisted", || h.events("kube/mgmt-a", "init_done") >= 12).await;
    assert_eq!(slo_events(&h), 0);

    // A creation witnessed live is counted once.
    let fresh = aro_spec("fresh");
    apply_at(&server, &fresh, t(3));
    eventually("fresh seen", || {
        h.phase("fresh", Hop::HostedCluster) == Some(Phase::Progressing)
    })
    .await;
    apply_at(&server, &fresh, t(15));
    eventually("fresh counted", || slo_events(&h) == 1).await;
}
