//! From watched objects to observations: pure, clock passed in.
//!
//! One [`Mapper`] per management cluster keeps the few facts it needs of each
//! watched object (never the object), resolves each to a `cluster_id`
//! (DESIGN section 1), and on [`Mapper::flush`] emits only what changed since
//! the last emission. Objects that cannot be resolved yet (a self-managed
//! NodePool or ManagedCluster seen before its HostedCluster) wait, and are
//! emitted when the HostedCluster arrives; an object whose resolution changes
//! is withdrawn (`Change::Gone`) from the old cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::config::{KubeMode, KubeSourceConfig, WatchKind};
use super::objects::{self, KubeCondition};
use crate::model::phase_map::{self, ControlPlaneFacts};
use crate::model::{
    Change, ClusterKey, Condition, ConditionStatus, Hop, HopError, HopView, IdentityPatch,
    Observation, Phase, PodCounts, Replicas, Via,
};

/// Conditions kept per hop: what the phase tables read plus the bubbled-up
/// conditions an SRE looks at first. Everything else is dropped at the door,
/// so 10,000 HostedClusters do not keep 50 conditions each.
pub const HOSTED_CLUSTER_CONDITIONS: &[&str] = &[
    "Available",
    "Progressing",
    "Degraded",
    "ValidConfiguration",
    "ValidReleaseImage",
    "ValidReleaseInfo",
    "SupportedHostedCluster",
    "InfrastructureReady",
    "KubeAPIServerAvailable",
    "EtcdAvailable",
    "ValidHostedControlPlaneConfiguration",
    "IgnitionEndpointAvailable",
    "ReconciliationActive",
    "ReconciliationSucceeded",
    "ClusterVersionSucceeding",
    "ClusterVersionAvailable",
    "ClusterVersionProgressing",
    "PlatformCredentialsFound",
];
pub const MANIFESTWORK_CONDITIONS: &[&str] = &["Applied", "Available", "Progressing", "Degraded"];
pub const CONTROL_PLANE_CONDITIONS: &[&str] = &[
    "Available",
    "Degraded",
    "EtcdAvailable",
    "KubeAPIServerAvailable",
    "InfrastructureReady",
];
pub const MANAGED_CLUSTER_CONDITIONS: &[&str] = &[
    "HubAcceptedManagedCluster",
    "HubDeniedManagedCluster",
    "ManagedClusterJoined",
    "ManagedClusterConditionAvailable",
    "ManagedClusterImportSucceeded",
    "Deleting",
];
pub const NODE_POOL_CONDITIONS: &[&str] = &[
    "Ready",
    "AllMachinesReady",
    "AllNodesHealthy",
    "ValidReleaseImage",
    "ValidPlatformImage",
    "ValidMachineConfig",
    "ReachedIgnitionEndpoint",
    "UpdatingVersion",
    "UpdatingConfig",
];

/// HyperShift's annotation once a HostedCluster was first Available.
pub const HAS_BEEN_AVAILABLE_ANNOTATION: &str = "hypershift.openshift.io/HasBeenAvailable";

/// Namespace and name of a watched object (namespace empty when cluster-scoped).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjRef {
    pub namespace: String,
    pub name: String,
}

impl ObjRef {
    pub fn new(namespace: &str, name: &str) -> ObjRef {
        ObjRef {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }

    pub fn of(meta: &ObjectMeta) -> ObjRef {
        ObjRef {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
        }
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
    pub degraded_budget: Duration,
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
            degraded_budget: cfg.degraded_budget,
        }
    }
}

fn label(meta: &ObjectMeta, key: &str) -> Option<String> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(key))
        .filter(|v| !v.is_empty())
        .cloned()
}

fn created(meta: &ObjectMeta) -> Option<Timestamp> {
    meta.creation_timestamp.as_ref().map(|t| t.0)
}

fn deleting(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
}

/// Convert and allow-list conditions. An unparsable transition time reads as
/// absent: the exporter's observation time is the fallback (DESIGN section 2).
pub fn conditions(raw: &[KubeCondition], allow: &[&str]) -> Vec<Condition> {
    raw.iter()
        .filter(|c| allow.contains(&c.kind.as_str()))
        .map(|c| Condition {
            kind: c.kind.clone(),
            status: ConditionStatus::from_upstream(&c.status),
            reason: c.reason.clone().unwrap_or_default(),
            message: c.message.clone().unwrap_or_default(),
            last_transition: c
                .last_transition_time
                .as_deref()
                .and_then(|t| t.parse::<Timestamp>().ok()),
        })
        .collect()
}

