//! Applying one observation: to the pools' readings, to the RP join, or to
//! one cluster's timeline, and evaluating every operation that reading may
//! move (docs/design/03-timeline-model.md §3, docs/design/15-operations.md §15).

use super::*;

impl Fleet {
    pub(super) fn apply_one(
        &mut self,
        observation: Observation,
        initial: bool,
        observed_at: Timestamp,
        now: Timestamp,
        result: &mut ApplyResult,
    ) {
        if pool_hops::is_pool_reading(&observation) {
            self.apply_pool_reading(observation, initial, observed_at, result);
            return;
        }
        let cluster_id = match &observation.key {
            ClusterKey::Id(id) => id.clone(),
            ClusterKey::ArmResourceId(rid) => {
                let rid = rid.to_ascii_lowercase();
                match &observation.change {
                    Change::Upsert(view) => {
                        let reading =
                            RpReading::new(&rid, &observation, view, initial, observed_at);
                        match self.rp_latest.get_mut(rid.as_str()) {
                            Some(latest) => *latest = reading,
                            None => {
                                let key = self.shared_rid(&rid);
                                self.rp_latest.insert(key, reading);
                            }
                        }
                    }
                    Change::Gone => {
                        self.rp_latest.remove(rid.as_str());
                        self.forget_held_pool_readings(&rid);
                        if self.joins_kept_for_rp.remove(rid.as_str())
                            && let Some(id) = self.by_resource_id.remove(rid.as_str())
                        {
                            self.resource_id_of.remove(&id);
                        }
                    }
                }
                // Joined: under the CS id. Not (yet): tracked at once under
                // its provisional id, so "RP accepted it, CS never got it"
                // is visible (docs/design/04-identities-and-joins.md §4.4).
                self.by_resource_id
                    .get(rid.as_str())
                    .cloned()
                    .unwrap_or_else(|| provisional_cluster_id(&rid))
            }
        };

        // Clusters Service is the join: index its resource id (for every
        // shard, so RP readings of other shards resolve too).
        let mut joined = None;
        if !is_provisional(&cluster_id)
            && let Change::Upsert(view) = &observation.change
            && let Some(rid) = &view.identity().resource_id
            && !rid.is_empty()
        {
            let rid = rid.to_ascii_lowercase();
            if self.by_resource_id.get(rid.as_str()) != Some(&cluster_id) {
                let key = self.shared_rid(&rid);
                self.by_resource_id.insert(key.clone(), cluster_id.clone());
                self.resource_id_of.insert(cluster_id.clone(), key);
                joined = Some(rid);
            }
        }
        // A cluster being deleted keeps its RP resource after Clusters
        // Service lets it go: the RP's 404 is the deletion's last hop, so
        // the deletion ends on this timeline (docs/design/15-operations.md §15.3).
        let deleting = || {
            self.clusters
                .get(&cluster_id)
                .is_some_and(|t| t.deletion_in_flight().is_some())
        };
        // Another shard's cluster: its deletion is not known here, its RP
        // resource's reading is (every shard keeps every one).
        let rp_deleting = |fleet: &Fleet| {
            !fleet.in_shard(&cluster_id)
                && fleet
                    .resource_id_of
                    .get(&cluster_id)
                    .and_then(|rid| fleet.rp_latest.get(rid))
                    .is_some_and(|r| r.view.phase == Phase::Deleting)
        };
        let mut unjoined = None;
        let cs_gone =
            observation.hop == Hop::ClustersService && matches!(observation.change, Change::Gone);
        if cs_gone
            && rp_deleting(self)
            && let Some(rid) = self.resource_id_of.get(&cluster_id)
        {
            self.joins_kept_for_rp.insert(rid.clone());
        } else if cs_gone
            && !deleting()
            && let Some(rid) = self.resource_id_of.remove(&cluster_id)
            && self.by_resource_id.get(&*rid) == Some(&cluster_id)
        {
            self.by_resource_id.remove(&*rid);
            unjoined = Some(rid.to_string());
        }

        if self.in_shard(&cluster_id) {
            self.apply_to_cluster(&cluster_id, observation, initial, observed_at, now, result);
        }
        if let Some(rid) = joined {
            self.merge_provisional(&rid, &cluster_id, initial, now, result);
            self.apply_held_pool_readings(&rid, result);
        }
        if let Some(rid) = unjoined {
            self.split_provisional(&rid, &cluster_id, now, result);
        }
    }

