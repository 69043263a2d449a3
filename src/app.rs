//! Wiring: config → store → sources → server, for `serve`, `demo` and the
//! benchmark. No logic of its own beyond starting and stopping things, and
//! nothing of the simulated world (that is `demo`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::config::{Config, HttpSourceConfig, SOURCE_MAESTRO};
use crate::metrics::fleet::RenderConfig;
use crate::model::{ModelConfig, OperationTargets};
use crate::sources::http::BuildError;
use crate::sources::http::{HttpClient, RequestHook};
use crate::sources::kube::{KubeMetrics, KubeSource, KubeSourceConfig};
use crate::sources::{HttpSource, SourceContext};
use crate::state_store::{
    READINGS_INTERVAL, ReadingsOf, Restored, StateStore, StateStoreError, StateStoreMetrics,
};
use crate::store::{Store, StoreConfig};
use crate::supervise::{Restart, supervise};
use crate::telemetry::TraceparentHook;
use crate::traces::{CreationTracer, TraceMetrics, TracerOptions, TracesError};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("source {source_name} could not be set up")]
    Source {
        source_name: String,
        #[source]
        cause: BuildError,
    },
    #[error("cannot listen on {addr}")]
    Listen {
        addr: SocketAddr,
        #[source]
        cause: std::io::Error,
    },
    #[error("the HTTP server failed")]
    Serve(#[source] std::io::Error),
    #[error("the OTLP trace export is misconfigured")]
    Traces(#[source] TracesError),
    #[error("the state store cannot be used")]
    StateStore(#[source] StateStoreError),
    #[error(transparent)]
    Background(#[from] crate::background::BackgroundError),
}

/// Handles of the families other parts register next to the store's.
pub struct RegistryParts {
    pub traces: TraceMetrics,
    pub kube: crate::sources::kube::metrics::KubeMetrics,
    pub state_store: StateStoreMetrics,
}

/// The exporter's registry before the store adds its own families: every
/// family `/metrics` can show (docs/metrics.md is checked against it).
pub fn exporter_registry() -> (prometheus_client::registry::Registry, RegistryParts) {
    let mut registry = prometheus_client::registry::Registry::default();
    let traces = TraceMetrics::register(&mut registry);
    let kube = crate::sources::kube::metrics::KubeMetrics::register(&mut registry);
    let state_store = StateStoreMetrics::register(&mut registry);
    (
        registry,
        RegistryParts {
            traces,
            kube,
            state_store,
        },
    )
}

/// A running exporter: the store and the tasks that feed it.
/// How long the first load waits for a source that does not list: long
/// enough for a slow relist of a large fleet, short enough that a source down
/// at start holds back late verdicts only briefly (docs/design/03-timeline-model.md §3.3).
pub const FIRST_LOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// How long restored readings may hold the first-sync load open while
/// their source lists again: a list of Maestro's bundles takes some 12
/// minutes at 50,000 clusters (docs/design/03-timeline-model.md §3.10).
pub const RESTORED_LOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30 * 60);

pub struct Exporter {
    pub store: Arc<Store>,
    tracer: Option<Arc<CreationTracer>>,
    tasks: Vec<JoinHandle<()>>,
    /// The threads the tasks run on, below the server's priority. Declared
    /// after `tasks`: dropped once they are aborted.
    _background: crate::background::Background,
    /// With `state_dir`: the file the observed times are kept in, and what
    /// was read from it at start.
    state: Option<(Arc<StateStore>, Restored)>,
    /// Routes served beside the exporter's own (the demo's ground truth).
    extra_routes: Option<axum::Router>,
    /// Where the web UI links to.
    ui: crate::config::UiConfig,
    /// What Maestro's stream knows of each bundle, written beside the
    /// readings at shutdown (docs/design/03-timeline-model.md §3.10).
    stream_known: Option<crate::sources::maestro::KnownBundles>,
}

impl Exporter {
    /// Build the store and start every configured source and the model clock.
    /// `time_scale` divides histogram bounds (1 in `serve`, the speed in `demo`).
    pub fn start(config: &Config, time_scale: f64) -> Result<Exporter, AppError> {
        Exporter::start_with_clock(config, time_scale, crate::clock::Clock::Real)
    }

    /// [`Exporter::start`] on another clock: the model and the sources read
    /// it (tests run exporters and a simulated world on one manual clock).
    pub fn start_with_clock(
        config: &Config,
        time_scale: f64,
        clock: crate::clock::Clock,
    ) -> Result<Exporter, AppError> {
        Exporter::start_inner(config, time_scale, clock, true)
    }

    /// The sources and the model alone, for `diagnose`: no creation traces
    /// (the running exporter sends those; a second copy would duplicate every
    /// span) and nothing written to the state directory (the running
    /// exporter's memory is not ours to touch).
    pub fn start_for_diagnosis(config: &Config) -> Result<Exporter, AppError> {
        let mut config = config.clone();
        config.state_dir = None;
        Exporter::start_inner(&config, 1.0, crate::clock::Clock::Real, false)
    }

    fn start_inner(
        config: &Config,
        time_scale: f64,
        clock: crate::clock::Clock,
        creation_traces: bool,
    ) -> Result<Exporter, AppError> {
        let http_sources = HttpSource::configured(&config.sources);
        let stream_known = http_sources.iter().find_map(|s| s.stream_known().cloned());
        let mut source_names: Vec<String> =
            http_sources.iter().map(|s| s.name().to_string()).collect();
        // /readyz waits for every management cluster's first full list too.
        source_names.extend(config.sources.kube.iter().map(|k| k.source_name()));
        let shard = (config.shard.total > 1).then_some((config.shard.index, config.shard.total));
        let (registry, parts) = exporter_registry();
        let trace_metrics = parts.traces;
        let kube_metrics = parts.kube;
        let state_metrics = parts.state_store;
        let store = Store::with_registry(
            StoreConfig {
                model: model_config(config, shard),
                render: RenderConfig::default(),
                time_scale,
                sources: source_names,
                clock: clock.clone(),
            },
            registry,
        );
        // What the last run observed goes back into the model before any
        // source reads anything (docs/design/03-timeline-model.md §3.8).
        let (state, readings_restored) =
            restore_state(config, &store, state_metrics, stream_known.as_ref())?;
        // The first syncs are judged as one load (docs/design/03-timeline-model.md §3.3).
        // Restored readings hold it open until their source has listed
        // again: a verdict is never settled on what was read before the
        // restart (docs/design/03-timeline-model.md §3.10).
        store.begin_load(match readings_restored {
            true => RESTORED_LOAD_TIMEOUT,
            false => FIRST_LOAD_TIMEOUT,
        });
        // One trace per creation over OTLP, when OTEL_EXPORTER_OTLP_* says where.
        // A management-only instance sees a creation end too, but the root
        // span belongs to the service side's instance (one root per trace).
        let management_only = config.sources.management_only();
        let tracer = if creation_traces {
            CreationTracer::from_env(trace_metrics).map_err(AppError::Traces)?
        } else {
            None
        };
        let tracer = tracer
            .map(|t| {
                t.with_options(TracerOptions {
                    root_spans: !management_only,
                })
            })
            .map(Arc::new);
        if let Some(tracer) = &tracer {
            store.add_listener(tracer.clone());
            tracing::info!("exporting one trace per creation over OTLP");
        }
        let hook: Arc<dyn RequestHook> = Arc::new(TraceparentHook);
        let client = |name: &str,
                      http: &HttpSourceConfig,
                      metrics: crate::metrics::exporter::ExporterMetrics| {
            HttpClient::new(name, http, metrics)
                .map(|c| c.with_request_hook(hook.clone()))
                .map_err(|cause| AppError::Source {
                    source_name: name.to_string(),
                    cause,
                })
        };
        let ctx = |name: &str| store.source_context(name);
        // Every source task runs supervised: restarted with backoff if it
        // panics or returns, and down until it lists again. Sources, the
        // model clock and the state writer run on the background threads, so
        // parsing never delays a request (docs/design/05-metrics.md §5.5).
        let background = crate::background::Background::start()?;
        let mut tasks = Vec::new();
        let restart = Restart::default();
        for source in http_sources {
            let ctx = ctx(source.name());
            let http = client(&ctx.name, source.http(), ctx.metrics.clone())?;
            let hints = store.pool_hints();
            tasks.push(background.spawn(supervise(ctx, restart, move |ctx| {
                source.clone().run(ctx, http.clone(), hints.clone())
            })));
        }
        for cfg in &config.sources.kube {
            let ctx = ctx(&cfg.source_name());
            let cfg = cfg.clone();
            let kube_metrics = kube_metrics.clone();
            tasks.push(background.spawn(supervise(ctx, restart, move |ctx| {
                run_kube_source(cfg.clone(), ctx, kube_metrics.clone())
            })));
        }
        // The model clock: creations in flight become late the moment they
        // pass the target, even when no source reports anything.
        let tick_every = tick_interval(config.slo.creation_target);
        let ticking = store.clone();
        tasks.push(background.spawn(async move {
            let mut interval = tokio::time::interval(tick_every);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                ticking.tick_at(ticking.clock().now());
            }
        }));
        // The memory is written when it changed, off the async threads; a
        // failed write keeps it dirty and is retried at the next period.
        if let Some((state, _)) = &state {
            let (saving, state) = (store.clone(), state.clone());
            tasks.push(background.spawn(async move {
                let mut interval = tokio::time::interval(crate::state_store::SAVE_INTERVAL);
                interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                interval.tick().await;
                let mut readings_due = tokio::time::Instant::now() + READINGS_INTERVAL;
                loop {
                    interval.tick().await;
                    save_state(&saving, &state).await;
                    if tokio::time::Instant::now() >= readings_due {
                        save_readings(&saving, &state).await;
                        readings_due = tokio::time::Instant::now() + READINGS_INTERVAL;
                    }
                }
            }));
        }
        Ok(Exporter {
            store,
            tracer,
            tasks,
            _background: background,
            state,
            extra_routes: None,
            ui: config.ui.clone(),
            stream_known,
        })
    }

    /// Serve `routes` on the exporter's port too. The demo adds its ground
    /// truth this way, so the exporter's wiring knows nothing of the world.
    pub fn with_routes(mut self, routes: axum::Router) -> Exporter {
        self.extra_routes = Some(match self.extra_routes.take() {
            Some(existing) => existing.merge(routes),
            None => routes,
        });
        self
    }

    /// Serve HTTP on `listener` until `shutdown` resolves; then stop the
    /// sources, let in-flight requests finish and queued creation spans go
    /// out, all within `grace` of the signal (docs/design/09-reading-the-upstreams.md §9.7).
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
        grace: Duration,
    ) -> Result<(), AppError> {
        let (signalled_tx, signalled_rx) = tokio::sync::oneshot::channel();
        let sources = self
            .tasks
            .iter()
            .map(|t| t.abort_handle())
            .collect::<Vec<_>>();
        let on_signal = async move {
            shutdown.await;
            // Nothing new is read once stopping: the sources go first.
            for task in &sources {
                task.abort();
            }
            let _ = signalled_tx.send(tokio::time::Instant::now());
        };
        let mut routes = crate::server::router(self.store.clone(), self.ui.clone());
        if let Some(extra) = &self.extra_routes {
            routes = routes.merge(extra.clone());
        }
        let server = crate::server::serve_router(listener, routes, on_signal);
        tokio::pin!(server);
        let mut deadline = None;
        let result = tokio::select! {
            result = &mut server => result,
            _ = async {
                match signalled_rx.await {
                    Ok(at) => {
                        deadline = Some(at + grace);
                        tokio::time::sleep_until(at + grace).await;
                    }
                    Err(_) => std::future::pending::<()>().await,
                }
            } => {
                tracing::warn!(grace = ?grace, "requests still in flight at the end of the grace period; stopping anyway");
                Ok(())
            }
        };
        self.stop();
        // The sources and the model clock have stopped: the memory is final.
        // Written once more, within the grace period.
        if let Some((state, _)) = &self.state {
            let left = deadline
                .map(|d| d.saturating_duration_since(tokio::time::Instant::now()))
                .unwrap_or(grace);
            let both = async {
                save_state(&self.store, state).await;
                save_readings(&self.store, state).await;
                if let Some(known) = &self.stream_known {
                    save_bundle_ids(known, state, self.store.clock().now()).await;
                }
            };
            if tokio::time::timeout(left, both).await.is_err() {
                tracing::warn!(
                    "the state file was still being written at the end of the grace period; the previous one is kept"
                );
            }
        }
        // Spans still queued go out before the process exits, within what
        // is left of the grace period.
        if let Some(tracer) = self.tracer.clone() {
            let left = deadline
                .map(|d| d.saturating_duration_since(tokio::time::Instant::now()))
                .unwrap_or(grace);
            let flush = tokio::task::spawn_blocking(move || tracer.shutdown());
            if tokio::time::timeout(left, flush).await.is_err() {
                tracing::warn!(
                    "creation spans still queued at the end of the grace period were dropped"
                );
            }
        }
        result.map_err(AppError::Serve)
    }

    /// What was restored at start: `None` without a state directory.
    pub fn restored(&self) -> Option<&Restored> {
        self.state.as_ref().map(|(_, restored)| restored)
    }

    pub fn stop(&self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Write the memory if it changed since the last write. The file is written
/// on a blocking thread; the store's lock is held only to take the snapshot.
async fn save_state(store: &Arc<Store>, state: &Arc<StateStore>) {
    if !store.memory_dirty() {
        return;
    }
    let snapshot = store.memory_snapshot();
    let generation = snapshot.generation;
    let now = store.clock().now();
    let writer = state.clone();
    // The write logs and counts its own failures (once per failing spell).
    match tokio::task::spawn_blocking(move || writer.save(&snapshot, now)).await {
        Ok(Ok(_)) => store.memory_saved(generation),
        Ok(Err(_)) => {}
        Err(error) => tracing::error!(%error, "the state file writer stopped unexpectedly"),
    }
}

/// Read `source`'s readings file into the store, if there is a usable
/// one, and keep its readings from now on. Returns whether anything was
/// restored.
fn restore_readings(store: &Arc<Store>, state: &StateStore, source: &str) -> bool {
    store.keep_readings(source, ReadingsOf::Maestro);
    let mut deliver = |chunk, written_at| store.restore_readings(source, chunk, written_at);
    let Some(restored) = state.load_readings(source, &mut deliver) else {
        return false;
    };
    tracing::info!(
        source,
        objects = restored.objects,
        written_at = %restored.written_at,
        "serving the last readings of the source until it has listed again"
    );
    restored.objects > 0
}

/// Seed what Maestro's stream knows from the last run's bundle ids.
fn restore_bundle_ids(
    known: &crate::sources::maestro::KnownBundles,
    state: &StateStore,
    source: &str,
) {
    // One at a time, never the file's bundles all at once (150,000 at
    // 50,000 clusters). A damaged file's bundles read before the damage are
    // still right: their ids and names never change.
    let mut added = 0;
    let Some(restored) = state.load_bundle_ids(source, &mut |b| {
        added += known.restore(std::iter::once(b));
    }) else {
        return;
    };
    tracing::info!(
        source,
        bundles = added,
        written_at = %restored.written_at,
        "the stream knows the restored bundles by id again"
    );
}

/// Write what Maestro's stream knows of each bundle, on a blocking thread,
/// once its source has stopped (the map is locked while it is written).
async fn save_bundle_ids(
    known: &crate::sources::maestro::KnownBundles,
    state: &Arc<StateStore>,
    now: jiff::Timestamp,
) {
    if known.is_empty() {
        return;
    }
    let (known, writer) = (known.clone(), state.clone());
    let written = tokio::task::spawn_blocking(move || {
        known.with_saved(|bundles| writer.save_bundle_ids(SOURCE_MAESTRO, bundles, now))
    })
    .await;
    if let Err(error) = written {
        tracing::error!(%error, "the bundle-ids writer stopped unexpectedly");
    }
}

/// Write the kept source's readings if it delivered anything since the
/// last write, on a blocking thread; a failed write keeps them dirty.
async fn save_readings(store: &Arc<Store>, state: &Arc<StateStore>) {
    if !store.readings_dirty() {
        return;
    }
    let Some((source, of, timelines)) = store.readings_snapshot() else {
        return;
    };
    let now = store.clock().now();
    let writer = state.clone();
    let written =
        tokio::task::spawn_blocking(move || writer.save_readings(&source, of, &timelines, now))
            .await;
    match written {
        Ok(Ok(_)) => {}
        Ok(Err(_)) => store.readings_unsaved(),
        Err(error) => {
            store.readings_unsaved();
            tracing::error!(%error, "the readings writer stopped unexpectedly");
        }
    }
}

/// One management cluster's watches. Building the client can fail where the
/// config check could not tell (no service account outside a pod, an exec
/// credential plugin failing): the source then stays down, says why, and
/// tries again with backoff, while the other clusters carry on.
async fn run_kube_source(cfg: KubeSourceConfig, ctx: SourceContext, metrics: KubeMetrics) {
    let source = cfg.source_name();
    let mut backoff = cfg.min_backoff.max(Duration::from_secs(1));
    let max = cfg.max_backoff.max(backoff);
    loop {
        match KubeSource::new(cfg.clone(), ctx.clone(), metrics.clone()).await {
            Ok(watches) => return watches.run().await,
            Err(error) => {
                tracing::error!(
                    source = %source,
                    error = %crate::sources::health::cause_chain(&error),
                    retry_in = ?backoff,
                    "cannot build the Kubernetes client of this management cluster"
                );
                ctx.metrics.request_failed(
                    &source,
                    crate::metrics::exporter::RequestErrorKind::credentials,
                );
                ctx.health.failed(
                    &source,
                    crate::sources::health::WHOLE_SOURCE,
                    &crate::sources::health::cause_chain(&error),
                );
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(max);
            }
        }
    }
}

/// The configuration, one log event per setting: readable lines in text,
/// `setting`/`value` fields in JSON (never one multi-line field); then what
/// the state store restored.
pub fn log_startup_summary(config: &Config, exporter: &Exporter) {
    for (setting, value) in summary_entries(&config.summary()) {
        tracing::info!(setting = %setting, value = %value, "configuration");
    }
    let restored = match exporter.restored() {
        Some(restored) => restored.to_string(),
        None => "nothing (no state_dir)".to_string(),
    };
    tracing::info!(setting = "restored", value = %restored, "configuration");
}

/// `key: value` lines, with indented continuation lines folded into the
/// line they continue.
fn summary_entries(summary: &str) -> Vec<(String, String)> {
    let mut entries: Vec<(String, String)> = Vec::new();
    for line in summary.lines() {
        match entries.last_mut() {
            Some((_, value)) if line.starts_with(char::is_whitespace) => {
                value.push_str("; ");
                value.push_str(line.trim());
            }
            _ => {
                let (setting, value) = line.split_once(": ").unwrap_or(("setting", line));
                entries.push((setting.trim().to_string(), value.trim().to_string()));
            }
        }
    }
    entries
}

/// Late verdicts are at most 1% of the target (and at most a second) late.
/// What the last run kept in the state directory, back into the store before
/// any source reads (docs/design/03-timeline-model.md §3.8, §3.10): the
/// model's memory, Maestro's last readings and what its stream knew. Returns
/// the state store with what it restored, and whether Maestro's readings
/// came back.
#[allow(clippy::type_complexity)]
fn restore_state(
    config: &Config,
    store: &Arc<Store>,
    state_metrics: StateStoreMetrics,
    stream_known: Option<&crate::sources::maestro::KnownBundles>,
) -> Result<(Option<(Arc<StateStore>, Restored)>, bool), AppError> {
    let mut readings_restored = false;
    let state = match &config.state_dir {
        Some(dir) => {
            let state = StateStore::open(dir, state_metrics).map_err(AppError::StateStore)?;
            let (memory, restored) = state.load();
            store.restore(memory);
            // Maestro's last readings are served at once, before its
            // first list of minutes (docs/design/03-timeline-model.md §3.10).
            if config.sources.maestro.is_some() {
                readings_restored = restore_readings(store, &state, SOURCE_MAESTRO);
            }
            // What the stream knew of the restored bundles: their
            // events apply at once, unread (docs/design/03-timeline-model.md §3.10).
            if let Some(known) = stream_known.filter(|_| readings_restored) {
                restore_bundle_ids(known, &state, SOURCE_MAESTRO);
            }
            Some((Arc::new(state), restored))
        }
        None => None,
    };
    Ok((state, readings_restored))
}

/// The model's configuration from the exporter's: targets and budgets per
/// operation, who owns what, the RP in scope, the hubs, the history.
fn model_config(config: &Config, shard: Option<(u32, u32)>) -> ModelConfig {
    ModelConfig {
        targets: OperationTargets::from_fn(|kind| config.slo.target(kind)),
        terminal_hops: config.terminal_hops(),
        shard,
        hop_budgets: config.slo.hop_budgets,
        delete_budgets: config.slo.operations.delete.delete_budgets(),
        upgrade_budgets: config.slo.operations.upgrade.upgrade_budgets(),
        ownership: config.ownership(),
        rp_in_scope: config.sources.rp_frontend.is_some(),
        self_managed_hubs: config
            .sources
            .kube
            .iter()
            .filter(|k| k.mode == crate::config::KubeMode::SelfManaged)
            .map(|k| k.mgmt_cluster.clone())
            .collect(),
        history: config.history.limits(),
    }
}

fn tick_interval(target: Duration) -> Duration {
    (target / 100).clamp(Duration::from_millis(50), Duration::from_secs(1))
}

pub async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, AppError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|cause| AppError::Listen { addr, cause })
}
