//! Operations: what the model follows (docs/design/15-operations.md §15). A cluster has a
//! current state (its hops) and operations, each an asynchronous change an
//! SRE waits for, with its own start, end, verdict, SLO, trace and flow.
//!
//! A flow is data: which hops an operation passes, in which order, and what
//! "done" means at each. The verdict, deadlines, SLO events, spans, the UI
//! and `diagnose` read the flow; no operation kind has its own path through
//! them.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::hop::{Hop, Phase, SloOutcome};
use super::stamp::{Stamp, TimeMark};

/// The kinds of operation the model follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationKind {
    Create,
    Delete,
    /// One node pool's creation, those created with the cluster too.
    NodePoolCreate,
    /// One node pool's removal (not the cluster's deletion, which takes
    /// its pools with it).
    NodePoolDelete,
    /// A control-plane upgrade to one version.
    Upgrade,
    /// One node pool's upgrade to one version.
    NodePoolUpgrade,
}

impl OperationKind {
    pub const ALL: [OperationKind; 6] = [
        OperationKind::Create,
        OperationKind::Delete,
        OperationKind::NodePoolCreate,
        OperationKind::NodePoolDelete,
        OperationKind::Upgrade,
        OperationKind::NodePoolUpgrade,
    ];

    /// Where this kind stands in [`OperationKind::ALL`]: a table keyed by
    /// the kind is an array.
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OperationKind::Create => "create",
            OperationKind::Delete => "delete",
            OperationKind::NodePoolCreate => "node_pool_create",
            OperationKind::NodePoolDelete => "node_pool_delete",
            OperationKind::Upgrade => "upgrade",
            OperationKind::NodePoolUpgrade => "node_pool_upgrade",
        }
    }

    /// Whether one operation of this kind follows one node pool (keyed by
    /// its name) rather than the cluster.
    pub fn of_node_pool(self) -> bool {
        matches!(
            self,
            OperationKind::NodePoolCreate
                | OperationKind::NodePoolDelete
                | OperationKind::NodePoolUpgrade
        )
    }

    /// Whether one operation of this kind rolls out one version (keyed by
    /// it).
    pub fn of_version(self) -> bool {
        matches!(
            self,
            OperationKind::Upgrade | OperationKind::NodePoolUpgrade
        )
    }

    /// Whether a cluster has any number of operations of this kind, kept
    /// beside its creation and deletion (docs/design/15-operations.md §15.9, §15.10).
    pub fn day2(self) -> bool {
        self.of_node_pool() || self.of_version()
    }

    /// The subject of an operation of this kind (what its key names after
    /// the kind): the pool's name, the target version, or both as
    /// `<pool>/<version>`. Neither a Kubernetes name nor a version holds a
    /// `/`, so the two read back apart ([`Operation::node_pool`]).
    pub fn subject(self, pool: Option<&str>, version: Option<&str>) -> Option<Box<str>> {
        match (self.of_node_pool(), self.of_version(), pool, version) {
            (true, true, Some(pool), Some(version)) => Some(format!("{pool}/{version}").into()),
            (true, false, Some(pool), _) => Some(pool.into()),
            (false, true, _, Some(version)) => Some(version.into()),
            _ => None,
        }
    }

    pub fn parse(s: &str) -> Option<OperationKind> {
        OperationKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The operation's key, derived from upstream data alone so every
    /// instance and every restart names it alike: `<cluster_id>` for a
    /// creation (its trace ids are unchanged by operations),
    /// `<cluster_id>/delete` for a deletion, `<cluster_id>/<kind>/<subject>`
    /// for the others (docs/design/15-operations.md §15.2): `subject` is the pool's name,
    /// the target version, or `<pool>/<version>` ([`OperationKind::subject`]).
    pub fn key(self, cluster_id: &str, subject: Option<&str>) -> String {
        match (self, subject) {
            (OperationKind::Create, _) => cluster_id.to_string(),
            (OperationKind::Delete, _) => format!("{cluster_id}/delete"),
            (kind, Some(pool)) => format!("{cluster_id}/{}/{pool}", kind.as_str()),
            (kind, None) => format!("{cluster_id}/{}", kind.as_str()),
        }
    }

    pub fn flow(self) -> &'static Flow {
        match self {
            OperationKind::Create => &CREATE,
            OperationKind::Delete => &DELETE,
            OperationKind::NodePoolCreate => &NODE_POOL_CREATE,
            OperationKind::NodePoolDelete => &NODE_POOL_DELETE,
            OperationKind::Upgrade => &UPGRADE,
            OperationKind::NodePoolUpgrade => &NODE_POOL_UPGRADE,
        }
    }

    /// The hop an operation waits at from its start, before any other hop
    /// read it: an upgrade's at the object that reports its rollout (the
    /// HostedCluster, the NodePool), the others' at their flow's first hop.
    pub fn first_hop(self) -> Hop {
        match self {
            OperationKind::Upgrade => Hop::HostedCluster,
            OperationKind::NodePoolUpgrade => Hop::NodePool,
            kind => kind.flow().hops[0],
        }
    }
}

