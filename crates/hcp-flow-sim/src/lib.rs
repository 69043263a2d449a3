//! The simulated world: loopback servers that speak the ARO HCP RP frontend,
//! Clusters Service and Maestro HTTP APIs with the reference wire shapes, over
//! a seeded fleet going through creations (and, with churn, deletions) with
//! realistic per-hop delays and injected faults (docs/design/11-simulated-world.md §11).
//!
//! Everything served is a pure function of the seeded per-cluster plans and
//! the [`SimClock`], so the world is deterministic for (seed, clusters, start
//! time) and [`World::truth`] tells exactly what a correct exporter reports.
//!
//! Hops visible on the service side: `rp_frontend`, `clusters_service`,
//! `maestro_bundle`, and through the bundles' status feedback `manifestwork`,
//! `hosted_cluster` and `node_pool` (nested `jsonRaw`, rendered in `wire.rs`).
//! As in ARO HCP, a cluster has several bundles: the HostedCluster's, and one
//! per NodePool, each carrying a ManifestWork of its own (docs/design/11-simulated-world.md §11.1).
//!
//! Timeline of one creation (world seconds, all divided by `speed`):
//! RP Accepted at creation; CS cluster 2–8 s later (validating, pending after
//! 8–25 s, installing after 30–60 s); the HostedCluster's bundle 10–22 s after
//! the CS cluster, each pool's 0.5–4 s after it; each bundle's first status
//! 2–8 s after its creation (bundle and ManifestWork Applied, the HostedCluster
//! or NodePool exists), bundle/ManifestWork Available within a minute; the
//! HostedCluster Available 6–12 min after the first status, version history
//! Completed 1–4 min later; NodePools ready 1.5–5 min after that; CS ready
//! 10–60 s after the HostedCluster is Available and the RP Succeeded 5–30 s
//! after CS. With churn each cluster is deleted 40–50 world-minutes after its
//! creation (clusters with a fault linger 3-4 world-hours, as failed clusters do
//! until someone deletes them) (RP Deleting, CS uninstalling, bundle `deleted_at`, then gone) and
//! each cluster is replaced by a new creation the moment it is gone, so the
//! population stays at `clusters`.
//!
//! After a healthy creation, some clusters add a node pool, remove one,
//! upgrade the control plane and then their pools (`day2.rs`, docs/design/11-simulated-world.md
//! §11.10; [`Day2Config`]).
//!
//! With [`WorldKind::SelfManaged`] (or [`WorldKind::Both`]) the world also
//! has a self-managed MCE hub: one more simulated Kubernetes API server with
//! KubeVirt, Agent and None HostedClusters and no RP, Clusters Service or
//! Maestro (`hub.rs`, docs/design/11-simulated-world.md §11.7).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use hcp_flow_model::{Hop, Phase};

mod day2;
mod faults;
pub mod ground;
pub mod hub;
pub mod kube;
pub mod mgmt;
mod plan;
mod pools;
mod search;
mod server;
mod state;
mod tcp;
mod truth;
mod wire;

pub use faults::{Fault, FaultKind};
pub use hcp_flow_clock::ManualClock;
pub use pools::PoolChanges;
pub use server::maestro_grpc::{SOURCE_ID as MAESTRO_SOURCE_ID, StreamControl};

/// The world's clock (the crate's [`Clock`](hcp_flow_clock::Clock)).
pub type SimClock = hcp_flow_clock::Clock;

pub use plan::Ms;
use plan::{FleetParams, Plan};

/// How the world is populated and how it behaves.
#[derive(Clone, Debug)]
pub struct WorldConfig {
    /// Population at start: all exist at t0, created at staggered times over
    /// the past ~40 world-minutes.
    pub clusters: usize,
    /// Divides every world delay (1.0 = real time). Must be > 0.
    pub speed: f64,
    pub seed: u64,
    /// Inject the per-cluster fault mix and rare spontaneous 5xx bursts.
    pub faults: bool,
    /// New creations arrive and old clusters are deleted over time.
    pub churn: bool,
    /// Upstream latency; real sleeping, not divided by `speed`.
    pub latency: LatencyModel,
    /// How many Azure subscriptions the fleet spreads over.
    pub subscriptions: usize,
    /// Share (0.0–1.0) of creations the RP accepts but never hands over to
    /// Clusters Service ([`FaultKind::NotHandedOver`]), drawn per cluster from
    /// its own stream whether or not `faults` is on. 0 by default: an
    /// exporter that waits for the Clusters Service join cannot show them.
    pub not_handed_over: f64,
    /// A burst of failures: every creation created from `.0` after the
    /// world's start for `.1` (real time) fails with a Clusters Service
    /// error, whatever `faults` says. For the burn-rate alerts' tests.
    pub failure_burst: Option<(std::time::Duration, std::time::Duration)>,
    /// Which world: ARO HCP, a self-managed MCE hub, or both side by side
    /// (each with `clusters` clusters).
    pub kind: WorldKind,
}

