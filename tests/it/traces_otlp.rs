//! Creation traces end to end: a store fed observations, the tracer listening,
//! and an in-process OTLP receiver (gRPC through the opentelemetry-proto tonic
//! service, HTTP/protobuf through an axum route) checking what arrives.

use crate::common::store;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::common::otlp::{self, Got, Received, attr};
use hcp_flow::metrics::exposition::Format;
use hcp_flow::model::testing::{Obs, batch, obs};
use hcp_flow::model::{ConditionStatus, Hop, Phase, Via};
use hcp_flow::store::Store;
use hcp_flow::traces::{
    CreationTracer, ROOT_SPAN_NAME, TraceMetrics, TracerOptions, span_id, span_id_of, trace_id,
    trace_id_hex,
};
use jiff::Timestamp;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;

fn t(minutes: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + minutes * 60).unwrap()
}

fn nanos(at: Timestamp) -> u64 {
    at.as_nanosecond() as u64
}

const RID: &str = "/subscriptions/sub-1/resourcegroups/rg-1/providers/microsoft.redhatopenshift/hcpopenshiftclusters/alpha";

fn grpc_receiver() -> (Received, HashMap<String, String>) {
    let (received, endpoint) = otlp::grpc_receiver();
    let env = HashMap::from([
        ("OTEL_EXPORTER_OTLP_ENDPOINT".to_string(), endpoint),
        (
            "OTEL_EXPORTER_OTLP_PROTOCOL".to_string(),
            "grpc".to_string(),
        ),
    ]);
    (received, env)
}

/// A receiver that wants the header `x-tenant: ops team`, which only the
/// percent-decoded `OTEL_EXPORTER_OTLP_HEADERS` gives.
fn http_receiver() -> (Received, HashMap<String, String>) {
    let (received, endpoint) = otlp::http_receiver(Some("ops team"));
    let env = HashMap::from([
        ("OTEL_EXPORTER_OTLP_ENDPOINT".to_string(), endpoint),
        (
            "OTEL_EXPORTER_OTLP_PROTOCOL".to_string(),
            "http/protobuf".to_string(),
        ),
        (
            "OTEL_EXPORTER_OTLP_HEADERS".to_string(),
            "x-tenant=ops%20team".to_string(),
        ),
    ]);
    (received, env)
}

fn new_store() -> Arc<Store> {
    store::default_store()
}

/// A store with a tracer exporting to `env`'s endpoint.
fn traced_store(
    env: &HashMap<String, String>,
    service: &str,
    options: TracerOptions,
) -> (Arc<Store>, Arc<CreationTracer>, TraceMetrics) {
    let mut env = env.clone();
    env.insert("OTEL_SERVICE_NAME".to_string(), service.to_string());
    let metrics = TraceMetrics::default();
    let tracer = CreationTracer::from_env_map(&env, metrics.clone())
        .unwrap()
        .expect("an endpoint is set")
        .with_options(options);
    let tracer = Arc::new(tracer);
    let store = new_store();
    store.add_listener(tracer.clone());
    // The first sync of the source: nothing seen yet.
    store.apply_at(batch(true, t(0), vec![]), t(0));
    (store, tracer, metrics)
}

fn apply(store: &Store, at: i64, observations: Vec<Obs>) {
    store.apply_at(batch(false, t(at), observations), t(at));
}

/// The service side of creation `id`: Clusters Service ready at 5 min, the
/// Maestro bundle applied (2) and available (3).
fn service_side(store: &Store, id: &str) {
    let cs = || {
        obs(id, Hop::ClustersService)
            .created(t(0))
            .resource_id(RID)
            .name("alpha")
            .platform("azure")
            .mgmt_cluster("mgmt-1")
    };
    apply(
        store,
        1,
        vec![cs().state("installing", Phase::Progressing).since(t(0))],
    );
    apply(
        store,
        3,
        vec![
            obs(id, Hop::MaestroBundle)
                .object("bundle-1")
                .state("Available", Phase::Ready)
                .created(t(1))
                .since(t(3))
                .condition(
                    "Applied",
                    ConditionStatus::True,
                    "AppliedManifestWorkComplete",
                    t(2),
                )
                .condition(
                    "Available",
                    ConditionStatus::True,
                    "ResourcesAvailable",
                    t(3),
                ),
        ],
    );
    apply(
        store,
        5,
        vec![cs().state("ready", Phase::Ready).since(t(5))],
    );
}

