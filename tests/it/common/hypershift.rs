//! What the stand-in tests serve of HyperShift's own fixture
//! (`hypershift/examples/zz_fixture_TestCreateCluster_azure_minimal_render`
//! in the reference), cut to what a reader needs: the specs of its
//! HostedCluster and NodePool. Each test writes the metadata and status its
//! case needs around them.

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
