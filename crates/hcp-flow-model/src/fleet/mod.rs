//! The fleet store: every cluster's timeline, the RP join, and the state
//! machine that turns observations into events (docs/design/03-timeline-model.md §3).
//!
//! Pure: no I/O, no clock. Callers pass `now` and get back events (what
//! histograms, counters and spans need) and the set of clusters whose
//! exposition must be re-rendered.
//!
//! Phases that change with elapsed time alone — an in-flight creation passing
//! the SLO target, an object whose [`FailsAfterBudget`] runs out — are
//! decided here from deadlines in a min-heap. An entry is checked when it
//! comes due and dropped if what it waited for no longer holds, so neither an
//! event nor a tick ever scans every timeline: a tick costs O(due deadlines).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use sha2::{Digest, Sha256};

use super::budget::{HopBudgets, OperationBudgets};
use super::hop::Via;
use super::hop::{Hop, Outcome, Phase, SloOutcome};
use super::memory::{
    ClusterMemory, Day2OperationMemory, DeletionHopMemory, DeletionMemory, HopMemory, Memory,
    ObjectMemory,
};
use super::observation::{Batch, Change, ClusterKey, HopView, Observation};
use super::operation::{Operation, OperationKind, OperationOutcome};
use super::stamp::Stamp;
use super::timeline::{
    CreationOutcome, HopTimeline, ObjectState, PoolReading, TimeMark, Timeline, same_pool,
};

mod config;
mod evaluate;
mod join;
mod pool_hops;
mod recall;
mod upgrades;

pub use config::*;
pub use evaluate::join_of;
use evaluate::*;
use join::RpReading;
use recall::Recall;
use upgrades::{Reported, UpgradeCheck, evaluate_upgrades, upgrade_in_flight};

/// What stays on the timeline: an operation in flight, an upgrade that
/// failed while its object still reports its target, and a pool's failed
/// operation while some hop still shows the pool (so the JSON, the UI and
/// the trace name where it failed).
fn keep_day2(timeline: &Timeline, op: &Operation) -> bool {
    upgrades::kept(op)
        || (op.kind.of_node_pool()
            && op.outcome == OperationOutcome::Failed
            && op.node_pool().is_some_and(|p| timeline.pool_shown(p)))
}

/// Something histograms, counters or spans must hear about. Produced only for
/// transitions witnessed after a source's first sync.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A hop of an operation was done or failed there for the first time.
    HopEnded {
        cluster_id: String,
        operation: OperationKind,
        /// The node pool a node pool's operation follows.
        subject: Option<Box<str>>,
        hop: Hop,
        /// The view the hop ended in.
        via: Via,
        /// Feeds `hcpflow_hop_duration_seconds`: only direct readings do,
        /// so a split deployment's two views of one hop count once.
        counted: bool,
        /// The cluster's platform and OpenShift version as its identity
        /// said when the hop ended (the histograms keep the version's minor).
        platform: String,
        version: String,
        outcome: Outcome,
        started: Timestamp,
        ended: Timestamp,
    },
    /// An operation succeeded or failed (one ended by a deletion has no end
    /// of its own: docs/design/15-operations.md §15.3).
    OperationEnded {
        cluster_id: String,
        operation: OperationKind,
        subject: Option<Box<str>>,
        /// Feeds `hcpflow_operation_duration_seconds` (this instance owns it).
        counted: bool,
        platform: String,
        /// The cluster's OpenShift version when the operation ended.
        version: String,
        outcome: Outcome,
        started: Timestamp,
        ended: Timestamp,
        /// Its SLO verdict, given now or before.
        slo: Option<SloOutcome>,
        /// Each hop it passed, with its times (the cluster's history).
        hops: Vec<super::history::EndedHop>,
    },
    /// An operation's SLO verdict; exactly once per operation.
    Slo {
        cluster_id: String,
        operation: OperationKind,
        subject: Option<Box<str>>,
        /// Feeds `hcpflow_operation_slo_events_total` (this instance owns it).
        counted: bool,
        outcome: SloOutcome,
    },
    /// The cluster's last object is gone; its series go away. Carries the last
    /// timeline (a creation deleted in flight still closes its trace).
    ClusterRemoved {
        cluster_id: String,
        in_flight: bool,
        last: Box<Timeline>,
    },
}

