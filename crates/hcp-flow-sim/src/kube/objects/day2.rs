//! What a simulated world adds to a management cluster's objects after
//! the creation (docs/design/11-simulated-world.md §11.10): the HostedCluster's upgrade, a pool
//! added, removed or upgraded. `objects.rs` (its parent) draws the creation and calls
//! these to lay day 2 over it.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::*;

/// What a simulated world adds to a [`KubeClusterSpec`] beyond what the
/// fixtures draw (the default adds nothing): ARO's internal HostedCluster
/// name, which names its control plane and NodePools as in ARO HCP. Its
/// times are the instants the changes happen; the objects show them in
/// whole seconds ([`KubeExtras::as_served`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeExtras {
    /// ARO: the HostedCluster's internal name (not the ARM/CS name): the
    /// HostedCluster, its HostedControlPlane and control-plane namespace
    /// and its NodePools (`<it>-<pool>`) are named after it, as the Maestro
    /// bundles carry them. Unset: `spec.name`.
    pub hosted_cluster_name: Option<String>,
    /// The release the cluster was created with (unset: [`SIM_VERSION`]).
    pub version: Option<String>,
    /// The control plane's upgrade after the creation.
    pub upgrade: Option<KubeUpgrade>,
    /// A pool added after the creation (with a ManifestWork of its own on
    /// ARO).
    pub added_pool: Option<KubeAddedPool>,
    /// A pool removed after the creation.
    pub removal: Option<KubePoolRemoval>,
    /// Pools upgraded after the control plane.
    pub pool_upgrades: Vec<KubePoolUpgrade>,
}

/// The control plane's upgrade: `status.version.desired` names `to` from
/// `requested`; the new history entry starts at `started` and is
/// `Completed` at `completed` (`None`: stays `Partial`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeUpgrade {
    pub to: String,
    pub requested: Timestamp,
    pub started: Timestamp,
    pub completed: Option<Timestamp>,
}

/// A pool added after the creation: its NodePool exists from `created`;
/// `ReachedIgnitionEndpoint`, `AllMachinesReady`, `AllNodesHealthy` and
/// `Ready` turn True at their times (`None`: never).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeAddedPool {
    pub pool: String,
    pub replicas: u32,
    pub created: Timestamp,
    pub ignition: Option<Timestamp>,
    pub machines: Option<Timestamp>,
    pub nodes: Option<Timestamp>,
    pub ready: Option<Timestamp>,
    /// Self-managed: why its machines never come.
    pub pending: Option<MachinesPending>,
}

/// A pool removed after the creation: its NodePool carries its
/// deletionTimestamp from `deleting` and is gone at `gone`; on ARO its
/// ManifestWork is deleted first and goes after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubePoolRemoval {
    pub pool: String,
    pub deleting: Timestamp,
    pub gone: Timestamp,
    pub work_deleting: Option<Timestamp>,
    pub work_gone: Option<Timestamp>,
}

/// A pool's upgrade: `spec.release.image` names `to` and `UpdatingVersion`
/// is True from `started`; at `done` (`None`: never) `status.version` is
/// `to` and the condition is removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubePoolUpgrade {
    pub pool: String,
    pub to: String,
    pub started: Timestamp,
    pub done: Option<Timestamp>,
}

/// A release's image, as the simulated objects name it.
pub(super) fn release_image(version: &str) -> String {
    format!("release.example.com/ocp-release:{version}-multi")
}

/// `at` in whole seconds, as Kubernetes serialises its times.
fn whole_seconds(at: Timestamp) -> Timestamp {
    Timestamp::from_second(at.as_second()).unwrap_or(at)
}

impl KubeExtras {
    /// These times as the objects show them at `now` (docs/design/11-simulated-world.md
    /// §11.10): each change happens at its own instant, and an instant
    /// reached is shown in whole seconds, as Kubernetes serialises times;
    /// one still ahead is kept as it is, so nothing is reached before its
    /// instant. Dating a change by its whole second instead showed it up
    /// to a second before the world (its ground truth and the Maestro
    /// view) made it.
    pub fn as_served(&self, now: Timestamp) -> KubeExtras {
        let at = |t: Timestamp| if t <= now { whole_seconds(t) } else { t };
        let opt = |t: Option<Timestamp>| t.map(at);
        KubeExtras {
            hosted_cluster_name: self.hosted_cluster_name.clone(),
            version: self.version.clone(),
            upgrade: self.upgrade.as_ref().map(|u| KubeUpgrade {
                to: u.to.clone(),
                requested: at(u.requested),
                started: at(u.started),
                completed: opt(u.completed),
            }),
            added_pool: self.added_pool.as_ref().map(|a| KubeAddedPool {
                pool: a.pool.clone(),
                replicas: a.replicas,
                created: at(a.created),
                ignition: opt(a.ignition),
                machines: opt(a.machines),
                nodes: opt(a.nodes),
                ready: opt(a.ready),
                pending: a.pending,
            }),
            removal: self.removal.as_ref().map(|r| KubePoolRemoval {
                pool: r.pool.clone(),
                deleting: at(r.deleting),
                gone: at(r.gone),
                work_deleting: opt(r.work_deleting),
                work_gone: opt(r.work_gone),
            }),
            pool_upgrades: self
                .pool_upgrades
                .iter()
                .map(|u| KubePoolUpgrade {
                    pool: u.pool.clone(),
                    to: u.to.clone(),
                    started: at(u.started),
                    done: opt(u.done),
                })
                .collect(),
        }
    }

