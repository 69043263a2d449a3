//! A node pool as the RP (ARM `nodePools`) and Clusters Service
//! (`/clusters/{id}/node_pools`) read it: the first hops of the pool's own
//! operations, kept apart from the cluster's `rp_frontend` and
//! `clusters_service` objects so a pool never moves the cluster's phase
//! there (docs/design/15b-operations.md §15.11).
//!
//! A source says an observation is a pool's by naming the pool as the
//! object of one of these hops: the cluster's own object there has no name.

use super::day2::{
    complete_pool_operation, day2_hop_done, end_day2, pool_operation_mut, related_pools,
};
use super::evaluate::{after, counts_operation, queue};
use super::upgrades::{Day2Deadline, UpgradeCheck, evaluate_upgrades};
use super::*;
use crate::timeline::provisioned_update;

/// Whether an observation is a node pool's reading at the RP or Clusters
/// Service (those hops' own object, the cluster's, has no name).
pub(super) fn is_pool_reading(observation: &Observation) -> bool {
    matches!(observation.hop, Hop::RpFrontend | Hop::ClustersService)
        && !observation.object.is_empty()
}

impl Fleet {
    /// Take one pool reading of the RP or Clusters Service into its
    /// cluster's timeline and its pool's operations. A reading of a cluster
    /// not known (yet) is dropped: the sources read a cluster's pools again
    /// when they change and on their rotation. A reading of an RP resource
    /// Clusters Service has not joined is held until it does
    /// ([`Fleet::apply_held_pool_readings`]).
    pub(super) fn apply_pool_reading(
        &mut self,
        observation: Observation,
        initial: bool,
        observed_at: Timestamp,
        result: &mut ApplyResult,
    ) {
        let cluster_id = match &observation.key {
            ClusterKey::Id(id) => id.clone(),
            ClusterKey::ArmResourceId(rid) => {
                let rid = rid.to_ascii_lowercase();
                match self.by_resource_id.get(rid.as_str()) {
                    Some(id) => id.clone(),
                    None => {
                        self.hold_until_joined(&rid, observation, initial, observed_at);
                        return;
                    }
                }
            }
        };
        let Observation {
            hop,
            object: name,
            change,
            ..
        } = observation;
        if !self.in_shard(&cluster_id) {
            return;
        }
        let Some(timeline) = self.clusters.get_mut(&cluster_id).map(Arc::make_mut) else {
            return;
        };
        let previous = timeline.pool_reading(hop, &name).map(|r| r.state.clone());
        let reading = match change {
            Change::Upsert(view) => {
                let mut view = *view;
                // The cluster's identity comes from the cluster's own object.
                view.identity = None;
                if previous.as_ref().map(|p| &p.view) == Some(&view) {
                    return;
                }
                let since = match (view.since, &previous) {
                    (Some(at), _) => TimeMark::upstream(at),
                    (None, Some(p)) if p.view.phase == view.phase => p.since,
                    (None, _) => TimeMark::observed(observed_at),
                };
                Some(ObjectState { view, since })
            }
            Change::Gone if previous.is_none() && !pool_followed(timeline, &name) => return,
            Change::Gone => None,
        };
        let mut events = Vec::new();
        let deadlines = evaluate_pool_reading(
            timeline,
            hop,
            &name,
            reading.as_ref(),
            initial,
            observed_at,
            &self.config,
            &mut events,
        );
        if let Some(hint) = cross_hint(timeline, hop, &name, previous.as_ref(), reading.as_ref()) {
            result.hint_pools(&cluster_id, hint);
        }
        keep_reading(timeline, hop, &name, reading);
        complete_pool_operations(timeline, &name, &self.config, &mut events);
        // The pool's upgrade times its RP and Clusters Service hops from
        // the readings kept.
        let upgrades = evaluate_upgrades(
            timeline,
            UpgradeCheck::Failures,
            initial,
            observed_at,
            &self.config,
            &mut events,
        );
        // What the operations that just ended followed is settled now.
        timeline.forget_settled_pool_readings();
        for d in deadlines.into_iter().chain(upgrades) {
            queue(&mut self.deadlines, d.at, &cluster_id, d.due());
        }
        result.changed.insert(cluster_id);
        if !initial {
            result.events.extend(events);
        }
    }
}

