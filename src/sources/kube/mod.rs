//! Management-side hops (4–8) over Kubernetes watches, one watcher set per
//! management cluster (docs/design.md §9.6).
//!
//! Each [`KubeSource`] runs one task per watched kind; they share one
//! [`mapping::Mapper`] (cross-kind joins: a control plane is a
//! HostedControlPlane plus its pods, a self-managed NodePool finds its
//! cluster through its HostedCluster). Objects are partial types wrapped in
//! `DeserializeGuard`, so one odd object is counted and skipped, never the
//! stream. Any watch error marks the source down and restarts that kind's
//! watcher after a jittered backoff with a fresh relist: the relist both
//! proves the API server is back (source up again) and removes what vanished
//! while it was away.

/// The management-cluster settings, which the configuration owns.
pub use crate::config::kube as config;
pub mod mapping;
pub mod metrics;
pub mod objects;
pub mod rbac;

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::Api;
use kube::core::{DeserializeGuard, Resource};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use parking_lot::Mutex;
use rand::Rng;
use serde::de::DeserializeOwned;
use tracing::{debug, info, warn};

use crate::metrics::exporter::RequestErrorKind;
use crate::model::Batch;
use crate::sources::SourceContext;
use crate::views::UnknownValue;

pub use config::{KubeMode, KubeSourceConfig, WatchKind};
use mapping::{Facts, Mapper, MapperConfig, ObjRef, ToFacts};

pub use metrics::KubeMetrics;

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
    #[error("management cluster {mgmt_cluster}: the kube client could not be built")]
    Client {
        mgmt_cluster: String,
        #[source]
        cause: kube::Error,
    },
}

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
        let client = Client::try_from(client_config).map_err(|cause| KubeSourceError::Client {
            mgmt_cluster,
            cause,
        })?;
        Ok(KubeSource::with_client(cfg, ctx, metrics, client))
    }

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
        let shared = Arc::new(Shared {
            source: source.clone(),
            mgmt_cluster: self.cfg.mgmt_cluster.clone(),
            ctx: self.ctx.clone(),
            metrics: self.metrics.clone(),
            inner: Mutex::new(Inner {
                mapper: Mapper::new(MapperConfig::from(&self.cfg)),
            }),
        });
        info!(source = %source, kinds = ?kinds, "starting kube watches");
        let mut tasks = tokio::task::JoinSet::new();
        for kind in kinds {
            let shared = shared.clone();
            let cfg = self.cfg.clone();
            let client = self.client.clone();
            tasks.spawn(async move { watch_kind(shared, cfg, client, kind).await });
        }
        // The tasks loop forever; dropping `run` aborts them all (JoinSet).
        while let Some(done) = tasks.join_next().await {
            if let Err(e) = done {
                warn!(source = %source, error = %e, "kube watch task ended");
            }
        }
    }
}

struct Shared {
    source: String,
    mgmt_cluster: String,
    ctx: SourceContext,
    metrics: KubeMetrics,
    inner: Mutex<Inner>,
}

struct Inner {
    mapper: Mapper,
}

impl Shared {
    fn event(&self, event: &str) {
        self.ctx.metrics.watch_event(&self.source, event);
    }

    /// Flush the mapper into one batch; the sink is called under our lock
    /// so batches of different kinds reach the model in mapper order.
    fn emit(&self, inner: &mut Inner, initial: bool, kind: WatchKind) {
        let now = self.ctx.clock.now();
        let observations = inner.mapper.flush();
        match kind {
            WatchKind::MultiClusterEngine => {
                let phase = inner.mapper.mce_phase();
                let label = phase.as_ref().map(|p| {
                    let (label, known) = metrics::mce_phase_label(p.as_deref());
                    if !known {
                        self.ctx.metrics.unknown_value(&self.source, "status.phase");
                    }
                    label.to_string()
                });
                self.metrics
                    .set_mce_phase(&self.mgmt_cluster, label.as_deref());
            }
            WatchKind::Agent => {
                let unknown = self
                    .metrics
                    .set_agents(&self.mgmt_cluster, inner.mapper.agents());
                for stage in unknown {
                    debug!(source = %self.source, stage = %stage, "unknown agent stage");
                    self.ctx
                        .metrics
                        .unknown_value(&self.source, "status.progress.currentStage");
                }
            }
            _ => {}
        }
        if observations.is_empty() && !initial {
            return;
        }
        self.ctx.sink.apply(Batch {
            source: self.source.clone(),
            initial,
            observed_at: now,
            observations,
        });
    }