/// The worlds `hcp-flow demo --world` can run (docs/design/11-simulated-world.md §11.7).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum WorldKind {
    /// ARO HCP: the RP frontend, Clusters Service, Maestro and two
    /// management clusters.
    #[default]
    Aro,
    /// A self-managed MCE hub: one Kubernetes API server holding the
    /// MultiClusterEngine, KubeVirt, Agent and None HostedClusters, their
    /// control planes, ManagedClusters, NodePools and Agents.
    #[value(name = "self-managed", alias = "self_managed")]
    SelfManaged,
    /// Both, side by side, read by one exporter.
    Both,
}

impl WorldKind {
    /// The world has the ARO HCP services and management clusters.
    pub fn aro(self) -> bool {
        matches!(self, WorldKind::Aro | WorldKind::Both)
    }

    /// The world has the self-managed MCE hub.
    pub fn hub(self) -> bool {
        matches!(self, WorldKind::SelfManaged | WorldKind::Both)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WorldKind::Aro => "aro",
            WorldKind::SelfManaged => "self-managed",
            WorldKind::Both => "both",
        }
    }
}

impl Default for WorldConfig {
    fn default() -> Self {
        WorldConfig {
            clusters: 100,
            speed: 1.0,
            seed: 1,
            faults: true,
            churn: true,
            latency: LatencyModel::realistic(),
            subscriptions: 3,
            not_handed_over: 0.0,
            failure_burst: None,
            kind: WorldKind::Aro,
        }
    }
}

/// Per-request upstream latency: `base + per_item × items in the response`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatencyModel {
    pub base: Duration,
    pub per_item: Duration,
}

impl LatencyModel {
    /// Maestro's own performance test lists 6,000 bundles in about 28 s
    /// (≈ 4.7 ms per item); the same cost is charged by the Clusters Service
    /// and the RP, which list from databases of the same kind.
    pub fn realistic() -> LatencyModel {
        LatencyModel {
            base: Duration::from_millis(15),
            per_item: Duration::from_micros(4_700),
        }
    }

    /// No latency (unit tests).
    pub fn none() -> LatencyModel {
        LatencyModel {
            base: Duration::ZERO,
            per_item: Duration::ZERO,
        }
    }

    pub fn delay(&self, items: usize) -> Duration {
        self.base
            + self
                .per_item
                .saturating_mul(u32::try_from(items).unwrap_or(u32::MAX))
    }
}

/// One of the simulated APIs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Api {
    RpFrontend,
    ClustersService,
    Maestro,
}

impl Api {
    pub const ALL: [Api; 3] = [Api::RpFrontend, Api::ClustersService, Api::Maestro];

    fn index(self) -> usize {
        self as usize
    }

    /// The exporter's name for the source reading this API.
    pub fn source_name(self) -> &'static str {
        match self {
            Api::RpFrontend => "rp_frontend",
            Api::ClustersService => "clusters_service",
            Api::Maestro => "maestro",
        }
    }
}

/// Where [`World::serve`] listens (each `http://127.0.0.1:<port>/`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoints {
    pub rp_frontend: url::Url,
    pub clusters_service: url::Url,
    pub maestro: url::Url,
    /// Maestro's gRPC CloudEvents service, `http://127.0.0.1:<port>`.
    pub maestro_grpc: url::Url,
}

/// Ground truth at one instant.
#[derive(Clone, Debug, PartialEq)]
pub struct Truth {
    pub at: jiff::Timestamp,
    pub clusters: Vec<TruthCluster>,
}

