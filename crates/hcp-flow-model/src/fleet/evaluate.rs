//! One timeline recomputed after a change: its join, each hop's start and
//! readiness from what is recalled and observed, the deadlines a hop or the
//! creation waits on, and the creation's outcome and SLO verdict
//! (docs/design/03-timeline-model.md §3.4–§3.6).

use super::*;
use crate::{INSTALLED_NOT_AVAILABLE, provisioned_update};

/// How a timeline's RP resource and Clusters Service cluster relate;
/// `rp_in_scope`: the RP is read, so a CS cluster without one is missing it.
pub fn join_of(timeline: &Timeline, rp_in_scope: bool) -> Option<Join> {
    if is_provisional(&timeline.cluster_id) {
        return Some(Join::RpOnly);
    }
    let rp = timeline.hops.contains_key(&Hop::RpFrontend);
    let cs = timeline.hops.contains_key(&Hop::ClustersService);
    match (rp, cs) {
        (true, _) => Some(Join::Joined),
        (false, true) if rp_in_scope => Some(Join::CsWithoutRp),
        _ => None,
    }
}

/// The verdict a provisional timeline got before its join: late when its
/// RP creation time passed the target before `joined_at`.
pub(super) fn provisional_verdict(
    view: &HopView,
    target: Duration,
    joined_at: Timestamp,
) -> Option<SloOutcome> {
    let created = view.created_at?;
    (after(created, target) <= joined_at).then_some(SloOutcome::Late)
}

/// `at + d`, saturating (a deadline past the representable range never comes).
pub(super) fn after(at: impl Into<Timestamp>, d: Duration) -> Timestamp {
    let at = at.into();
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| at.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX)
}

/// When a view's time-driven failure comes due, if it has one.
pub(super) fn budget_deadline(view: &HopView, budget: Duration) -> Option<Timestamp> {
    view.fails_after_budget
        .as_ref()
        .map(|f| after(f.since, budget))
}

/// Fail a view whose budget ran out by `now`; true when it changed. The
/// failure dates from when the budget's clock started (the Degraded
/// transition), like any upstream `since`.
pub(super) fn fail_if_due(view: &mut HopView, budget: Duration, now: Timestamp) -> bool {
    let Some(f) = view.fails_after_budget.as_ref() else {
        return false;
    };
    if view.phase == Phase::Failed || after(f.since, budget) > now {
        return false;
    }
    view.phase = Phase::Failed;
    view.since = Some(f.since.into());
    view.error = Some(Box::new(f.error.clone()));
    true
}

pub(super) fn queue(
    deadlines: &mut BinaryHeap<Deadline>,
    at: Timestamp,
    cluster_id: &str,
    due: Due,
) {
    deadlines.push(Reverse((at, cluster_id.to_string(), due)));
}

pub(super) fn elapsed(from: impl Into<Timestamp>, to: impl Into<Timestamp>) -> Duration {
    let (from, to) = (from.into(), to.into());
    let ms = to.as_millisecond() - from.as_millisecond();
    Duration::from_millis(ms.max(0) as u64)
}

/// Recompute one hop's aggregate after its objects changed.
/// Take a restored hop's memory (once: the hop's first reading after a restart).
pub(super) fn recall_hop<'a>(
    recall: &'a mut Option<&mut Recall>,
    hop: Hop,
) -> Option<&'a mut HopMemory> {
    recall.as_mut()?.hops.get_mut(&hop)
}

/// Take a restored object's memory (once).
pub(super) fn recall_object(
    recall: &mut Option<&mut Recall>,
    hop: Hop,
    via: Via,
    object: &str,
) -> Option<ObjectMemory> {
    recall
        .as_mut()?
        .objects
        .remove(&(hop, via, object.to_string()))
}