/// What one `apply` or `tick` did.
#[derive(Debug, Default)]
pub struct ApplyResult {
    pub events: Vec<Event>,
    /// Clusters whose timeline changed (re-render them).
    pub changed: BTreeSet<String>,
    /// Clusters that no longer exist (drop their rendering).
    pub removed: BTreeSet<String>,
    /// Clusters whose node pools may have changed (a NodePool appeared,
    /// went, or changed its phase; a pool moved at the RP or Clusters
    /// Service), with the hops worth reading them at now (docs/design/15b-operations.md
    /// §15.11).
    pub pool_hints: BTreeMap<String, PoolHint>,
}

/// Where a cluster's pools are worth reading now: a NodePool's move tells
/// both, a pool's move at one of them the other.
/// A timeline's pool upgrades: in flight, and ended but settling.
fn pool_upgrades(timeline: &Timeline) -> (usize, usize) {
    timeline
        .day2_operations()
        .filter(|op| op.kind == OperationKind::NodePoolUpgrade)
        .fold((0, 0), |(in_flight, settling), op| {
            (
                in_flight + usize::from(op.in_flight()),
                settling + usize::from(op.settling()),
            )
        })
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolHint {
    pub rp: bool,
    pub clusters_service: bool,
}

impl ApplyResult {
    fn hint_pools(&mut self, cluster_id: &str, hint: PoolHint) {
        let entry = self.pool_hints.entry(cluster_id.to_string()).or_default();
        entry.rp |= hint.rp;
        entry.clusters_service |= hint.clusters_service;
    }
}

/// What a deadline waits for.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Due {
    /// The operation (of the node pool named, for a pool's) is still in
    /// flight at its SLO target: late.
    Late(OperationKind, Option<Box<str>>),
    /// One object still reads the same when its budget runs out: failed.
    Budget { hop: Hop, via: Via, object: String },
}

/// A point in time the model must look at again, earliest first.
type Deadline = Reverse<(Timestamp, String, Due)>;

/// Below this many deadlines' room the queue is never shrunk.
const DEADLINES_KEPT_ROOM: usize = 256;

#[derive(Debug, Default)]
pub struct Fleet {
    config: ModelConfig,
    /// Shared so that a reader (the JSON API) takes the timelines under the
    /// lock as reference counts and serialises them without it; a timeline
    /// changed while a reader holds it is copied then (docs/design/05-metrics.md §5.5).
    clusters: BTreeMap<String, Arc<Timeline>>,
    deadlines: BinaryHeap<Deadline>,
    /// Lower-cased ARM resource id → cluster id, from Clusters Service.
    /// The three maps share one copy of each resource id ([`Fleet::shared_rid`]):
    /// an ARM id is some 150 bytes, and a fleet has one per cluster.
    by_resource_id: HashMap<Arc<str>, String>,
    resource_id_of: HashMap<String, Arc<str>>,
    rp_latest: HashMap<Arc<str>, RpReading>,
    /// Joins a shard keeps for a cluster another shard follows, after
    /// Clusters Service let the cluster go while its RP resource still
    /// deletes: without them the resource would be followed again under its
    /// provisional id, in that id's shard, and its deletion counted twice
    /// (docs/design/08-scopes-and-scale-out.md §8.3). Dropped when the RP resource goes.
    joins_kept_for_rp: HashSet<Arc<str>>,
    /// RP pool readings of resources Clusters Service has not joined yet,
    /// applied at the join (docs/design/15b-operations.md §15.11).
    held_pool_readings: HashMap<Arc<str>, Vec<pool_hops::HeldPoolReading>>,
    /// Restored from the state store at start, consumed as clusters are
    /// read again (docs/design/03-timeline-model.md §3.8).
    memory: HashMap<String, Recall>,
    /// Set while the first sync of every source is still coming in: no
    /// deadline is settled, so the outcome of the load does not depend on
    /// which source lists first (docs/design/03-timeline-model.md §3.3).
    loading_since: Option<Timestamp>,
}

