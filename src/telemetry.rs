//! The exporter's own logs and traces: `tracing` to text or JSON, and, when
//! the standard `OTEL_EXPORTER_OTLP_*` variables name an endpoint, its own
//! spans (poll cycles, requests, watch reconnects) over OTLP through
//! `tracing-opentelemetry`. These are the exporter's traces, separate from the
//! creation traces of [`crate::traces`].

use std::collections::HashMap;

use opentelemetry::propagation::{Injector, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::LogFormat;
use crate::traces::config::{OtlpConfig, OtlpConfigError, process_env};
use crate::traces::export::{ExportError, OtlpTransport};

/// Without `RUST_LOG`: the exporter's own lines at info. The kube client
/// libraries warn on every retry of a forbidden or failing watch; the
/// exporter says it once when the source goes down and once when it
/// recovers (docs/design/09-reading-the-upstreams.md §9.7), so theirs are kept to errors.
pub const DEFAULT_LOG_FILTER: &str = "info,kube_runtime=error,kube_client=error";

/// The instrumentation scope of the exporter's own spans.
const SCOPE: &str = "hcp-flow";

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("RUST_LOG={value:?} is not a valid log filter")]
    Filter {
        value: String,
        #[source]
        cause: tracing_subscriber::filter::ParseError,
    },
    #[error("invalid OpenTelemetry export settings")]
    Config(#[from] OtlpConfigError),
    #[error("the OTLP exporter for the exporter's own spans could not be built")]
    Export(#[from] ExportError),
    #[error("a global tracing subscriber is already installed")]
    AlreadyInstalled(#[source] tracing_subscriber::util::TryInitError),
}

/// The installed pipeline; keep it for the process's lifetime and call
/// [`Telemetry::shutdown`] on SIGTERM so the last spans are sent.
#[derive(Debug)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// True when the exporter's own spans go to an OTLP endpoint.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Flush and stop the OTLP pipeline. Blocks until the last batch is sent
    /// (or the export times out); call it from a blocking context.
    pub fn shutdown(&self) {
        if let Some(provider) = &self.provider
            && let Err(error) = provider.shutdown()
        {
            tracing::warn!(%error, "the exporter's own spans could not all be sent");
        }
    }

    /// [`Telemetry::shutdown`], giving up after `timeout`.
    pub fn shutdown_within(&self, timeout: std::time::Duration) {
        if let Some(provider) = &self.provider
            && let Err(error) = provider.shutdown_with_timeout(timeout)
        {
            tracing::warn!(%error, "the exporter's own spans could not all be sent");
        }
    }
}

/// Install the global subscriber: `RUST_LOG` filter (default `info`), logs
/// as text or JSON on stderr, and the exporter's own spans over OTLP when the
/// standard variables name an endpoint.
pub fn init(log_format: LogFormat) -> Result<Telemetry, TelemetryError> {
    init_with_env(log_format, &process_env())
}

/// [`init`] with the variables given as a map.
pub fn init_with_env(
    log_format: LogFormat,
    env: &HashMap<String, String>,
) -> Result<Telemetry, TelemetryError> {
    let filter_text = env
        .get("RUST_LOG")
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .unwrap_or(DEFAULT_LOG_FILTER);
    let filter = EnvFilter::try_new(filter_text).map_err(|cause| TelemetryError::Filter {
        value: filter_text.to_string(),
        cause,
    })?;
    let provider = own_tracer_provider(env)?;

    // Colour only for a person at a terminal: escape codes in a pod's log,
    // a file or a pipe are noise (and NO_COLOR says no, see no-color.org).
    let ansi = use_colour(std::io::IsTerminal::is_terminal(&std::io::stderr()), env);
    let text = (log_format == LogFormat::Text).then(|| {
        tracing_subscriber::fmt::layer()
            .with_ansi(ansi)
            .with_writer(std::io::stderr)
    });
    let json = (log_format == LogFormat::Json).then(|| {
        tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_writer(std::io::stderr)
    });
    let otel = provider.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer(SCOPE))
            .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
                !is_export_internals(meta.target())
            }))
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(text)
        .with(json)
        .with(otel)
        .try_init()
        .map_err(TelemetryError::AlreadyInstalled)?;

    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    if let Some(provider) = &provider {
        opentelemetry::global::set_tracer_provider(provider.clone());
    }
    Ok(Telemetry { provider })
}

