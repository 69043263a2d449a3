//! The fleet store: the model behind a lock, each cluster's rendered lines,
//! the registry, and which sources have synced.
//!
//! Sources write through [`ObservationSink`]; a scrape takes the lock only to
//! clone `Arc`s of the rendered clusters and builds the body outside it, so a
//! scrape never waits on an upstream and never holds the lock for long.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use jiff::Timestamp;
use parking_lot::Mutex;
use prometheus_client::registry::Registry;

use crate::clock::Clock;
use crate::metrics::exporter::ExporterMetrics;
use crate::metrics::exposition::{self, Format};
use crate::metrics::fleet::{RenderConfig, RenderedCluster, render_cluster};
use crate::metrics::operations::OperationMetrics;
use crate::model::{
    ApplyResult, Batch, Change, ClusterKey, Event, Fleet, Hop, ModelConfig, Observation, Timeline,
    Via,
};
use crate::sources::ObservationSink;
use crate::sources::health::SourceHealth;
use crate::state_store::{MemorySnapshot, ReadingsOf, Remembered};

/// Defined beside the events it hears; re-exported so
/// `store::EventListener` keeps working.
pub use crate::model::EventListener;

/// The scopes `hcpflow_tracked_clusters{scope}` counts, in label order.
const SCOPES: [&str; 3] = ["service", "management", "self_managed"];

/// Which scope a hop view belongs to (an index into [`SCOPES`]): direct
/// views are `management`, or `self_managed` when they come from a
/// self-managed MCE hub (docs/design/08-scopes-and-scale-out.md §8.1). Before there was a third
/// entry, self-managed hubs' clusters were counted as `management` and the
/// `self_managed` series never appeared.
fn scope_of(hop: Hop, via: Via, self_managed_hub: bool) -> usize {
    match (hop, via) {
        (Hop::RpFrontend | Hop::ClustersService | Hop::MaestroBundle, _) => 0,
        (_, Via::Maestro) => 0,
        (_, Via::Direct) if self_managed_hub => 2,
        (_, Via::Direct) => 1,
    }
}

/// The scopes one timeline is seen in, as a bit per [`SCOPES`] entry.
fn scopes_of(timeline: &Timeline, health: &SourceHealth) -> u8 {
    let mgmt_cluster = &timeline.identity.mgmt_cluster;
    let hub = !mgmt_cluster.is_empty() && health.is_self_managed_hub(mgmt_cluster);
    timeline
        .hops
        .iter()
        .fold(0, |mask, (hop, h)| mask | (1 << scope_of(*hop, h.via, hub)))
}

#[derive(Clone, Debug)]
pub struct StoreConfig {
    pub model: ModelConfig,
    pub render: RenderConfig,
    /// Divides histogram bucket bounds (1 in `serve`, the speed in `demo`).
    pub time_scale: f64,
    /// Source names that must sync once before `/readyz` is ready.
    pub sources: Vec<String>,
    /// The model's clock for batches delivered through [`ObservationSink`].
    pub clock: Clock,
}

struct State {
    fleet: Fleet,
    rendered: BTreeMap<String, Arc<RenderedCluster>>,
    /// Each cluster's scopes and the count per scope, kept as clusters
    /// change, so a tick never walks the fleet.
    scopes: HashMap<String, u8>,
    per_scope: [i64; SCOPES.len()],
    /// What a restart would lose of each live cluster, for the state store
    /// (docs/design/03-timeline-model.md §3.8).
    remembered: Remembered,
    /// While the first syncs come in: when the load ends at the latest.
    load_deadline: Option<Timestamp>,
    /// The source whose last readings the state directory keeps, and
    /// whether it delivered anything since they were last written
    /// (docs/design/03-timeline-model.md §3.10).
    readings: Option<KeptReadings>,
    /// Objects restored from the readings file that their source has not
    /// delivered again since.
    unconfirmed: Option<Unconfirmed>,
}

struct KeptReadings {
    source: String,
    of: ReadingsOf,
    changed: bool,
}

