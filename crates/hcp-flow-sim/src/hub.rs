//! The self-managed world (docs/design/11-simulated-world.md §11.7): one simulated MCE hub, a
//! management cluster where users create HostedClusters themselves — no RP,
//! no Clusters Service, no Maestro. It holds a MultiClusterEngine, and
//! HostedClusters of platforms KubeVirt, Agent and None in the user
//! namespaces `clusters` and `hcp`, each with its control plane in
//! `<namespace>-<name>`, its ManagedCluster (named like it), its NodePools and,
//! on the Agent platform, the Agents its pools boot from.
//!
//! Like the ARO fleet, each cluster has a [`HubPlan`] drawn from its own
//! random stream (salted, so the ARO world of the same seed is unchanged),
//! and everything served is drawn from the plans and the clock by
//! [`objects_at`](super::kube::objects_at) in its self-managed mode.
//!
//! Timeline of a healthy creation (world seconds after the HostedCluster is
//! created): control plane ready after 3–6 min, HostedCluster Available 1–3
//! min later, ManagedCluster joined 0.5–2 min after that, NodePools ready
//! 2–8 min after Available (Agents install more slowly: 5–10). With churn a
//! cluster is deleted 40–50 world-minutes after its creation (3–4 hours when
//! it has a fault), carries its deletionTimestamp for 1–3 minutes, and goes.

use std::sync::Arc;

use jiff::SignedDuration;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::FaultKind;
use super::day2::{self, Day2, Day2Draw};
use super::kube::objects::{HubClusterSpec, MachinesPending};
use super::kube::{KubeClusterFaults, KubeClusterSpec, KubeExtras};
use super::plan::{FleetParams, Ms, Replacements, uuid};
use super::state::trunc_s;
use super::truth::ts;
use crate::kube::ClusterLayout;

/// The hub's name: its `mgmt_cluster` label and kubeconfig context.
pub const HUB_NAME: &str = "mce-hub-1";
/// The user namespaces HostedClusters are created in.
pub const HUB_NAMESPACES: [&str; 2] = ["clusters", "hcp"];
/// `spec.platform.type` values of the hub's clusters, as HyperShift spells them.
pub const HUB_PLATFORMS: [&str; 3] = ["KubeVirt", "Agent", "None"];

/// Seed salt of the hub's clusters: their own streams, so adding the hub
/// left every ARO draw what it was.
const HUB_SALT: u64 = 0x6875_6273_656c_666d;
const MINUTE: f64 = 60.0;
/// With churn, a healthy cluster is deleted this long after its creation.
const LIFETIME_S: (f64, f64) = (40.0 * MINUTE, 50.0 * MINUTE);
/// A faulty cluster lingers until someone deletes it: its alerts fire first.
const FAULTY_LIFETIME_S: (f64, f64) = (180.0 * MINUTE, 240.0 * MINUTE);
/// Seed salt of the deletion's fault: its own stream, so every other draw
/// of the hub is what it was.
const HUB_DELETION_SALT: u64 = 0x6875_6264_656c_6574;
/// Share of healthy hub clusters whose HostedCluster keeps its finalizer.
const FINALIZER_STUCK_SHARE: f64 = 0.06;
/// How long that lasts before someone clears it.
const STUCK_DELETION_S: (f64, f64) = (150.0 * MINUTE, 200.0 * MINUTE);
/// Seed salt of the hub's day-2 operations (`day2.rs`): their own stream.
const HUB_DAY2_SALT: u64 = 0x6875_6264_6179_3221;
/// A degraded HostedCluster turns Degraded this long after its creation.
pub(crate) const DEGRADED_AFTER_WORLD_S: f64 = 60.0;

