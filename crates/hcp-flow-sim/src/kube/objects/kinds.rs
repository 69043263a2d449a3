//! One object of each kind a management cluster (or a self-managed hub)
//! holds for a cluster at a point in time: the HostedCluster, its control
//! plane, the ManagedCluster, the NodePools, the Agents and the hub's
//! MultiClusterEngine, as the reference CRDs shape them.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::*;

/// The MultiClusterEngine of a self-managed hub (one per hub, cluster-scoped,
/// as the reference sample names it), Available since `since`.
pub fn multicluster_engine(since: Timestamp) -> Value {
    json!({
        "apiVersion": "multicluster.openshift.io/v1",
        "kind": "MultiClusterEngine",
        "metadata": metadata("multiclusterengine", None, &json!({}), since),
        "spec": {"availabilityConfig": "High", "targetNamespace": "multicluster-engine"},
        "status": {
            "phase": "Available",
            "currentVersion": "2.8.0",
            "desiredVersion": "2.8.0",
            "conditions": [{
                "type": "Available",
                "status": "True",
                "reason": "ComponentsAvailable",
                "message": "All components are available",
                "lastTransitionTime": since.to_string(),
                "lastUpdateTime": since.to_string(),
            }],
        },
    })
}

/// The Agents an Agent-platform cluster's inventory holds, in the
/// control-plane namespace where its InfraEnv lives. Approved and free
/// until the control plane is ready; then bound to the cluster (the
/// `clusterDeploymentName` HyperShift's agent provider sets: the
/// control-plane namespace and the HostedCluster's name) pool by pool, and
/// `Done` once their pool's nodes are ready.
pub(super) fn agents(
    spec: &KubeClusterSpec,
    x: &KubeExtras,
    start: Timestamp,
    now: Timestamp,
) -> Vec<Value> {
    let ns = x.control_plane_namespace(spec);
    let bound_at = reached(spec.control_plane_ready_at, now);
    // Which pool each Agent serves: pools in order, as many as they want,
    // then a pool added later.
    let n = spec.node_pools.len();
    let added = x.added_pool.as_ref();
    let mut serves = spec
        .node_pools
        .iter()
        .enumerate()
        .flat_map(|(i, (_, desired, _))| std::iter::repeat_n(i, *desired as usize))
        .chain(
            added
                .into_iter()
                .flat_map(|a| std::iter::repeat_n(n, a.replicas as usize)),
        );
    let pool_name = |i: usize| match spec.node_pools.get(i) {
        Some((name, _, _)) => Some(name.as_str()),
        None => added.map(|a| a.pool.as_str()),
    };
    (0..spec.hub.agents)
        .map(|k| {
            // A removed pool's Agents are free again once it is gone.
            let pool = serves
                .next()
                .filter(|i| !pool_name(*i).is_some_and(|p| x.pool_gone(p, now)));
            let (bound, done) = match (pool, added) {
                (Some(i), Some(a)) if i == n => (reached(Some(a.created), now), reached(a.ready, now)),
                _ => (
                    bound_at.filter(|_| pool.is_some()),
                    pool.and_then(|i| {
                        reached(spec.node_pools.get(i).and_then(|p| p.2), now)
                            .filter(|_| spec.pool_ready_nodes(i, now) > 0)
                    }),
                ),
            };
            let name = format!("{}-agent-{k}", spec.name);
            let (stage, state, installed) = match (bound, done) {
                (_, Some(at)) => ("Done", "added-to-existing-cluster", Some(at)),
                (Some(_), None) => ("Writing image to disk", "installing-in-progress", None),
                (None, _) => ("", "known-unbound", None),
            };
            let since = bound.unwrap_or(start);
            let mut conditions = vec![
                condition("SpecSynced", true, "SyncOK", "The Spec has been successfully applied", start),
                condition("Connected", true, "AgentIsConnected", "The agent's connection to the installation service is unimpaired", start),
                condition("RequirementsMet", true, "AgentIsReady", "The agent is ready to begin the installation", start),
                condition("Validated", true, "ValidationsPassing", "The agent's validations are passing", start),
            ];
            conditions.push(match installed {
                Some(at) => condition("Installed", true, "InstallationCompleted", "The installation has completed: Done", at),
                None => condition("Installed", false, "InstallationNotStarted", "The installation has not yet started", since),
            });
            conditions.push(match bound {
                Some(at) => condition("Bound", true, "Bound", "The agent is bound to a cluster deployment", at),
                None => condition("Bound", false, "Unbound", "The agent is not bound to any cluster deployment", start),
            });
            let mut agent_spec = json!({"approved": true, "role": "worker", "hostname": name});
            if bound.is_some() {
                agent_spec["clusterDeploymentName"] =
                    json!({"name": x.hosted_cluster_name(spec), "namespace": ns});
            }
            let mut status = json!({
                "conditions": conditions,
                "debugInfo": {"state": state},
                "role": "worker",
                "progress": {},
            });
            if !stage.is_empty() {
                status["progress"] = json!({"currentStage": stage});
            }
            json!({
                "apiVersion": "agent-install.openshift.io/v1beta1",
                "kind": "Agent",
                "metadata": metadata(&name, Some(&ns), &json!({"agent-install.openshift.io/clusterdeployment-namespace": ns}), start),
                "spec": agent_spec,
                "status": status,
            })
        })
        .collect()
}