impl Truth {
    pub fn cluster(&self, cluster_id: &str) -> Option<&TruthCluster> {
        self.clusters.iter().find(|c| c.cluster_id == cluster_id)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct TruthCluster {
    /// Clusters Service id (the join key of every hop). A cluster the RP
    /// never handed over ([`FaultKind::NotHandedOver`]) has the id CS would
    /// have given it, which no upstream serves: find it by `resource_id`.
    /// A cluster of the self-managed hub has the id the exporter gives it:
    /// its `spec.clusterID`, else `<namespace>/<name>` (no ARM fields).
    pub cluster_id: String,
    pub name: String,
    /// ARM id as served by the RP (original casing).
    pub resource_id: String,
    pub subscription_id: String,
    pub resource_group: String,
    /// Last segment of the provision shard's AKS management cluster id.
    pub mgmt_cluster: String,
    /// RP `systemData.createdAt`.
    pub created_at: jiff::Timestamp,
    /// When the creation completed as served: the later of the HostedCluster's
    /// Available lastTransitionTime (through Maestro) and the RP Succeeded.
    pub completed_at: Option<jiff::Timestamp>,
    /// Some hop failed during the creation.
    pub failed: bool,
    /// Only hops that exist for this cluster right now. `state` is the raw
    /// upstream value for `rp_frontend` and `clusters_service`; for the others
    /// it is descriptive (`NoStatus`/`Applied`/`Available`/`Deleting` for work,
    /// the version history state for `hosted_cluster`, `ready/desired` nodes
    /// for `node_pool`). The nested hops keep their last served content while
    /// the bundle is being deleted.
    pub hops: BTreeMap<Hop, TruthHop>,
    pub fault: Option<FaultKind>,
    /// The management cluster's direct view (hops `manifestwork`,
    /// `hosted_cluster`, `control_plane`, `managed_cluster`, `node_pool`) as
    /// the world's Kubernetes API servers serve it; empty unless
    /// [`World::serve_kube`] started them. `state` is descriptive.
    pub management: BTreeMap<Hop, TruthHop>,
    /// The management-side faults of this cluster (default unless served).
    pub management_faults: kube::KubeClusterFaults,
    /// The alert the injected fault should raise (the fault's
    /// [`FaultKind::expected_alert`]), `None` for a healthy creation.
    pub expected_alert: Option<&'static str>,
}

impl TruthCluster {
    /// What an exporter reading every served API reports for `hop`: the
    /// direct (management cluster) view where there is one, else the
    /// service side's (directly or through Maestro's status feedback).
    pub fn expected(&self, hop: Hop) -> Option<&TruthHop> {
        self.management.get(&hop).or_else(|| self.hops.get(&hop))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TruthHop {
    pub phase: Phase,
    pub state: String,
    /// When the hop first became ready. For `rp_frontend` and
    /// `clusters_service` this is the world's instant (upstream does not serve
    /// it); for the others it is the served lastTransitionTime (whole seconds).
    pub ready_at: Option<jiff::Timestamp>,
}

/// The plans currently alive, grown lazily by churn.
struct Fleet {
    plans: Arc<Vec<Arc<Plan>>>,
    /// With churn: when each live cluster is replaced.
    churn: Option<plan::Replacements>,
    next_prune: Ms,
}

struct Inner {
    cfg: WorldConfig,
    clock: SimClock,
    params: FleetParams,
    fleet: RwLock<Fleet>,
    /// The self-managed hub's clusters (empty unless the kind has a hub).
    hub: RwLock<hub::HubFleet>,
    controls: [Arc<server::ApiControl>; 3],
    stream: Arc<server::maestro_grpc::StreamControl>,
    endpoints: Mutex<Option<Endpoints>>,
    kube: Mutex<Option<Arc<mgmt::KubeWorld>>>,
}

/// One cluster's plan as [`World::planned`] gives it.
#[derive(Clone, Debug)]
pub struct PlannedCluster {
    pub cluster_id: String,
    /// When the last of its objects is gone, once its deletion is planned.
    pub gone_at: Option<Ms>,
    /// When its HostedCluster's bundle is marked deleted.
    pub bundle_deleted: Option<Ms>,
    pub bundles: Vec<PlannedBundle>,
}

/// One bundle of a [`PlannedCluster`].
#[derive(Clone, Debug)]
pub struct PlannedBundle {
    pub name: String,
    pub created: Ms,
    /// When it turns Available, if it does.
    pub available: Option<Ms>,
    /// From when its status stops changing (a work agent that stopped
    /// reporting), if it does.
    pub frozen: Option<Ms>,
}

/// The simulated world. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct World {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World")
            .field("cfg", &self.inner.cfg)
            .finish_non_exhaustive()
    }
}

const PRUNE_EVERY_MS: Ms = 5_000;

/// What a world does after its creations (docs/design/11-simulated-world.md §11.10); the
/// default is what [`World::new`] (and the demo) runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Day2Config {
    /// Healthy clusters run day-2 operations after their creation: add and
    /// remove a node pool, upgrade the control plane and then the pools,
    /// with their faults when [`WorldConfig::faults`] is on.
    pub enabled: bool,
    /// The RP's `provisioningState` is `Updating` while the control plane
    /// upgrades (ARO HCP's, mapped from Clusters Service's `updating`, which
    /// the world serves either way). On by default, as ARO HCP serves it;
    /// off reproduces an RP that keeps `Succeeded` through an upgrade.
    pub rp_updating: bool,
    /// Draw [`FaultKind::CsNodePoolError`]: a pool added after the creation
    /// that Clusters Service fails (`error`; the ARM nodePool `Failed`; no
    /// NodePool). On by default, as the exporter reads both
    /// (docs/design/15b-operations.md §15.11); off reproduces a world without it. Healthy
    /// clusters only take it, so turning it off changes no other cluster's
    /// draw.
    pub cs_node_pool_error: bool,
}

impl Default for Day2Config {
    fn default() -> Self {
        Day2Config {
            enabled: true,
            rp_updating: true,
            cs_node_pool_error: true,
        }
    }
}

impl World {
    /// A world with the default [`Day2Config`] (day-2 operations on).
    pub fn new(cfg: WorldConfig, clock: SimClock) -> World {
        World::with_day2(cfg, clock, Day2Config::default())
    }

