//! From watched objects to observations: pure, no clock.
//!
//! One [`Mapper`] per management cluster keeps the few facts it needs of each
//! watched object (never the object): the hop reading of the shared view
//! (`crate::views`, the same one the Maestro feedback path uses) plus what
//! the joins need. It resolves each to a `cluster_id` (docs/design/04-identities-and-joins.md §4),
//! one file per kind, and on [`Mapper::flush`] emits only what changed since
//! the last emission. Objects that cannot be resolved yet (a self-managed
//! NodePool or ManagedCluster seen before its HostedCluster) wait, and are
//! emitted when the HostedCluster arrives; an object whose resolution changes
//! is withdrawn (`Change::Gone`) from the old cluster.

mod control_plane;
mod hosted_cluster;
mod hub;
mod managed_cluster;
mod manifestwork;
mod node_pool;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::config::{KubeMode, KubeSourceConfig, WatchKind};
use crate::model::{Change, ClusterKey, Hop, HopView, IdentityPatch, Observation, Stamp, Via};
use crate::views::UnknownValue;
use crate::views::control_plane::HostedControlPlaneReading;

pub use hosted_cluster::HostedClusterFacts;
pub use hub::AgentFacts;
pub use managed_cluster::ManagedClusterFacts;
pub use manifestwork::ManifestWorkFacts;
pub use node_pool::NodePoolFacts;

/// Namespace and name of a watched object (namespace empty when
/// cluster-scoped), kept as `namespace/name` in one allocation: a
/// management cluster of 10,000 hosted clusters holds some 200,000 of them
/// (facts, what was emitted), and two strings each cost twice the
/// allocations (docs/performance.md). A Kubernetes namespace never holds a
/// `/`, so the first one splits the two, and the objects of one namespace
/// sort together.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjRef(Box<str>);

impl ObjRef {
    pub fn new(namespace: &str, name: &str) -> ObjRef {
        let mut text = String::with_capacity(namespace.len() + 1 + name.len());
        text.push_str(namespace);
        text.push('/');
        text.push_str(name);
        ObjRef(text.into_boxed_str())
    }

    pub fn of(meta: &ObjectMeta) -> ObjRef {
        ObjRef::new(
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
        )
    }

    fn split(&self) -> (&str, &str) {
        self.0.split_once('/').unwrap_or((&self.0, ""))
    }

    pub fn namespace(&self) -> &str {
        self.split().0
    }

    pub fn name(&self) -> &str {
        self.split().1
    }
}

impl std::fmt::Debug for ObjRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjRef")
            .field("namespace", &self.namespace())
            .field("name", &self.name())
            .finish()
    }
}

/// What the mapper needs of the source config.
#[derive(Clone, Debug)]
pub struct MapperConfig {
    pub mgmt_cluster: String,
    pub mode: KubeMode,
    pub environment: String,
    pub id_label: String,
    pub name_label: String,
    pub manifestwork_namespace: String,
}

impl From<&KubeSourceConfig> for MapperConfig {
    fn from(cfg: &KubeSourceConfig) -> MapperConfig {
        MapperConfig {
            mgmt_cluster: cfg.mgmt_cluster.clone(),
            mode: cfg.mode,
            environment: cfg.environment.clone(),
            id_label: cfg.manifestwork_label.clone(),
            name_label: cfg.name_label.clone(),
            manifestwork_namespace: cfg.manifestwork_namespace.clone(),
        }
    }
}

pub(super) fn label(meta: &ObjectMeta, key: &str) -> Option<String> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(key))
        .filter(|v| !v.is_empty())
        .cloned()
}

/// The unknown-value field of each annotation [`trace_parents`] reads.
const TRACEPARENT_FIELDS: [&str; 2] = [
    "metadata.annotations[tracing.k8s.io/traceparent]",
    "metadata.annotations[traceparent]",
];

