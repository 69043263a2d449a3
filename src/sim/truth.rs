//! Ground truth: what a correct exporter should report for each cluster at a
//! given instant. Computed from the plan with the phase tables of docs/design.md §2.2 (see §11.4)
//! written out again here, on purpose without calling any exporter mapping
//! function, so the truth stays an independent check.

use std::collections::BTreeMap;

use jiff::Timestamp;

use super::plan::{Ms, Plan};
use super::state::{find, reached, trunc_s};
use super::{FaultKind, Truth, TruthCluster, TruthHop};
use crate::model::{Hop, Phase};

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
    let st = p.status_time(t);
    let mut hc_ready: Option<Ms> = None;
    if p.bundle_exists(t) {
        let (phase, state, ready_at) = match st {
            _ if p.bundle_deleted_at(t).is_some() => {
                let ready = st.and_then(|st| work_ready_at(&p.bundle_conditions(st)));
                (Phase::Deleting, "Deleting", ready)
            }
            None => (Phase::Pending, "NoStatus", None),
            Some(st) => {
                let ready = work_ready_at(&p.bundle_conditions(st));
                (
                    if ready.is_some() {
                        Phase::Ready
                    } else {
                        Phase::Progressing
                    },
                    work_state(ready),
                    ready,
                )
            }
        };
        hops.insert(
            Hop::MaestroBundle,
            TruthHop {
                phase,
                state: state.to_string(),
                ready_at: ready_at.map(ts),
            },
        );

        // The nested views exist once the agent reported; they keep their
        // last served content while the bundle is being deleted.
        if let Some(st) = st {
            let ready = work_ready_at(&p.mw_conditions(st));
            hops.insert(
                Hop::Manifestwork,
                TruthHop {
                    phase: if ready.is_some() {
                        Phase::Ready
                    } else {
                        Phase::Progressing
                    },
                    state: work_state(ready).to_string(),
                    ready_at: ready.map(ts),
                },
            );

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
            hc_ready = available;
            let phase = if invalid {
                Phase::Failed
            } else if available.is_some() {
                Phase::Ready
            } else {
                Phase::Progressing
            };
            let (history, _, _) = p.hc_history(st);
            hops.insert(
                Hop::HostedCluster,
                TruthHop {
                    phase,
                    state: history.to_string(),
                    ready_at: available.map(ts),
                },
            );

            let views: Vec<_> = p.pools.iter().map(|pool| p.np_view(pool, st)).collect();
            let failed = views.iter().any(|v| {
                [
                    "ValidReleaseImage",
                    "ValidPlatformImage",
                    "ValidMachineConfig",
                ]
                .iter()
                .any(|k| find(&v.conditions, k).is_some_and(|c| !c.is_true()))
            });
            let ready = views.iter().all(|v| {
                v.desired == 0
                    || (find(&v.conditions, "Ready").is_some_and(|c| c.is_true())
                        && v.ready == v.desired)
            });
            let phase = if failed {
                Phase::Failed
            } else if ready {
                Phase::Ready
            } else {
                Phase::Progressing
            };
            let ready_at = ready
                .then(|| {
                    views
                        .iter()
                        .filter_map(|v| find(&v.conditions, "Ready").map(|c| c.since))
                        .max()
                })
                .flatten();
            let ready_nodes: i64 = views.iter().map(|v| v.ready).sum();
            let desired: i64 = views.iter().map(|v| v.desired).sum();
            hops.insert(
                Hop::NodePool,
                TruthHop {
                    phase,
                    state: format!("{ready_nodes}/{desired}"),
                    ready_at: ready_at.map(ts),
                },
            );
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
        || st.is_some_and(|st| reached(p.hc_invalid_image, st));

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
    })
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
        }
    }
}

/// The management cluster's direct view of one creation at `now`, from the
/// spec's times and the phase tables of docs/design.md §2.2 (written out again here,
/// independent of the exporter's mapping and of the object renderer).
/// `degraded_budget`: how long a HostedCluster may be Degraded, never having
/// been Available, before it counts as failed (failed at the budget, as the
/// model decides it).
pub(crate) fn management(
    spec: &crate::sim::kube::KubeClusterSpec,
    now: Timestamp,
    degraded_budget: std::time::Duration,
) -> BTreeMap<Hop, TruthHop> {
    use crate::sources::kube::KubeMode;
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
        KubeMode::Aro => {
            let applied = reached(spec.manifestwork_applied_at)
                .filter(|_| !faults.manifestwork_never_applied);
            hops.insert(
                Hop::Manifestwork,
                match applied {
                    Some(at) => hop(Phase::Ready, "Available", Some(at)),
                    None => hop(Phase::Pending, "NoStatus", None),
                },
            );
            applied
        }
        KubeMode::SelfManaged => Some(spec.created_at),
    };
    let Some(start) = start else {
        return hops;
    };

    let available =
        reached(spec.hosted_cluster_available_at).filter(|_| !faults.hosted_cluster_degraded);
    let degraded_since = faults
        .hosted_cluster_degraded
        .then(|| {
            let after = faults
                .degraded_after
                .unwrap_or(crate::sim::kube::objects::DEGRADED_AFTER);
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

    if !spec.node_pools.is_empty() {
        let mut ready_nodes = 0u64;
        let mut desired_nodes = 0u64;
        let mut all_ready = true;
        let mut last_ready: Option<Timestamp> = None;
        for (_, desired, ready_at) in &spec.node_pools {
            desired_nodes += u64::from(*desired);
            let ready = reached(*ready_at).filter(|_| !faults.node_pool_stuck_at_zero);
            match ready {
                Some(at) => {
                    ready_nodes += u64::from(*desired);
                    last_ready = last_ready.max(Some(at));
                }
                None if *desired == 0 => {}
                None => all_ready = false,
            }
        }
        let state = format!("{ready_nodes}/{desired_nodes}");
        hops.insert(
            Hop::NodePool,
            if all_ready {
                hop(Phase::Ready, &state, last_ready)
            } else {
                hop(Phase::Progressing, &state, None)
            },
        );
    }
    hops
}
