//! What a source tells the model. Every hop enters the model only as an
//! [`Observation`]; nothing downstream knows which upstream it came from except
//! through [`Via`].

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use jiff::Timestamp;
use serde::Serialize;

use super::condition::Condition;
use super::hop::{Hop, Phase, Via};
use super::stamp::Stamp;
use super::text::Text;

/// Longest raw upstream state kept as a label value; longer values are cut so a
/// misbehaving upstream cannot blow up series size.
pub const MAX_STATE_LEN: usize = 48;

/// A batch of observations from one poll (or one watch event) of one source.
#[derive(Clone, Debug)]
pub struct Batch {
    /// The `source` label value, e.g. `clusters_service` or `kube/mgmt-1`.
    pub source: String,
    /// True for the source's first full sync: state is loaded silently, no
    /// histogram or counter moves (docs/design/03-timeline-model.md §3.3).
    pub initial: bool,
    /// When the exporter read this; the fallback for missing upstream times.
    pub observed_at: Timestamp,
    pub observations: Vec<Observation>,
}

/// How an observation finds its cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClusterKey {
    /// The join key of all hops (docs/design/04-identities-and-joins.md §4.1).
    Id(String),
    /// An ARM resource id (lower-cased) that Clusters Service maps to a
    /// cluster id; RP frontend observations wait for that join.
    ArmResourceId(String),
}

#[derive(Clone, Debug)]
pub struct Observation {
    pub key: ClusterKey,
    pub hop: Hop,
    pub via: Via,
    /// Which object of the hop: a node pool name, a bundle id. Empty for hops
    /// with one object per cluster. The hop's phase aggregates its objects.
    pub object: String,
    pub change: Change,
}

#[derive(Clone, Debug)]
pub enum Change {
    /// The object exists with this state.
    Upsert(Box<HopView>),
    /// The object is gone upstream (deleted, or vanished from a full relist).
    Gone,
}

/// One object's state as read from upstream.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HopView {
    /// The raw upstream state (e.g. `installing`), cut to [`MAX_STATE_LEN`];
    /// shared text, as a fleet repeats a handful of states.
    pub state: Text,
    pub phase: Phase,
    /// Upstream time the current state was entered, when upstream says.
    pub since: Option<Stamp>,
    /// Upstream creation time of the object.
    pub created_at: Option<Stamp>,
    /// Upstream time of the last status update (Maestro `updated_at`).
    pub updated_at: Option<Stamp>,
    /// Shared, never changed in place: a source that keeps the view it
    /// sent (the kube mapper's facts) and the model that stores it hold
    /// one copy, and a view read again unchanged costs a reference count
    /// (docs/performance.md).
    pub conditions: Arc<[Condition]>,
    /// What this object says of the cluster's identity; `None` when it says
    /// nothing. Boxed: the model takes it into the timeline and keeps the
    /// view without it, so a stored view costs one pointer, not eight
    /// empty strings (docs/performance.md).
    pub identity: Option<Box<IdentityPatch>>,
    /// Why the hop failed, when upstream says (CS provision error, condition reason).
    pub error: Option<Box<HopError>>,
    /// Node counts of a node pool.
    pub replicas: Option<Replicas>,
    /// Control-plane pod counts.
    pub pods: Option<PodCounts>,
    /// A failure that elapsed time alone brings, decided by the model.
    pub fails_after_budget: Option<Box<FailsAfterBudget>>,
}

/// "If this object still reads the same when its hop budget has run out since
/// `since`, it has failed": a phase change with no upstream event behind it.
/// Views state it; the model decides it from its own clock and a deadline
/// queue (docs/design/03-timeline-model.md §3.4), so no source ever reads the wall clock to
/// decide a phase.
#[derive(Clone, Debug, PartialEq)]
pub struct FailsAfterBudget {
    /// When the clock started (the Degraded condition's transition).
    pub since: Timestamp,
    /// What the hop reports once failed.
    pub error: HopError,
}

impl HopView {
    /// A hash of everything the view says: sources send a view only when it
    /// changed (the pollers' trackers, the kube mapper). Destructured field by
    /// field so a new field cannot be forgotten.
    pub fn fingerprint(&self) -> u64 {
        let view = self;
        let HopView {
            state,
            phase,
            since,
            created_at,
            updated_at,
            conditions,
            identity: _,
            error,
            replicas,
            pods,
            fails_after_budget,
        } = view;
        let mut h = DefaultHasher::new();
        if let Some(f) = fails_after_budget {
            (f.since, &f.error.code, &f.error.message).hash(&mut h);
        }
        state.hash(&mut h);
        phase.hash(&mut h);
        since.hash(&mut h);
        created_at.hash(&mut h);
        updated_at.hash(&mut h);
        for c in conditions.iter() {
            c.hash_into(&mut h);
        }
        // Derived: every field, a new one too.
        view.identity().hash(&mut h);
        if let Some(e) = error {
            (&e.code, &e.message).hash(&mut h);
        }
        replicas
            .map(|r| (r.desired, r.current, r.ready))
            .hash(&mut h);
        pods.map(|p| (p.ready, p.not_ready)).hash(&mut h);
        h.finish()
    }

