//! What a live walk reads: the configuration of `serve`, narrowed to one
//! creation, hop by hop, as the cheatsheet narrows its queries
//! (docs/design/12-interfaces.md §12.4). A walk never lists the fleet: each source reads
//! what the identities known so far select, and each run of the sources
//! may reveal more identities (the Clusters Service id behind an ARM id,
//! the management cluster behind a Clusters Service id), until a run
//! reveals nothing its own configuration did not already use.

use std::collections::BTreeMap;

use crate::config::kube::kinds::{KINDS, Locate};
use crate::config::kube::{KindScope, WatchKind};
use crate::config::{Config, KubeMode, KubeSourceConfig};
use crate::sources::clusters_service::ids_search;
use crate::sources::http::sql_quote;
use crate::sources::maestro::cluster_label_search;

/// What TARGET names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `/subscriptions/S/resourceGroups/RG/providers/…/NAME`.
    ArmId {
        resource_id: String,
        subscription: String,
        resource_group: String,
    },
    /// A HostedCluster's `namespace/name`.
    HostedCluster { namespace: String, name: String },
    /// Anything else: a Clusters Service id (or a self-managed cluster id).
    ClusterId(String),
}

impl Target {
    pub fn parse(target: &str) -> Target {
        let trimmed = target.trim();
        let segments: Vec<&str> = trimmed.trim_start_matches('/').split('/').collect();
        if trimmed.starts_with('/') || segments.len() > 2 {
            let arm = (segments.len() >= 4
                && segments[0].eq_ignore_ascii_case("subscriptions")
                && segments[2].eq_ignore_ascii_case("resourcegroups"))
            // As written: ARM compares ids without case, but Clusters
            // Service's search compares the stored subscription and group
            // as they were sent, and an SRE copies them from the portal.
            .then(|| Target::ArmId {
                resource_id: format!("/{}", segments.join("/")),
                subscription: segments[1].to_string(),
                resource_group: segments[3].to_string(),
            });
            if let Some(arm) = arm {
                return arm;
            }
        }
        match trimmed.split_once('/') {
            Some((namespace, name))
                if !namespace.is_empty() && !name.is_empty() && !name.contains('/') =>
            {
                Target::HostedCluster {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                }
            }
            _ => Target::ClusterId(trimmed.to_string()),
        }
    }
}

/// The identities of the target found so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Known {
    /// The ARM resource id.
    pub resource_id: Option<String>,
    /// Subscription and resource group, from the ARM id as written.
    pub resource_group: Option<(String, String)>,
    /// The Clusters Service id (ARO HCP) or the model's cluster id.
    pub cluster_id: Option<String>,
    pub mgmt_cluster: Option<String>,
    /// The HostedCluster's namespace and name.
    pub hosted_cluster: Option<(String, String)>,
}

impl Known {
    pub fn of(target: &Target) -> Known {
        match target {
            Target::ArmId {
                resource_id,
                subscription,
                resource_group,
            } => Known {
                resource_id: Some(resource_id.clone()),
                resource_group: Some((subscription.clone(), resource_group.clone())),
                ..Known::default()
            },
            Target::HostedCluster { namespace, name } => Known {
                hosted_cluster: Some((namespace.clone(), name.clone())),
                ..Known::default()
            },
            Target::ClusterId(id) => Known {
                cluster_id: Some(id.clone()),
                ..Known::default()
            },
        }
    }

    /// Fill in what `other` knows and this does not; true when anything
    /// was added.
    pub fn learn(&mut self, other: Known) -> bool {
        let before = self.clone();
        fn fill<T>(slot: &mut Option<T>, value: Option<T>) {
            if slot.is_none() {
                *slot = value;
            }
        }
        fill(&mut self.resource_id, other.resource_id);
        fill(&mut self.resource_group, other.resource_group);
        fill(&mut self.cluster_id, other.cluster_id);
        fill(&mut self.mgmt_cluster, other.mgmt_cluster);
        fill(&mut self.hosted_cluster, other.hosted_cluster);
        *self != before
    }

    /// The key the store resolves the target by: the strongest known.
    pub fn key(&self, target: &str) -> String {
        self.cluster_id
            .clone()
            .or_else(|| self.resource_id.clone())
            .unwrap_or_else(|| target.to_string())
    }

