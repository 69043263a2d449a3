//! Ground truth: what a correct exporter should report for each cluster at a
//! given instant. Computed from the plan with the phase tables of docs/design/02-hops-and-phases.md §2.2 (see §11.4)
//! written out again here, on purpose without calling any exporter mapping
//! function, so the truth stays an independent check.

use std::collections::BTreeMap;

use jiff::Timestamp;

use super::plan::{Ms, Plan};
use super::state::{find, reached, trunc_s};
use super::{FaultKind, Truth, TruthCluster, TruthHop};
use hcp_flow_model::{Hop, Phase};

pub(crate) fn ts(ms: Ms) -> Timestamp {
    Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn rp_phase(state: &str) -> Phase {
    match state {
        "Accepted" => Phase::Pending,
        "Provisioning" | "Updating" => Phase::Progressing,
        "Succeeded" => Phase::Ready,
        "Failed" | "Canceled" => Phase::Failed,
        "Deleting" => Phase::Deleting,
        _ => Phase::Unknown,
    }
}

fn cs_phase(state: &str) -> Phase {
    match state {
        "waiting" | "validating" | "pending" => Phase::Pending,
        "installing" | "updating" | "powering_down" | "resuming" => Phase::Progressing,
        "ready" | "hibernating" => Phase::Ready,
        "error" => Phase::Failed,
        "uninstalling" => Phase::Deleting,
        _ => Phase::Unknown,
    }
}

pub(crate) fn truth(plans: &[std::sync::Arc<Plan>], t: Ms) -> Truth {
    Truth {
        at: ts(t),
        clusters: plans.iter().filter_map(|p| cluster(p, t)).collect(),
    }
}

/// The truth about one cluster, `None` when nothing of it is served at `t`.
pub(crate) fn cluster(p: &Plan, t: Ms) -> Option<TruthCluster> {
    let mut hops = BTreeMap::new();
    let tc = p.creation_time(t);

    if let Some(state) = p.rp_state(t) {
        let ready_at = p.rp_succeeded.filter(|s| *s <= tc).map(ts);
        hops.insert(
            Hop::RpFrontend,
            TruthHop {
                phase: rp_phase(state),
                state: state.to_string(),
                ready_at,
            },
        );
    }
    if let Some(state) = p.cs_state(t) {
        let ready_at = p.cs_ready.filter(|s| *s <= tc).map(ts);
        hops.insert(
            Hop::ClustersService,
            TruthHop {
                phase: cs_phase(state),
                state: state.to_string(),
                ready_at,
            },
        );
    }
    // Every bundle and what its feedback fills (docs/design/02-hops-and-phases.md §2.5, §2.6):
    // each is one object of its hop.
    let mut bundles = Vec::new();
    let mut works = Vec::new();
    let mut hosted = Vec::new();
    let mut pools = Vec::new();
    let mut pool_nodes = (0i64, 0i64);
    let mut hc_st: Option<Ms> = None;
    for b in p.bundles_at(t) {
        let st = p.status_time(b, t);
        let deleting = p.bundle_deleted_at(b, t).is_some();
        bundles.push(match st {
            _ if deleting => {
                let ready = st.and_then(|st| work_ready_at(&p.bundle_conditions(b, st)));
                Obj::new(Phase::Deleting, "Deleting", ready)
            }
            None => Obj::new(Phase::Pending, "NoStatus", None),
            Some(st) => {
                let ready = work_ready_at(&p.bundle_conditions(b, st));
                Obj::new(work_phase(ready), work_state(ready), ready)
            }
        });
        // The nested views exist once the agent reported. Before the
        // first report the exporter cannot read them, and shows each object
        // the bundle carries as unknown, `no_status`.
        let Some(st) = st else {
            works.push(Obj::new(Phase::Unknown, NO_STATUS, None));
            match b.pool {
                None => hosted.push(Obj::new(Phase::Unknown, NO_STATUS, None)),
                Some(_) => pools.push(Obj::new(Phase::Unknown, NO_STATUS, None)),
            }
            continue;
        };
        let ready = work_ready_at(&p.mw_conditions(b, st));
        // A deleted bundle's objects are being deleted with it (Maestro
        // deletes in the foreground): each reads deleting, as the exporter
        // reads the feedback of a bundle with `deleted_at`.
        if deleting {
            works.push(Obj::new(Phase::Deleting, "deleting", ready));
            match b.pool {
                None => {
                    hc_st = Some(st);
                    hosted.push(Obj::new(Phase::Deleting, "deleting", None));
                }
                Some(_) => pools.push(Obj::new(Phase::Deleting, "deleting", None)),
            }
            continue;
        }
        works.push(Obj::new(work_phase(ready), work_state(ready), ready));
        match b.pool {
            None => {
                hc_st = Some(st);
                hosted.push(hosted_cluster(p, st));
            }
            Some(i) => {
                let (pool, (ready, desired)) = node_pool(p, i, st);
                pool_nodes.0 += ready;
                pool_nodes.1 += desired;
                pools.push(pool);
            }
        }
    }
    // When the HostedCluster first became Available as served: a later
    // outage (HostedClusterUnavailable) does not undo the completion.
    let hc_ready = hc_st
        .and_then(|st| p.hc_available.filter(|a| *a <= st))
        .map(trunc_s);
    for (hop, objects) in [
        (Hop::MaestroBundle, bundles),
        (Hop::Manifestwork, works),
        (Hop::HostedCluster, hosted),
        (Hop::NodePool, pools),
    ] {
        if let Some(mut h) = aggregate(&objects) {
            if hop == Hop::NodePool && h.phase != Phase::Unknown {
                h.state = format!("{}/{}", pool_nodes.0, pool_nodes.1);
            }
            hops.insert(hop, h);
        }
    }
    if hops.is_empty() {
        return None;
    }

    // Served times: the HostedCluster's Available time as its condition says.
    let completed_at = match (hc_ready, p.rp_succeeded.filter(|s| *s <= tc)) {
        (Some(hc), Some(rp)) => Some(ts(hc.max(rp))),
        _ => None,
    };
    let failed = reached(p.cs_error, tc)
        || reached(p.rp_failed, tc)
        || hc_st.is_some_and(|st| reached(p.hc_invalid_image, st));

    Some(TruthCluster {
        cluster_id: p.cluster_id.clone(),
        name: p.name.clone(),
        resource_id: p.resource_id(),
        subscription_id: p.subscription_id.clone(),
        resource_group: p.resource_group.clone(),
        mgmt_cluster: p.shard().mgmt_cluster.to_string(),
        created_at: ts(p.created),
        completed_at,
        failed,
        hops,
        fault: p.fault,
        management: BTreeMap::new(),
        management_faults: Default::default(),
        expected_alert: p.fault.map(FaultKind::expected_alert),
    })
}

/// One node pool as its bundle's feedback shows it at `st`, with its ready
/// and desired replicas.
fn node_pool(p: &Plan, i: usize, st: Ms) -> (Obj, (i64, i64)) {
    let v = p.np_view(i, st);
    let failed = [
        "ValidReleaseImage",
        "ValidPlatformImage",
        "ValidMachineConfig",
    ]
    .iter()
    .any(|k| find(&v.conditions, k).is_some_and(|c| !c.is_true()));
    let ready_cond = find(&v.conditions, "Ready").filter(|c| c.is_true());
    let ready = v.desired == 0 || (ready_cond.is_some() && v.ready == v.desired);
    let phase = if failed {
        Phase::Failed
    } else if ready {
        Phase::Ready
    } else {
        Phase::Progressing
    };
    let ready_at = ready.then(|| ready_cond.map(|c| c.since)).flatten();
    (Obj::new(phase, "", ready_at), (v.ready, v.desired))
}

/// The `state` the exporter shows for a nested object whose bundle has no
/// status yet.
const NO_STATUS: &str = "no_status";

/// One object of a hop.
struct Obj {
    phase: Phase,
    state: String,
    ready_at: Option<Ms>,
}

impl Obj {
    fn new(phase: Phase, state: &str, ready_at: Option<Ms>) -> Obj {
        Obj {
            phase,
            state: state.to_string(),
            ready_at,
        }
    }
}

/// A hop of several objects, by the rule of docs/design/02-hops-and-phases.md §2.5 written
/// out again: failed when one failed; deleting when all are; unknown when
/// one is; ready when every live one is, since the last of them became
/// ready; pending when every live one is; else progressing. `None` without
/// objects.
fn aggregate(objects: &[Obj]) -> Option<TruthHop> {
    let first = objects.first()?;
    let live: Vec<&Obj> = objects
        .iter()
        .filter(|o| o.phase != Phase::Deleting)
        .collect();
    let find = |phase: Phase| objects.iter().find(|o| o.phase == phase);
    let hop = |phase: Phase, o: &Obj, ready_at: Option<Ms>| TruthHop {
        phase,
        state: o.state.clone(),
        ready_at: ready_at.map(ts),
    };
    let last_ready = || live.iter().filter_map(|o| o.ready_at).max();
    Some(if let Some(o) = find(Phase::Failed) {
        hop(Phase::Failed, o, None)
    } else if live.is_empty() {
        hop(Phase::Deleting, first, None)
    } else if let Some(o) = find(Phase::Unknown) {
        hop(Phase::Unknown, o, None)
    } else if live.iter().all(|o| o.phase == Phase::Ready) {
        hop(Phase::Ready, live[0], last_ready())
    } else if live.iter().all(|o| o.phase == Phase::Pending) {
        hop(Phase::Pending, live[0], None)
    } else {
        let o = live
            .iter()
            .find(|o| o.phase == Phase::Progressing)
            .or_else(|| live.iter().find(|o| o.phase != Phase::Ready))
            .unwrap_or(&live[0]);
        hop(Phase::Progressing, o, None)
    })
}

/// The HostedCluster as its feedback shows it at status time `st`.
fn hosted_cluster(p: &Plan, st: Ms) -> Obj {
    let conds = p.hc_conditions(st);
    let invalid = [
        "ValidConfiguration",
        "ValidReleaseImage",
        "ValidReleaseInfo",
    ]
    .iter()
    .any(|k| find(&conds, k).is_some_and(|c| !c.is_true()));
    let available = find(&conds, "Available")
        .filter(|c| c.is_true())
        .map(|c| c.since);
    let phase = if invalid {
        Phase::Failed
    } else if available.is_some() {
        Phase::Ready
    } else {
        Phase::Progressing
    };
    let history = p.hc_history(st).first().map_or("", |h| h.state);
    // Ready since it first was, even after an outage it came back from.
    let first = available.map(|since| p.hc_available.map_or(since, trunc_s));
    Obj::new(phase, history, first)
}

fn work_phase(ready: Option<Ms>) -> Phase {
    if ready.is_some() {
        Phase::Ready
    } else {
        Phase::Progressing
    }
}

/// Work (bundle or ManifestWork) is ready when Applied and Available are both
/// True; it became ready when the later of the two turned True.
fn work_ready_at(conds: &[super::state::Cond]) -> Option<Ms> {
    let applied = find(conds, "Applied").filter(|c| c.is_true())?;
    let available = find(conds, "Available").filter(|c| c.is_true())?;
    Some(trunc_s(applied.since.max(available.since)))
}

fn work_state(ready: Option<Ms>) -> &'static str {
    if ready.is_some() {
        "Available"
    } else {
        "Applied"
    }
}