/// The HostedCluster becoming Available at 12 min, read through `via`.
fn hosted_cluster_ready(store: &Store, id: &str, via: Via) {
    let hc = || obs(id, Hop::HostedCluster).via(via).created(t(4));
    apply(
        store,
        6,
        vec![hc().state("Progressing", Phase::Progressing).since(t(4))],
    );
    apply(
        store,
        12,
        vec![
            hc().state("Available", Phase::Ready)
                .since(t(12))
                .condition("Available", ConditionStatus::True, "AsExpected", t(12))
                .condition("Degraded", ConditionStatus::False, "AsExpected", t(4)),
        ],
    );
}

#[test]
fn one_trace_per_creation_over_grpc_with_upstream_times() {
    let (received, env) = grpc_receiver();
    let (store, tracer, metrics) = traced_store(&env, "hcp-flow-test", TracerOptions::default());
    service_side(&store, "c-1");
    hosted_cluster_ready(&store, "c-1", Via::Direct);
    tracer.flush();

    let spans = received.by_name();
    assert_eq!(
        spans.keys().cloned().collect::<Vec<_>>(),
        vec![
            ROOT_SPAN_NAME.to_string(),
            "hcp.hop.clusters_service".to_string(),
            "hcp.hop.hosted_cluster".to_string(),
            "hcp.hop.maestro_bundle".to_string(),
        ]
    );
    assert_eq!(metrics.exported.get(), 4);
    let trace = trace_id("c-1").to_vec();
    let root = &spans[ROOT_SPAN_NAME];
    assert_eq!(root.service, "hcp-flow-test");
    assert!(spans.values().all(|g| g.span.trace_id == trace));
    assert_eq!(root.span.span_id, span_id("c-1", None).to_vec());
    assert!(root.span.parent_span_id.is_empty());
    assert_eq!(root.span.start_time_unix_nano, nanos(t(0)));
    assert_eq!(root.span.end_time_unix_nano, nanos(t(12)));
    assert_eq!(
        root.attr("hcp.creation.outcome").as_deref(),
        Some("succeeded")
    );
    assert_eq!(root.attr("hcp.slo.outcome").as_deref(), Some("good"));
    for (key, value) in [
        ("hcp.cluster.id", "c-1"),
        ("hcp.cluster.name", "alpha"),
        ("cloud.resource_id", RID),
        ("hcp.mgmt_cluster", "mgmt-1"),
        ("hcp.platform", "azure"),
    ] {
        assert_eq!(root.attr(key).as_deref(), Some(value), "root {key}");
    }

    let expected = [
        (Hop::ClustersService, 0, 5, "ready"),
        (Hop::MaestroBundle, 1, 3, "Available"),
        (Hop::HostedCluster, 4, 12, "Available"),
    ];
    for (hop, start, end, state) in expected {
        let got = &spans[&format!("hcp.hop.{hop}")];
        assert_eq!(
            got.span.span_id,
            span_id("c-1", Some(hop)).to_vec(),
            "{hop}"
        );
        assert_eq!(got.span.parent_span_id, root.span.span_id, "{hop}");
        assert_eq!(got.span.start_time_unix_nano, nanos(t(start)), "{hop}");
        assert_eq!(got.span.end_time_unix_nano, nanos(t(end)), "{hop}");
        assert_eq!(got.attr("hcp.hop").as_deref(), Some(hop.as_str()));
        assert_eq!(got.attr("hcp.hop.state").as_deref(), Some(state));
        assert_eq!(got.attr("hcp.cluster.id").as_deref(), Some("c-1"));
        assert_eq!(got.attr("cloud.resource_id").as_deref(), Some(RID));
        let status = got.span.status.clone().unwrap_or_default();
        assert_ne!(status.code, StatusCode::Error as i32, "{hop}");
    }

    // Condition changes inside the span are events at their transition time;
    // the Degraded=False from the hop's very start is inside too.
    let bundle = &spans["hcp.hop.maestro_bundle"];
    let events: Vec<(String, u64)> = bundle
        .span
        .events
        .iter()
        .map(|e| (e.name.clone(), e.time_unix_nano))
        .collect();
    assert_eq!(
        events,
        vec![
            ("Applied=True".to_string(), nanos(t(2))),
            ("Available=True".to_string(), nanos(t(3))),
        ]
    );
    let reason = attr(&bundle.span.events[0].attributes, "hcp.condition.reason");
    assert_eq!(reason.as_deref(), Some("AppliedManifestWorkComplete"));
    let hc_events: Vec<String> = spans["hcp.hop.hosted_cluster"]
        .span
        .events
        .iter()
        .map(|e| e.name.clone())
        .collect();
    assert_eq!(hc_events, vec!["Degraded=False", "Available=True"]);

    // Exemplars on the OpenMetrics scrape carry the same trace id.
    let scrape = store.scrape(Format::OpenMetrics);
    let exemplar = format!("trace_id=\"{}\"", trace_id_hex("c-1"));
    for family in [
        "hcpflow_operation_duration_seconds_bucket",
        "hcpflow_hop_duration_seconds_bucket",
    ] {
        assert!(
            scrape
                .lines()
                .any(|l| l.starts_with(family) && l.contains(&exemplar)),
            "{family} has no exemplar {exemplar}:\n{scrape}"
        );
    }
    assert_eq!(hex_of(&root.span.trace_id), trace_id_hex("c-1"));
    tracer.shutdown();
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_failed_hop_sets_error_status_with_its_reason_over_http() {
    let (received, env) = http_receiver();
    let (store, tracer, metrics) = traced_store(&env, "hcp-flow-test", TracerOptions::default());
    apply(
        &store,
        1,
        vec![
            obs("c-fail", Hop::ClustersService)
                .created(t(0))
                .state("installing", Phase::Progressing)
                .since(t(0)),
        ],
    );
    apply(
        &store,
        4,
        vec![
            obs("c-fail", Hop::ClustersService)
                .created(t(0))
                .state("error", Phase::Failed)
                .since(t(4))
                .error("OCM4001", "the subnet has no free addresses"),
        ],
    );
    tracer.flush();

    let spans = received.by_name();
    assert_eq!(spans.len(), 2, "{:?}", spans.keys());
    assert_eq!(metrics.exported.get(), 2);
    let hop = &spans["hcp.hop.clusters_service"];
    let status = hop.span.status.clone().unwrap_or_default();
    assert_eq!(status.code, StatusCode::Error as i32);
    assert_eq!(status.message, "OCM4001: the subnet has no free addresses");
    assert_eq!(hop.attr("error.type").as_deref(), Some("OCM4001"));
    assert_eq!(hop.attr("hcp.hop.outcome").as_deref(), Some("failed"));
    assert_eq!(hop.span.start_time_unix_nano, nanos(t(0)));
    assert_eq!(hop.span.end_time_unix_nano, nanos(t(4)));

    let root = &spans[ROOT_SPAN_NAME];
    let status = root.span.status.clone().unwrap_or_default();
    assert_eq!(status.code, StatusCode::Error as i32);
    assert!(
        status.message.starts_with("clusters_service: OCM4001"),
        "{}",
        status.message
    );
    assert_eq!(
        root.attr("hcp.failed_hop").as_deref(),
        Some("clusters_service")
    );
    assert_eq!(root.span.end_time_unix_nano, nanos(t(4)));

    // A condition reason explains a failure when upstream gives no error code.
    apply(
        &store,
        6,
        vec![
            obs("c-bad", Hop::HostedCluster)
                .created(t(5))
                .state("ValidReleaseImage=False", Phase::Failed)
                .since(t(6))
                .condition(
                    "ValidReleaseImage",
                    ConditionStatus::False,
                    "InvalidImage",
                    t(6),
                ),
        ],
    );
    tracer.flush();
    let bad: Vec<Got> = received
        .spans()
        .into_iter()
        .filter(|g| g.attr("hcp.cluster.id").as_deref() == Some("c-bad"))
        .collect();
    let hop = bad
        .iter()
        .find(|g| g.span.name == "hcp.hop.hosted_cluster")
        .expect("hosted_cluster span");
    let status = hop.span.status.clone().unwrap_or_default();
    assert_eq!(status.code, StatusCode::Error as i32);
    assert_eq!(status.message, "InvalidImage");
    tracer.shutdown();
}

#[test]
fn a_restart_exports_nothing_for_creations_that_ended_before_it() {
    let (received, env) = grpc_receiver();
    let (store, tracer, _) = traced_store(&env, "first", TracerOptions::default());
    service_side(&store, "c-1");
    hosted_cluster_ready(&store, "c-1", Via::Direct);
    tracer.flush();
    let before = received.spans().len();
    assert_eq!(before, 4);
    tracer.shutdown();

    // The restarted exporter loads the same state in its first sync.
    let (restarted, second, metrics) = {
        let mut env = env.clone();
        env.insert("OTEL_SERVICE_NAME".to_string(), "second".to_string());
        let metrics = TraceMetrics::default();
        let tracer = Arc::new(
            CreationTracer::from_env_map(&env, metrics.clone())
                .unwrap()
                .unwrap(),
        );
        let store = new_store();
        store.add_listener(tracer.clone());
        (store, tracer, metrics)
    };
    let final_state = vec![
        obs("c-1", Hop::ClustersService)
            .created(t(0))
            .state("ready", Phase::Ready)
            .since(t(5)),
        obs("c-1", Hop::MaestroBundle)
            .object("bundle-1")
            .created(t(1))
            .state("Available", Phase::Ready)
            .since(t(3)),
        obs("c-1", Hop::HostedCluster)
            .created(t(4))
            .state("Available", Phase::Ready)
            .since(t(12)),
    ];
    restarted.apply_at(batch(true, t(30), final_state.clone()), t(30));
    // A later poll that sees the same state changes nothing either.
    restarted.apply_at(batch(false, t(31), final_state), t(31));
    second.flush();
    assert_eq!(received.spans().len(), before);
    assert!(received.spans().iter().all(|g| g.service == "first"));
    assert_eq!(metrics.exported.get(), 0);
    second.shutdown();
}

#[test]
fn service_and_management_instances_build_one_trace() {
    let (received, env) = http_receiver();
    let (service, service_tracer, _) =
        traced_store(&env, "hcp-flow-service", TracerOptions::default());
    let (management, management_tracer, _) =
        traced_store(&env, "hcp-flow-mgmt-1", TracerOptions { root_spans: false });

    service_side(&service, "c-2");
    // The service side also sees the HostedCluster through Maestro feedback.
    hosted_cluster_ready(&service, "c-2", Via::Maestro);
    // The management side reads it directly, and the node pool.
    hosted_cluster_ready(&management, "c-2", Via::Direct);
    apply(
        &management,
        14,
        vec![
            obs("c-2", Hop::NodePool)
                .object("np-1")
                .created(t(12))
                .state("Ready", Phase::Ready)
                .since(t(14))
                .replicas(2, 2, 2),
        ],
    );
    service_tracer.flush();
    management_tracer.flush();

    let spans = received.spans();
    let trace = trace_id("c-2").to_vec();
    assert!(spans.iter().all(|g| g.span.trace_id == trace));
    let root_id = span_id("c-2", None).to_vec();
    let roots: Vec<&Got> = spans
        .iter()
        .filter(|g| g.span.name == ROOT_SPAN_NAME)
        .collect();
    assert_eq!(roots.len(), 1);
    assert_eq!(roots[0].service, "hcp-flow-service");
    assert_eq!(roots[0].span.span_id, root_id);

    let mut by_service: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for g in &spans {
        by_service
            .entry(g.service.clone())
            .or_default()
            .push(g.span.name.clone());
        if g.span.name != ROOT_SPAN_NAME {
            assert_eq!(g.span.parent_span_id, root_id, "{}", g.span.name);
        }
    }
    for names in by_service.values_mut() {
        names.sort();
    }
    assert_eq!(
        by_service["hcp-flow-mgmt-1"],
        vec!["hcp.hop.hosted_cluster", "hcp.hop.node_pool"]
    );
    assert_eq!(
        by_service["hcp-flow-service"],
        vec![
            ROOT_SPAN_NAME,
            "hcp.hop.clusters_service",
            "hcp.hop.hosted_cluster.via_maestro",
            "hcp.hop.maestro_bundle",
        ]
    );
    // Same hop, two views, two ids: never one id for two different spans.
    let mut ids: Vec<Vec<u8>> = spans.iter().map(|g| g.span.span_id.clone()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), spans.len());
    let via_maestro = spans
        .iter()
        .find(|g| g.span.name == "hcp.hop.hosted_cluster.via_maestro")
        .expect("maestro view span");
    assert_eq!(
        via_maestro.span.span_id,
        span_id_of("c-2", Some(Hop::HostedCluster), Via::Maestro).to_vec()
    );
    service_tracer.shutdown();
    management_tracer.shutdown();
}

