//! The one mapping from a watched kind (declared in the table of
//! `config::kube::kinds`) to the partial type it is read as, and the watch
//! of a kind opened from both.

use std::sync::Arc;

use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::Client;
use kube::api::Api;
use kube::core::Resource;

use super::config::kinds::ResourceScope;
use super::config::{KubeSourceConfig, WatchKind};
use super::shared::Shared;
use super::watch::{Selectors, and_selectors, watch_loop};

/// Runs `$body` with `$K` the partial type of `$kind`. The one exhaustive
/// match of kind to type: every other per-kind fact is in the table.
macro_rules! with_partial_type {
    ($kind:expr, $K:ident => $body:expr) => {{
        use crate::sources::kube::objects as o;
        match $kind {
            WatchKind::ManifestWork => {
                type $K = o::ManifestWork;
                $body
            }
            WatchKind::HostedCluster => {
                type $K = o::HostedCluster;
                $body
            }
            WatchKind::NodePool => {
                type $K = o::NodePool;
                $body
            }
            WatchKind::HostedControlPlane => {
                type $K = o::HostedControlPlane;
                $body
            }
            WatchKind::ManagedCluster => {
                type $K = o::ManagedCluster;
                $body
            }
            WatchKind::ControlPlanePod => {
                type $K = o::ControlPlanePod;
                $body
            }
            WatchKind::MultiClusterEngine => {
                type $K = o::MultiClusterEngine;
                $body
            }
            WatchKind::Agent => {
                type $K = o::Agent;
                $body
            }
        }
    }};
}

/// A partial type's `Resource::Scope`, as the table names it, and the API
/// it is watched through.
pub trait ApiScope {
    const SCOPE: ResourceScope;

    fn api<K>(client: Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = Self>;
}

impl ApiScope for NamespaceResourceScope {
    const SCOPE: ResourceScope = ResourceScope::Namespaced;

    fn api<K>(client: Client, namespace: Option<&str>) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = Self>,
    {
        match namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        }
    }
}

impl ApiScope for ClusterResourceScope {
    const SCOPE: ResourceScope = ResourceScope::Cluster;

    /// Cluster-scoped: a scope narrows them by selector only.
    fn api<K>(client: Client, _namespace: Option<&str>) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = Self>,
    {
        Api::all(client)
    }
}

/// The scope of `kind`'s partial type, for the table's test.
pub fn partial_type_scope(kind: WatchKind) -> ResourceScope {
    with_partial_type!(kind, K => <<K as Resource>::Scope as ApiScope>::SCOPE)
}

pub(super) async fn watch_kind(
    shared: Arc<Shared>,
    cfg: KubeSourceConfig,
    client: Client,
    kind: WatchKind,
) {
    let own = kind.spec().selectors;
    // `diagnose` narrows a kind to one creation (docs/design/12-interfaces.md §12.4):
    // its namespace wins, its selectors are ANDed with the kind's own.
    let scope = cfg.scope.as_ref().and_then(|s| s.get(&kind));
    let selectors = Selectors {
        labels: and_selectors(own.labels(&cfg), scope.and_then(|s| s.labels.clone())),
        fields: scope.and_then(|s| s.fields.clone()),
    };
    let namespace = scope
        .and_then(|s| s.namespace.clone())
        .or_else(|| own.namespace(&cfg));
    let (shared, cfg, namespace) = (&*shared, &cfg, namespace.as_deref());
    with_partial_type!(kind, K => {
        let api = <<K as Resource>::Scope as ApiScope>::api(client, namespace);
        watch_loop::<K>(shared, cfg, api, selectors, kind).await
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeSet;

    use super::super::config::kinds::KINDS;
    use super::super::failure::{WatchFailure, disables};
    use super::super::rbac::{VERBS, rbac_rules};
    use super::*;

    fn status(code: u16) -> WatchFailure {
        WatchFailure::Event {
            resource: "r".into(),
            status: Box::new(kube::core::Status::failure("m", "R").with_code(code)),
        }
    }

    #[test]
    fn every_kind_is_derived_from_its_one_entry() {
        assert_eq!(
            WatchKind::ALL.to_vec(),
            KINDS.iter().map(|s| s.kind).collect::<Vec<_>>(),
            "ALL is the table"
        );
        let rules = rbac_rules();
        assert_eq!(rules.len(), KINDS.len(), "one RBAC rule per kind");
        let mut names = BTreeSet::new();
        for spec in KINDS {
            let kind = spec.kind;
            assert_eq!(kind.spec().kind, kind, "{kind:?}: spec()");
            assert!(names.insert(kind.as_str()), "{kind:?}: as_str not unique");
            let back = WatchKind::ALL.iter().find(|k| k.as_str() == kind.as_str());
            assert_eq!(back, Some(&kind), "{kind:?}: as_str round trip");

            let matching: Vec<_> = rules
                .iter()
                .filter(|(g, r, _)| *g == spec.group && *r == spec.plural)
                .collect();
            assert_eq!(matching.len(), 1, "{kind:?}: one RBAC rule");
            assert_eq!(matching[0].2, VERBS, "{kind:?}: only list and watch");

            assert_eq!(
                partial_type_scope(kind),
                spec.scope,
                "{kind:?}: the partial type's Scope"
            );
            with_partial_type!(kind, K => {
                assert_eq!(K::group(&()), spec.group);
                assert_eq!(K::version(&()), spec.version);
                assert_eq!(K::kind(&()), spec.api_kind);
                assert_eq!(K::plural(&()), spec.plural);
            });

            for code in [404, 403] {
                assert_eq!(
                    disables(kind, &status(code)),
                    spec.optional,
                    "{kind:?}: HTTP {code} disables exactly the optional kinds"
                );
            }
            assert!(
                !disables(kind, &status(500)),
                "{kind:?}: a 500 is an outage"
            );
        }
    }

    #[test]
    fn optional_kinds_are_the_ones_a_cluster_may_lack() {
        let optional: Vec<WatchKind> = WatchKind::ALL
            .into_iter()
            .filter(|k| k.optional())
            .collect();
        assert_eq!(
            optional,
            vec![
                WatchKind::HostedControlPlane,
                WatchKind::MultiClusterEngine,
                WatchKind::Agent
            ]
        );
    }
}