/// Recompute one hop's aggregate after its objects changed. `recalled`: the
/// phase and `since` a previous run remembered for this hop, used when the
/// hop reads the same phase again with no upstream time of its own.
pub(super) fn refresh_hop(
    timeline: &mut Timeline,
    hop: Hop,
    observed_at: Timestamp,
    recalled: Option<(Phase, Timestamp, bool)>,
    events: &mut Vec<Event>,
) {
    let created_at = timeline.created_at.at;
    let Some(hop_state) = timeline.hops.get_mut(&hop) else {
        return;
    };
    let Some(aggregate) = hop_state.aggregate() else {
        return;
    };
    let phase_changed = aggregate.phase != hop_state.phase || hop_state.state.is_empty();
    let recalled = recalled
        .filter(|(phase, _, _)| *phase == aggregate.phase)
        .map(|(_, at, observed)| TimeMark {
            at: at.into(),
            observed,
        });
    if phase_changed {
        hop_state.since = match (aggregate.since, recalled) {
            (Some(since), _) if !since.observed => since,
            (_, Some(remembered)) => remembered,
            (Some(since), None) => since,
            (None, None) => TimeMark::observed(observed_at),
        };
    } else if let Some(since) = aggregate.since
        && !since.observed
    {
        // Upstream refined the time of a phase we already had.
        hop_state.since = since;
    }
    hop_state.via = aggregate.via;
    hop_state.phase = aggregate.phase;
    hop_state.state = aggregate.state;
    if hop_state.phase == Phase::Ready && hop_state.ready_at.is_none() {
        hop_state.ready_at = Some(hop_state.since.at);
    }
    // This hop's readiness may start later hops; the creation start may have
    // moved since other hops were refreshed.
    refresh_starts(timeline);
    let Some(hop_state) = timeline.hops.get_mut(&hop) else {
        return;
    };
    let outcome = match hop_state.phase {
        Phase::Ready => Some(Outcome::Succeeded),
        Phase::Failed => Some(Outcome::Failed),
        _ => None,
    };
    // A hop failing while its cluster is deleted ends no creation hop; nor
    // does one that began after the creation ended (a day-2 node pool's is
    // its own operation's, docs/design/15-operations.md §15.9).
    let after_creation = timeline
        .completed_at
        .or(timeline.failed_at)
        .is_some_and(|done| hop_state.started_at.is_some_and(|s| s > done));
    if outcome.is_some() && !hop_state.ended && after_creation {
        hop_state.ended = true;
        hop_state.ended_via_maestro = true;
    }
    // Each view ends the hop once: Maestro's feedback may show it ready
    // before the watch does, and the direct reading still times it
    // (docs/design/08-scopes-and-scale-out.md §8.2).
    let ended = match hop_state.via {
        Via::Direct => &mut hop_state.ended,
        Via::Maestro => &mut hop_state.ended_via_maestro,
    };
    // A hop that reached its outcome before the deletion began ends its
    // creation hop even when the reading comes after the deletion's start:
    // the RP or Clusters Service may report the deletion before the watch
    // delivers the ManifestWork's readiness, and which source is read first
    // must not decide whether the hop is timed (docs/design/08-scopes-and-scale-out.md §8.2).
    let before_deletion = timeline
        .deletion
        .as_ref()
        .is_none_or(|deletion| hop_state.since.at < deletion.started_at.at);
    if let Some(outcome) = outcome
        && !*ended
        && before_deletion
    {
        *ended = true;
        let started = hop_state.started_at.unwrap_or(created_at);
        events.push(Event::HopEnded {
            cluster_id: timeline.cluster_id.clone(),
            operation: OperationKind::Create,
            subject: None,
            hop,
            via: hop_state.via,
            counted: times_hop(hop_state.via),
            platform: timeline.identity.platform.to_string(),
            version: timeline.identity.version.to_string(),
            outcome,
            started: started.into(),
            ended: hop_state.since.at.max(started).into(),
        });
    }
}

/// Who times a hop, for every operation alike (docs/design/08-scopes-and-scale-out.md §8.2): the
/// instance that reads it directly. Maestro's feedback view of a hop that a
/// management instance reads directly never feeds a duration, so a split
/// deployment's two views of one hop count once; ownership plays no part,
/// or the management side of a split would time nothing but creations.
pub(super) fn times_hop(via: Via) -> bool {
    via == Via::Direct
}

/// Who counts an operation's end (`hcpflow_operation_duration_seconds`) and
/// its one SLO verdict, for every operation alike (docs/design/08-scopes-and-scale-out.md §8.2):
/// the instance that owns its cluster, unless the operation was first seen
/// by a first sync already past its target (`first_seen_late`: nobody here
/// watched it begin, and its verdict was given silently).
pub(super) fn counts_operation(
    config: &ModelConfig,
    cluster_id: &str,
    first_seen_late: bool,
) -> bool {
    config.ownership.owns(cluster_id) && !first_seen_late
}

/// Recompute every hop's start. A start falls back on the creation start or
/// an earlier hop's readiness, and both can move after the hop was last
/// refreshed (the RP listing after Maestro moves the creation start earlier),
/// so a start that depended on them would otherwise depend on which source
/// listed first. Eight hops at most: cheap.
pub(super) fn refresh_starts(timeline: &mut Timeline) {
    let created_at = timeline.created_at.at;
    let hops: Vec<Hop> = timeline.hops.keys().copied().collect();
    for hop in hops {
        let previous_ready = previous_ready_at(timeline, hop);
        if let Some(h) = timeline.hops.get_mut(&hop) {
            h.started_at = Some(h.created_at().or(previous_ready).unwrap_or(created_at));
        }
    }
}

