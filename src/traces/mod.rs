//! One OpenTelemetry trace per operation (docs/design/07-traces.md §7, §15.6).
//!
//! Ids are derived from the operation's key, so every instance and every restart
//! agrees on them and spans from the service and management sides land in one
//! trace without coordination. [`CreationTracer`] hears the store's events,
//! builds spans from the timeline under the store lock, and hands them to a
//! bounded queue drained by its own export thread.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::model::{
    CreationOutcome, Event, EventListener, Fleet, Hop, OperationKind, OperationOutcome, Outcome,
    Via,
};

pub mod config;
pub mod export;
pub mod spans;

pub use config::{BatchSettings, OtlpConfig, OtlpConfigError, Protocol};
pub use export::{DropReason, ExportError, OtlpTransport, TraceMetrics};
pub use spans::{CreationEnd, HopEnd, ROOT_SPAN_NAME, hop_span, hop_span_name, root_span};

/// The ids are the model's; re-exported so `traces::trace_id` keeps working.
pub use crate::model::{span_id, span_id_of, trace_id, trace_id_hex};

#[derive(Debug, thiserror::Error)]
pub enum TracesError {
    #[error("invalid OpenTelemetry export settings")]
    Config(#[from] OtlpConfigError),
    #[error("the creation trace exporter could not start")]
    Export(#[from] ExportError),
}

/// Which spans of a creation this instance exports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracerOptions {
    /// Export the root span. In a split deployment (a service-scope instance
    /// and management-scope ones) only the service side should: both see the
    /// creation end, and two roots under one id confuse trace backends.
    pub root_spans: bool,
}

impl Default for TracerOptions {
    fn default() -> Self {
        TracerOptions { root_spans: true }
    }
}

/// Bits of the per-cluster "already exported" mask: one per hop and view,
/// one for the root.
fn span_bit(hop: Option<Hop>, via: Via) -> u32 {
    match (hop, via) {
        (None, _) => 1 << 16,
        (Some(hop), Via::Direct) => 1 << hop.index(),
        (Some(hop), Via::Maestro) => 1 << (8 + hop.index()),
    }
}

/// Turns model events into creation spans and exports them over OTLP.
pub struct CreationTracer {
    queue: export::SpanQueue,
    options: TracerOptions,
    /// cluster id → spans exported by this process. The model already emits
    /// each end once; this also holds when a hop's objects vanish and come
    /// back. Forgotten when the cluster is removed.
    exported: Mutex<HashMap<String, u32>>,
}

impl CreationTracer {
    /// Built from the process environment; `None` when no OTLP endpoint is set.
    pub fn from_env(metrics: TraceMetrics) -> Result<Option<CreationTracer>, TracesError> {
        CreationTracer::from_env_map(&config::process_env(), metrics)
    }

    /// Built from `env` (the standard `OTEL_*` variables); `None` when no
    /// endpoint is set.
    pub fn from_env_map(
        env: &HashMap<String, String>,
        metrics: TraceMetrics,
    ) -> Result<Option<CreationTracer>, TracesError> {
        match OtlpConfig::from_env(env)? {
            Some(config) => Ok(Some(CreationTracer::new(config, metrics)?)),
            None => Ok(None),
        }
    }

    /// Start the export thread; the OTLP exporter is built on it.
    pub fn new(config: OtlpConfig, metrics: TraceMetrics) -> Result<CreationTracer, TracesError> {
        tracing::info!(
            protocol = config.protocol.as_str(),
            endpoint = %config.endpoint,
            service = config.service_name(),
            "exporting creation traces over OTLP"
        );
        let batch = config.batch;
        let queue =
            export::SpanQueue::start(batch, metrics, move || OtlpTransport::build(&config))?;
        Ok(CreationTracer {
            queue,
            options: TracerOptions::default(),
            exported: Mutex::new(HashMap::new()),
        })
    }

    pub fn with_options(mut self, options: TracerOptions) -> CreationTracer {
        self.options = options;
        self
    }

    /// Export every queued span now and wait for it (tests, and before exit).
    pub fn flush(&self) {
        self.queue.flush();
    }

    /// Export what is queued and stop; later spans are dropped. Call on SIGTERM.
    pub fn shutdown(&self) {
        self.queue.shutdown();
    }