impl Fleet {
    pub fn new(config: ModelConfig) -> Fleet {
        Fleet {
            config,
            ..Fleet::default()
        }
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn get(&self, cluster_id: &str) -> Option<&Timeline> {
        self.clusters.get(cluster_id).map(|t| &**t)
    }

    /// Every timeline, each a shared reference a reader may keep after it
    /// lets go of the fleet.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Timeline>> {
        self.clusters.values()
    }

    pub fn len(&self) -> usize {
        self.clusters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty()
    }

    /// Start a load: until [`Fleet::finish_load`], deadlines wait, so what
    /// the first syncs show is judged once, as a whole (docs/design/03-timeline-model.md §3.3).
    pub fn begin_load(&mut self, at: Timestamp) {
        self.loading_since = Some(at);
    }

    pub fn is_loading(&self) -> bool {
        self.loading_since.is_some()
    }

    /// End the load: settle every deadline that came due. A verdict already
    /// due before the load began is settled silently (it happened before this
    /// instance watched); one that came due during the load is counted.
    /// Restored memory of clusters no source showed again is dropped.
    pub fn finish_load(&mut self, now: Timestamp) -> ApplyResult {
        let mut result = ApplyResult::default();
        let Some(since) = self.loading_since.take() else {
            return result;
        };
        // What the load did not read again belongs to state that changed:
        // a phase entered later is new and gets its own time.
        let clusters = &self.clusters;
        self.memory.retain(|id, _| clusters.contains_key(id));
        for recall in self.memory.values_mut() {
            recall.hops.clear();
            recall.objects.clear();
        }
        self.settle_due_with(now, &BTreeSet::new(), Some(since), &mut result);
        result
    }

    /// How a cluster's RP resource and Clusters Service cluster relate;
    /// `None` when neither side of the join is in play.
    pub fn join_of(&self, timeline: &Timeline) -> Option<Join> {
        join_of(timeline, self.config.rp_in_scope)
    }

    /// A timeline by cluster id, by ARM resource id (any case): the
    /// cluster it joined, else its provisional timeline; or by HostedCluster
    /// `namespace/name` (a self-managed cluster keyed by its `spec.clusterID`
    /// is known to `kubectl` by that name; found by a scan, once per request).
    pub fn resolve(&self, key: &str) -> Option<&Timeline> {
        self.resolve_shared(key).map(|t| &**t)
    }

    /// [`Fleet::resolve`], as a shared reference.
    pub fn resolve_shared(&self, key: &str) -> Option<&Arc<Timeline>> {
        if let Some(timeline) = self.clusters.get(key) {
            return Some(timeline);
        }
        // An ARM id in a URL path may have lost its leading slash.
        let rid = key.to_ascii_lowercase();
        let rid = match rid.strip_prefix('/').unwrap_or(&rid) {
            rest if rest.starts_with("subscriptions/") => format!("/{rest}"),
            _ => {
                let (namespace, name) = key.split_once('/')?;
                return self.iter().find(|t| {
                    !name.is_empty() && t.identity.namespace == namespace && t.identity.name == name
                });
            }
        };
        match self.by_resource_id.get(rid.as_str()) {
            Some(id) => self.clusters.get(id),
            None => self.clusters.get(&provisional_cluster_id(&rid)),
        }
    }

    fn in_shard(&self, cluster_id: &str) -> bool {
        follows(self.config.shard, cluster_id)
    }

    /// Apply one batch at `now`, the model's clock: it also settles every
    /// deadline that has come due.
    pub fn apply(&mut self, batch: Batch, now: Timestamp) -> ApplyResult {
        let mut result = ApplyResult::default();
        for observation in batch.observations {
            self.apply_one(
                observation,
                batch.initial,
                batch.observed_at,
                now,
                &mut result,
            );
        }
        // A first sync loads state silently: what it shows already late or
        // failed was counted by whoever watched it happen (or by nobody),
        // never again here.
        let silent = if batch.initial {
            result.changed.clone()
        } else {
            BTreeSet::new()
        };
        self.settle_due(now, &silent, &mut result);
        self.keep_history(&result.events, now);
        result
    }

