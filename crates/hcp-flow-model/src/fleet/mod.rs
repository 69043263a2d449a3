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

mod apply;
mod config;
mod day2;
mod deadlines;
mod evaluate;
mod join;
mod pool_hops;
mod recall;
mod upgrades;

pub use config::*;
use day2::*;
use deadlines::{Deadline, Due};
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
}
