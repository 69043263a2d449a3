//! The client of one management cluster, and the one-off list `diagnose`
//! locates a HostedCluster with.

use std::path::PathBuf;

use kube::Client;
use kube::api::{Api, ListParams};
use kube::core::DeserializeGuard;

use super::config::KubeSourceConfig;
use super::objects;

#[derive(Debug, thiserror::Error)]
pub enum KubeSourceError {
    #[error("management cluster {mgmt_cluster}: cannot read kubeconfig {path}")]
    Kubeconfig {
        mgmt_cluster: String,
        path: PathBuf,
        #[source]
        cause: kube::config::KubeconfigError,
    },
    #[error(
        "management cluster {mgmt_cluster}: cannot use context {context} of the default kubeconfig"
    )]
    Context {
        mgmt_cluster: String,
        context: String,
        #[source]
        cause: kube::config::KubeconfigError,
    },
    #[error("management cluster {mgmt_cluster}: in-cluster configuration unavailable")]
    InCluster {
        mgmt_cluster: String,
        #[source]
        cause: kube::config::InClusterError,
    },
    #[error("management cluster {mgmt_cluster}: no kubeconfig could be inferred")]
    Infer {
        mgmt_cluster: String,
        #[source]
        cause: kube::config::InferConfigError,
    },
    #[error("management cluster {mgmt_cluster}: listing HostedClusters failed")]
    List {
        mgmt_cluster: String,
        #[source]
        cause: kube::Error,
    },
    #[error("management cluster {mgmt_cluster}: the kube client could not be built")]
    Client {
        mgmt_cluster: String,
        #[source]
        cause: kube::Error,
    },
}

/// The client of one management cluster: its kubeconfig and context, the
/// in-cluster service account, or the usual inference. Nothing is
/// contacted yet.
pub async fn client_for(cfg: &KubeSourceConfig) -> Result<Client, KubeSourceError> {
    let mgmt_cluster = cfg.mgmt_cluster.clone();
    let client_config = if cfg.in_cluster {
        kube::Config::incluster().map_err(|cause| KubeSourceError::InCluster {
            mgmt_cluster: mgmt_cluster.clone(),
            cause,
        })?
    } else if let Some(path) = &cfg.kubeconfig {
        let kubeconfig_error = |cause| KubeSourceError::Kubeconfig {
            mgmt_cluster: mgmt_cluster.clone(),
            path: path.clone(),
            cause,
        };
        let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
        let options = kube::config::KubeConfigOptions {
            context: cfg.context.clone(),
            ..Default::default()
        };
        kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(kubeconfig_error)?
    } else if let Some(context) = &cfg.context {
        // A context without a file: the usual kubeconfig (KUBECONFIG or
        // ~/.kube/config), but that context rather than the current one.
        let options = kube::config::KubeConfigOptions {
            context: Some(context.clone()),
            ..Default::default()
        };
        kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|cause| KubeSourceError::Context {
                mgmt_cluster: mgmt_cluster.clone(),
                context: context.clone(),
                cause,
            })?
    } else {
        kube::Config::infer()
            .await
            .map_err(|cause| KubeSourceError::Infer {
                mgmt_cluster: mgmt_cluster.clone(),
                cause,
            })?
    };
    Client::try_from(client_config).map_err(|cause| KubeSourceError::Client {
        mgmt_cluster,
        cause,
    })
}

/// A HostedCluster as [`locate_hosted_clusters`] finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocatedHostedCluster {
    pub namespace: String,
    pub name: String,
    pub labels: std::collections::BTreeMap<String, String>,
}

/// One list of HostedClusters on `cfg`'s cluster, narrowed by namespace and
/// selectors: the cheatsheet's `oc get hostedcluster -A -l <label>=<id>`.
/// `diagnose` asks it where a creation's HostedCluster is, because its name
/// (and so its control plane's namespace) is not the cluster's.
pub async fn locate_hosted_clusters(
    cfg: &KubeSourceConfig,
    namespace: Option<&str>,
    labels: Option<&str>,
    fields: Option<&str>,
) -> Result<Vec<LocatedHostedCluster>, KubeSourceError> {
    let client = client_for(cfg).await?;
    let api: Api<DeserializeGuard<objects::HostedCluster>> = match namespace {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    };
    let lp = ListParams {
        label_selector: labels.map(str::to_string),
        field_selector: fields.map(str::to_string),
        ..ListParams::default()
    };
    let list = api.list(&lp).await.map_err(|cause| KubeSourceError::List {
        mgmt_cluster: cfg.mgmt_cluster.clone(),
        cause,
    })?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|guarded| guarded.0.ok())
        .map(|hc| LocatedHostedCluster {
            namespace: hc.metadata.namespace.unwrap_or_default(),
            name: hc.metadata.name.unwrap_or_default(),
            labels: hc.metadata.labels.unwrap_or_default(),
        })
        .collect())
}