pub(super) fn hosted_cluster(
    spec: &KubeClusterSpec,
    x: &KubeExtras,
    labels: &Value,
    start: Timestamp,
    now: Timestamp,
) -> Value {
    let platform = spec.platform();
    let invalid_at = reached(spec.faults.release_image_invalid_at, now);
    let available = reached(spec.hosted_cluster_available_at, now)
        .filter(|_| !spec.faults.hosted_cluster_degraded)
        .filter(|_| spec.faults.release_image_invalid_at.is_none());
    let (available, lost_since) = match (available, spec.faults.hosted_cluster_lost) {
        (Some(_), Some((lost, back))) if lost <= now && now < back => (None, Some(lost)),
        (Some(_), Some((_, back))) if back <= now => (Some(back), None),
        (available, _) => (available, None),
    };
    let degraded_at = start
        .checked_add(spec.faults.degraded_after.unwrap_or(DEGRADED_AFTER))
        .ok()
        .filter(|t| spec.faults.hosted_cluster_degraded && *t <= now);
    let mut annotations = json!({});
    let (conditions, history) = match (available, degraded_at) {
        // Lost after it was Available: the rollout stays Completed.
        (None, _) if lost_since.is_some() => {
            let lost = lost_since.unwrap_or(start);
            annotations["hypershift.openshift.io/HasBeenAvailable"] = json!("true");
            let completed = spec.hosted_cluster_available_at.unwrap_or(start);
            (
                vec![
                    condition(
                        "Available",
                        false,
                        "ComponentsNotAvailable",
                        "kube-apiserver deployment has 0 available replicas",
                        lost,
                    ),
                    condition(
                        "Progressing",
                        false,
                        "AsExpected",
                        "HostedCluster is at expected version",
                        completed,
                    ),
                    condition("Degraded", false, "AsExpected", "All is well", start),
                    valid_configuration(start),
                    valid_release_image(start),
                ],
                version_history("Completed", start, Some(completed)),
            )
        }
        (Some(at), _) => {
            annotations["hypershift.openshift.io/HasBeenAvailable"] = json!("true");
            (
                vec![
                    condition(
                        "Available",
                        true,
                        "AsExpected",
                        "The hosted control plane is available",
                        at,
                    ),
                    condition(
                        "Progressing",
                        false,
                        "AsExpected",
                        "HostedCluster is at expected version",
                        at,
                    ),
                    condition("Degraded", false, "AsExpected", "All is well", start),
                    valid_configuration(start),
                    valid_release_image(start),
                ],
                version_history("Completed", start, Some(at)),
            )
        }
        (None, degraded) => (
            vec![
                condition(
                    "Available",
                    false,
                    "WaitingForAvailable",
                    "Waiting for hosted control plane to be healthy",
                    start,
                ),
                condition(
                    "Progressing",
                    true,
                    "WaitingForAvailable",
                    "HostedCluster is deploying",
                    start,
                ),
                match degraded {
                    Some(at) => condition(
                        "Degraded",
                        true,
                        "ComponentsNotAvailable",
                        "kube-apiserver deployment has 0 available replicas",
                        at,
                    ),
                    None => condition("Degraded", false, "AsExpected", "All is well", start),
                },
                valid_configuration(start),
                match invalid_at {
                    // HyperShift's reason for a release image it cannot read.
                    Some(at) => condition(
                        "ValidReleaseImage",
                        false,
                        "InvalidImage",
                        "failed to lookup release image: unauthorized: access to the requested resource is not authorized",
                        at,
                    ),
                    None => valid_release_image(start),
                },
            ],
            version_history("Partial", start, None),
        ),
    };
    let ns = spec.hosted_cluster_namespace();
    let mut meta = metadata(x.hosted_cluster_name(spec), Some(&ns), labels, start);
    meta["annotations"] = annotations;
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1",
        "kind": "HostedCluster",
        "metadata": meta,
        "spec": hosted_cluster_spec(spec, x, platform),
        "status": {
            "conditions": conditions,
            "version": {"desired": {"version": SIM_VERSION}, "history": history, "observedGeneration": 1},
        },
    })
}