/// When everything about one hub cluster happens (real ms). `None` = never.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HubPlan {
    pub index: u64,
    pub name: String,
    pub namespace: &'static str,
    pub platform: &'static str,
    /// `spec.clusterID`, when the user (or their tooling) set it.
    pub spec_cluster_id: Option<String>,
    /// (NodePool short name, desired replicas), in order.
    pub pools: Vec<(String, u32)>,
    pub fault: Option<FaultKind>,
    /// The HostedCluster's creationTimestamp: the creation starts here.
    pub created: Ms,
    pub cp_ready: Option<Ms>,
    pub hc_available: Option<Ms>,
    pub mc_joined: Option<Ms>,
    /// When each pool's nodes are all ready, as planned (a fault may keep
    /// them from it).
    pub pools_ready: Vec<Ms>,
    /// Agents the inventory holds for this cluster (Agent platform).
    pub agents: u32,
    pub degraded_after: SignedDuration,
    pub invalid_image: Option<Ms>,
    pub deleting: Option<Ms>,
    /// HyperShift has deleted the pools, control plane and ManagedCluster;
    /// the HostedCluster waits for its finalizer until `gone`.
    pub dependents_gone: Option<Ms>,
    pub gone: Option<Ms>,
    /// What the cluster does after its creation (docs/design/11-simulated-world.md §11.10);
    /// a pool it adds is not in `pools`.
    pub day2: Day2,
}

impl HubPlan {
    /// The id the exporter gives the cluster (docs/design/04-identities-and-joins.md §4.3).
    pub fn cluster_id(&self) -> String {
        self.spec_cluster_id
            .clone()
            .unwrap_or_else(|| format!("{}/{}", self.namespace, self.name))
    }

    pub fn gone_at(&self) -> Option<Ms> {
        self.gone
    }

    /// Pool `i`'s NodePool name (`<HostedCluster>-<pool>`); the added
    /// pool's index follows the creation's.
    pub fn pool_name(&self, i: usize) -> Option<String> {
        let short = match self.pools.get(i) {
            Some((short, _)) => short.clone(),
            None => self
                .day2
                .added
                .as_ref()
                .filter(|a| a.pool == i)?
                .short
                .clone(),
        };
        Some(format!("{}-{short}", self.name))
    }

    /// When the creation completed: the HostedCluster Available, as served
    /// (whole seconds).
    pub fn completed(&self) -> Option<Ms> {
        self.hc_available.map(trunc_s)
    }

    /// What the hub draws beyond [`HubPlan::spec`]: the day-2 operations
    /// (its HostedClusters are named as the user named them).
    pub fn extras(&self) -> KubeExtras {
        let pending = match self.fault {
            Some(FaultKind::AddedPoolVmUnschedulable) => {
                Some(MachinesPending::KubeVirtUnschedulable)
            }
            Some(FaultKind::AddedPoolNoFreeAgent) => Some(MachinesPending::NoSuitableAgents),
            _ => None,
        };
        let name = |i: usize| {
            self.pools
                .get(i)
                .map(|(short, _)| short.clone())
                .or_else(|| self.day2.added.as_ref().map(|a| a.short.clone()))
                .unwrap_or_default()
        };
        day2::kube_extras(&self.day2, None, None, pending, name)
    }

    /// The objects' times and faults, for [`objects_at`](super::kube::objects_at).
    pub fn spec(&self) -> KubeClusterSpec {
        let at = |ms: Option<Ms>| ms.map(|t| ts(trunc_s(t)));
        let pending = match self.fault {
            Some(FaultKind::KubeVirtMachinesPending) => {
                Some((MachinesPending::KubeVirtUnschedulable, self.pools.len()))
            }
            Some(FaultKind::NoFreeAgent) => Some((MachinesPending::NoSuitableAgents, 1)),
            _ => None,
        };
        KubeClusterSpec {
            cluster_id: self.cluster_id(),
            name: self.name.clone(),
            env: String::new(),
            mode: ClusterLayout::SelfManaged,
            created_at: ts(trunc_s(self.created)),
            manifestwork_applied_at: None,
            hosted_cluster_available_at: at(self.hc_available),
            control_plane_ready_at: at(self.cp_ready),
            managed_cluster_joined_at: at(self.mc_joined),
            node_pools: self
                .pools
                .iter()
                .zip(&self.pools_ready)
                // No node joins a cluster whose control plane never came up.
                .map(|((name, desired), ready)| {
                    let ready = Some(*ready).filter(|_| self.hc_available.is_some());
                    (name.clone(), *desired, at(ready))
                })
                .collect(),
            faults: KubeClusterFaults {
                hosted_cluster_degraded: self.fault == Some(FaultKind::HostedClusterDegraded),
                managed_cluster_never_joins: self.fault
                    == Some(FaultKind::ManagedClusterNeverJoins),
                degraded_after: Some(self.degraded_after),
                release_image_invalid_at: at(self.invalid_image),
                machines_pending: pending,
                ..KubeClusterFaults::default()
            },
            hub: HubClusterSpec {
                namespace: Some(self.namespace.to_string()),
                platform: Some(self.platform.to_string()),
                no_cluster_id: self.spec_cluster_id.is_none(),
                agents: self.agents,
                deleting_at: at(self.deleting),
            },
            deletion: super::kube::KubeDeletion {
                dependents_gone_at: at(self.dependents_gone),
                cloud_resources_stuck: self.fault == Some(FaultKind::HostedClusterFinalizerStuck),
                ..Default::default()
            },
        }
    }
}

