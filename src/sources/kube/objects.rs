//! Partial typed views of the watched kinds: only the fields the exporter
//! reads. Unknown fields are ignored by serde, so a pod's spec or a
//! HostedCluster's 500 KB of schema never reach memory beyond the decode.
//! Each type implements `Resource` statically, so no discovery is needed.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::core::Resource;
use serde::Deserialize;

/// A standard condition (metav1.Condition, or the ManagedCluster/Agent
/// variants, which share these fields). Times stay strings here and are
/// parsed leniently later: one odd timestamp must not reject the object.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct KubeCondition {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub last_transition_time: Option<String>,
}

macro_rules! partial_resource {
    ($ty:ident, $scope:ty, $group:literal, $version:literal, $kind:literal, $plural:literal) => {
        impl Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($group)
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($version)
            }
            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

/// Conditions-only status, shared by ManifestWork and ManagedCluster.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionsStatus {
    #[serde(default)]
    pub conditions: Vec<KubeCondition>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct ManifestWork {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: Option<ConditionsStatus>,
}
partial_resource!(
    ManifestWork,
    NamespaceResourceScope,
    "work.open-cluster-management.io",
    "v1",
    "ManifestWork",
    "manifestworks"
);

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostedClusterSpec {
    #[serde(default, rename = "clusterID")]
    pub cluster_id: Option<String>,
    #[serde(default)]
    pub platform: Option<PlatformSpec>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct PlatformSpec {
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionHistoryEntry {
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub completion_time: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct VersionStatus {
    #[serde(default)]
    pub history: Vec<VersionHistoryEntry>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct HostedClusterStatus {
    #[serde(default)]
    pub conditions: Vec<KubeCondition>,
    #[serde(default)]
    pub version: Option<VersionStatus>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct HostedCluster {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: HostedClusterSpec,
    #[serde(default)]
    pub status: Option<HostedClusterStatus>,
}
partial_resource!(
    HostedCluster,
    NamespaceResourceScope,
    "hypershift.openshift.io",
    "v1beta1",
    "HostedCluster",
    "hostedclusters"
);

#[derive(Clone, Debug, Default, Deserialize)]
pub struct AutoScaling {
    #[serde(default)]
    pub min: Option<i64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolSpec {
    #[serde(default)]
    pub cluster_name: String,
    #[serde(default)]
    pub replicas: Option<i64>,
    #[serde(default)]
    pub auto_scaling: Option<AutoScaling>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeVersion {
    #[serde(default)]
    pub ready_node_count: Option<i64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodesInfo {
    #[serde(default)]
    pub node_versions: Vec<NodeVersion>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    #[serde(default)]
    pub replicas: Option<i64>,
    #[serde(default)]
    pub conditions: Vec<KubeCondition>,
    #[serde(default)]
    pub nodes_info: Option<NodesInfo>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct NodePool {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: NodePoolSpec,
    #[serde(default)]
    pub status: Option<NodePoolStatus>,
}
partial_resource!(
    NodePool,
    NamespaceResourceScope,
    "hypershift.openshift.io",
    "v1beta1",
    "NodePool",
    "nodepools"
);

#[derive(Clone, Debug, Default, Deserialize)]
pub struct HostedControlPlaneStatus {
    #[serde(default)]
    pub ready: bool,
    #[serde(default)]
    pub conditions: Vec<KubeCondition>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct HostedControlPlane {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: Option<HostedControlPlaneStatus>,
}
partial_resource!(
    HostedControlPlane,
    NamespaceResourceScope,
    "hypershift.openshift.io",
    "v1beta1",
    "HostedControlPlane",
    "hostedcontrolplanes"
);

#[derive(Clone, Debug, Deserialize)]
pub struct ManagedCluster {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: Option<ConditionsStatus>,
}
partial_resource!(
    ManagedCluster,
    ClusterResourceScope,
    "cluster.open-cluster-management.io",
    "v1",
    "ManagedCluster",
    "managedclusters"
);

/// Pod status with only what decides readiness.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PodStatus {
    #[serde(default)]
    pub phase: Option<String>,
    #[serde(default)]
    pub conditions: Vec<KubeCondition>,
}

/// A pod without its spec: metadata and readiness only.
#[derive(Clone, Debug, Deserialize)]
pub struct ControlPlanePod {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: Option<PodStatus>,
}
partial_resource!(
    ControlPlanePod,
    NamespaceResourceScope,
    "",
    "v1",
    "Pod",
    "pods"
);

#[derive(Clone, Debug, Default, Deserialize)]
pub struct MultiClusterEngineStatus {
    #[serde(default)]
    pub phase: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct MultiClusterEngine {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: Option<MultiClusterEngineStatus>,
}
partial_resource!(
    MultiClusterEngine,
    ClusterResourceScope,
    "multicluster.openshift.io",
    "v1",
    "MultiClusterEngine",
    "multiclusterengines"
);

#[derive(Clone, Debug, Default, Deserialize)]
pub struct ClusterReference {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSpec {
    #[serde(default)]
    pub approved: bool,
    #[serde(default)]
    pub cluster_deployment_name: Option<ClusterReference>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentProgress {
    #[serde(default)]
    pub current_stage: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct AgentStatus {
    #[serde(default)]
    pub progress: Option<AgentProgress>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Agent {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: AgentSpec,
    #[serde(default)]
    pub status: Option<AgentStatus>,
}
partial_resource!(
    Agent,
    NamespaceResourceScope,
    "agent-install.openshift.io",
    "v1beta1",
    "Agent",
    "agents"
);
