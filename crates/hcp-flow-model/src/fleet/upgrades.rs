//! Upgrades: a control plane's and each node pool's, each an operation
//! keyed by its target version (docs/design/15-operations.md §15.10). They start when the
//! HostedCluster's version status or a NodePool's `UpdatingVersion` reports
//! a rollout to a new version, end when the object reports it rolled out,
//! and fail when the object fails meanwhile.

use super::*;
use crate::ConditionStatus;
use crate::observation::Rollout;
use crate::operation::{node_pool_of, target_version_of};
use crate::provisioned_update;
use crate::text::Text;

/// What one reading told of a rollout, taken from the view before the view
/// is stored without it.
pub(super) enum Reported {
    /// The object was read: the upgrade it reports, if any.
    Upsert(Option<Box<Rollout>>),
    /// The NodePool is gone from every view.
    Gone,
}

/// What to look at after a change.
pub(super) enum UpgradeCheck<'a> {
    /// The HostedCluster was read: the rollout it reports.
    ControlPlane(Option<&'a Rollout>),
    /// The NodePool named was read (`Some`: what it reports) or is gone
    /// (`None`).
    Pool(&'a str, Option<Option<&'a Rollout>>),
    /// Nothing its object reported: what the RP or Clusters Service read
    /// of it, and whether an upgrade in flight failed (a budget ran out).
    Failures,
}

/// A day-2 operation's SLO deadline, for the caller to queue.
pub(super) struct Day2Deadline {
    pub(super) at: Timestamp,
    pub(super) kind: OperationKind,
    pub(super) subject: Box<str>,
}

impl Day2Deadline {
    pub(super) fn due(self) -> Due {
        Due::Late(self.kind, Some(self.subject))
    }
}

/// Whether an upgrade of the object at `hop` is in flight (the pool's is
/// checked by the caller's evaluation, which filters by name).
pub(super) fn upgrade_in_flight(timeline: &Timeline, hop: Hop) -> bool {
    let kind = match hop {
        Hop::HostedCluster => OperationKind::Upgrade,
        Hop::NodePool => OperationKind::NodePoolUpgrade,
        _ => return false,
    };
    timeline.day2_in_flight().any(|op| op.kind == kind)
}

/// Start, end and fail upgrades after a change. Returns the SLO deadlines
/// of the upgrades it started (or whose start moved earlier).
pub(super) fn evaluate_upgrades(
    timeline: &mut Timeline,
    check: UpgradeCheck<'_>,
    initial: bool,
    observed_at: Timestamp,
    config: &ModelConfig,
    events: &mut Vec<Event>,
) -> Vec<Day2Deadline> {
    let mut deadlines = Vec::new();
    // The cluster's deletion takes its upgrades along (evaluate_pools ends
    // them `deleted`), and starts none.
    if timeline.deletion.is_some() {
        return deadlines;
    }
    if timeline.day2_operations.is_none() && matches!(check, UpgradeCheck::Failures) {
        return deadlines;
    }
    let mut ops = timeline.day2_operations.take().unwrap_or_default();
    follow(
        timeline,
        &mut ops,
        &check,
        initial,
        observed_at,
        config,
        &mut deadlines,
    );
    for op in ops.iter_mut().filter(|op| op.kind.of_version()) {
        let counted = counts_operation(config, &timeline.cluster_id, op.uncounted);
        let Some(target) = op.target_version().map(str::to_string) else {
            continue;
        };
        // The RP's and Clusters Service's part: followed while the upgrade
        // is in flight, and after it ended until they settle (they report
        // done after the rollout).
        let service_failure = service_hops(
            timeline,
            op,
            &target,
            (initial, observed_at),
            config,
            &mut deadlines,
            events,
        );
        if !op.in_flight() {
            continue;
        }
        let pool = op.node_pool().map(str::to_string);
        let ended = match (&check, op.kind, pool.as_deref()) {
            (_, OperationKind::Upgrade, _) => {
                service_failure.or_else(|| control_plane_end(timeline, op, &check, &target))
            }
            (UpgradeCheck::Pool(name, reading), OperationKind::NodePoolUpgrade, Some(pool))
                if *name == pool =>
            {
                service_failure.or_else(|| pool_end(timeline, op, *reading, observed_at))
            }
            // A budget that ran out may have failed the pool.
            (_, OperationKind::NodePoolUpgrade, Some(pool)) => service_failure.or_else(|| {
                pool_reading(timeline, pool)
                    .filter(|r| r.view.phase == Phase::Failed)
                    .map(|r| End::Failed(Hop::NodePool, r.since.at))
            }),
            _ => None,
        };
        let Some(end) = ended else {
            continue;
        };
        let (outcome, hop, at) = match end {
            End::Succeeded(at) => (Outcome::Succeeded, op.kind.first_hop(), at),
            End::Failed(hop, at) => (Outcome::Failed, hop, at),
            End::Quietly(outcome, at) => {
                op.outcome = outcome;
                op.ended_at = Some(at.max(op.started_at.at));
                continue;
            }
        };
        let at = at.max(op.started_at.at);
        let via = timeline.hop(hop).map_or(Via::Direct, |h| h.via);
        end_day2(
            timeline, op, hop, outcome, at, via, counted, &target, config, events,
        );
    }
    forget_failed(&mut ops, &check);
    ops.retain(|op| super::keep_day2(timeline, op));
    if !ops.is_empty() {
        timeline.day2_operations = Some(ops);
    }
    deadlines
}

