//! The seeded scenario: one [`Plan`] per cluster, fixed at birth.
//!
//! A plan lists, in absolute milliseconds, when each upstream object appears and
//! changes. Every response the world serves, and the ground truth, is computed
//! from plans and the clock alone, so the same (seed, clusters, start time)
//! always yields the same world, and a test can jump the clock anywhere.
//!
//! Each plan draws from its own ChaCha stream (stream = cluster index), so
//! clusters arriving later through churn are generated lazily yet
//! deterministically.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::FaultKind;
use super::day2::{self, Day2, Day2Draw};

mod bundles;
mod deletion;
mod times;

use bundles::bundles;
use deletion::deletion;
use times::{CreationTimes, draw_day2, draw_deletion};

/// Milliseconds since the Unix epoch.
pub type Ms = i64;

const MINUTE: f64 = 60.0;
/// Initial clusters are created over this much of the world's past.
const INITIAL_SPREAD_S: f64 = 40.0 * MINUTE;
/// With churn, a cluster is deleted this long after its creation (uniform).
const LIFETIME_S: (f64, f64) = (40.0 * MINUTE, 50.0 * MINUTE);
const LIFETIME_MEAN_S: f64 = (LIFETIME_S.0 + LIFETIME_S.1) / 2.0;
/// A cluster whose creation went wrong lingers until someone looks at it and
/// deletes it: long enough for its alerts to fire (and, in the demo, to see them).
const FAULTY_LIFETIME_S: (f64, f64) = (180.0 * MINUTE, 240.0 * MINUTE);

/// Seed salt of the management-side fault draw.
const MGMT_FAULT_SALT: u64 = 0x6d67_6d74_6661_756c;
/// Seed salt of the NodePool bundles' ids and delays: their own stream, so
/// every draw of the cluster's main stream (and so the rest of the world)
/// is what it was before the pools had bundles of their own.
const POOL_BUNDLE_SALT: u64 = 0x706f_6f6c_6275_6e64;
/// Seed salt of the "never handed over" draw.
const HANDOVER_SALT: u64 = 0x6861_6e64_6f76_6572;
/// Seed salt of the "HostedCluster loses Available" draw and its times.
const UNAVAILABLE_SALT: u64 = 0x756e_6176_6169_6c21;
/// Seed salt of the deletion's management-side times and its faults: their
/// own stream, so every draw before them is what it was.
const DELETION_SALT: u64 = 0x6465_6c65_7469_6f6e;
/// Share of healthy creations whose deletion goes wrong (each of the four
/// deletion faults a quarter of it).
const DELETION_FAULT_SHARE: f64 = 0.10;
/// Seed salt of the day-2 operations and their faults (`day2.rs`): their
/// own stream, so every draw before them is what it was.
const DAY2_SALT: u64 = 0x6461_7932_6f70_7321;
/// How long a stuck deletion stays stuck before someone unblocks it.
const STUCK_DELETION_S: (f64, f64) = (150.0 * MINUTE, 200.0 * MINUTE);

pub(crate) const REGION: &str = "westus3";
pub(crate) const ENV: &str = "sim";

