//! What the stand-in tests serve of HyperShift's own fixture
//! (`hypershift/examples/zz_fixture_TestCreateCluster_azure_minimal_render`
//! in the reference), cut to what a reader needs: the specs of its
//! HostedCluster and NodePool. Each test writes the metadata and status its
//! case needs around them.

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

/// The fixture HostedCluster's `spec`, for cluster `id`.
pub fn hosted_cluster_spec(id: &str) -> Value {
    json!({
        "clusterID": id,
        "infraID": "fakeInfraID",
        "platform": {"type": "Azure", "azure": {"location": "fakeLocation", "resourceGroup": "fakeResourceGroupName"}},
        "release": {"image": ""},
        "pullSecret": {"name": "example-pull-secret"},
        "networking": {"networkType": "OVNKubernetes"},
    })
}

/// The fixture NodePool's `spec`, of the HostedCluster named `cluster`.
pub fn node_pool_spec(cluster: &str) -> Value {
    json!({"clusterName": cluster, "replicas": 2, "management": {"upgradeType": "Replace"}, "platform": {"type": "Azure"}, "release": {"image": ""}})
}

/// `t` to the second, as Kubernetes writes times.
pub fn at(t: Timestamp) -> String {
    second(t).to_string()
}

/// `t` rounded to the second.
pub fn second(t: Timestamp) -> Timestamp {
    t.round(jiff::Unit::Second).unwrap_or(t)
}

/// A version history entry as the cluster version operator writes it.
pub fn entry(
    state: &str,
    version: &str,
    started: Timestamp,
    completed: Option<Timestamp>,
) -> Value {
    json!({
        "state": state,
        "version": version,
        "image": format!("quay.io/openshift-release-dev/ocp-release:{version}-x86_64"),
        "verified": false,
        "startedTime": at(started),
        "completionTime": completed.map(at),
    })
}

/// HostedCluster `example` in `namespace` of cluster `id`, created at
/// `created`, Available, asking for `desired`, its version `history`
/// newest first.
pub fn hosted_cluster(
    id: &str,
    namespace: &str,
    created: Timestamp,
    desired: &str,
    history: Vec<Value>,
) -> Value {
    let mut spec = hosted_cluster_spec(id);
    spec["release"]["image"] = json!(format!(
        "quay.io/openshift-release-dev/ocp-release:{desired}-x86_64"
    ));
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1",
        "kind": "HostedCluster",
        "metadata": {"name": "example", "namespace": namespace, "uid": "uid-example", "creationTimestamp": at(created)},
        "spec": spec,
        "status": {
            "conditions": [{"type": "Available", "status": "True", "reason": "AsExpected", "message": "The hosted control plane is available", "lastTransitionTime": at(created + SignedDuration::from_mins(10)), "observedGeneration": 2}],
            "version": {
                "desired": {"version": desired, "image": format!("quay.io/openshift-release-dev/ocp-release:{desired}-x86_64")},
                "history": history,
                "observedGeneration": 2,
            },
        },
    })
}

/// The fixture's NodePool, two replicas ready since `ready`, running
/// `version`, updating to `updating_to` from `since` when given.
pub fn node_pool(
    namespace: &str,
    created: Timestamp,
    ready: Timestamp,
    version: &str,
    updating_to: Option<(&str, Timestamp)>,
) -> Value {
    let mut conditions = vec![
        json!({"type": "Ready", "status": "True", "reason": "AsExpected", "message": "", "lastTransitionTime": at(ready), "observedGeneration": 1}),
    ];
    if let Some((target, since)) = updating_to {
        conditions.push(json!({
            "type": "UpdatingVersion",
            "status": "True",
            "reason": "AsExpected",
            "message": format!("Updating version in progress. Target version: {target}"),
            "lastTransitionTime": at(since),
            "observedGeneration": 2,
        }));
    }
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1",
        "kind": "NodePool",
        "metadata": {"name": "np1", "namespace": namespace, "uid": "uid-np1", "creationTimestamp": at(created)},
        "spec": node_pool_spec("example"),
        "status": {
            "replicas": 2,
            "version": version,
            "nodesInfo": {"nodeVersions": [{"ocpVersion": version, "readyNodeCount": 2, "unreadyNodeCount": 0}]},
            "conditions": conditions,
        },
    })
}