    /// Each operation that ended, into its cluster's history
    /// (docs/design/15b-operations.md §15.12): only ends witnessed after a first sync, as
    /// every event is.
    fn keep_history(&mut self, events: &[Event], now: Timestamp) {
        for event in events {
            let Event::OperationEnded {
                cluster_id,
                operation,
                subject,
                outcome,
                started,
                ended,
                slo,
                hops,
                ..
            } = event
            else {
                continue;
            };
            let Some(timeline) = self.clusters.get_mut(cluster_id).map(Arc::make_mut) else {
                continue;
            };
            let entry = super::history::EndedOperation {
                operation: *operation,
                subject: subject.clone(),
                started_at: *started,
                ended_at: *ended,
                outcome: *outcome,
                slo: *slo,
                hops: hops.clone(),
            };
            super::history::keep(&mut timeline.history, entry, self.config.history, now);
        }
    }

    /// Advance the clock: creations in flight that pass the target become late
    /// at this moment, not when (if ever) they finish, and objects whose
    /// budget ran out fail. Costs O(deadlines due).
    pub fn tick(&mut self, now: Timestamp) -> ApplyResult {
        let mut result = ApplyResult::default();
        self.settle_due(now, &BTreeSet::new(), &mut result);
        self.keep_history(&result.events, now);
        result
    }

    /// The earliest pending deadline (a caller may sleep until then).
    pub fn next_deadline(&self) -> Option<Timestamp> {
        self.deadlines.peek().map(|Reverse((at, _, _))| *at)
    }

    /// How many deadlines wait (each cluster in flight has at most a few).
    pub fn pending_deadlines(&self) -> usize {
        self.deadlines.len()
    }

    /// How many deadlines the queue has room for without growing.
    #[cfg(test)]
    pub(crate) fn deadline_room(&self) -> usize {
        self.deadlines.capacity()
    }

    fn settle_due(&mut self, now: Timestamp, silent: &BTreeSet<String>, result: &mut ApplyResult) {
        self.settle_due_with(now, silent, None, result);
    }