fn pick_fault(rng: &mut ChaCha8Rng, platform: &str) -> Option<FaultKind> {
    // About 40 % of the hub's creations go wrong, one way or another; the
    // platform-specific NodePool faults only where the platform has them.
    let r: f64 = rng.random_range(0.0..1.0);
    match r {
        r if r < 0.08 => Some(FaultKind::HostedClusterDegraded),
        r if r < 0.16 => Some(FaultKind::ReleaseImageInvalid),
        r if r < 0.24 => Some(FaultKind::ManagedClusterNeverJoins),
        r if r < 0.40 => match platform {
            "KubeVirt" => Some(FaultKind::KubeVirtMachinesPending),
            "Agent" => Some(FaultKind::NoFreeAgent),
            _ => None,
        },
        _ => None,
    }
}

/// Builds the plan of hub cluster `index`.
pub(crate) fn hub_plan(params: &FleetParams, index: u64) -> HubPlan {
    hub_plan_created(params, index, None)
}

/// The plan of hub cluster `index`, created at `created` when given (a
/// churn arrival, `plan::Replacements`); the seeded time is drawn either way.
fn hub_plan_created(params: &FleetParams, index: u64, created: Option<Ms>) -> HubPlan {
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed ^ HUB_SALT);
    rng.set_stream(index);
    let drawn = params.created_at(index, &mut rng);
    let created = created.unwrap_or(drawn);
    let platform = HUB_PLATFORMS[rng.random_range(0..HUB_PLATFORMS.len())];
    let namespace = HUB_NAMESPACES[rng.random_range(0..HUB_NAMESPACES.len())];
    // Names are unique across namespaces: the ManagedCluster, named like the
    // HostedCluster, is cluster-scoped.
    let name = format!("{}-{index:05}", platform.to_ascii_lowercase());
    // `hypershift create cluster` sets spec.clusterID; a HostedCluster
    // applied from a bare manifest may not have one yet.
    let spec_cluster_id = rng.random_bool(0.5).then(|| uuid(&mut rng));
    let pools: Vec<(String, u32)> = (1..=rng.random_range(1..=2u32))
        .map(|i| (format!("workers-{i}"), rng.random_range(2..=3)))
        .collect();
    let fault = if params.faults {
        pick_fault(&mut rng, platform)
    } else {
        None
    };
    let mut at = |base: Ms, lo: f64, hi: f64| base + params.ms(rng.random_range(lo..hi));
    let cp_ready = at(created, 180.0, 360.0);
    let hc_available = at(cp_ready, 60.0, 180.0);
    let mc_joined = at(hc_available, 30.0, 120.0);
    let nodes = if platform == "Agent" {
        (300.0, 600.0)
    } else {
        (120.0, 480.0)
    };
    let pools_ready: Vec<Ms> = pools
        .iter()
        .map(|_| at(hc_available, nodes.0, nodes.1))
        .collect();
    let invalid_image = at(created, 10.0, 40.0);
    // Day 2, after a healthy creation no other fault touches (the
    // deletion's, drawn later, peeked at); before the lifetime, as a
    // faulty cluster lingers.
    let mut fault = fault;
    let mut day2_plan = Day2::default();
    if params.day2 && fault.is_none() && !finalizer_stuck_ahead(params, index) {
        let done = pools_ready.iter().copied().fold(hc_available, Ms::max);
        let (d, f) = day2::draw(&Day2Draw {
            seed: params.seed,
            speed: params.speed,
            salt: HUB_DAY2_SALT,
            index,
            done,
            pools: pools.len(),
            pool_prefix: "workers-",
            version: super::kube::objects::SIM_VERSION,
            may_fault: params.faults,
            rp_updating: params.rp_updating,
            pool_fault: Some(match platform {
                "KubeVirt" => FaultKind::AddedPoolVmUnschedulable,
                "Agent" => FaultKind::AddedPoolNoFreeAgent,
                _ => FaultKind::NodePoolNeverReachesIgnition,
            }),
            // The hub has no Clusters Service.
            cs_node_pool_error: false,
        });
        day2_plan = d;
        fault = f;
    }
    let lifetime = if fault.is_some() {
        FAULTY_LIFETIME_S
    } else {
        LIFETIME_S
    };
    let deleting = at(created, lifetime.0, lifetime.1);
    let gone = at(deleting, 60.0, 180.0);
    let desired: u32 = pools.iter().map(|(_, n)| n).sum();
    let first = pools.first().map_or(0, |(_, n)| *n);

    let mut p = HubPlan {
        index,
        name,
        namespace,
        platform,
        spec_cluster_id,
        fault,
        created,
        cp_ready: Some(cp_ready),
        hc_available: Some(hc_available),
        mc_joined: Some(mc_joined),
        pools_ready,
        // Exactly enough Agents, unless the fault leaves the first pool none.
        agents: if platform == "Agent" { desired } else { 0 },
        degraded_after: SignedDuration::from_millis(params.ms(DEGRADED_AFTER_WORLD_S)),
        invalid_image: None,
        deleting: params.churn.then_some(deleting),
        // HyperShift deletes what hangs off the HostedCluster first.
        dependents_gone: params.churn.then_some(deleting + (gone - deleting) / 2),
        gone: params.churn.then_some(gone),
        pools,
        day2: Day2::default(),
    };
    p.day2 = day2_plan.before(p.deleting);
    // The inventory holds Agents for a pool added later, unless its fault
    // is that it does not.
    if let Some(a) = &p.day2.added
        && platform == "Agent"
        && fault != Some(FaultKind::AddedPoolNoFreeAgent)
    {
        p.agents += a.replicas;
    }
    // A healthy cluster whose deletion the finalizer holds, from its own
    // stream (docs/design/11-simulated-world.md §11.9).
    if params.churn && params.faults && p.fault.is_none() {
        let mut stuck = ChaCha8Rng::seed_from_u64(params.seed ^ HUB_DELETION_SALT);
        stuck.set_stream(index);
        if stuck.random_range(0.0..1.0) < FINALIZER_STUCK_SHARE {
            p.fault = Some(FaultKind::HostedClusterFinalizerStuck);
            let held = params.ms(stuck.random_range(STUCK_DELETION_S.0..STUCK_DELETION_S.1));
            p.gone = p.gone.map(|g| g + held);
        }
    }
    match fault {
        Some(FaultKind::HostedClusterDegraded) => {
            // The kube-apiserver never comes up: Degraded, never Available.
            p.cp_ready = None;
            p.hc_available = None;
            p.mc_joined = None;
        }
        Some(FaultKind::ReleaseImageInvalid) => {
            p.invalid_image = Some(invalid_image);
            p.cp_ready = None;
            p.hc_available = None;
            p.mc_joined = None;
        }
        Some(FaultKind::ManagedClusterNeverJoins) => p.mc_joined = None,
        // The inventory lacks the first pool's Agents: the others get theirs.
        Some(FaultKind::NoFreeAgent) => p.agents = desired - first,
        _ => {}
    }
    p
}