    /// The release the cluster was created with.
    pub fn base_version(&self) -> &str {
        self.version.as_deref().unwrap_or(SIM_VERSION)
    }

    /// Pool `pool`'s removal, when it has one.
    pub fn removal_of(&self, pool: &str) -> Option<&KubePoolRemoval> {
        self.removal.as_ref().filter(|r| r.pool == pool)
    }

    /// Whether pool `pool`'s NodePool is gone by `now` (removed).
    pub fn pool_gone(&self, pool: &str, now: Timestamp) -> bool {
        self.removal_of(pool).is_some_and(|r| r.gone <= now)
    }

    /// The added pool, once its NodePool exists and until it is gone.
    pub fn added_at(&self, now: Timestamp) -> Option<&KubeAddedPool> {
        self.added_pool
            .as_ref()
            .filter(|a| a.created <= now && !self.pool_gone(&a.pool, now))
    }

    /// The HostedCluster's `metadata.name` (and its NodePools' `spec.clusterName`).
    pub fn hosted_cluster_name<'a>(&'a self, spec: &'a KubeClusterSpec) -> &'a str {
        self.hosted_cluster_name.as_deref().unwrap_or(&spec.name)
    }

    /// The control-plane namespace, `<namespace>-<HostedCluster name>`.
    pub fn control_plane_namespace(&self, spec: &KubeClusterSpec) -> String {
        format!(
            "{}-{}",
            spec.hosted_cluster_namespace(),
            self.hosted_cluster_name(spec)
        )
    }

    /// A pool's NodePool name, `<HostedCluster name>-<pool>`.
    pub fn node_pool_name(&self, spec: &KubeClusterSpec, pool: &str) -> String {
        format!("{}-{}", self.hosted_cluster_name(spec), pool)
    }
}

/// The HostedCluster's release and its upgrade: `desired` names the
/// target from the request, `history` gains the upgrade's entry at index 0
/// (`Partial` until `completionTime`), and `Progressing` is True meanwhile
/// (it stays Available).
pub(super) fn day2_hosted_cluster(hc: &mut Value, x: &KubeExtras, now: Timestamp) {
    let base = x.base_version().to_string();
    let upgrade = x.upgrade.as_ref().filter(|u| u.requested <= now);
    let desired = upgrade.map_or(base.clone(), |u| u.to.clone());
    hc["spec"]["release"]["image"] = json!(release_image(&desired));
    let version = &mut hc["status"]["version"];
    version["desired"] = json!({"version": desired, "image": release_image(&desired)});
    if let Some(history) = version["history"].as_array_mut() {
        for h in history.iter_mut() {
            h["version"] = json!(base);
            h["image"] = json!(release_image(&base));
        }
        if let Some(u) = upgrade.filter(|u| u.started <= now) {
            let completed = reached(u.completed, now);
            history.insert(
                0,
                json!({
                    "state": if completed.is_some() { "Completed" } else { "Partial" },
                    "version": u.to,
                    "image": release_image(&u.to),
                    "startedTime": u.started.to_string(),
                    "completionTime": completed.map(|t| t.to_string()),
                    "verified": true,
                }),
            );
        }
    }
    let Some(u) = upgrade else {
        return;
    };
    let available = hc["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Available" && c["status"] == "True")
    });
    if !available {
        return;
    }
    let progressing = match reached(u.completed, now) {
        Some(at) => condition(
            "Progressing",
            false,
            "AsExpected",
            "HostedCluster is at expected version",
            at,
        ),
        None => condition(
            "Progressing",
            true,
            "Progressing",
            "HostedCluster is deploying, upgrading, or reconfiguring",
            u.requested,
        ),
    };
    if let Some(c) = hc["status"]["conditions"]
        .as_array_mut()
        .and_then(|cs| cs.iter_mut().find(|c| c["type"] == "Progressing"))
    {
        *c = progressing;
    }
}

