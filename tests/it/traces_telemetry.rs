//! The exporter's own spans, end to end (docs/design/07-traces.md §7.6): a real
//! Maestro poll, through the real `telemetry::init_with_env` pipeline, to
//! an in-test OTLP receiver, against a stand-in upstream that records each
//! request's headers. `init_with_env` installs the global subscriber (once
//! per process), hence a test binary with one test.

use crate::common::standin;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::common::otlp::{self, grpc_receiver};
use hcp_flow::config::{HttpSourceConfig, LogFormat, MaestroConfig};
use hcp_flow::metrics::exporter::ExporterMetrics;
use hcp_flow::model::Batch;
use hcp_flow::sources::http::HttpClient;
use hcp_flow::sources::maestro::{self, MaestroSource};
use hcp_flow::sources::{ObservationSink, SourceContext};
use hcp_flow::telemetry::{TraceparentHook, init_with_env};
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use serde_json::json;
use standin::{Behaviour, StandIn};

#[derive(Default)]
struct Discard;

impl ObservationSink for Discard {
    fn apply(&self, _: Batch) {}
}

fn attr(span: &Span, key: &str) -> Option<String> {
    otlp::attr(&span.attributes, key)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Two pages of one bundle each, so one poll makes two requests.
fn page(seen: &standin::Seen) -> Behaviour {
    let n = if seen.target.contains("page=2") { 2 } else { 1 };
    let bundle = json!({
        "id": format!("b{n}"),
        "metadata": {"labels": {"api.openshift.com/id": format!("c{n}")}},
        "updated_at": "2026-06-10T23:00:00Z",
    });
    let body =
        json!({"kind": "ResourceBundleList", "page": n, "size": 1, "total": 2, "items": [bundle]});
    Behaviour::Answer(200, body.to_string())
}

#[test]
fn a_real_poll_exports_its_spans_and_sends_their_traceparent() {
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
    crate::common::init();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let seen = runtime.block_on(async {
        let upstream = StandIn::start(page).await;
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = ExporterMetrics::register(&mut registry);
        let ctx = SourceContext::detached("maestro", Arc::new(Discard), metrics.clone());
        let mut http = HttpSourceConfig::new(upstream.base.clone());
        http.page_size = 1;
        // As the app builds it: the product's client with the product's hook.
        let client = HttpClient::new("maestro", &http, metrics)
            .unwrap()
            .with_request_hook(Arc::new(TraceparentHook));
        let mut source = MaestroSource::with_client(
            MaestroConfig {
                http,
                search_scope: None,
                grpc: None,
            },
            ctx,
            client,
        );
        assert!(source.poll(maestro::PollKind::Full).await);
        let ok = upstream.seen();
        upstream.set(|_| Behaviour::Answer(503, "{\"reason\":\"maintenance\"}".into()));
        assert!(!source.poll(maestro::PollKind::Full).await);
        let failed = upstream.seen()[ok.len()..].to_vec();
        (ok, failed)
    });
    runtime.shutdown_timeout(Duration::from_secs(5));
    telemetry.shutdown();

    let (ok, failed) = seen;
    let spans: Vec<Span> = received
        .spans()
        .into_iter()
        .map(|got| {
            assert_eq!(got.service, "hcp-flow-self");
            got.span
        })
        .collect();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    let by_id = |id: &str| {
        spans
            .iter()
            .find(|s| hex(&s.span_id) == id)
            .unwrap_or_else(|| panic!("no exported span {id} in {names:?}"))
    };

    assert_eq!(ok.len(), 2, "two pages, two requests");
    let mut polls = Vec::new();
    for request in ok.iter().chain(&failed) {
        // Every request carries the traceparent of its own request span...
        let traceparent = request
            .header("traceparent")
            .unwrap_or_else(|| panic!("no traceparent on {}", request.target));
        let parts: Vec<&str> = traceparent.split('-').collect();
        assert_eq!(parts.len(), 4, "{traceparent}");
        assert_eq!((parts[0], parts[3]), ("00", "01"), "{traceparent}");
        let span = by_id(parts[2]);
        assert_eq!(span.name, "upstream_request");
        assert_eq!(hex(&span.trace_id), parts[1]);
        assert_eq!(attr(span, "url.path").as_deref(), Some(request.path()));
        assert_eq!(attr(span, "http.request.method").as_deref(), Some("GET"));
        // ...a child of the exported poll span, in the same trace.
        let poll = by_id(&hex(&span.parent_span_id));
        assert_eq!(poll.name, "poll");
        assert_eq!(poll.trace_id, span.trace_id);
        assert_eq!(attr(poll, "source").as_deref(), Some("maestro"));
        assert_eq!(attr(poll, "poll_kind").as_deref(), Some("full"));
        polls.push(hex(&poll.span_id));
    }
    // Both pages of one poll share its span; the second poll is another.
    assert_eq!(polls[0], polls[1]);
    assert_ne!(polls[0], polls[2]);

    let ok_request = by_id(
        ok[0]
            .header("traceparent")
            .unwrap()
            .split('-')
            .nth(2)
            .unwrap(),
    );
    assert_eq!(
        attr(ok_request, "http.response.status_code").as_deref(),
        Some("200")
    );
    let failed_request = by_id(
        failed[0]
            .header("traceparent")
            .unwrap()
            .split('-')
            .nth(2)
            .unwrap(),
    );
    assert_eq!(
        attr(failed_request, "http.response.status_code").as_deref(),
        Some("503")
    );
    let error = attr(failed_request, "error").unwrap_or_default();
    assert!(
        error.contains("HTTP 503") && error.contains("maintenance"),
        "{error}"
    );
    let status = failed_request.status.clone().unwrap_or_default();
    assert_eq!(status.code, StatusCode::Error as i32);
    let failed_poll = by_id(&polls[2]);
    assert_eq!(
        failed_poll.status.clone().unwrap_or_default().code,
        StatusCode::Error as i32
    );

    // A second global subscriber is refused, not silently ignored.
    assert!(init_with_env(LogFormat::Text, &HashMap::new()).is_err());
}