    pub(super) fn apply_to_cluster(
        &mut self,
        cluster_id: &str,
        observation: Observation,
        initial: bool,
        observed_at: Timestamp,
        now: Timestamp,
        result: &mut ApplyResult,
    ) {
        let Observation {
            hop,
            via,
            object,
            change,
            ..
        } = observation;
        if !self.clusters.contains_key(cluster_id) {
            let Change::Upsert(view) = &change else {
                return;
            };
            let timeline = self.new_timeline(cluster_id, view.created_at, observed_at, now);
            self.clusters
                .insert(cluster_id.to_string(), Arc::new(timeline));
        }
        let Some(timeline) = self.clusters.get_mut(cluster_id).map(Arc::make_mut) else {
            return;
        };
        let mut recall = self.memory.get_mut(cluster_id);

        let mut changed = false;
        let mut gone_events = Vec::new();
        // A NodePool first seen in this run: its creation may be followed;
        // one whose last object went: its removal may be done.
        let mut appeared: Option<String> = None;
        let mut vanished: Option<(String, Via)> = None;
        // What a HostedCluster or NodePool reports of a rollout, for its
        // upgrades (docs/design/15-operations.md §15.10).
        let mut reported: Option<Reported> = None;
        let object_name = if hop == Hop::NodePool {
            object.clone()
        } else {
            String::new()
        };
        match change {
            Change::Upsert(view) => {
                let reading = (initial, observed_at, now);
                let upserted = upsert_object(
                    (&mut self.deadlines, &self.config),
                    timeline,
                    &mut recall,
                    (cluster_id, hop, via, object),
                    view,
                    reading,
                    result,
                );
                changed |= upserted.changed;
                appeared = upserted.appeared;
                reported = upserted.reported;
            }
            Change::Gone => {
                let went = object_gone(
                    timeline,
                    cluster_id,
                    (hop, via, object),
                    observed_at,
                    &mut gone_events,
                    result,
                );
                if let Some(pool) = went {
                    changed = true;
                    if pool.is_some() {
                        reported = Some(Reported::Gone);
                    }
                    vanished = pool;
                }
            }
        }
        // A rollout may move with nothing else of the view (a new desired
        // version), and an upgrade in flight ends on a reading that may
        // otherwise compare equal.
        let upgrade_due = match &reported {
            Some(Reported::Upsert(Some(rollout))) => {
                !rollout.completed || upgrade_in_flight(timeline, hop)
            }
            Some(Reported::Upsert(None)) => upgrade_in_flight(timeline, hop),
            _ => false,
        };
        if !changed && !upgrade_due {
            return;
        }

        if timeline.hops.is_empty() {
            deletion_done(timeline, observed_at, &self.config, &mut gone_events);
            let in_flight = timeline.in_flight();
            self.remove_cluster(cluster_id, in_flight, initial, gone_events, result);
            return;
        }

        // A hop of several objects may pass through other phases while its
        // objects come back one by one after a restart: its remembered phase
        // time waits until the hop reads that phase again, and is used once.
        let recalled_since =
            recall_hop(&mut recall, hop).map(|m| (m.phase, m.since, m.since_observed));
        let mut events = Vec::new();
        refresh_hop(timeline, hop, observed_at, recalled_since, &mut events);
        if let Some((phase, _, _)) = recalled_since
            && timeline.hops.get(&hop).is_some_and(|h| h.phase == phase)
            && let Some(recall) = recall.as_mut()
        {
            recall.hops.remove(&hop);
        }
        let moved = Moved {
            hop,
            object_name: &object_name,
            appeared: appeared.as_deref(),
            vanished: vanished.as_ref().map(|(name, via)| (name.as_str(), *via)),
            reported: reported.as_ref(),
        };
        let reading = (initial, observed_at);
        for (at, due) in
            evaluate_operations(timeline, moved, reading, &self.config, &mut events, result)
        {
            queue(&mut self.deadlines, at, cluster_id, due);
        }
        result.changed.insert(cluster_id.to_string());
        if !initial {
            result.events.append(&mut gone_events);
            result.events.extend(events);
        }
    }

