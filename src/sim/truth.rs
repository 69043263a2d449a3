//! Ground truth: what a correct exporter should report for each cluster at a
//! given instant. Computed from the plan with DESIGN section 1's phase table
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
