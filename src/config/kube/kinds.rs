//! The watched kinds, each declared once (docs/design/09-reading-the-upstreams.md §9.6): its API
//! coordinates, scope, whether a cluster may lack it, the selectors it is
//! always watched with, the hop it shows and where one creation's objects
//! of it are found. The enum, `ALL`, `as_str`, the RBAC rules, the default
//! kinds of each mode, the hops a watcher set can report and `diagnose`'s
//! narrowing all read this table; the watch itself adds one mapping to a
//! partial type (`sources::kube::kinds`) and that type (`sources::kube::objects`).
//!
//! It lives with the configuration because `WatchKind` is a configuration
//! value (`sources.kube[].watch`) and `config` never imports a source module.

use serde::{Deserialize, Serialize};

use super::{KubeMode, KubeSourceConfig};
use crate::model::Hop;

/// Namespaced or cluster-scoped, as the API server serves the resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceScope {
    Namespaced,
    Cluster,
}

/// Which modes watch a kind when `sources.kube[].watch` is unset. ARO
/// management clusters have ManifestWorks but no MCE/Agent CRDs worth
/// watching; self-managed hubs have no ARO ManifestWorks, and their MCE and
/// Agents are what the SRE owns. Watching a kind whose CRD is absent would
/// keep the source down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultIn {
    Every,
    Aro,
    SelfManaged,
}

impl DefaultIn {
    pub fn includes(self, mode: KubeMode) -> bool {
        match self {
            DefaultIn::Every => true,
            DefaultIn::Aro => mode == KubeMode::Aro,
            DefaultIn::SelfManaged => mode == KubeMode::SelfManaged,
        }
    }
}

/// A setting of the watcher set a kind's own selector comes from.
pub type Setting = fn(&KubeSourceConfig) -> &str;

/// What a kind is always narrowed by, before any `diagnose` scope is ANDed
/// with it.
#[derive(Clone, Copy, Debug)]
pub struct OwnSelectors {
    /// A label selector; an empty setting selects nothing extra.
    pub labels: Option<Setting>,
    /// The namespace watched; unset or empty: all namespaces.
    pub namespace: Option<Setting>,
}

impl OwnSelectors {
    pub const NONE: OwnSelectors = OwnSelectors {
        labels: None,
        namespace: None,
    };

    pub fn labels(&self, cfg: &KubeSourceConfig) -> Option<String> {
        self.labels.map(|setting| setting(cfg).to_string())
    }

    pub fn namespace(&self, cfg: &KubeSourceConfig) -> Option<String> {
        self.namespace
            .map(|setting| setting(cfg))
            .filter(|ns| !ns.is_empty())
            .map(str::to_string)
    }
}

/// Where one creation's objects of a kind are found, which is how
/// `diagnose` narrows its watch to them (docs/design/12-interfaces.md §12.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Locate {
    /// The HostedCluster itself: by the cluster-id label (ARO), else by its
    /// namespace and name; the one kind looked for before the management
    /// cluster is known.
    HostedCluster,
    /// By the cluster-id label (ARO); self-managed hubs have none.
    IdLabel,
    /// By the cluster-id label (ARO), else in the HostedCluster's namespace.
    IdLabelOrHostedClusterNamespace,
    /// Cluster-scoped and named like the cluster: its id (ARO), else the
    /// HostedCluster's name.
    ClusterNamed,
    /// In the control plane's namespace, `<namespace>-<name>` of its
    /// HostedCluster.
    ControlPlaneNamespace,
    /// Feeds fleet-wide metrics, not a creation's timeline: a walk leaves
    /// it out.
    FleetWide,
}

/// One watched kind.
#[derive(Clone, Copy, Debug)]
pub struct KindSpec {
    pub kind: WatchKind,
    /// `as_str`: metrics labels and log fields.
    pub name: &'static str,
    /// API group; `""` is the core group.
    pub group: &'static str,
    pub version: &'static str,
    /// The API's `kind`.
    pub api_kind: &'static str,
    pub plural: &'static str,
    pub scope: ResourceScope,
    /// A cluster may lack it without anything being wrong: absent or
    /// forbidden, it is disabled rather than holding the source down
    /// (docs/design/09-reading-the-upstreams.md §9.7).
    pub optional: bool,
    pub default_in: DefaultIn,
    pub selectors: OwnSelectors,
    /// The hop its objects show; None: fleet-wide metrics only.
    pub hop: Option<Hop>,
    pub locate: Locate,
}

macro_rules! watch_kinds {
    ($($variant:ident { $($field:ident: $value:expr),+ $(,)? })+) => {
        /// The kinds a watcher set can watch. Declaration order is the
        /// order kinds sort in.
        #[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[serde(rename_all = "snake_case")]
        pub enum WatchKind {
            $($variant),+
        }

        /// Every kind, in declaration order: `KINDS[k as usize].kind == k`.
        pub const KINDS: &[KindSpec] = &[
            $(KindSpec { kind: WatchKind::$variant, $($field: $value),+ }),+
        ];

        impl WatchKind {
            pub const ALL: [WatchKind; KINDS.len()] = [$(WatchKind::$variant),+];
        }
    };
}