/// The two provision shards (management clusters) the fleet lands on.
pub(crate) const SHARDS: [Shard; 2] = [
    Shard {
        id: "5b1c7d3e-0f2a-4c8b-9d6e-1a2b3c4d5e01",
        mgmt_cluster: "hcp-underlay-westus3-mgmt-1",
        consumer_name: "hcp-underlay-westus3-mgmt-1",
    },
    Shard {
        id: "5b1c7d3e-0f2a-4c8b-9d6e-1a2b3c4d5e02",
        mgmt_cluster: "hcp-underlay-westus3-mgmt-2",
        consumer_name: "hcp-underlay-westus3-mgmt-2",
    },
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shard {
    pub id: &'static str,
    /// Last segment of the AKS management cluster resource id.
    pub mgmt_cluster: &'static str,
    pub consumer_name: &'static str,
}

/// OpenShift versions the fleet installs (x.y.z).
const VERSIONS: [&str; 3] = ["4.19.7", "4.19.9", "4.20.2"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PoolPlan {
    /// The pool's short name (`np-<n>`), as the management side names it.
    pub short: String,
    /// The NodePool object name (`<hc name>-<pool>`).
    pub name: String,
    pub replicas: i64,
}

/// One Maestro resource bundle of a cluster. In ARO HCP the HostedCluster
/// and each NodePool travel in a ManifestWork of their own, each in its own
/// bundle (docs/design/11-simulated-world.md §11.1), so a cluster has one bundle per pool plus
/// the HostedCluster's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BundlePlan {
    pub id: String,
    /// The bundle's `name`, which is also the name of the ManifestWork it
    /// carries (and of that work on the management cluster).
    pub name: String,
    /// `None`: the HostedCluster's bundle; `Some(i)`: the bundle of `pools[i]`.
    pub pool: Option<usize>,
    pub created: Ms,
    /// The agent's first status report (`None`: never reported).
    pub applied: Option<Ms>,
    pub available: Option<Ms>,
    /// The nested ManifestWork's `Available`.
    pub mw_available: Option<Ms>,
    /// Maestro-status-not-updated fault: the status stops here.
    pub frozen: Option<Ms>,
    /// Every instant the bundle's status content changes, sorted.
    pub status_events: Vec<Ms>,
    /// Its own deletion (a pool removed after the creation): `deleted_at`
    /// from `.0`, gone at `.1`. The cluster's deletion takes every bundle.
    pub removed: Option<(Ms, Ms)>,
}

/// When everything about one cluster happens. `None` = never.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub index: u64,
    pub cluster_id: String,
    pub name: String,
    pub subscription_id: String,
    pub resource_group: String,
    pub shard: usize,
    pub hc_name: String,
    pub version: &'static str,
    pub pools: Vec<PoolPlan>,
    pub fault: Option<FaultKind>,
    /// Management-side only: the ManagedCluster is accepted but never joins.
    /// Drawn from its own stream, so the service-side plan is unchanged.
    pub managed_cluster_never_joins: bool,

    /// RP `systemData.createdAt`; the creation starts here.
    pub created: Ms,
    /// When Clusters Service shows the cluster (`None`: the RP never handed
    /// it over).
    pub cs_created: Option<Ms>,
    pub cs_pending: Ms,
    pub cs_installing: Ms,
    pub rp_provisioning: Option<Ms>,
    /// The HostedCluster's bundle (its pools' follow within seconds).
    pub bundle_created: Ms,
    /// The Maestro agent's first status report on the HostedCluster's
    /// bundle (bundle and ManifestWork Applied, HostedCluster exists).
    pub bundle_applied: Option<Ms>,
    pub bundle_available: Option<Ms>,
    pub mw_available: Option<Ms>,
    pub hc_infra_ready: Option<Ms>,
    pub hc_etcd_available: Option<Ms>,
    pub hc_kas_available: Option<Ms>,
    /// HostedCluster-degraded fault: ValidReleaseImage turns False here.
    pub hc_invalid_image: Option<Ms>,
    pub hc_available: Option<Ms>,
    /// HostedCluster-unavailable fault: after the creation completed, the
    /// HostedCluster's Available is False from `.0` until `.1`.
    pub hc_lost: Option<(Ms, Ms)>,
    pub hc_completed: Option<Ms>,
    pub np_machines: Option<Ms>,
    pub np_ready: Option<Ms>,
    pub cs_ready: Option<Ms>,
    pub rp_succeeded: Option<Ms>,
    pub cs_error: Option<Ms>,
    pub rp_failed: Option<Ms>,

    /// The user's DELETE (churn).
    pub delete_requested: Option<Ms>,
    pub cs_uninstalling: Option<Ms>,
    pub bundle_deleted: Option<Ms>,
    pub bundle_gone: Option<Ms>,
    pub cs_gone: Option<Ms>,
    pub rp_gone: Option<Ms>,
    /// The work agent deletes the HostedCluster (its deletionTimestamp).
    pub hc_deleting: Option<Ms>,
    /// HyperShift has deleted the pools, the control plane and the
    /// ManagedCluster; the HostedCluster waits for its finalizer.
    pub hc_dependents_gone: Option<Ms>,
    /// The HostedCluster's finalizer clears: it is gone.
    pub hc_gone: Option<Ms>,
    /// The ManifestWorks are gone from the management cluster.
    pub mw_gone: Option<Ms>,
    /// Clusters Service's uninstall failed (`error`) until the retry at
    /// `bundle_deleted`; the RP said `Failed` from `rp_delete_failed`.
    pub cs_uninstall_error: Option<Ms>,
    pub rp_delete_failed: Option<Ms>,

    /// What the cluster does after its creation (docs/design/11-simulated-world.md §11.10).
    /// A pool it adds is the last of `pools`, with a bundle of its own.
    pub day2: Day2,

    /// The HostedCluster's bundle first, then one per pool (same order as
    /// `pools`), derived from the times above once the faults are applied.
    pub bundles: Vec<BundlePlan>,
}