/// What stays on the timeline: an operation in flight, and an upgrade that
/// failed while its object still reports its target, so the same rollout
/// read again is not taken for a new one.
pub(super) fn kept(op: &Operation) -> bool {
    op.in_flight()
        || (op.kind.of_version() && op.outcome == OperationOutcome::Failed)
        || op.settling()
}

/// What the RP or Clusters Service reads of what an upgrade updates: the
/// cluster for a control plane's, the pool's own reading for a pool's.
fn service_reading<'t>(
    timeline: &'t Timeline,
    op: &Operation,
    hop: Hop,
) -> Option<(Phase, &'t Text, TimeMark, Via)> {
    match op.node_pool() {
        Some(pool) => timeline.pool_reading_of(hop, pool).map(|r| {
            (
                r.state.view.phase,
                &r.state.view.state,
                r.state.since,
                Via::Direct,
            )
        }),
        None => timeline
            .hop(hop)
            .map(|h| (h.phase, &h.state, h.since, h.via)),
    }
}

/// The RP's and Clusters Service's part in an upgrade, a control plane's
/// or a pool's (docs/design/15-operations.md §15.10). An upgrade in flight reaches either
/// when the cluster (the pool) reads `Updating` / `updating` there, from
/// the time it began to:
/// ARM takes no second update while one runs, so the update under way when
/// the rollout is seen is the one that asked for it, and an upstream time
/// it began before the rollout's start dates the upgrade's start. A hop
/// reached is done when it reads ready again, and fails the upgrade in
/// flight when it fails after it began. Returns that failure.
#[allow(clippy::too_many_arguments)]
fn service_hops(
    timeline: &Timeline,
    op: &mut Operation,
    target: &str,
    (initial, observed_at): (bool, Timestamp),
    config: &ModelConfig,
    deadlines: &mut Vec<Day2Deadline>,
    events: &mut Vec<Event>,
) -> Option<End> {
    let mut failed = None;
    for hop in [Hop::RpFrontend, Hop::ClustersService] {
        let Some((phase, state, since, via)) = service_reading(timeline, op, hop) else {
            continue;
        };
        if hop == Hop::ClustersService
            && phase == Phase::Failed
            && since.at >= op.started_at.at
            && op.outcome == OperationOutcome::Failed
            && op.failed_hop == Some(Hop::RpFrontend)
        {
            // The RP's `Failed` was read first, Clusters Service unread
            // then: its `error` is the root cause and names the hop
            // (docs/design/15b-operations.md §15.11).
            op.failed_hop = Some(Hop::ClustersService);
        }
        let Some(entry) = op.hop(hop).copied() else {
            if op.in_flight() && provisioned_update(hop, state) {
                if !since.observed && since.at < op.started_at.at {
                    op.start_earlier(since);
                    let late_at = after(since.at, config.target(op.kind));
                    // Late already when a first sync shows it: as when it
                    // is first followed (`follow`), silently, never counted.
                    op.judge_first_seen(initial, late_at, observed_at);
                    if let Some(subject) = op.subject.clone()
                        && op.slo.is_none()
                    {
                        deadlines.push(Day2Deadline {
                            at: late_at,
                            kind: op.kind,
                            subject,
                        });
                    }
                }
                op.reached_at(hop, since);
            } else if op.in_flight()
                && phase == Phase::Failed
                && since.at >= op.started_at.at
                && defers_to_clusters_service(timeline, op, hop).is_none()
            {
                // Failed since the upgrade began, never read updating:
                // Clusters Service fails a pool's upgrade within a poll of
                // its start, so the hop had it from the start and fails it
                // (docs/design/15-operations.md §15.10).
                op.reached_at(hop, op.started_at);
                failed = Some(End::Failed(hop, since.at));
            }
            continue;
        };
        if entry.done_at.is_some() {
            continue;
        }
        match phase {
            Phase::Ready => day2_hop_done(
                timeline,
                op,
                hop,
                Outcome::Succeeded,
                since.at,
                via,
                target,
                events,
            ),
            Phase::Failed if since.at >= entry.started_at => {
                if defers_to_clusters_service(timeline, op, hop).is_some() {
                    // The RP mirrors Clusters Service, still at work: its
                    // word names the failure (docs/design/15b-operations.md §15.11).
                } else if op.in_flight() {
                    // Clusters Service, read after the RP, is the root
                    // cause when both failed.
                    failed = Some(End::Failed(hop, since.at));
                } else {
                    day2_hop_done(
                        timeline,
                        op,
                        hop,
                        Outcome::Failed,
                        since.at,
                        via,
                        target,
                        events,
                    );
                }
            }
            _ => {}
        }
    }
    failed
}

