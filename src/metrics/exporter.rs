//! The exporter's own metrics: how each source is doing, what could not be
//! read, and what the fleet-level counters and histograms say.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabels {
    pub source: String,
}

/// Why an upstream call failed; the `kind` label of request errors.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum RequestErrorKind {
    /// No answer (connect, a read, or the whole request) within the
    /// source's deadlines.
    timeout,
    /// The upstream's port refused the TCP connection (nothing listens).
    connect_refused,
    /// The upstream's host name did not resolve.
    dns,
    /// The TLS handshake failed (certificate not trusted, expired, wrong
    /// name); the message carries the verification reason.
    tls,
    /// Any other failure to connect (reset, unreachable network).
    connect,
    /// The upstream answered 5xx.
    status_5xx,
    /// The upstream answered 4xx (auth, not found on a list, ...).
    status_4xx,
    /// The body was not the JSON we expect.
    decode,
    /// The body exceeded the size limit.
    body_too_large,
    /// Reading the bearer token file failed.
    credentials,
    /// Anything else from the HTTP stack.
    other,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestErrorLabels {
    pub source: String,
    pub kind: RequestErrorKind,
}

/// The state of one kind a source reads; the `state` label of
/// `hcpflow_source_kind_info`.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, serde::Serialize, EncodeLabelValue)]
#[allow(non_camel_case_types)]
#[serde(rename_all = "snake_case")]
pub enum KindState {
    /// Not listed yet.
    pending,
    /// Not listed yet since a restart, but serving what the last run read
    /// of it (the state directory's readings, docs/design/03-timeline-model.md §3.10).
    restored,
    /// Listed, and no failure since.
    ok,
    /// The last list or watch failed; the last good state is kept.
    failing,
    /// The API does not serve this kind (its CRD is not installed); an
    /// optional kind is then disabled and rechecked slowly.
    absent,
    /// The exporter's identity may not read this kind (RBAC); disabled.
    forbidden,
}