impl Plan {
    pub fn shard(&self) -> Shard {
        SHARDS[self.shard % SHARDS.len()]
    }

    /// `ocm-<env>-<id>`, the HostedCluster's namespace.
    pub fn hc_namespace(&self) -> String {
        format!("ocm-{ENV}-{}", self.cluster_id)
    }

    /// The ARM resource id as the RP serves it (original casing).
    pub fn resource_id(&self) -> String {
        format!(
            "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters/{}",
            self.subscription_id, self.resource_group, self.name
        )
    }

    /// The pools the cluster was created with (a pool added later is the
    /// last of `pools`).
    pub fn creation_pools(&self) -> &[PoolPlan] {
        let n = self
            .day2
            .added
            .as_ref()
            .map_or(self.pools.len(), |a| a.pool);
        self.pools.get(..n).unwrap_or(&self.pools)
    }

    /// The last instant any object of this cluster is still served.
    pub fn gone_at(&self) -> Option<Ms> {
        [self.rp_gone, self.cs_gone, self.bundle_gone]
            .into_iter()
            .try_fold(Ms::MIN, |acc, t| t.map(|t| acc.max(t)))
    }
}

/// What the fleet generator needs to know.
#[derive(Debug, Clone)]
pub(crate) struct FleetParams {
    pub seed: u64,
    pub clusters: usize,
    pub speed: f64,
    pub faults: bool,
    pub churn: bool,
    pub subscriptions: Vec<String>,
    pub t0: Ms,
    /// Share of creations the RP accepts but never hands over to Clusters
    /// Service ([`FaultKind::NotHandedOver`]).
    pub not_handed_over: f64,
    /// Creations created in `[.0, .1)` fail ([`FaultKind::ClustersServiceError`]).
    pub failure_burst: Option<(Ms, Ms)>,
    /// Healthy clusters run day-2 operations (`day2.rs`).
    pub day2: bool,
    /// The RP says `Updating` during an upgrade (`Day2Config::rp_updating`).
    pub rp_updating: bool,
    /// [`FaultKind::CsNodePoolError`] may be drawn
    /// (`Day2Config::cs_node_pool_error`).
    pub cs_node_pool_error: bool,
}

impl FleetParams {
    /// World seconds → real milliseconds.
    pub(crate) fn ms(&self, world_s: f64) -> i64 {
        (world_s * 1000.0 / self.speed).round() as i64
    }

    /// Real ms between two churn arrivals at the healthy lifetime's rate:
    /// the seeded creation time of an arrival, which [`Replacements`]
    /// overrides with the gone time of the cluster it replaces (the draw is
    /// kept so that every later draw of the arrival stays the same).
    pub fn arrival_interval_ms(&self) -> Option<i64> {
        if !self.churn || self.clusters == 0 {
            return None;
        }
        Some(self.ms(LIFETIME_MEAN_S / self.clusters as f64).max(1))
    }