/// A NodePool's release, upgrade and removal: `spec.release.image` names
/// what it should run, `status.version` what it runs once Ready (empty
/// before its first rollout), `UpdatingVersion` True while an upgrade is in
/// flight (removed when done, as current HyperShift does), and a
/// deletionTimestamp once it is being removed.
pub(super) fn day2_node_pool(np: &mut Value, x: &KubeExtras, pool: &str, now: Timestamp) {
    let base = x.base_version().to_string();
    let upgrade = x
        .pool_upgrades
        .iter()
        .find(|u| u.pool == pool && u.started <= now);
    let done = upgrade.and_then(|u| reached(u.done, now));
    let target = upgrade.map_or(base.clone(), |u| u.to.clone());
    let current = if done.is_some() { target.clone() } else { base };
    np["spec"]["release"]["image"] = json!(release_image(&target));
    let ready = np["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    });
    if ready {
        np["status"]["version"] = json!(current);
    }
    if let Some(versions) = np["status"]["nodesInfo"]["nodeVersions"].as_array_mut() {
        for v in versions {
            v["ocpVersion"] = json!(current);
        }
    }
    if let Some(u) = upgrade.filter(|_| done.is_none())
        && let Some(conditions) = np["status"]["conditions"].as_array_mut()
    {
        conditions.push(condition(
            "UpdatingVersion",
            true,
            "AsExpected",
            &format!("Updating version in progress. Target version: {}", u.to),
            u.started,
        ));
    }
    if let Some(r) = x.removal_of(pool).filter(|r| r.deleting <= now) {
        np["metadata"]["deletionTimestamp"] = json!(r.deleting.to_string());
        np["metadata"]["finalizers"] = json!(["hypershift.openshift.io/finalizer"]);
    }
}

/// A pool added after the creation, with its own times: ignition reached,
/// machines ready, nodes healthy, then Ready, each dated; or its machines
/// pending (self-managed) or never ignited.
pub(super) fn added_node_pool(
    spec: &KubeClusterSpec,
    x: &KubeExtras,
    labels: &Value,
    a: &KubeAddedPool,
    now: Timestamp,
) -> Value {
    let start = a.created;
    let desired = a.replicas;
    let name = x.node_pool_name(spec, &a.pool);
    let at = |t: Option<Timestamp>| reached(t, now);
    let (machines, nodes, ready) = (at(a.machines), at(a.nodes), at(a.ready));
    let current = if machines.is_some() { desired } else { 0 };
    let ready_nodes = if nodes.is_some() { desired } else { 0 };
    let ignition = match at(a.ignition) {
        Some(t) => condition("ReachedIgnitionEndpoint", true, "AsExpected", "", t),
        None => condition(
            "ReachedIgnitionEndpoint",
            false,
            "ignitionNotReached",
            "Machines have not reached the ignition endpoint",
            start,
        ),
    };
    let all_machines = match (machines, a.pending) {
        (Some(t), _) => condition("AllMachinesReady", true, "AsExpected", "All is well", t),
        (None, Some(why)) => {
            let (reason, message) = why.reason();
            let each: String = (0..desired)
                .map(|m| format!("Machine {name}-{m}: {reason}: {message}\n"))
                .collect();
            condition(
                "AllMachinesReady",
                false,
                reason,
                &format!("{desired} of {desired} machines are not ready\n{each}"),
                start,
            )
        }
        (None, None) => condition(
            "AllMachinesReady",
            false,
            "WaitingForNodes",
            "0 of desired machines are ready",
            start,
        ),
    };
    let nodes_healthy = match nodes {
        Some(t) => condition("AllNodesHealthy", true, "AsExpected", "All is well", t),
        None => condition("AllNodesHealthy", false, "WaitingForNodeRef", "", start),
    };
    let ready_cond = match ready {
        Some(t) => condition("Ready", true, "AsExpected", "", t),
        None => condition(
            "Ready",
            false,
            "WaitingForAvailableMachines",
            &format!(
                "Minimum availability requires {desired} replicas, current {ready_nodes} available"
            ),
            start,
        ),
    };
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1",
        "kind": "NodePool",
        "metadata": metadata(&name, Some(&spec.hosted_cluster_namespace()), labels, start),
        "spec": {
            "clusterName": x.hosted_cluster_name(spec),
            "replicas": desired,
            "management": {"upgradeType": "Replace"},
            "platform": {"type": spec.platform()},
            "release": {"image": release_image(x.base_version())},
        },
        "status": {
            "replicas": current,
            "conditions": [
                ready_cond,
                all_machines,
                nodes_healthy,
                ignition,
                condition("ValidReleaseImage", true, "AsExpected", "", start),
            ],
            "nodesInfo": {"nodeVersions": [{"ocpVersion": x.base_version(), "readyNodeCount": ready_nodes, "unreadyNodeCount": desired - ready_nodes}]},
        },
    })
}