impl std::fmt::Display for OperationKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When a hop of a flow is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HopDone {
    /// Its object is ready.
    Ready,
    /// Its object is gone (404, absent from a complete list, DELETED).
    Gone,
    /// Its object reports the target version rolled out (and, a node pool,
    /// every replica ready).
    RolledOut,
}

/// One operation kind's flow (docs/design/15-operations.md §15.1).
#[derive(Debug, PartialEq, Eq)]
pub struct Flow {
    pub kind: OperationKind,
    /// The hops in the order the operation passes them: the first hop not
    /// yet done is where it waits.
    pub hops: &'static [Hop],
    pub done: HopDone,
    /// The phases in which a hop of an operation in flight is waiting: past
    /// the hop's budget in one of them, the operation is stuck there.
    pub waiting: &'static [Phase],
    /// The root span's name.
    pub root_span: &'static str,
    /// The latency target an operation of this kind has unless configured
    /// (`slo`, docs/design/06-slos-and-alerts.md §6.1, docs/design/15-operations.md).
    pub default_target: Duration,
}

impl Flow {
    /// Where `hop` stands on this flow (the first hop is 0).
    pub fn position(&self, hop: Hop) -> Option<usize> {
        self.hops.iter().position(|h| *h == hop)
    }

    pub fn waits_in(&self, phase: Phase) -> bool {
        self.waiting.contains(&phase)
    }
}

/// A creation: the exporter's SLO default, twenty minutes from the first
/// upstream creation time to the terminal hops ready (docs/design/06-slos-and-alerts.md §6.1).
pub const DEFAULT_CREATION_TARGET: Duration = Duration::from_secs(20 * 60);
/// A deletion: half an hour for every hop in scope to let its object go
/// (docs/design/15-operations.md §15.4).
pub const DEFAULT_DELETE_TARGET: Duration = Duration::from_secs(30 * 60);
/// A node pool's creation: its VMs boot, are ignited and join in five to
/// ten minutes on a healthy platform; twenty leaves room for a slow image
/// pull and is the creation's own target (docs/design/15-operations.md §15.9).
pub const DEFAULT_NODE_POOL_CREATE_TARGET: Duration = Duration::from_secs(20 * 60);
/// A node pool's removal: nodes drain and VMs are deleted in minutes;
/// fifteen is well past a healthy drain (docs/design/15-operations.md §15.9).
pub const DEFAULT_NODE_POOL_DELETE_TARGET: Duration = Duration::from_secs(15 * 60);
/// A control-plane upgrade: HyperShift rolls the control plane out in
/// minutes and the cluster version operator applies the payload in some
/// 30–60 more; an hour is a slow but healthy one (docs/design/15-operations.md §15.10).
pub const DEFAULT_UPGRADE_TARGET: Duration = Duration::from_secs(60 * 60);
/// A node pool's upgrade: a replace rollout of a few machines, each booted,
/// ignited and drained, in 15–30 minutes; 45 leaves room for a bigger pool.
pub const DEFAULT_NODE_POOL_UPGRADE_TARGET: Duration = Duration::from_secs(45 * 60);