    /// A world whose clusters do (or do not) change after their creation,
    /// as `day2` says. A switch of the constructor rather than a
    /// [`WorldConfig`] field, so every configuration written before it stays
    /// as it is.
    pub fn with_day2(cfg: WorldConfig, clock: SimClock, day2: Day2Config) -> World {
        let mut cfg = cfg;
        if !(cfg.speed.is_finite() && cfg.speed > 0.0) {
            tracing::warn!(
                speed = cfg.speed,
                "world speed must be a positive number; using 1.0"
            );
            cfg.speed = 1.0;
        }
        let t0 = clock.now().as_millisecond();
        let params = FleetParams {
            seed: cfg.seed,
            // A world without ARO has no ARO fleet (and no ARO churn).
            clusters: if cfg.kind.aro() { cfg.clusters } else { 0 },
            speed: cfg.speed,
            faults: cfg.faults,
            churn: cfg.churn,
            subscriptions: plan::subscriptions(cfg.seed, cfg.subscriptions),
            t0,
            not_handed_over: cfg.not_handed_over.clamp(0.0, 1.0),
            failure_burst: cfg.failure_burst.map(|(after, length)| {
                let ms = |d: std::time::Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
                let from = t0.saturating_add(ms(after));
                (from, from.saturating_add(ms(length)))
            }),
            day2: day2.enabled,
            rp_updating: day2.rp_updating,
            cs_node_pool_error: day2.cs_node_pool_error,
        };
        let hub_fleet = hub::HubFleet::new(FleetParams {
            clusters: if cfg.kind.hub() { cfg.clusters } else { 0 },
            ..params.clone()
        });
        let plans: Vec<Arc<Plan>> = (0..params.clusters as u64)
            .map(|i| Arc::new(plan::plan(&params, i)))
            .collect();
        let churn = params.churn.then(|| {
            plan::Replacements::new(plans.iter().map(|p| p.gone_at()), params.clusters as u64)
        });
        let controls =
            Api::ALL.map(|api| Arc::new(server::ApiControl::new(api, cfg.seed, cfg.faults)));
        World {
            inner: Arc::new(Inner {
                cfg,
                clock,
                params,
                fleet: RwLock::new(Fleet {
                    plans: Arc::new(plans),
                    churn,
                    next_prune: t0 + PRUNE_EVERY_MS,
                }),
                hub: RwLock::new(hub_fleet),
                controls,
                stream: Arc::default(),
                endpoints: Mutex::new(None),
                kube: Mutex::new(None),
            }),
        }
    }

    pub fn config(&self) -> &WorldConfig {
        &self.inner.cfg
    }

    /// What the world does after its creations ([`World::with_day2`]).
    pub fn day2(&self) -> Day2Config {
        Day2Config {
            enabled: self.inner.params.day2,
            rp_updating: self.inner.params.rp_updating,
            cs_node_pool_error: self.inner.params.cs_node_pool_error,
        }
    }

