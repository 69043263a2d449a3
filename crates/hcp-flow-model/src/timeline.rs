//! One cluster's creation timeline: identities and, per hop, the objects seen,
//! the aggregated phase, when it was entered and when the hop first became ready.

use serde::Serialize;

use super::condition::Condition;
use super::hop::{Hop, Phase, Via};
use super::observation::{HopError, HopView, IdentityPatch, PodCounts, Replicas};
use super::stamp::Stamp;
pub use super::stamp::TimeMark;
use super::text::Text;

/// Where a creation stands: an operation's outcome (docs/design/15-operations.md §15).
pub use super::operation::OperationOutcome as CreationOutcome;

/// The identities of one cluster, merged from every hop that knows some.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
///
/// What a fleet repeats (subscription, resource group, management cluster,
/// platform, version) is shared text, one copy for every cluster that has it;
/// what names one cluster is its own string (docs/design/05-metrics.md §5.5).
pub struct Identity {
    pub name: String,
    pub resource_id: String,
    pub subscription_id: Text,
    pub resource_group: Text,
    pub mgmt_cluster: Text,
    pub namespace: String,
    pub platform: Text,
    pub version: Text,
}

impl Identity {
    /// Fill in what the patch knows; returns true when anything changed.
    pub fn merge(&mut self, patch: &IdentityPatch) -> bool {
        /// Set `field` to what the patch says, when it says something new.
        fn fill<T: AsRef<str> + for<'a> From<&'a str>>(
            field: &mut T,
            value: &Option<String>,
        ) -> bool {
            let news = value
                .as_deref()
                .filter(|v| !v.is_empty() && *v != field.as_ref());
            if let Some(v) = news {
                *field = T::from(v);
            }
            news.is_some()
        }
        // An array, not `||`: every field is filled, not only up to the first change.
        let filled = [
            fill(&mut self.name, &patch.name),
            fill(&mut self.resource_id, &patch.resource_id),
            fill(&mut self.subscription_id, &patch.subscription_id),
            fill(&mut self.resource_group, &patch.resource_group),
            fill(&mut self.mgmt_cluster, &patch.mgmt_cluster),
            fill(&mut self.namespace, &patch.namespace),
            fill(&mut self.platform, &patch.platform),
            fill(&mut self.version, &patch.version),
        ];
        filled.contains(&true)
    }
}

/// One upstream object of a hop (a node pool, a bundle, or the hop's single object).
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectState {
    pub view: HopView,
    /// When this object's phase was entered.
    pub since: TimeMark,
}

/// The objects of one hop, keyed by (view, object name). A hop has one or a
/// few objects, so a sorted `Vec` — a `BTreeMap` would allocate an 11-slot
/// node (about 5 KB) per hop, most of a cluster's memory at fleet scale.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObjectMap {
    entries: Vec<((Via, String), ObjectState)>,
}

impl ObjectMap {
    fn position(&self, key: &(Via, String)) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| k.cmp(key))
    }

    pub fn get(&self, key: &(Via, String)) -> Option<&ObjectState> {
        self.position(key).ok().map(|i| &self.entries[i].1)
    }

    pub fn insert(&mut self, key: (Via, String), value: ObjectState) {
        match self.position(&key) {
            Ok(i) => self.entries[i].1 = value,
            Err(i) => {
                // Growing from empty reserves four slots; hops have one object.
                self.entries.reserve_exact(1);
                self.entries.insert(i, (key, value));
            }
        }
    }

    pub fn remove(&mut self, key: &(Via, String)) -> Option<ObjectState> {
        self.position(key).ok().map(|i| self.entries.remove(i).1)
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&(Via, String), &ObjectState)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &(Via, String)> {
        self.entries.iter().map(|(k, _)| k)
    }
}

/// A hop of one cluster: its objects per view, and the aggregate the metrics show.
#[derive(Clone, Debug, PartialEq)]
pub struct HopTimeline {
    pub objects: ObjectMap,
    /// The effective view: direct when any direct object exists, else maestro.
    pub via: Via,
    pub phase: Phase,
    /// The raw state of the object that decides the phase.
    pub state: Text,
    /// When the aggregate phase was entered.
    pub since: TimeMark,
    /// The first time the hop became ready (kept when it regresses later).
    pub ready_at: Option<Stamp>,
    /// The hop's start: its object's creation, else the previous hop's ready
    /// time, else the creation start.
    pub started_at: Option<Stamp>,
    /// The hop's duration was recorded (or settled silently) already, in
    /// the view read directly.
    pub ended: bool,
    /// Its end was seen through Maestro's feedback already (a span of its
    /// own, timed by no one): the direct view may still end it later.
    pub ended_via_maestro: bool,
}