/// Whether the RP's `Failed` at `hop` waits for Clusters Service's word:
/// the RP mirrors Clusters Service, so while Clusters Service still works
/// on the same object (pending, in progress, not yet classified) its
/// `error`, read within a fast poll, names the failure and its hop, the
/// root cause (docs/design/15b-operations.md §15.11). `Some(())` when it waits.
pub(super) fn defers_to_clusters_service(
    timeline: &Timeline,
    op: &Operation,
    hop: Hop,
) -> Option<()> {
    if hop != Hop::RpFrontend {
        return None;
    }
    let (phase, ..) = service_reading(timeline, op, Hop::ClustersService)?;
    matches!(phase, Phase::Pending | Phase::Progressing | Phase::Unknown).then_some(())
}

/// A failed upgrade is forgotten once its object reports another target or
/// none in progress (rolled out after all, or retargeted), or is gone.
fn forget_failed(ops: &mut Vec<Operation>, check: &UpgradeCheck<'_>) {
    ops.retain(|op| {
        if op.outcome != OperationOutcome::Failed || !op.kind.of_version() {
            return true;
        }
        let target = op.target_version();
        match (check, op.kind) {
            (UpgradeCheck::ControlPlane(r), OperationKind::Upgrade) => {
                r.is_some_and(|r| !r.completed && Some(r.target.as_str()) == target)
            }
            (UpgradeCheck::Pool(name, reading), OperationKind::NodePoolUpgrade)
                if Some(*name) == op.node_pool() =>
            {
                matches!(reading, Some(Some(r)) if Some(r.target.as_str()) == target)
            }
            _ => true,
        }
    });
}

enum End {
    /// Rolled out, at the hop whose object reports it.
    Succeeded(Stamp),
    Failed(Hop, Stamp),
    /// Ended with no duration and no verdict (superseded, or its pool gone).
    Quietly(OperationOutcome, Stamp),
}