/// An RP pool reading of a cluster Clusters Service has not joined yet.
#[derive(Debug)]
pub(super) struct HeldPoolReading {
    observation: Observation,
    initial: bool,
    observed_at: Timestamp,
}

impl Fleet {
    /// Keep the newest RP reading of each pool of an unjoined resource
    /// (`rid`, lower-cased). The RP reads an unjoined cluster's pools as
    /// any other's, and sends a pool again only when it changes: a pool in
    /// flight read before the join (at every restart the RP's first list
    /// and Clusters Service's race) would otherwise miss its RP hop until
    /// its next change (docs/design/15b-operations.md §15.11). A pool gone before the join
    /// is let go.
    fn hold_until_joined(
        &mut self,
        rid: &str,
        observation: Observation,
        initial: bool,
        observed_at: Timestamp,
    ) {
        let upsert = matches!(observation.change, Change::Upsert(_));
        // A pool gone before its cluster joined leaves nothing to hold, and
        // interns no resource id for it.
        if !upsert && !self.held_pool_readings.contains_key(rid) {
            return;
        }
        let key = self.shared_rid(rid);
        let held = self.held_pool_readings.entry(key).or_default();
        held.retain(|h| {
            h.observation.hop != observation.hop || h.observation.object != observation.object
        });
        if upsert {
            held.push(HeldPoolReading {
                observation,
                initial,
                observed_at,
            });
        }
        if held.is_empty() {
            self.held_pool_readings.remove(rid);
        }
    }

    /// Clusters Service has joined `rid` (lower-cased): apply the pool
    /// readings held for it, as they were read.
    pub(super) fn apply_held_pool_readings(&mut self, rid: &str, result: &mut ApplyResult) {
        for held in self.held_pool_readings.remove(rid).unwrap_or_default() {
            self.apply_pool_reading(held.observation, held.initial, held.observed_at, result);
        }
    }

    /// The RP resource `rid` (lower-cased) is gone: so are its pools.
    pub(super) fn forget_held_pool_readings(&mut self, rid: &str) {
        self.held_pool_readings.remove(rid);
    }

    /// RP pool readings held for resources not joined yet.
    #[cfg(test)]
    pub(crate) fn held_pool_readings_len(&self) -> usize {
        self.held_pool_readings.values().map(Vec::len).sum()
    }
}

/// Whether a pool's reading at the RP or Clusters Service is news to the
/// other of the two, and the hint that tells it (docs/design/15b-operations.md §15.11).
/// Clusters Service's reading tells the RP (whose hints need the resource
/// id Clusters Service joins) and the other way round, but only what the
/// other cannot know yet: a pool in flight whose phase the other reads
/// differently, or one no hop showed before. A pool read for the first time
/// because its NodePool appeared is not news: the NodePool hinted both, and
/// telling the other again would read every new pool twice there.
fn cross_hint(
    timeline: &Timeline,
    hop: Hop,
    name: &str,
    previous: Option<&ObjectState>,
    reading: Option<&ObjectState>,
) -> Option<PoolHint> {
    let view = &reading?.view;
    if view.phase == Phase::Ready || provisioned_update(hop, &view.state) {
        return None;
    }
    let other = match hop {
        Hop::RpFrontend => Hop::ClustersService,
        _ => Hop::RpFrontend,
    };
    let news = match timeline.pool_reading_of(other, name) {
        Some(theirs) => theirs.state.view.phase != view.phase,
        None => previous.is_some() || timeline.node_pool_object(name).is_none(),
    };
    news.then_some(PoolHint {
        rp: other == Hop::RpFrontend,
        clusters_service: other == Hop::ClustersService,
    })
}

/// Whether an operation in flight follows the pool the RP or Clusters
/// Service names `name`.
/// The RP reads a cluster's pools by its ARM id: a NodePool that hinted
/// them before the id was known hinted Clusters Service only, so the RP
/// hears of the pools in flight when the id arrives on `timeline`, which
/// had none (docs/design/15b-operations.md §15.11).
pub(super) fn hint_the_rp_on_join(timeline: &Timeline, cluster_id: &str, result: &mut ApplyResult) {
    let creating_or_removing_a_pool = timeline
        .day2_in_flight()
        .any(|op| op.kind.of_node_pool() && !op.kind.of_version());
    if !timeline.identity.resource_id.is_empty() && creating_or_removing_a_pool {
        result.hint_pools(
            cluster_id,
            PoolHint {
                rp: true,
                clusters_service: false,
            },
        );
    }
}