/// The ready time of the nearest earlier hop on the path, if any.
pub(super) fn previous_ready_at(timeline: &Timeline, hop: Hop) -> Option<Stamp> {
    Hop::ALL[..hop.index()]
        .iter()
        .rev()
        .find_map(|h| timeline.hops.get(h).and_then(|s| s.ready_at))
}

/// Decide completion, failure and cancellation of an in-flight creation.
pub(super) fn evaluate_creation(
    timeline: &mut Timeline,
    config: &ModelConfig,
    events: &mut Vec<Event>,
) {
    if !timeline.in_flight() {
        return;
    }
    let started = timeline.created_at.at;
    let target = config.target(OperationKind::Create);
    let counted = counts_operation(config, &timeline.cluster_id, false);

    if timeline.hops.values().any(|h| h.phase == Phase::Deleting) {
        timeline.outcome = CreationOutcome::Deleted;
        return;
    }
    if let Some(failed_at) = timeline
        .hops
        .values()
        .filter(|h| h.phase == Phase::Failed)
        .map(|h| h.since.at)
        .min()
    {
        timeline.outcome = CreationOutcome::Failed;
        timeline.failed_at = Some(failed_at);
        let ending = Ending {
            cluster_id: &timeline.cluster_id,
            operation: OperationKind::Create,
            subject: None,
            counted,
            platform: &timeline.identity.platform,
            version: &timeline.identity.version,
            outcome: Outcome::Failed,
            started: started.into(),
            ended: failed_at.into(),
            target,
            hops: creation_hops(timeline),
        };
        ending.record(&mut timeline.slo, events);
        return;
    }
    // An RP resource not joined has one hop; it completes when the RP says
    // Succeeded (RP-only configurations, docs/design/04-identities-and-joins.md §4.4).
    // The RP completes a creation only where Clusters Service joins it to
    // one: a self-managed hub's HostedCluster, read beside an ARO fleet,
    // waits for its other terminal hops alone. Known by its management
    // cluster, not by a hop it lacks: an ARO creation's management hops may
    // be read before its RP and CS ones (a restart's first sync).
    let without_rp: Vec<Hop>;
    let terminal_hops: &[Hop] = if is_provisional(&timeline.cluster_id) {
        &[Hop::RpFrontend]
    } else if config.terminal_hops.len() > 1
        && config.terminal_hops.contains(&Hop::RpFrontend)
        && config
            .self_managed_hubs
            .iter()
            .any(|hub| *hub == timeline.identity.mgmt_cluster)
    {
        without_rp = config
            .terminal_hops
            .iter()
            .copied()
            .filter(|h| *h != Hop::RpFrontend)
            .collect();
        &without_rp
    } else {
        &config.terminal_hops
    };
    let terminal_ready: Option<Vec<Stamp>> = terminal_hops
        .iter()
        .map(|hop| {
            let h = timeline.hops.get(hop)?;
            if h.phase == Phase::Ready {
                return h.ready_at;
            }
            // An RP resource `Updating` (a Clusters Service cluster
            // `updating`, or its update validating or pending) was
            // provisioned before: ARM takes an update only on a resource
            // that succeeded, and the update is an operation of its own
            // (docs/design/13-decisions.md §13, §15.10). Its creation is done, dated no
            // later than the update began; only a first sync meets this (a
            // creation watched ends at `Succeeded`), and a first sync
            // counts nothing.
            // Likewise a HostedCluster whose release rolled out and that is
            // down now: installed, so its creation is done there, and the
            // outage is a regression (docs/design/15-operations.md §15.7). A first sync
            // in the middle of an outage reads it so; a creation watched
            // was done there at its first readiness.
            let installed = *hop == Hop::HostedCluster && &*h.state == INSTALLED_NOT_AVAILABLE;
            (provisioned_update(*hop, &h.state) || installed)
                .then(|| h.ready_at.unwrap_or(h.since.at))
        })
        .collect();
    if let Some(ready_times) = terminal_ready
        && let Some(completed_at) = ready_times.into_iter().max()
    {
        timeline.outcome = CreationOutcome::Succeeded;
        timeline.completed_at = Some(completed_at);
        let ending = Ending {
            cluster_id: &timeline.cluster_id,
            operation: OperationKind::Create,
            subject: None,
            counted,
            platform: &timeline.identity.platform,
            version: &timeline.identity.version,
            outcome: Outcome::Succeeded,
            started: started.into(),
            ended: completed_at.into(),
            target,
            hops: creation_hops(timeline),
        };
        ending.record(&mut timeline.slo, events);
    }
}