    fn mode_of(&self, config: &Config) -> Option<KubeMode> {
        let mgmt = self.mgmt_cluster.as_deref()?;
        config
            .sources
            .kube
            .iter()
            .find(|k| k.mgmt_cluster == mgmt)
            .map(|k| k.mode)
    }
}

/// A walk reads the node pools of what it walks (the hints its NodePools
/// give, and the pools in flight it saw), not a rotation through the
/// resource group's other clusters: a rotation this long never turns within
/// a walk of seconds (docs/design/15b-operations.md §15.11).
const WALK_POOL_ROTATION: std::time::Duration = std::time::Duration::from_secs(365 * 24 * 3600);

/// `config` narrowed to what `known` selects. A source nothing known can
/// narrow is turned off: it would list the fleet.
pub fn scoped(config: &Config, known: &Known) -> Config {
    let mut config = config.clone();
    // Every cluster, whatever shard this configuration serves.
    config.shard = Default::default();
    let mode = known.mode_of(&config);
    let sources = &mut config.sources;
    // RP: one GET by resource id.
    sources.rp_frontend = match (sources.rp_frontend.take(), &known.resource_id) {
        (Some(mut rp), Some(id)) => {
            rp.resource_ids = vec![id.clone()];
            rp.subscriptions.clear();
            rp.node_pool_rotation = WALK_POOL_ROTATION;
            Some(rp)
        }
        _ => None,
    };
    // Clusters Service: by id, else the resource group (matched on the
    // resource id in the model, as the cheatsheet matches the name by eye).
    let cs_scope = match (&known.cluster_id, &known.resource_group) {
        (Some(id), _) if mode != Some(KubeMode::SelfManaged) => {
            Some(ids_search(std::iter::once(id.as_str())))
        }
        (None, Some((subscription, group))) => Some(format!(
            "azure.subscription_id = {} and azure.resource_group_name = {}",
            sql_quote(subscription),
            sql_quote(group)
        )),
        _ => None,
    };
    sources.clusters_service = match (sources.clusters_service.take(), cs_scope) {
        (Some(mut cs), Some(scope)) => {
            cs.search_scope = Some(scope);
            cs.node_pool_rotation = WALK_POOL_ROTATION;
            Some(cs)
        }
        _ => None,
    };
    // Maestro: the bundles labelled with the Clusters Service id.
    sources.maestro = match (sources.maestro.take(), &known.cluster_id) {
        (Some(mut maestro), Some(id)) if mode != Some(KubeMode::SelfManaged) => {
            maestro.search_scope = Some(cluster_label_search(id));
            Some(maestro)
        }
        _ => None,
    };
    // Kube: the management cluster's own source only, once it is known.
    sources.kube = std::mem::take(&mut sources.kube)
        .into_iter()
        .filter_map(|mut kube| {
            let scope = kube_scope(&kube, known)?;
            kube.scope = Some(scope);
            Some(kube)
        })
        .collect();
    config
}

/// The kinds of one management cluster's source and what each reads of
/// the target; None when `known` cannot narrow it to the target. Where a
/// kind's objects are is its entry's [`Locate`]; kinds that feed only
/// fleet-wide metrics (the MultiClusterEngine, Agents) are left out.
fn kube_scope(kube: &KubeSourceConfig, known: &Known) -> Option<BTreeMap<WatchKind, KindScope>> {
    if known
        .mgmt_cluster
        .as_deref()
        .is_some_and(|m| m != kube.mgmt_cluster)
    {
        return None;
    }
    let hosted_cluster = known
        .hosted_cluster
        .as_ref()
        .map(|(namespace, name)| (namespace.as_str(), name.as_str()));
    let narrow = match (known.mgmt_cluster.as_ref(), kube.mode, &known.cluster_id) {
        (None, _, _) => {
            let (namespace, name) = hosted_cluster?;
            Narrow::HostedClusterOnly { namespace, name }
        }
        (Some(_), KubeMode::Aro, Some(id)) => Narrow::Aro {
            id,
            id_label: &kube.manifestwork_label,
            hosted_cluster,
        },
        (Some(_), KubeMode::SelfManaged, _) => {
            let (namespace, name) = hosted_cluster?;
            Narrow::SelfManaged { namespace, name }
        }
        (Some(_), KubeMode::Aro, None) => return None,
    };
    Some(
        KINDS
            .iter()
            .filter_map(|spec| Some((spec.kind, narrow.scope(spec.locate)?)))
            .collect(),
    )
}