    pub fn clock(&self) -> &SimClock {
        &self.inner.clock
    }

    /// Binds 127.0.0.1:0 for each API and spawns its server on the current
    /// tokio runtime. Calling it again returns the same endpoints.
    pub async fn serve(&self) -> std::io::Result<Endpoints> {
        if let Some(e) = self.inner.endpoints.lock().clone() {
            return Ok(e);
        }
        let endpoints = server::serve_all(self.clone()).await?;
        *self.inner.endpoints.lock() = Some(endpoints.clone());
        Ok(endpoints)
    }

    /// The subscriptions the fleet spreads over (what the RP source lists).
    pub fn subscriptions(&self) -> Vec<String> {
        self.inner.params.subscriptions.clone()
    }

    /// Ground truth at the clock's current time.
    pub fn truth(&self) -> Truth {
        let now = self.now_ms();
        let plans = self.plans(now);
        let mut truth = truth::truth(&plans, now);
        if self.kube_served() {
            let budget = self.kube_degraded_budget();
            let by_id: std::collections::HashMap<&str, &Plan> = plans
                .iter()
                .map(|p| (p.cluster_id.as_str(), &**p))
                .collect();
            for c in &mut truth.clusters {
                let Some((spec, extras)) = by_id
                    .get(c.cluster_id.as_str())
                    .and_then(|p| self.kube_spec(p, now))
                else {
                    continue;
                };
                c.management = truth::management(&spec, &extras, truth.at, budget);
                if c.expected_alert.is_none() && spec.faults.managed_cluster_never_joins {
                    c.expected_alert = Some("HCPManagedClusterNotJoined");
                }
                c.management_faults = spec.faults;
            }
            let budget = self.kube_degraded_budget();
            truth.clusters.extend(
                self.hub_plans(now)
                    .iter()
                    .filter_map(|p| hub_truth(p, now, budget)),
            );
        }
        truth
    }

    /// The self-managed hub's plans alive at `t` (admitting churn arrivals).
    pub(crate) fn hub_plans(&self, t: Ms) -> Arc<Vec<Arc<hub::HubPlan>>> {
        {
            let fleet = self.inner.hub.read();
            if !fleet.stale(t) {
                return fleet.plans();
            }
        }
        self.inner.hub.write().advance(t)
    }

    pub fn inject(&self, fault: Fault) {
        tracing::info!(?fault, "injecting transport fault");
        let api = match fault {
            Fault::ServerErrors { api, .. }
            | Fault::MalformedJson { api, .. }
            | Fault::Down { api }
            | Fault::Up { api } => api,
            Fault::StreamDrop => return self.inner.stream.drop_streams(),
            Fault::MalformedEvents { count } => return self.inner.stream.send_malformed(count),
        };
        self.inner.controls[api.index()].inject(fault);
    }

    /// Objects each upstream has answered so far, by source name
    /// (`rp_frontend`, `clusters_service`, `maestro`, `kube/<mgmt cluster>`):
    /// what readers cost the world.
    pub fn items_served(&self) -> std::collections::BTreeMap<String, u64> {
        let mut served: std::collections::BTreeMap<String, u64> = Api::ALL
            .iter()
            .map(|api| {
                (
                    api.source_name().to_string(),
                    self.control(*api).items_served(),
                )
            })
            .collect();
        for cluster in self.mgmt_clusters() {
            served.insert(format!("kube/{}", cluster.name), cluster.api.items_served());
        }
        served
    }

    /// Requests about node pools each upstream has answered so far, by
    /// source name (`rp_frontend`, `clusters_service`): what reading the
    /// pools costs the world.
    pub fn node_pool_requests(&self) -> std::collections::BTreeMap<String, u64> {
        [Api::RpFrontend, Api::ClustersService]
            .iter()
            .map(|api| {
                (
                    api.source_name().to_string(),
                    self.control(*api).node_pool_requests(),
                )
            })
            .collect()
    }

    /// How the RP's and Clusters Service's node pools of the clusters
    /// `followed` keeps moved between two world times (ms), sampled each
    /// second (docs/design/15b-operations.md §15.11).
    pub fn node_pool_changes(
        &self,
        from: i64,
        to: i64,
        followed: impl Fn(&str) -> bool,
    ) -> PoolChanges {
        pools::pool_changes(&self.plans(to), from, to, 1000, followed)
    }

