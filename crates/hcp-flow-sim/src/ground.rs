//! The demo's public ground truth: for every cluster of the world, the fault
//! injected into it, when it took effect, the alert it should raise and by
//! when (docs/design/11-simulated-world.md §11.6). Served by `hcp-flow demo` at
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

use super::day2::Day2;
use super::hub::HubPlan;
use super::kube::KubeClusterFaults;
use super::plan::{Ms, Plan};
use super::state::trunc_s;
use super::truth::ts;
use super::{FaultKind, World};
use hcp_flow_model::{HopBudgets, provisional_cluster_id};

/// How long a hop must have been failed before `HCPHopFailed` fires: the
/// hold in its threshold (alerts/operations.yaml), real seconds, not scaled.
pub const HOP_FAILED_HOLD: Duration = Duration::from_secs(60);

/// A fault only the management cluster shows (not a [`FaultKind`], which
/// the service side serves).
pub const MANAGED_CLUSTER_NEVER_JOINS: &str = "managed_cluster_never_joins";

/// The day-2 operations' hop budgets the world assumes, in world time
/// (divided by the speed like every other budget): a pool's creation and
/// removal are judged by the creation's and the deletion's `node_pool`
/// budgets (docs/design/15-operations.md §15.9), an upgrade by these.
pub const UPGRADE_HOSTED_CLUSTER_BUDGET: Duration = Duration::from_secs(75 * 60);
pub const NODE_POOL_UPGRADE_NODE_POOL_BUDGET: Duration = Duration::from_secs(60 * 60);

/// The hop budget of each day-2 operation at its one hop, scaled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Day2Budgets {
    /// `node_pool_create` at `node_pool`.
    pub node_pool_create: Duration,
    /// `node_pool_delete` at `node_pool`.
    pub node_pool_delete: Duration,
    /// `upgrade` at `hosted_cluster`.
    pub upgrade: Duration,
    /// `node_pool_upgrade` at `node_pool`.
    pub node_pool_upgrade: Duration,
}

/// One day-2 operation the world runs (healthy or not), as its upstreams
/// date it (docs/design/11-simulated-world.md §11.10).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Day2OperationTruth {
    /// The id the exporter gives the cluster.
    pub cluster_id: String,
    /// `node_pool_create`, `node_pool_delete`, `upgrade` or `node_pool_upgrade`.
    pub operation: &'static str,
    /// The NodePool's `metadata.name` (pool operations).
    pub node_pool: Option<String>,
    /// The release upgraded to (upgrades).
    pub target_version: Option<String>,
    /// When the user asked (`status.version.desired` changed; upgrades):
    /// no upstream dates it on the HostedCluster, the RP's `Progressing`
    /// condition does.
    pub requested: Option<Timestamp>,
    /// The upstream start: the NodePool's creationTimestamp or
    /// deletionTimestamp, the history entry's `startedTime`, the
    /// `UpdatingVersion` transition.
    pub started: Timestamp,
    /// When it ended as served (`Ready`'s transition, the last object gone,
    /// `completionTime`, the pool at its target); `None` while in flight,
    /// or when it never will (a fault, or the cluster's deletion took it).
    pub ended: Option<Timestamp>,
    /// The fault that keeps it from ending.
    pub fault: Option<&'static str>,
    /// The hop at which it failed (outcome failed; `None`: it did not).
    pub failed_hop: Option<&'static str>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroundTruth {
    /// The world's clock when this was computed.
    pub at: Timestamp,
    /// World seconds per real second.
    pub speed: f64,
    /// The hop budgets the world assumes (and the demo's exporter
    /// publishes), in seconds.
    pub hop_budgets_seconds: std::collections::BTreeMap<String, f64>,
    /// Every operation's hop budgets the world assumes, in seconds, keyed
    /// `<operation>/<hop>` (`create/node_pool`, `upgrade/hosted_cluster`).
    pub operation_hop_budgets_seconds: std::collections::BTreeMap<String, f64>,
    /// Every day-2 operation begun by now, on clusters served now.
    pub day2_operations: Vec<Day2OperationTruth>,
    /// The seeded burst of failures, when the world has one.
    pub failure_burst: Option<FailureBurstTruth>,
    /// Objects the world serves on purpose that no strict decoder reads
    /// (with faults on: one HostedCluster on the first management
    /// cluster): the exporter skips each and counts it, so its source's
    /// `HCPUnknownUpstreamValues{field="object"}` fires, each time a relist
    /// reads it again.
    pub malformed_objects: Vec<MalformedObjectTruth>,
    pub items: Vec<GroundTruthCluster>,
}

