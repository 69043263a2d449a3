//! The demo's public ground truth: for every cluster of the world, the fault
//! injected into it, when it took effect, the alert it should raise and by
//! when (docs/design.md §11.6). Served by `hcp-flow demo` at
//! `/api/v1/demo/ground-truth`, read by the alert-fidelity test and by anyone
//! checking what the exporter and the rules detected against what happened.
//!
//! The deadlines are the rules' thresholds applied to the plan's times: a
//! hop budget (the world's, divided by its speed like the exporter's) from
//! the moment the fault made the hop stop, or the fixed hold of a rule that
//! has one. They are upper bounds: the rule may fire earlier when the hop's
//! phase began before the fault took effect. Evaluation, scrape and poll
//! delays are not included.

use std::time::Duration;

use jiff::Timestamp;
use serde::Serialize;

use super::hub::HubPlan;
use super::kube::KubeClusterFaults;
use super::plan::{Ms, Plan};
use super::state::trunc_s;
use super::truth::ts;
use super::{FaultKind, World};
use crate::model::{HopBudgets, provisional_cluster_id};

/// How long a hop must have been failed before `HCPHopFailed` fires: the
/// hold in its threshold (alerts/operations.yaml), real seconds, not scaled.
pub const HOP_FAILED_HOLD: Duration = Duration::from_secs(60);

/// A fault only the management cluster shows (not a [`FaultKind`], which
/// the service side serves).
pub const MANAGED_CLUSTER_NEVER_JOINS: &str = "managed_cluster_never_joins";

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroundTruth {
    /// The world's clock when this was computed.
    pub at: Timestamp,
    /// World seconds per real second.
    pub speed: f64,
    /// The hop budgets the world assumes (and the demo's exporter
    /// publishes), in seconds.
    pub hop_budgets_seconds: std::collections::BTreeMap<String, f64>,
    /// The seeded burst of failures, when the world has one.
    pub failure_burst: Option<FailureBurstTruth>,
    pub items: Vec<GroundTruthCluster>,
}

/// Every creation created in `[from, to)` fails: the fleet-level failure
/// rate the success SLO's burn-rate alert pages on.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FailureBurstTruth {
    pub from: Timestamp,
    pub to: Timestamp,
    pub expected_alert: &'static str,
    /// The operation whose SLO the burst burns (the alert's `operation`).
    pub operation: &'static str,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroundTruthCluster {
    /// The id the exporter gives the cluster: the Clusters Service id, or
    /// the provisional `arm:` id of a resource CS never got.
    pub cluster_id: String,
    pub name: String,
    pub resource_id: String,
    /// `None`: a healthy creation, which should raise no per-cluster alert.
    pub fault: Option<&'static str>,
    /// When the fault took effect (the hop stopped, failed or regressed).
    pub fault_at: Option<Timestamp>,
    /// The alert (in `alerts/`) the fault should raise.
    pub expected_alert: Option<&'static str>,
    /// By when the expected alert's condition holds at the latest.
    pub alert_due_at: Option<Timestamp>,
    /// Whether the expected alert is per cluster (carries `cluster_id`)
    /// or about a source (`HCPUnknownUpstreamValues`).
    pub per_cluster: bool,
}

impl World {
    /// The ground truth of every cluster the world serves now.
    pub fn ground_truth(&self) -> GroundTruth {
        let now = self.now_ms();
        let budgets = self.hop_budgets();
        let deletion = self.delete_budgets();
        let items = self
            .plans(now)
            .iter()
            .filter(|p| p.created <= now && p.gone_at().is_none_or(|gone| now < gone))
            .map(|p| cluster(p, &budgets, &deletion, self.kube_faults_of(p).as_ref()))
            .chain(
                self.hub_plans(now)
                    .iter()
                    .filter(|p| p.created <= now && p.gone_at().is_none_or(|gone| now < gone))
                    .map(|p| hub_cluster(p, &budgets, &deletion)),
            )
            .collect();
        GroundTruth {
            at: ts(now),
            speed: self.inner.cfg.speed,
            hop_budgets_seconds: budgets
                .iter()
                .map(|(hop, d)| (hop.as_str().to_string(), d.as_secs_f64()))
                .collect(),
            failure_burst: self
                .inner
                .params
                .failure_burst
                .map(|(from, to)| FailureBurstTruth {
                    from: ts(from),
                    to: ts(to),
                    expected_alert: "HCPOperationSuccessBudgetBurn",
                    operation: crate::model::OperationKind::Create.as_str(),
                }),
            items,
        }
    }
}