#[test]
fn a_creation_deleted_in_flight_closes_its_trace() {
    let (received, env) = grpc_receiver();
    let (store, tracer, _) = traced_store(&env, "hcp-flow-test", TracerOptions::default());
    let cs = || {
        obs("c-del", Hop::ClustersService)
            .created(t(0))
            .name("doomed")
    };
    apply(
        &store,
        1,
        vec![cs().state("installing", Phase::Progressing).since(t(0))],
    );
    apply(
        &store,
        3,
        vec![cs().state("uninstalling", Phase::Deleting).since(t(3))],
    );
    tracer.flush();
    assert!(received.spans().is_empty(), "nothing ended yet");
    apply(&store, 4, vec![obs("c-del", Hop::ClustersService).gone()]);
    tracer.flush();

    // Two traces: the creation's, closed as deleted when the deletion
    // began, and the deletion's own, a root and a child for the hop.
    let spans = received.spans();
    assert_eq!(spans.len(), 3, "{spans:?}");
    let named = |name: &str| {
        spans
            .iter()
            .find(|g| g.span.name == name)
            .unwrap_or_else(|| panic!("no span {name}"))
    };
    let root = named(ROOT_SPAN_NAME);
    assert_eq!(root.span.trace_id, trace_id("c-del").to_vec());
    assert_eq!(
        root.attr("hcp.creation.outcome").as_deref(),
        Some("deleted")
    );
    assert_eq!(root.attr("hcp.cluster.name").as_deref(), Some("doomed"));
    assert_eq!(root.span.start_time_unix_nano, nanos(t(0)));
    assert_eq!(
        root.span.end_time_unix_nano,
        nanos(t(3)),
        "ended by the deletion's start"
    );
    let status = root.span.status.clone().unwrap_or_default();
    assert_ne!(status.code, StatusCode::Error as i32);

    let delete_root = named("hcp.cluster.delete");
    let delete_trace = trace_id("c-del/delete").to_vec();
    assert_eq!(delete_root.span.trace_id, delete_trace);
    assert_eq!(
        delete_root.span.span_id,
        span_id_of("c-del/delete", None, Via::Direct).to_vec()
    );
    assert_eq!(delete_root.attr("hcp.operation").as_deref(), Some("delete"));
    assert_eq!(
        delete_root.attr("hcp.operation.outcome").as_deref(),
        Some("succeeded")
    );
    assert_eq!(delete_root.attr("hcp.slo.outcome").as_deref(), Some("good"));
    assert_eq!(delete_root.span.start_time_unix_nano, nanos(t(3)));
    assert_eq!(delete_root.span.end_time_unix_nano, nanos(t(4)));
    let hop = named("hcp.hop.clusters_service");
    assert_eq!(hop.span.trace_id, delete_trace);
    assert_eq!(hop.span.parent_span_id, delete_root.span.span_id);
    assert_eq!(hop.attr("hcp.operation").as_deref(), Some("delete"));
    assert_eq!(hop.span.start_time_unix_nano, nanos(t(3)));
    assert_eq!(hop.span.end_time_unix_nano, nanos(t(4)));
    tracer.shutdown();
}

