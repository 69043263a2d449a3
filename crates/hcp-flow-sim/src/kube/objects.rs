//! Management-side objects of one simulated creation at a point in time,
//! shaped like the CRDs in the reference (status conditions carry
//! `lastTransitionTime`). The fleet plan decides the times; this only draws
//! the objects a management cluster would hold at `now`.

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

mod day2;
mod kinds;

pub use day2::{KubeAddedPool, KubeExtras, KubePoolRemoval, KubePoolUpgrade, KubeUpgrade};
use day2::{added_node_pool, day2_hosted_cluster, day2_node_pool};
pub use kinds::multicluster_engine;
use kinds::{agents, control_plane, hosted_cluster, managed_cluster, node_pool};

/// How a world lays a cluster's objects out on its Kubernetes API server, as
/// each product does (docs/design/11-simulated-world.md §11.7). The world's own
/// words for it, not the exporter's `ClusterLayout`: the world writes each layout
/// from the products' conventions, and the exporter's reading of it is what
/// the tests check, so the two never share the code that decides it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterLayout {
    /// ARO HCP: labels `api.openshift.com/id` and `/name`, namespaces
    /// `ocm-<env>-<id>`, a ManifestWork per object, the ManagedCluster named
    /// by the id.
    Aro,
    /// A self-managed MCE hub: HostedClusters in namespaces of their own,
    /// the ManagedCluster named like the HostedCluster, no ManifestWork.
    SelfManaged,
}

/// Release every simulated cluster runs.
pub const SIM_VERSION: &str = "4.20.0";
/// The release image the simulated objects name (a made-up host: the project
/// names no real registry).
pub const SIM_RELEASE_IMAGE: &str = "release.example.com/ocp-release:4.20.0-multi";
/// Label every control-plane pod carries (the watcher's pod selector).
pub const CONTROL_PLANE_POD_LABEL: &str = "hypershift.openshift.io/hosted-control-plane";
/// Namespace of self-managed HostedClusters.
pub const SELF_MANAGED_NAMESPACE: &str = "clusters";
/// How long after its start a `hosted_cluster_degraded` cluster turns Degraded.
pub const DEGRADED_AFTER: SignedDuration = SignedDuration::from_secs(60);

const POD_NAMES: [&str; 4] = [
    "etcd-0",
    "kube-apiserver-0",
    "openshift-apiserver-0",
    "cluster-version-operator-0",
];

/// Why the machines of a self-managed NodePool stay pending, as the
/// infrastructure provider reports it on each CAPI Machine (HyperShift's
/// NodePool bubbles the reason up into `AllMachinesReady`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MachinesPending {
    /// KubeVirt: the worker VMs cannot be scheduled on the management
    /// cluster (cluster-api-provider-kubevirt's `Unschedulable`).
    KubeVirtUnschedulable,
    /// Agent: no free Agent matches the pool (cluster-api-provider-agent's
    /// `NoSuitableAgents`).
    NoSuitableAgents,
}

impl MachinesPending {
    /// The Machine reason and message HyperShift aggregates.
    pub(super) fn reason(self) -> (&'static str, &'static str) {
        match self {
            MachinesPending::KubeVirtUnschedulable => (
                "Unschedulable",
                "0/6 nodes are available: 6 Insufficient memory. preemption: 0/6 nodes are available: 6 No preemption victims found for incoming pod.",
            ),
            MachinesPending::NoSuitableAgents => ("NoSuitableAgents", ""),
        }
    }
}

/// What only a self-managed MCE hub shows of a cluster (docs/design/11-simulated-world.md
/// §11.7); the default is what the fixtures have always drawn.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HubClusterSpec {
    /// The HostedCluster's namespace (unset: [`SELF_MANAGED_NAMESPACE`]).
    pub namespace: Option<String>,
    /// `spec.platform.type` as HyperShift spells it (unset: `Agent`).
    pub platform: Option<String>,
    /// Leave `spec.clusterID` out: the exporter then names the cluster
    /// `<namespace>/<name>`, which `cluster_id` must be.
    pub no_cluster_id: bool,
    /// Agent platform: how many Agents the inventory holds for the cluster;
    /// they are bound to the pools in order once the control plane is
    /// ready, and a pool without enough stays pending.
    pub agents: u32,
    /// The user deleted the HostedCluster: every object of it carries a
    /// deletionTimestamp from then on.
    pub deleting_at: Option<Timestamp>,
}