fn cluster(
    p: &Plan,
    budgets: &HopBudgets,
    deletion: &HopBudgets,
    mgmt: Option<&KubeClusterFaults>,
) -> GroundTruthCluster {
    let resource_id = p.resource_id();
    let cluster_id = if p.fault == Some(FaultKind::NotHandedOver) {
        provisional_cluster_id(&resource_id)
    } else {
        p.cluster_id.clone()
    };
    let mut out = GroundTruthCluster {
        cluster_id,
        name: p.name.clone(),
        resource_id,
        fault: None,
        fault_at: None,
        expected_alert: None,
        alert_due_at: None,
        per_cluster: true,
    };
    let add = |at: Ms, d: Duration| at + i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let when: Option<(Ms, Ms)> = match p.fault {
        Some(kind) => {
            out.fault = Some(kind.as_str());
            out.expected_alert = Some(kind.expected_alert());
            fault_times(p, kind, budgets, deletion, mgmt, add)
        }
        None if mgmt.is_some_and(|f| f.managed_cluster_never_joins) => {
            out.fault = Some(MANAGED_CLUSTER_NEVER_JOINS);
            out.expected_alert = Some("HCPManagedClusterNotJoined");
            // The budget counts from the later of the ManagedCluster's
            // phase change (when the management side started) and the
            // creation's completion, which comes later.
            let start = p.bundle_applied.unwrap_or(p.bundle_created);
            let completed = p
                .hc_available
                .zip(p.rp_succeeded)
                .map(|(hc, rp)| hc.max(rp));
            completed.map(|done| (done, add(done.max(start), budgets.managed_cluster)))
        }
        None => None,
    };
    out.per_cluster = out.expected_alert != Some("HCPUnknownUpstreamValues");
    if let Some((at, due)) = when {
        out.fault_at = Some(ts(at));
        out.alert_due_at = Some(ts(due));
    }
    out
}

/// (took effect, alert due) of a service-side fault.
fn fault_times(
    p: &Plan,
    kind: FaultKind,
    budgets: &HopBudgets,
    deletion: &HopBudgets,
    mgmt: Option<&KubeClusterFaults>,
    add: impl Fn(Ms, Duration) -> Ms,
) -> Option<(Ms, Ms)> {
    let pool_bundles = || p.bundles.iter().filter(|b| b.pool.is_some());
    match kind {
        FaultKind::ClustersServiceError => p.cs_error.map(|at| (at, add(at, HOP_FAILED_HOLD))),
        // No status ever: its last update is its creation.
        FaultKind::BundleNeverApplied => Some((
            p.bundle_created,
            add(p.bundle_created, budgets.maestro_bundle),
        )),
        // The status froze at the agent's first report.
        FaultKind::MaestroStatusNotUpdated => p
            .bundle_applied
            .map(|at| (at, add(at, budgets.maestro_bundle))),
        FaultKind::NodePoolBundleNeverApplied => pool_bundles()
            .find(|b| b.applied.is_none())
            .map(|b| (b.created, add(b.created, budgets.maestro_bundle))),
        // Seen through Maestro the release image turns invalid (failed at
        // once); on the management cluster Degraded turns True and the
        // model fails the hop at the budget. The later bound holds for both.
        FaultKind::HostedClusterDegraded => {
            let served = p.hc_invalid_image?;
            let direct = mgmt.and_then(|f| f.degraded_after).map(|after| {
                p.bundle_applied.unwrap_or(p.bundle_created) + after.as_millis() as Ms
            });
            let at = direct.map_or(served, |d| d.max(served));
            Some((served.min(at), add(at, budgets.hosted_cluster)))
        }
        // The pools appear with their bundles' first reports and never get
        // a ready node.
        FaultKind::NodePoolStuck => pool_bundles()
            .filter_map(|b| b.applied)
            .max()
            .map(|at| (at, add(at, budgets.node_pool))),
        // Counted as soon as the value is read.
        FaultKind::UnknownClustersServiceState => Some((p.cs_installing, p.cs_installing)),
        FaultKind::UnknownProvisioningState => p.rp_provisioning.map(|at| (at, at)),
        FaultKind::NotHandedOver => Some((p.created, add(p.created, budgets.clusters_service))),
        FaultKind::HostedClusterUnavailable => p
            .hc_lost
            .map(|(lost, _)| (lost, add(lost, budgets.hosted_cluster))),
        // The finalizer holds the HostedCluster from its deletionTimestamp:
        // a management cluster shows it past the deletion's hosted_cluster
        // budget; the service side, the bundle deleted but not gone past
        // the maestro_bundle one. The later bound holds for both.
        FaultKind::HostedClusterFinalizerStuck => {
            let deleting = p.hc_deleting?;
            let bundle = p.bundle_deleted?;
            let due = match mgmt {
                Some(_) => {
                    add(deleting, deletion.hosted_cluster).min(add(bundle, deletion.maestro_bundle))
                }
                None => add(bundle, deletion.maestro_bundle),
            };
            Some((deleting, due))
        }
        // The bundle (and, on the management cluster, the ManifestWork)
        // deleted and never gone.
        FaultKind::ManifestWorkAgentGone => p.bundle_deleted.map(|at| {
            let due = add(at, deletion.maestro_bundle).max(add(at, deletion.manifestwork));
            (at, due)
        }),
        FaultKind::ClustersServiceUninstallError => p
            .cs_uninstall_error
            .map(|at| (at, add(at, HOP_FAILED_HOLD))),
        // The RP has said Deleting since the user's DELETE.
        FaultKind::RpStuckDeleting => p
            .delete_requested
            .map(|at| (at, add(at, deletion.rp_frontend))),
        // The self-managed hub's own faults never occur in the ARO world.
        FaultKind::KubeVirtMachinesPending
        | FaultKind::NoFreeAgent
        | FaultKind::ReleaseImageInvalid
        | FaultKind::ManagedClusterNeverJoins => None,
    }
}