impl HopTimeline {
    pub(crate) fn empty(since: TimeMark) -> HopTimeline {
        HopTimeline {
            objects: ObjectMap::default(),
            via: Via::Direct,
            phase: Phase::Pending,
            state: Text::default(),
            since,
            ready_at: None,
            started_at: None,
            ended: false,
            ended_via_maestro: false,
        }
    }

    /// Objects of the effective view.
    pub fn effective_objects(&self) -> impl Iterator<Item = (&str, &ObjectState)> {
        let via = self.via;
        self.objects
            .iter()
            .filter(move |((v, _), _)| *v == via)
            .map(|((_, name), o)| (name.as_str(), o))
    }

    /// Conditions of the effective view with the object they belong to.
    pub fn conditions(&self) -> impl Iterator<Item = (&str, &Condition)> {
        self.effective_objects()
            .flat_map(|(name, o)| o.view.conditions.iter().map(move |c| (name, c)))
    }

    /// Why the hop is not well: a failed object's error first, since another
    /// object may carry an error that did not fail it (a bundle's feedback
    /// error, docs/design/02-hops-and-phases.md §2.6); else any object's.
    pub fn error(&self) -> Option<&HopError> {
        self.effective_objects()
            .filter(|(_, o)| o.view.phase == Phase::Failed)
            .find_map(|(_, o)| o.view.error.as_deref())
            .or_else(|| {
                self.effective_objects()
                    .find_map(|(_, o)| o.view.error.as_deref())
            })
    }

    pub fn replicas(&self) -> impl Iterator<Item = (&str, Replicas)> {
        self.effective_objects()
            .filter_map(|(name, o)| o.view.replicas.map(|r| (name, r)))
    }

    pub fn pods(&self) -> Option<PodCounts> {
        self.effective_objects().find_map(|(_, o)| o.view.pods)
    }

    pub fn updated_at(&self) -> Option<Stamp> {
        self.effective_objects()
            .filter_map(|(_, o)| o.view.updated_at)
            .max()
    }

    /// When upstream last updated the hop's status, as the "status not
    /// updated" alert and the verdict need it for a hop of several bundles:
    /// the oldest update among the objects that are not ready (one frozen
    /// bundle must show even while another keeps reporting), else the newest
    /// of all.
    pub fn status_updated_at(&self) -> Option<Stamp> {
        self.effective_objects()
            .filter(|(_, o)| o.view.phase != Phase::Ready)
            .filter_map(|(_, o)| o.view.updated_at)
            .min()
            .or_else(|| self.updated_at())
    }

    pub fn created_at(&self) -> Option<Stamp> {
        self.effective_objects()
            .filter_map(|(_, o)| o.view.created_at)
            .min()
    }