/// Start the upgrade a reading reports, unless it is followed already, and
/// end one it replaced.
fn follow(
    timeline: &Timeline,
    ops: &mut Vec<Operation>,
    check: &UpgradeCheck<'_>,
    initial: bool,
    observed_at: Timestamp,
    config: &ModelConfig,
    deadlines: &mut Vec<Day2Deadline>,
) {
    let (kind, pool, rollout) = match check {
        UpgradeCheck::ControlPlane(Some(r)) => (OperationKind::Upgrade, None, *r),
        UpgradeCheck::Pool(name, Some(Some(r))) => {
            (OperationKind::NodePoolUpgrade, Some(*name), *r)
        }
        _ => return,
    };
    if rollout.completed {
        return;
    }
    let subject = kind.subject(pool, Some(&rollout.target));
    let hop = kind.first_hop();
    // Another target in flight for the same object: replaced.
    for op in ops.iter_mut().filter(|op| {
        op.in_flight()
            && op.kind == kind
            && node_pool_of(kind, op.subject()) == pool
            && target_version_of(kind, op.subject()) != Some(rollout.target.as_str())
    }) {
        op.outcome = OperationOutcome::Superseded;
        op.ended_at = Some(Stamp::from(observed_at).max(op.started_at.at));
    }
    let start = rollout
        .started_at
        .map_or(TimeMark::observed(observed_at), TimeMark::upstream);
    if let Some(op) = ops
        .iter_mut()
        .find(|op| op.kind == kind && op.subject == subject)
    {
        // Upstream dates it now (the history entry appeared after the
        // desired version changed): its upstream start is the start, unless
        // an earlier upstream time holds it (the RP's `Updating`), and the
        // start of its object's part either way.
        if !op.in_flight() || start.observed {
            return;
        }
        if op.started_at.observed {
            op.started_at = start;
            for h in op.hops.iter_mut().filter(|h| h.with_operation) {
                h.started_at = start.at;
            }
            if let Some(subject) = subject {
                deadlines.push(Day2Deadline {
                    at: after(start.at, config.target(kind)),
                    kind,
                    subject,
                });
            }
        }
        let op_start = op.started_at.at;
        if let Some(entry) = op
            .hops
            .iter_mut()
            .find(|h| h.hop == hop && h.done_at.is_none())
        {
            entry.started_at = start.at.max(op_start);
        }
        return;
    }
    // A first sync shows state nobody here watched begin: an upgrade
    // failed already is not followed (its failure is the hop's, and its end
    // would be counted as if witnessed); one late already is followed,
    // neither its verdict nor its end counted.
    let failed = match pool {
        Some(pool) => pool_reading(timeline, pool).is_some_and(|r| r.view.phase == Phase::Failed),
        None => timeline.hop(hop).is_some_and(|h| h.phase == Phase::Failed),
    };
    if initial && failed {
        return;
    }
    let Some(subject) = subject else {
        return;
    };
    let late_at = after(start.at, config.target(kind));
    let mut op = Operation::new(kind, start).first_seen(initial, late_at, observed_at);
    op.subject = Some(subject.clone());
    op.reached(hop, start.at);
    if op.slo.is_none() {
        deadlines.push(Day2Deadline {
            at: late_at,
            kind,
            subject,
        });
    }
    ops.push(op);
}

/// How a control-plane upgrade in flight ends, if it does: rolled out when
/// the HostedCluster reports its target completed (at HyperShift's
/// `completionTime`), failed when the HostedCluster failed after it began.
fn control_plane_end(
    timeline: &Timeline,
    op: &Operation,
    check: &UpgradeCheck<'_>,
    target: &str,
) -> Option<End> {
    if let UpgradeCheck::ControlPlane(Some(r)) = check
        && r.completed
        && r.target == target
    {
        let at = r
            .completed_at
            .or_else(|| timeline.hop(Hop::HostedCluster).map(|h| h.since.at))
            .unwrap_or(op.started_at.at);
        return Some(End::Succeeded(at));
    }
    let hop = timeline.hop(Hop::HostedCluster)?;
    (hop.phase == Phase::Failed && hop.since.at >= op.started_at.at)
        .then_some(End::Failed(Hop::HostedCluster, hop.since.at))
}

/// How a pool's upgrade in flight ends, if it does, on a reading of its
/// NodePool (`None`: gone). Rolled out when no update is in progress any
/// more and every replica is ready: dated by `UpdatingVersion` turning
/// False where HyperShift keeps it, else by the pool's readiness when it
/// came after the start, else when it was seen.
fn pool_end(
    timeline: &Timeline,
    op: &Operation,
    reading: Option<Option<&Rollout>>,
    observed_at: Timestamp,
) -> Option<End> {
    let pool = op.node_pool()?;
    let Some(reported) = reading else {
        return Some(End::Quietly(OperationOutcome::Deleted, observed_at.into()));
    };
    let state = pool_reading(timeline, pool)?;
    match state.view.phase {
        Phase::Failed => return Some(End::Failed(Hop::NodePool, state.since.at)),
        Phase::Deleting => return Some(End::Quietly(OperationOutcome::Deleted, state.since.at)),
        _ => {}
    }
    // Still updating (to this target; another one replaces it in
    // `follow`).
    if reported.is_some() {
        return None;
    }
    let updating = state
        .view
        .conditions
        .iter()
        .find(|c| &*c.kind == "UpdatingVersion");
    if updating.is_some_and(|c| c.status == ConditionStatus::True) {
        return None;
    }
    if state.view.phase != Phase::Ready {
        return None;
    }
    let started = op.started_at.at;
    let at = updating
        .and_then(|c| c.last_transition)
        .filter(|t| *t >= started)
        .or(Some(state.since.at).filter(|t| *t >= started))
        .unwrap_or_else(|| observed_at.into());
    Some(End::Succeeded(at))
}