/// A creation's hops for its history: each from its start to its first
/// ready (or its failure).
fn creation_hops(timeline: &Timeline) -> Vec<crate::EndedHop> {
    timeline
        .hops
        .iter()
        .map(|(hop, h)| {
            let started = h.started_at.unwrap_or(timeline.created_at.at);
            crate::EndedHop {
                hop: *hop,
                started_at: started.into(),
                // Never before its start, as its duration is measured.
                ended_at: h
                    .ready_at
                    .or((h.phase == Phase::Failed).then_some(h.since.at))
                    .map(|end| end.max(started).into()),
            }
        })
        .collect()
}

/// Any other operation's hops for its history.
pub(super) fn operation_hops(op: &Operation) -> Vec<crate::EndedHop> {
    op.hops
        .iter()
        .map(|h| crate::EndedHop {
            hop: h.hop,
            started_at: h.started_at.into(),
            ended_at: h.done_at.map(Into::into),
        })
        .collect()
}

/// How an operation ended: what its duration and its one SLO verdict are
/// made of, for every kind alike.
pub(super) struct Ending<'a> {
    pub(super) cluster_id: &'a str,
    pub(super) operation: OperationKind,
    /// The node pool of a pool's operation.
    pub(super) subject: Option<&'a str>,
    pub(super) counted: bool,
    pub(super) platform: &'a str,
    pub(super) version: &'a str,
    pub(super) outcome: Outcome,
    pub(super) started: Timestamp,
    pub(super) ended: Timestamp,
    pub(super) target: Duration,
    /// Each hop it passed, for the cluster's history.
    pub(super) hops: Vec<crate::EndedHop>,
}

impl Ending<'_> {
    /// Emit the operation's end and, unless it was given already (late in
    /// flight, or before a restart), its SLO verdict: good when it
    /// succeeded within the target, failed when it failed before it, late
    /// otherwise.
    pub(super) fn record(self, slo: &mut Option<SloOutcome>, events: &mut Vec<Event>) {
        let ended = self.ended.max(self.started);
        let took = elapsed(self.started, ended);
        let verdict = match self.outcome {
            Outcome::Succeeded if took <= self.target => SloOutcome::Good,
            Outcome::Failed if took < self.target => SloOutcome::Failed,
            _ => SloOutcome::Late,
        };
        events.push(Event::OperationEnded {
            cluster_id: self.cluster_id.to_string(),
            operation: self.operation,
            subject: self.subject.map(Into::into),
            counted: self.counted,
            platform: self.platform.to_string(),
            version: self.version.to_string(),
            outcome: self.outcome,
            started: self.started,
            ended,
            slo: Some(slo.unwrap_or(verdict)),
            hops: self.hops,
        });
        if slo.is_some() {
            return;
        }
        *slo = Some(verdict);
        events.push(Event::Slo {
            cluster_id: self.cluster_id.to_string(),
            operation: self.operation,
            subject: self.subject.map(Into::into),
            counted: self.counted,
            outcome: verdict,
        });
    }
}