/// The HostedCluster's `.spec`: its id (left out where the user did not set
/// it), platform and release.
pub(super) fn hosted_cluster_spec(spec: &KubeClusterSpec, x: &KubeExtras, platform: &str) -> Value {
    let platform_spec = match platform {
        "KubeVirt" => json!({"type": platform, "kubevirt": {"baseDomainPassthrough": true}}),
        "Agent" => {
            json!({"type": platform, "agent": {"agentNamespace": x.control_plane_namespace(spec)}})
        }
        _ => json!({"type": platform}),
    };
    let mut out = json!({
        "platform": platform_spec,
        "release": {"image": SIM_RELEASE_IMAGE},
    });
    if !spec.hub.no_cluster_id {
        out["clusterID"] = json!(spec.cluster_id);
    }
    out
}

pub(super) fn control_plane(
    spec: &KubeClusterSpec,
    x: &KubeExtras,
    start: Timestamp,
    now: Timestamp,
) -> Vec<Value> {
    let ns = x.control_plane_namespace(spec);
    let ready_at = reached(spec.control_plane_ready_at, now);
    let mut out = vec![json!({
        "apiVersion": "hypershift.openshift.io/v1beta1",
        "kind": "HostedControlPlane",
        "metadata": metadata(x.hosted_cluster_name(spec), Some(&ns), &json!({}), start),
        "spec": {},
        "status": {
            "ready": ready_at.is_some(),
            "initialized": true,
            "conditions": [match ready_at {
                Some(at) => condition("Available", true, "AsExpected", "", at),
                None => condition("Available", false, "WaitingForAvailable", "", start),
            }],
        },
    })];
    for (i, pod) in POD_NAMES.iter().enumerate() {
        // Before the control plane is ready only etcd is up.
        let ready = ready_at.is_some() || i == 0;
        let at = ready_at.unwrap_or(start);
        out.push(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata(pod, Some(&ns), &json!({CONTROL_PLANE_POD_LABEL: ns}), start),
            "spec": {"containers": [{"name": pod.trim_end_matches("-0"), "image": "registry.example/sim"}]},
            "status": {
                "phase": "Running",
                "conditions": [
                    {"type": "Ready", "status": if ready { "True" } else { "False" }, "lastTransitionTime": at.to_string()},
                    {"type": "ContainersReady", "status": if ready { "True" } else { "False" }, "lastTransitionTime": at.to_string()},
                ],
            },
        }));
    }
    out
}

pub(super) fn managed_cluster(spec: &KubeClusterSpec, start: Timestamp, now: Timestamp) -> Value {
    let joined = reached(spec.managed_cluster_joined_at, now)
        .filter(|_| !spec.faults.managed_cluster_never_joins);
    let mut conditions = vec![condition(
        "HubAcceptedManagedCluster",
        true,
        "HubClusterAdminAccepted",
        "Accepted by hub cluster admin",
        start,
    )];
    match joined {
        Some(at) => conditions.extend([
            condition(
                "ManagedClusterJoined",
                true,
                "ManagedClusterJoined",
                "Managed cluster joined",
                at,
            ),
            condition(
                "ManagedClusterConditionAvailable",
                true,
                "ManagedClusterAvailable",
                "Managed cluster is available",
                at,
            ),
            condition(
                "ManagedClusterImportSucceeded",
                true,
                "ManagedClusterImported",
                "Import succeeded",
                at,
            ),
        ]),
        None => conditions.push(condition(
            "ManagedClusterImportSucceeded",
            false,
            "ManagedClusterWaitForImporting",
            "Wait for importing",
            start,
        )),
    }
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": metadata(&spec.managed_cluster_name(), None, &json!({}), start),
        "spec": {"hubAcceptsClient": true},
        "status": {"conditions": conditions},
    })
}