/// Restored objects awaiting their source's word, by cluster id. When the
/// source has listed every kind once, those it did not deliver are gone.
struct Unconfirmed {
    source: String,
    /// When the restored readings were written.
    written_at: Timestamp,
    objects: HashMap<String, Vec<(Hop, Via, Box<str>)>>,
}

impl Unconfirmed {
    fn confirm(&mut self, batch: &Batch) {
        for o in &batch.observations {
            let ClusterKey::Id(cluster) = &o.key else {
                continue;
            };
            if let Some(objects) = self.objects.get_mut(cluster) {
                objects.retain(|(hop, via, object)| {
                    !(*hop == o.hop && *via == o.via && **object == *o.object)
                });
                if objects.is_empty() {
                    self.objects.remove(cluster);
                }
            }
        }
    }
}

impl State {
    fn count_scopes(&mut self, cluster_id: &str, now: u8) {
        let before = match now {
            0 => self.scopes.remove(cluster_id).unwrap_or(0),
            _ => self.scopes.insert(cluster_id.to_string(), now).unwrap_or(0),
        };
        for (i, count) in self.per_scope.iter_mut().enumerate() {
            let bit = 1u8 << i;
            *count += i64::from(now & bit != 0) - i64::from(before & bit != 0);
        }
    }
}

pub use crate::sources::health::SourceStatus;

pub struct Store {
    state: Mutex<State>,
    listeners: parking_lot::RwLock<Vec<Arc<dyn EventListener>>>,
    registry: Registry,
    creation: OperationMetrics,
    exporter: ExporterMetrics,
    render: RenderConfig,
    health: SourceHealth,
    clock: Clock,
    rp_in_scope: bool,
    /// `(index, total)` when sharded: the clusters this instance follows.
    shard: Option<(u32, u32)>,
    /// Clusters whose node pools moved, for the RP's and Clusters Service's
    /// pool reads (docs/design/15b-operations.md §15.11).
    pool_hints: crate::sources::node_pools::PoolHints,
}

impl Store {
    pub fn new(config: StoreConfig) -> Arc<Store> {
        Store::with_registry(config, Registry::default())
    }

    /// A store whose registry already holds other parts' families (traces,
    /// kube), so one `/metrics` shows them all.
    pub fn with_registry(config: StoreConfig, mut registry: Registry) -> Arc<Store> {
        let exporter = ExporterMetrics::register(&mut registry);
        let creation = OperationMetrics::register(&mut registry, &config.model, config.time_scale);
        let health = SourceHealth::new(exporter.clone(), config.clock.clone());
        let rp_in_scope = config.model.rp_in_scope;
        let shard = config.model.shard;
        for source in &config.sources {
            health.expect(source);
        }
        Arc::new(Store {
            state: Mutex::new(State {
                fleet: Fleet::new(config.model),
                rendered: BTreeMap::new(),
                scopes: HashMap::new(),
                per_scope: [0; SCOPES.len()],
                remembered: Remembered::default(),
                load_deadline: None,
                readings: None,
                unconfirmed: None,
            }),
            listeners: parking_lot::RwLock::new(Vec::new()),
            registry,
            creation,
            exporter,
            render: config.render,
            health,
            clock: config.clock,
            rp_in_scope,
            shard,
            pool_hints: Default::default(),
        })
    }

    /// Where the model says which clusters' node pools moved: the RP and
    /// Clusters Service sources read those clusters' pools next.
    pub fn pool_hints(&self) -> crate::sources::node_pools::PoolHints {
        self.pool_hints.clone()
    }

    /// Add a listener for model events (the trace exporter).
    pub fn add_listener(&self, listener: Arc<dyn EventListener>) {
        self.listeners.write().push(listener);
    }

    /// The self-metrics handle sources report into.
    pub fn exporter_metrics(&self) -> ExporterMetrics {
        self.exporter.clone()
    }