    /// Settle due deadlines; `silent_before`: deadlines due before this time
    /// change state without events (the end of a load).
    fn settle_due_with(
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
    fn settle_late(
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
    fn settle_budget(
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

    fn apply_one(
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

    fn apply_to_cluster(
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
        let recall = self.memory.get_mut(cluster_id);
        let timeline = match (self.clusters.get_mut(cluster_id), &change) {
            (Some(t), _) => Arc::make_mut(t),
            (None, Change::Gone) => return,
            (None, Change::Upsert(view)) => {
                let mut restored = Recall::default();
                if let Some(recall) = recall {
                    restored.created_at = recall.created_at.take();
                    restored.completed_at = recall.completed_at.take();
                    restored.failed_at = recall.failed_at.take();
                    restored.slo = recall.slo.take();
                    restored.deletion = recall.deletion.take();
                    restored.day2_operations = std::mem::take(&mut recall.day2_operations);
                    restored.history = std::mem::take(&mut recall.history);
                }
                let created = match (view.created_at, restored.created_at) {
                    (Some(at), _) => TimeMark::upstream(at),
                    (None, Some(at)) => TimeMark::observed(at),
                    (None, None) => TimeMark::observed(observed_at),
                };
                let late_at = after(created.at, self.config.creation_target);
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
                        .map(|h| super::operation::OperationHop {
                            hop: h.hop,
                            started_at: h.started_at.into(),
                            done_at: h.done_at.map(Into::into),
                            with_operation: false,
                        })
                        .collect();
                    if deletion.slo.is_none() {
                        let late_at = after(d.started_at, self.config.delete_target);
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
                Arc::make_mut(
                    self.clusters
                        .entry(cluster_id.to_string())
                        .or_insert(Arc::new(timeline)),
                )
            }
        };
        let mut recall = self.memory.get_mut(cluster_id);
        let budget = self.config.hop_budgets.get(hop);

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
            Change::Upsert(mut view) => {
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
                        reported = Some(Reported::Upsert(rollout.map(Box::new)));
                    }
                }
                let unjoined = timeline.identity.resource_id.is_empty();
                changed |= timeline.identity.merge(view.identity());
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
                    let late_at = after(created, self.config.creation_target);
                    queue(
                        &mut self.deadlines,
                        late_at,
                        cluster_id,
                        Due::Late(OperationKind::Create, None),
                    );
                    changed = true;
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
                    if let Some(memory) = recall_hop(&mut recall, hop) {
                        fresh.ready_at = memory.ready_at.take().map(Into::into);
                        fresh.ended = std::mem::take(&mut memory.ended);
                        fresh.ended_via_maestro = std::mem::take(&mut memory.ended_via_maestro);
                    }
                    fresh
                });
                let remembered = recall_object(&mut recall, hop, via, &object);
                let key = (via, object);
                let previous = hop_state.objects.get(&key);
                if hop == Hop::NodePool && previous.is_none() {
                    appeared = Some(key.1.clone());
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
                        queue(&mut self.deadlines, deadline, cluster_id, due);
                    }
                    hop_state.objects.insert(key, ObjectState { view, since });
                    changed = true;
                }
            }
            Change::Gone => {
                if via == Via::Direct {
                    timeline.set_trace_links(hop, &object, Vec::new());
                    timeline.set_upstream_ids(hop, &object, Vec::new());
                }
                if let Some(hop_state) = timeline.hops.get_mut(&hop)
                    && hop_state.objects.remove(&(via, object.clone())).is_some()
                {
                    changed = true;
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
                        vanished = Some((object, via));
                        reported = Some(Reported::Gone);
                    }
                    let emptied = hop_state.objects.is_empty();
                    if emptied {
                        let via = hop_state.via;
                        timeline.hops.remove(&hop);
                        deletion_hop_gone(timeline, hop, via, observed_at, &mut gone_events);
                    } else if via == Via::Direct && last_of_view {
                        deletion_hop_gone(timeline, hop, via, observed_at, &mut gone_events);
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
            if !initial {
                result.events.append(&mut gone_events);
            }
            let in_flight = timeline.in_flight();
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
        evaluate_creation(timeline, &self.config, &mut events);
        if let Some(late_at) = evaluate_deletion(timeline, &self.config, &mut events) {
            queue(
                &mut self.deadlines,
                late_at,
                cluster_id,
                Due::Late(OperationKind::Delete, None),
            );
        }
        let pool_deadlines = evaluate_pools(
            timeline,
            appeared.as_deref(),
            vanished.as_ref().map(|(name, via)| (name.as_str(), *via)),
            initial,
            observed_at,
            &self.config,
            &mut events,
        );
        for d in pool_deadlines {
            queue(&mut self.deadlines, d.at, cluster_id, d.due());
        }
        let check = match (hop, &reported) {
            (Hop::HostedCluster, Some(Reported::Upsert(rollout))) => {
                UpgradeCheck::ControlPlane(rollout.as_deref())
            }
            (Hop::NodePool, Some(Reported::Upsert(rollout))) => {
                UpgradeCheck::Pool(&object_name, Some(rollout.as_deref()))
            }
            (Hop::NodePool, Some(Reported::Gone)) => UpgradeCheck::Pool(&object_name, None),
            _ => UpgradeCheck::Failures,
        };
        let pool_upgrades_then = (hop == Hop::NodePool).then(|| pool_upgrades(timeline));
        for d in evaluate_upgrades(
            timeline,
            check,
            initial,
            observed_at,
            &self.config,
            &mut events,
        ) {
            queue(&mut self.deadlines, d.at, cluster_id, d.due());
        }
        if let Some(then) = pool_upgrades_then
            && pool_upgrades(timeline) != then
        {
            // A pool's upgrade began or its rollout ended: the RP and
            // Clusters Service update the pool around both (docs/design/15-operations.md
            // §15.10).
            result.hint_pools(
                cluster_id,
                PoolHint {
                    rp: true,
                    clusters_service: true,
                },
            );
        }
        result.changed.insert(cluster_id.to_string());
        if !initial {
            result.events.append(&mut gone_events);
            result.events.extend(events);
        }
    }
}
