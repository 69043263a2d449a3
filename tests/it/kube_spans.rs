//! What a kube source shows of itself in the exporter's own traces and logs
//! (docs/design/09-reading-the-upstreams.md §9.6): each relist and watch connection is a span named
//! for its source and kind, and an `environment` the HostedCluster
//! namespaces contradict is one warning, not one per object.
//!
//! A single-threaded runtime keeps every task on the test's thread, where
//! the capturing subscriber is installed.

use crate::common::child;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::kube::harness_waiting_for;
use hcp_flow::sim::kube::{
    ClusterLayout, KubeApiServer, KubeClusterFaults, KubeClusterSpec, objects_at,
};
use hcp_flow::sources::kube::{KubeMode, KubeSourceConfig};
use jiff::Timestamp;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};

#[derive(Clone, Default)]
struct Captured {
    spans: Arc<Mutex<Vec<String>>>,
    warnings: Arc<Mutex<Vec<String>>>,
}

/// `name{field=value,...}` of each span and event.
struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={:?}", field.name(), value));
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Captured {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _id: &tracing::span::Id,
        _ctx: Context<'_, S>,
    ) {
        let mut fields = Fields(attrs.metadata().name().to_string());
        attrs.record(&mut fields);
        self.spans.lock().unwrap().push(fields.0);
    }

    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        if *event.metadata().level() == tracing::Level::WARN {
            let mut fields = Fields(String::new());
            event.record(&mut fields);
            self.warnings.lock().unwrap().push(fields.0);
        }
    }
}

/// Spans are caught through the process-wide tracing dispatch, which other
/// tests' subscribers and callsite caches share: this runs in a process of
/// its own.
#[test]
fn relists_and_watches_are_spans_and_a_wrong_environment_is_one_warning() {
    child::run_alone(
        "kube_spans::relists_and_watches_are_spans_in_a_process_of_their_own",
        &[],
    );
}

#[tokio::test]
#[ignore = "run as a child process by relists_and_watches_are_spans_and_a_wrong_environment_is_one_warning"]
async fn relists_and_watches_are_spans_in_a_process_of_their_own() {
    if !child::is_child() {
        eprintln!("not a child of the spans test; nothing to check");
        return;
    }
    let captured = Captured::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(captured.clone()));

    let (server, url) = KubeApiServer::start().await.unwrap();
    let at = Timestamp::from_second(1_800_000_000).unwrap();
    // Two clusters of environment "int", watched as if it were "prod".
    for id in ["c1", "c2"] {
        let spec = KubeClusterSpec {
            cluster_id: id.to_string(),
            name: format!("name-{id}"),
            env: "int".to_string(),
            mode: ClusterLayout::Aro,
            created_at: at,
            manifestwork_applied_at: Some(at),
            hosted_cluster_available_at: Some(at),
            control_plane_ready_at: Some(at),
            managed_cluster_joined_at: Some(at),
            node_pools: vec![],
            faults: KubeClusterFaults::default(),
            hub: Default::default(),
            deletion: Default::default(),
        };
        for obj in objects_at(&spec, at) {
            server.apply(obj).unwrap();
        }
    }
    let mut h = harness_waiting_for("spans", &["kube/mgmt-s"]);
    // The source's own backoffs: a faster retry would warn more often.
    let defaults = KubeSourceConfig::new("mgmt-s", KubeMode::Aro);
    h.start(&[("mgmt-s", &url, KubeMode::Aro)], |c| {
        c.min_backoff = defaults.min_backoff;
        c.max_backoff = defaults.max_backoff;
    })
    .await;
    let store = h.store.clone();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !store.ready() {
        assert!(tokio::time::Instant::now() < deadline, "never ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Let every watch connect.
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(h);

    let spans = captured.spans.lock().unwrap().clone();
    for kind in ["hostedcluster", "nodepool", "manifestwork"] {
        for name in ["kube.relist", "kube.watch"] {
            let want = format!("{name} source=kube/mgmt-s kind=\"{kind}\"");
            assert!(
                spans.iter().any(|s| s == &want),
                "no span {want}: {spans:#?}"
            );
        }
    }
    let warnings = captured.warnings.lock().unwrap().clone();
    let environment: Vec<&String> = warnings
        .iter()
        .filter(|w| w.contains("is of environment \"int\", not the configured \"prod\""))
        .collect();
    assert_eq!(environment.len(), 1, "once per source: {warnings:#?}");
}