    /// Recompute the effective view's phase from its objects: failed when one
    /// failed; deleting when all are deleting; unknown when one is unknown;
    /// ready when all live ones are ready; pending when all are pending;
    /// progressing otherwise (one pool deleting during a scale-down, or some
    /// pools ready and some still coming, is not a hop-wide state).
    /// Returns the phase, the raw state of the object that explains it, and
    /// that object's `since` when its own phase is the aggregate phase.
    pub(crate) fn aggregate(&self) -> Option<Aggregate> {
        let via = if self.objects.keys().any(|(v, _)| *v == Via::Direct) {
            Via::Direct
        } else {
            Via::Maestro
        };
        let objects: Vec<&ObjectState> = self
            .objects
            .iter()
            .filter(|((v, _), _)| *v == via)
            .map(|(_, o)| o)
            .collect();
        let first_in = |phase: Phase| objects.iter().copied().find(|o| o.view.phase == phase);
        let live: Vec<&ObjectState> = objects
            .iter()
            .copied()
            .filter(|o| o.view.phase != Phase::Deleting)
            .collect();
        let (phase, deciding) = if let Some(o) = first_in(Phase::Failed) {
            (Phase::Failed, o)
        } else if live.is_empty() {
            (Phase::Deleting, *objects.first()?)
        } else if let Some(o) = first_in(Phase::Unknown) {
            (Phase::Unknown, o)
        } else if live.iter().all(|o| o.view.phase == Phase::Ready) {
            // Ready since the last of them became ready.
            let last = live
                .iter()
                .copied()
                .max_by_key(|o| o.since.at)
                .unwrap_or(live[0]);
            (Phase::Ready, last)
        } else if live.iter().all(|o| o.view.phase == Phase::Pending) {
            (Phase::Pending, live[0])
        } else {
            let o = live
                .iter()
                .copied()
                .find(|o| o.view.phase == Phase::Progressing)
                .or_else(|| live.iter().copied().find(|o| o.view.phase != Phase::Ready))
                .unwrap_or(live[0]);
            (Phase::Progressing, o)
        };
        let since = (deciding.view.phase == phase).then_some(deciding.since);
        Some(Aggregate {
            via,
            phase,
            state: deciding.view.state.clone(),
            since,
        })
    }
}

pub(crate) struct Aggregate {
    pub via: Via,
    pub phase: Phase,
    pub state: Text,
    pub since: Option<TimeMark>,
}

/// A timeline's hops, in hop order. A sorted `Vec` that grows one slot at a
/// time: a timeline has at most nine hops, and a `BTreeMap` allocates an
/// 11-slot node (about 1.5 KB) per timeline (docs/performance.md).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HopMap {
    entries: Vec<(Hop, HopTimeline)>,
}

type HopEntry = (Hop, HopTimeline);

impl HopMap {
    fn position(&self, hop: &Hop) -> Result<usize, usize> {
        self.entries.binary_search_by(|(h, _)| h.cmp(hop))
    }

    pub fn get(&self, hop: &Hop) -> Option<&HopTimeline> {
        self.position(hop).ok().map(|i| &self.entries[i].1)
    }

    pub fn get_mut(&mut self, hop: &Hop) -> Option<&mut HopTimeline> {
        self.position(hop).ok().map(|i| &mut self.entries[i].1)
    }

    pub fn contains_key(&self, hop: &Hop) -> bool {
        self.position(hop).is_ok()
    }

    pub fn remove(&mut self, hop: &Hop) -> Option<HopTimeline> {
        self.position(hop).ok().map(|i| self.entries.remove(i).1)
    }

