//! The OTLP transport and the batching thread behind the bounded span queue.
//!
//! The store calls listeners under its lock, so handing a span over must never
//! block or do I/O: a full queue drops the span and counts it. One thread
//! owns the exporter, batches, and exports synchronously; it also builds the
//! exporter, because reqwest's blocking client must live outside async code
//! (the async one loses spans silently when its runtime goes away).

use std::collections::HashMap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use opentelemetry_otlp::tonic_types::metadata::MetadataMap;
use opentelemetry_otlp::tonic_types::transport::ClientTlsConfig;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::config::{BatchSettings, OtlpConfig, Protocol};

/// How long `shutdown` waits for the last export before giving up on it.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("building the OTLP {protocol} exporter for {endpoint}")]
    Build {
        protocol: &'static str,
        endpoint: String,
        #[source]
        cause: opentelemetry_otlp::ExporterBuildError,
    },
    #[error("building the runtime of the OTLP gRPC exporter")]
    Runtime(#[source] std::io::Error),
    #[error("starting the trace export thread")]
    Thread(#[source] std::io::Error),
    #[error("the trace export thread stopped before it was ready")]
    ThreadExited,
}

/// Why a span was not delivered.
#[derive(
    Clone, Copy, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelValue,
)]
#[allow(non_camel_case_types)]
pub enum DropReason {
    /// The queue was full: the backend is slower than the fleet.
    queue_full,
    /// The backend refused the batch or could not be reached.
    export_failed,
    /// The export thread had stopped (after shutdown).
    shut_down,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DropLabels {
    pub reason: DropReason,
}

/// `hcpflow_trace_spans_exported_total` and `hcpflow_trace_spans_dropped_total{reason}`.
#[derive(Clone, Debug, Default)]
pub struct TraceMetrics {
    pub exported: Counter,
    pub dropped: Family<DropLabels, Counter>,
}

impl TraceMetrics {
    pub fn register(registry: &mut Registry) -> TraceMetrics {
        let metrics = TraceMetrics::default();
        for reason in [
            DropReason::queue_full,
            DropReason::export_failed,
            DropReason::shut_down,
        ] {
            let _ = metrics.dropped.get_or_create(&DropLabels { reason });
        }
        registry.register(
            "hcpflow_trace_spans_exported",
            "Creation spans delivered to the OTLP endpoint",
            metrics.exported.clone(),
        );
        registry.register(
            "hcpflow_trace_spans_dropped",
            "Creation spans lost, by reason: queue_full (never blocks the sources), export_failed, shut_down",
            crate::metrics::exporter::AlwaysDescribed(metrics.dropped.clone()),
        );
        metrics
    }

    fn drop_spans(&self, reason: DropReason, n: usize) {
        self.dropped
            .get_or_create(&DropLabels { reason })
            .inc_by(n as u64);
    }

    /// Spans dropped for `reason` so far.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped.get_or_create(&DropLabels { reason }).get()
    }
}

/// Where a batch goes. The OTLP exporter in production; tests swap in fakes.
pub(crate) trait Transport: Send + 'static {
    fn export(&mut self, batch: Vec<SpanData>) -> Result<(), String>;
    fn shutdown(&mut self);
}

/// The OTLP span exporter of either protocol, exporting synchronously.
///
/// A tonic channel needs a Tokio runtime to drive its connection; this one
/// owns a small runtime of its own so it works the same from any thread
/// (the SDK's batch thread, or ours), whether or not the caller runs Tokio.
#[derive(Debug)]
pub struct OtlpTransport {
    exporter: opentelemetry_otlp::SpanExporter,
    runtime: Option<tokio::runtime::Runtime>,
}

