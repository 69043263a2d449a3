//! A source's context delivering to a recorder, with the self-metrics it
//! reports into: included with `#[path]` by the poller tests.

use std::sync::Arc;

use hcp_flow::metrics::exporter::ExporterMetrics;
use hcp_flow::model::Batch;
use hcp_flow::sources::health::SourceHealth;
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
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = ExporterMetrics::register(&mut registry);
    let sink = Arc::new(Recorder::default());
    let ctx = SourceContext {
        name: name.to_string(),
        sink: sink.clone(),
        metrics: metrics.clone(),
        clock: Default::default(),
        health: SourceHealth::new(metrics.clone(), Default::default()),
    };
    Harness { sink, metrics, ctx }
}