    /// The hop's timeline, made by `make` when the hop is new.
    pub fn get_or_insert_with(
        &mut self,
        hop: Hop,
        make: impl FnOnce() -> HopTimeline,
    ) -> &mut HopTimeline {
        let i = match self.position(&hop) {
            Ok(i) => i,
            Err(i) => {
                self.entries.reserve_exact(1);
                self.entries.insert(i, (hop, make()));
                i
            }
        };
        &mut self.entries[i].1
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&Hop, &HopTimeline)> {
        self.entries.iter().map(|(hop, h)| (hop, h))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &Hop> {
        self.entries.iter().map(|(hop, _)| hop)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &HopTimeline> {
        self.entries.iter().map(|(_, h)| h)
    }
}

impl<'a> IntoIterator for &'a HopMap {
    type Item = (&'a Hop, &'a HopTimeline);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, HopEntry>,
        fn(&'a HopEntry) -> (&'a Hop, &'a HopTimeline),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(hop, h)| (hop, h))
    }
}

/// The whole timeline of one cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    pub cluster_id: String,
    pub identity: Identity,
    /// Creation start: the earliest upstream creation time seen.
    pub created_at: TimeMark,
    pub completed_at: Option<Stamp>,
    pub failed_at: Option<Stamp>,
    pub outcome: CreationOutcome,
    /// The SLO verdict, once given (counted, or settled silently on first sync).
    pub slo: Option<super::hop::SloOutcome>,
    pub hops: HopMap,
    /// The cluster's deletion, from its first sign until the cluster is
    /// gone (docs/design/15-operations.md §15.3). Boxed: most clusters are not deleting.
    pub deletion: Option<Box<super::operation::Operation>>,
    /// The controllers' trace contexts its objects' annotations name, which
    /// their hops' spans link to (docs/design/07-traces.md §7.7). Boxed: most
    /// clusters carry none.
    pub trace_links: Option<Box<Vec<super::TraceLink>>>,
    /// Its operations other than the creation and the deletion: its node
    /// pools' creations and removals, its upgrades and its pools' upgrades
    /// (docs/design/15-operations.md §15.9, §15.10). Only those in flight are kept, and
    /// an upgrade that failed while its object still reports its target
    /// (so the failure is not taken for a new start). Boxed: most clusters
    /// have none.
    pub day2_operations: Option<Box<Vec<super::operation::Operation>>>,
    /// Hops whose last direct object went before this instance saw the
    /// cluster's deletion begin, and when: separate watches deliver a
    /// ManagedCluster's DELETED before the ManifestWork's
    /// `deletionTimestamp`, and the deletion that begins after still owes
    /// them their end (docs/design/08-scopes-and-scale-out.md §8.2). Boxed: almost always none.
    pub gone_before_deletion: Option<Box<Vec<(Hop, Stamp)>>>,
    /// Its ended operations, oldest first, within the history's limits
    /// (docs/design/15b-operations.md §15.12), encoded: none until one ends.
    pub history: super::history::History,
    /// The ids its objects' log-tracing annotations give (docs/design/15b-operations.md
    /// §15.13), per hop and object. Boxed: most clusters carry none.
    pub upstream_ids: Option<Box<Vec<super::UpstreamIdOf>>>,
    /// Its node pools as the RP (ARM `nodePools`) and Clusters Service
    /// (`node_pools`) read them, kept apart from the hops' own objects so
    /// a pool never moves the cluster's `rp_frontend` or
    /// `clusters_service` phase (docs/design/15b-operations.md §15.11). Only the readings
    /// that matter are kept: a pool not ready, or one whose operation is in
    /// flight. Boxed: most clusters have none.
    pub pool_readings: Option<Box<Vec<PoolReading>>>,
}

/// Where a day-2 operation waits ([`Timeline::waiting_of`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Waiting<'a> {
    pub hop: Hop,
    /// When it began waiting there.
    pub since: Stamp,
    /// The hop's reading of what the operation follows; pending when the
    /// hop has not read it yet.
    pub phase: Phase,
    pub state: Option<&'a Text>,
    pub via: Via,
}

/// A node pool as a hop that names pools by their own name reads it
/// (the RP's `nodePools` resource, Clusters Service's node pool).
#[derive(Clone, Debug, PartialEq)]
pub struct PoolReading {
    pub hop: Hop,
    /// The pool's name on that hop: the ARM `nodePools` name, which is the
    /// Clusters Service node pool id.
    pub name: Box<str>,
    pub state: ObjectState,
}

/// The state of a HostedCluster whose release rolled out (`Completed` in
/// its version history) and that is not Available now: installed, so its
/// creation is done there, and the outage a regression (docs/design/15-operations.md
/// §15.7).
pub const INSTALLED_NOT_AVAILABLE: &str = "NotAvailable/Completed";

/// A pool's state at the RP or Clusters Service that says it was
/// provisioned before and is being changed (a pool upgrade or resize): ARM
/// takes an update only on a resource that succeeded.
pub fn provisioned_update(hop: Hop, state: &str) -> bool {
    match hop {
        Hop::RpFrontend => state == "Updating",
        Hop::ClustersService => {
            matches!(state, "updating" | "validating_update" | "pending_update")
        }
        _ => false,
    }
}

/// Whether the NodePool (or operation subject) `pool` is the pool the RP or
/// Clusters Service names `name`: HyperShift's NodePool of an ARO HCP pool
/// is named `<HostedCluster name>-<pool name>`; a self-managed one may
/// carry the name itself.
pub fn same_pool(pool: &str, name: &str) -> bool {
    pool == name
        || pool
            .strip_suffix(name)
            .is_some_and(|prefix| prefix.len() > 1 && prefix.ends_with('-'))
}

impl Timeline {
    pub(crate) fn new(cluster_id: String, created_at: TimeMark) -> Timeline {
        Timeline {
            cluster_id,
            identity: Identity::default(),
            created_at,
            completed_at: None,
            failed_at: None,
            outcome: CreationOutcome::InFlight,
            slo: None,
            hops: HopMap::default(),
            deletion: None,
            trace_links: None,
            day2_operations: None,
            pool_readings: None,
            gone_before_deletion: None,
            history: Default::default(),
            upstream_ids: None,
        }
    }