/// A creation passes the hops in path order; each is done when ready.
pub static CREATE: Flow = Flow {
    kind: OperationKind::Create,
    hops: &Hop::ALL,
    done: HopDone::Ready,
    waiting: &[Phase::Pending, Phase::Progressing, Phase::Unknown],
    root_span: "hcp.cluster.create",
    default_target: DEFAULT_CREATION_TARGET,
};

/// A deletion takes the path apart from the inside out: HyperShift deletes
/// the node pools, then the control plane (its namespace, after the cloud
/// resources are destroyed), then removes the HostedCluster's finalizer; the
/// ManagedCluster is detached; the work agent then lets the ManifestWork go,
/// Maestro the bundle, Clusters Service the cluster, and the RP answers 404
/// last. Each hop is done when its object is gone.
pub static DELETE: Flow = Flow {
    kind: OperationKind::Delete,
    hops: &[
        Hop::NodePool,
        Hop::ControlPlane,
        Hop::HostedCluster,
        Hop::ManagedCluster,
        Hop::Manifestwork,
        Hop::MaestroBundle,
        Hop::ClustersService,
        Hop::RpFrontend,
    ],
    done: HopDone::Gone,
    waiting: &[Phase::Deleting],
    root_span: "hcp.cluster.delete",
    default_target: DEFAULT_DELETE_TARGET,
};

/// A node pool's creation passes its ARM `nodePools` resource, its Clusters
/// Service node pool and its NodePool, each done when it reads ready (the
/// RP `Succeeded`, CS `ready`, the NodePool ready at its desired replicas).
/// A hop that never read the pool is out of scope and not waited for
/// (docs/design/15b-operations.md §15.11). The pool's bundle and ManifestWork are read
/// through the NodePool they carry.
pub static NODE_POOL_CREATE: Flow = Flow {
    kind: OperationKind::NodePoolCreate,
    hops: &[Hop::RpFrontend, Hop::ClustersService, Hop::NodePool],
    done: HopDone::Ready,
    waiting: &[Phase::Pending, Phase::Progressing, Phase::Unknown],
    root_span: "hcp.node_pool.create",
    default_target: DEFAULT_NODE_POOL_CREATE_TARGET,
};

/// A node pool's removal takes it apart from the inside out: the NodePool
/// (its machines drained and deleted), then Clusters Service's node pool,
/// then the RP's resource; each is done when the pool is gone there.
pub static NODE_POOL_DELETE: Flow = Flow {
    kind: OperationKind::NodePoolDelete,
    hops: &[Hop::NodePool, Hop::ClustersService, Hop::RpFrontend],
    done: HopDone::Gone,
    waiting: &[Phase::Deleting],
    root_span: "hcp.node_pool.delete",
    default_target: DEFAULT_NODE_POOL_DELETE_TARGET,
};

/// A control-plane upgrade waits at its HostedCluster until the version
/// history reports the target `Completed`: HyperShift rolls the control
/// plane out, the cluster version operator the payload. Whatever the
/// HostedCluster's phase (it stays Available throughout), it waits; a
/// failed one (`ValidReleaseImage` False) fails the upgrade. The RP's
/// `Updating` and Clusters Service's `updating` during it are its hops
/// too: each from the time it began updating (which may date the upgrade's
/// start) to its return to `Succeeded` / `ready` (docs/design/15-operations.md §15.10).
/// Like a creation, it names the deepest hop not done: the RP waits for
/// Clusters Service, which waits for the rollout.
pub static UPGRADE: Flow = Flow {
    kind: OperationKind::Upgrade,
    hops: &[Hop::RpFrontend, Hop::ClustersService, Hop::HostedCluster],
    done: HopDone::RolledOut,
    waiting: &[
        Phase::Pending,
        Phase::Progressing,
        Phase::Unknown,
        Phase::Ready,
    ],
    root_span: "hcp.cluster.upgrade",
    default_target: DEFAULT_UPGRADE_TARGET,
};