watch_kinds! {
    ManifestWork {
        name: "manifestwork",
        group: "work.open-cluster-management.io",
        version: "v1",
        api_kind: "ManifestWork",
        plural: "manifestworks",
        scope: ResourceScope::Namespaced,
        optional: false,
        default_in: DefaultIn::Aro,
        selectors: OwnSelectors {
            labels: Some(|cfg| cfg.manifestwork_label.as_str()),
            namespace: Some(|cfg| cfg.manifestwork_namespace.as_str()),
        },
        hop: Some(Hop::Manifestwork),
        locate: Locate::IdLabel,
    }
    HostedCluster {
        name: "hostedcluster",
        group: "hypershift.openshift.io",
        version: "v1beta1",
        api_kind: "HostedCluster",
        plural: "hostedclusters",
        scope: ResourceScope::Namespaced,
        optional: false,
        default_in: DefaultIn::Every,
        selectors: OwnSelectors::NONE,
        hop: Some(Hop::HostedCluster),
        locate: Locate::HostedCluster,
    }
    NodePool {
        name: "nodepool",
        group: "hypershift.openshift.io",
        version: "v1beta1",
        api_kind: "NodePool",
        plural: "nodepools",
        scope: ResourceScope::Namespaced,
        optional: false,
        default_in: DefaultIn::Every,
        selectors: OwnSelectors::NONE,
        hop: Some(Hop::NodePool),
        locate: Locate::IdLabelOrHostedClusterNamespace,
    }
    // Optional: only where control planes are hosted.
    HostedControlPlane {
        name: "hostedcontrolplane",
        group: "hypershift.openshift.io",
        version: "v1beta1",
        api_kind: "HostedControlPlane",
        plural: "hostedcontrolplanes",
        scope: ResourceScope::Namespaced,
        optional: true,
        default_in: DefaultIn::Every,
        selectors: OwnSelectors::NONE,
        hop: Some(Hop::ControlPlane),
        locate: Locate::ControlPlaneNamespace,
    }
    ManagedCluster {
        name: "managedcluster",
        group: "cluster.open-cluster-management.io",
        version: "v1",
        api_kind: "ManagedCluster",
        plural: "managedclusters",
        scope: ResourceScope::Cluster,
        optional: false,
        default_in: DefaultIn::Every,
        selectors: OwnSelectors::NONE,
        hop: Some(Hop::ManagedCluster),
        locate: Locate::ClusterNamed,
    }
    ControlPlanePod {
        name: "pod",
        group: "",
        version: "v1",
        api_kind: "Pod",
        plural: "pods",
        scope: ResourceScope::Namespaced,
        optional: false,
        default_in: DefaultIn::Every,
        // Only control-plane pods, by label: the cluster's other pods are
        // never listed, let alone cached.
        selectors: OwnSelectors {
            labels: Some(|cfg| cfg.control_plane_pod_label.as_str()),
            namespace: None,
        },
        hop: Some(Hop::ControlPlane),
        locate: Locate::ControlPlaneNamespace,
    }
    // Optional: its CRD exists only where MCE is installed.
    MultiClusterEngine {
        name: "multiclusterengine",
        group: "multicluster.openshift.io",
        version: "v1",
        api_kind: "MultiClusterEngine",
        plural: "multiclusterengines",
        scope: ResourceScope::Cluster,
        optional: true,
        default_in: DefaultIn::SelfManaged,
        selectors: OwnSelectors::NONE,
        hop: None,
        locate: Locate::FleetWide,
    }
    // Optional: its CRD exists only where the assisted installer is.
    Agent {
        name: "agent",
        group: "agent-install.openshift.io",
        version: "v1beta1",
        api_kind: "Agent",
        plural: "agents",
        scope: ResourceScope::Namespaced,
        optional: true,
        default_in: DefaultIn::SelfManaged,
        selectors: OwnSelectors::NONE,
        hop: None,
        locate: Locate::FleetWide,
    }
}

// The table is indexed by the enum: a reordered entry fails the build.
const _: () = {
    let mut i = 0;
    while i < KINDS.len() {
        assert!(
            KINDS[i].kind as usize == i,
            "KINDS is out of declaration order"
        );
        i += 1;
    }
};

impl WatchKind {
    pub const fn spec(self) -> &'static KindSpec {
        &KINDS[self as usize]
    }

    pub fn as_str(self) -> &'static str {
        self.spec().name
    }

    /// See [`KindSpec::optional`].
    pub fn optional(self) -> bool {
        self.spec().optional
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Config files and metrics labels use these names: they never change.
    #[test]
    fn names_are_the_ones_files_and_labels_use() {
        let names: Vec<(String, &str)> = WatchKind::ALL
            .iter()
            .map(|k| {
                let serde = serde_json::to_value(k)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                (serde, k.as_str())
            })
            .collect();
        let expected = [
            ("manifest_work", "manifestwork"),
            ("hosted_cluster", "hostedcluster"),
            ("node_pool", "nodepool"),
            ("hosted_control_plane", "hostedcontrolplane"),
            ("managed_cluster", "managedcluster"),
            ("control_plane_pod", "pod"),
            ("multi_cluster_engine", "multiclusterengine"),
            ("agent", "agent"),
        ];
        let expected: Vec<(String, &str)> =
            expected.iter().map(|(s, n)| (s.to_string(), *n)).collect();
        assert_eq!(names, expected);
    }
}