/// Text logs are coloured only when stderr is a terminal and `NO_COLOR` is
/// unset or empty.
pub fn use_colour(stderr_is_terminal: bool, env: &HashMap<String, String>) -> bool {
    stderr_is_terminal && env.get("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Spans of the HTTP and gRPC stacks the OTLP exporter itself uses: tracing
/// them would export the export, forever.
fn is_export_internals(target: &str) -> bool {
    ["opentelemetry", "hyper", "h2", "tonic", "tower", "reqwest"]
        .iter()
        .any(|prefix| {
            target == *prefix
                || target
                    .strip_prefix(prefix)
                    .is_some_and(|rest| rest.starts_with("::") || rest.starts_with('_'))
        })
}

/// The SDK provider of the exporter's own spans, or `None` when no OTLP
/// endpoint is configured. Not installed globally (that is [`init`]'s job).
pub fn own_tracer_provider(
    env: &HashMap<String, String>,
) -> Result<Option<SdkTracerProvider>, TelemetryError> {
    let Some(config) = OtlpConfig::from_env(env)? else {
        return Ok(None);
    };
    // Built on a plain thread: `init` may run inside the async main, where
    // reqwest's blocking client must not be created.
    let transport = std::thread::scope(|scope| {
        scope
            .spawn(|| OtlpTransport::build(&config))
            .join()
            .unwrap_or(Err(ExportError::ThreadExited))
    })?;
    let batch = BatchConfigBuilder::default()
        .with_max_queue_size(config.batch.max_queue)
        .with_max_export_batch_size(config.batch.max_batch)
        .with_scheduled_delay(config.batch.delay)
        .build();
    let processor = BatchSpanProcessor::builder(transport)
        .with_batch_config(batch)
        .build();
    Ok(Some(
        SdkTracerProvider::builder()
            .with_resource(config.resource())
            .with_span_processor(processor)
            .build(),
    ))
}

/// Adds a W3C `traceparent` for the current `tracing` span to outgoing
/// requests, so upstreams that trace with OpenTelemetry link their spans to
/// the poll that caused them. Adds nothing when no span is being exported.
#[derive(Clone, Copy, Debug, Default)]
pub struct TraceparentHook;

impl TraceparentHook {
    pub fn add_headers(&self, headers: &mut HeaderMap) {
        let context = tracing::Span::current().context();
        TraceContextPropagator::new().inject_context(&context, &mut HeaderInjector(headers));
    }
}

struct HeaderInjector<'a>(&'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

impl crate::sources::http::RequestHook for TraceparentHook {
    fn add_headers(&self, headers: &mut HeaderMap) {
        TraceparentHook::add_headers(self, headers);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use opentelemetry::trace::TraceContextExt;

    use super::*;

    #[test]
    fn colour_only_at_a_terminal_without_no_color() {
        let env = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(use_colour(true, &env(&[])));
        assert!(!use_colour(false, &env(&[])), "a pipe or a file: no colour");
        assert!(!use_colour(true, &env(&[("NO_COLOR", "1")])));
        assert!(
            use_colour(true, &env(&[("NO_COLOR", "")])),
            "empty means unset"
        );
    }

    #[test]
    fn traceparent_names_the_current_span() {
        let provider = SdkTracerProvider::builder().build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        tracing::subscriber::with_default(subscriber, || {
            let mut outside = HeaderMap::new();
            TraceparentHook.add_headers(&mut outside);
            assert!(outside.is_empty(), "no span, no header: {outside:?}");

            let span = tracing::info_span!("poll", source = "maestro");
            let _entered = span.enter();
            let context = span.context();
            let span_context = context.span().span_context().clone();
            let mut headers = HeaderMap::new();
            TraceparentHook.add_headers(&mut headers);
            let traceparent = headers
                .get("traceparent")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            assert_eq!(
                traceparent,
                format!(
                    "00-{}-{}-01",
                    span_context.trace_id(),
                    span_context.span_id()
                )
            );
        });
    }

    #[test]
    fn no_endpoint_means_no_provider() {
        let env = HashMap::from([("OTEL_SERVICE_NAME".to_string(), "x".to_string())]);
        assert!(own_tracer_provider(&env).unwrap().is_none());
    }

    #[test]
    fn the_export_stack_is_not_traced() {
        assert!(is_export_internals("hyper_util::client"));
        assert!(is_export_internals("h2::codec"));
        assert!(is_export_internals("opentelemetry_sdk"));
        assert!(!is_export_internals("hcp_flow::sources::maestro"));
        assert!(!is_export_internals("hyperion"));
    }
}