fn pool_followed(timeline: &Timeline, name: &str) -> bool {
    timeline
        .day2_in_flight()
        .any(|op| op.node_pool().is_some_and(|p| related_pools(p, name)))
}

/// Store the reading (`None`: the pool is gone from that hop), and keep the
/// cluster's pool readings that matter: a pool not settled, or one an
/// operation in flight follows. A fleet's settled pools would cost memory
/// for nothing (docs/design/15b-operations.md §15.11).
fn keep_reading(timeline: &mut Timeline, hop: Hop, name: &str, reading: Option<ObjectState>) {
    let mut readings = timeline
        .pool_readings
        .take()
        .map(|b| *b)
        .unwrap_or_default();
    readings.retain(|r| !(r.hop == hop && &*r.name == name));
    if let Some(state) = reading {
        readings.push(PoolReading {
            hop,
            name: name.into(),
            state,
        });
    }
    timeline.pool_readings = (!readings.is_empty()).then(|| Box::new(readings));
    timeline.forget_settled_pool_readings();
}

/// After the reading is stored: a pool's operation done at every hop that
/// read it ends (a removal once no hop shows the pool), and the ended ones
/// go.
fn complete_pool_operations(
    timeline: &mut Timeline,
    name: &str,
    config: &ModelConfig,
    events: &mut Vec<Event>,
) {
    let Some(mut ops) = timeline.day2_operations.take().map(|b| *b) else {
        return;
    };
    let version = timeline.identity.version.clone();
    for op in ops.iter_mut().filter(|op| {
        op.in_flight()
            && op.kind.of_node_pool()
            && op.node_pool().is_some_and(|p| related_pools(p, name))
    }) {
        let counted = counts_operation(config, &timeline.cluster_id, op.uncounted);
        complete_pool_operation(timeline, op, counted, &version, config, events);
    }
    ops.retain(|op| keep_day2(timeline, op));
    timeline.day2_operations = (!ops.is_empty()).then(|| Box::new(ops));
}

/// A pool's operation of `kind`, followed from `at` (a first sync's late
/// one uncounted), and its SLO deadline unless its verdict is given.
fn follow(
    kind: OperationKind,
    subject: &str,
    at: TimeMark,
    initial: bool,
    observed_at: Timestamp,
    config: &ModelConfig,
    deadlines: &mut Vec<Day2Deadline>,
) -> Operation {
    let late_at = after(at.at, config.target(kind));
    let op = Operation::of_pool(kind, subject, at).first_seen(initial, late_at, observed_at);
    if op.slo.is_none() {
        deadlines.push(Day2Deadline {
            at: late_at,
            kind,
            subject: subject.into(),
        });
    }
    op
}