    pub fn new(state: &str, phase: Phase) -> HopView {
        HopView {
            state: bounded_state(state),
            phase,
            ..HopView::default()
        }
    }
}

/// Cut a raw state to a bounded label value (on a char boundary).
pub fn bounded_state(s: &str) -> Text {
    if s.len() <= MAX_STATE_LEN {
        return Text::intern(s);
    }
    let mut end = MAX_STATE_LEN;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Text::intern(&s[..end])
}

/// `conditions` as a view keeps them. None costs no allocation (the
/// empty shared slice is static), as an empty `Vec` did not: most views
/// of a fleet's RP and Clusters Service objects have none.
pub fn shared_conditions(conditions: Vec<Condition>) -> Arc<[Condition]> {
    if conditions.is_empty() {
        return Arc::default();
    }
    conditions.into()
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HopError {
    /// A short code such as `OCM4001`, or a condition reason.
    pub code: String,
    pub message: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Replicas {
    pub desired: u32,
    pub current: u32,
    pub ready: u32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PodCounts {
    pub ready: u32,
    pub not_ready: u32,
}

impl HopView {
    /// What the view says of the identity (all `None` when nothing).
    pub fn identity(&self) -> &IdentityPatch {
        static NOTHING: IdentityPatch = IdentityPatch::NOTHING;
        self.identity.as_deref().unwrap_or(&NOTHING)
    }

    /// The identity to fill in, made when first asked for.
    pub fn identity_mut(&mut self) -> &mut IdentityPatch {
        self.identity.get_or_insert_with(Box::default)
    }

    /// Set the identity; a patch that says nothing is stored as nothing.
    pub fn set_identity(&mut self, patch: IdentityPatch) {
        self.identity = patch.boxed();
    }
}

/// Identity fields a source knows; `None` leaves what the model has.
#[derive(Clone, Debug, Default, PartialEq, Hash)]
pub struct IdentityPatch {
    pub name: Option<String>,
    /// ARM resource id, lower-cased (the join key with the RP frontend).
    pub resource_id: Option<String>,
    pub subscription_id: Option<String>,
    pub resource_group: Option<String>,
    pub mgmt_cluster: Option<String>,
    pub namespace: Option<String>,
    pub platform: Option<String>,
    pub version: Option<String>,
    /// Not the cluster's identity, but taken into the timeline the same
    /// way: the W3C trace contexts the object's annotations name, which its
    /// hop's span links to (docs/design/07-traces.md §7.7). Here, not on the view, so
    /// a view without any costs nothing.
    pub trace_parents: Vec<super::TraceParent>,
    /// Likewise: the ids the upstreams gave the object's operation in its
    /// log-tracing annotations (docs/design/15b-operations.md §15.13).
    pub upstream_ids: Vec<super::UpstreamId>,
    /// Not the identity either: the release rollout the object reports
    /// (a HostedCluster's version history, a NodePool's version), which
    /// starts and ends its upgrade operation (docs/design/15-operations.md §15.10). Read
    /// by the model when the view arrives, never stored with it.
    pub rollout: Option<Rollout>,
}

/// A release rollout as one object reports it (docs/design/15-operations.md §15.10).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Rollout {
    /// The version rolled out to: a HostedCluster's `history[0].version`
    /// (or its `desired` version before the history has it), a NodePool's
    /// `UpdatingVersion` target, or, rolled out, its `status.version`.
    pub target: String,
    /// When it began upstream (the history entry's `startedTime`, the
    /// `UpdatingVersion` condition's transition); `None` when upstream has
    /// not said yet.
    pub started_at: Option<super::Stamp>,
    /// Whether the object reports it rolled out (`Completed`; a pool's
    /// version reached with no update in progress).
    pub completed: bool,
    /// When it was rolled out, when upstream says (`completionTime`).
    pub completed_at: Option<super::Stamp>,
    /// Whether the object reports an earlier version rolled out: a
    /// rollout with none is the installation, part of the creation.
    pub upgrade: bool,
}

impl IdentityPatch {
    /// The patch as a view holds it: `None` when it says nothing.
    pub fn boxed(self) -> Option<Box<IdentityPatch>> {
        (self != IdentityPatch::NOTHING).then(|| Box::new(self))
    }

    pub const NOTHING: IdentityPatch = IdentityPatch {
        name: None,
        resource_id: None,
        subscription_id: None,
        resource_group: None,
        mgmt_cluster: None,
        namespace: None,
        platform: None,
        version: None,
        trace_parents: Vec::new(),
        upstream_ids: Vec::new(),
        rollout: None,
    };
}