    /// A live event proves the watch is alive: keep the last-success time
    /// fresh, but never turn a failing source up (only a relist does).
    fn refresh_health(&self) {
        self.ctx.health.alive(&self.source);
    }

    fn relisted(
        &self,
        kind: WatchKind,
        items: Vec<(ObjRef, Facts)>,
        seen: BTreeSet<ObjRef>,
        initial: bool,
    ) {
        let mut inner = self.inner.lock();
        let known = inner.mapper.known(kind);
        let vanished: Vec<&ObjRef> = known.difference(&seen).collect();
        if !vanished.is_empty() {
            debug!(source = %self.source, kind = kind.as_str(), count = vanished.len(), "relist: objects vanished");
        }
        for at in vanished {
            inner.mapper.delete(kind, at);
        }
        for (at, facts) in items {
            inner.mapper.upsert(at, facts);
        }
        self.emit(&mut inner, initial, kind);
        drop(inner);
        self.ctx.health.listed(&self.source, kind.as_str());
    }

    fn applied(&self, kind: WatchKind, at: ObjRef, facts: Facts) {
        let mut inner = self.inner.lock();
        inner.mapper.upsert(at, facts);
        self.emit(&mut inner, false, kind);
        drop(inner);
        self.refresh_health();
    }

    fn deleted(&self, kind: WatchKind, at: &ObjRef) {
        let mut inner = self.inner.lock();
        inner.mapper.delete(kind, at);
        self.emit(&mut inner, false, kind);
        drop(inner);
        self.refresh_health();
    }

    fn failed(&self, kind: WatchKind, error: &watcher::Error) {
        self.event("error");
        self.ctx
            .metrics
            .request_failed(&self.source, error_kind(error));
        self.ctx.health.failed(
            &self.source,
            kind.as_str(),
            &crate::sources::health::cause_chain(error),
        );
    }

    /// Count what the views did not recognise in one object.
    fn unknown(&self, unknown: &mut Vec<UnknownValue>) {
        self.ctx.count_unknown(unknown);
        unknown.clear();
    }

    fn malformed(&self, kind: WatchKind, at: &ObjRef, error: &str) {
        warn!(source = %self.source, kind = kind.as_str(), namespace = %at.namespace, name = %at.name, error = %error, "skipping an object that does not parse");
        self.event("malformed");
        self.ctx.metrics.unknown_value(&self.source, "object");
    }
}

fn status_kind(code: u16) -> RequestErrorKind {
    match code {
        500..=599 => RequestErrorKind::status_5xx,
        400..=499 => RequestErrorKind::status_4xx,
        _ => RequestErrorKind::other,
    }
}

fn client_error_kind(error: &kube::Error) -> RequestErrorKind {
    match error {
        kube::Error::Api(status) => status_kind(status.code),
        kube::Error::HyperError(_) | kube::Error::Service(_) => RequestErrorKind::connect,
        kube::Error::SerdeError(_)
        | kube::Error::FromUtf8(_)
        | kube::Error::LinesCodecMaxLineLengthExceeded => RequestErrorKind::decode,
        kube::Error::ReadEvents(_) => RequestErrorKind::connect,
        kube::Error::Auth(_) => RequestErrorKind::credentials,
        _ => RequestErrorKind::other,
    }
}

fn error_kind(error: &watcher::Error) -> RequestErrorKind {
    match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => client_error_kind(e),
        watcher::Error::WatchError(status) => status_kind(status.code),
        watcher::Error::NoResourceVersion => RequestErrorKind::decode,
    }
}

fn with_jitter(d: Duration) -> Duration {
    d.mul_f64(rand::rng().random_range(0.8..1.2))
}

async fn watch_kind(shared: Arc<Shared>, cfg: KubeSourceConfig, client: Client, kind: WatchKind) {
    use objects as o;
    let mut wc = watcher::Config::default()
        .timeout(
            u32::try_from(cfg.watch_timeout.as_secs())
                .unwrap_or(290)
                .max(1),
        )
        .page_size(cfg.page_size.max(1));
    match kind {
        WatchKind::ManifestWork => {
            wc = wc.labels(&cfg.manifestwork_label);
            let api = if cfg.manifestwork_namespace.is_empty() {
                Api::all(client)
            } else {
                Api::namespaced(client, &cfg.manifestwork_namespace)
            };
            watch_loop::<o::ManifestWork>(&shared, &cfg, api, wc, kind).await
        }
        WatchKind::HostedCluster => {
            watch_loop::<o::HostedCluster>(&shared, &cfg, Api::all(client), wc, kind).await
        }
        WatchKind::NodePool => {
            watch_loop::<o::NodePool>(&shared, &cfg, Api::all(client), wc, kind).await
        }
        WatchKind::HostedControlPlane => {
            watch_loop::<o::HostedControlPlane>(&shared, &cfg, Api::all(client), wc, kind).await
        }
        WatchKind::ManagedCluster => {
            watch_loop::<o::ManagedCluster>(&shared, &cfg, Api::all(client), wc, kind).await
        }
        WatchKind::ControlPlanePod => {
            // Only control-plane pods, by label: the cluster's other pods are
            // never listed, let alone cached.
            wc = wc.labels(&cfg.control_plane_pod_label);
            watch_loop::<o::ControlPlanePod>(&shared, &cfg, Api::all(client), wc, kind).await
        }
        WatchKind::MultiClusterEngine => {
            watch_loop::<o::MultiClusterEngine>(&shared, &cfg, Api::all(client), wc, kind).await
        }
        WatchKind::Agent => watch_loop::<o::Agent>(&shared, &cfg, Api::all(client), wc, kind).await,
    }
}