/// Longest annotation text kept in an unknown value.
const MAX_UNKNOWN_ANNOTATION: usize = 128;

/// The W3C trace contexts the object's annotations name, each once, for
/// its hop's span to link to (docs/design/07-traces.md §7.7). A malformed one is
/// counted as an unknown value and ignored: never trusted as ids.
pub(super) fn trace_parents(
    meta: &ObjectMeta,
    unknown: &mut Vec<UnknownValue>,
) -> Vec<crate::model::TraceParent> {
    let mut parents = Vec::new();
    let Some(annotations) = meta.annotations.as_ref() else {
        return parents;
    };
    for (key, field) in crate::model::TRACEPARENT_ANNOTATIONS
        .iter()
        .zip(TRACEPARENT_FIELDS)
    {
        let Some(value) = annotations.get(*key) else {
            continue;
        };
        match crate::model::TraceParent::parse(value) {
            Ok(parent) if !parents.contains(&parent) => parents.push(parent),
            Ok(_) => {}
            Err(_) => unknown.push(UnknownValue {
                field,
                value: value.chars().take(MAX_UNKNOWN_ANNOTATION).collect(),
            }),
        }
    }
    parents
}

/// The ids the object's log-tracing annotations give its operation
/// (docs/design/15b-operations.md §15.13), bounded.
pub(super) fn upstream_ids(meta: &ObjectMeta) -> Vec<crate::model::UpstreamId> {
    meta.annotations
        .as_ref()
        .map(|a| crate::model::log_tracing_ids(a.iter()))
        .unwrap_or_default()
}

pub(super) fn created(meta: &ObjectMeta) -> Option<Stamp> {
    meta.creation_timestamp.as_ref().map(|t| t.0.into())
}

pub(super) fn deleting(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
}

/// A deleting object's view dates its phase by its `deletionTimestamp` and
/// names the finalizers that hold it (docs/design/15-operations.md §15.3).
pub(super) fn mark_deletion(meta: &ObjectMeta, view: &mut crate::model::HopView) {
    let Some(at) = meta.deletion_timestamp.as_ref() else {
        return;
    };
    if view.phase != crate::model::Phase::Deleting {
        return;
    }
    let since: crate::model::Stamp = at.0.into();
    view.since = Some(since);
    let finalizers = meta.finalizers.iter().flatten().filter(|f| !f.is_empty());
    let held: Vec<crate::model::Condition> = finalizers
        .map(|name| {
            crate::model::Condition::new(
                crate::model::Condition::FINALIZER,
                crate::model::ConditionStatus::True,
                name.as_str(),
                crate::model::Text::default(),
                Some(since),
            )
        })
        .collect();
    if !held.is_empty() {
        view.conditions = view.conditions.iter().cloned().chain(held).collect();
    }
}

/// Only the facts of one object, keyed by its kind: the hop reading of the
/// shared view plus what the joins need. Never the object itself.
#[derive(Clone, Debug, PartialEq)]
pub enum Facts {
    ManifestWork(ManifestWorkFacts),
    HostedCluster(Box<HostedClusterFacts>),
    NodePool(NodePoolFacts),
    HostedControlPlane(HostedControlPlaneReading),
    ManagedCluster(ManagedClusterFacts),
    /// Whether the pod is Ready; `None`: a finished pod, not counted.
    Pod(Option<bool>),
    MultiClusterEngine(Option<String>),
    Agent(AgentFacts),
}

impl Facts {
    pub fn kind(&self) -> WatchKind {
        match self {
            Facts::ManifestWork(_) => WatchKind::ManifestWork,
            Facts::HostedCluster(_) => WatchKind::HostedCluster,
            Facts::NodePool(_) => WatchKind::NodePool,
            Facts::HostedControlPlane(_) => WatchKind::HostedControlPlane,
            Facts::ManagedCluster(_) => WatchKind::ManagedCluster,
            Facts::Pod(_) => WatchKind::ControlPlanePod,
            Facts::MultiClusterEngine(_) => WatchKind::MultiClusterEngine,
            Facts::Agent(_) => WatchKind::Agent,
        }
    }
}