    /// True the first time a span is claimed for this operation (its key).
    fn claim(&self, key: &str, hop: Option<Hop>, via: Via) -> bool {
        let bit = span_bit(hop, via);
        let mut exported = self.exported.lock();
        let mask = exported.entry(key.to_string()).or_default();
        let first = *mask & bit == 0;
        *mask |= bit;
        first
    }

    fn on_event(&self, event: &Event, fleet: &Fleet) {
        match event {
            Event::HopEnded {
                cluster_id,
                operation,
                subject,
                hop,
                via,
                outcome,
                started,
                ended,
                ..
            } => {
                let timeline = fleet.get(cluster_id);
                let via = *via;
                let key = operation.key(cluster_id, subject.as_deref());
                if self.claim(&key, Some(*hop), via) {
                    let end = HopEnd {
                        operation: *operation,
                        subject: subject.clone(),
                        hop: *hop,
                        outcome: *outcome,
                        started: *started,
                        ended: *ended,
                    };
                    self.queue.push(hop_span(cluster_id, timeline, end, via));
                }
            }
            Event::OperationEnded {
                cluster_id,
                operation,
                subject,
                outcome,
                started,
                ended,
                ..
            } => {
                // A deletion that succeeded took its timeline with it: its
                // root comes with the removal, from the last timeline.
                let Some(timeline) = fleet.get(cluster_id) else {
                    return;
                };
                let key = operation.key(cluster_id, subject.as_deref());
                if self.options.root_spans && self.claim(&key, None, Via::Direct) {
                    let end = match outcome {
                        Outcome::Succeeded => CreationEnd::Succeeded,
                        Outcome::Failed => CreationEnd::Failed,
                    };
                    self.queue.push(root_span(
                        *operation,
                        subject.as_deref(),
                        cluster_id,
                        timeline,
                        end,
                        *started,
                        *ended,
                    ));
                }
                // A pool's operation has nothing after its root: a pool
                // created again under the same name is a new operation.
                if operation.of_node_pool() {
                    self.exported.lock().remove(&key);
                }
            }
            Event::ClusterRemoved {
                cluster_id,
                in_flight,
                last,
            } => {
                let deletion = last.deletion.as_deref();
                // A deletion first turns an in-flight creation `Deleted`, then
                // removes it: both mean it never completed.
                let unfinished = *in_flight || last.outcome == CreationOutcome::Deleted;
                if unfinished
                    && self.options.root_spans
                    && self.claim(cluster_id, None, Via::Direct)
                {
                    // Ended by the deletion's start; without one, when the
                    // exporter saw it go.
                    let started = last.created_at.at.timestamp();
                    let ended = deletion
                        .map_or_else(jiff::Timestamp::now, |d| d.started_at.at.timestamp())
                        .max(started);
                    let mut span = root_span(
                        OperationKind::Create,
                        None,
                        cluster_id,
                        last,
                        CreationEnd::Deleted,
                        started,
                        ended,
                    );
                    if deletion.is_none() {
                        span.attributes.push(opentelemetry::KeyValue::new(
                            "hcp.creation.end_observed",
                            true,
                        ));
                    }
                    self.queue.push(span);
                }
                let delete_key = OperationKind::Delete.key(cluster_id, None);
                if let Some(d) = deletion
                    && d.outcome == OperationOutcome::Succeeded
                    && let Some(ended) = d.ended_at
                    && self.options.root_spans
                    && self.claim(&delete_key, None, Via::Direct)
                {
                    self.queue.push(root_span(
                        OperationKind::Delete,
                        None,
                        cluster_id,
                        last,
                        CreationEnd::Succeeded,
                        d.started_at.at.timestamp(),
                        ended.timestamp(),
                    ));
                }
                let mut exported = self.exported.lock();
                exported.remove(cluster_id);
                exported.remove(&delete_key);
                // Its pools' operations that were in flight (hop spans
                // claimed, no root): none will end now.
                if last.day2_operations.is_some() {
                    let prefix = format!("{cluster_id}/node_pool_");
                    exported.retain(|key, _| !key.starts_with(&prefix));
                }
            }
            Event::Slo { .. } => {}
        }
    }
}

impl EventListener for CreationTracer {
    fn on_events(&self, events: &[Event], fleet: &Fleet) {
        for event in events {
            self.on_event(event, fleet);
        }
    }
}