impl OtlpTransport {
    /// Build the exporter `config` describes. Call it outside async code: the
    /// HTTP exporter's blocking client must not be created inside a runtime.
    pub fn build(config: &OtlpConfig) -> Result<OtlpTransport, ExportError> {
        let build_error = |cause| ExportError::Build {
            protocol: config.protocol.as_str(),
            endpoint: config.endpoint.to_string(),
            cause,
        };
        // reqwest is built without a default TLS provider; main installs
        // one, and this keeps the exporter usable when it did not (yet).
        // Installing twice is a harmless error.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (mut exporter, runtime) = match config.protocol {
            Protocol::HttpProtobuf => {
                let headers: HashMap<String, String> = config
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let exporter = opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                    .with_endpoint(config.endpoint.as_str())
                    .with_timeout(config.timeout)
                    .with_headers(headers)
                    .build()
                    .map_err(build_error)?;
                (exporter, None)
            }
            Protocol::Grpc => {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("hcpflow-otlp-grpc")
                    .enable_all()
                    .build()
                    .map_err(ExportError::Runtime)?;
                let mut headers = reqwest::header::HeaderMap::new();
                for (key, value) in &config.headers {
                    match (
                        reqwest::header::HeaderName::from_bytes(key.as_bytes()),
                        reqwest::header::HeaderValue::from_str(value),
                    ) {
                        (Ok(key), Ok(value)) => {
                            headers.insert(key, value);
                        }
                        _ => {
                            tracing::warn!(header = %key, "OTLP header skipped: not valid gRPC metadata")
                        }
                    }
                }
                let metadata = MetadataMap::from_headers(headers);
                let mut builder = opentelemetry_otlp::SpanExporter::builder()
                    .with_tonic()
                    .with_protocol(opentelemetry_otlp::Protocol::Grpc)
                    .with_endpoint(config.endpoint.as_str())
                    .with_timeout(config.timeout)
                    .with_metadata(metadata);
                if config.endpoint.scheme() == "https" {
                    builder = builder.with_tls_config(ClientTlsConfig::new().with_enabled_roots());
                }
                // The channel spawns its connection task on the current runtime.
                let exporter = {
                    let _entered = runtime.enter();
                    builder.build().map_err(build_error)?
                };
                (exporter, Some(runtime))
            }
        };
        exporter.set_resource(&config.resource());
        Ok(OtlpTransport { exporter, runtime })
    }

    fn export_now(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        match &self.runtime {
            Some(runtime) => runtime.block_on(self.exporter.export(batch)),
            None => futures::executor::block_on(self.exporter.export(batch)),
        }
    }
}

impl Drop for OtlpTransport {
    fn drop(&mut self) {
        // Dropping a runtime blocks; inside async code that panics.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Transport for OtlpTransport {
    fn export(&mut self, batch: Vec<SpanData>) -> Result<(), String> {
        self.export_now(batch).map_err(|e| e.to_string())
    }

    fn shutdown(&mut self) {
        if let Err(error) = self.exporter.shutdown() {
            tracing::debug!(%error, "OTLP exporter shutdown");
        }
    }
}

/// So the SDK's batch processor (the exporter's own spans) can use it too.
/// The export runs when called and the returned future is ready: callers
/// are the SDK's batch thread, never async code.
impl SpanExporter for OtlpTransport {
    fn export(&self, batch: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
        std::future::ready(self.export_now(batch))
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.exporter.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.exporter.set_resource(resource);
    }
}

enum Command {
    Span(Box<SpanData>),
    Flush(mpsc::Sender<()>),
    Shutdown(mpsc::Sender<()>),
}

/// The bounded queue in front of the export thread.
pub(crate) struct SpanQueue {
    tx: SyncSender<Command>,
    metrics: TraceMetrics,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl SpanQueue {
    /// Start the export thread; `make` builds the transport on it.
    pub(crate) fn start<T: Transport>(
        settings: BatchSettings,
        metrics: TraceMetrics,
        make: impl FnOnce() -> Result<T, ExportError> + Send + 'static,
    ) -> Result<SpanQueue, ExportError> {
        let (tx, rx) = mpsc::sync_channel(settings.max_queue);
        let (ready_tx, ready_rx) = mpsc::channel();
        let thread_metrics = metrics.clone();
        let thread = std::thread::Builder::new()
            .name("hcpflow-traces".to_string())
            .spawn(move || match make() {
                Ok(transport) => {
                    let _ = ready_tx.send(Ok(()));
                    run(transport, rx, settings, thread_metrics);
                }
                Err(error) => {
                    let _ = ready_tx.send(Err(error));
                }
            })
            .map_err(ExportError::Thread)?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(SpanQueue {
                tx,
                metrics,
                thread: Mutex::new(Some(thread)),
            }),
            Ok(Err(error)) => {
                let _ = thread.join();
                Err(error)
            }
            Err(_) => {
                let _ = thread.join();
                Err(ExportError::ThreadExited)
            }
        }
    }