/// Whether the hub's deletion fault will be drawn for a healthy cluster
/// (its stream's first value): such a cluster runs no day-2 operation.
fn finalizer_stuck_ahead(params: &FleetParams, index: u64) -> bool {
    if !(params.churn && params.faults) {
        return false;
    }
    let mut stuck = ChaCha8Rng::seed_from_u64(params.seed ^ HUB_DELETION_SALT);
    stuck.set_stream(index);
    stuck.random_range(0.0..1.0f64) < FINALIZER_STUCK_SHARE
}

/// The hub's plans alive at `t`, grown lazily by churn like the ARO fleet's.
pub(crate) struct HubFleet {
    params: FleetParams,
    plans: Arc<Vec<Arc<HubPlan>>>,
    /// With churn: when each live cluster is replaced.
    churn: Option<Replacements>,
    next_prune: Ms,
}

const PRUNE_EVERY_MS: Ms = 5_000;

impl HubFleet {
    pub fn new(params: FleetParams) -> HubFleet {
        let plans: Vec<Arc<HubPlan>> = (0..params.clusters as u64)
            .map(|i| Arc::new(hub_plan(&params, i)))
            .collect();
        let churn = (params.churn && params.clusters > 0)
            .then(|| Replacements::new(plans.iter().map(|p| p.gone_at()), params.clusters as u64));
        HubFleet {
            next_prune: params.t0 + PRUNE_EVERY_MS,
            params,
            plans: Arc::new(plans),
            churn,
        }
    }

