//! Day-2 operations of a timeline recomputed after a change: each node
//! pool's creation and removal and each pool's upgrade, followed hop by hop
//! from what the pools read, ended once, and counted by the owner
//! (docs/design/15-operations.md §15.9, §15.10).

use super::evaluate::*;
use super::*;

/// What a node pool reads now: its NodePool object, read directly when it
/// is, else through Maestro's feedback. `pool` is an operation's subject:
/// the NodePool's name, or the RP's name of a pool whose NodePool was not
/// read when its operation began (docs/design/15b-operations.md §15.11).
pub(super) fn pool_reading<'a>(timeline: &'a Timeline, pool: &str) -> Option<&'a ObjectState> {
    timeline.node_pool_object(pool).map(|(_, o)| o)
}

/// Whether a NodePool of the cluster is pool `pool` read directly.
fn pool_read_directly(timeline: &Timeline, pool: &str) -> bool {
    timeline.hop(Hop::NodePool).is_some_and(|h| {
        h.objects
            .keys()
            .any(|(v, name)| *v == Via::Direct && (name == pool || same_pool(name, pool)))
    })
}

/// Whether two names of a pool (a NodePool's, an operation's subject, the
/// RP's) name the same pool.
pub(super) fn related_pools(a: &str, b: &str) -> bool {
    same_pool(a, b) || same_pool(b, a)
}

/// The in-flight operation of `kind` following the pool named `name` on
/// some hop.
pub(super) fn pool_operation_mut<'a>(
    ops: &'a mut [Operation],
    kind: OperationKind,
    name: &str,
) -> Option<&'a mut Operation> {
    ops.iter_mut()
        .filter(|op| op.kind == kind && op.in_flight())
        .find(|op| op.node_pool().is_some_and(|p| related_pools(p, name)))
}

/// Start, end and fail the cluster's node pool operations after its
/// NodePools changed (docs/design/15-operations.md §15.9). `appeared`: a pool first seen
/// in this run; `vanished`: a pool whose last object went in this change,
/// and the view it went from
/// (a pool not read yet after a restart is not gone). A pool that appears not ready has its creation followed
/// from the pool's creation time; one that turns deleting, its removal,
/// from its `deletionTimestamp`. The cluster's deletion takes its pools
/// with it: their operations in flight end `deleted`, and no new one
/// starts. A pool's operation is done when every hop that read the pool is
/// (docs/design/15b-operations.md §15.11): the NodePool's part is decided here, the RP's
/// and Clusters Service's in `pool_hops`. Returns the SLO deadlines of the
/// operations it started.
pub(super) fn evaluate_pools(
    timeline: &mut Timeline,
    appeared: Option<&str>,
    vanished: Option<(&str, Via)>,
    initial: bool,
    observed_at: Timestamp,
    config: &ModelConfig,
    events: &mut Vec<Event>,
) -> Vec<super::upgrades::Day2Deadline> {
    let mut deadlines = Vec::new();
    if timeline.day2_operations.is_none()
        && appeared.is_none()
        && vanished.is_none()
        && !timeline.hop(Hop::NodePool).is_some_and(|h| {
            h.objects
                .iter()
                .any(|(_, o)| o.view.phase == Phase::Deleting)
        })
    {
        return deadlines;
    }
    if timeline.deletion.is_some() {
        // Ended `deleted`: no duration, no verdict, and (in flight only)
        // nothing kept.
        timeline.day2_operations = None;
        timeline.pool_readings = None;
        return deadlines;
    }
    let mut ops = timeline
        .day2_operations
        .take()
        .map(|b| *b)
        .unwrap_or_default();
    deadlines.extend(follow_pool_operations(
        timeline,
        &mut ops,
        appeared,
        (initial, observed_at),
        config,
    ));
    for op in ops.iter_mut().filter(|op| op.in_flight()) {
        advance_pool_operation(timeline, op, vanished, observed_at, config, events);
    }
    // Only the ones in flight, and a pool's failed one while the pool is
    // still shown (so the JSON, the UI and the trace name where it failed):
    // an ended one has said all it had to say (its duration, its verdict,
    // its trace), and keeping the last few of every cluster cost some
    // 2.6 MB at 10,000 clusters, past the memory target (docs/design/15-operations.md
    // §15.9).
    ops.retain(|op| super::keep_day2(timeline, op));
    if !ops.is_empty() {
        timeline.day2_operations = Some(Box::new(ops));
    }
    timeline.forget_settled_pool_readings();
    deadlines
}

