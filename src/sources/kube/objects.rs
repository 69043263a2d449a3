//! Partial typed views of the watched kinds: only the fields the exporter
//! reads. Unknown fields are ignored by serde, so a pod's spec or a
//! HostedCluster's 500 KB of schema never reach memory beyond the decode.
//! Each type implements `Resource` statically, so no discovery is needed.
//! Statuses are the types of `crate::views`, shared with the Maestro
//! feedback path: one reading per kind.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::core::Resource;
use serde::Deserialize;

use crate::config::kube::WatchKind;
use crate::views::WireCondition;
use crate::views::control_plane::HostedControlPlaneStatus;
use crate::views::hosted_cluster::HostedClusterStatus;
use crate::views::managed_cluster::ManagedClusterStatus;
use crate::views::node_pool::NodePoolStatus;
use crate::views::work::WorkStatus;

/// `Resource` from the kind's entry in the table of watched kinds. The
/// scope is a type, so it is written here; the table's test checks the two
/// agree.
macro_rules! partial_resource {
    ($ty:ident, $scope:ty, $kind:ident) => {
        impl Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(WatchKind::$kind.spec().api_kind)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(WatchKind::$kind.spec().group)
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(WatchKind::$kind.spec().version)
            }
            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(WatchKind::$kind.spec().plural)
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

#[derive(Clone, Debug, Deserialize)]
pub struct ManifestWork {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: Option<WorkStatus>,
}
partial_resource!(ManifestWork, NamespaceResourceScope, ManifestWork);

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

#[derive(Clone, Debug, Deserialize)]
pub struct HostedCluster {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: HostedClusterSpec,
    #[serde(default)]
    pub status: Option<HostedClusterStatus>,
}
partial_resource!(HostedCluster, NamespaceResourceScope, HostedCluster);

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

#[derive(Clone, Debug, Deserialize)]
pub struct NodePool {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: NodePoolSpec,
    #[serde(default)]
    pub status: Option<NodePoolStatus>,
}
partial_resource!(NodePool, NamespaceResourceScope, NodePool);

#[derive(Clone, Debug, Deserialize)]
pub struct HostedControlPlane {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: Option<HostedControlPlaneStatus>,
}
partial_resource!(
    HostedControlPlane,
    NamespaceResourceScope,
    HostedControlPlane
);

#[derive(Clone, Debug, Deserialize)]
pub struct ManagedCluster {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: Option<ManagedClusterStatus>,
}
partial_resource!(ManagedCluster, ClusterResourceScope, ManagedCluster);

/// Pod status with only what decides readiness.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PodStatus {
    #[serde(default)]
    pub phase: Option<String>,
    #[serde(default, deserialize_with = "crate::views::null_default")]
    pub conditions: Vec<WireCondition>,
}

/// A pod without its spec: metadata and readiness only.
#[derive(Clone, Debug, Deserialize)]
pub struct ControlPlanePod {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: Option<PodStatus>,
}
partial_resource!(ControlPlanePod, NamespaceResourceScope, ControlPlanePod);

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
partial_resource!(MultiClusterEngine, ClusterResourceScope, MultiClusterEngine);

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
partial_resource!(Agent, NamespaceResourceScope, Agent);