    /// A cluster whose last hop went: its deletion ended (or it vanished
    /// from every upstream), and the fleet forgets it and its join.
    fn remove_cluster(
        &mut self,
        cluster_id: &str,
        in_flight: bool,
        initial: bool,
        mut gone_events: Vec<Event>,
        result: &mut ApplyResult,
    ) {
        if !initial {
            result.events.append(&mut gone_events);
        }
        let last = self.clusters.remove(cluster_id);
        self.memory.remove(cluster_id);
        // A deleted cluster kept its join until its RP resource went.
        if let Some(rid) = self.resource_id_of.remove(cluster_id)
            && self.by_resource_id.get(&*rid).map(String::as_str) == Some(cluster_id)
        {
            self.by_resource_id.remove(&*rid);
        }
        result.changed.remove(cluster_id);
        result.removed.insert(cluster_id.to_string());
        if !initial && let Some(last) = last {
            result.events.push(Event::ClusterRemoved {
                cluster_id: cluster_id.to_string(),
                in_flight,
                last: Box::new(Arc::unwrap_or_clone(last)),
            });
        }
    }

    /// A cluster read for the first time in this run: its timeline, with
    /// what a previous run remembered of it (docs/design/03-timeline-model.md §3.8)
    /// and the deadlines its operations in flight wait on.
    fn new_timeline(
        &mut self,
        cluster_id: &str,
        created_at: Option<Stamp>,
        observed_at: Timestamp,
        now: Timestamp,
    ) -> Timeline {
        let mut restored = Recall::default();
        if let Some(recall) = self.memory.get_mut(cluster_id) {
            restored.created_at = recall.created_at.take();
            restored.completed_at = recall.completed_at.take();
            restored.failed_at = recall.failed_at.take();
            restored.slo = recall.slo.take();
            restored.deletion = recall.deletion.take();
            restored.day2_operations = std::mem::take(&mut recall.day2_operations);
            restored.history = std::mem::take(&mut recall.history);
        }
        let created = match (created_at, restored.created_at) {
            (Some(at), _) => TimeMark::upstream(at),
            (None, Some(at)) => TimeMark::observed(at),
            (None, None) => TimeMark::observed(observed_at),
        };
        let late_at = after(created.at, self.config.target(OperationKind::Create));
        queue(
            &mut self.deadlines,
            late_at,
            cluster_id,
            Due::Late(OperationKind::Create, None),
        );
        let mut timeline = Timeline::new(cluster_id.to_string(), created);
        // A verdict and an end once given stay given: a restart
        // neither counts them again nor forgets them when a hop
        // regressed since (docs/design/03-timeline-model.md §3.8).
        timeline.slo = restored.slo;
        if let Some(at) = restored.failed_at {
            timeline.outcome = CreationOutcome::Failed;
            timeline.failed_at = Some(at.into());
        } else if let Some(at) = restored.completed_at {
            timeline.outcome = CreationOutcome::Succeeded;
            timeline.completed_at = Some(at.into());
        }
        // A deletion in flight before the restart goes on from where
        // it was (docs/design/15-operations.md §15.8): its start, its verdict and
        // the hops already gone are not taken again.
        if let Some(d) = restored.deletion {
            let mut deletion = Operation::new(
                OperationKind::Delete,
                TimeMark {
                    at: d.started_at.into(),
                    observed: d.started_observed,
                },
            );
            deletion.slo = d.slo;
            deletion.hops = d
                .hops
                .into_iter()
                .map(|h| crate::operation::OperationHop {
                    hop: h.hop,
                    started_at: h.started_at.into(),
                    done_at: h.done_at.map(Into::into),
                    with_operation: false,
                })
                .collect();
            if deletion.slo.is_none() {
                let late_at = after(d.started_at, self.config.target(OperationKind::Delete));
                let due = Due::Late(OperationKind::Delete, None);
                queue(&mut self.deadlines, late_at, cluster_id, due);
            }
            if timeline.outcome == CreationOutcome::InFlight {
                timeline.outcome = CreationOutcome::Deleted;
            }
            timeline.deletion = Some(Box::new(deletion));
        }
        // Its history, within today's limits (docs/design/15b-operations.md §15.12).
        if !restored.history.is_empty() {
            timeline.history = restored.history.pruned(self.config.history, now);
        }
        // Its node pools' operations likewise (docs/design/15-operations.md §15.9).
        for m in restored.day2_operations {
            let op = recall::day2_operation_of(m);
            if op.in_flight() && op.slo.is_none() {
                let late_at = after(op.started_at.at, self.config.target(op.kind));
                let due = Due::Late(op.kind, op.subject.clone());
                queue(&mut self.deadlines, late_at, cluster_id, due);
            }
            timeline
                .day2_operations
                .get_or_insert_with(Default::default)
                .push(op);
        }
        timeline
    }
}