/// The pool operations one reading starts or renames: an operation the RP
/// or Clusters Service began takes the NodePool's name once it shows, a
/// NodePool that appeared not ready is a creation, one deleting a removal.
/// Returns the SLO deadlines of those it started or renamed.
fn follow_pool_operations(
    timeline: &Timeline,
    ops: &mut Vec<Operation>,
    appeared: Option<&str>,
    (initial, observed_at): (bool, Timestamp),
    config: &ModelConfig,
) -> Vec<super::upgrades::Day2Deadline> {
    let mut deadlines = Vec::new();
    let mut started: Vec<Operation> = Vec::new();
    let follow = |kind: OperationKind, pool: &str, start: TimeMark| {
        let late_at = after(start.at, config.target(kind));
        // A first sync shows state nobody here watched begin: a pool that
        // was already late then is followed (an SRE wants it named, stuck
        // or not), but neither its verdict nor its end is counted as if
        // witnessed.
        let mut op =
            Operation::of_pool(kind, pool, start).first_seen(initial, late_at, observed_at);
        op.reached_at(Hop::NodePool, start);
        op
    };
    // An operation the RP or Clusters Service began under their name of the
    // pool takes the NodePool's once it shows: the name every instance
    // reads, so a split's instances key (and trace) it alike
    // (docs/design/08-scopes-and-scale-out.md §8.2). Its deadline follows the new name.
    if let Some(pool) = appeared {
        for op in ops.iter_mut().filter(|op| {
            op.in_flight()
                && op.kind.of_node_pool()
                && op.kind != OperationKind::NodePoolUpgrade
                && op
                    .subject()
                    .is_some_and(|s| s != pool && related_pools(s, pool))
        }) {
            op.subject = Some(pool.into());
            if op.slo.is_none() {
                deadlines.push(super::upgrades::Day2Deadline {
                    at: after(op.started_at.at, config.target(op.kind)),
                    kind: op.kind,
                    subject: pool.into(),
                });
            }
        }
    }
    // One creation per pool in flight: a pool restored in flight and read
    // again after a restart, or one the RP or Clusters Service showed
    // first, goes on with it.
    if let Some(pool) = appeared
        && let Some(reading) = pool_reading(timeline, pool)
        && !matches!(reading.view.phase, Phase::Ready | Phase::Deleting)
    {
        let start = reading
            .view
            .created_at
            .map_or(TimeMark::observed(observed_at), TimeMark::upstream);
        match pool_operation_mut(ops, OperationKind::NodePoolCreate, pool) {
            Some(op) => op.reached_at(Hop::NodePool, start),
            None => started.push(follow(OperationKind::NodePoolCreate, pool, start)),
        }
    }
    if let Some(hop) = timeline.hop(Hop::NodePool) {
        for (name, reading) in hop.effective_objects() {
            if reading.view.phase != Phase::Deleting {
                continue;
            }
            match pool_operation_mut(ops, OperationKind::NodePoolDelete, name) {
                Some(op) => op.reached_at(Hop::NodePool, reading.since),
                None => started.push(follow(OperationKind::NodePoolDelete, name, reading.since)),
            }
        }
    }
    for op in started.iter().filter(|op| op.slo.is_none()) {
        deadlines.push(super::upgrades::Day2Deadline {
            at: after(op.started_at.at, config.target(op.kind)),
            kind: op.kind,
            subject: op.subject.clone().unwrap_or_default(),
        });
    }
    ops.extend(started);
    deadlines
}

/// One pool operation in flight after its cluster's NodePools changed: ended
/// when its NodePool is ready, failed or gone as the kind says, else
/// completed once every hop that read the pool is done
/// ([`complete_pool_operation`]).
fn advance_pool_operation(
    timeline: &mut Timeline,
    op: &mut Operation,
    vanished: Option<(&str, Via)>,
    observed_at: Timestamp,
    config: &ModelConfig,
    events: &mut Vec<Event>,
) {
    let counted = counts_operation(config, &timeline.cluster_id, op.uncounted);
    let pool = op.subject.clone().unwrap_or_default();
    let reading = pool_reading(timeline, &pool);
    // Gone from every view, or from the direct one while only
    // Maestro's lagging feedback still shows it.
    let gone_from = vanished
        .filter(|(v, gone_via)| {
            related_pools(v, &pool)
                && (reading.is_none()
                    || (*gone_via == Via::Direct && !pool_read_directly(timeline, &pool)))
        })
        .map(|(_, via)| via);
    let gone_here = gone_from.is_some();
    // The view the pool was last read in: a pool gone from Maestro's
    // feedback was never read directly here, and times nothing.
    let via = match gone_from {
        Some(via) => via,
        None if pool_read_directly(timeline, &pool) || reading.is_none() => Via::Direct,
        None => Via::Maestro,
    };
    let version = timeline.identity.version.clone();
    match (op.kind, reading) {
        (OperationKind::NodePoolCreate, _) if gone_here => {
            op.outcome = OperationOutcome::Deleted;
            op.ended_at = Some(Stamp::from(observed_at).max(op.started_at.at));
            return;
        }
        (OperationKind::NodePoolCreate, Some(r)) => match r.view.phase {
            Phase::Ready => {
                let at = r.since.at.max(op.started_at.at);
                let hop = Hop::NodePool;
                let outcome = Outcome::Succeeded;
                day2_hop_done(timeline, op, hop, outcome, at, via, &version, events);
            }
            Phase::Failed => {
                let at = r.since.at.max(op.started_at.at);
                let (hop, outcome) = (Hop::NodePool, Outcome::Failed);
                end_day2(
                    timeline, op, hop, outcome, at, via, counted, &version, config, events,
                );
                return;
            }
            // Removed before it was ready: the removal is its own
            // operation, and this one neither late nor failed.
            Phase::Deleting => {
                op.outcome = OperationOutcome::Deleted;
                op.ended_at = Some(r.since.at.max(op.started_at.at));
                return;
            }
            _ => {}
        },
        // Gone from the NodePools.
        (OperationKind::NodePoolDelete, _) if gone_here => {
            let at = Stamp::from(observed_at).max(op.started_at.at);
            let (hop, outcome) = (Hop::NodePool, Outcome::Succeeded);
            day2_hop_done(timeline, op, hop, outcome, at, via, &version, events);
        }
        (OperationKind::NodePoolDelete, Some(r)) if r.view.phase == Phase::Failed => {
            let at = r.since.at.max(op.started_at.at);
            let (hop, outcome) = (Hop::NodePool, Outcome::Failed);
            end_day2(
                timeline, op, hop, outcome, at, via, counted, &version, config, events,
            );
            return;
        }
        _ => {}
    }
    complete_pool_operation(timeline, op, counted, &version, config, events);
}