/// What a walk knows to narrow one management cluster's kinds by.
enum Narrow<'a> {
    /// The management cluster is still unknown: only a HostedCluster named
    /// by the target can be looked for, on every cluster.
    HostedClusterOnly { namespace: &'a str, name: &'a str },
    /// The cluster id, and the HostedCluster once known.
    Aro {
        id: &'a str,
        id_label: &'a str,
        hosted_cluster: Option<(&'a str, &'a str)>,
    },
    /// A self-managed hub: the HostedCluster's namespace and name.
    SelfManaged { namespace: &'a str, name: &'a str },
}

impl Narrow<'_> {
    fn scope(&self, locate: Locate) -> Option<KindScope> {
        let in_namespace = |namespace: &str| KindScope {
            namespace: Some(namespace.to_string()),
            ..KindScope::default()
        };
        let by_name = |name: &str| KindScope {
            fields: Some(format!("metadata.name={name}")),
            ..KindScope::default()
        };
        let named_in = |namespace: &str, name: &str| KindScope {
            namespace: Some(namespace.to_string()),
            ..by_name(name)
        };
        // The control plane lives in `<namespace>-<name>` of its HostedCluster.
        let control_plane =
            |namespace: &str, name: &str| in_namespace(&format!("{namespace}-{name}"));
        match (self, locate) {
            (_, Locate::FleetWide) => None,
            (Narrow::HostedClusterOnly { namespace, name }, Locate::HostedCluster) => {
                Some(named_in(namespace, name))
            }
            (Narrow::HostedClusterOnly { .. }, _) => None,
            (
                Narrow::Aro { id, id_label, .. },
                Locate::HostedCluster | Locate::IdLabel | Locate::IdLabelOrHostedClusterNamespace,
            ) => Some(KindScope {
                labels: Some(format!("{id_label}={id}")),
                ..KindScope::default()
            }),
            (Narrow::Aro { id, .. }, Locate::ClusterNamed) => Some(by_name(id)),
            (Narrow::Aro { hosted_cluster, .. }, Locate::ControlPlaneNamespace) => {
                hosted_cluster.map(|(namespace, name)| control_plane(namespace, name))
            }
            (Narrow::SelfManaged { namespace, name }, Locate::HostedCluster) => {
                Some(named_in(namespace, name))
            }
            (Narrow::SelfManaged { .. }, Locate::IdLabel) => None,
            (Narrow::SelfManaged { namespace, .. }, Locate::IdLabelOrHostedClusterNamespace) => {
                Some(in_namespace(namespace))
            }
            (Narrow::SelfManaged { name, .. }, Locate::ClusterNamed) => Some(by_name(name)),
            (Narrow::SelfManaged { namespace, name }, Locate::ControlPlaneNamespace) => {
                Some(control_plane(namespace, name))
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_told_apart() {
        assert_eq!(
            Target::parse(
                "/subscriptions/SUB/resourceGroups/RG/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters/c1"
            ),
            Target::ArmId {
                resource_id: "/subscriptions/SUB/resourceGroups/RG/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters/c1".into(),
                subscription: "SUB".into(),
                resource_group: "RG".into(),
            }
        );
        // A path that lost its leading slash is still an ARM id.
        assert!(matches!(
            Target::parse("subscriptions/s/resourceGroups/r/providers/p/t/n"),
            Target::ArmId { .. }
        ));
        assert_eq!(
            Target::parse("clusters/kv-1"),
            Target::HostedCluster {
                namespace: "clusters".into(),
                name: "kv-1".into()
            }
        );
        assert_eq!(Target::parse("2b9f0d"), Target::ClusterId("2b9f0d".into()));
    }

    fn config() -> Config {
        let mut config = Config::default();
        let url = |s: &str| url::Url::parse(s).unwrap();
        config.sources.rp_frontend = Some(crate::config::RpFrontendConfig {
            http: crate::config::HttpSourceConfig::new(url("http://rp/")),
            api_version: crate::config::default_rp_api_version(),
            subscriptions: vec!["sub".into()],
            resource_ids: Vec::new(),
            node_pool_rotation: crate::config::defaults::node_pool_rotation(),
        });
        config.sources.clusters_service =
            Some(crate::config::ClustersServiceConfig::new(url("http://cs/")));
        config.sources.maestro = Some(crate::config::MaestroConfig::new(url("http://maestro/")));
        config.sources.kube = vec![
            KubeSourceConfig::new("mgmt-1", KubeMode::Aro),
            KubeSourceConfig::new("mgmt-2", KubeMode::Aro),
            KubeSourceConfig::new("hub", KubeMode::SelfManaged),
        ];
        config
    }

    #[test]
    fn an_arm_id_first_reads_the_rp_by_id_and_its_resource_group_only() {
        let target = Target::parse("/subscriptions/s/resourceGroups/g/providers/p/t/n");
        let c = scoped(&config(), &Known::of(&target));
        let rp = c.sources.rp_frontend.unwrap();
        assert_eq!(
            rp.resource_ids,
            ["/subscriptions/s/resourceGroups/g/providers/p/t/n"]
        );
        assert!(rp.subscriptions.is_empty());
        assert_eq!(
            c.sources.clusters_service.unwrap().search_scope.as_deref(),
            Some("azure.subscription_id = 's' and azure.resource_group_name = 'g'")
        );
        assert!(
            c.sources.maestro.is_none(),
            "no id to search bundles by yet"
        );
        assert!(c.sources.kube.is_empty(), "no management cluster known yet");
    }

    #[test]
    fn a_known_aro_creation_is_read_by_its_id_on_its_management_cluster_only() {
        let known = Known {
            resource_id: Some("/subscriptions/s/x".into()),
            cluster_id: Some("abc".into()),
            mgmt_cluster: Some("mgmt-2".into()),
            hosted_cluster: Some(("ocm-int-abc".into(), "hc1".into())),
            ..Known::default()
        };
        let c = scoped(&config(), &known);
        assert_eq!(
            c.sources.clusters_service.unwrap().search_scope.as_deref(),
            Some("id in ('abc')")
        );
        assert_eq!(
            c.sources.maestro.unwrap().search_scope.as_deref(),
            Some("payload->'metadata'->'labels'->>'api.openshift.com/id'='abc'")
        );
        assert_eq!(c.sources.kube.len(), 1);
        let kube = &c.sources.kube[0];
        assert_eq!(kube.mgmt_cluster, "mgmt-2");
        let scope = kube.scope.as_ref().unwrap();
        assert_eq!(
            scope[&WatchKind::ManifestWork].labels.as_deref(),
            Some("api.openshift.com/id=abc")
        );
        assert_eq!(
            scope[&WatchKind::ManagedCluster].fields.as_deref(),
            Some("metadata.name=abc")
        );
        assert_eq!(
            scope[&WatchKind::ControlPlanePod].namespace.as_deref(),
            Some("ocm-int-abc-hc1")
        );
        assert_eq!(
            kube.kinds(),
            [
                WatchKind::ManifestWork,
                WatchKind::HostedCluster,
                WatchKind::NodePool,
                WatchKind::HostedControlPlane,
                WatchKind::ManagedCluster,
                WatchKind::ControlPlanePod,
            ]
        );
    }

    #[test]
    fn a_self_managed_hosted_cluster_is_read_in_its_namespaces_without_the_services() {
        let mut known = Known::of(&Target::parse("clusters/kv-1"));
        let first = scoped(&config(), &known);
        assert!(first.sources.rp_frontend.is_none());
        assert!(first.sources.clusters_service.is_none());
        assert_eq!(first.sources.kube.len(), 3, "looked for on every cluster");
        assert!(known.learn(Known {
            cluster_id: Some("clusters/kv-1".into()),
            mgmt_cluster: Some("hub".into()),
            ..Known::default()
        }));
        let c = scoped(&config(), &known);
        assert!(c.sources.clusters_service.is_none());
        assert!(c.sources.maestro.is_none());
        let scope = c.sources.kube[0].scope.as_ref().unwrap();
        assert_eq!(c.sources.kube.len(), 1);
        assert_eq!(
            scope[&WatchKind::NodePool].namespace.as_deref(),
            Some("clusters")
        );
        assert_eq!(
            scope[&WatchKind::HostedControlPlane].namespace.as_deref(),
            Some("clusters-kv-1")
        );
        assert_eq!(
            scope[&WatchKind::ManagedCluster].fields.as_deref(),
            Some("metadata.name=kv-1")
        );
        assert!(!known.learn(known.clone()), "nothing new");
    }
}
