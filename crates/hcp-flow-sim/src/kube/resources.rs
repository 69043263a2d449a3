//! The kinds the simulated API server serves, and the discovery documents
//! a client reads to find them.

use std::collections::BTreeSet;

use serde_json::{Value, json};

/// A kind the server serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResourceDef {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
}

impl ResourceDef {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

pub const RESOURCES: &[ResourceDef] = &[
    ResourceDef {
        group: "work.open-cluster-management.io",
        version: "v1",
        kind: "ManifestWork",
        plural: "manifestworks",
        namespaced: true,
    },
    ResourceDef {
        group: "hypershift.openshift.io",
        version: "v1beta1",
        kind: "HostedCluster",
        plural: "hostedclusters",
        namespaced: true,
    },
    ResourceDef {
        group: "hypershift.openshift.io",
        version: "v1beta1",
        kind: "NodePool",
        plural: "nodepools",
        namespaced: true,
    },
    ResourceDef {
        group: "hypershift.openshift.io",
        version: "v1beta1",
        kind: "HostedControlPlane",
        plural: "hostedcontrolplanes",
        namespaced: true,
    },
    ResourceDef {
        group: "cluster.open-cluster-management.io",
        version: "v1",
        kind: "ManagedCluster",
        plural: "managedclusters",
        namespaced: false,
    },
    ResourceDef {
        group: "",
        version: "v1",
        kind: "Pod",
        plural: "pods",
        namespaced: true,
    },
    ResourceDef {
        group: "multicluster.openshift.io",
        version: "v1",
        kind: "MultiClusterEngine",
        plural: "multiclusterengines",
        namespaced: false,
    },
    ResourceDef {
        group: "agent-install.openshift.io",
        version: "v1beta1",
        kind: "Agent",
        plural: "agents",
        namespaced: true,
    },
];

pub(super) fn resource_by_kind(kind: &str) -> Option<usize> {
    RESOURCES.iter().position(|r| r.kind == kind)
}

pub(super) fn find_resource(group: &str, version: &str, plural: &str) -> Option<usize> {
    RESOURCES
        .iter()
        .position(|r| r.group == group && r.version == version && r.plural == plural)
}

/// `absent`: indexes into [`RESOURCES`] whose CRD is not installed.
pub(super) fn discovery(group_version: &str, absent: &BTreeSet<usize>) -> Option<Value> {
    let resources: Vec<Value> = RESOURCES
        .iter()
        .enumerate()
        .filter(|(i, r)| r.api_version() == group_version && !absent.contains(i))
        .map(|(_, r)| r)
        .map(|r| {
            json!({
                "name": r.plural,
                "singularName": r.kind.to_ascii_lowercase(),
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "list", "watch"],
            })
        })
        .collect();
    (!resources.is_empty()).then(|| {
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources})
    })
}

pub(super) fn groups(absent: &BTreeSet<usize>) -> Value {
    let mut seen: Vec<(&str, &str)> = Vec::new();
    let served = RESOURCES
        .iter()
        .enumerate()
        .filter(|(i, r)| !r.group.is_empty() && !absent.contains(i))
        .map(|(_, r)| r);
    for r in served {
        if !seen.contains(&(r.group, r.version)) {
            seen.push((r.group, r.version));
        }
    }
    let groups: Vec<Value> = seen
        .iter()
        .map(|(g, v)| {
            let gv = json!({"groupVersion": format!("{g}/{v}"), "version": v});
            json!({"name": g, "versions": [gv.clone()], "preferredVersion": gv})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}