/// One object served on purpose that matches no schema.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MalformedObjectTruth {
    /// The exporter's source that reads it (`kube/<mgmt_cluster>`).
    pub source: String,
    /// The unknown-value field the exporter counts it under.
    pub field: &'static str,
    pub kind: &'static str,
    pub namespace: &'static str,
    pub name: &'static str,
    pub expected_alert: &'static str,
    /// When the world stored it.
    pub since: Timestamp,
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
    /// The operation the fault hits (`create`, `delete`,
    /// `node_pool_create`, `upgrade`, `node_pool_upgrade`; `None` for a
    /// regression after the creation).
    pub operation: Option<&'static str>,
    /// The NodePool's `metadata.name`, for a fault of one pool.
    pub node_pool: Option<String>,
    /// The release upgraded to, for an upgrade's fault.
    pub target_version: Option<String>,
    /// The hop at which the fault's operation failed (`None`: it did not
    /// fail, it waits or regressed).
    pub failed_hop: Option<&'static str>,
    /// The operations the fault holds and the hops at which it shows in
    /// each ([`FaultKind::holds`]): an alert about the cluster naming
    /// another operation or hop is not the fault's.
    pub holds: Vec<Held>,
}

/// One operation a fault holds (`None`: a regression no operation owns)
/// and the hops at which it shows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Held {
    pub operation: Option<&'static str>,
    pub hops: Vec<&'static str>,
}

impl World {
    /// The ground truth of every cluster the world serves now.
    pub fn ground_truth(&self) -> GroundTruth {
        let now = self.now_ms();
        let budgets = self.hop_budgets();
        let deletion = self.delete_budgets();
        let day2 = self.day2_budgets();
        let items = self
            .plans(now)
            .iter()
            .filter(|p| p.created <= now && p.gone_at().is_none_or(|gone| now < gone))
            .map(|p| {
                cluster(
                    p,
                    &budgets,
                    &deletion,
                    &day2,
                    self.kube_faults_of(p).as_ref(),
                )
            })
            .chain(
                self.hub_plans(now)
                    .iter()
                    .filter(|p| p.created <= now && p.gone_at().is_none_or(|gone| now < gone))
                    .map(|p| hub_cluster(p, &budgets, &deletion, &day2)),
            )
            .collect();
        let mut operation_hop_budgets_seconds = std::collections::BTreeMap::new();
        for (operation, b) in [("create", &budgets), ("delete", &deletion)] {
            for (hop, d) in b.iter() {
                operation_hop_budgets_seconds
                    .insert(format!("{operation}/{}", hop.as_str()), d.as_secs_f64());
            }
        }
        for (key, d) in [
            ("node_pool_create/node_pool", day2.node_pool_create),
            ("node_pool_delete/node_pool", day2.node_pool_delete),
            ("upgrade/hosted_cluster", day2.upgrade),
            ("node_pool_upgrade/node_pool", day2.node_pool_upgrade),
        ] {
            operation_hop_budgets_seconds.insert(key.to_string(), d.as_secs_f64());
        }
        GroundTruth {
            at: ts(now),
            speed: self.inner.cfg.speed,
            hop_budgets_seconds: budgets
                .iter()
                .map(|(hop, d)| (hop.as_str().to_string(), d.as_secs_f64()))
                .collect(),
            operation_hop_budgets_seconds,
            day2_operations: self.day2_operations(),
            failure_burst: self
                .inner
                .params
                .failure_burst
                .map(|(from, to)| FailureBurstTruth {
                    from: ts(from),
                    to: ts(to),
                    expected_alert: "HCPOperationSuccessBudgetBurn",
                    operation: hcp_flow_model::OperationKind::Create.as_str(),
                }),
            malformed_objects: self
                .inner
                .kube
                .lock()
                .as_ref()
                .and_then(|k| k.malformed.clone())
                .into_iter()
                .collect(),
            items,
        }
    }
}

