//! Upstreams. One module per upstream; each has serde types with only the fields
//! it reads, a pure `response → observations` function, and a poller that feeds
//! [`Batch`]es into an [`ObservationSink`].

use std::sync::Arc;

use crate::clock::Clock;
use crate::metrics::exporter::ExporterMetrics;
use crate::model::{Batch, Observation};

pub mod clusters_service;
pub mod health;
pub mod http;
pub mod kube;
pub mod maestro;
pub mod poll;
pub mod rp_frontend;

/// Where sources deliver what they read (the fleet store in production, a
/// recorder in tests).
pub trait ObservationSink: Send + Sync + 'static {
    fn apply(&self, batch: Batch);

    /// Whether this instance follows `cluster_id` (its shard,
    /// docs/design.md §8.3). A source that knows a cluster id as it parses
    /// skips what another shard follows before remembering it, so a
    /// shard's memory shrinks with its share of the fleet.
    fn follows(&self, cluster_id: &str) -> bool {
        let _ = cluster_id;
        true
    }
}

/// What a poller needs besides its own config.
#[derive(Clone)]
pub struct SourceContext {
    /// The `source` label value.
    pub name: String,
    pub sink: Arc<dyn ObservationSink>,
    pub metrics: ExporterMetrics,
    /// Stamps what the source read (the fallback for missing upstream times)
    /// and its successful syncs. Sources never read the wall clock
    /// themselves, and never use time to decide a phase (docs/design.md §3.4).
    pub clock: Clock,
    /// Where the source reports its lists, failures and disabled kinds
    /// (`source_up`, `/readyz`).
    pub health: health::SourceHealth,
}

impl SourceContext {
    /// Count what this source did not recognise
    /// (`hcpflow_unknown_values_total{source, field}`), never fatal.
    pub fn count_unknown(&self, unknown: &[UnknownValue]) {
        for u in unknown {
            tracing::debug!(source = %self.name, field = u.field, value = %u.value, "unknown upstream value");
            self.metrics.unknown_value(&self.name, u.field);
        }
    }
}

/// The result of turning one upstream response into observations.
#[derive(Debug, Default)]
pub struct Parsed {
    pub observations: Vec<Observation>,
    /// Values the exporter did not recognise; counted in
    /// `hcpflow_unknown_values_total{source, field}`.
    pub unknown: Vec<UnknownValue>,
}

pub use crate::views::UnknownValue;
