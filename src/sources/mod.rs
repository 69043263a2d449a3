//! Upstreams. One module per upstream; each has serde types with only the fields
//! it reads, a pure `response → observations` function, and a poller that feeds
//! [`Batch`]es into an [`ObservationSink`].

use std::sync::Arc;

use crate::clock::Clock;
use crate::config::{
    ClustersServiceConfig, HttpSourceConfig, MaestroConfig, RpFrontendConfig,
    SOURCE_CLUSTERS_SERVICE, SOURCE_MAESTRO, SOURCE_RP_FRONTEND, SourcesConfig,
};
use crate::metrics::exporter::ExporterMetrics;
use crate::model::{Batch, Observation};

pub mod clusters_service;
pub mod health;
pub mod http;
pub mod kube;
pub mod maestro;
pub mod node_pools;
pub mod poll;
pub mod rp_frontend;

/// A configured HTTP source: the one list the exporter names, starts and
/// waits for (`/readyz`), so a new source cannot be started without being
/// waited for, or the other way round.
#[derive(Clone, Debug)]
pub enum HttpSource {
    RpFrontend(RpFrontendConfig),
    ClustersService(ClustersServiceConfig),
    /// With what its stream knows of each bundle, one map for every
    /// restart of the source, kept across the exporter's (docs/design/03-timeline-model.md
    /// §3.10).
    Maestro(MaestroConfig, maestro::KnownBundles),
}

impl HttpSource {
    /// Every configured HTTP source, in the order of
    /// [`SourcesConfig::http_sources`].
    pub fn configured(sources: &SourcesConfig) -> Vec<HttpSource> {
        let rp = sources.rp_frontend.clone().map(HttpSource::RpFrontend);
        let cs = sources
            .clusters_service
            .clone()
            .map(HttpSource::ClustersService);
        let maestro = sources
            .maestro
            .clone()
            .map(|cfg| HttpSource::Maestro(cfg, maestro::KnownBundles::default()));
        [rp, cs, maestro].into_iter().flatten().collect()
    }

    /// The `source` label value.
    pub fn name(&self) -> &'static str {
        match self {
            HttpSource::RpFrontend(_) => SOURCE_RP_FRONTEND,
            HttpSource::ClustersService(_) => SOURCE_CLUSTERS_SERVICE,
            HttpSource::Maestro(..) => SOURCE_MAESTRO,
        }
    }

    pub fn http(&self) -> &HttpSourceConfig {
        match self {
            HttpSource::RpFrontend(cfg) => &cfg.http,
            HttpSource::ClustersService(cfg) => &cfg.http,
            HttpSource::Maestro(cfg, _) => &cfg.http,
        }
    }

    /// What Maestro's stream knows of each bundle, when this is Maestro
    /// heard over its stream: what the exporter restores at start and
    /// writes at shutdown (docs/design/03-timeline-model.md §3.10).
    pub fn stream_known(&self) -> Option<&maestro::KnownBundles> {
        match self {
            HttpSource::Maestro(cfg, known) if cfg.grpc.is_some() => Some(known),
            _ => None,
        }
    }

    /// Poll forever through `client`. Abort the task to stop.
    /// `pool_hints`: where the model says which clusters' node pools moved,
    /// for the RP's and Clusters Service's pool reads (docs/design/15b-operations.md §15.11).
    pub async fn run(
        self,
        ctx: SourceContext,
        client: http::HttpClient,
        pool_hints: node_pools::PoolHints,
    ) {
        match self {
            HttpSource::RpFrontend(cfg) => {
                rp_frontend::RpFrontendSource::with_client(cfg, ctx, client)
                    .with_pool_hints(pool_hints)
                    .run()
                    .await
            }
            HttpSource::ClustersService(cfg) => {
                clusters_service::ClustersServiceSource::with_client(cfg, ctx, client)
                    .with_pool_hints(pool_hints)
                    .run()
                    .await
            }
            HttpSource::Maestro(cfg, known) => {
                maestro::stream::run_configured(
                    maestro::MaestroSource::with_client(cfg, ctx, client).remembering(known),
                )
                .await
            }
        }
    }
}

/// Where sources deliver what they read (the fleet store in production, a
/// recorder in tests).
pub trait ObservationSink: Send + Sync + 'static {
    fn apply(&self, batch: Batch);

    /// Whether this instance follows `cluster_id` (its shard,
    /// docs/design/08-scopes-and-scale-out.md §8.3). A source that knows a cluster id as it parses
    /// skips what another shard follows before remembering it, so a
    /// shard's memory shrinks with its share of the fleet.
    fn follows(&self, cluster_id: &str) -> bool {
        let _ = cluster_id;
        true
    }

    /// What was restored for `source` from the last run's readings and
    /// not delivered again since the restart (docs/design/03-timeline-model.md §3.10): what
    /// its first list should look for. `None` when nothing was restored
    /// for it, or everything restored is confirmed or reconciled.
    fn restored(&self, source: &str, hop: crate::model::Hop) -> Option<RestoredObjects> {
        let _ = (source, hop);
        None
    }
}

/// Restored objects of one hop awaiting their source's word.
#[derive(Clone, Debug, PartialEq)]
pub struct RestoredObjects {
    /// The objects' names, as the model keys them.
    pub objects: Vec<String>,
    /// When the readings were written: what changed upstream after it, the
    /// restored state cannot show.
    pub written_at: jiff::Timestamp,
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
    /// themselves, and never use time to decide a phase (docs/design/03-timeline-model.md §3.4).
    pub clock: Clock,
    /// Where the source reports its lists, failures and disabled kinds
    /// (`source_up`, `/readyz`).
    pub health: health::SourceHealth,
}

impl SourceContext {
    /// A context of its own: what the source reads goes to `sink`, its
    /// self-metrics to `metrics`, its health to a tracker of its own, and it
    /// stamps reads with the real clock. For a source read outside a store.
    pub fn detached(name: &str, sink: Arc<dyn ObservationSink>, metrics: ExporterMetrics) -> Self {
        Self {
            name: name.to_string(),
            sink,
            health: health::SourceHealth::new(metrics.clone(), Clock::default()),
            metrics,
            clock: Clock::default(),
        }
    }

    /// The same context with its readings going to `sink` instead.
    pub fn with_sink(self, sink: Arc<dyn ObservationSink>) -> Self {
        Self { sink, ..self }
    }

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