impl World {
    /// The day-2 operations' hop budgets the truth assumes (world budgets
    /// divided by the speed, at least a second, like every other).
    pub fn day2_budgets(&self) -> Day2Budgets {
        let speed = self.inner.cfg.speed;
        let scaled = |d: Duration| d.div_f64(speed).max(Duration::from_secs(1));
        Day2Budgets {
            node_pool_create: self.hop_budgets().node_pool,
            node_pool_delete: self.delete_budgets().node_pool,
            upgrade: scaled(UPGRADE_HOSTED_CLUSTER_BUDGET),
            node_pool_upgrade: scaled(NODE_POOL_UPGRADE_NODE_POOL_BUDGET),
        }
    }

    /// Every day-2 operation begun by now (for an upgrade, asked for), on
    /// every cluster served now, healthy or not, as its upstreams date it.
    pub fn day2_operations(&self) -> Vec<Day2OperationTruth> {
        let now = self.now_ms();
        let alive = |created: Ms, gone: Option<Ms>| created <= now && gone.is_none_or(|g| now < g);
        let mut out = Vec::new();
        for p in self
            .plans(now)
            .iter()
            .filter(|p| alive(p.created, p.gone_at()))
        {
            let name = |i: usize| p.pool_name(i);
            let removal_end = p.day2.removal.as_ref().map(|r| r.bundle_gone);
            operations(
                &mut out,
                &p.cluster_id,
                &p.day2,
                p.fault,
                p.delete_requested,
                removal_end,
                name,
                now,
            );
        }
        for p in self
            .hub_plans(now)
            .iter()
            .filter(|p| alive(p.created, p.gone_at()))
        {
            let removal_end = p.day2.removal.as_ref().map(|r| r.gone);
            operations(
                &mut out,
                &p.cluster_id(),
                &p.day2,
                p.fault,
                p.deleting,
                removal_end,
                |i| p.pool_name(i),
                now,
            );
        }
        out
    }
}

/// One cluster's day-2 operations begun by `now`. An end counts only once
/// it was served before the cluster's deletion began (`deletion`), which
/// otherwise took the operation along.
#[allow(clippy::too_many_arguments)]
fn operations(
    out: &mut Vec<Day2OperationTruth>,
    cluster_id: &str,
    d: &Day2,
    fault: Option<FaultKind>,
    deletion: Option<Ms>,
    removal_end: Option<Ms>,
    name: impl Fn(usize) -> Option<String>,
    now: Ms,
) {
    let ended = |end: Option<Ms>| {
        end.filter(|e| *e <= now && deletion.is_none_or(|d| *e < d))
            .map(|e| ts(trunc_s(e)))
    };
    let fault_of = |kinds: &[FaultKind]| fault.filter(|f| kinds.contains(f)).map(FaultKind::as_str);
    let mut push = |operation,
                    pool: Option<usize>,
                    target: Option<&str>,
                    requested: Option<Ms>,
                    started: Ms,
                    end: Option<Ms>,
                    fault| {
        out.push(Day2OperationTruth {
            cluster_id: cluster_id.to_string(),
            operation,
            node_pool: pool.and_then(&name),
            target_version: target.map(str::to_string),
            requested: requested.map(ts),
            started: ts(trunc_s(started)),
            ended: ended(end),
            fault,
            failed_hop: fault.and_then(failed_hop),
        });
    };
    if let Some(a) = d.added.as_ref().filter(|a| a.created <= now) {
        let fault = fault_of(&[
            FaultKind::NodePoolNeverReachesIgnition,
            FaultKind::AddedPoolVmUnschedulable,
            FaultKind::AddedPoolNoFreeAgent,
        ]);
        push(
            "node_pool_create",
            Some(a.pool),
            None,
            None,
            a.created,
            a.ready,
            fault,
        );
    }
    // Clusters Service failed it: it began at the request (no NodePool
    // ever dates it) and ends never.
    if let Some(f) = d.failed.as_ref().filter(|f| f.requested <= now) {
        push(
            "node_pool_create",
            Some(f.pool),
            None,
            None,
            f.requested,
            None,
            Some(FaultKind::CsNodePoolError.as_str()),
        );
    }
    if let Some(r) = d.removal.as_ref().filter(|r| r.deleting <= now) {
        push(
            "node_pool_delete",
            Some(r.pool),
            None,
            None,
            r.deleting,
            removal_end,
            None,
        );
    }
    if let Some(u) = d.upgrade.as_ref().filter(|u| u.requested <= now) {
        let fault = fault_of(&[FaultKind::UpgradeStuckPartial]);
        push(
            "upgrade",
            None,
            Some(u.to),
            Some(u.requested),
            u.started,
            u.completed,
            fault,
        );
    }
    for u in d.pool_upgrades.iter().filter(|u| u.started <= now) {
        let fault = fault_of(&[
            FaultKind::NodePoolStuckUpdating,
            FaultKind::CsNodePoolUpgradeError,
        ])
        .filter(|_| u.done.is_none());
        push(
            "node_pool_upgrade",
            Some(u.pool),
            Some(u.to),
            None,
            u.started,
            u.done,
            fault,
        );
    }
}