/// A node pool's upgrade waits at its NodePool until it reports the target
/// version with every replica ready. The RP's `Updating` and Clusters
/// Service's `updating` of the pool during it are its hops too, as a
/// control plane's are of its upgrade (docs/design/15-operations.md §15.10).
pub static NODE_POOL_UPGRADE: Flow = Flow {
    kind: OperationKind::NodePoolUpgrade,
    hops: &[Hop::RpFrontend, Hop::ClustersService, Hop::NodePool],
    done: HopDone::RolledOut,
    waiting: &[
        Phase::Pending,
        Phase::Progressing,
        Phase::Unknown,
        Phase::Ready,
    ],
    root_span: "hcp.node_pool.upgrade",
    default_target: DEFAULT_NODE_POOL_UPGRADE_TARGET,
};

/// Where an operation stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationOutcome {
    InFlight,
    Succeeded,
    Failed,
    /// Ended by a deletion that began while it was in flight: neither late
    /// nor failed; the deletion is its own operation.
    Deleted,
    /// An upgrade whose target was replaced by another before it rolled
    /// out: neither late nor failed; the new target is its own operation.
    Superseded,
}

impl OperationOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            OperationOutcome::InFlight => "in_flight",
            OperationOutcome::Succeeded => "succeeded",
            OperationOutcome::Failed => "failed",
            OperationOutcome::Deleted => "deleted",
            OperationOutcome::Superseded => "superseded",
        }
    }
}

/// One hop of an operation other than the creation (whose hops live in the
/// timeline): when the operation reached it and when it was done there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct OperationHop {
    pub hop: Hop,
    /// When the hop began its part: the upstream time it entered the
    /// waiting phase (a `deletionTimestamp`, a bundle's `deleted_at`), else
    /// the operation's start.
    pub started_at: Stamp,
    /// When it was done; for a deletion, when the exporter saw the object
    /// gone (upstream dates no disappearance).
    pub done_at: Option<Stamp>,
    /// The hop gave no time of its own: it started when the operation did,
    /// and moves with the operation's start (docs/design/15b-operations.md §15.11).
    #[serde(skip)]
    pub with_operation: bool,
}

/// An operation other than the creation, kept on its cluster's timeline
/// while in flight and until the cluster is gone (docs/design/15-operations.md §15.3).
#[derive(Clone, Debug, PartialEq)]
pub struct Operation {
    pub kind: OperationKind,
    /// What it follows besides its cluster, as its key names it
    /// ([`OperationKind::subject`]): the pool, the target version, or both.
    pub subject: Option<Box<str>>,
    pub started_at: TimeMark,
    pub ended_at: Option<Stamp>,
    pub outcome: OperationOutcome,
    pub slo: Option<SloOutcome>,
    pub hops: Vec<OperationHop>,
    /// Followed from a first sync already past its target: shown, judged
    /// and traced like any other, but its end is not counted (nobody here
    /// watched it begin) and its verdict was given silently.
    pub uncounted: bool,
    /// The hop that failed it, once it failed.
    pub failed_hop: Option<Hop>,
}

impl Operation {
    pub fn new(kind: OperationKind, started_at: TimeMark) -> Operation {
        Operation {
            kind,
            subject: None,
            started_at,
            ended_at: None,
            outcome: OperationOutcome::InFlight,
            slo: None,
            hops: Vec::new(),
            uncounted: false,
            failed_hop: None,
        }
    }

    /// Follow it from a first sync: when it is past its target at
    /// `observed_at` already, late without a word and never counted
    /// (docs/design/15-operations.md §15.9).
    pub(crate) fn first_seen(
        mut self,
        initial: bool,
        late_at: jiff::Timestamp,
        observed_at: jiff::Timestamp,
    ) -> Operation {
        self.judge_first_seen(initial, late_at, observed_at);
        self
    }

    /// [`Operation::first_seen`] for one followed already, whose start a
    /// first sync moved earlier.
    pub(crate) fn judge_first_seen(
        &mut self,
        initial: bool,
        late_at: jiff::Timestamp,
        observed_at: jiff::Timestamp,
    ) {
        if initial && self.slo.is_none() && late_at <= observed_at {
            self.slo = Some(SloOutcome::Late);
            self.uncounted = true;
        }
    }

    /// A day-2 operation, of what `subject` names (for a node pool's
    /// creation or removal, the pool's name: [`OperationKind::subject`]).
    pub fn of_pool(kind: OperationKind, subject: &str, started_at: TimeMark) -> Operation {
        Operation {
            subject: Some(subject.into()),
            ..Operation::new(kind, started_at)
        }
    }