    /// Judge the first syncs as one load: until every source has listed
    /// once (or `timeout` has passed, so a source down at start holds
    /// nothing back for long), no deadline is settled, so verdicts do not
    /// depend on which source lists first (docs/design/03-timeline-model.md §3.3).
    pub fn begin_load(&self, timeout: std::time::Duration) {
        let now = self.clock.now();
        let mut state = self.state.lock();
        state.fleet.begin_load(now);
        state.load_deadline = Some(
            jiff::SignedDuration::try_from(timeout)
                .ok()
                .and_then(|d| now.checked_add(d).ok())
                .unwrap_or(Timestamp::MAX),
        );
    }

    /// Whether the first syncs are still being loaded.
    pub fn loading(&self) -> bool {
        self.state.lock().fleet.is_loading()
    }

    /// End the load when every source has listed once or its time is up.
    fn finish_load_if_due(&self, state: &mut State, now: Timestamp) -> Vec<Event> {
        let Some(deadline) = state.load_deadline else {
            return Vec::new();
        };
        let timed_out = now >= deadline;
        if !timed_out && !self.health.synced() {
            return Vec::new();
        }
        state.load_deadline = None;
        if timed_out {
            tracing::warn!(
                pending = ?self.health.status().iter().filter(|s| !s.synced).map(|s| s.source.clone()).collect::<Vec<_>>(),
                "first sync load ended before every source listed once; what they show later is judged as it comes"
            );
        }
        let result = state.fleet.finish_load(now);
        self.after(state, result)
    }

    /// Apply a batch with an explicit clock (tests drive time through this).
    pub fn apply_at(&self, batch: Batch, now: Timestamp) -> Vec<Event> {
        let mut state = self.state.lock();
        if let Some(kept) = state.readings.as_mut()
            && kept.source == batch.source
        {
            kept.changed = true;
        }
        if let Some(unconfirmed) = state.unconfirmed.as_mut()
            && unconfirmed.source == batch.source
        {
            unconfirmed.confirm(&batch);
        }
        let result = state.fleet.apply(batch, now);
        let mut events = self.after(&mut state, result);
        events.extend(self.reconcile_restored(&mut state, now));
        events.extend(self.finish_load_if_due(&mut state, now));
        events
    }

    /// Keep the last readings of `source` (what `of` says it delivers) for
    /// the state directory (docs/design/03-timeline-model.md §3.10).
    pub fn keep_readings(&self, source: &str, of: ReadingsOf) {
        self.state.lock().readings = Some(KeptReadings {
            source: source.to_string(),
            of,
            changed: false,
        });
    }

    /// Serve what the last run read of `source`, before the source runs:
    /// one chunk of the readings file, delivered silently as the source's
    /// own first sync would be. Every object stays unconfirmed until the
    /// source delivers it again; when the source has listed every kind
    /// once, those it did not deliver are gone. `written_at` stands in for
    /// upstream times the objects do not carry.
    pub fn restore_readings(
        &self,
        source: &str,
        observations: Vec<Observation>,
        written_at: Timestamp,
    ) {
        let mut state = self.state.lock();
        let unconfirmed = state.unconfirmed.get_or_insert_with(|| Unconfirmed {
            source: source.to_string(),
            written_at,
            objects: HashMap::new(),
        });
        let observations: Vec<Observation> = observations
            .into_iter()
            .filter(|o| match &o.key {
                ClusterKey::Id(cluster) => crate::model::follows(self.shard, cluster),
                ClusterKey::ArmResourceId(_) => false,
            })
            .collect();
        for o in &observations {
            if let ClusterKey::Id(cluster) = &o.key {
                unconfirmed
                    .objects
                    .entry(cluster.clone())
                    .or_default()
                    .push((o.hop, o.via, o.object.as_str().into()));
            }
        }
        let batch = Batch {
            source: source.to_string(),
            initial: true,
            observed_at: written_at,
            observations,
        };
        let now = self.clock.now();
        let result = state.fleet.apply(batch, now);
        self.after(&mut state, result);
        drop(state);
        self.health.restored(source);
    }