    /// Whether [`HubFleet::advance`] has work to do at `t`.
    pub fn stale(&self, t: Ms) -> bool {
        self.churn
            .as_ref()
            .and_then(Replacements::next_at)
            .is_some_and(|at| at <= t)
            || self.next_prune <= t
    }

    pub fn plans(&self) -> Arc<Vec<Arc<HubPlan>>> {
        self.plans.clone()
    }

    /// Admit churn arrivals due by `t`, prune clusters gone by then.
    pub fn advance(&mut self, t: Ms) -> Arc<Vec<Arc<HubPlan>>> {
        let mut plans: Vec<Arc<HubPlan>> = self
            .plans
            .iter()
            .filter(|p| p.gone_at().is_none_or(|g| g > t))
            .cloned()
            .collect();
        if let Some(churn) = self.churn.as_mut() {
            while let Some((index, created)) = churn.take_due(t) {
                let arrival = hub_plan_created(&self.params, index, Some(created));
                churn.admitted(arrival.gone_at());
                if arrival.gone_at().is_none_or(|g| g > t) {
                    plans.push(Arc::new(arrival));
                }
            }
        }
        self.plans = Arc::new(plans);
        self.next_prune = t + PRUNE_EVERY_MS;
        self.plans.clone()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn params(seed: u64) -> FleetParams {
        FleetParams {
            seed,
            clusters: 50,
            speed: 1.0,
            faults: true,
            churn: true,
            subscriptions: vec![],
            t0: 1_750_000_000_000,
            not_handed_over: 0.0,
            failure_burst: None,
            day2: true,
            rp_updating: false,
            cs_node_pool_error: false,
        }
    }

    #[test]
    fn same_seed_same_hub_and_every_platform_and_namespace_occurs() {
        let a: Vec<HubPlan> = (0..200).map(|i| hub_plan(&params(3), i)).collect();
        let b: Vec<HubPlan> = (0..200).map(|i| hub_plan(&params(3), i)).collect();
        assert_eq!(a, b);
        for platform in HUB_PLATFORMS {
            assert!(a.iter().any(|p| p.platform == platform), "{platform}");
        }
        for ns in HUB_NAMESPACES {
            assert!(a.iter().any(|p| p.namespace == ns), "{ns}");
        }
        let names: std::collections::BTreeSet<&str> = a.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names.len(), a.len(), "names are unique across namespaces");
    }

    #[test]
    fn platform_faults_only_on_their_platform() {
        for i in 0..400 {
            let p = hub_plan(&params(9), i);
            match p.fault {
                Some(FaultKind::KubeVirtMachinesPending) => assert_eq!(p.platform, "KubeVirt"),
                Some(FaultKind::NoFreeAgent) => {
                    assert_eq!(p.platform, "Agent");
                    let desired: u32 = p.pools.iter().map(|(_, n)| n).sum();
                    assert!(p.agents < desired);
                }
                _ => {}
            }
        }
    }

    #[test]
    fn a_healthy_creation_fits_every_hop_budget() {
        // Budgets of docs/design/03-timeline-model.md §3.5: control plane and HostedCluster
        // 15 min from the start, node pools 30 min.
        for i in 0..300 {
            let p = hub_plan(&params(4), i);
            if p.fault.is_some() {
                continue;
            }
            let min = |ms: Ms| (ms - p.created) as f64 / 60_000.0;
            assert!(min(p.hc_available.unwrap()) < 15.0);
            assert!(min(p.cp_ready.unwrap()) < 15.0);
            assert!(p.pools_ready.iter().all(|t| min(*t) < 30.0));
            assert!(p.mc_joined.unwrap() - p.hc_available.unwrap() < 15 * 60_000);
        }
    }
}