/// A pool's creation or removal in flight ends when every hop that read the
/// pool is done there (ready, or the pool gone); a removal also waits until
/// no hop shows the pool any more. The end is the last hop's.
pub(super) fn complete_pool_operation(
    timeline: &Timeline,
    op: &mut Operation,
    counted: bool,
    version: &str,
    config: &ModelConfig,
    events: &mut Vec<Event>,
) {
    if !op.in_flight() || !op.all_reached_done() {
        return;
    }
    let pool = op.node_pool().unwrap_or_default().to_string();
    if op.kind == OperationKind::NodePoolDelete && timeline.pool_shown(&pool) {
        return;
    }
    let Some(at) = op.hops.iter().filter_map(|h| h.done_at).max() else {
        return;
    };
    finish_day2(
        timeline,
        op,
        Outcome::Succeeded,
        at.max(op.started_at.at),
        counted,
        version,
        config,
        events,
    );
}

/// Note a day-2 operation done (or failed) at `hop` at `at`, once: the hop's
/// duration, observed where the hop is read directly ([`times_hop`]). `version` labels it: the
/// cluster's, or an upgrade's target.
#[allow(clippy::too_many_arguments)]
pub(super) fn day2_hop_done(
    timeline: &Timeline,
    op: &mut Operation,
    hop: Hop,
    outcome: Outcome,
    at: Stamp,
    via: Via,
    version: &str,
    events: &mut Vec<Event>,
) {
    if let Some(hop_started) = op.done(hop, at) {
        events.push(Event::HopEnded {
            cluster_id: timeline.cluster_id.clone(),
            operation: op.kind,
            subject: op.subject.clone(),
            hop,
            via,
            counted: times_hop(via),
            platform: timeline.identity.platform.to_string(),
            version: version.to_string(),
            outcome,
            started: hop_started.into(),
            ended: at.into(),
        });
    }
}

/// End a day-2 operation at `hop` (`via`: the view it ended in): the hop's
/// duration, its end and its one SLO verdict, as every kind ends
/// (`Ending::record`). `version` labels the durations: the cluster's, or an
/// upgrade's target.
#[allow(clippy::too_many_arguments)]
pub(super) fn end_day2(
    timeline: &Timeline,
    op: &mut Operation,
    hop: Hop,
    outcome: Outcome,
    at: Stamp,
    via: Via,
    counted: bool,
    version: &str,
    config: &ModelConfig,
    events: &mut Vec<Event>,
) {
    day2_hop_done(timeline, op, hop, outcome, at, via, version, events);
    if outcome == Outcome::Failed {
        op.failed_hop = Some(hop);
    }
    finish_day2(timeline, op, outcome, at, counted, version, config, events);
}

/// An operation done at every hop that read it, or failed: its end and its
/// one SLO verdict.
#[allow(clippy::too_many_arguments)]
pub(super) fn finish_day2(
    timeline: &Timeline,
    op: &mut Operation,
    outcome: Outcome,
    at: Stamp,
    counted: bool,
    version: &str,
    config: &ModelConfig,
    events: &mut Vec<Event>,
) {
    op.outcome = match outcome {
        Outcome::Succeeded => OperationOutcome::Succeeded,
        Outcome::Failed => OperationOutcome::Failed,
    };
    op.ended_at = Some(at);
    let ending = Ending {
        cluster_id: &timeline.cluster_id,
        operation: op.kind,
        subject: op.subject.as_deref(),
        counted,
        platform: &timeline.identity.platform,
        version,
        outcome,
        started: op.started_at.at.into(),
        ended: at.into(),
        target: config.target(op.kind),
        hops: operation_hops(op),
    };
    ending.record(&mut op.slo, events);
}
