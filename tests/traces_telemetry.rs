//! The exporter's own spans: `telemetry::init_with_env` installs the global
//! subscriber (once per process, hence a test binary of its own) and exports
//! `tracing` spans over OTLP gRPC; the traceparent hook names the same span.

#![allow(clippy::unwrap_used)] // tests may unwrap (house rules)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hcp_flow::config::LogFormat;
use hcp_flow::telemetry::{TraceparentHook, init_with_env};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;

#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<(String, Span)>>>);

#[tonic::async_trait]
impl TraceService for Received {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut got = self.0.lock().unwrap();
        for resource_spans in request.into_inner().resource_spans {
            let service = resource_spans
                .resource
                .iter()
                .flat_map(|r| r.attributes.iter())
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| kv.value.as_ref()?.value.clone())
                .map(|v| match v {
                    Value::StringValue(s) => s,
                    other => format!("{other:?}"),
                })
                .unwrap_or_default();
            for scope_spans in resource_spans.scope_spans {
                for span in scope_spans.spans {
                    got.push((service.clone(), span));
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

fn grpc_receiver() -> (Received, String) {
    let received = Received::default();
    let service = TraceServiceServer::new(received.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
                .await
                .unwrap();
        });
    });
    let addr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    (received, format!("http://{addr}"))
}

#[test]
fn own_spans_are_exported_and_propagated() {
    let (received, endpoint) = grpc_receiver();
    let env = HashMap::from([
        ("OTEL_EXPORTER_OTLP_ENDPOINT".to_string(), endpoint),
        (
            "OTEL_EXPORTER_OTLP_PROTOCOL".to_string(),
            "grpc".to_string(),
        ),
        ("OTEL_SERVICE_NAME".to_string(), "hcp-flow-self".to_string()),
        ("RUST_LOG".to_string(), "info".to_string()),
    ]);
    let telemetry = init_with_env(LogFormat::Json, &env).unwrap();
    assert!(telemetry.exporting());

    let traceparent = {
        let poll = tracing::info_span!("poll_cycle", source = "maestro");
        let _entered = poll.enter();
        let request = tracing::info_span!(
            "upstream_request",
            path = "/api/maestro/v1/resource-bundles"
        );
        let _entered = request.enter();
        tracing::info!("listing bundles");
        let mut headers = reqwest::header::HeaderMap::new();
        TraceparentHook.add_headers(&mut headers);
        headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .expect("a traceparent inside an exported span")
    };
    // A debug span is below the default filter and never exported.
    tracing::debug_span!("too_chatty").in_scope(|| {});
    telemetry.shutdown();

    let got = received.0.lock().unwrap().clone();
    let names: Vec<&str> = got.iter().map(|(_, s)| s.name.as_str()).collect();
    assert!(names.contains(&"poll_cycle"), "{names:?}");
    assert!(names.contains(&"upstream_request"), "{names:?}");
    assert!(!names.contains(&"too_chatty"), "{names:?}");
    assert!(got.iter().all(|(service, _)| service == "hcp-flow-self"));

    let request = &got
        .iter()
        .find(|(_, s)| s.name == "upstream_request")
        .unwrap()
        .1;
    let poll = &got.iter().find(|(_, s)| s.name == "poll_cycle").unwrap().1;
    assert_eq!(request.parent_span_id, poll.span_id);
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    assert_eq!(
        traceparent,
        format!("00-{}-{}-01", hex(&request.trace_id), hex(&request.span_id))
    );

    // A second global subscriber is refused, not silently ignored.
    assert!(init_with_env(LogFormat::Text, &HashMap::new()).is_err());
}