impl KindState {
    /// Disabled kinds hold neither the source down nor `/readyz`.
    pub fn enabled(self) -> bool {
        !matches!(self, KindState::absent | KindState::forbidden)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindInfoLabels {
    pub source: String,
    /// The kind read (a Kubernetes kind, or the HTTP API's collection).
    pub kind: String,
    pub state: KindState,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UnknownValueLabels {
    pub source: String,
    /// The upstream field path, e.g. `properties.provisioningState`.
    pub field: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WatchEventLabels {
    pub source: String,
    pub event: String,
}

/// A family that always writes its `# HELP`/`# TYPE` lines, even before its
/// first sample: prometheus-client omits empty families, and then an alert
/// or dashboard on, say, request errors names a metric no scrape shows.
#[derive(Debug)]
pub struct AlwaysDescribed<M>(pub M);

impl<M: EncodeMetric> EncodeMetric for AlwaysDescribed<M> {
    fn encode(&self, encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }
}

/// Registered once; cloned handles are cheap (every family is an `Arc` inside).
#[derive(Clone, Debug)]
pub struct ExporterMetrics {
    pub source_up: Family<SourceLabels, Gauge>,
    pub source_last_success: Family<SourceLabels, Gauge<f64, AtomicU64>>,
    pub source_requests: Family<SourceLabels, Counter>,
    pub source_request_errors: Family<RequestErrorLabels, Counter>,
    pub source_request_duration: Family<SourceLabels, Histogram>,
    pub watch_events: Family<WatchEventLabels, Counter>,
    pub unknown_values: Family<UnknownValueLabels, Counter>,
    pub source_kind_info: Family<KindInfoLabels, Gauge>,
    pub source_restarts: Family<SourceLabels, Counter>,
    pub source_mass_deletions: Family<SourceLabels, Counter>,
    pub node_pool_reads_queued: Family<SourceLabels, Gauge>,
}

impl ExporterMetrics {
    pub fn register(registry: &mut Registry) -> ExporterMetrics {
        let metrics = ExporterMetrics {
            source_up: Family::default(),
            source_last_success: Family::default(),
            source_requests: Family::default(),
            source_request_errors: Family::default(),
            source_request_duration: Family::new_with_constructor(|| {
                Histogram::new([0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0])
            }),
            watch_events: Family::default(),
            unknown_values: Family::default(),
            source_kind_info: Family::default(),
            source_restarts: Family::default(),
            source_mass_deletions: Family::default(),
            node_pool_reads_queued: Family::default(),
        };
        registry.register(
            "hcpflow_source_up",
            "1 if the last sync of the source succeeded, 0 if it failed (the last good state is kept)",
            AlwaysDescribed(metrics.source_up.clone()),
        );
        registry.register(
            "hcpflow_source_last_success_timestamp_seconds",
            "Unix time of the source's last successful sync",
            AlwaysDescribed(metrics.source_last_success.clone()),
        );
        registry.register(
            "hcpflow_source_requests",
            "Upstream calls made to the source",
            AlwaysDescribed(metrics.source_requests.clone()),
        );
        registry.register(
            "hcpflow_source_request_errors",
            "Upstream calls to the source that failed, by kind",
            AlwaysDescribed(metrics.source_request_errors.clone()),
        );
        registry.register(
            "hcpflow_source_request_duration_seconds",
            "Duration of upstream calls to the source",
            AlwaysDescribed(metrics.source_request_duration.clone()),
        );
        registry.register(
            "hcpflow_watch_events",
            "Kubernetes watch events received, by event type",
            AlwaysDescribed(metrics.watch_events.clone()),
        );
        registry.register(
            "hcpflow_unknown_values",
            "Upstream values the exporter did not recognise (mapped to phase unknown or skipped), by field",
            AlwaysDescribed(metrics.unknown_values.clone()),
        );
        registry.register(
            "hcpflow_source_kind_info",
            "1 for the current state of each kind a source reads: pending, restored (serving the last run's readings until it lists), ok, failing, absent (API not installed, disabled) or forbidden (RBAC, disabled)",
            AlwaysDescribed(metrics.source_kind_info.clone()),
        );
        registry.register(
            "hcpflow_source_restarts",
            "Source tasks restarted after they panicked or returned (the source is down until it lists again)",
            AlwaysDescribed(metrics.source_restarts.clone()),
        );
        registry.register(
            "hcpflow_source_mass_deletions",
            "Relists that would have deleted more than half of at least 10 known objects of the source at once; each is held back until the next full relist confirms it",
            AlwaysDescribed(metrics.source_mass_deletions.clone()),
        );
        registry.register(
            "hcpflow_node_pool_reads_queued",
            "Clusters whose node pools the RP or Clusters Service source was told to read (a NodePool appeared, turned ready or began its removal) and has not read yet, with those it is reading",
            AlwaysDescribed(metrics.node_pool_reads_queued.clone()),
        );
        metrics
    }

    /// How many clusters' node pools `source` has yet to read.
    pub fn node_pool_reads_queued(&self, source: &str, queued: usize) {
        self.node_pool_reads_queued
            .get_or_create(&Self::source(source))
            .set(i64::try_from(queued).unwrap_or(i64::MAX));
    }

    pub fn source_restarted(&self, source: &str) {
        self.source_restarts
            .get_or_create(&Self::source(source))
            .inc();
    }

    /// A relist of `source` would delete a large share of what it knows.
    pub fn mass_deletion(&self, source: &str) {
        self.source_mass_deletions
            .get_or_create(&Self::source(source))
            .inc();
    }

    /// Set or clear the `hcpflow_source_kind_info` series of one kind
    /// state (one series per kind: the caller clears the old state).
    pub fn kind_state(&self, source: &str, kind: &str, state: KindState, present: bool) {
        let labels = KindInfoLabels {
            source: source.to_string(),
            kind: kind.to_string(),
            state,
        };
        if present {
            self.source_kind_info.get_or_create(&labels).set(1);
        } else {
            self.source_kind_info.remove(&labels);
        }
    }

    fn source(source: &str) -> SourceLabels {
        SourceLabels {
            source: source.to_string(),
        }
    }

    /// A sync (one full poll cycle or watch relist) of the source succeeded.
    pub fn sync_succeeded(&self, source: &str, now: jiff::Timestamp) {
        let labels = Self::source(source);
        self.source_up.get_or_create(&labels).set(1);
        self.source_last_success
            .get_or_create(&labels)
            .set(now.as_millisecond() as f64 / 1000.0);
    }

    /// A sync of the source failed; the last good state stays in the model.
    pub fn sync_failed(&self, source: &str) {
        self.source_up.get_or_create(&Self::source(source)).set(0);
    }

    /// Make the source's families visible (at 0) before its first request.
    pub fn declare_source(&self, source: &str) {
        let labels = Self::source(source);
        let _ = self.source_up.get_or_create(&labels);
        let _ = self.source_requests.get_or_create(&labels);
        let _ = self.source_restarts.get_or_create(&labels);
        let _ = self.source_mass_deletions.get_or_create(&labels);
    }

    pub fn request_done(&self, source: &str, seconds: f64) {
        let labels = Self::source(source);
        self.source_requests.get_or_create(&labels).inc();
        self.source_request_duration
            .get_or_create(&labels)
            .observe(seconds);
    }

    pub fn request_failed(&self, source: &str, kind: RequestErrorKind) {
        self.source_request_errors
            .get_or_create(&RequestErrorLabels {
                source: source.to_string(),
                kind,
            })
            .inc();
    }

    pub fn unknown_value(&self, source: &str, field: &str) {
        self.unknown_values
            .get_or_create(&UnknownValueLabels {
                source: source.to_string(),
                field: field.to_string(),
            })
            .inc();
    }

    pub fn watch_event(&self, source: &str, event: &str) {
        self.watch_events
            .get_or_create(&WatchEventLabels {
                source: source.to_string(),
                event: event.to_string(),
            })
            .inc();
    }
}