/// Reading the facts out of a partial object; values it does not recognise
/// go to `unknown` (counted, never fatal).
pub trait ToFacts {
    fn facts(&self, cfg: &MapperConfig, unknown: &mut Vec<UnknownValue>) -> Facts;
}

/// Which emitted view an object feeds. Every variant one boxed string:
/// the mapper keeps one key per emitted view (docs/performance.md).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum EmitKey {
    ManifestWork(ObjRef),
    HostedCluster(ObjRef),
    NodePool(ObjRef),
    /// A control-plane namespace: its HostedControlPlane and pods together.
    ControlPlane(Box<str>),
    ManagedCluster(Box<str>),
}

/// One observation's worth: the view of one object of one cluster's hop.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Emitted {
    pub(super) cluster_id: String,
    pub(super) hop: Hop,
    pub(super) object: String,
    pub(super) view: HopView,
}

/// What was emitted for one key: where it went and a fingerprint of the
/// view, not the view. The model holds the view itself; a second copy of
/// every object's conditions here cost a third of the management side's
/// memory at 10,000 clusters (docs/performance.md). Boxed strings, as
/// kept for every object the mapper emitted and never grown.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Sent {
    pub(super) cluster_id: Box<str>,
    pub(super) hop: Hop,
    pub(super) object: Box<str>,
    pub(super) fingerprint: u64,
}

impl Emitted {
    /// What the mapper remembers of this view: where it goes and its
    /// fingerprint (`HopView::fingerprint`, as the pollers').
    fn sent(&self) -> Sent {
        Sent {
            cluster_id: self.cluster_id.as_str().into(),
            hop: self.hop,
            object: self.object.as_str().into(),
            fingerprint: self.view.fingerprint(),
        }
    }
}

/// One management cluster's facts and what was emitted from them.
#[derive(Debug)]
pub struct Mapper {
    cfg: MapperConfig,
    // The facts are boxed: a B-tree node holds eleven slots and a list
    // arrives in key order, which leaves nodes half full; a slot of a key and
    // a pointer wastes far less than one of a key and 200 bytes of facts.
    manifestworks: BTreeMap<ObjRef, Box<ManifestWorkFacts>>,
    hosted_clusters: BTreeMap<ObjRef, Box<HostedClusterFacts>>,
    /// HostedClusters by name: a self-managed ManagedCluster is named like one.
    /// A sorted `Vec`, not a set: a name nearly always has one
    /// HostedCluster, and a one-element `BTreeSet` allocates an 11-slot node.
    hosted_clusters_by_name: BTreeMap<String, Vec<ObjRef>>,
    node_pools: BTreeMap<ObjRef, Box<NodePoolFacts>>,
    control_planes: BTreeMap<ObjRef, Box<HostedControlPlaneReading>>,
    pods: BTreeMap<ObjRef, Option<bool>>,
    managed_clusters: BTreeMap<String, Box<ManagedClusterFacts>>,
    engines: BTreeMap<ObjRef, Option<String>>,
    agents: BTreeMap<ObjRef, AgentFacts>,
    /// Hashed, not a B-tree: only ever looked up by key (a flush walks
    /// `dirty`, in order), and a B-tree filled in key order by a list
    /// leaves its nodes half empty, some 200 bytes per emitted view
    /// (docs/performance.md).
    emitted: HashMap<EmitKey, Sent>,
    dirty: BTreeSet<EmitKey>,
}

