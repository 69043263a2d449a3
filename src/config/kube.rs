//! Settings of one management (or MCE hub) cluster's watcher set: the
//! entries of `sources.kube`, each its own source `kube/<mgmt_cluster>`.
//! They live with the rest of the configuration, so `config` never imports
//! a source module.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub mod kinds;
pub use kinds::WatchKind;

/// How HostedClusters map to cluster ids (docs/design/04-identities-and-joins.md §4.2, §4.3).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum KubeMode {
    /// ARO HCP: ids come from label `api.openshift.com/id`, namespaces are
    /// `ocm-<env>-<id>` / `ocm-<env>-<id>-<name>`, ManagedClusters are named by the id.
    #[default]
    Aro,
    /// Self-managed MCE: `spec.clusterID`, else `<namespace>/<name>`;
    /// ManagedCluster named like the HostedCluster; control plane ns `<ns>-<name>`.
    #[value(name = "self_managed", alias = "self-managed")]
    SelfManaged,
}

impl KubeMode {
    pub fn as_str(self) -> &'static str {
        match self {
            KubeMode::Aro => "aro",
            KubeMode::SelfManaged => "self_managed",
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KubeSourceConfig {
    /// The `mgmt_cluster` label value; the source is `kube/<mgmt_cluster>`.
    /// Left out in a config file, the context's name is used.
    #[serde(default)]
    pub mgmt_cluster: String,
    /// Kubeconfig file; unset with `in_cluster` false: the usual inference
    /// (`KUBECONFIG`, `~/.kube/config`, then in-cluster).
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// Context in the kubeconfig; unset: its current context.
    #[serde(default)]
    pub context: Option<String>,
    /// Use the pod's service account.
    #[serde(default)]
    pub in_cluster: bool,
    #[serde(default)]
    pub mode: KubeMode,
    /// The `<env>` of `ocm-<env>-<id>` namespaces (ARO mode).
    #[serde(default)]
    pub environment: String,
    /// Namespace of the ManifestWorks; empty watches all namespaces.
    #[serde(default = "defaults::manifestwork_namespace")]
    pub manifestwork_namespace: String,
    /// Label carrying the cluster id on ManifestWorks, HostedClusters and NodePools.
    #[serde(default = "defaults::manifestwork_label")]
    pub manifestwork_label: String,
    /// Label carrying the cluster name (ARO mode).
    #[serde(default = "defaults::name_label")]
    pub name_label: String,
    /// Label every control-plane pod carries (value: its namespace); pods are
    /// watched by its existence, so other pods are never listed.
    #[serde(default = "defaults::control_plane_pod_label")]
    pub control_plane_pod_label: String,
    /// What to watch; unset: the mode's default (see [`KubeSourceConfig::kinds`]).
    #[serde(default)]
    pub watch: Option<Vec<WatchKind>>,
    /// Server-side timeout of one watch call.
    #[serde(default = "defaults::watch_timeout", with = "humantime_serde")]
    pub watch_timeout: Duration,
    /// A watch that delivers nothing, not even a bookmark or its clean end,
    /// for this long is taken for hung: the source goes down and the kind
    /// relists (docs/design/09-reading-the-upstreams.md §9.6). Each watch asks the server to end it
    /// after three quarters of this, so a quiet healthy API server proves
    /// itself in time even where its bookmarks come once a minute.
    #[serde(default = "defaults::idle_timeout", with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// First wait after a watch error; doubles up to `max_backoff`, once per
    /// round for the whole source, not once per kind.
    #[serde(default = "defaults::min_backoff", with = "humantime_serde")]
    pub min_backoff: Duration,
    #[serde(default = "defaults::max_backoff", with = "humantime_serde")]
    pub max_backoff: Duration,
    /// Objects per list page on (re)list.
    #[serde(default = "defaults::page_size")]
    pub page_size: u32,
    /// Set by `diagnose` only, never read from a file: the kinds to watch,
    /// each narrowed to one creation's objects (docs/design/12-interfaces.md §12.4).
    /// None in `serve`: every kind of [`KubeSourceConfig::kinds`], fleet-wide.
    #[serde(skip)]
    pub scope: Option<BTreeMap<WatchKind, KindScope>>,
}

/// One kind's watch narrowed to one creation: a namespace instead of all,
/// and selectors ANDed with the kind's own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KindScope {
    pub namespace: Option<String>,
    pub labels: Option<String>,
    pub fields: Option<String>,
}

pub mod defaults {
    use std::time::Duration;