    /// Creation time of cluster `index` (initial ones in the past, churn
    /// arrivals after t0). Monotone in `index`.
    pub fn created_at(&self, index: u64, rng: &mut ChaCha8Rng) -> Ms {
        let n = self.clusters as u64;
        if index < n {
            let u: f64 = rng.random_range(0.0..1.0);
            let back = INITIAL_SPREAD_S * ((n - index) as f64 - u) / n as f64;
            self.t0 - self.ms(back)
        } else {
            let interval = self.arrival_interval_ms().unwrap_or(i64::MAX / 4);
            let jitter: f64 = rng.random_range(-0.4..0.4);
            let k = (index - n) as f64;
            self.t0 + ((k + 0.5 + jitter) * interval as f64).round() as i64
        }
    }
}

/// Deterministic subscription ids for a seed (lower-case GUIDs, as ARM prints them).
pub(crate) fn subscriptions(seed: u64, count: usize) -> Vec<String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(u64::MAX);
    (0..count.max(1)).map(|_| uuid(&mut rng)).collect()
}

pub(crate) fn uuid(rng: &mut ChaCha8Rng) -> String {
    let b: [u8; 16] = rng.random();
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
        u16::from_be_bytes([b[4], b[5]]),
        u16::from_be_bytes([b[6], b[7]]) & 0x0fff,
        (u16::from_be_bytes([b[8], b[9]]) & 0x3fff) | 0x8000,
        u64::from_be_bytes([0, 0, b[10], b[11], b[12], b[13], b[14], b[15]]),
    )
}