fn cluster(
    p: &Plan,
    budgets: &HopBudgets,
    deletion: &HopBudgets,
    day2: &Day2Budgets,
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
        operation: None,
        node_pool: None,
        target_version: None,
        failed_hop: p.fault.and_then(|f| failed_hop(f.as_str())),
        holds: Vec::new(),
    };
    let add = |at: Ms, d: Duration| at + i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let when: Option<(Ms, Ms)> = match p.fault {
        Some(kind) if kind.is_day2() => {
            out.fault = Some(kind.as_str());
            out.expected_alert = Some(kind.expected_alert());
            out.operation = kind.operation();
            out.holds = held(kind);
            let hit = day2_fault(&p.day2, kind, day2, add);
            out.node_pool = hit.pool.and_then(|i| p.pool_name(i));
            out.target_version = hit.target.map(str::to_string);
            hit.when
        }
        Some(kind) => {
            out.fault = Some(kind.as_str());
            out.expected_alert = Some(kind.expected_alert());
            out.operation = kind.operation();
            out.holds = held(kind);
            fault_times(p, kind, budgets, deletion, mgmt, add)
        }
        None if mgmt.is_some_and(|f| f.managed_cluster_never_joins) => {
            out.fault = Some(MANAGED_CLUSTER_NEVER_JOINS);
            out.expected_alert = Some("HCPManagedClusterNotJoined");
            out.operation = FaultKind::ManagedClusterNeverJoins.operation();
            out.holds = held(FaultKind::ManagedClusterNeverJoins);
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
        // The self-managed hub's own faults never occur in the ARO world;
        // the day-2 ones are `day2_fault`'s.
        FaultKind::KubeVirtMachinesPending
        | FaultKind::NoFreeAgent
        | FaultKind::ReleaseImageInvalid
        | FaultKind::ManagedClusterNeverJoins
        | FaultKind::NodePoolNeverReachesIgnition
        | FaultKind::UpgradeStuckPartial
        | FaultKind::NodePoolStuckUpdating
        | FaultKind::AddedPoolVmUnschedulable
        | FaultKind::AddedPoolNoFreeAgent
        | FaultKind::CsNodePoolError
        | FaultKind::CsNodePoolUpgradeError => None,
    }
}

/// The hop at which a fault's operation fails, by the fault's name (`None`:
/// it waits, or regressed). Only the day-2 faults are named: the creation's
/// and the deletion's say it with their alert, as they always have.
fn failed_hop(fault: &str) -> Option<&'static str> {
    [
        FaultKind::CsNodePoolError,
        FaultKind::CsNodePoolUpgradeError,
    ]
    .iter()
    .any(|f| f.as_str() == fault)
    .then_some("clusters_service")
}

/// What a day-2 fault hits: the pool (its index), the target release, and
/// (took effect, alert due).
struct Day2Hit {
    pool: Option<usize>,
    target: Option<&'static str>,
    when: Option<(Ms, Ms)>,
}

