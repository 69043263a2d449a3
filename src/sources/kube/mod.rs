//! Management-side hops (4–8) over Kubernetes watches, one watcher set per
//! management cluster (docs/design/09-reading-the-upstreams.md §9.6).
//!
//! Each [`KubeSource`] runs one task per watched kind; they share one
//! [`mapping::Mapper`] (cross-kind joins: a control plane is a
//! HostedControlPlane plus its pods, a self-managed NodePool finds its
//! cluster through its HostedCluster). Objects are partial types wrapped in
//! `DeserializeGuard`, so one odd object is counted and skipped, never the
//! stream. Any watch error, or a watch silent (no event, no bookmark) past
//! `idle_timeout`, marks the source down and restarts that kind with a fresh
//! relist after the source's shared backoff: the relist both proves the API
//! server is back (source up again) and removes what vanished while it was
//! away. An optional kind whose CRD is absent, or which RBAC forbids, is
//! disabled instead of holding the source down (docs/design/09-reading-the-upstreams.md §9.6, §9.7).
//!
//! The kinds themselves are one table, `config::kube::kinds` (docs/design/09-reading-the-upstreams.md
//! §9.6); `kinds` maps each to its partial type in `objects`. The client is
//! built in `client`, the list/watch protocol runs in `watch`, what a
//! source's kinds share (mapper, backoff, health) is `shared`, and failures
//! are classified in `failure`.

/// The management-cluster settings, which the configuration owns.
pub use crate::config::kube as config;
mod client;
mod failure;
pub mod kinds;
pub mod mapping;
pub mod metrics;
pub mod objects;
pub mod rbac;
mod shared;
mod watch;

use std::sync::Arc;

use kube::Client;
use parking_lot::Mutex;
use tracing::{info, warn};

use crate::sources::SourceContext;

pub use client::{KubeSourceError, LocatedHostedCluster, client_for, locate_hosted_clusters};
pub use config::{KubeMode, KubeSourceConfig, WatchKind};
pub use failure::{Cause, WatchFailure, cause_of};
pub use metrics::KubeMetrics;
pub use shared::environment_mismatch;
pub use watch::DISABLED_RECHECK;

use mapping::{Mapper, MapperConfig};
use shared::{Backoff, Inner, Shared};

/// One management cluster's watcher set; source `kube/<mgmt_cluster>`.
pub struct KubeSource {
    cfg: KubeSourceConfig,
    ctx: SourceContext,
    metrics: KubeMetrics,
    client: Client,
}

impl KubeSource {
    /// Build the client from the kubeconfig/context, in-cluster config, or
    /// the usual inference. Nothing is contacted yet.
    pub async fn new(
        cfg: KubeSourceConfig,
        ctx: SourceContext,
        metrics: KubeMetrics,
    ) -> Result<KubeSource, KubeSourceError> {
        let client = client_for(&cfg).await?;
        Ok(KubeSource::with_client(cfg, ctx, metrics, client))
    }
}

impl KubeSource {
    /// Use an existing client (tests, or a caller that built its own).
    pub fn with_client(
        cfg: KubeSourceConfig,
        ctx: SourceContext,
        metrics: KubeMetrics,
        client: Client,
    ) -> KubeSource {
        KubeSource {
            cfg,
            ctx,
            metrics,
            client,
        }
    }

    /// Watch until the task is dropped. Each kind runs in its own task, so a
    /// kind whose CRD is missing or forbidden never stalls the others, and
    /// each management cluster is its own `KubeSource`.
    pub async fn run(self) {
        let source = self.cfg.source_name();
        let kinds = self.cfg.kinds();
        let kind_names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        self.ctx.health.declare(&source, &kind_names);
        if self.cfg.mode == KubeMode::SelfManaged {
            self.ctx.health.self_managed_hub(&self.cfg.mgmt_cluster);
        }
        let shared = Arc::new(Shared {
            source: source.clone(),
            mgmt_cluster: self.cfg.mgmt_cluster.clone(),
            ctx: self.ctx.clone(),
            metrics: self.metrics.clone(),
            inner: Mutex::new(Inner {
                mapper: Mapper::new(MapperConfig::from(&self.cfg)),
            }),
            backoff: Mutex::new(Backoff {
                next: self.cfg.min_backoff,
                grown_at: None,
            }),
            relists: tokio::sync::watch::channel(0).0,
            mode: self.cfg.mode,
            environment: self.cfg.environment.clone(),
            environment_warned: std::sync::atomic::AtomicBool::new(false),
        });
        info!(source = %source, kinds = ?kinds, "starting kube watches");
        let mut tasks = tokio::task::JoinSet::new();
        for kind in kinds {
            let shared = shared.clone();
            let cfg = self.cfg.clone();
            let client = self.client.clone();
            tasks.spawn(async move { kinds::watch_kind(shared, cfg, client, kind).await });
        }
        // The tasks loop forever; dropping `run` aborts them all (JoinSet).
        while let Some(done) = tasks.join_next().await {
            if let Err(e) = done {
                warn!(source = %source, error = %e, "kube watch task ended");
            }
        }
    }
}