#[test]
fn no_endpoint_means_no_tracer() {
    let env = HashMap::from([("OTEL_SERVICE_NAME".to_string(), "x".to_string())]);
    assert!(
        CreationTracer::from_env_map(&env, TraceMetrics::default())
            .unwrap()
            .is_none()
    );
}

/// When the RP and Clusters Service fail at one observed instant (the RP
/// reports the service's error), the trace names the hop the verdict
/// names, Clusters Service, not the first in path order.
#[test]
fn a_failed_creation_names_the_hop_its_verdict_names() {
    let (received, env) = http_receiver();
    let (store, tracer, _) = traced_store(&env, "hcp-flow-test", TracerOptions::default());
    let both = |state: &str, phase: Phase, at: Timestamp| {
        vec![
            obs("c-both", Hop::RpFrontend)
                .created(t(0))
                .state(state, phase)
                .since(at),
            obs("c-both", Hop::ClustersService)
                .created(t(0))
                .state(state, phase)
                .since(at),
        ]
    };
    apply(&store, 1, both("installing", Phase::Progressing, t(0)));
    apply(&store, 4, both("error", Phase::Failed, t(4)));
    tracer.flush();
    let spans = received.by_name();
    let root = &spans[ROOT_SPAN_NAME];
    assert_eq!(
        root.attr("hcp.failed_hop").as_deref(),
        Some("clusters_service")
    );
    let verdict = store
        .with_timeline("c-both", |t| {
            hcp_flow::model::failed_hop(t).map(|(hop, _)| hop)
        })
        .flatten();
    assert_eq!(verdict, Some(Hop::ClustersService));
}