/// ARO: the deletion as a management cluster sees it (docs/design/11-simulated-world.md
/// §11.9). The work agent marks the ManifestWork deleting, deletes the
/// HostedCluster, whose finalizer holds it (and its pools, control plane and
/// ManagedCluster) while HyperShift destroys the cloud resources; then they
/// go, and the ManifestWork after them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeDeletion {
    /// The ManifestWorks' deletionTimestamp.
    pub work_deleting_at: Option<Timestamp>,
    /// Every object below the ManifestWork gets its deletionTimestamp.
    pub objects_deleting_at: Option<Timestamp>,
    /// HyperShift has deleted the node pools, the control plane and the
    /// ManagedCluster: only the HostedCluster is left, held by its
    /// finalizer until `objects_gone_at`.
    pub dependents_gone_at: Option<Timestamp>,
    /// ... and is gone from here on (the ManifestWorks stay until the spec
    /// is no longer drawn).
    pub objects_gone_at: Option<Timestamp>,
    /// The HostedCluster reports `CloudResourcesDestroyed` False while
    /// deleting: its finalizer will not clear.
    pub cloud_resources_stuck: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeClusterFaults {
    /// The ManifestWork never gets a status: nothing reaches the management cluster.
    pub manifestwork_never_applied: bool,
    /// The HostedCluster turns Degraded and never Available.
    pub hosted_cluster_degraded: bool,
    /// The ManagedCluster is accepted but never joins.
    pub managed_cluster_never_joins: bool,
    /// Every NodePool stays at 0 nodes, never Ready.
    pub node_pool_stuck_at_zero: bool,
    /// ARO: the first pool's ManifestWork never gets a status, so that
    /// NodePool never exists on the management cluster.
    pub node_pool_work_never_applied: bool,
    /// After it was Available, the HostedCluster's Available is False from
    /// `.0` until `.1` (a lost control plane that recovers).
    pub hosted_cluster_lost: Option<(Timestamp, Timestamp)>,
    /// With `hosted_cluster_degraded`: how long after the management side
    /// starts the HostedCluster turns Degraded (unset: [`DEGRADED_AFTER`]).
    pub degraded_after: Option<SignedDuration>,
    /// Self-managed: the release image cannot be read; from this instant
    /// the HostedCluster's and every NodePool's `ValidReleaseImage` is False
    /// and nothing becomes ready.
    pub release_image_invalid_at: Option<Timestamp>,
    /// Self-managed: the machines of the first `.1` pools never get their
    /// infrastructure, so those pools stay at 0 ready nodes.
    pub machines_pending: Option<(MachinesPending, usize)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct KubeClusterSpec {
    pub cluster_id: String,
    pub name: String,
    /// The `<env>` of `ocm-<env>-<id>` (ARO mode).
    pub env: String,
    pub mode: ClusterLayout,
    pub created_at: Timestamp,
    pub manifestwork_applied_at: Option<Timestamp>,
    pub hosted_cluster_available_at: Option<Timestamp>,
    pub control_plane_ready_at: Option<Timestamp>,
    pub managed_cluster_joined_at: Option<Timestamp>,
    /// (pool name, desired replicas, when all its nodes are ready).
    pub node_pools: Vec<(String, u32, Option<Timestamp>)>,
    pub faults: KubeClusterFaults,
    /// Self-managed hubs only.
    pub hub: HubClusterSpec,
    /// ARO: the deletion, once requested.
    pub deletion: KubeDeletion,
}

impl KubeClusterSpec {
    /// A creation that goes right, starting at `created_at`: ManifestWork
    /// applied after 1 minute, control plane ready after 6, HostedCluster
    /// Available after 8, ManagedCluster joined after 10 and one `workers`
    /// pool of 2 nodes ready after 14; environment `prod`. The fixture
    /// builder for tests, changed by struct update.
    pub fn healthy(
        cluster_id: &str,
        mode: ClusterLayout,
        created_at: Timestamp,
    ) -> KubeClusterSpec {
        let after = |minutes: i64| Some(created_at + SignedDuration::from_mins(minutes));
        KubeClusterSpec {
            cluster_id: cluster_id.to_string(),
            name: format!("name-{cluster_id}"),
            env: "prod".to_string(),
            mode,
            created_at,
            manifestwork_applied_at: after(1),
            hosted_cluster_available_at: after(8),
            control_plane_ready_at: after(6),
            managed_cluster_joined_at: after(10),
            node_pools: vec![("workers".to_string(), 2, after(14))],
            faults: KubeClusterFaults::default(),
            hub: HubClusterSpec::default(),
            deletion: KubeDeletion::default(),
        }
    }

    pub fn hosted_cluster_namespace(&self) -> String {
        match self.mode {
            ClusterLayout::Aro => format!("ocm-{}-{}", self.env, self.cluster_id),
            ClusterLayout::SelfManaged => self
                .hub
                .namespace
                .clone()
                .unwrap_or_else(|| SELF_MANAGED_NAMESPACE.to_string()),
        }
    }

    /// `spec.platform.type` of the HostedCluster and its NodePools.
    pub fn platform(&self) -> &str {
        match self.mode {
            ClusterLayout::Aro => "Azure",
            ClusterLayout::SelfManaged => self.hub.platform.as_deref().unwrap_or("Agent"),
        }
    }

    /// The HostedCluster was deleted by `now` (self-managed churn, or an
    /// ARO deletion that reached the management cluster).
    pub fn deleting(&self, now: Timestamp) -> bool {
        self.objects_deleting_at().is_some_and(|t| t <= now)
    }

    /// When the HostedCluster and what hangs off it got their
    /// deletionTimestamp.
    pub fn objects_deleting_at(&self) -> Option<Timestamp> {
        self.hub.deleting_at.or(self.deletion.objects_deleting_at)
    }

    /// How many nodes of pool `i` are ready at `now`, and why the others
    /// are not: a fault, or not yet.
    pub fn pool_ready_nodes(&self, i: usize, now: Timestamp) -> u32 {
        let Some((_, desired, ready_at)) = self.node_pools.get(i) else {
            return 0;
        };
        let pending = self
            .faults
            .machines_pending
            .is_some_and(|(_, pools)| i < pools);
        let invalid = self
            .faults
            .release_image_invalid_at
            .is_some_and(|t| t <= now);
        if pending || invalid || self.faults.node_pool_stuck_at_zero {
            return 0;
        }
        if reached(*ready_at, now).is_some() {
            *desired
        } else {
            0
        }
    }

    pub fn control_plane_namespace(&self) -> String {
        format!("{}-{}", self.hosted_cluster_namespace(), self.name)
    }

    pub fn managed_cluster_name(&self) -> String {
        match self.mode {
            ClusterLayout::Aro => self.cluster_id.clone(),
            ClusterLayout::SelfManaged => self.name.clone(),
        }
    }

    /// Name of a pool's NodePool object (unique in a shared namespace).
    pub fn node_pool_object_name(&self, pool: &str) -> String {
        format!("{}-{}", self.name, pool)
    }

    /// ARO: name of the ManifestWork carrying the HostedCluster (`<id>`),
    /// or a pool's NodePool (`<id>-<pool>`): ARO HCP places each in a work
    /// of its own (docs/design/11-simulated-world.md §11.1), named alike on the Maestro side.
    pub fn manifestwork_name(&self, pool: Option<&str>) -> String {
        match pool {
            None => self.cluster_id.clone(),
            Some(pool) => format!("{}-{}", self.cluster_id, pool),
        }
    }

    /// When the management side starts: the ManifestWork applied (ARO), or
    /// the HostedCluster created (self-managed).
    fn started_at(&self) -> Option<Timestamp> {
        match self.mode {
            ClusterLayout::Aro if self.faults.manifestwork_never_applied => None,
            ClusterLayout::Aro => self.manifestwork_applied_at,
            ClusterLayout::SelfManaged => Some(self.created_at),
        }
    }

    fn aro_labels(&self) -> Value {
        match self.mode {
            ClusterLayout::Aro => json!({
                "api.openshift.com/id": self.cluster_id,
                "api.openshift.com/name": self.name,
                "api.openshift.com/environment": self.env,
            }),
            ClusterLayout::SelfManaged => json!({}),
        }
    }
}

pub(super) fn reached(at: Option<Timestamp>, now: Timestamp) -> Option<Timestamp> {
    at.filter(|t| *t <= now)
}

/// `.status.version.history`: one entry, `Partial` until `completed`.
pub(super) fn version_history(
    state: &str,
    start: Timestamp,
    completed: Option<Timestamp>,
) -> Value {
    json!([{
        "state": state,
        "version": SIM_VERSION,
        "image": SIM_RELEASE_IMAGE,
        "startedTime": start.to_string(),
        "completionTime": completed.map(|t| t.to_string()),
        "verified": true,
    }])
}

pub(super) fn valid_configuration(since: Timestamp) -> Value {
    condition(
        "ValidConfiguration",
        true,
        "AsExpected",
        "Configuration passes validation",
        since,
    )
}

pub(super) fn valid_release_image(since: Timestamp) -> Value {
    condition(
        "ValidReleaseImage",
        true,
        "AsExpected",
        "Release image is valid",
        since,
    )
}

pub(super) fn condition(
    kind: &str,
    status: bool,
    reason: &str,
    message: &str,
    at: Timestamp,
) -> Value {
    json!({
        "type": kind,
        "status": if status { "True" } else { "False" },
        "reason": reason,
        "message": message,
        "lastTransitionTime": at.to_string(),
        "observedGeneration": 1,
    })
}

pub(super) fn metadata(
    name: &str,
    namespace: Option<&str>,
    labels: &Value,
    created: Timestamp,
) -> Value {
    let mut meta =
        json!({"name": name, "labels": labels, "creationTimestamp": created.to_string()});
    if let Some(ns) = namespace {
        meta["namespace"] = json!(ns);
    }
    meta
}

/// The objects of `spec` that exist at `now`, with their status at `now`.
pub fn objects_at(spec: &KubeClusterSpec, now: Timestamp) -> Vec<Value> {
    objects_with(spec, &KubeExtras::default(), now)
}

/// [`objects_at`] with what a world adds to the spec.
pub fn objects_with(spec: &KubeClusterSpec, x: &KubeExtras, now: Timestamp) -> Vec<Value> {
    let mut out = Vec::new();
    if now < spec.created_at {
        return out;
    }
    // Each day-2 change from its instant on, dated in whole seconds
    // (docs/design/11-simulated-world.md §11.10).
    let x = &x.as_served(now);
    let labels = spec.aro_labels();
    if spec.mode == ClusterLayout::Aro {
        let applied = reached(spec.started_at(), now);
        let added = x.added_pool.as_ref().filter(|a| a.created <= now);
        let works = std::iter::once(None)
            .chain(spec.node_pools.iter().map(|(p, _, _)| Some(p)))
            .chain(added.map(|a| Some(&a.pool)));
        for (i, pool) in works.enumerate() {
            let stuck = i == 1 && spec.faults.node_pool_work_never_applied;
            let removal = pool.and_then(|p| x.removal_of(p));
            if removal.is_some_and(|r| reached(r.work_gone, now).is_some()) {
                continue;
            }
            let (created, applied) = match added.filter(|a| Some(&a.pool) == pool) {
                Some(a) => (a.created, Some(a.created)),
                None => (spec.created_at, applied),
            };
            let status = match applied.filter(|_| !stuck) {
                Some(at) => json!({"conditions": [
                    condition("Applied", true, "AppliedManifestWorkComplete", "Apply manifest work complete", at),
                    condition("Available", true, "ResourcesAvailable", "All resources are available", at),
                ]}),
                None => json!({}),
            };
            let name = spec.manifestwork_name(pool.map(String::as_str));
            let mut metadata = metadata(&name, Some("local-cluster"), &labels, created);
            let deleting = [
                spec.deletion.work_deleting_at,
                removal.and_then(|r| r.work_deleting),
            ]
            .into_iter()
            .flatten()
            .filter(|t| *t <= now)
            .min();
            if let Some(at) = deleting {
                metadata["deletionTimestamp"] = json!(at.to_string());
                metadata["finalizers"] =
                    json!(["cluster.open-cluster-management.io/manifest-work-cleanup"]);
            }
            out.push(json!({
                "apiVersion": "work.open-cluster-management.io/v1",
                "kind": "ManifestWork",
                "metadata": metadata,
                "spec": {"workload": {"manifests": []}},
                "status": status,
            }));
        }
    }
    let Some(start) = reached(spec.started_at(), now) else {
        return out;
    };
    if reached(spec.deletion.objects_gone_at, now).is_some() {
        return out;
    }
    let mut objects = vec![hosted_cluster(spec, x, &labels, start, now)];
    if reached(spec.deletion.dependents_gone_at, now).is_none() {
        objects.extend(control_plane(spec, x, start, now));
        objects.push(managed_cluster(spec, start, now));
        // The first pool's NodePool never arrives when its work is not applied.
        let skip = usize::from(
            spec.mode == ClusterLayout::Aro && spec.faults.node_pool_work_never_applied,
        );
        for (i, (pool, desired, _)) in spec.node_pools.iter().enumerate().skip(skip) {
            if x.pool_gone(pool, now) {
                continue;
            }
            let mut obj = node_pool(spec, x, &labels, i, pool, *desired, start, now);
            day2_node_pool(&mut obj, x, pool, now);
            objects.push(obj);
        }
        if let Some(a) = x.added_at(now) {
            let mut obj = added_node_pool(spec, x, &labels, a, now);
            day2_node_pool(&mut obj, x, &a.pool, now);
            objects.push(obj);
        }
    }
    if let Some(hc) = objects.first_mut() {
        day2_hosted_cluster(hc, x, now);
    }
    // A deleted HostedCluster takes its objects with it: each carries a
    // deletionTimestamp (held by its finalizer) until it is gone.
    if let Some(at) = spec.objects_deleting_at().filter(|t| *t <= now) {
        for obj in objects.iter_mut().filter(|o| o["kind"] != "Pod") {
            // A pool removed before keeps its own (it never changes).
            if obj["metadata"]["deletionTimestamp"].is_null() {
                obj["metadata"]["deletionTimestamp"] = json!(at.to_string());
            }
            obj["metadata"]["finalizers"] = json!(["hypershift.openshift.io/finalizer"]);
            // HyperShift's word on why the finalizer holds.
            if spec.deletion.cloud_resources_stuck && obj["kind"] == "HostedCluster" {
                let stuck = condition(
                    "CloudResourcesDestroyed",
                    false,
                    "CloudResourcesDeletionTimedOut",
                    "Timed out waiting for cloud resources to be destroyed",
                    at,
                );
                if let Some(conditions) = obj["status"]["conditions"].as_array_mut() {
                    conditions.push(stuck);
                }
            }
        }
    }
    out.extend(objects);
    if spec.mode == ClusterLayout::SelfManaged && spec.platform() == "Agent" {
        out.extend(agents(spec, x, start, now));
    }
    out
}