/// The latest transition among these condition types.
fn latest_transition(conditions: &[Condition], kinds: &[&str]) -> Option<Timestamp> {
    conditions
        .iter()
        .filter(|c| kinds.contains(&c.kind.as_str()))
        .filter_map(|c| c.last_transition)
        .max()
}

fn transition_of(conditions: &[Condition], kind: &str) -> Option<Timestamp> {
    phase_map::find(conditions, kind).and_then(|c| c.last_transition)
}

fn error_from(c: &Condition) -> HopError {
    HopError {
        code: if c.reason.is_empty() {
            format!("{}={}", c.kind, c.status.as_str())
        } else {
            c.reason.clone()
        },
        message: c.message.clone(),
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ManifestWorkFacts {
    pub label_id: Option<String>,
    pub name_label: Option<String>,
    pub created_at: Option<Timestamp>,
    pub deleting: bool,
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct HostedClusterFacts {
    pub label_id: Option<String>,
    pub spec_cluster_id: Option<String>,
    pub name_label: Option<String>,
    pub created_at: Option<Timestamp>,
    pub deleting: bool,
    pub has_been_available: bool,
    pub platform: Option<String>,
    /// Newest `Completed` version of the history.
    pub version: Option<String>,
    /// `Partial`/`Completed` of the newest history entry.
    pub progress: Option<String>,
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodePoolFacts {
    pub label_id: Option<String>,
    pub name_label: Option<String>,
    pub cluster_name: String,
    pub created_at: Option<Timestamp>,
    pub deleting: bool,
    pub desired: Option<u32>,
    pub current: u32,
    pub ready: u32,
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct HostedControlPlaneFacts {
    pub created_at: Option<Timestamp>,
    pub deleting: bool,
    pub ready: bool,
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ManagedClusterFacts {
    pub label_id: Option<String>,
    pub created_at: Option<Timestamp>,
    pub deleting: bool,
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentFacts {
    pub approved: bool,
    /// `status.progress.currentStage`, raw.
    pub stage: String,
    /// `spec.clusterDeploymentName` as `<namespace>/<name>`, when bound.
    pub bound_to: Option<String>,
}

/// Only the facts of one object, keyed by its kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Facts {
    ManifestWork(ManifestWorkFacts),
    HostedCluster(Box<HostedClusterFacts>),
    NodePool(NodePoolFacts),
    HostedControlPlane(HostedControlPlaneFacts),
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

/// Reading the facts out of a partial object.
pub trait ToFacts {
    fn facts(&self, cfg: &MapperConfig) -> Facts;
}

fn u32_of(v: Option<i64>) -> Option<u32> {
    v.map(|n| u32::try_from(n.max(0)).unwrap_or(u32::MAX))
}

impl ToFacts for objects::ManifestWork {
    fn facts(&self, cfg: &MapperConfig) -> Facts {
        let raw = self.status.as_ref().map(|s| s.conditions.as_slice());
        Facts::ManifestWork(ManifestWorkFacts {
            label_id: label(&self.metadata, &cfg.id_label),
            name_label: label(&self.metadata, &cfg.name_label),
            created_at: created(&self.metadata),
            deleting: deleting(&self.metadata),
            conditions: conditions(raw.unwrap_or_default(), MANIFESTWORK_CONDITIONS),
        })
    }
}

impl ToFacts for objects::HostedCluster {
    fn facts(&self, cfg: &MapperConfig) -> Facts {
        let status = self.status.clone().unwrap_or_default();
        let history = status.version.map(|v| v.history).unwrap_or_default();
        let completed = history.iter().find(|h| h.state == "Completed");
        let annotated = self
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(HAS_BEEN_AVAILABLE_ANNOTATION));
        Facts::HostedCluster(Box::new(HostedClusterFacts {
            label_id: label(&self.metadata, &cfg.id_label),
            spec_cluster_id: self.spec.cluster_id.clone().filter(|s| !s.is_empty()),
            name_label: label(&self.metadata, &cfg.name_label),
            created_at: created(&self.metadata),
            deleting: deleting(&self.metadata),
            has_been_available: annotated || completed.is_some(),
            // Lower-cased so the management view agrees with the service
            // side's platform label values.
            platform: self
                .spec
                .platform
                .as_ref()
                .and_then(|p| p.kind.as_deref())
                .filter(|p| !p.is_empty())
                .map(str::to_ascii_lowercase),
            version: completed
                .map(|h| h.version.clone())
                .filter(|v| !v.is_empty()),
            progress: history
                .first()
                .map(|h| h.state.clone())
                .filter(|s| !s.is_empty()),
            conditions: conditions(&status.conditions, HOSTED_CLUSTER_CONDITIONS),
        }))
    }
}

impl ToFacts for objects::NodePool {
    fn facts(&self, cfg: &MapperConfig) -> Facts {
        let status = self.status.clone().unwrap_or_default();
        let conds = conditions(&status.conditions, NODE_POOL_CONDITIONS);
        let current = u32_of(status.replicas).unwrap_or(0);
        // nodesInfo counts ready nodes when HyperShift reports it; otherwise
        // a Ready pool has all its current nodes ready.
        let ready = match status.nodes_info.as_ref() {
            Some(info) if !info.node_versions.is_empty() => info
                .node_versions
                .iter()
                .filter_map(|v| u32_of(v.ready_node_count))
                .fold(0u32, u32::saturating_add),
            _ if phase_map::status_of(&conds, "Ready") == ConditionStatus::True => current,
            _ => 0,
        };
        let desired = u32_of(self.spec.replicas)
            .or_else(|| self.spec.auto_scaling.as_ref().and_then(|a| u32_of(a.min)));
        Facts::NodePool(NodePoolFacts {
            label_id: label(&self.metadata, &cfg.id_label),
            name_label: label(&self.metadata, &cfg.name_label),
            cluster_name: self.spec.cluster_name.clone(),
            created_at: created(&self.metadata),
            deleting: deleting(&self.metadata),
            desired,
            current,
            ready,
            conditions: conds,
        })
    }
}

impl ToFacts for objects::HostedControlPlane {
    fn facts(&self, _cfg: &MapperConfig) -> Facts {
        let status = self.status.clone().unwrap_or_default();
        Facts::HostedControlPlane(HostedControlPlaneFacts {
            created_at: created(&self.metadata),
            deleting: deleting(&self.metadata),
            ready: status.ready,
            conditions: conditions(&status.conditions, CONTROL_PLANE_CONDITIONS),
        })
    }
}

impl ToFacts for objects::ManagedCluster {
    fn facts(&self, cfg: &MapperConfig) -> Facts {
        let raw = self.status.as_ref().map(|s| s.conditions.as_slice());
        Facts::ManagedCluster(ManagedClusterFacts {
            label_id: label(&self.metadata, &cfg.id_label),
            created_at: created(&self.metadata),
            deleting: deleting(&self.metadata),
            conditions: conditions(raw.unwrap_or_default(), MANAGED_CLUSTER_CONDITIONS),
        })
    }
}

impl ToFacts for objects::ControlPlanePod {
    fn facts(&self, _cfg: &MapperConfig) -> Facts {
        let status = self.status.clone().unwrap_or_default();
        // Finished job pods are neither ready nor a problem.
        if matches!(status.phase.as_deref(), Some("Succeeded")) {
            return Facts::Pod(None);
        }
        let ready = status
            .conditions
            .iter()
            .any(|c| c.kind == "Ready" && c.status == "True");
        Facts::Pod(Some(ready))
    }
}

impl ToFacts for objects::MultiClusterEngine {
    fn facts(&self, _cfg: &MapperConfig) -> Facts {
        Facts::MultiClusterEngine(self.status.as_ref().and_then(|s| s.phase.clone()))
    }
}

impl ToFacts for objects::Agent {
    fn facts(&self, _cfg: &MapperConfig) -> Facts {
        Facts::Agent(AgentFacts {
            approved: self.spec.approved,
            stage: self
                .status
                .as_ref()
                .and_then(|s| s.progress.as_ref())
                .and_then(|p| p.current_stage.clone())
                .unwrap_or_default(),
            bound_to: self
                .spec
                .cluster_deployment_name
                .as_ref()
                .filter(|c| !c.name.is_empty())
                .map(|c| format!("{}/{}", c.namespace, c.name)),
        })
    }
}

/// Which emitted view an object feeds.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum EmitKey {
    ManifestWork(ObjRef),
    HostedCluster(ObjRef),
    NodePool(ObjRef),
    /// A control-plane namespace: its HostedControlPlane and pods together.
    ControlPlane(String),
    ManagedCluster(String),
}

#[derive(Clone, Debug, PartialEq)]
struct Emitted {
    cluster_id: String,
    hop: Hop,
    object: String,
    view: HopView,
}

/// One management cluster's facts and what was emitted from them.
#[derive(Debug)]
pub struct Mapper {
    cfg: MapperConfig,
    manifestworks: BTreeMap<ObjRef, ManifestWorkFacts>,
    hosted_clusters: BTreeMap<ObjRef, HostedClusterFacts>,
    /// HostedClusters by name: a self-managed ManagedCluster is named like one.
    hosted_clusters_by_name: BTreeMap<String, BTreeSet<ObjRef>>,
    node_pools: BTreeMap<ObjRef, NodePoolFacts>,
    control_planes: BTreeMap<ObjRef, HostedControlPlaneFacts>,
    pods: BTreeMap<ObjRef, Option<bool>>,
    managed_clusters: BTreeMap<String, ManagedClusterFacts>,
    engines: BTreeMap<ObjRef, Option<String>>,
    agents: BTreeMap<ObjRef, AgentFacts>,
    emitted: BTreeMap<EmitKey, Emitted>,
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
            emitted: BTreeMap::new(),
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
                self.manifestworks.insert(at, f);
            }
            Facts::HostedCluster(f) => {
                self.hosted_cluster_touched(&at);
                self.hosted_clusters_by_name
                    .entry(at.name.clone())
                    .or_default()
                    .insert(at.clone());
                self.hosted_clusters.insert(at, *f);
            }
            Facts::NodePool(f) => {
                self.dirty.insert(EmitKey::NodePool(at.clone()));
                self.node_pools.insert(at, f);
            }
            Facts::HostedControlPlane(f) => {
                self.dirty
                    .insert(EmitKey::ControlPlane(at.namespace.clone()));
                self.control_planes.insert(at, f);
            }
            Facts::ManagedCluster(f) => {
                self.dirty.insert(EmitKey::ManagedCluster(at.name.clone()));
                self.managed_clusters.insert(at.name, f);
            }
            Facts::Pod(ready) => {
                self.dirty
                    .insert(EmitKey::ControlPlane(at.namespace.clone()));
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
                if let Some(refs) = self.hosted_clusters_by_name.get_mut(&at.name) {
                    refs.remove(at);
                    if refs.is_empty() {
                        self.hosted_clusters_by_name.remove(&at.name);
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
                    .insert(EmitKey::ControlPlane(at.namespace.clone()));
            }
            WatchKind::ControlPlanePod => {
                self.pods.remove(at);
                self.dirty
                    .insert(EmitKey::ControlPlane(at.namespace.clone()));
            }
            WatchKind::ManagedCluster => {
                self.managed_clusters.remove(&at.name);
                self.dirty.insert(EmitKey::ManagedCluster(at.name.clone()));
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
            .insert(EmitKey::ControlPlane(control_plane_namespace(at)));
        self.dirty.insert(EmitKey::ManagedCluster(at.name.clone()));
        if let Some(old) = self.hosted_clusters.get(at)
            && let Some(id) = self.hosted_cluster_id(at, old)
        {
            self.dirty.insert(EmitKey::ManagedCluster(id));
        }
        let pools: Vec<ObjRef> = self
            .node_pools
            .range(ObjRef::new(&at.namespace, "")..)
            .take_while(|(k, _)| k.namespace == at.namespace)
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

    /// Mark HostedClusters whose phase can change with time alone.
    pub fn reevaluate(&mut self) {
        let budget = self.cfg.degraded_budget;
        let keys: Vec<ObjRef> = self
            .hosted_clusters
            .iter()
            .filter(|(_, f)| {
                phase_map::hosted_cluster_degraded_deadline(
                    &f.conditions,
                    f.has_been_available,
                    budget,
                )
                .is_some()
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.dirty.insert(EmitKey::HostedCluster(key));
        }
    }

    /// What changed since the last flush, as observations.
    pub fn flush(&mut self, now: Timestamp) -> Vec<Observation> {
        let dirty = std::mem::take(&mut self.dirty);
        let mut out = Vec::new();
        for key in dirty {
            let desired = self.desired(&key, now);
            let previous = self.emitted.get(&key);
            if desired.as_ref() == previous {
                continue;
            }
            if let Some(prev) = previous {
                let moved = desired.as_ref().is_none_or(|d| {
                    d.cluster_id != prev.cluster_id || d.hop != prev.hop || d.object != prev.object
                });
                if moved {
                    out.push(Observation {
                        key: ClusterKey::Id(prev.cluster_id.clone()),
                        hop: prev.hop,
                        via: Via::Direct,
                        object: prev.object.clone(),
                        change: Change::Gone,
                    });
                }
            }
            match desired {
                Some(d) => {
                    out.push(Observation {
                        key: ClusterKey::Id(d.cluster_id.clone()),
                        hop: d.hop,
                        via: Via::Direct,
                        object: d.object.clone(),
                        change: Change::Upsert(Box::new(d.view.clone())),
                    });
                    self.emitted.insert(key, d);
                }
                None => {
                    self.emitted.remove(&key);
                }
            }
        }
        out
    }

    fn identity(&self) -> IdentityPatch {
        IdentityPatch {
            mgmt_cluster: Some(self.cfg.mgmt_cluster.clone()),
            ..IdentityPatch::default()
        }
    }

    /// `ocm-<env>-<id>[-<name>]` → `<id>` (ARO mode, environment configured).
    /// Clusters Service ids have no dashes, so the id ends at the next one.
    fn id_from_namespace(&self, namespace: &str) -> Option<String> {
        if self.cfg.mode != KubeMode::Aro || self.cfg.environment.is_empty() {
            return None;
        }
        let rest = namespace.strip_prefix(&format!("ocm-{}-", self.cfg.environment))?;
        let id = rest.split('-').next()?;
        (!id.is_empty()).then(|| id.to_string())
    }

    fn hosted_cluster_id(&self, at: &ObjRef, f: &HostedClusterFacts) -> Option<String> {
        match self.cfg.mode {
            KubeMode::Aro => f
                .label_id
                .clone()
                .or_else(|| self.id_from_namespace(&at.namespace)),
            KubeMode::SelfManaged => Some(
                f.spec_cluster_id
                    .clone()
                    .unwrap_or_else(|| format!("{}/{}", at.namespace, at.name)),
            ),
        }
    }

    fn hosted_cluster_by_cp_namespace(&self, namespace: &str) -> Option<String> {
        // The control-plane namespace is `<hc namespace>-<hc name>`; names and
        // namespaces may contain dashes, so try each split point.
        let mut candidates = namespace.match_indices('-').map(|(i, _)| i);
        candidates.find_map(|i| {
            let at = ObjRef::new(&namespace[..i], &namespace[i + 1..]);
            let f = self.hosted_clusters.get(&at)?;
            self.hosted_cluster_id(&at, f)
        })
    }

    fn desired(&self, key: &EmitKey, now: Timestamp) -> Option<Emitted> {
        match key {
            EmitKey::ManifestWork(at) => self.manifestwork_view(at),
            EmitKey::HostedCluster(at) => self.hosted_cluster_view(at, now),
            EmitKey::NodePool(at) => self.node_pool_view(at),
            EmitKey::ControlPlane(ns) => self.control_plane_view(ns),
            EmitKey::ManagedCluster(name) => self.managed_cluster_view(name),
        }
    }

    fn manifestwork_view(&self, at: &ObjRef) -> Option<Emitted> {
        let f = self.manifestworks.get(at)?;
        let cluster_id = f.label_id.clone()?;
        let phase = phase_map::work(&f.conditions, f.deleting);
        let mut view = HopView::new(phase_map::work_state(&f.conditions, f.deleting), phase);
        view.created_at = f.created_at;
        view.since = latest_transition(
            &f.conditions,
            &["Applied", "Available", "Degraded", "Progressing"],
        );
        view.conditions = f.conditions.clone();
        view.identity = IdentityPatch {
            name: f.name_label.clone(),
            ..self.identity()
        };
        if phase == Phase::Failed {
            view.error = f
                .conditions
                .iter()
                .find(|c| {
                    (c.kind == "Degraded" && c.status == ConditionStatus::True)
                        || phase_map::WORK_APPLY_FAILURE_REASONS.contains(&c.reason.as_str())
                })
                .map(error_from);
        }
        Some(Emitted {
            cluster_id,
            hop: Hop::Manifestwork,
            object: String::new(),
            view,
        })
    }

    fn hosted_cluster_view(&self, at: &ObjRef, now: Timestamp) -> Option<Emitted> {
        let f = self.hosted_clusters.get(at)?;
        let cluster_id = self.hosted_cluster_id(at, f)?;
        let conds = &f.conditions;
        let phase = phase_map::hosted_cluster(
            conds,
            f.deleting,
            f.has_been_available,
            now,
            self.cfg.degraded_budget,
        );
        let fatal = phase_map::first_false(conds, &phase_map::HOSTED_CLUSTER_FATAL_CONDITIONS);
        let degraded =
            phase_map::find(conds, "Degraded").filter(|c| c.status == ConditionStatus::True);
        let state = if f.deleting {
            "deleting".to_string()
        } else if conds.is_empty() {
            "no status yet".to_string()
        } else if let Some(c) = fatal {
            format!("{}=False", c.kind)
        } else if phase == Phase::Ready {
            // oc get hc's Progress column tells rolled-out from not yet.
            f.progress
                .as_deref()
                .map_or("Available".to_string(), |p| format!("Available/{p}"))
        } else if degraded.is_some() {
            "Degraded".to_string()
        } else {
            "NotAvailable".to_string()
        };
        let mut view = HopView::new(&state, phase);
        view.created_at = f.created_at;
        view.since = match (fatal, degraded) {
            (Some(c), _) => c.last_transition,
            (None, Some(d)) if phase == Phase::Failed => d.last_transition,
            _ => transition_of(conds, "Available"),
        };
        view.conditions = conds.clone();
        view.identity = IdentityPatch {
            name: match self.cfg.mode {
                KubeMode::Aro => f.name_label.clone(),
                KubeMode::SelfManaged => Some(at.name.clone()),
            },
            namespace: Some(at.namespace.clone()),
            platform: f.platform.clone(),
            version: f.version.clone(),
            ..self.identity()
        };
        if phase == Phase::Failed {
            view.error = fatal.or(degraded).map(error_from);
        }
        Some(Emitted {
            cluster_id,
            hop: Hop::HostedCluster,
            object: String::new(),
            view,
        })
    }

    fn node_pool_view(&self, at: &ObjRef) -> Option<Emitted> {
        let f = self.node_pools.get(at)?;
        let by_hosted_cluster = || {
            let hc = ObjRef::new(&at.namespace, &f.cluster_name);
            let hf = self.hosted_clusters.get(&hc)?;
            self.hosted_cluster_id(&hc, hf)
        };
        let cluster_id = match self.cfg.mode {
            KubeMode::Aro => f
                .label_id
                .clone()
                .or_else(by_hosted_cluster)
                .or_else(|| self.id_from_namespace(&at.namespace)),
            KubeMode::SelfManaged => by_hosted_cluster(),
        }?;
        let conds = &f.conditions;
        let phase = phase_map::node_pool(conds, f.deleting, f.desired, f.ready);
        let fatal = phase_map::first_false(conds, &phase_map::NODE_POOL_FATAL_CONDITIONS);
        let state = if f.deleting {
            "deleting".to_string()
        } else if let Some(c) = fatal {
            format!("{}=False", c.kind)
        } else if conds.is_empty() {
            "no status yet".to_string()
        } else {
            match phase_map::status_of(conds, "Ready") {
                ConditionStatus::True => "Ready".to_string(),
                _ => "NotReady".to_string(),
            }
        };
        let mut view = HopView::new(&state, phase);
        view.created_at = f.created_at;
        view.since = fatal.map_or_else(|| transition_of(conds, "Ready"), |c| c.last_transition);
        view.conditions = conds.clone();
        view.replicas = Some(Replicas {
            desired: f.desired.unwrap_or(f.current),
            current: f.current,
            ready: f.ready,
        });
        view.identity = IdentityPatch {
            name: f.name_label.clone(),
            ..self.identity()
        };
        if phase == Phase::Failed {
            view.error = fatal.map(error_from);
        }
        Some(Emitted {
            cluster_id,
            hop: Hop::NodePool,
            object: at.name.clone(),
            view,
        })
    }

    fn control_plane_view(&self, namespace: &str) -> Option<Emitted> {
        let hcp = self
            .control_planes
            .range(ObjRef::new(namespace, "")..)
            .take_while(|(k, _)| k.namespace == namespace)
            .map(|(_, f)| f)
            .next();
        let mut pods = PodCounts::default();
        for (_, ready) in self
            .pods
            .range(ObjRef::new(namespace, "")..)
            .take_while(|(k, _)| k.namespace == namespace)
        {
            match ready {
                Some(true) => pods.ready += 1,
                Some(false) => pods.not_ready += 1,
                None => {}
            }
        }
        if hcp.is_none() && pods.ready + pods.not_ready == 0 {
            return None;
        }
        let cluster_id = self
            .hosted_cluster_by_cp_namespace(namespace)
            .or_else(|| self.id_from_namespace(namespace))?;
        let facts = ControlPlaneFacts {
            exists: hcp.is_some(),
            ready: hcp.is_some_and(|h| h.ready),
            pods,
            // The namespace goes when its HostedControlPlane is being deleted;
            // watching namespaces for this alone is not worth the RBAC.
            namespace_terminating: hcp.is_some_and(|h| h.deleting),
        };
        let phase = phase_map::control_plane(facts);
        let state = match (phase, hcp) {
            (Phase::Deleting, _) => "deleting",
            (_, None) => "no HostedControlPlane",
            (Phase::Ready, _) => "ready",
            (_, Some(h)) if !h.ready => "not ready",
            _ => "pods not ready",
        };
        let mut view = HopView::new(state, phase);
        view.pods = Some(pods);
        if let Some(h) = hcp {
            view.created_at = h.created_at;
            view.since = transition_of(&h.conditions, "Available");
            view.conditions = h.conditions.clone();
        }
        view.identity = self.identity();
        Some(Emitted {
            cluster_id,
            hop: Hop::ControlPlane,
            object: String::new(),
            view,
        })
    }

    fn managed_cluster_view(&self, name: &str) -> Option<Emitted> {
        let f = self.managed_clusters.get(name)?;
        let cluster_id = match self.cfg.mode {
            // Named by the id; the hub's own registration is not a creation.
            KubeMode::Aro => f.label_id.clone().or_else(|| {
                (name != self.cfg.manifestwork_namespace && name != "local-cluster")
                    .then(|| name.to_string())
            }),
            KubeMode::SelfManaged => self
                .hosted_clusters_by_name
                .get(name)
                .into_iter()
                .flatten()
                .find_map(|k| self.hosted_cluster_id(k, self.hosted_clusters.get(k)?)),
        }?;
        let conds = &f.conditions;
        let phase = phase_map::managed_cluster(conds, f.deleting);
        let is_true = |k: &str| phase_map::status_of(conds, k) == ConditionStatus::True;
        let state = match phase {
            Phase::Deleting => "deleting",
            Phase::Failed => "HubDenied",
            Phase::Ready => "Available",
            _ if is_true("ManagedClusterJoined") => "Joined",
            _ if is_true("HubAcceptedManagedCluster") => "Accepted",
            _ => "NotAccepted",
        };
        let mut view = HopView::new(state, phase);
        view.created_at = f.created_at;
        view.since = latest_transition(conds, MANAGED_CLUSTER_CONDITIONS);
        view.conditions = conds.clone();
        view.identity = self.identity();
        if phase == Phase::Failed {
            view.error = phase_map::find(conds, "HubDeniedManagedCluster").map(error_from);
        }
        Some(Emitted {
            cluster_id,
            hop: Hop::ManagedCluster,
            object: String::new(),
            view,
        })
    }
}

/// A HostedCluster's control-plane namespace (`<namespace>-<name>`, both modes).
pub fn control_plane_namespace(hosted_cluster: &ObjRef) -> String {
    format!("{}-{}", hosted_cluster.namespace, hosted_cluster.name)
}
