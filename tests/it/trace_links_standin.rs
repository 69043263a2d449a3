//! Links into the controllers' own traces (docs/design/07-traces.md §7.7): a
//! HostedCluster and NodePools written here after HyperShift's fixture,
//! annotated as Clusters Service (`traceparent`) and the Kubernetes
//! proposal (`tracing.k8s.io/traceparent`) annotate them, served by a
//! Kubernetes list/watch endpoint that holds only what the test puts in it,
//! read by the real kube source into a store whose spans go over OTLP to a
//! loopback receiver.
//!
//! - the `hosted_cluster` hop span links to the HostedCluster's context;
//! - the `node_pool` hop span links to the well-formed pool's context only;
//!   the malformed annotation of the other pool is counted, never a link.

use std::collections::HashMap;
use std::sync::Arc;

use crate::common::hypershift;
use crate::common::kube::{eventually, harness_waiting_for};
use crate::common::otlp;
use hcp_flow::sim::kube::KubeApiServer;
use hcp_flow::sources::kube::KubeMode;
use hcp_flow::traces::{CreationTracer, TraceMetrics};
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

const NAMESPACE: &str = "clusters";
const HC_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const HC_SPAN: &str = "00f067aa0ba902b7";
const OP_ID: &str = "2e9d5cb2-2f9a-4a3b-8c1a-7f0b1c2d3e4f";
const POOL_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const POOL_SPAN: &str = "b7ad6b7169203331";

fn at(t: Timestamp) -> String {
    t.round(jiff::Unit::Second).unwrap_or(t).to_string()
}

/// The fixture's HostedCluster, Available or not yet, with a `traceparent`
/// annotation as Clusters Service sets it.
fn hosted_cluster(id: &str, created: Timestamp, available: Option<Timestamp>) -> Value {
    let condition = match available {
        Some(t) => {
            json!({"type": "Available", "status": "True", "reason": "AsExpected", "message": "The hosted control plane is available", "lastTransitionTime": at(t), "observedGeneration": 1})
        }
        None => {
            json!({"type": "Available", "status": "False", "reason": "WaitingForAvailable", "message": "Waiting for hosted control plane to be healthy", "lastTransitionTime": at(created), "observedGeneration": 1})
        }
    };
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1",
        "kind": "HostedCluster",
        "metadata": {
            "name": "example",
            "namespace": NAMESPACE,
            "uid": "uid-example",
            "creationTimestamp": at(created),
            "annotations": {
                "traceparent": format!("00-{HC_TRACE}-{HC_SPAN}-01"),
                // OCM's log tracing, as Clusters Service sets it: the id
                // its logs are searched by (docs/design/15b-operations.md §15.13).
                "logging.open-cluster-management.io/op-id": OP_ID,
            },
        },
        "spec": hypershift::hosted_cluster_spec(id),
        "status": {
            "conditions": [condition],
            "version": {"desired": {"version": "4.20.2"}, "history": [{"state": "Partial", "version": "4.20.2", "startedTime": at(created)}]},
        },
    })
}