impl FaultKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::ClustersServiceError => "clusters_service_error",
            FaultKind::BundleNeverApplied => "bundle_never_applied",
            FaultKind::MaestroStatusNotUpdated => "maestro_status_not_updated",
            FaultKind::HostedClusterDegraded => "hosted_cluster_degraded",
            FaultKind::NodePoolStuck => "node_pool_stuck",
            FaultKind::UnknownClustersServiceState => "unknown_clusters_service_state",
            FaultKind::UnknownProvisioningState => "unknown_provisioning_state",
            FaultKind::NodePoolBundleNeverApplied => "node_pool_bundle_never_applied",
            FaultKind::NotHandedOver => "not_handed_over",
            FaultKind::HostedClusterUnavailable => "hosted_cluster_unavailable",
            FaultKind::KubeVirtMachinesPending => "kubevirt_machines_pending",
            FaultKind::NoFreeAgent => "no_free_agent",
            FaultKind::ReleaseImageInvalid => "release_image_invalid",
            // The name the ARO world's management-only draw has too
            // (`ground::MANAGED_CLUSTER_NEVER_JOINS`, checked there).
            FaultKind::ManagedClusterNeverJoins => "managed_cluster_never_joins",
            FaultKind::HostedClusterFinalizerStuck => "hosted_cluster_finalizer_stuck",
            FaultKind::ManifestWorkAgentGone => "manifestwork_agent_gone",
            FaultKind::ClustersServiceUninstallError => "clusters_service_uninstall_error",
            FaultKind::RpStuckDeleting => "rp_stuck_deleting",
            FaultKind::NodePoolNeverReachesIgnition => "node_pool_never_reaches_ignition",
            FaultKind::UpgradeStuckPartial => "upgrade_stuck_partial",
            FaultKind::NodePoolStuckUpdating => "node_pool_stuck_updating",
            FaultKind::AddedPoolVmUnschedulable => "added_pool_vm_unschedulable",
            FaultKind::AddedPoolNoFreeAgent => "added_pool_no_free_agent",
            FaultKind::CsNodePoolError => "cs_node_pool_error",
            FaultKind::CsNodePoolUpgradeError => "cs_node_pool_upgrade_error",
        }
    }

    /// The operations the fault holds and the hops at which it shows in
    /// each: where it stops, fails or regresses its operation, and the hops
    /// of that operation that wait on it. An alert about this cluster
    /// naming another operation or hop is not the fault's (the
    /// alert-fidelity tests count it a false alarm). The first is the
    /// fault's own operation (`None` for a regression no operation owns).
    ///
    /// A fault that keeps a creation or a deletion from ever ending holds
    /// every hop of it: the RP and Clusters Service stay in flight until the
    /// end, and what the agent never reported stays unknown. Each pool
    /// created with the cluster is a `node_pool_create` of its own
    /// (docs/design/15-operations.md §15.9): a creation fault that keeps the pools from
    /// their nodes (or from ever being made) holds those too, and a
    /// deletion fault the pools' removals. The other faults hold their own
    /// operation's hops only.
    pub fn holds(self) -> &'static [(Option<&'static str>, &'static [Hop])] {
        use Hop::*;
        const POOL: &[Hop] = &[RpFrontend, ClustersService, NodePool];
        const CREATE: Option<&str> = Some("create");
        const POOLS: (Option<&str>, &[Hop]) = (Some("node_pool_create"), POOL);
        match self {
            FaultKind::ClustersServiceError
            | FaultKind::BundleNeverApplied
            | FaultKind::HostedClusterDegraded
            | FaultKind::NotHandedOver
            | FaultKind::ReleaseImageInvalid => &[(CREATE, &Hop::ALL), POOLS],
            FaultKind::HostedClusterFinalizerStuck
            | FaultKind::ManifestWorkAgentGone
            | FaultKind::ClustersServiceUninstallError
            | FaultKind::RpStuckDeleting => &[
                (Some("delete"), &Hop::ALL),
                (Some("node_pool_delete"), POOL),
            ],
            // The bundle's status froze; what its feedback shows froze too.
            FaultKind::MaestroStatusNotUpdated => &[
                (
                    CREATE,
                    &[MaestroBundle, Manifestwork, HostedCluster, NodePool],
                ),
                POOLS,
            ],
            FaultKind::UnknownClustersServiceState => &[(CREATE, &[ClustersService])],
            FaultKind::UnknownProvisioningState => &[(CREATE, &[RpFrontend])],
            FaultKind::NodePoolBundleNeverApplied => {
                &[(CREATE, &[MaestroBundle, Manifestwork, NodePool]), POOLS]
            }
            FaultKind::NodePoolStuck
            | FaultKind::KubeVirtMachinesPending
            | FaultKind::NoFreeAgent => &[(CREATE, &[NodePool]), POOLS],
            FaultKind::NodePoolNeverReachesIgnition
            | FaultKind::AddedPoolVmUnschedulable
            | FaultKind::AddedPoolNoFreeAgent => &[POOLS],
            FaultKind::CsNodePoolError => {
                &[(Some("node_pool_create"), &[RpFrontend, ClustersService])]
            }
            FaultKind::CsNodePoolUpgradeError => &[(
                Some("node_pool_upgrade"),
                &[RpFrontend, ClustersService, NodePool],
            )],
            FaultKind::NodePoolStuckUpdating => &[(Some("node_pool_upgrade"), POOL)],
            FaultKind::UpgradeStuckPartial => &[(
                Some("upgrade"),
                &[RpFrontend, ClustersService, HostedCluster],
            )],
            FaultKind::HostedClusterUnavailable => &[(None, &[HostedCluster])],
            FaultKind::ManagedClusterNeverJoins => &[(CREATE, &[ManagedCluster])],
        }
    }

    /// The alert (in `alerts/`) an exporter reading this world should raise
    /// for the fault: the one that names its cause most directly, where
    /// several fire.
    pub fn expected_alert(self) -> &'static str {
        match self {
            // OCM4001 fails the clusters_service hop.
            FaultKind::ClustersServiceError => "HCPHopFailed",
            // No status at all: nothing updates the bundle.
            FaultKind::BundleNeverApplied
            | FaultKind::MaestroStatusNotUpdated
            | FaultKind::NodePoolBundleNeverApplied => "HCPMaestroStatusNotUpdated",
            FaultKind::HostedClusterDegraded => "HCPHostedClusterDegraded",
            // Pools short of ready nodes, whatever keeps the machines.
            FaultKind::NodePoolStuck
            | FaultKind::KubeVirtMachinesPending
            | FaultKind::NoFreeAgent => "HCPNodePoolBelowDesired",
            // ValidReleaseImage False fails the hop at once.
            FaultKind::ReleaseImageInvalid => "HCPHopFailed",
            FaultKind::ManagedClusterNeverJoins => "HCPManagedClusterNotJoined",
            FaultKind::UnknownClustersServiceState | FaultKind::UnknownProvisioningState => {
                "HCPUnknownUpstreamValues"
            }
            FaultKind::NotHandedOver => "HCPCreationNotHandedOver",
            // A completed cluster's regression pages.
            FaultKind::HostedClusterUnavailable => "HCPHostedClusterUnavailable",
            // A deletion waits at a hop past its deletion budget; a day-2
            // operation, at its one hop past that operation's budget.
            FaultKind::HostedClusterFinalizerStuck
            | FaultKind::ManifestWorkAgentGone
            | FaultKind::RpStuckDeleting
            | FaultKind::NodePoolNeverReachesIgnition
            | FaultKind::UpgradeStuckPartial
            | FaultKind::NodePoolStuckUpdating
            | FaultKind::AddedPoolVmUnschedulable
            | FaultKind::AddedPoolNoFreeAgent => "HCPOperationStuckAtHop",
            // The uninstall error fails the clusters_service hop.
            FaultKind::ClustersServiceUninstallError => "HCPHopFailed",
            // Clusters Service failing an added pool fails that pool's
            // creation there, which no hop of the cluster shows.
            FaultKind::CsNodePoolError => "HCPOperationFailed",
            // Clusters Service failing a pool during its upgrade fails the
            // upgrade there.
            FaultKind::CsNodePoolUpgradeError => "HCPOperationFailed",
        }
    }
}