    pub fn in_flight(&self) -> bool {
        self.outcome == OperationOutcome::InFlight
    }

    /// An upgrade that ended while the RP or Clusters Service it reached
    /// still updates: kept until they settle (not in flight, so in no
    /// in-flight series and no verdict), so their hops are timed
    /// (docs/design/15-operations.md §15.10).
    pub fn settling(&self) -> bool {
        self.kind.of_version()
            && !self.in_flight()
            && self.hops.iter().any(|h| {
                h.done_at.is_none() && matches!(h.hop, Hop::RpFrontend | Hop::ClustersService)
            })
    }

    /// What it follows besides its cluster, if anything.
    pub fn subject(&self) -> Option<&str> {
        self.subject.as_deref()
    }

    /// The node pool it follows, if it is a pool's.
    pub fn node_pool(&self) -> Option<&str> {
        node_pool_of(self.kind, self.subject())
    }

    /// The version it rolls out, if it is an upgrade.
    pub fn target_version(&self) -> Option<&str> {
        target_version_of(self.kind, self.subject())
    }

    /// Its key (docs/design/15-operations.md §15.2).
    pub fn key(&self, cluster_id: &str) -> String {
        self.kind.key(cluster_id, self.subject())
    }

    pub fn hop(&self, hop: Hop) -> Option<&OperationHop> {
        self.hops.iter().find(|h| h.hop == hop)
    }

    /// The hop it waits at: a hop of its flow that read it and is not done
    /// there; when every hop that read it is done, the flow's last hop (a
    /// pool waits for its nodes, an upgrade for its rollout).
    pub fn waiting_hop(&self) -> Hop {
        let flow = self.kind.flow();
        let pending = |h: &&Hop| self.hop(**h).is_some_and(|e| e.done_at.is_none());
        // A creation or an upgrade names the deepest hop not done (the RP
        // and Clusters Service wait for what is beneath them), a removal the
        // first (it takes the pool apart from the inside out).
        let found = match flow.done {
            HopDone::Ready | HopDone::RolledOut => flow.hops.iter().rev().find(pending),
            HopDone::Gone => flow.hops.iter().find(pending),
        };
        found
            .or_else(|| flow.hops.last())
            .copied()
            .unwrap_or(Hop::NodePool)
    }

    /// Every hop that read it is done there (and one did).
    pub fn all_reached_done(&self) -> bool {
        !self.hops.is_empty() && self.hops.iter().all(|h| h.done_at.is_some())
    }

    /// Note that the operation reached `hop` at `at`, once.
    pub(crate) fn reached(&mut self, hop: Hop, at: Stamp) {
        if self.hop(hop).is_none() {
            self.hops.push(OperationHop {
                hop,
                started_at: at.max(self.started_at.at),
                done_at: None,
                with_operation: false,
            });
        }
    }

    /// Note that the operation reached `hop`, at `mark` when upstream dates
    /// it, else with the operation's own start (and moving with it), so a
    /// restart that reads the hop again moves no published time.
    pub(crate) fn reached_at(&mut self, hop: Hop, mark: super::stamp::TimeMark) {
        if self.hop(hop).is_some() {
            return;
        }
        self.reached(hop, mark.at);
        if mark.observed
            && let Some(h) = self.hops.iter_mut().find(|h| h.hop == hop)
        {
            h.started_at = self.started_at.at;
            h.with_operation = true;
        }
    }

    /// Move the operation's start earlier (an earlier upstream time came
    /// in), with the hops that started with it.
    pub(crate) fn start_earlier(&mut self, at: super::stamp::TimeMark) {
        if at.at >= self.started_at.at {
            return;
        }
        self.started_at = at;
        for h in self.hops.iter_mut().filter(|h| h.with_operation) {
            h.started_at = at.at;
        }
    }

    /// Note `hop` done at `at`; returns when it started, the first time.
    pub(crate) fn done(&mut self, hop: Hop, at: Stamp) -> Option<Stamp> {
        let start = self.started_at.at;
        self.reached(hop, start);
        let entry = self.hops.iter_mut().find(|h| h.hop == hop)?;
        if entry.done_at.is_some() {
            return None;
        }
        entry.done_at = Some(at.max(entry.started_at));
        Some(entry.started_at)
    }
}