    /// Once the restored source has listed every kind, what it restored and
    /// did not deliver again is gone (deleted while the exporter was down):
    /// removed silently, as a first sync would never have shown it.
    fn reconcile_restored(&self, state: &mut State, now: Timestamp) -> Vec<Event> {
        let due = state
            .unconfirmed
            .as_ref()
            .is_some_and(|u| self.health.synced_source(&u.source));
        let Some(unconfirmed) = state.unconfirmed.take_if(|_| due) else {
            return Vec::new();
        };
        let observations: Vec<Observation> = unconfirmed
            .objects
            .into_iter()
            .flat_map(|(cluster, objects)| {
                objects
                    .into_iter()
                    .map(move |(hop, via, object)| Observation {
                        key: ClusterKey::Id(cluster.clone()),
                        hop,
                        via,
                        object: object.into(),
                        change: Change::Gone,
                    })
            })
            .collect();
        tracing::info!(
            source = %unconfirmed.source,
            gone = observations.len(),
            "restored readings reconciled: objects the source no longer shows are removed"
        );
        if observations.is_empty() {
            return Vec::new();
        }
        let batch = Batch {
            source: unconfirmed.source,
            initial: true,
            observed_at: now,
            observations,
        };
        let result = state.fleet.apply(batch, now);
        self.after(state, result)
    }

    /// The (cluster, hop) pairs holding a restored reading that its source
    /// has not delivered again since the restart: where what is shown may
    /// still be what was read before it (docs/design/03-timeline-model.md §3.10).
    pub fn unconfirmed(&self) -> BTreeSet<(String, Hop)> {
        let state = self.state.lock();
        state
            .unconfirmed
            .iter()
            .flat_map(|u| {
                u.objects.iter().flat_map(|(cluster, objects)| {
                    objects
                        .iter()
                        .map(move |(hop, _, _)| (cluster.clone(), *hop))
                })
            })
            .collect()
    }

    /// Whether the kept source delivered anything since its readings were
    /// last written.
    pub fn readings_dirty(&self) -> bool {
        self.state
            .lock()
            .readings
            .as_ref()
            .is_some_and(|r| r.changed)
    }

    /// The kept source's readings to write: its name, what it delivers, and
    /// every timeline as a reference count (the lock is held only to clone
    /// them). Marks the readings clean; [`Store::readings_unsaved`] if the
    /// write fails.
    pub fn readings_snapshot(&self) -> Option<(String, ReadingsOf, Vec<Arc<Timeline>>)> {
        let mut state = self.state.lock();
        let kept = state.readings.as_mut()?;
        kept.changed = false;
        let (source, of) = (kept.source.clone(), kept.of);
        let timelines = state.fleet.iter().cloned().collect();
        Some((source, of, timelines))
    }

    /// A write of the readings failed: they stay dirty.
    pub fn readings_unsaved(&self) {
        if let Some(kept) = self.state.lock().readings.as_mut() {
            kept.changed = true;
        }
    }

    /// Advance the model clock (late SLO verdicts) and refresh fleet gauges.
    pub fn tick_at(&self, now: Timestamp) -> Vec<Event> {
        let mut state = self.state.lock();
        let mut events = self.reconcile_restored(&mut state, now);
        events.extend(self.finish_load_if_due(&mut state, now));
        let result = state.fleet.tick(now);
        events.extend(self.after(&mut state, result));
        let per_scope = state.per_scope;
        drop(state);
        for (scope, count) in SCOPES.iter().zip(per_scope) {
            self.creation
                .tracked_clusters
                .get_or_create(&crate::metrics::operations::ScopeLabels {
                    scope: scope.to_string(),
                })
                .set(count);
        }
        events
    }