/// One object of a hop went (a DELETED event, absent from a complete list,
/// a 404). `None` when the timeline did not hold it; else `Some` of the
/// node pool that went with it (its last object in that view), if any.
/// A hop whose last object went is done for the cluster's deletion where it
/// is read directly (docs/design/08-scopes-and-scale-out.md §8.2).
fn object_gone(
    timeline: &mut Timeline,
    cluster_id: &str,
    (hop, via, object): (Hop, Via, String),
    observed_at: Timestamp,
    gone_events: &mut Vec<Event>,
    result: &mut ApplyResult,
) -> Option<Option<(String, Via)>> {
    let mut went = None;
    if via == Via::Direct {
        timeline.set_trace_links(hop, &object, Vec::new());
        timeline.set_upstream_ids(hop, &object, Vec::new());
    }
    if let Some(hop_state) = timeline.hops.get_mut(&hop)
        && hop_state.objects.remove(&(via, object.clone())).is_some()
    {
        went = Some(None);
        // The last object of the view that went: a view read
        // directly is done there whatever Maestro's lagging
        // feedback still shows (docs/design/08-scopes-and-scale-out.md §8.2).
        let last_of_view = !hop_state.objects.keys().any(|(v, _)| *v == via);
        if hop == Hop::NodePool
            && !hop_state
                .objects
                .keys()
                .any(|(v, name)| *name == object && (*v == via || via == Via::Maestro))
        {
            result.hint_pools(
                cluster_id,
                PoolHint {
                    rp: true,
                    clusters_service: true,
                },
            );
            went = Some(Some((object, via)));
        }
        let emptied = hop_state.objects.is_empty();
        if emptied {
            let via = hop_state.via;
            timeline.hops.remove(&hop);
            deletion_hop_gone(timeline, hop, via, observed_at, gone_events);
        } else if via == Via::Direct && last_of_view {
            deletion_hop_gone(timeline, hop, via, observed_at, gone_events);
        }
        if via == Via::Direct && last_of_view && timeline.deletion.is_none() {
            // One entry per hop, the latest: bounded however
            // often a pool comes and goes.
            let gone = timeline
                .gone_before_deletion
                .get_or_insert_with(Default::default);
            gone.retain(|(h, _)| *h != hop);
            gone.push((hop, observed_at.into()));
        }
    }
    went
}

/// What one reading moved on a cluster, for the operations it may start,
/// advance or end.
struct Moved<'a> {
    hop: Hop,
    /// The NodePool's name for a pool's reading, else empty.
    object_name: &'a str,
    /// A NodePool first seen in this run: its creation may be followed.
    appeared: Option<&'a str>,
    /// A pool whose last object in a view went: its removal may be done.
    vanished: Option<(&'a str, Via)>,
    /// What a HostedCluster or NodePool reported of a rollout, for its
    /// upgrades (docs/design/15-operations.md §15.10).
    reported: Option<&'a Reported>,
}