/// The management cluster's direct view of one creation at `now`, from the
/// spec's times and the phase tables of docs/design/02-hops-and-phases.md §2.2 (written out again here,
/// independent of the exporter's mapping and of the object renderer).
/// `degraded_budget`: how long a HostedCluster may be Degraded, never having
/// been Available, before it counts as failed (failed at the budget, as the
/// model decides it).
pub(crate) fn management(
    spec: &crate::kube::KubeClusterSpec,
    x: &crate::kube::KubeExtras,
    now: Timestamp,
    degraded_budget: std::time::Duration,
) -> BTreeMap<Hop, TruthHop> {
    use crate::kube::ClusterLayout;
    // The day-2 times as the objects show them: each change at its instant.
    let x = &x.as_served(now);
    let reached = |t: Option<Timestamp>| t.filter(|t| *t <= now);
    let hop = |phase: Phase, state: &str, ready_at: Option<Timestamp>| TruthHop {
        phase,
        state: state.to_string(),
        ready_at,
    };
    let mut hops = BTreeMap::new();
    if now < spec.created_at {
        return hops;
    }
    let faults = &spec.faults;
    // ARO: everything below the ManifestWork exists once the work agent
    // applied it; self-managed: the HostedCluster is where it starts.
    let start = match spec.mode {
        ClusterLayout::Aro => {
            let applied = reached(spec.manifestwork_applied_at)
                .filter(|_| !faults.manifestwork_never_applied);
            // The HostedCluster's work and one per pool; the first pool's
            // never gets a status with its fault. Ready when all are.
            let pool_work_stuck = applied.is_some()
                && faults.node_pool_work_never_applied
                && !spec.node_pools.is_empty();
            hops.insert(
                Hop::Manifestwork,
                match applied {
                    Some(_) if pool_work_stuck => hop(Phase::Progressing, "NoStatus", None),
                    // Ready since the last live work was: a pool's added
                    // later, unless it is being removed.
                    Some(at) => {
                        let added = x
                            .added_at(now)
                            .filter(|a| {
                                x.removal_of(&a.pool)
                                    .is_none_or(|r| reached(r.work_deleting).is_none())
                            })
                            .map(|a| a.created);
                        hop(
                            Phase::Ready,
                            "Available",
                            Some(added.map_or(at, |a| a.max(at))),
                        )
                    }
                    None => hop(Phase::Pending, "NoStatus", None),
                },
            );
            // Deleted: the works carry their deletionTimestamp until gone.
            if reached(spec.deletion.work_deleting_at).is_some() {
                hops.insert(Hop::Manifestwork, hop(Phase::Deleting, "deleting", None));
            }
            applied
        }
        ClusterLayout::SelfManaged => Some(spec.created_at),
    };
    let Some(start) = start else {
        return hops;
    };
    // The HostedCluster's finalizer cleared: it and what hangs off it are
    // gone (the works go after them).
    if reached(spec.deletion.objects_gone_at).is_some() {
        return hops;
    }
    // A deleted cluster: every object carries its deletionTimestamp until
    // it is gone.
    if spec.objects_deleting_at().is_some_and(|t| t <= now) {
        let deleting = || hop(Phase::Deleting, "deleting", None);
        hops.insert(Hop::HostedCluster, deleting());
        // HyperShift deletes what hangs off the HostedCluster first.
        if reached(spec.deletion.dependents_gone_at).is_none() {
            for h in [Hop::ControlPlane, Hop::ManagedCluster] {
                hops.insert(h, deleting());
            }
            if !spec.node_pools.is_empty() {
                hops.insert(Hop::NodePool, deleting());
            }
        }
        return hops;
    }
    let invalid_image = reached(faults.release_image_invalid_at);

    let available = reached(spec.hosted_cluster_available_at)
        .filter(|_| !faults.hosted_cluster_degraded && faults.release_image_invalid_at.is_none());
    // A lost control plane is progressing until it is back; the hop's
    // `ready_at` stays the first time it was ready.
    let available = available.filter(|_| {
        !faults
            .hosted_cluster_lost
            .is_some_and(|(lost, back)| lost <= now && now < back)
    });
    let degraded_since = faults
        .hosted_cluster_degraded
        .then(|| {
            let after = faults
                .degraded_after
                .unwrap_or(crate::kube::objects::DEGRADED_AFTER);
            start.checked_add(after).ok()
        })
        .flatten()
        .filter(|t| *t <= now);
    let over_budget = degraded_since.is_some_and(|since| {
        now.duration_since(since)
            .try_into()
            .is_ok_and(|d: std::time::Duration| d >= degraded_budget)
    });
    hops.insert(
        Hop::HostedCluster,
        match (available, over_budget) {
            // ValidReleaseImage False will not heal by itself: failed at once.
            _ if invalid_image.is_some() => hop(Phase::Failed, "ValidReleaseImage=False", None),
            (Some(at), _) => hop(Phase::Ready, "Completed", Some(at)),
            (None, true) => hop(Phase::Failed, "Degraded", None),
            (None, false) => hop(Phase::Progressing, "Partial", None),
        },
    );

    hops.insert(
        Hop::ControlPlane,
        match reached(spec.control_plane_ready_at) {
            Some(at) => hop(Phase::Ready, "4/4 pods ready", Some(at)),
            None => hop(Phase::Progressing, "1/4 pods ready", None),
        },
    );

    hops.insert(
        Hop::ManagedCluster,
        match reached(spec.managed_cluster_joined_at)
            .filter(|_| !faults.managed_cluster_never_joins)
        {
            Some(at) => hop(Phase::Ready, "Joined", Some(at)),
            None => hop(Phase::Progressing, "Accepted", None),
        },
    );

    if let Some(pools) = node_pool_truth(spec, x, now, invalid_image.is_some()) {
        hops.insert(Hop::NodePool, pools);
    }
    hops
}