/// The ground truth of one cluster of the self-managed hub (docs/design.md
/// §11.7): its id is the exporter's (`spec.clusterID`, else
/// `<namespace>/<name>`), and it has no ARM resource.
fn hub_cluster(p: &HubPlan, budgets: &HopBudgets, deletion: &HopBudgets) -> GroundTruthCluster {
    let add = |at: Ms, d: Duration| at + i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let created = trunc_s(p.created);
    let when = p.fault.and_then(|kind| match kind {
        // Degraded turns True a world-minute in; the model fails the hop
        // once it has been Degraded for the budget, and the rule fires by
        // then at the latest.
        FaultKind::HostedClusterDegraded => {
            let at = created + p.degraded_after.as_millis() as Ms;
            Some((at, add(at, budgets.hosted_cluster)))
        }
        // ValidReleaseImage False fails the hop at once; the rule holds a minute.
        FaultKind::ReleaseImageInvalid => p
            .invalid_image
            .map(trunc_s)
            .map(|at| (at, add(at, HOP_FAILED_HOLD))),
        // The pools are not ready from their creation (with the
        // HostedCluster's) and stay so.
        FaultKind::KubeVirtMachinesPending | FaultKind::NoFreeAgent => {
            Some((created, add(created, budgets.node_pool)))
        }
        // Counted from the creation's completion, as the rule does.
        FaultKind::ManagedClusterNeverJoins => p
            .completed()
            .map(|done| (done, add(done, budgets.managed_cluster))),
        // The HostedCluster deleting since its deletionTimestamp, held.
        FaultKind::HostedClusterFinalizerStuck => p
            .deleting
            .map(trunc_s)
            .map(|at| (at, add(at, deletion.hosted_cluster))),
        _ => None,
    });
    GroundTruthCluster {
        cluster_id: p.cluster_id(),
        name: p.name.clone(),
        resource_id: String::new(),
        fault: p.fault.map(FaultKind::as_str),
        fault_at: when.map(|(at, _)| ts(at)),
        expected_alert: p.fault.map(FaultKind::expected_alert),
        alert_due_at: when.map(|(_, due)| ts(due)),
        per_cluster: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_worlds_name_the_never_joined_managed_cluster_alike() {
        assert_eq!(
            FaultKind::ManagedClusterNeverJoins.as_str(),
            MANAGED_CLUSTER_NEVER_JOINS
        );
    }
}
