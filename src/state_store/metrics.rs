//! The state store's self-metrics (docs/metrics.md).

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The `result` label of `hcpflow_state_store_writes_total`.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum WriteResult {
    ok,
    error,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    pub result: WriteResult,
}

/// The state store's self-metrics (docs/metrics.md).
#[derive(Clone, Debug, Default)]
pub struct StateStoreMetrics {
    pub writes: Family<WriteLabels, Counter>,
    pub last_write: Gauge<f64, AtomicU64>,
    pub clusters: Gauge,
}

impl StateStoreMetrics {
    pub fn register(registry: &mut Registry) -> StateStoreMetrics {
        let metrics = StateStoreMetrics::default();
        for result in [WriteResult::ok, WriteResult::error] {
            let _ = metrics.writes.get_or_create(&WriteLabels { result });
        }
        registry.register(
            "hcpflow_state_store_writes",
            "Writes of the state file (the observed times kept across restarts), by result; none without a state directory",
            metrics.writes.clone(),
        );
        registry.register(
            "hcpflow_state_store_last_write_timestamp_seconds",
            "Unix time of the last successful write of the state file; 0 before the first one",
            metrics.last_write.clone(),
        );
        registry.register(
            "hcpflow_state_store_clusters",
            "Clusters whose memory the state file holds: restored at start, then as last written",
            metrics.clusters.clone(),
        );
        metrics
    }

    pub(super) fn count(&self, result: WriteResult) {
        self.writes.get_or_create(&WriteLabels { result }).inc();
    }

    /// Writes with `result` so far.
    pub fn writes(&self, result: WriteResult) -> u64 {
        self.writes.get_or_create(&WriteLabels { result }).get()
    }
}

pub(super) fn gauge_value(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