/// Objects read so far in a relist, and every name seen (parsable or not).
type Relist = (Vec<(ObjRef, Facts)>, BTreeSet<ObjRef>);

/// Keep one kind watched forever: a fresh watcher (list, then watch) after
/// every error, with backoff.
async fn watch_loop<K>(
    shared: &Shared,
    cfg: &KubeSourceConfig,
    api: Api<DeserializeGuard<K>>,
    wc: watcher::Config,
    kind: WatchKind,
) where
    K: Resource<DynamicType = ()> + ToFacts + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let mapper_cfg = MapperConfig::from(cfg);
    let mut unknown = Vec::new();
    let mut first_sync = true;
    let mut backoff = cfg.min_backoff;
    loop {
        let mut stream = watcher::watcher(api.clone(), wc.clone())
            .modify(|guard: &mut DeserializeGuard<K>| {
                // Nothing downstream reads managedFields; drop them at once.
                if let Ok(obj) = &mut guard.0 {
                    obj.meta_mut().managed_fields = None;
                }
            })
            .boxed();
        let mut relist: Option<Relist> = None;
        let error = loop {
            let Some(next) = stream.next().await else {
                break None;
            };
            let event = match next {
                Ok(event) => event,
                Err(e) => break Some(e),
            };
            match event {
                Event::Init => {
                    shared.event("init");
                    relist = Some((Vec::new(), BTreeSet::new()));
                }
                Event::InitApply(guard) => {
                    shared.event("init_apply");
                    let (items, seen) = relist.get_or_insert_with(Default::default);
                    match guard.0 {
                        Ok(obj) => {
                            let at = ObjRef::of(obj.meta());
                            seen.insert(at.clone());
                            items.push((at, obj.facts(&mapper_cfg, &mut unknown)));
                            shared.unknown(&mut unknown);
                        }
                        Err(invalid) => {
                            let at = ObjRef::of(&invalid.metadata);
                            shared.malformed(kind, &at, &invalid.error);
                            // Keep what we knew of it: unreadable is not gone.
                            seen.insert(at);
                        }
                    }
                }
                Event::InitDone => {
                    shared.event("init_done");
                    let (items, seen) = relist.take().unwrap_or_default();
                    shared.relisted(kind, items, seen, first_sync);
                    first_sync = false;
                    backoff = cfg.min_backoff;
                }
                Event::Apply(guard) => {
                    shared.event("apply");
                    match guard.0 {
                        Ok(obj) => {
                            let facts = obj.facts(&mapper_cfg, &mut unknown);
                            shared.unknown(&mut unknown);
                            shared.applied(kind, ObjRef::of(obj.meta()), facts);
                        }
                        Err(invalid) => {
                            shared.malformed(kind, &ObjRef::of(&invalid.metadata), &invalid.error)
                        }
                    }
                }
                Event::Delete(guard) => {
                    shared.event("delete");
                    let at = match &guard.0 {
                        Ok(obj) => ObjRef::of(obj.meta()),
                        Err(invalid) => ObjRef::of(&invalid.metadata),
                    };
                    shared.deleted(kind, &at);
                }
            }
        };
        match &error {
            Some(e) => {
                warn!(source = %shared.source, kind = kind.as_str(), error = %e, retry_in = ?backoff, "kube watch failed");
                shared.failed(kind, e);
            }
            None => {
                debug!(source = %shared.source, kind = kind.as_str(), "kube watch stream ended")
            }
        }
        tokio::time::sleep(with_jitter(backoff)).await;
        backoff = (backoff * 2).min(cfg.max_backoff.max(cfg.min_backoff));
    }
}