/// Start, advance and fail a cluster's deletion (docs/design/15-operations.md §15.3). It
/// starts at the earliest sign on any hop but its node pools' (a hop
/// deleting: RP `Deleting`, CS `uninstalling`, a bundle's `deleted_at`, a
/// `deletionTimestamp`), dated by
/// the upstream time the hop entered it; it fails when the RP or Clusters
/// Service fails after it began. Returns the SLO deadline of a deletion it
/// started, for the caller to queue.
pub(super) fn evaluate_deletion(
    timeline: &mut Timeline,
    config: &ModelConfig,
    events: &mut Vec<Event>,
) -> Option<Timestamp> {
    let mut started_now = None;
    if timeline.deletion.is_none() {
        // A NodePool deleting is that pool's removal, its own operation
        // (docs/design/15-operations.md §15.9), even when it is the cluster's last pool:
        // the cluster's deletion shows first on the cluster's own objects.
        let deleting = || {
            timeline
                .hops
                .iter()
                .filter(|(hop, h)| **hop != Hop::NodePool && h.phase == Phase::Deleting)
                .map(|(_, h)| h.since)
        };
        // The earliest upstream time; the exporter's own only without one.
        let start = deleting()
            .filter(|m| !m.observed)
            .min_by_key(|m| m.at)
            .or_else(|| deleting().min_by_key(|m| m.at))?;
        let mut deletion = Operation::new(OperationKind::Delete, start);
        // What went before the deletion was seen begin here, after it began
        // upstream, was its doing: done there, and timed.
        for (hop, at) in timeline
            .gone_before_deletion
            .take()
            .map(|b| *b)
            .unwrap_or_default()
        {
            let read_directly = timeline
                .hop(hop)
                .is_some_and(|h| h.objects.keys().any(|(v, _)| *v == Via::Direct));
            if at >= start.at
                && !read_directly
                && let Some(started) = deletion.done(hop, at)
            {
                events.push(Event::HopEnded {
                    cluster_id: timeline.cluster_id.clone(),
                    operation: OperationKind::Delete,
                    subject: None,
                    hop,
                    via: Via::Direct,
                    counted: times_hop(Via::Direct),
                    platform: timeline.identity.platform.to_string(),
                    version: timeline.identity.version.to_string(),
                    outcome: Outcome::Succeeded,
                    started: started.into(),
                    ended: at.max(started).into(),
                });
            }
        }
        timeline.deletion = Some(Box::new(deletion));
        started_now = Some(after(start.at, config.target(OperationKind::Delete)));
    }
    let counted = counts_operation(config, &timeline.cluster_id, false);
    let cluster_id = timeline.cluster_id.clone();
    let platform = timeline.identity.platform.clone();
    let version = timeline.identity.version.clone();
    let Some(deletion) = timeline.deletion.as_deref_mut() else {
        return started_now;
    };
    if !deletion.in_flight() {
        return started_now;
    }
    for (hop, h) in timeline.hops.iter() {
        if h.phase == Phase::Deleting {
            deletion.reached(*hop, h.since.at);
        }
    }
    let started = deletion.started_at.at;
    let failed_at = timeline
        .hops
        .iter()
        .filter(|(hop, h)| {
            matches!(hop, Hop::RpFrontend | Hop::ClustersService)
                && h.phase == Phase::Failed
                && h.since.at >= started
        })
        .map(|(_, h)| h.since.at)
        .min();
    if let Some(failed_at) = failed_at {
        deletion.outcome = OperationOutcome::Failed;
        deletion.ended_at = Some(failed_at);
        let ending = Ending {
            cluster_id: &cluster_id,
            operation: OperationKind::Delete,
            subject: None,
            counted,
            platform: &platform,
            version: &version,
            outcome: Outcome::Failed,
            started: started.into(),
            ended: failed_at.into(),
            target: config.target(OperationKind::Delete),
            hops: operation_hops(deletion),
        };
        ending.record(&mut deletion.slo, events);
    }
    started_now
}

/// A hop's last object is gone while its cluster is deleted: the deletion
/// is done there (when the exporter saw it: upstream dates no
/// disappearance).
pub(super) fn deletion_hop_gone(
    timeline: &mut Timeline,
    hop: Hop,
    via: Via,
    at: Timestamp,
    events: &mut Vec<Event>,
) {
    let counted = times_hop(via);
    let cluster_id = timeline.cluster_id.clone();
    let Some(deletion) = timeline.deletion.as_deref_mut().filter(|d| d.in_flight()) else {
        return;
    };
    if let Some(started) = deletion.done(hop, at.into()) {
        events.push(Event::HopEnded {
            cluster_id,
            operation: OperationKind::Delete,
            subject: None,
            hop,
            via,
            counted,
            platform: timeline.identity.platform.to_string(),
            version: timeline.identity.version.to_string(),
            outcome: Outcome::Succeeded,
            started: started.into(),
            ended: at.max(started.into()),
        });
    }
}

/// Every hop is gone: the deletion succeeded (docs/design/15-operations.md §15.3).
pub(super) fn deletion_done(
    timeline: &mut Timeline,
    at: Timestamp,
    config: &ModelConfig,
    events: &mut Vec<Event>,
) {
    let counted = counts_operation(config, &timeline.cluster_id, false);
    let cluster_id = timeline.cluster_id.clone();
    let platform = timeline.identity.platform.clone();
    let version = timeline.identity.version.clone();
    let Some(deletion) = timeline.deletion.as_deref_mut().filter(|d| d.in_flight()) else {
        return;
    };
    let started = deletion.started_at.at.timestamp();
    deletion.outcome = OperationOutcome::Succeeded;
    deletion.ended_at = Some(at.max(started).into());
    let ending = Ending {
        cluster_id: &cluster_id,
        operation: OperationKind::Delete,
        subject: None,
        counted,
        platform: &platform,
        version: &version,
        outcome: Outcome::Succeeded,
        started,
        ended: at,
        target: config.target(OperationKind::Delete),
        hops: operation_hops(deletion),
    };
    ending.record(&mut deletion.slo, events);
}