/// Every operation of one timeline after one reading changed it, each by
/// its own flow: the creation, the deletion, the pools' operations and the
/// upgrades. Returns the deadlines they now wait on.
fn evaluate_operations(
    timeline: &mut Timeline,
    moved: Moved<'_>,
    (initial, observed_at): (bool, Timestamp),
    config: &ModelConfig,
    events: &mut Vec<Event>,
    result: &mut ApplyResult,
) -> Vec<(Timestamp, Due)> {
    evaluate_creation(timeline, config, events);
    let mut deadlines = Vec::new();
    if let Some(late_at) = evaluate_deletion(timeline, config, events) {
        deadlines.push((late_at, Due::Late(OperationKind::Delete, None)));
    }
    let pools = evaluate_pools(
        timeline,
        moved.appeared,
        moved.vanished,
        initial,
        observed_at,
        config,
        events,
    );
    deadlines.extend(pools.into_iter().map(|d| (d.at, d.due())));
    let check = match (moved.hop, moved.reported) {
        (Hop::HostedCluster, Some(Reported::Upsert(rollout))) => {
            UpgradeCheck::ControlPlane(rollout.as_deref())
        }
        (Hop::NodePool, Some(Reported::Upsert(rollout))) => {
            UpgradeCheck::Pool(moved.object_name, Some(rollout.as_deref()))
        }
        (Hop::NodePool, Some(Reported::Gone)) => UpgradeCheck::Pool(moved.object_name, None),
        _ => UpgradeCheck::Failures,
    };
    let pool_upgrades_then = (moved.hop == Hop::NodePool).then(|| pool_upgrades(timeline));
    let upgrades = evaluate_upgrades(timeline, check, initial, observed_at, config, events);
    deadlines.extend(upgrades.into_iter().map(|d| (d.at, d.due())));
    if let Some(then) = pool_upgrades_then
        && pool_upgrades(timeline) != then
    {
        // A pool's upgrade began or its rollout ended: the RP and
        // Clusters Service update the pool around both (docs/design/15-operations.md
        // §15.10).
        result.hint_pools(
            &timeline.cluster_id,
            PoolHint {
                rp: true,
                clusters_service: true,
            },
        );
    }
    deadlines
}

/// What one reading of an object changed on its timeline.
#[derive(Default)]
struct Upserted {
    changed: bool,
    /// A NodePool first seen in this run: its creation may be followed.
    appeared: Option<String>,
    /// What a HostedCluster or NodePool reports of a rollout, for its
    /// upgrades (docs/design/15-operations.md §15.10).
    reported: Option<Reported>,
}