    /// Its day-2 operations kept (see the field).
    pub fn day2_operations(&self) -> impl Iterator<Item = &super::operation::Operation> {
        self.day2_operations.iter().flat_map(|ops| ops.iter())
    }

    /// Its day-2 operations in flight.
    pub fn day2_in_flight(&self) -> impl Iterator<Item = &super::operation::Operation> {
        self.day2_operations().filter(|op| op.in_flight())
    }

    /// The latest operation of `kind` with `subject` (the pool's name, the
    /// target version, or both: [`super::OperationKind::subject`]).
    pub fn day2_operation(
        &self,
        kind: super::operation::OperationKind,
        subject: Option<&str>,
    ) -> Option<&super::operation::Operation> {
        self.day2_operations()
            .filter(|op| op.kind == kind && op.subject() == subject)
            .last()
    }

    pub(crate) fn day2_operation_mut(
        &mut self,
        kind: super::operation::OperationKind,
        subject: Option<&str>,
    ) -> Option<&mut super::operation::Operation> {
        self.day2_operations
            .as_deref_mut()?
            .iter_mut()
            .filter(|op| op.kind == kind && op.subject() == subject)
            .last()
    }

    /// The RP's or Clusters Service's reading of pool `name`.
    pub fn pool_reading(&self, hop: Hop, name: &str) -> Option<&PoolReading> {
        self.pool_readings
            .iter()
            .flat_map(|r| r.iter())
            .find(|r| r.hop == hop && &*r.name == name)
    }

    /// What `hop` reads of the pool an operation follows (`pool`: its
    /// subject, a NodePool's name or the RP's).
    pub fn pool_reading_of(&self, hop: Hop, pool: &str) -> Option<&PoolReading> {
        let readings = || self.pool_readings.iter().flat_map(|r| r.iter());
        readings()
            .find(|r| r.hop == hop && &*r.name == pool)
            .or_else(|| readings().find(|r| r.hop == hop && same_pool(pool, &r.name)))
    }

    /// Pool `pool`'s NodePool (an operation's subject, or the RP's name
    /// for it), read directly when it is, else through Maestro.
    pub fn node_pool_object(&self, pool: &str) -> Option<(Via, &ObjectState)> {
        let hop = self.hops.get(&Hop::NodePool)?;
        let exact = |via: Via| hop.objects.get(&(via, pool.to_string())).map(|o| (via, o));
        let named = |via: Via| {
            hop.objects
                .iter()
                .find(|((v, name), _)| *v == via && same_pool(name, pool))
                .map(|(_, o)| (via, o))
        };
        exact(Via::Direct)
            .or_else(|| exact(Via::Maestro))
            .or_else(|| named(Via::Direct))
            .or_else(|| named(Via::Maestro))
    }