impl Mapper {
    pub fn new(cfg: MapperConfig) -> Mapper {
        Mapper {
            cfg,
            manifestworks: BTreeMap::new(),
            hosted_clusters: BTreeMap::new(),
            hosted_clusters_by_name: BTreeMap::new(),
            node_pools: BTreeMap::new(),
            control_planes: BTreeMap::new(),
            pods: BTreeMap::new(),
            managed_clusters: BTreeMap::new(),
            engines: BTreeMap::new(),
            agents: BTreeMap::new(),
            emitted: HashMap::new(),
            dirty: BTreeSet::new(),
        }
    }

    pub fn config(&self) -> &MapperConfig {
        &self.cfg
    }

    /// Objects of this kind the mapper knows (to find what a relist lost).
    pub fn known(&self, kind: WatchKind) -> BTreeSet<ObjRef> {
        fn keys<V>(m: &BTreeMap<ObjRef, V>) -> BTreeSet<ObjRef> {
            m.keys().cloned().collect()
        }
        match kind {
            WatchKind::ManifestWork => keys(&self.manifestworks),
            WatchKind::HostedCluster => keys(&self.hosted_clusters),
            WatchKind::NodePool => keys(&self.node_pools),
            WatchKind::HostedControlPlane => keys(&self.control_planes),
            WatchKind::ControlPlanePod => keys(&self.pods),
            WatchKind::ManagedCluster => self
                .managed_clusters
                .keys()
                .map(|n| ObjRef::new("", n))
                .collect(),
            WatchKind::MultiClusterEngine => keys(&self.engines),
            WatchKind::Agent => keys(&self.agents),
        }
    }

    /// The object exists with these facts.
    pub fn upsert(&mut self, at: ObjRef, facts: Facts) {
        match facts {
            Facts::ManifestWork(f) => {
                self.dirty.insert(EmitKey::ManifestWork(at.clone()));
                self.manifestworks.insert(at, Box::new(f));
            }
            Facts::HostedCluster(f) => {
                self.hosted_cluster_touched(&at);
                let refs = self
                    .hosted_clusters_by_name
                    .entry(at.name().to_string())
                    .or_default();
                if let Err(i) = refs.binary_search(&at) {
                    refs.insert(i, at.clone());
                }
                self.hosted_clusters.insert(at, f);
            }
            Facts::NodePool(f) => {
                self.dirty.insert(EmitKey::NodePool(at.clone()));
                self.node_pools.insert(at, Box::new(f));
            }
            Facts::HostedControlPlane(f) => {
                self.dirty
                    .insert(EmitKey::ControlPlane(at.namespace().into()));
                self.control_planes.insert(at, Box::new(f));
            }
            Facts::ManagedCluster(f) => {
                self.dirty.insert(EmitKey::ManagedCluster(at.name().into()));
                self.managed_clusters
                    .insert(at.name().to_string(), Box::new(f));
            }
            Facts::Pod(ready) => {
                self.dirty
                    .insert(EmitKey::ControlPlane(at.namespace().into()));
                self.pods.insert(at, ready);
            }
            Facts::MultiClusterEngine(phase) => {
                self.engines.insert(at, phase);
            }
            Facts::Agent(f) => {
                self.agents.insert(at, f);
            }
        }
    }

    /// The object is gone (deleted, or missing from a relist).
    pub fn delete(&mut self, kind: WatchKind, at: &ObjRef) {
        match kind {
            WatchKind::ManifestWork => {
                self.manifestworks.remove(at);
                self.dirty.insert(EmitKey::ManifestWork(at.clone()));
            }
            WatchKind::HostedCluster => {
                self.hosted_cluster_touched(at);
                self.hosted_clusters.remove(at);
                if let Some(refs) = self.hosted_clusters_by_name.get_mut(at.name()) {
                    if let Ok(i) = refs.binary_search(at) {
                        refs.remove(i);
                    }
                    if refs.is_empty() {
                        self.hosted_clusters_by_name.remove(at.name());
                    }
                }
            }
            WatchKind::NodePool => {
                self.node_pools.remove(at);
                self.dirty.insert(EmitKey::NodePool(at.clone()));
            }
            WatchKind::HostedControlPlane => {
                self.control_planes.remove(at);
                self.dirty
                    .insert(EmitKey::ControlPlane(at.namespace().into()));
            }
            WatchKind::ControlPlanePod => {
                self.pods.remove(at);
                self.dirty
                    .insert(EmitKey::ControlPlane(at.namespace().into()));
            }
            WatchKind::ManagedCluster => {
                self.managed_clusters.remove(at.name());
                self.dirty.insert(EmitKey::ManagedCluster(at.name().into()));
            }
            WatchKind::MultiClusterEngine => {
                self.engines.remove(at);
            }
            WatchKind::Agent => {
                self.agents.remove(at);
            }
        }
    }

