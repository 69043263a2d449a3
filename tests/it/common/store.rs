//! The model's store on its own, for tests that feed it observations or
//! run one source into it.

use std::sync::Arc;

use hcp_flow::clock::Clock;
use hcp_flow::metrics::fleet::RenderConfig;
use hcp_flow::model::ModelConfig;
use hcp_flow::store::{Store, StoreConfig};
use prometheus_client::registry::Registry;

/// A store to build: the model's defaults, histogram bounds as `serve` has
/// them, no source to wait for.
pub struct StoreBuilder {
    config: StoreConfig,
}

pub fn builder() -> StoreBuilder {
    StoreBuilder {
        config: StoreConfig {
            model: ModelConfig::default(),
            render: RenderConfig::default(),
            time_scale: 1.0,
            sources: Vec::new(),
            clock: Clock::Real,
        },
    }
}

/// [`builder`] as it is.
pub fn default_store() -> Arc<Store> {
    builder().build()
}

impl StoreBuilder {
    pub fn model(mut self, model: ModelConfig) -> Self {
        self.config.model = model;
        self
    }

    /// The sources that must sync once before `/readyz` says ready.
    pub fn sources(mut self, sources: &[&str]) -> Self {
        self.config.sources = sources.iter().map(|s| s.to_string()).collect();
        self
    }

    pub fn clock(mut self, clock: Clock) -> Self {
        self.config.clock = clock;
        self
    }

    pub fn time_scale(mut self, time_scale: f64) -> Self {
        self.config.time_scale = time_scale;
        self
    }

    pub fn build(self) -> Arc<Store> {
        Store::new(self.config)
    }

    /// Built into `registry`, beside what the test registered there.
    pub fn build_with_registry(self, registry: Registry) -> Arc<Store> {
        Store::with_registry(self.config, registry)
    }
}