    /// Re-render what changed and feed the events to the histograms.
    fn after(&self, state: &mut State, result: ApplyResult) -> Vec<Event> {
        for id in &result.removed {
            state.rendered.remove(id);
            state.count_scopes(id, 0);
            state.remembered.forget(id);
        }
        for id in &result.changed {
            if let Some(timeline) = state.fleet.get(id) {
                let rendered = Arc::new(render_cluster(timeline, &self.render));
                let scopes = scopes_of(timeline, &self.health);
                state.rendered.insert(id.clone(), rendered);
                state.count_scopes(id, scopes);
            }
            // Without a state store nothing reads it: no cost per change.
            if state.remembered.enabled() {
                let memory = state.fleet.memory_of(id);
                state.remembered.update(id, memory);
            }
        }
        for (id, hint) in &result.pool_hints {
            let rid = state
                .fleet
                .get(id)
                .map(|t| t.identity.resource_id.as_str())
                .filter(|_| hint.rp);
            self.pool_hints
                .hint(hint.clusters_service.then_some(id.as_str()), rid);
        }
        if state.remembered.unconfirmed() && self.health.synced() {
            let State {
                fleet, remembered, ..
            } = &mut *state;
            let forgotten = remembered.forget_unseen(|id| fleet.get(id).is_some());
            if forgotten > 0 {
                tracing::info!(
                    forgotten,
                    "restored clusters not shown by any source after every first sync are forgotten (deleted while the exporter was down, or another shard's)"
                );
            }
        }
        if !result.events.is_empty() {
            for listener in self.listeners.read().iter() {
                listener.on_events(&result.events, &state.fleet);
            }
        }
        for event in &result.events {
            self.creation.record(event, |id| {
                state
                    .fleet
                    .get(id)
                    .map(|t| t.identity.platform.to_string())
                    .unwrap_or_default()
            });
        }
        result.events
    }

    /// Hand the model what a previous run remembered (an empty memory on a
    /// first start) and keep each live cluster's memory from now on, for the
    /// state store to save (docs/design/03-timeline-model.md §3.8). Call before any source
    /// runs.
    pub fn restore(&self, memory: crate::model::Memory) {
        let mut state = self.state.lock();
        state.remembered.restore(&memory);
        state.fleet.restore(memory);
    }

    /// Whether the remembered part of the fleet changed since it was last
    /// saved.
    pub fn memory_dirty(&self) -> bool {
        self.state.lock().remembered.dirty()
    }

    /// The remembered part of every live cluster, to save. The lock is held
    /// only to clone `Arc`s.
    pub fn memory_snapshot(&self) -> MemorySnapshot {
        self.state.lock().remembered.snapshot()
    }

    /// The snapshot of `generation` was saved.
    pub fn memory_saved(&self, generation: u64) {
        self.state.lock().remembered.saved(generation);
    }

    /// The `/metrics` body. The lock is held only to clone `Arc`s.
    pub fn scrape(&self, format: Format) -> String {
        exposition::render(format, &self.rendered_clusters(), &self.registry)
    }

    /// [`Store::scrape`] written piece by piece into `out`, for a body
    /// streamed as it is assembled.
    pub fn scrape_to(
        &self,
        format: Format,
        out: &mut impl exposition::Sink,
    ) -> std::io::Result<()> {
        exposition::render_to(format, &self.rendered_clusters(), &self.registry, out)
    }

    /// Every cluster's rendered lines, taken under the lock (reference
    /// counts, not text): the body is then assembled without it.
    fn rendered_clusters(&self) -> Vec<Arc<RenderedCluster>> {
        let state = self.state.lock();
        state.rendered.values().cloned().collect()
    }

    /// Every enabled kind of every configured source listed once.
    pub fn ready(&self) -> bool {
        self.health.ready()
    }

    pub fn source_status(&self) -> Vec<SourceStatus> {
        self.health.status()
    }

    /// Where sources report their lists and failures.
    pub fn health(&self) -> SourceHealth {
        self.health.clone()
    }

    /// Run `f` over the timelines under the lock (for the UI's rows, a
    /// small copy of each).
    pub fn with_timelines<R>(&self, f: impl FnOnce(&mut dyn Iterator<Item = &Timeline>) -> R) -> R {
        let state = self.state.lock();
        let mut iter = state.fleet.iter().map(|t| &**t);
        f(&mut iter)
    }