    /// Hand a span over without blocking; a full queue drops it.
    pub(crate) fn push(&self, span: SpanData) {
        match self.tx.try_send(Command::Span(Box::new(span))) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.metrics.drop_spans(DropReason::queue_full, 1),
            Err(TrySendError::Disconnected(_)) => self.metrics.drop_spans(DropReason::shut_down, 1),
        }
    }

    /// Export everything queued so far and wait for it. Blocks: not for the
    /// store's listener path.
    pub(crate) fn flush(&self) {
        let (ack_tx, ack_rx) = mpsc::channel();
        if self.tx.send(Command::Flush(ack_tx)).is_ok() {
            let _ = ack_rx.recv_timeout(SHUTDOWN_WAIT);
        }
    }

    /// Export what is queued, shut the exporter down and stop the thread.
    /// Later spans are dropped (counted as `shut_down`). Idempotent.
    pub(crate) fn shutdown(&self) {
        let (ack_tx, ack_rx) = mpsc::channel();
        if self.tx.send(Command::Shutdown(ack_tx)).is_ok()
            && ack_rx.recv_timeout(SHUTDOWN_WAIT).is_err()
        {
            tracing::warn!(
                "trace export did not finish within {SHUTDOWN_WAIT:?}; spans may be lost"
            );
            return;
        }
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

impl Drop for SpanQueue {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn run<T: Transport>(
    mut transport: T,
    rx: Receiver<Command>,
    settings: BatchSettings,
    metrics: TraceMetrics,
) {
    let mut batch: Vec<SpanData> = Vec::with_capacity(settings.max_batch.min(1024));
    let mut deadline = Instant::now() + settings.delay;
    let send = |batch: &mut Vec<SpanData>, transport: &mut T| {
        if batch.is_empty() {
            return;
        }
        let n = batch.len();
        match transport.export(std::mem::take(batch)) {
            Ok(()) => {
                metrics.exported.inc_by(n as u64);
            }
            Err(error) => {
                tracing::warn!(%error, spans = n, "creation spans could not be exported");
                metrics.drop_spans(DropReason::export_failed, n);
            }
        }
    };
    loop {
        let wait = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok(Command::Span(span)) => {
                batch.push(*span);
                if batch.len() >= settings.max_batch {
                    send(&mut batch, &mut transport);
                    deadline = Instant::now() + settings.delay;
                }
            }
            Ok(Command::Flush(ack)) => {
                send(&mut batch, &mut transport);
                let _ = ack.send(());
            }
            Ok(Command::Shutdown(ack)) => {
                // FIFO: every span pushed before the shutdown is in `batch`.
                send(&mut batch, &mut transport);
                transport.shutdown();
                let _ = ack.send(());
                return;
            }
            Err(RecvTimeoutError::Timeout) => {
                send(&mut batch, &mut transport);
                deadline = Instant::now() + settings.delay;
            }
            Err(RecvTimeoutError::Disconnected) => {
                send(&mut batch, &mut transport);
                transport.shutdown();
                return;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use opentelemetry::InstrumentationScope;
    use opentelemetry::trace::{
        SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
    };
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};

    use super::*;

    fn span(n: u8) -> SpanData {
        SpanData {
            span_context: SpanContext::new(
                TraceId::from_bytes([1; 16]),
                SpanId::from_bytes([n; 8]),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: "test".into(),
            start_time: std::time::SystemTime::UNIX_EPOCH,
            end_time: std::time::SystemTime::UNIX_EPOCH,
            attributes: Vec::new(),
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: InstrumentationScope::default(),
        }
    }

    /// Exports into a shared list; blocks each export until `gate` lets it
    /// through, and fails every export while `fail` is set.
    struct Fake {
        got: Arc<Mutex<Vec<Vec<u8>>>>,
        gate: Option<mpsc::Receiver<()>>,
        fail: bool,
    }

    impl Transport for Fake {
        fn export(&mut self, batch: Vec<SpanData>) -> Result<(), String> {
            if let Some(gate) = &self.gate {
                let _ = gate.recv();
            }
            if self.fail {
                return Err("refused".to_string());
            }
            let mut got = self.got.lock();
            got.push(
                batch
                    .iter()
                    .map(|s| s.span_context.span_id().to_bytes()[0])
                    .collect(),
            );
            Ok(())
        }
        fn shutdown(&mut self) {}
    }

    fn settings(max_queue: usize, max_batch: usize) -> BatchSettings {
        BatchSettings {
            max_queue,
            max_batch,
            delay: Duration::from_secs(3600),
        }
    }

    #[test]
    fn batches_by_size_and_flushes_the_rest_on_shutdown() {
        let got = Arc::new(Mutex::new(Vec::new()));
        let metrics = TraceMetrics::default();
        let fake_got = got.clone();
        let queue = SpanQueue::start(settings(16, 2), metrics.clone(), move || {
            Ok(Fake {
                got: fake_got,
                gate: None,
                fail: false,
            })
        })
        .unwrap();
        for n in 1..=5 {
            queue.push(span(n));
        }
        queue.shutdown();
        assert_eq!(*got.lock(), vec![vec![1, 2], vec![3, 4], vec![5]]);
        assert_eq!(metrics.exported.get(), 5);
        queue.push(span(6));
        assert_eq!(metrics.dropped(DropReason::shut_down), 1);
        queue.shutdown();
    }

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_blocking() {
        let got = Arc::new(Mutex::new(Vec::new()));
        let metrics = TraceMetrics::default();
        let (gate_tx, gate_rx) = mpsc::channel();
        let fake_got = got.clone();
        let queue = SpanQueue::start(settings(2, 1), metrics.clone(), move || {
            Ok(Fake {
                got: fake_got,
                gate: Some(gate_rx),
                fail: false,
            })
        })
        .unwrap();
        // The first span is taken and its export blocks on the gate; two
        // more fill the queue; the rest must be dropped at once.
        queue.push(span(1));
        let started = Instant::now();
        while metrics.dropped(DropReason::queue_full) == 0 {
            queue.push(span(9));
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "push blocked or never dropped"
            );
        }
        for _ in 0..10 {
            gate_tx.send(()).unwrap();
        }
        queue.shutdown();
        let exported = metrics.exported.get();
        let dropped = metrics.dropped(DropReason::queue_full);
        assert!((1..=3).contains(&exported), "{exported}");
        assert_eq!(
            got.lock().iter().map(Vec::len).sum::<usize>() as u64,
            exported
        );
        assert!(dropped >= 1);
    }

    #[test]
    fn failed_exports_are_counted_as_dropped() {
        let metrics = TraceMetrics::default();
        let queue = SpanQueue::start(settings(16, 10), metrics.clone(), move || {
            Ok(Fake {
                got: Arc::new(Mutex::new(Vec::new())),
                gate: None,
                fail: true,
            })
        })
        .unwrap();
        queue.push(span(1));
        queue.push(span(2));
        queue.flush();
        assert_eq!(metrics.dropped(DropReason::export_failed), 2);
        assert_eq!(metrics.exported.get(), 0);
    }

    #[test]
    fn metrics_register_under_their_documented_names() {
        let mut registry = Registry::default();
        let metrics = TraceMetrics::register(&mut registry);
        metrics.exported.inc();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("hcpflow_trace_spans_exported_total 1"),
            "{text}"
        );
        assert!(
            text.contains("hcpflow_trace_spans_dropped_total{reason=\"queue_full\"} 0"),
            "{text}"
        );
    }
}