/// OCM ids are 32 characters of lower-case base32.
fn ocm_id(rng: &mut ChaCha8Rng, len: usize) -> String {
    const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuv";
    (0..len)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

fn pick_fault(rng: &mut ChaCha8Rng) -> Option<FaultKind> {
    // Cumulative thresholds: ≈7 % CS error, 6 % each of the stuck/frozen/
    // degraded kinds, and rarer unknown enum values (they only need to exist).
    let r: f64 = rng.random_range(0.0..1.0);
    let table = [
        (0.07, FaultKind::ClustersServiceError),
        (0.13, FaultKind::BundleNeverApplied),
        (0.19, FaultKind::MaestroStatusNotUpdated),
        (0.25, FaultKind::HostedClusterDegraded),
        (0.31, FaultKind::NodePoolStuck),
        (0.33, FaultKind::UnknownClustersServiceState),
        (0.35, FaultKind::UnknownProvisioningState),
        // Drawn from what was the fault-free share: the other kinds keep
        // their clusters, and about 40 % of the fleet has a fault.
        (0.40, FaultKind::NodePoolBundleNeverApplied),
    ];
    table.into_iter().find(|(p, _)| r < *p).map(|(_, f)| f)
}

/// Churn that keeps the population at the fleet's size: each cluster is
/// replaced by a new creation at the instant it is gone everywhere. A fixed
/// arrival rate cannot: faulty clusters linger four times as long as healthy
/// ones, so a rate set from the healthy lifetime grew the world by about
/// 1 % a minute, and the soak measured the world's growth as the
/// exporter's (docs/performance.md). Deterministic: a creation time is the
/// gone time of the cluster it replaces.
#[derive(Debug, Default)]
pub(crate) struct Replacements {
    /// Gone times of live clusters not yet replaced, earliest first.
    due: std::collections::BinaryHeap<std::cmp::Reverse<Ms>>,
    /// The index the next arrival gets.
    next_index: u64,
}

impl Replacements {
    /// For a fleet whose first `next_index` clusters have these gone times.
    pub fn new(gone: impl IntoIterator<Item = Option<Ms>>, next_index: u64) -> Replacements {
        Replacements {
            due: gone.into_iter().flatten().map(std::cmp::Reverse).collect(),
            next_index,
        }
    }

    /// When the next arrival comes.
    pub fn next_at(&self) -> Option<Ms> {
        self.due.peek().map(|r| r.0)
    }

    /// The next arrival due by `t`: its index and creation time. Its own
    /// gone time must be handed back with [`Replacements::admitted`].
    pub fn take_due(&mut self, t: Ms) -> Option<(u64, Ms)> {
        let at = self.next_at().filter(|at| *at <= t)?;
        self.due.pop();
        let index = self.next_index;
        self.next_index += 1;
        Some((index, at))
    }

    /// An arrival was admitted; it is replaced when it is gone.
    pub fn admitted(&mut self, gone: Option<Ms>) {
        if let Some(gone) = gone {
            self.due.push(std::cmp::Reverse(gone));
        }
    }
}

/// Builds the plan of cluster `index`.
pub(crate) fn plan(params: &FleetParams, index: u64) -> Plan {
    plan_created(params, index, None)
}

/// Builds the plan of a churn arrival created at `created`.
pub(crate) fn arrival(params: &FleetParams, index: u64, created: Ms) -> Plan {
    plan_created(params, index, Some(created))
}

/// The plan of cluster `index`, created at `created` when given. The seeded
/// creation time is drawn either way, so every other draw is the same.
fn plan_created(params: &FleetParams, index: u64, created: Option<Ms>) -> Plan {
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    rng.set_stream(index);
    let drawn = params.created_at(index, &mut rng);
    let created = created.unwrap_or(drawn);

    let cluster_id = ocm_id(&mut rng, 32);
    let hc_name = ocm_id(&mut rng, 15);
    let bundle_id = uuid(&mut rng);
    let sub_count = params.subscriptions.len().max(1);
    let subscription_id = params
        .subscriptions
        .get(rng.random_range(0..sub_count))
        .cloned()
        .unwrap_or_default();
    // Mixed case on purpose: ARM keeps the caller's casing, joins must not care.
    let resource_group = format!("rg-HCP-Team{}", rng.random_range(1..=5));
    let name = format!("hcp-{index:06}");
    let shard = rng.random_range(0..SHARDS.len());
    let version = VERSIONS[rng.random_range(0..VERSIONS.len())];
    let pools: Vec<PoolPlan> = (1..=rng.random_range(1..=2))
        .map(|i| PoolPlan {
            short: format!("np-{i}"),
            name: format!("{hc_name}-np-{i}"),
            replicas: rng.random_range(2..=3),
        })
        .collect();
    let fault = if params.faults {
        pick_fault(&mut rng)
    } else {
        None
    };
    let (mut fault, lost_after) = side_faults(params, index, created, fault);

    let t = CreationTimes::draw(params, &mut rng, created);
    // Day 2, only after a healthy creation that no other fault (of the
    // management side or the deletion, drawn later) touches; drawn before
    // the lifetime, as a faulty cluster lingers.
    let mut day2_plan = Day2::default();
    if params.day2 && fault.is_none() && !other_fault_ahead(params, index) {
        let done = t
            .rp_succeeded
            .max(t.np_ready)
            .max(t.hc_completed)
            .max(t.cs_ready);
        (day2_plan, fault) = draw_day2(params, index, done, pools.len(), version);
    }
    // A ManagedCluster that never joins is a fault too: its cluster lingers
    // like the others, so its alert (due the managed_cluster budget after
    // the creation) fires before the user deletes it. With a healthy
    // lifetime the deletion came within minutes of the alert's due time.
    let lifetime = if fault.is_some() || managed_cluster_never_joins_ahead(params, index) {
        FAULTY_LIFETIME_S
    } else {
        LIFETIME_S
    };
    // Drawn whether the world churns or not, the last draws of the stream.
    let deletion_times = draw_deletion(params, &mut rng, created, lifetime);

    let mut p = Plan {
        index,
        cluster_id,
        name,
        subscription_id,
        resource_group,
        shard,
        hc_name,
        version,
        pools,
        fault,
        managed_cluster_never_joins: false,
        created,
        cs_created: Some(t.cs_created),
        cs_pending: t.cs_pending,
        cs_installing: t.cs_installing,
        rp_provisioning: Some(t.rp_provisioning),
        bundle_created: t.bundle_created,
        bundle_applied: Some(t.bundle_applied),
        bundle_available: Some(t.bundle_available),
        mw_available: Some(t.mw_available),
        hc_infra_ready: Some(t.hc_infra_ready),
        hc_etcd_available: Some(t.hc_etcd_available),
        hc_kas_available: Some(t.hc_kas_available),
        hc_invalid_image: None,
        hc_available: Some(t.hc_available),
        hc_lost: lost_after.map(|(after, outage)| {
            let lost = t.rp_succeeded + params.ms(after);
            (lost, lost + params.ms(outage))
        }),
        hc_completed: Some(t.hc_completed),
        np_machines: Some(t.np_machines),
        np_ready: Some(t.np_ready),
        cs_ready: Some(t.cs_ready),
        rp_succeeded: Some(t.rp_succeeded),
        cs_error: None,
        rp_failed: None,
        delete_requested: None,
        cs_uninstalling: None,
        bundle_deleted: None,
        bundle_gone: None,
        cs_gone: None,
        rp_gone: None,
        hc_deleting: None,
        hc_dependents_gone: None,
        hc_gone: None,
        mw_gone: None,
        cs_uninstall_error: None,
        rp_delete_failed: None,
        day2: Day2::default(),
        bundles: Vec::new(),
    };

    creation_fault(
        &mut p,
        CreationFaultTimes {
            cs_error: t.cs_error,
            rp_failed: t.rp_failed,
            hc_invalid_image: t.hc_invalid_image,
        },
    );

    // ≈6 % of otherwise healthy clusters; a separate stream keeps every
    // other draw (and so the service-side world) as it was.
    if params.faults && p.fault.is_none() {
        p.managed_cluster_never_joins = draws_never_joining(params, index);
    }

    if params.churn {
        [
            p.delete_requested,
            p.cs_uninstalling,
            p.bundle_deleted,
            p.bundle_gone,
            p.cs_gone,
            p.rp_gone,
        ] = deletion_times.map(Some);
        deletion(params, &mut p);
        // One fault a cluster, the one the ground truth names: a deletion
        // fault drawn for a cluster whose ManagedCluster never joins takes
        // its place. Both at once raised HCPManagedClusterNotJoined on a
        // cluster the truth gave only the deletion's fault.
        if p.fault.is_some() {
            p.managed_cluster_never_joins = false;
        }
    }

    p.take_day2(day2_plan);
    p.bundles = bundles(params, &p, bundle_id);
    p
}

impl Plan {
    /// The day 2 drawn for this cluster, up to its deletion, with the pool
    /// it adds among its pools.
    fn take_day2(&mut self, day2: Day2) {
        self.day2 = day2.before(self.delete_requested);
        if let Some(a) = &self.day2.added {
            self.pools.push(PoolPlan {
                short: a.short.clone(),
                name: format!("{}-{}", self.hc_name, a.short),
                replicas: i64::from(a.replicas),
            });
        }
    }
}

/// Whether an otherwise healthy cluster's ManagedCluster never joins, from
/// a stream of its own.
fn draws_never_joining(params: &FleetParams, index: u64) -> bool {
    let mut mgmt = ChaCha8Rng::seed_from_u64(params.seed ^ MGMT_FAULT_SALT);
    mgmt.set_stream(index);
    mgmt.random_range(0.0..1.0) < 0.06
}

/// The faults a cluster gets besides the one its own stream drew, each from a
/// stream of its own so the rest of the world stays what the seed made it:
/// a seeded failure burst, a resource the RP never hands over, a control
/// plane lost for a while after the creation (with when and for how long,
/// in world seconds).
fn side_faults(
    params: &FleetParams,
    index: u64,
    created: Ms,
    mut fault: Option<FaultKind>,
) -> (Option<FaultKind>, Option<(f64, f64)>) {
    // A seeded burst: every creation in the window fails the same way, the
    // fleet-level failure an SLO burn-rate alert exists for. No draw is
    // asked, so the rest of the world is what the seed made it.
    if params
        .failure_burst
        .is_some_and(|(from, to)| (from..to).contains(&created))
    {
        fault = Some(FaultKind::ClustersServiceError);
    }
    // Its own stream, and asked only when the share is set: the rest of the
    // world stays what the seed made it.
    if params.not_handed_over > 0.0 && fault.is_none() {
        let mut handover = ChaCha8Rng::seed_from_u64(params.seed ^ HANDOVER_SALT);
        handover.set_stream(index);
        if handover.random_range(0.0..1.0) < params.not_handed_over {
            fault = Some(FaultKind::NotHandedOver);
        }
    }

    // A completed cluster losing its control plane for a while: its own
    // stream too, drawn before the lifetime (a faulty cluster lingers).
    let mut lost_after = None;
    if params.faults && fault.is_none() {
        let mut lost = ChaCha8Rng::seed_from_u64(params.seed ^ UNAVAILABLE_SALT);
        lost.set_stream(index);
        if lost.random_range(0.0..1.0) < 0.05 {
            fault = Some(FaultKind::HostedClusterUnavailable);
            // Lost 5–15 minutes after the RP said Succeeded, back 25–35
            // minutes later: longer than the hosted_cluster budget (15m),
            // so its alert fires, and then resolves.
            lost_after = Some((
                lost.random_range(5.0 * MINUTE..15.0 * MINUTE),
                lost.random_range(25.0 * MINUTE..35.0 * MINUTE),
            ));
        }
    }
    (fault, lost_after)
}

/// The times a creation fault needs that a healthy creation draws anyway
/// (drawn for every cluster, so each keeps its place in the stream).
struct CreationFaultTimes {
    cs_error: Ms,
    rp_failed: Ms,
    hc_invalid_image: Ms,
}

/// What a creation's fault takes from its plan: the hops it keeps from
/// happening, and the failure it adds (docs/design/11-simulated-world.md §11.4).
fn creation_fault(p: &mut Plan, t: CreationFaultTimes) {
    match p.fault {
        Some(FaultKind::ClustersServiceError) => {
            // Inflight checks fail: CS gives up, the management side stalls.
            p.cs_error = Some(t.cs_error);
            p.rp_failed = Some(t.rp_failed);
            p.cs_ready = None;
            p.rp_succeeded = None;
            p.hc_available = None;
            p.hc_completed = None;
            p.np_machines = None;
            p.np_ready = None;
            p.hc_kas_available = p.hc_kas_available.filter(|at| *at < t.cs_error);
            p.hc_etcd_available = p.hc_etcd_available.filter(|at| *at < t.cs_error);
            p.hc_infra_ready = p.hc_infra_ready.filter(|at| *at < t.cs_error);
        }
        Some(FaultKind::BundleNeverApplied) => {
            // The agent never reports: status stays null, nothing downstream moves.
            p.bundle_applied = None;
            p.bundle_available = None;
            p.mw_available = None;
            p.hc_infra_ready = None;
            p.hc_etcd_available = None;
            p.hc_kas_available = None;
            p.hc_available = None;
            p.hc_completed = None;
            p.np_machines = None;
            p.np_ready = None;
            p.cs_ready = None;
            p.rp_succeeded = None;
        }
        Some(FaultKind::MaestroStatusNotUpdated) => {
            // The work progresses (CS and RP complete) but the REST status
            // of every bundle stays at its first report (see `bundles`).
        }
        Some(FaultKind::HostedClusterDegraded) => {
            p.hc_invalid_image = Some(t.hc_invalid_image);
            p.hc_etcd_available = None;
            p.hc_kas_available = None;
            p.hc_available = None;
            p.hc_completed = None;
            p.np_machines = None;
            p.np_ready = None;
            p.cs_ready = None;
            p.rp_succeeded = None;
        }
        Some(FaultKind::NodePoolStuck) => {
            p.np_machines = None;
            p.np_ready = None;
        }
        Some(FaultKind::NotHandedOver) => {
            // The RP accepted the resource and never got it into Clusters
            // Service: nothing exists past the RP, which stays Accepted.
            p.cs_created = None;
            p.rp_provisioning = None;
            p.rp_succeeded = None;
            p.cs_ready = None;
            p.bundle_applied = None;
            p.bundle_available = None;
            p.mw_available = None;
            p.hc_infra_ready = None;
            p.hc_etcd_available = None;
            p.hc_kas_available = None;
            p.hc_available = None;
            p.hc_completed = None;
            p.np_machines = None;
            p.np_ready = None;
        }
        Some(
            FaultKind::UnknownClustersServiceState
            | FaultKind::UnknownProvisioningState
            | FaultKind::NodePoolBundleNeverApplied
            | FaultKind::HostedClusterUnavailable,
        )
        | None => {}
        // Drawn for the self-managed hub only (`hub.rs`), or for the
        // deletion, later (`deletion`).
        Some(
            FaultKind::KubeVirtMachinesPending
            | FaultKind::NoFreeAgent
            | FaultKind::ReleaseImageInvalid
            | FaultKind::ManagedClusterNeverJoins
            | FaultKind::HostedClusterFinalizerStuck
            | FaultKind::ManifestWorkAgentGone
            | FaultKind::ClustersServiceUninstallError
            | FaultKind::RpStuckDeleting,
        ) => {}
        // After the creation (`day2`).
        Some(
            FaultKind::NodePoolNeverReachesIgnition
            | FaultKind::UpgradeStuckPartial
            | FaultKind::NodePoolStuckUpdating
            | FaultKind::AddedPoolVmUnschedulable
            | FaultKind::AddedPoolNoFreeAgent
            | FaultKind::CsNodePoolError
            | FaultKind::CsNodePoolUpgradeError,
        ) => {}
    }
}

/// Whether the management side's fault or a deletion fault will be drawn
/// for a healthy cluster (their streams' first values, as `plan_created`
/// and `deletion` draw them): such a cluster runs no day-2 operation, so
/// that it keeps exactly one fault and both keep their clusters.
fn other_fault_ahead(params: &FleetParams, index: u64) -> bool {
    if !params.faults {
        return false;
    }
    let first = |salt| first_draw(params, salt, index);
    first(MGMT_FAULT_SALT) < 0.06 || (params.churn && first(DELETION_SALT) < DELETION_FAULT_SHARE)
}

/// The first value of cluster `index`'s stream `salt`: what the draw that
/// stream feeds will see first, read ahead of it.
fn first_draw(params: &FleetParams, salt: u64, index: u64) -> f64 {
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed ^ salt);
    rng.set_stream(index);
    rng.random_range(0.0..1.0f64)
}

/// Whether the management side's fault will be drawn for this cluster and
/// kept, as `plan_created` draws it (its stream's first value), before the
/// draw: the lifetime depends on it. A deletion fault drawn for the same
/// cluster takes its place (one fault a cluster), and that cluster keeps
/// the healthy lifetime its deletion fault is timed by.
fn managed_cluster_never_joins_ahead(params: &FleetParams, index: u64) -> bool {
    if !params.faults {
        return false;
    }
    let first = |salt| first_draw(params, salt, index);
    first(MGMT_FAULT_SALT) < 0.06 && !(params.churn && first(DELETION_SALT) < DELETION_FAULT_SHARE)
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