/// Start, advance or fail the operations of the pool the RP or Clusters
/// Service names `name` after its reading there changed (`reading`: `None`
/// when the pool is gone from that hop). Its creation starts at the first
/// hop that shows it not ready, dated by that hop's creation time (ARM's
/// `systemData.createdAt`: the request), and is done at a hop when it reads
/// ready there; its removal starts at the first hop that shows it deleting
/// and is done at a hop when the pool is gone there. A pool failed at a hop
/// fails its operation (docs/design/15b-operations.md §15.11).
#[allow(clippy::too_many_arguments)]
fn evaluate_pool_reading(
    timeline: &mut Timeline,
    hop: Hop,
    name: &str,
    reading: Option<&ObjectState>,
    initial: bool,
    observed_at: Timestamp,
    config: &ModelConfig,
    events: &mut Vec<Event>,
) -> Vec<Day2Deadline> {
    let mut deadlines = Vec::new();
    if timeline.deletion.is_some() {
        // The cluster's deletion takes its pools with it.
        return deadlines;
    }
    // The operation's name for the pool: the NodePool's when one is read,
    // so one pool is one operation whichever hop shows it first.
    let subject = timeline
        .hop(Hop::NodePool)
        .and_then(|h| {
            h.objects
                .keys()
                .map(|(_, n)| n)
                .find(|n| related_pools(n, name))
        })
        .cloned()
        .unwrap_or_else(|| name.to_string());
    let version = timeline.identity.version.clone();
    let mut ops = timeline
        .day2_operations
        .take()
        .map(|b| *b)
        .unwrap_or_default();
    let (create, delete) = (OperationKind::NodePoolCreate, OperationKind::NodePoolDelete);
    let follow_new = |kind: OperationKind, at: TimeMark, deadlines: &mut Vec<Day2Deadline>| {
        follow(kind, &subject, at, initial, observed_at, config, deadlines)
    };
    match reading {
        Some(r) => {
            let at = r.since.at;
            let created = r.view.created_at.map_or(r.since, TimeMark::upstream);
            let phase = r.view.phase;
            // The request came before the NodePool: a creation starts at the
            // earliest upstream time any hop gives it, whatever the hop reads
            // now. A verdict already given stays given; the start is a fact.
            if let Some(op) = pool_operation_mut(&mut ops, create, name)
                && !created.observed
                && created.at < op.started_at.at
            {
                op.start_earlier(created);
                if op.slo.is_none() {
                    deadlines.push(Day2Deadline {
                        at: after(created.at, config.target(op.kind)),
                        kind: op.kind,
                        subject: op.subject.clone().unwrap_or_default(),
                    });
                }
            }
            if phase == Phase::Deleting {
                if let Some(op) = pool_operation_mut(&mut ops, create, name) {
                    // Removed before it was ready: neither late nor failed.
                    op.outcome = OperationOutcome::Deleted;
                    op.ended_at = Some(at.max(op.started_at.at));
                }
                if pool_operation_mut(&mut ops, delete, name).is_none() {
                    ops.push(follow_new(delete, r.since, &mut deadlines));
                }
                if let Some(op) = pool_operation_mut(&mut ops, delete, name) {
                    op.reached_at(hop, r.since);
                }
            } else if phase == Phase::Failed
                && pool_operation_mut(&mut ops, OperationKind::NodePoolUpgrade, name).is_some()
            {
                // Failed while it upgrades: the upgrade's to fail
                // (`upgrades::service_hops`), not a creation of its own.
            } else if phase == Phase::Failed
                && hop == Hop::RpFrontend
                && timeline
                    .pool_reading_of(Hop::ClustersService, name)
                    .is_some_and(|cs| {
                        matches!(
                            cs.state.view.phase,
                            Phase::Pending | Phase::Progressing | Phase::Unknown
                        )
                    })
            {
                // The RP mirrors Clusters Service, which still works on the
                // pool: its `error`, read within a fast poll, names the
                // failure at its root cause, clusters_service
                // (docs/design/15b-operations.md §15.11).
            } else if phase == Phase::Failed {
                let failed = (hop, name, r, created);
                pool_failed(
                    timeline,
                    &mut ops,
                    failed,
                    &version,
                    follow_new,
                    &mut deadlines,
                    events,
                    config,
                    observed_at,
                );
            } else if phase == Phase::Ready || provisioned_update(hop, &r.view.state) {
                // Provisioned: a creation still followed is done here; an
                // update of a pool provisioned before starts none.
                if let Some(op) = pool_operation_mut(&mut ops, create, name) {
                    op.reached_at(
                        hop,
                        r.view
                            .created_at
                            .map_or(TimeMark::observed(observed_at), TimeMark::upstream),
                    );
                    let at = at.max(op.started_at.at);
                    let outcome = Outcome::Succeeded;
                    day2_hop_done(
                        timeline,
                        op,
                        hop,
                        outcome,
                        at,
                        Via::Direct,
                        &version,
                        events,
                    );
                }
            } else if pool_operation_mut(&mut ops, delete, name).is_some() {
                // Being removed: a hop still reading what it read before
                // starts no creation.
            } else if let Some(op) = pool_operation_mut(&mut ops, create, name) {
                op.reached_at(hop, created);
            } else {
                let mut op = follow_new(create, created, &mut deadlines);
                op.reached_at(hop, created);
                ops.push(op);
            }
        }
        None => pool_gone_at(
            timeline,
            &mut ops,
            (hop, name),
            &version,
            observed_at,
            events,
        ),
    }
    timeline.day2_operations = (!ops.is_empty()).then(|| Box::new(ops));
    deadlines
}