    pub fn manifestwork_namespace() -> String {
        "local-cluster".to_string()
    }
    pub fn manifestwork_label() -> String {
        "api.openshift.com/id".to_string()
    }
    pub fn name_label() -> String {
        "api.openshift.com/name".to_string()
    }
    pub fn control_plane_pod_label() -> String {
        "hypershift.openshift.io/hosted-control-plane".to_string()
    }
    pub fn watch_timeout() -> Duration {
        Duration::from_secs(290)
    }
    pub fn idle_timeout() -> Duration {
        Duration::from_secs(60)
    }
    pub fn min_backoff() -> Duration {
        Duration::from_millis(500)
    }
    pub fn max_backoff() -> Duration {
        Duration::from_secs(60)
    }
    pub fn page_size() -> u32 {
        500
    }
}

impl KubeSourceConfig {
    /// A config with every default, for `mgmt_cluster` in `mode`.
    pub fn new(mgmt_cluster: &str, mode: KubeMode) -> KubeSourceConfig {
        KubeSourceConfig {
            mgmt_cluster: mgmt_cluster.to_string(),
            kubeconfig: None,
            context: None,
            in_cluster: false,
            mode,
            environment: String::new(),
            manifestwork_namespace: defaults::manifestwork_namespace(),
            manifestwork_label: defaults::manifestwork_label(),
            name_label: defaults::name_label(),
            control_plane_pod_label: defaults::control_plane_pod_label(),
            watch: None,
            watch_timeout: defaults::watch_timeout(),
            idle_timeout: defaults::idle_timeout(),
            min_backoff: defaults::min_backoff(),
            max_backoff: defaults::max_backoff(),
            page_size: defaults::page_size(),
            scope: None,
        }
    }

    /// The `source` label value.
    pub fn source_name(&self) -> String {
        format!("kube/{}", self.mgmt_cluster)
    }

    /// What this watcher set watches: `watch`, else the mode's default
    /// kinds ([`kinds::DefaultIn`]), narrowed to `scope` in `diagnose`.
    pub fn kinds(&self) -> Vec<WatchKind> {
        let mut kinds = self.configured_kinds();
        if let Some(scope) = &self.scope {
            kinds.retain(|k| scope.contains_key(k));
        }
        kinds
    }

    fn configured_kinds(&self) -> Vec<WatchKind> {
        if let Some(kinds) = &self.watch {
            let mut kinds = kinds.clone();
            kinds.sort();
            kinds.dedup();
            return kinds;
        }
        kinds::KINDS
            .iter()
            .filter(|spec| spec.default_in.includes(self.mode))
            .map(|spec| spec.kind)
            .collect()
    }

    /// The hops this watcher set can report, in path order.
    pub fn observable_hops(&self) -> Vec<crate::model::Hop> {
        let kinds = self.kinds();
        crate::model::Hop::ALL
            .into_iter()
            .filter(|hop| kinds.iter().any(|k| k.spec().hop == Some(*hop)))
            .collect()
    }

    /// Where the client's settings come from, for summaries and logs.
    pub fn describe_client(&self) -> String {
        if self.in_cluster {
            return "in-cluster service account".to_string();
        }
        let file = self.kubeconfig.as_ref().map_or_else(
            || "the default kubeconfig".to_string(),
            |p| p.display().to_string(),
        );
        match &self.context {
            Some(context) => format!("context {context} of {file}"),
            None => format!("current context of {file}"),
        }
    }
}
