//! Deadlines: what the model must look at again when time alone passes (an
//! operation in flight reaching its SLO target, an object whose budget runs
//! out), kept in a min-heap and settled when due, so a tick costs O(due
//! deadlines) (docs/design/03-timeline-model.md §3.3).

use super::*;

/// What a deadline waits for.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Due {
    /// The operation (of the node pool named, for a pool's) is still in
    /// flight at its SLO target: late.
    Late(OperationKind, Option<Box<str>>),
    /// One object still reads the same when its budget runs out: failed.
    Budget { hop: Hop, via: Via, object: String },
}

/// A point in time the model must look at again, earliest first.
pub(super) type Deadline = Reverse<(Timestamp, String, Due)>;

/// Below this many deadlines' room the queue is never shrunk.
pub(super) const DEADLINES_KEPT_ROOM: usize = 256;
impl Fleet {
    pub(super) fn settle_due(
        &mut self,
        now: Timestamp,
        silent: &BTreeSet<String>,
        result: &mut ApplyResult,
    ) {
        self.settle_due_with(now, silent, None, result);
    }

    /// Settle due deadlines; `silent_before`: deadlines due before this time
    /// change state without events (the end of a load).
    pub(super) fn settle_due_with(
        &mut self,
        now: Timestamp,
        silent: &BTreeSet<String>,
        silent_before: Option<Timestamp>,
        result: &mut ApplyResult,
    ) {
        if self.loading_since.is_some() {
            return;
        }
        while let Some(Reverse((at, _, _))) = self.deadlines.peek() {
            if *at > now {
                break;
            }
            let Some(Reverse((at, cluster_id, due))) = self.deadlines.pop() else {
                break;
            };
            let before_load = silent_before.is_some_and(|start| at < start);
            let mut events = Vec::new();
            let changed = match due {
                Due::Late(kind, subject) => {
                    self.settle_late(&cluster_id, kind, subject, now, &mut events)
                }
                Due::Budget { hop, via, object } => {
                    self.settle_budget(&cluster_id, hop, via, object, now, &mut events)
                }
            };
            if changed {
                result.changed.insert(cluster_id.clone());
                if !silent.contains(&cluster_id) && !before_load {
                    result.events.extend(events);
                }
            }
        }
        // A first sync queues a creation deadline for every cluster, most of
        // them due at once: the room they took is given back rather than
        // kept for a load that does not come again (docs/performance.md).
        // Only well below capacity, so a queue that grows and drains
        // around one size does not move each time.
        let len = self.deadlines.len();
        if self.deadlines.capacity() > 4 * len.max(DEADLINES_KEPT_ROOM) {
            self.deadlines.shrink_to(2 * len);
        }
    }

    /// An operation still in flight and without a verdict at its target is
    /// late.
    pub(super) fn settle_late(
        &mut self,
        cluster_id: &str,
        kind: OperationKind,
        subject: Option<Box<str>>,
        now: Timestamp,
        events: &mut Vec<Event>,
    ) -> bool {
        let target = self.config.target(kind);
        let counted = counts_operation(&self.config, cluster_id, false);
        let Some(timeline) = self.clusters.get_mut(cluster_id).map(Arc::make_mut) else {
            return false;
        };
        let (started, slo) = match kind {
            OperationKind::Create if timeline.in_flight() => {
                (timeline.created_at.at, &mut timeline.slo)
            }
            OperationKind::Create => return false,
            OperationKind::Delete => match timeline.deletion.as_deref_mut() {
                Some(d) if d.in_flight() => (d.started_at.at, &mut d.slo),
                _ => return false,
            },
            _ => match timeline.day2_operation_mut(kind, subject.as_deref()) {
                Some(op) if op.in_flight() => (op.started_at.at, &mut op.slo),
                _ => return false,
            },
        };
        if slo.is_some() {
            return false;
        }
        let deadline = after(started, target);
        if deadline > now {
            // The start moved later since this was queued; wait again.
            queue(
                &mut self.deadlines,
                deadline,
                cluster_id,
                Due::Late(kind, subject),
            );
            return false;
        }
        *slo = Some(SloOutcome::Late);
        events.push(Event::Slo {
            cluster_id: cluster_id.to_string(),
            operation: kind,
            subject,
            counted,
            outcome: SloOutcome::Late,
        });
        true
    }

    /// An object whose time-driven failure came due fails, if it still reads
    /// as it did when the deadline was queued.
    pub(super) fn settle_budget(
        &mut self,
        cluster_id: &str,
        hop: Hop,
        via: Via,
        object: String,
        now: Timestamp,
        events: &mut Vec<Event>,
    ) -> bool {
        let budget = self.config.hop_budgets.get(hop);
        let Some(timeline) = self.clusters.get_mut(cluster_id).map(Arc::make_mut) else {
            return false;
        };
        let Some(hop_state) = timeline.hops.get_mut(&hop) else {
            return false;
        };
        let key = (via, object);
        let Some(mut state) = hop_state.objects.get(&key).cloned() else {
            return false;
        };
        if !fail_if_due(&mut state.view, budget, now) {
            return false;
        }
        state.since = state.view.since.map_or(state.since, TimeMark::upstream);
        hop_state.objects.insert(key, state);
        refresh_hop(timeline, hop, now, None, events);
        evaluate_creation(timeline, &self.config, events);
        if let Some(late_at) = evaluate_deletion(timeline, &self.config, events) {
            let due = Due::Late(OperationKind::Delete, None);
            queue(&mut self.deadlines, late_at, cluster_id, due);
        }
        for d in evaluate_pools(timeline, None, None, false, now, &self.config, events) {
            queue(&mut self.deadlines, d.at, cluster_id, d.due());
        }
        let check = UpgradeCheck::Failures;
        for d in evaluate_upgrades(timeline, check, false, now, &self.config, events) {
            queue(&mut self.deadlines, d.at, cluster_id, d.due());
        }
        true
    }
}