    /// The Maestro bundles some reader read by a search on their id.
    pub fn maestro_bundles_read_by_id(&self) -> std::collections::BTreeSet<String> {
        self.control(Api::Maestro).ids_read_by_id()
    }

    /// Maestro's gRPC stream: its counters (subscriptions, events,
    /// publishes refused) and settings (heartbeat, token).
    pub fn stream_control(&self) -> &Arc<server::maestro_grpc::StreamControl> {
        &self.inner.stream
    }

    pub(crate) fn control(&self, api: Api) -> &Arc<server::ApiControl> {
        &self.inner.controls[api.index()]
    }

    pub(crate) fn latency(&self) -> LatencyModel {
        self.inner.cfg.latency
    }

    /// The world's instant, in milliseconds (the bench's clock for what it
    /// reads of the plans).
    pub fn now_ms(&self) -> Ms {
        self.inner.clock.now().as_millisecond()
    }

    pub(crate) fn endpoints(&self) -> Option<Endpoints> {
        self.inner.endpoints.lock().clone()
    }

    /// What the world has planned for the clusters alive at `t`: the
    /// bench's own ledger of when each bundle turns Available and each
    /// cluster goes, to time the exporter against.
    pub fn planned(&self, t: Ms) -> Vec<PlannedCluster> {
        self.plans(t)
            .iter()
            .map(|p| PlannedCluster {
                cluster_id: p.cluster_id.clone(),
                gone_at: p.gone_at(),
                bundle_deleted: p.bundle_deleted,
                bundles: p
                    .bundles
                    .iter()
                    .map(|b| PlannedBundle {
                        name: b.name.clone(),
                        created: b.created,
                        available: b.available,
                        frozen: b.frozen,
                    })
                    .collect(),
            })
            .collect()
    }

    /// The plans alive at `t`, after admitting churn arrivals and pruning
    /// clusters that are gone everywhere.
    pub(crate) fn plans(&self, t: Ms) -> Arc<Vec<Arc<Plan>>> {
        {
            let fleet = self.inner.fleet.read();
            let arrival_due = fleet
                .churn
                .as_ref()
                .and_then(plan::Replacements::next_at)
                .is_some_and(|at| at <= t);
            if !arrival_due && fleet.next_prune > t {
                return fleet.plans.clone();
            }
        }
        let mut fleet = self.inner.fleet.write();
        let mut plans: Vec<Arc<Plan>> = fleet
            .plans
            .iter()
            .filter(|p| p.gone_at().is_none_or(|g| g > t))
            .cloned()
            .collect();
        if let Some(churn) = fleet.churn.as_mut() {
            while let Some((index, created)) = churn.take_due(t) {
                let arrival = plan::arrival(&self.inner.params, index, created);
                churn.admitted(arrival.gone_at());
                // Gone already when it is admitted late (a clock that
                // jumped): it is served never, and replaced at once.
                if arrival.gone_at().is_none_or(|g| g > t) {
                    plans.push(Arc::new(arrival));
                }
            }
        }
        fleet.plans = Arc::new(plans);
        fleet.next_prune = t + PRUNE_EVERY_MS;
        fleet.plans.clone()
    }
}

/// What a correct exporter shows of one hub cluster at `t`: only the
/// management side exists (docs/design/11-simulated-world.md §11.7). `None` when nothing of it
/// is served.
fn hub_truth(p: &hub::HubPlan, t: Ms, degraded_budget: Duration) -> Option<TruthCluster> {
    if t < p.created || p.gone_at().is_some_and(|g| g <= t) {
        return None;
    }
    let spec = p.spec();
    let at = truth::ts(t);
    let management = truth::management(&spec, &p.extras(), at, degraded_budget);
    let failed = management.values().any(|h| h.phase == Phase::Failed);
    Some(TruthCluster {
        cluster_id: p.cluster_id(),
        name: p.name.clone(),
        resource_id: String::new(),
        subscription_id: String::new(),
        resource_group: String::new(),
        mgmt_cluster: hub::HUB_NAME.to_string(),
        created_at: spec.created_at,
        completed_at: p
            .completed()
            .filter(|c| *c <= t && p.deleting.is_none_or(|d| *c < d))
            .map(truth::ts),
        failed,
        hops: BTreeMap::new(),
        fault: p.fault,
        management,
        management_faults: spec.faults,
        expected_alert: p.fault.map(FaultKind::expected_alert),
    })
}