/// The node pool named by an operation's subject.
pub fn node_pool_of(kind: OperationKind, subject: Option<&str>) -> Option<&str> {
    let subject = subject?;
    match (kind.of_node_pool(), kind.of_version()) {
        (true, true) => subject.rsplit_once('/').map(|(pool, _)| pool),
        (true, false) => Some(subject),
        _ => None,
    }
}

/// The target version named by an operation's subject.
pub fn target_version_of(kind: OperationKind, subject: Option<&str>) -> Option<&str> {
    let subject = subject?;
    match (kind.of_node_pool(), kind.of_version()) {
        (true, true) => subject.rsplit_once('/').map(|(_, version)| version),
        (false, true) => Some(subject),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flow_passes_its_hops_once_and_names_its_kind() {
        for kind in OperationKind::ALL {
            let flow = kind.flow();
            assert_eq!(flow.kind, kind);
            let mut hops = flow.hops.to_vec();
            hops.sort();
            hops.dedup();
            assert_eq!(hops.len(), flow.hops.len(), "{kind}");
            if kind.of_node_pool() {
                if kind == OperationKind::NodePoolUpgrade {
                    assert_eq!(kind.first_hop(), Hop::NodePool);
                }
                assert_eq!(
                    hops,
                    vec![Hop::RpFrontend, Hop::ClustersService, Hop::NodePool],
                    "{kind}"
                );
                assert!(flow.root_span.starts_with("hcp.node_pool."));
            } else if kind == OperationKind::Upgrade {
                assert_eq!(
                    hops,
                    vec![Hop::RpFrontend, Hop::ClustersService, Hop::HostedCluster],
                    "{kind}"
                );
                assert_eq!(kind.first_hop(), Hop::HostedCluster);
                assert_eq!(flow.root_span, "hcp.cluster.upgrade");
            } else {
                assert_eq!(hops, Hop::ALL.to_vec(), "{kind}");
                assert!(flow.root_span.starts_with("hcp.cluster."));
            }
            assert_eq!(OperationKind::parse(kind.as_str()), Some(kind));
        }
    }

    #[test]
    fn keys_follow_the_contract() {
        assert_eq!(OperationKind::Create.key("abc", None), "abc");
        assert_eq!(OperationKind::Delete.key("abc", None), "abc/delete");
        assert_eq!(
            OperationKind::NodePoolCreate.key("abc", Some("np-1")),
            "abc/node_pool_create/np-1"
        );
        assert_eq!(
            OperationKind::NodePoolDelete.key("abc", Some("np-1")),
            "abc/node_pool_delete/np-1"
        );
        let upgrade = OperationKind::Upgrade.subject(None, Some("4.20.5"));
        assert_eq!(
            OperationKind::Upgrade.key("abc", upgrade.as_deref()),
            "abc/upgrade/4.20.5"
        );
        let pool_upgrade = OperationKind::NodePoolUpgrade.subject(Some("np-1"), Some("4.20.5"));
        assert_eq!(
            OperationKind::NodePoolUpgrade.key("abc", pool_upgrade.as_deref()),
            "abc/node_pool_upgrade/np-1/4.20.5"
        );
        let op = Operation {
            subject: pool_upgrade,
            ..Operation::new(
                OperationKind::NodePoolUpgrade,
                TimeMark::observed(jiff::Timestamp::UNIX_EPOCH),
            )
        };
        assert_eq!(op.node_pool(), Some("np-1"));
        assert_eq!(op.target_version(), Some("4.20.5"));
        assert_eq!(
            target_version_of(OperationKind::Upgrade, Some("4.20.5")),
            Some("4.20.5")
        );
        assert_eq!(node_pool_of(OperationKind::Upgrade, Some("4.20.5")), None);
        assert_eq!(
            node_pool_of(OperationKind::NodePoolCreate, Some("np-1")),
            Some("np-1")
        );
        // Neither half of a pool's upgrade is lost when the subject lacks one.
        assert_eq!(
            OperationKind::NodePoolUpgrade.subject(Some("np-1"), None),
            None
        );
    }
}