/// A NodePool of the fixture's cluster with `annotations`, its replicas
/// ready at `ready` or none yet.
fn node_pool(
    name: &str,
    created: Timestamp,
    ready: Option<Timestamp>,
    annotations: Value,
) -> Value {
    let (replicas, condition) = match ready {
        Some(t) => (
            2,
            json!({"type": "Ready", "status": "True", "reason": "AsExpected", "message": "", "lastTransitionTime": at(t), "observedGeneration": 1}),
        ),
        None => (
            0,
            json!({"type": "Ready", "status": "False", "reason": "WaitingForNodes", "message": "", "lastTransitionTime": at(created), "observedGeneration": 1}),
        ),
    };
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1",
        "kind": "NodePool",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": format!("uid-{name}"),
            "creationTimestamp": at(created),
            "annotations": annotations,
        },
        "spec": hypershift::node_pool_spec("example"),
        "status": {"replicas": replicas, "conditions": [condition]},
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The span's one link, which must name `trace` and `span`.
fn only_link<'g>(
    got: &'g otlp::Got,
    trace: &str,
    span: &str,
) -> &'g opentelemetry_proto::tonic::trace::v1::span::Link {
    let links = &got.span.links;
    assert_eq!(links.len(), 1, "{}: {links:?}", got.span.name);
    assert_eq!(hex(&links[0].trace_id), trace);
    assert_eq!(hex(&links[0].span_id), span);
    &links[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hop_spans_link_to_the_trace_contexts_their_objects_are_annotated_with() {
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
    let created = now - SignedDuration::from_mins(10);
    let id = "5b1c7d3e-0f2a-4c8b-9d6e-0000000000e1";
    let good = json!({"tracing.k8s.io/traceparent": format!("00-{POOL_TRACE}-{POOL_SPAN}-01")});
    // Upper-case hex: not a W3C trace context.
    let bad = json!({"traceparent": format!("00-{}-{POOL_SPAN}-01", HC_TRACE.to_uppercase())});
    server
        .apply(hosted_cluster(id, created, None))
        .expect("applied");
    server
        .apply(node_pool("np1", created, None, good.clone()))
        .expect("applied");
    server
        .apply(node_pool("np2", created, None, bad.clone()))
        .expect("applied");
    let mut h = harness_waiting_for("trace-links", &["kube/hub"]);
    h.store.add_listener(tracer.clone());
    h.start(&[("hub", &url, KubeMode::SelfManaged)], |_| {})
        .await;
    eventually("the hub synced", || h.store.ready()).await;

    // The HostedCluster comes up, then the pools' nodes join: each hop ends.
    let available = now - SignedDuration::from_mins(5);
    server
        .apply(hosted_cluster(id, created, Some(available)))
        .expect("applied");
    let ready = now - SignedDuration::from_mins(1);
    server
        .apply(node_pool("np1", created, Some(ready), good))
        .expect("applied");
    server
        .apply(node_pool("np2", created, Some(ready), bad))
        .expect("applied");
    let spans = |name: &str| {
        tracer.flush();
        received
            .spans()
            .into_iter()
            .filter(|g| g.span.name == name)
            .collect::<Vec<_>>()
    };
    eventually("both hop spans", || {
        !spans("hcp.hop.hosted_cluster").is_empty() && !spans("hcp.hop.node_pool").is_empty()
    })
    .await;

    let hosted = spans("hcp.hop.hosted_cluster");
    let link = only_link(&hosted[0], HC_TRACE, HC_SPAN);
    assert_eq!(
        otlp::attr(&link.attributes, "hcp.link.source").as_deref(),
        Some("annotation")
    );
    // The link names another trace than the span's own.
    assert_ne!(hex(&hosted[0].span.trace_id), HC_TRACE);
    // The upstream's operation id rides on the span, and on the timeline
    // the JSON, the page and diagnose read.
    assert_eq!(
        otlp::attr(&hosted[0].span.attributes, "ocm.log_tracing.op-id").as_deref(),
        Some(OP_ID)
    );
    let ids: Vec<(String, String)> = h.store.with_timelines(|t| {
        t.flat_map(|t| {
            t.upstream_ids()
                .into_iter()
                .map(|i| (i.name.to_string(), i.value.to_string()))
                .collect::<Vec<_>>()
        })
        .collect()
    });
    assert_eq!(ids, vec![("op-id".to_string(), OP_ID.to_string())]);

    // The creation's node_pool span: only the well-formed context of the
    // two pools.
    eventually("each pool's own creation span", || {
        spans("hcp.hop.node_pool").len() >= 3
    })
    .await;
    let pools = spans("hcp.hop.node_pool");
    let of = |operation: &str, pool: Option<&str>| {
        pools
            .iter()
            .find(|g| {
                otlp::attr(&g.span.attributes, "hcp.operation").as_deref() == Some(operation)
                    && otlp::attr(&g.span.attributes, "hcp.node_pool").as_deref() == pool
            })
            .unwrap_or_else(|| panic!("no {operation} span of {pool:?}"))
    };
    let link = only_link(of("create", None), POOL_TRACE, POOL_SPAN);
    assert_eq!(
        otlp::attr(&link.attributes, "hcp.object").as_deref(),
        Some("np1")
    );
    // Each pool's own creation (docs/design/15-operations.md §15.9): np1's links to
    // np1's context, np2's to none (its annotation is malformed).
    only_link(of("node_pool_create", Some("np1")), POOL_TRACE, POOL_SPAN);
    assert!(
        of("node_pool_create", Some("np2")).span.links.is_empty(),
        "np2's malformed annotation is no link"
    );
    assert!(
        h.unknown("kube/hub", "metadata.annotations[traceparent]") >= 1,
        "the malformed annotation is counted: {}",
        h.text()
    );
}