/// A day-2 fault's times, the same in both worlds: it takes effect when
/// its operation begins upstream (the NodePool's creationTimestamp, the
/// history entry's `startedTime`, the `UpdatingVersion` transition; whole
/// seconds as served), and `HCPOperationStuckAtHop` (no `for:`: the time
/// since that start against the operation's hop budget) holds once the
/// budget passed.
fn day2_fault(
    d: &Day2,
    kind: FaultKind,
    budgets: &Day2Budgets,
    add: impl Fn(Ms, Duration) -> Ms,
) -> Day2Hit {
    let none = Day2Hit {
        pool: None,
        target: None,
        when: None,
    };
    match kind {
        FaultKind::NodePoolNeverReachesIgnition
        | FaultKind::AddedPoolVmUnschedulable
        | FaultKind::AddedPoolNoFreeAgent => d.added.as_ref().map_or(none, |a| {
            let at = trunc_s(a.created);
            Day2Hit {
                pool: Some(a.pool),
                target: None,
                when: Some((at, add(at, budgets.node_pool_create))),
            }
        }),
        // Failed at once; `HCPHopFailed` holds its minute.
        FaultKind::CsNodePoolError => d.failed.as_ref().map_or(none, |f| Day2Hit {
            pool: Some(f.pool),
            target: None,
            when: Some((f.error, add(f.error, HOP_FAILED_HOLD))),
        }),
        // Failed at Clusters Service during the upgrade: `HCPOperationFailed`
        // has no hold, so it is due when the error is served (whole
        // seconds); the exporter reads a pool in flight at every fast poll
        // (docs/design/15b-operations.md §15.11), within the run's slack.
        FaultKind::CsNodePoolUpgradeError => d
            .pool_upgrades
            .iter()
            .find_map(|u| u.cs_error.map(|e| (u, e)))
            .map_or(none, |(u, e)| Day2Hit {
                pool: Some(u.pool),
                target: Some(u.to),
                when: Some((e, e)),
            }),
        FaultKind::UpgradeStuckPartial => d.upgrade.as_ref().map_or(none, |u| {
            let at = trunc_s(u.started);
            Day2Hit {
                pool: None,
                target: Some(u.to),
                when: Some((at, add(at, budgets.upgrade))),
            }
        }),
        FaultKind::NodePoolStuckUpdating => d
            .pool_upgrades
            .iter()
            .find(|u| u.done.is_none())
            .map_or(none, |u| {
                let at = trunc_s(u.started);
                Day2Hit {
                    pool: Some(u.pool),
                    target: Some(u.to),
                    when: Some((at, add(at, budgets.node_pool_upgrade))),
                }
            }),
        _ => none,
    }
}

/// The ground truth of one cluster of the self-managed hub (docs/design/11-simulated-world.md
/// §11.7): its id is the exporter's (`spec.clusterID`, else
/// `<namespace>/<name>`), and it has no ARM resource.
fn hub_cluster(
    p: &HubPlan,
    budgets: &HopBudgets,
    deletion: &HopBudgets,
    day2: &Day2Budgets,
) -> GroundTruthCluster {
    let add = |at: Ms, d: Duration| at + i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let created = trunc_s(p.created);
    let hit = p
        .fault
        .filter(|k| k.is_day2())
        .map(|kind| day2_fault(&p.day2, kind, day2, add));
    let when = p.fault.and_then(|kind| match kind {
        _ if kind.is_day2() => hit.as_ref().and_then(|h| h.when),
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
        operation: p.fault.and_then(FaultKind::operation),
        node_pool: hit
            .as_ref()
            .and_then(|h| h.pool)
            .and_then(|i| p.pool_name(i)),
        target_version: hit.as_ref().and_then(|h| h.target).map(str::to_string),
        failed_hop: p.fault.and_then(|f| failed_hop(f.as_str())),
        holds: p.fault.map(held).unwrap_or_default(),
    }
}

/// What `kind` holds, by name.
fn held(kind: FaultKind) -> Vec<Held> {
    kind.holds()
        .iter()
        .map(|(operation, hops)| Held {
            operation: *operation,
            hops: hops.iter().map(|h| h.as_str()).collect(),
        })
        .collect()
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