/// One object read (added, or read again): its identity merged into the
/// timeline, its view stored with the time its phase began, the deadline
/// its budget sets queued, and the RP and Clusters Service hinted when a
/// NodePool moved.
fn upsert_object(
    (deadlines, config): (&mut BinaryHeap<Deadline>, &ModelConfig),
    timeline: &mut Timeline,
    recall: &mut Option<&mut Recall>,
    (cluster_id, hop, via, object): (&str, Hop, Via, String),
    mut view: Box<HopView>,
    (initial, observed_at, now): (bool, Timestamp, Timestamp),
    result: &mut ApplyResult,
) -> Upserted {
    let mut out = Upserted::default();
    let budget = config.hop_budgets.get(hop);
    if matches!(hop, Hop::HostedCluster | Hop::NodePool) {
        let rollout = view.identity.as_mut().and_then(|i| i.rollout.take());
        // The direct view wins (docs/design/02-hops-and-phases.md §2.6): Maestro's
        // feedback of an object the watch reads lags behind it,
        // and its rollout, reported after the watch ended the
        // upgrade, would start the same upgrade again and end it
        // twice.
        let read_directly = via == Via::Maestro
            && timeline.hop(hop).is_some_and(|h| {
                h.objects.keys().any(|(v, name)| {
                    *v == Via::Direct
                        && (hop == Hop::HostedCluster
                            || *name == object
                            || same_pool(name, &object)
                            || same_pool(&object, name))
                })
            });
        if !read_directly {
            out.reported = Some(Reported::Upsert(rollout.map(Box::new)));
        }
    }
    let unjoined = timeline.identity.resource_id.is_empty();
    out.changed |= timeline.identity.merge(view.identity());
    if unjoined {
        pool_hops::hint_the_rp_on_join(timeline, cluster_id, result);
    }
    // What a watched object's annotations say; the same object
    // seen through Maestro's feedback carries no annotations.
    if via == Via::Direct {
        let parents = view
            .identity
            .as_mut()
            .map(|i| std::mem::take(&mut i.trace_parents))
            .unwrap_or_default();
        timeline.set_trace_links(hop, &object, parents);
        let ids = view
            .identity
            .as_mut()
            .map(|i| std::mem::take(&mut i.upstream_ids))
            .unwrap_or_default();
        timeline.set_upstream_ids(hop, &object, ids);
    }
    // Kept once on the timeline, not per object: at fleet scale
    // the copies would cost more than the rest of the view.
    view.identity = None;
    if let Some(created) = view.created_at
        && (timeline.created_at.observed || created < timeline.created_at.at)
    {
        timeline.created_at = TimeMark::upstream(created);
        let late_at = after(created, config.target(OperationKind::Create));
        queue(
            deadlines,
            late_at,
            cluster_id,
            Due::Late(OperationKind::Create, None),
        );
        out.changed = true;
    }
    // Decided now when already due, else queued below: the same
    // view read again compares equal to the stored, decided one.
    let deadline = if fail_if_due(&mut view, budget, now) {
        None
    } else {
        budget_deadline(&view, budget)
    };
    let hop_state = timeline.hops.get_or_insert_with(hop, || {
        let mut fresh = HopTimeline::empty(TimeMark::observed(observed_at));
        // History (first readiness, an end already reported)
        // comes back at once; the phase time only when the hop
        // reads that phase again (below).
        if let Some(memory) = recall_hop(recall, hop) {
            fresh.ready_at = memory.ready_at.take().map(Into::into);
            fresh.ended = std::mem::take(&mut memory.ended);
            fresh.ended_via_maestro = std::mem::take(&mut memory.ended_via_maestro);
        }
        fresh
    });
    let remembered = recall_object(recall, hop, via, &object);
    let key = (via, object);
    let previous = hop_state.objects.get(&key);
    if hop == Hop::NodePool && previous.is_none() {
        out.appeared = Some(key.1.clone());
    }
    // A pool that moved is worth reading at the RP and Clusters
    // Service; a first sync's settled pools are not (they are
    // read by the sources' slow rotation).
    // Only the moves the RP and Clusters Service follow: a pool
    // that appears (not ready), turns ready, or begins its
    // removal; not every flip of a pool in flight (a bundle's
    // feedback turns a NodePool unknown and back many times).
    let before = previous.map(|p| p.view.phase);
    let moved = match view.phase {
        Phase::Ready | Phase::Deleting => before != Some(view.phase),
        _ => before.is_none(),
    };
    if hop == Hop::NodePool && moved && (!initial || view.phase != Phase::Ready) {
        result.hint_pools(
            cluster_id,
            PoolHint {
                rp: true,
                clusters_service: true,
            },
        );
    }
    if previous.map(|p| &p.view) != Some(&*view) {
        let since = match (view.since, previous, remembered) {
            (Some(at), _, _) => TimeMark::upstream(at),
            (None, Some(p), _) if p.view.phase == view.phase => p.since,
            // Read again after a restart, unchanged: the time
            // this exporter saw it enter the phase then.
            (None, None, Some(m)) if m.phase == view.phase && m.state == view.state => {
                TimeMark::observed(m.since)
            }
            (None, _, _) => TimeMark::observed(observed_at),
        };
        let view = *view;
        // Queued when the stored view changes, never for a view
        // read again unchanged: its deadline already waits (or
        // has failed it), and every relist of a fleet in flight
        // would otherwise add one more copy that lives until
        // the budget runs out (docs/design/03-timeline-model.md §3.4).
        if let Some(deadline) = deadline {
            let due = Due::Budget {
                hop,
                via,
                object: key.1.clone(),
            };
            queue(deadlines, deadline, cluster_id, due);
        }
        hop_state.objects.insert(key, ObjectState { view, since });
        out.changed = true;
    }
    out
}
