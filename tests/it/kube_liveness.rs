//! A kube source tells the truth about itself (docs/design/09-reading-the-upstreams.md §9.6, §9.7):
//! up only on evidence (lists, events, bookmarks), down when a hung API
//! server goes silent past the idle deadline, back within moments of the
//! cluster answering again, optional kinds disabled rather than holding the
//! source down, and every list/watch request counted.

use std::time::Duration;

use crate::common::kube::layout_of;
use crate::common::kube::{KubeHarness, harness_waiting_for};
use hcp_flow::metrics::exporter::{KindState, SourceLabels};
use hcp_flow::model::{Hop, Phase};
use hcp_flow::sim::kube::{KubeApiHandle, KubeApiServer, KubeClusterSpec, objects_at};
use hcp_flow::sources::kube::{KubeMode, KubeSourceConfig};
use jiff::Timestamp;
use tokio::time::Instant;

fn t(minutes: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + minutes * 60).unwrap()
}

/// One source `kube/<context>` against `url`, with fast backoffs unless
/// `tweak` says otherwise; the store is ready once it synced.
async fn start(
    name: &str,
    context: &str,
    url: &str,
    mode: KubeMode,
    tweak: impl Fn(&mut KubeSourceConfig),
) -> KubeHarness {
    let source = format!("kube/{context}");
    let mut h = harness_waiting_for(&format!("live-{name}"), &[&source]);
    h.start(&[(context, url, mode)], tweak).await;
    h
}

