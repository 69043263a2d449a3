//! A source's context delivering to a recorder, with the self-metrics it
//! reports into: one source run on its own against a stand-in.

use std::sync::Arc;

use hcp_flow::metrics::exporter::{
    ExporterMetrics, RequestErrorKind, RequestErrorLabels, SourceLabels,
};
use hcp_flow::model::Batch;
use hcp_flow::sources::{ObservationSink, SourceContext};
use parking_lot::Mutex;

/// Every batch a source delivered.
#[derive(Default)]
pub struct Recorder(pub Mutex<Vec<Batch>>);

impl ObservationSink for Recorder {
    fn apply(&self, batch: Batch) {
        self.0.lock().push(batch);
    }
}

impl Recorder {
    /// The batches delivered since the last call.
    pub fn take(&self) -> Vec<Batch> {
        std::mem::take(&mut *self.0.lock())
    }
}

pub struct Harness {
    pub sink: Arc<Recorder>,
    pub metrics: ExporterMetrics,
    pub ctx: SourceContext,
}

/// The context of source `name` (and the TLS provider its client needs).
pub fn harness(name: &str) -> Harness {
    crate::common::init();
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = ExporterMetrics::register(&mut registry);
    let sink = Arc::new(Recorder::default());
    let ctx = SourceContext::detached(name, sink.clone(), metrics.clone());
    Harness { sink, metrics, ctx }
}

impl Harness {
    fn labels(&self) -> SourceLabels {
        SourceLabels {
            source: self.ctx.name.clone(),
        }
    }

    /// `hcpflow_source_up` of the source.
    pub fn up(&self) -> i64 {
        self.metrics.source_up.get_or_create(&self.labels()).get()
    }

    /// Requests the source made.
    pub fn requests(&self) -> u64 {
        self.metrics
            .source_requests
            .get_or_create(&self.labels())
            .get()
    }

    /// Requests that failed as `kind`.
    pub fn errors(&self, kind: RequestErrorKind) -> u64 {
        self.metrics
            .source_request_errors
            .get_or_create(&RequestErrorLabels {
                source: self.ctx.name.clone(),
                kind,
            })
            .get()
    }

    /// Polls whose deletions the source refused as too many at once.
    pub fn mass_deletions(&self) -> u64 {
        self.metrics
            .source_mass_deletions
            .get_or_create(&self.labels())
            .get()
    }
}