    /// A HostedCluster changes what other objects resolve to: mark them all.
    fn hosted_cluster_touched(&mut self, at: &ObjRef) {
        self.dirty.insert(EmitKey::HostedCluster(at.clone()));
        self.dirty
            .insert(EmitKey::ControlPlane(control_plane_namespace(at).into()));
        self.dirty.insert(EmitKey::ManagedCluster(at.name().into()));
        if let Some(old) = self.hosted_clusters.get(at)
            && let Some(id) = self.hosted_cluster_id(at, old)
        {
            self.dirty.insert(EmitKey::ManagedCluster(id.into()));
        }
        let pools: Vec<ObjRef> = self
            .node_pools
            .range(ObjRef::new(at.namespace(), "")..)
            .take_while(|(k, _)| k.namespace() == at.namespace())
            .map(|(k, _)| k.clone())
            .collect();
        for pool in pools {
            self.dirty.insert(EmitKey::NodePool(pool));
        }
    }

    /// The current MultiClusterEngine phase (one MCE per hub).
    pub fn mce_phase(&self) -> Option<Option<String>> {
        self.engines.values().next().cloned()
    }

    pub fn agents(&self) -> impl Iterator<Item = &AgentFacts> {
        self.agents.values()
    }

    /// What changed since the last flush, as observations.
    pub fn flush(&mut self) -> Vec<Observation> {
        let dirty = std::mem::take(&mut self.dirty);
        let mut out = Vec::new();
        for key in dirty {
            let desired = self.desired(&key);
            let sent = desired.as_ref().map(Emitted::sent);
            let previous = self.emitted.get(&key);
            if sent.as_ref() == previous {
                continue;
            }
            if let Some(prev) = previous {
                let moved = sent.as_ref().is_none_or(|s| {
                    s.cluster_id != prev.cluster_id || s.hop != prev.hop || s.object != prev.object
                });
                if moved {
                    out.push(Observation {
                        key: ClusterKey::Id(prev.cluster_id.to_string()),
                        hop: prev.hop,
                        via: Via::Direct,
                        object: prev.object.to_string(),
                        change: Change::Gone,
                    });
                }
            }
            match (desired, sent) {
                (Some(d), Some(sent)) => {
                    out.push(Observation {
                        key: ClusterKey::Id(d.cluster_id),
                        hop: d.hop,
                        via: Via::Direct,
                        object: d.object,
                        change: Change::Upsert(Box::new(d.view)),
                    });
                    self.emitted.insert(key, sent);
                }
                _ => {
                    self.emitted.remove(&key);
                }
            }
        }
        out
    }

    pub(super) fn identity(&self) -> IdentityPatch {
        IdentityPatch {
            mgmt_cluster: Some(self.cfg.mgmt_cluster.clone()),
            ..IdentityPatch::default()
        }
    }

    /// `ocm-<env>-<id>[-<name>]` → `<id>` (ARO mode, environment configured).
    /// Clusters Service ids have no dashes, so the id ends at the next one.
    pub(super) fn id_from_namespace(&self, namespace: &str) -> Option<String> {
        if self.cfg.mode != KubeMode::Aro || self.cfg.environment.is_empty() {
            return None;
        }
        let rest = namespace.strip_prefix(&format!("ocm-{}-", self.cfg.environment))?;
        let id = rest.split('-').next()?;
        (!id.is_empty()).then(|| id.to_string())
    }