    /// Every timeline, taken under the lock as reference counts: the JSON
    /// API serialises them without it, so a scrape or a source never waits
    /// on a serialisation of the whole fleet (docs/design/05-metrics.md §5.5). What
    /// changes afterwards does not change what was taken.
    pub fn timelines(&self) -> Vec<Arc<Timeline>> {
        let state = self.state.lock();
        state.fleet.iter().cloned().collect()
    }

    /// Run `f` over a timeline found by cluster id or ARM resource id.
    pub fn resolve<R>(&self, key: &str, f: impl FnOnce(&Timeline) -> R) -> Option<R> {
        let state = self.state.lock();
        state.fleet.resolve(key).map(f)
    }

    /// A timeline found by cluster id or ARM resource id, taken as a
    /// reference count, to be read without the lock.
    pub fn resolve_shared(&self, key: &str) -> Option<Arc<Timeline>> {
        let state = self.state.lock();
        state.fleet.resolve_shared(key).cloned()
    }

    /// Whether the RP frontend is read (a CS cluster without RP resource is flagged).
    pub fn rp_in_scope(&self) -> bool {
        self.rp_in_scope
    }

    pub fn with_timeline<R>(&self, cluster_id: &str, f: impl FnOnce(&Timeline) -> R) -> Option<R> {
        let state = self.state.lock();
        state.fleet.get(cluster_id).map(f)
    }

    pub fn len(&self) -> usize {
        self.state.lock().fleet.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What a source named `name` reports into: this store, its self-metrics
    /// and source health, stamped by the model's clock.
    pub fn source_context(self: &Arc<Self>, name: &str) -> crate::sources::SourceContext {
        crate::sources::SourceContext {
            name: name.to_string(),
            sink: self.clone(),
            metrics: self.exporter_metrics(),
            clock: self.clock.clone(),
            health: self.health(),
        }
    }

    /// The model's clock (sources stamp their reads with the same one).
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The hop budgets the model judges with (docs/design/03-timeline-model.md §3.5), for the
    /// UI to draw each edge against.
    pub fn hop_budgets(&self) -> crate::model::HopBudgets {
        self.state.lock().fleet.config().hop_budgets
    }

    /// Every operation kind's hop budgets (docs/design/15-operations.md §15.4).
    pub fn operation_budgets(&self) -> crate::model::OperationBudgets {
        self.state.lock().fleet.config().budgets()
    }

    /// What the JSON, the UI and `diagnose` need to judge a timeline now:
    /// budgets, the fleet's p95 per hop, the time (docs/design/03-timeline-model.md §3.9).
    pub fn judge(&self) -> crate::api::Judge {
        crate::api::Judge {
            rp_in_scope: self.rp_in_scope,
            budgets: self.operation_budgets(),
            p95: self.creation.hop_p95(),
            now: self.clock.now(),
        }
    }

    pub fn creation_target_seconds(&self) -> f64 {
        self.state
            .lock()
            .fleet
            .config()
            .target(crate::model::OperationKind::Create)
            .as_secs_f64()
    }
}

impl ObservationSink for Store {
    fn apply(&self, batch: Batch) {
        self.apply_at(batch, self.clock.now());
    }

    fn follows(&self, cluster_id: &str) -> bool {
        crate::model::follows(self.shard, cluster_id)
    }

    fn restored(&self, source: &str, hop: Hop) -> Option<crate::sources::RestoredObjects> {
        let state = self.state.lock();
        let unconfirmed = state.unconfirmed.as_ref().filter(|u| u.source == source)?;
        let objects = unconfirmed
            .objects
            .values()
            .flatten()
            .filter(|(h, via, _)| *h == hop && *via == Via::Direct)
            .map(|(_, _, object)| object.to_string())
            .collect();
        Some(crate::sources::RestoredObjects {
            objects,
            written_at: unconfirmed.written_at,
        })
    }
}