async fn eventually(what: &str, within: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn spec(id: &str, mode: KubeMode) -> KubeClusterSpec {
    KubeClusterSpec::healthy(id, layout_of(mode), t(0))
}

fn apply_at(server: &KubeApiHandle, spec: &KubeClusterSpec, at: Timestamp) {
    for obj in objects_at(spec, at) {
        server.apply(obj).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_api_server_downs_the_source_within_the_idle_deadline() {
    let (server, url) = KubeApiServer::start().await.unwrap();
    server.set_bookmark_interval(Duration::from_millis(300));
    apply_at(&server, &spec("c1", KubeMode::Aro), t(15));
    let idle = Duration::from_secs(2);
    let h = start("hung", "mgmt-a", &url, KubeMode::Aro, |c| {
        c.idle_timeout = idle
    })
    .await;
    let source = "kube/mgmt-a";
    eventually("up", Duration::from_secs(15), || h.up(source) == 1).await;
    let first = h.last_success(source);
    eventually(
        "bookmarks refresh last_success",
        Duration::from_secs(5),
        || h.last_success(source) > first,
    )
    .await;

    server.freeze();
    let frozen_at = Instant::now();
    eventually("down", idle + Duration::from_secs(3), || h.up(source) == 0).await;
    let took = frozen_at.elapsed();
    assert!(
        took >= idle.mul_f64(0.9),
        "down only once the deadline passed, not before: {took:?}"
    );
    let last = h.last_success(source);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(h.up(source), 0, "still down while hung");
    assert_eq!(h.last_success(source), last, "no evidence, no progress");
    assert!(h.restarts(source, "idle") >= 1, "{}", h.text());
    let status = &h.store.source_status()[0];
    let error = status.last_error.as_ref().unwrap();
    assert!(
        error.message.contains("not even a bookmark"),
        "the cause is named: {}",
        error.message
    );

    server.unfreeze();
    let thawed = Instant::now();
    eventually("up again", Duration::from_secs(5), || h.up(source) == 1).await;
    assert!(
        thawed.elapsed() < Duration::from_secs(4),
        "{:?}",
        thawed.elapsed()
    );
    assert!(h.last_success(source) > last);
    assert_eq!(h.phase("c1", Hop::HostedCluster), Some(Phase::Ready));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_healthy_cluster_stays_up_on_bookmarks_alone() {
    let (server, url) = KubeApiServer::start().await.unwrap();
    server.set_bookmark_interval(Duration::from_millis(250));
    apply_at(&server, &spec("quiet", KubeMode::Aro), t(30));
    let idle = Duration::from_secs(1);
    let h = start("quiet", "mgmt-q", &url, KubeMode::Aro, |c| {
        c.idle_timeout = idle
    })
    .await;
    let source = "kube/mgmt-q";
    eventually("up", Duration::from_secs(15), || h.up(source) == 1).await;
    let first = h.last_success(source);
    // Nothing changes for four idle deadlines: only bookmarks arrive.
    let until = Instant::now() + idle * 4;
    while Instant::now() < until {
        assert_eq!(h.up(source), 1, "bookmarks are evidence: {}", h.text());
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(h.restarts(source, "idle"), 0);
    assert!(
        h.last_success(source) >= first + 3.0,
        "last_success follows bookmarks"
    );
    assert!(
        h.text()
            .contains(r#"hcpflow_watch_events_total{source="kube/mgmt-q",event="bookmark"}"#)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_outage_every_kind_relists_within_moments_of_the_first() {
    let (server, url) = KubeApiServer::start().await.unwrap();
    apply_at(&server, &spec("r1", KubeMode::Aro), t(15));
    // A long cap: only the shared backoff, reset and woken by the first kind
    // that lists, makes recovery fast.
    let h = start("recover", "mgmt-r", &url, KubeMode::Aro, |c| {
        c.min_backoff = Duration::from_millis(500);
        c.max_backoff = Duration::from_secs(60);
    })
    .await;
    let source = "kube/mgmt-r";
    eventually("up", Duration::from_secs(15), || h.up(source) == 1).await;
    let kinds: Vec<String> = h.store.source_status()[0].failing.clone();
    assert!(kinds.is_empty());

    server.stop().await;
    eventually("down", Duration::from_secs(5), || h.up(source) == 0).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    server.restart().await.unwrap();
    let restored = Instant::now();
    let health = h.store.health();
    let all_kinds = KubeSourceConfig::new("mgmt-r", KubeMode::Aro).kinds();
    let mut first_ok: Option<Instant> = None;
    eventually("every kind listed", Duration::from_secs(15), || {
        let ok = all_kinds
            .iter()
            .filter(|k| health.kind_state(source, k.as_str()) == Some(KindState::ok))
            .count();
        if ok > 0 && first_ok.is_none() {
            first_ok = Some(Instant::now());
        }
        ok == all_kinds.len()
    })
    .await;
    let all_ok = Instant::now();
    assert_eq!(h.up(source), 1);
    let spread = all_ok - first_ok.unwrap();
    assert!(
        spread < Duration::from_millis(1500),
        "the first kind to list wakes the others: {spread:?}"
    );
    assert!(
        restored.elapsed() < Duration::from_secs(7),
        "recovered {:?} after the restore",
        restored.elapsed()
    );
    assert!(h.restarts(source, "error") >= 1);
    // Requests were counted: every list and watch call.
    let requests = h
        .store
        .exporter_metrics()
        .source_requests
        .get_or_create(&SourceLabels {
            source: source.to_string(),
        })
        .get();
    assert!(requests > 0);
    let status = &h.store.source_status()[0];
    assert!(status.down_since.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_without_agent_and_mce_crds_is_up_and_ready() {
    let (server, url) = KubeApiServer::start().await.unwrap();
    assert!(server.set_installed("Agent", false));
    assert!(server.set_installed("MultiClusterEngine", false));
    let cluster = KubeClusterSpec {
        cluster_id: "8f0c2a6e-0000-4000-8000-000000000002".to_string(),
        ..spec("unused", KubeMode::SelfManaged)
    };
    apply_at(&server, &cluster, t(15));
    let h = start("absent", "hub", &url, KubeMode::SelfManaged, |_| {}).await;
    let source = "kube/hub";
    eventually("ready", Duration::from_secs(15), || h.store.ready()).await;
    eventually("up", Duration::from_secs(5), || h.up(source) == 1).await;
    let status = &h.store.source_status()[0];
    assert!(
        status.synced && status.up && status.pending.is_empty(),
        "{status:?}"
    );
    let disabled: Vec<(&str, KindState)> = status
        .disabled
        .iter()
        .map(|d| (d.kind.as_str(), d.state))
        .collect();
    assert_eq!(
        disabled,
        vec![
            ("agent", KindState::absent),
            ("multiclusterengine", KindState::absent)
        ]
    );
    assert!(
        status.disabled[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("agent-install.openshift.io/v1beta1/agents is not served"),
        "{status:?}"
    );
    let text = h.text();
    for kind in ["agent", "multiclusterengine"] {
        assert!(
            text.contains(&format!(
                r#"hcpflow_source_kind_info{{source="kube/hub",kind="{kind}",state="absent"}} 1"#
            )),
            "{text}"
        );
    }
    // The hub's clusters count in their own scope.
    eventually("cluster seen", Duration::from_secs(5), || {
        h.phase(&cluster.cluster_id, Hop::HostedCluster).is_some()
    })
    .await;
    h.store.tick_at(Timestamp::now());
    let text = h.text();
    assert!(
        text.contains(r#"hcpflow_tracked_clusters{scope="self_managed"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"hcpflow_tracked_clusters{scope="management"} 0"#),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_kind_says_so_and_a_forbidden_required_kind_downs_the_source() {
    let (server, url) = KubeApiServer::start().await.unwrap();
    assert!(server.set_forbidden("Agent", true));
    let h = start("forbidden", "hub", &url, KubeMode::SelfManaged, |_| {}).await;
    let source = "kube/hub";
    eventually("ready", Duration::from_secs(15), || h.store.ready()).await;
    assert_eq!(h.up(source), 1);
    let health = h.store.health();
    assert_eq!(
        health.kind_state(source, "agent"),
        Some(KindState::forbidden)
    );
    let status = &h.store.source_status()[0];
    let reason = status.disabled[0].reason.as_deref().unwrap();
    assert!(
        reason.contains("RBAC forbids list/watch of agent-install.openshift.io/v1beta1/agents")
            && reason.contains("cannot list resource \"agents\""),
        "{reason}"
    );
    assert!(h.text().contains(
        r#"hcpflow_source_kind_info{source="kube/hub",kind="agent",state="forbidden"} 1"#
    ));

    // HostedClusters are required: forbidding them is a failure, with the
    // API's own message in the error.
    assert!(server.set_forbidden("HostedCluster", true));
    eventually("down", Duration::from_secs(5), || h.up(source) == 0).await;
    let status = &h.store.source_status()[0];
    let error = status.last_error.as_ref().unwrap();
    assert_eq!(error.kind, "hostedcluster");
    assert!(
        error.message.starts_with("HTTP 403")
            && error
                .message
                .contains("hostedclusters.hypershift.openshift.io is forbidden"),
        "{}",
        error.message
    );
    assert!(server.set_forbidden("HostedCluster", false));
    // Generous: once (in a loaded CI run) this took over 10 s and the
    // failure said nothing of why; now it says which kind held it down.
    let deadline = Instant::now() + Duration::from_secs(30);
    while h.up(source) != 1 {
        assert!(
            Instant::now() < deadline,
            "not up again within 30 s: {:#?}",
            h.store.source_status()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_named_in_the_error() {
    // Bind and drop a listener: its port refuses connections.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let h = start("refused", "gone", &url, KubeMode::Aro, |_| {}).await;
    eventually("an error", Duration::from_secs(10), || {
        h.store.source_status()[0].last_error.is_some()
    })
    .await;
    let status = &h.store.source_status()[0];
    let message = &status.last_error.as_ref().unwrap().message;
    assert!(
        message.starts_with("connection refused: list "),
        "{message}"
    );
    assert!(
        h.text()
            .contains(r#"hcpflow_source_request_errors_total{source="kube/gone",kind="connect"}"#)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_removed_while_watched_disables_its_kind_and_forgets_its_objects() {
    let (server, url) = KubeApiServer::start().await.unwrap();
    server
        .apply(serde_json::json!({"kind": "MultiClusterEngine", "metadata": {"name": "multiclusterengine"}, "status": {"phase": "Available"}}))
        .unwrap();
    let h = start("removed", "hub", &url, KubeMode::SelfManaged, |_| {}).await;
    let source = "kube/hub";
    let phase = r#"hcpflow_mce_phase{mgmt_cluster="hub",phase="Available"} 1"#;
    eventually("mce phase", Duration::from_secs(15), || {
        h.text().contains(phase)
    })
    .await;
    assert!(server.set_installed("MultiClusterEngine", false));
    let health = h.store.health();
    eventually("absent", Duration::from_secs(10), || {
        health.kind_state(source, "multiclusterengine") == Some(KindState::absent)
    })
    .await;
    assert!(!h.text().contains(phase), "{}", h.text());
    assert_eq!(h.up(source), 1, "an optional kind going away is no outage");
    assert!(h.store.ready());
}