    pub(super) fn hosted_cluster_id(&self, at: &ObjRef, f: &HostedClusterFacts) -> Option<String> {
        match self.cfg.mode {
            KubeMode::Aro => f
                .label_id
                .clone()
                .or_else(|| self.id_from_namespace(at.namespace())),
            KubeMode::SelfManaged => Some(
                f.spec_cluster_id
                    .clone()
                    .unwrap_or_else(|| format!("{}/{}", at.namespace(), at.name())),
            ),
        }
    }

    pub(super) fn hosted_cluster_by_cp_namespace(&self, namespace: &str) -> Option<String> {
        // The control-plane namespace is `<hc namespace>-<hc name>`; names and
        // namespaces may contain dashes, so try each split point.
        let mut candidates = namespace.match_indices('-').map(|(i, _)| i);
        candidates.find_map(|i| {
            let at = ObjRef::new(&namespace[..i], &namespace[i + 1..]);
            let f = self.hosted_clusters.get(&at)?;
            self.hosted_cluster_id(&at, f)
        })
    }

    fn desired(&self, key: &EmitKey) -> Option<Emitted> {
        match key {
            EmitKey::ManifestWork(at) => self.manifestwork_view(at),
            EmitKey::HostedCluster(at) => self.hosted_cluster_view(at),
            EmitKey::NodePool(at) => self.node_pool_view(at),
            EmitKey::ControlPlane(ns) => self.control_plane_view(ns),
            EmitKey::ManagedCluster(name) => self.managed_cluster_view(name),
        }
    }
}

/// A HostedCluster's control-plane namespace (`<namespace>-<name>`, both modes).
pub fn control_plane_namespace(hosted_cluster: &ObjRef) -> String {
    format!("{}-{}", hosted_cluster.namespace(), hosted_cluster.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_mapper_keeps_of_each_emitted_view_stays_small() {
        // One of each per emitted view: some 50,000 at 10,000 clusters.
        let word = std::mem::size_of::<usize>();
        assert_eq!(std::mem::size_of::<EmitKey>(), 3 * word);
        assert_eq!(std::mem::size_of::<Sent>(), 6 * word);
    }

    #[test]
    fn an_object_ref_is_one_allocation_that_splits_back_and_groups_a_namespace() {
        assert_eq!(
            std::mem::size_of::<ObjRef>(),
            2 * std::mem::size_of::<usize>()
        );
        let pod = ObjRef::new("ocm-env-abc-hcp", "kube-apiserver-0");
        assert_eq!(pod.namespace(), "ocm-env-abc-hcp");
        assert_eq!(pod.name(), "kube-apiserver-0");
        let cluster_scoped = ObjRef::new("", "abc");
        assert_eq!(
            (cluster_scoped.namespace(), cluster_scoped.name()),
            ("", "abc")
        );
        // A namespace's objects sort together, also beside namespaces that
        // extend its name: the range scans of a namespace rely on it.
        let mut refs = [
            ObjRef::new("ns-x", "a"),
            ObjRef::new("ns", "z"),
            ObjRef::new("ns0", "a"),
            ObjRef::new("ns", "a"),
            ObjRef::new("ns", "m-1"),
        ];
        refs.sort();
        let in_ns: Vec<&str> = refs
            .iter()
            .skip_while(|r| r.namespace() != "ns")
            .take_while(|r| r.namespace() == "ns")
            .map(ObjRef::name)
            .collect();
        assert_eq!(in_ns, ["a", "m-1", "z"]);
        assert!(refs.iter().filter(|r| r.namespace() == "ns").count() == 3);
        assert!(ObjRef::new("ns", "") <= ObjRef::new("ns", "a"));
    }
}
