//! An OTLP trace receiver on loopback, over gRPC or HTTP/protobuf, that
//! keeps every span it is sent with the service name it came under.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

/// A span as received, with the service name of the resource it came under.
#[derive(Clone, Debug)]
pub struct Got {
    pub service: String,
    pub span: Span,
}

impl Got {
    pub fn attr(&self, key: &str) -> Option<String> {
        attr(&self.span.attributes, key)
    }
}

/// The attribute `key` as text.
pub fn attr(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
        .map(|v| match v {
            Value::StringValue(s) => s.clone(),
            Value::BoolValue(b) => b.to_string(),
            Value::IntValue(i) => i.to_string(),
            other => format!("{other:?}"),
        })
}

/// Every span received so far.
#[derive(Clone, Default)]
pub struct Received(Arc<Mutex<Vec<Got>>>);

impl Received {
    fn record(&self, request: ExportTraceServiceRequest) {
        let mut got = self.0.lock().unwrap();
        for resource_spans in request.resource_spans {
            let service = resource_spans
                .resource
                .as_ref()
                .and_then(|r| attr(&r.attributes, "service.name"))
                .unwrap_or_default();
            for scope_spans in resource_spans.scope_spans {
                for span in scope_spans.spans {
                    got.push(Got {
                        service: service.clone(),
                        span,
                    });
                }
            }
        }
    }

    pub fn spans(&self) -> Vec<Got> {
        self.0.lock().unwrap().clone()
    }

    /// The last span of each name.
    pub fn by_name(&self) -> BTreeMap<String, Got> {
        self.spans()
            .into_iter()
            .map(|g| (g.span.name.clone(), g))
            .collect()
    }
}

#[tonic::async_trait]
impl TraceService for Received {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.record(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// Serve on loopback from a thread of its own, so synchronous tests work
/// too (a tracer's flush blocks).
fn serve_in_background<F, Fut>(serve: F) -> SocketAddr
where
    F: FnOnce(tokio::net::TcpListener) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            serve(listener).await;
        });
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap()
}

/// An OTLP/gRPC receiver: what it received and its endpoint URL.
pub fn grpc_receiver() -> (Received, String) {
    let received = Received::default();
    let service = TraceServiceServer::new(received.clone());
    let addr = serve_in_background(move |listener| async move {
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await
            .unwrap();
    });
    (received, format!("http://{addr}"))
}

/// An OTLP/HTTP (protobuf) receiver at `/v1/traces`: what it received and
/// its endpoint URL. With `tenant`, a request whose `x-tenant` header is not
/// that value is refused (401), as a multi-tenant collector does.
pub fn http_receiver(tenant: Option<&'static str>) -> (Received, String) {
    use axum::body::Bytes;
    use axum::extract::State;
    use axum::http::{HeaderMap, StatusCode, header};

    type Ctx = (Received, Option<&'static str>);
    async fn traces(
        State((received, tenant)): State<Ctx>,
        headers: HeaderMap,
        body: Bytes,
    ) -> (StatusCode, [(header::HeaderName, &'static str); 1], Vec<u8>) {
        let content_type = [(header::CONTENT_TYPE, "application/x-protobuf")];
        if let Some(tenant) = tenant
            && headers.get("x-tenant").and_then(|v| v.to_str().ok()) != Some(tenant)
        {
            return (StatusCode::UNAUTHORIZED, content_type, Vec::new());
        }
        match ExportTraceServiceRequest::decode(body) {
            Ok(request) => {
                received.record(request);
                let response = ExportTraceServiceResponse::default().encode_to_vec();
                (StatusCode::OK, content_type, response)
            }
            Err(_) => (StatusCode::BAD_REQUEST, content_type, Vec::new()),
        }
    }

    let received = Received::default();
    let router = axum::Router::new()
        .route("/v1/traces", axum::routing::post(traces))
        .with_state((received.clone(), tenant));
    let addr = serve_in_background(move |listener| async move {
        axum::serve(listener, router).await.unwrap();
    });
    (received, format!("http://{addr}"))
}