    /// Where a day-2 operation waits and what that hop reads of it: a
    /// pool's own reading at the RP, Clusters Service or its NodePool; the
    /// HostedCluster for an upgrade (docs/design/15b-operations.md §15.11).
    pub fn waiting_of(&self, op: &super::operation::Operation) -> Waiting<'_> {
        let hop = op.waiting_hop();
        let since = op.hop(hop).map_or(op.started_at.at, |h| h.started_at);
        let read = match (op.node_pool(), hop) {
            (Some(pool), Hop::RpFrontend | Hop::ClustersService) => self
                .pool_reading_of(hop, pool)
                .map(|r| (r.state.view.phase, &r.state.view.state, Via::Direct)),
            (Some(pool), Hop::NodePool) => self
                .node_pool_object(pool)
                .map(|(via, o)| (o.view.phase, &o.view.state, via)),
            _ => self.hop(hop).map(|h| (h.phase, &h.state, h.via)),
        };
        Waiting {
            hop,
            since,
            phase: read.map_or(Phase::Pending, |r| r.0),
            state: read.map(|r| r.1),
            via: read.map_or(Via::Direct, |r| r.2),
        }
    }

    /// Whether some hop still shows pool `pool`: its NodePool, or a reading
    /// of the RP or Clusters Service.
    pub fn pool_shown(&self, pool: &str) -> bool {
        self.node_pool_object(pool).is_some()
            || self
                .pool_readings
                .iter()
                .flat_map(|r| r.iter())
                .any(|r| same_pool(pool, &r.name) || same_pool(&r.name, pool))
    }

    /// Drop the pool readings that no longer matter: a pool ready that no
    /// operation in flight (or upgrade settling) follows (docs/design/15b-operations.md
    /// §15.11).
    pub(crate) fn forget_settled_pool_readings(&mut self) {
        let Some(mut readings) = self.pool_readings.take().map(|b| *b) else {
            return;
        };
        readings.retain(|r| {
            // An update under way is no creation, but may be the RP's or
            // Clusters Service's part of the pool's upgrade, which its
            // NodePool may report only later.
            let settled = r.state.view.phase == Phase::Ready;
            !settled
                || self.day2_operations().any(|op| {
                    (op.in_flight() || op.settling())
                        && op
                            .node_pool()
                            .is_some_and(|p| same_pool(p, &r.name) || same_pool(&r.name, p))
                })
        });
        self.pool_readings = (!readings.is_empty()).then(|| Box::new(readings));
    }

    /// What `object` of `hop` (read directly) names now: its links replace
    /// the ones it named before; none removes them.
    pub(crate) fn set_trace_links(
        &mut self,
        hop: Hop,
        object: &str,
        parents: Vec<super::TraceParent>,
    ) {
        if parents.is_empty() && self.trace_links.is_none() {
            return;
        }
        let links = self.trace_links.get_or_insert_with(Default::default);
        links.retain(|l| !(l.hop == hop && &*l.object == object));
        links.extend(parents.into_iter().map(|context| super::TraceLink {
            hop,
            object: object.into(),
            context,
        }));
        if links.is_empty() {
            self.trace_links = None;
        }
    }

    /// Replace what `hop`'s `object` says of its upstream ids.
    pub(crate) fn set_upstream_ids(&mut self, hop: Hop, object: &str, ids: Vec<super::UpstreamId>) {
        if ids.is_empty() && self.upstream_ids.is_none() {
            return;
        }
        let kept = self.upstream_ids.get_or_insert_with(Default::default);
        kept.retain(|i| !(i.hop == hop && &*i.object == object));
        kept.extend(ids.into_iter().map(|id| super::UpstreamIdOf {
            hop,
            object: object.into(),
            id,
        }));
        if kept.is_empty() {
            self.upstream_ids = None;
        }
    }

    /// Every upstream id its objects give, each name and value once.
    pub fn upstream_ids(&self) -> Vec<&super::UpstreamId> {
        let mut ids: Vec<&super::UpstreamId> = Vec::new();
        for i in self.upstream_ids.iter().flat_map(|v| v.iter()) {
            if !ids.contains(&&i.id) {
                ids.push(&i.id);
            }
        }
        ids
    }

    /// The links of `hop`'s span.
    pub fn trace_links(&self, hop: Hop) -> impl Iterator<Item = &super::TraceLink> {
        self.trace_links
            .iter()
            .flat_map(|links| links.iter())
            .filter(move |l| l.hop == hop)
    }

    pub fn hop(&self, hop: Hop) -> Option<&HopTimeline> {
        self.hops.get(&hop)
    }

    pub fn phase(&self, hop: Hop) -> Option<Phase> {
        self.hops.get(&hop).map(|h| h.phase)
    }

    /// The creation is in flight.
    pub fn in_flight(&self) -> bool {
        self.outcome == CreationOutcome::InFlight
    }

    /// The deletion, while it is in flight.
    pub fn deletion_in_flight(&self) -> Option<&super::operation::Operation> {
        self.deletion.as_deref().filter(|d| d.in_flight())
    }

    /// The operation in flight, if any: a deletion ends a creation, so at
    /// most one is (until node pools and upgrades are operations too).
    pub fn operation_in_flight(&self) -> Option<super::operation::OperationKind> {
        if self.deletion_in_flight().is_some() {
            Some(super::operation::OperationKind::Delete)
        } else if self.in_flight() {
            Some(super::operation::OperationKind::Create)
        } else {
            None
        }
    }
}