#[allow(clippy::too_many_arguments)]
pub(super) fn node_pool(
    spec: &KubeClusterSpec,
    x: &KubeExtras,
    labels: &Value,
    index: usize,
    pool: &str,
    desired: u32,
    start: Timestamp,
    now: Timestamp,
) -> Value {
    let ready_at = spec.node_pools.get(index).and_then(|p| p.2);
    let ready = reached(ready_at, now).filter(|_| spec.pool_ready_nodes(index, now) == desired);
    let invalid_at = reached(spec.faults.release_image_invalid_at, now);
    let pending = spec
        .faults
        .machines_pending
        .filter(|(_, pools)| index < *pools)
        .map(|(why, _)| why);
    let valid_image = match invalid_at {
        // The pool shares the HostedCluster's release.
        Some(at) => condition(
            "ValidReleaseImage",
            false,
            "ValidationFailed",
            "Failed to get release image: unauthorized: access to the requested resource is not authorized",
            at,
        ),
        None => condition("ValidReleaseImage", true, "AsExpected", "", start),
    };
    let (replicas, conditions) = match (ready, pending) {
        (Some(at), _) => (
            desired,
            vec![
                condition("Ready", true, "AsExpected", "", at),
                condition("AllMachinesReady", true, "AsExpected", "All is well", at),
                condition("AllNodesHealthy", true, "AsExpected", "All is well", at),
                valid_image,
            ],
        ),
        // HyperShift's NodePool bubbles up the MachineDeployment's Ready
        // and aggregates each Machine's infrastructure reason.
        (None, Some(why)) => {
            let (reason, message) = why.reason();
            let machines: String = (0..desired)
                .map(|m| {
                    format!(
                        "Machine {}-{m}: {reason}: {message}\n",
                        x.node_pool_name(spec, pool)
                    )
                })
                .collect();
            (
                0,
                vec![
                    condition(
                        "Ready",
                        false,
                        "WaitingForAvailableMachines",
                        &format!(
                            "Minimum availability requires {desired} replicas, current 0 available"
                        ),
                        start,
                    ),
                    condition(
                        "AllMachinesReady",
                        false,
                        reason,
                        &format!("{desired} of {desired} machines are not ready\n{machines}"),
                        start,
                    ),
                    condition("AllNodesHealthy", false, "WaitingForNodeRef", "", start),
                    valid_image,
                ],
            )
        }
        (None, None) => (
            0,
            vec![
                condition(
                    "Ready",
                    false,
                    "WaitingForNodes",
                    "Waiting for nodes to become ready",
                    start,
                ),
                condition(
                    "AllMachinesReady",
                    false,
                    "WaitingForNodes",
                    "0 of desired machines are ready",
                    start,
                ),
                condition("AllNodesHealthy", false, "WaitingForNodes", "", start),
                valid_image,
            ],
        ),
    };
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1",
        "kind": "NodePool",
        "metadata": metadata(&x.node_pool_name(spec, pool), Some(&spec.hosted_cluster_namespace()), labels, start),
        "spec": {
            "clusterName": x.hosted_cluster_name(spec),
            "replicas": desired,
            "management": {"upgradeType": "Replace"},
            "platform": {"type": spec.platform()},
            "release": {"image": SIM_RELEASE_IMAGE},
        },
        "status": {
            "replicas": replicas,
            "conditions": conditions,
            "nodesInfo": {"nodeVersions": [{"ocpVersion": SIM_VERSION, "readyNodeCount": replicas, "unreadyNodeCount": desired - replicas}]},
        },
    })
}