/// The `node_pool` hop as a management cluster serves it: the creation's
/// NodePools (a removed one until it is gone) and one added later, ready
/// when every live pool is at its desired nodes; `None` without pools.
fn node_pool_truth(
    spec: &crate::kube::KubeClusterSpec,
    x: &crate::kube::KubeExtras,
    now: Timestamp,
    invalid_image: bool,
) -> Option<TruthHop> {
    use crate::kube::ClusterLayout;
    let reached = |t: Option<Timestamp>| t.filter(|t| *t <= now);
    let hop = |phase: Phase, state: &str, ready_at: Option<Timestamp>| TruthHop {
        phase,
        state: state.to_string(),
        ready_at,
    };
    let faults = &spec.faults;
    // The first pool's NodePool never reaches the cluster when its work is
    // never applied.
    let skip = usize::from(spec.mode == ClusterLayout::Aro && faults.node_pool_work_never_applied);
    let node_pools = spec.node_pools.get(skip..).unwrap_or_default();
    // (desired, ready since, deleting) of each NodePool served: the
    // creation's (a removed one until it is gone) and one added later.
    let mut pools: Vec<(u32, Option<Timestamp>, bool)> = Vec::new();
    for (i, (name, desired, ready_at)) in node_pools.iter().enumerate() {
        if x.pool_gone(name, now) {
            continue;
        }
        // Self-managed: the first pools' machines may stay pending.
        let pending = faults
            .machines_pending
            .is_some_and(|(_, pools)| i + skip < pools);
        let ready = reached(*ready_at).filter(|_| !faults.node_pool_stuck_at_zero && !pending);
        let deleting = x.removal_of(name).is_some_and(|r| r.deleting <= now);
        pools.push((*desired, ready, deleting));
    }
    if let Some(a) = x.added_at(now) {
        let deleting = x.removal_of(&a.pool).is_some_and(|r| r.deleting <= now);
        pools.push((a.replicas, reached(a.ready), deleting));
    }
    if !pools.is_empty() {
        let live: Vec<&(u32, Option<Timestamp>, bool)> =
            pools.iter().filter(|(_, _, deleting)| !deleting).collect();
        let ready_nodes: u64 = live
            .iter()
            .filter(|(_, ready, _)| ready.is_some())
            .map(|(d, _, _)| u64::from(*d))
            .sum();
        let desired_nodes: u64 = live.iter().map(|(d, _, _)| u64::from(*d)).sum();
        let all_ready = live.iter().all(|(d, ready, _)| ready.is_some() || *d == 0);
        let last_ready = live.iter().filter_map(|(_, ready, _)| *ready).max();
        let state = format!("{ready_nodes}/{desired_nodes}");
        return Some(if invalid_image {
            // The pools share the release: ValidReleaseImage False.
            hop(Phase::Failed, "ValidReleaseImage=False", None)
        } else if live.is_empty() {
            hop(Phase::Deleting, "deleting", None)
        } else if all_ready {
            hop(Phase::Ready, &state, last_ready)
        } else {
            hop(Phase::Progressing, &state, None)
        });
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    // The management side's truth and its objects agree on each day-2
    // change's instant (docs/design/11-simulated-world.md §11.10); here, not beside the day-2
    // plans, so the plans never name the truth built from them.
    #[test]
    fn the_management_truth_follows_the_objects_day2_instants() {
        let (spec, x) = crate::day2::tests::half_second_day2();
        let truth = |t: Ms| {
            super::management(
                &spec,
                &x,
                jiff::Timestamp::from_millisecond(t).unwrap(),
                std::time::Duration::from_secs(900),
            )
        };
        // The added pool: Ready, with every pool's nodes, at its instant,
        // dated as its Ready condition is.
        assert_eq!(truth(1_500_499)[&Hop::NodePool].phase, Phase::Progressing);
        let ready = &truth(1_500_500)[&Hop::NodePool];
        assert_eq!(ready.phase, Phase::Ready);
        assert_eq!(
            ready.ready_at,
            Some("1970-01-01T00:25:00Z".parse().unwrap())
        );
    }
}