/// A hop read the pool failed (the RP's `Failed`, Clusters Service's
/// `error`) outside an upgrade: the pool's removal or creation in flight
/// fails there, or a creation is followed to fail at once; a failure
/// another hop already reported is renamed to its root cause, Clusters
/// Service (docs/design/15b-operations.md §15.11), and not ended twice.
#[allow(clippy::too_many_arguments)]
fn pool_failed(
    timeline: &mut Timeline,
    ops: &mut Vec<Operation>,
    (hop, name, r, created): (Hop, &str, &ObjectState, TimeMark),
    version: &str,
    follow_new: impl Fn(OperationKind, TimeMark, &mut Vec<Day2Deadline>) -> Operation,
    deadlines: &mut Vec<Day2Deadline>,
    events: &mut Vec<Event>,
    config: &ModelConfig,
    observed_at: Timestamp,
) {
    let (create, delete) = (OperationKind::NodePoolCreate, OperationKind::NodePoolDelete);
    let in_flight = pool_operation_mut(ops, delete, name).is_some()
        || pool_operation_mut(ops, create, name).is_some();
    let mut failed_before = false;
    for op in ops.iter_mut().filter(|op| {
        op.outcome == OperationOutcome::Failed
            && op.node_pool().is_some_and(|p| related_pools(p, name))
    }) {
        failed_before = true;
        // The RP's `Failed` was read first, Clusters Service
        // unread then: its `error` is the root cause and names
        // the hop (docs/design/15b-operations.md §15.11).
        if !in_flight && hop == Hop::ClustersService && op.failed_hop == Some(Hop::RpFrontend) {
            op.failed_hop = Some(Hop::ClustersService);
        }
    }
    if failed_before && !in_flight {
        // Another hop reporting the failure already taken.
        return;
    }
    let kind = if pool_operation_mut(ops, delete, name).is_some() {
        delete
    } else {
        if pool_operation_mut(ops, create, name).is_none() {
            ops.push(follow_new(create, created, deadlines));
        }
        create
    };
    if let Some(op) = pool_operation_mut(ops, kind, name) {
        // First seen failed: when the hop got the pool is not
        // known, so from the operation's start.
        op.reached_at(
            hop,
            r.view
                .created_at
                .map_or(TimeMark::observed(observed_at), TimeMark::upstream),
        );
        let counted = counts_operation(config, &timeline.cluster_id, op.uncounted);
        let at = r.since.at.max(op.started_at.at);
        let outcome = Outcome::Failed;
        end_day2(
            timeline,
            op,
            hop,
            outcome,
            at,
            Via::Direct,
            counted,
            version,
            config,
            events,
        );
    }
}

/// A hop no longer shows the pool: its removal is done there, and a
/// creation the hop had read ends `deleted` (gone before it was ready).
fn pool_gone_at(
    timeline: &mut Timeline,
    ops: &mut [Operation],
    (hop, name): (Hop, &str),
    version: &str,
    observed_at: Timestamp,
    events: &mut Vec<Event>,
) {
    let (create, delete) = (OperationKind::NodePoolCreate, OperationKind::NodePoolDelete);
    let at = Stamp::from(observed_at);
    if let Some(op) = pool_operation_mut(ops, delete, name) {
        op.reached_at(hop, TimeMark::observed(observed_at));
        let at = at.max(op.started_at.at);
        let outcome = Outcome::Succeeded;
        day2_hop_done(timeline, op, hop, outcome, at, Via::Direct, version, events);
    }
    if let Some(op) = pool_operation_mut(ops, create, name)
        && op.hop(hop).is_some()
    {
        // Gone before it was ready: removed, neither late nor failed.
        op.outcome = OperationOutcome::Deleted;
        op.ended_at = Some(at.max(op.started_at.at));
    }
}
