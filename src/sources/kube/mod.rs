//! Management-side hops (4–8) over Kubernetes watches, one watcher set per
//! management cluster (docs/design.md §9.6).
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
//! disabled instead of holding the source down (docs/design.md §9.6, §9.7).

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
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::core::{DeserializeGuard, Resource};
use parking_lot::Mutex;
use rand::Rng;
use serde::de::DeserializeOwned;
use tracing::{Instrument, debug, info, warn};

use crate::metrics::exporter::{KindState, RequestErrorKind};
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
    backoff: Mutex<Backoff>,
    /// Bumped whenever a kind lists: wakes the kinds waiting to retry.
    relists: tokio::sync::watch::Sender<u64>,
    mode: KubeMode,
    environment: String,
    environment_warned: std::sync::atomic::AtomicBool,
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

    /// A live event or bookmark proves the watch is alive: keep the
    /// last-success time fresh, but never turn a failing source up (only a
    /// relist does).
    fn refresh_health(&self) {
        self.ctx.health.alive(&self.source);
    }

    /// One page of a relist: its objects go to the mapper and what changed
    /// to the model at once, so a relist holds one page's facts and
    /// observations, not a whole kind's (docs/design.md §9.6).
    fn relisted_page(&self, kind: WatchKind, items: Vec<(ObjRef, Facts)>, initial: bool) {
        let mut inner = self.inner.lock();
        for (at, facts) in items {
            inner.mapper.upsert(at, facts);
        }
        self.emit(&mut inner, initial, kind);
    }

    /// The relist is complete: known objects it did not show are gone.
    fn relisted(&self, kind: WatchKind, seen: BTreeSet<ObjRef>, initial: bool) {
        let mut inner = self.inner.lock();
        let known = inner.mapper.known(kind);
        let vanished: Vec<&ObjRef> = known.difference(&seen).collect();
        if !vanished.is_empty() {
            debug!(source = %self.source, kind = kind.as_str(), count = vanished.len(), "relist: objects vanished");
        }
        for at in vanished {
            inner.mapper.delete(kind, at);
        }
        self.emit(&mut inner, initial, kind);
        drop(inner);
        self.ctx.health.listed(&self.source, kind.as_str());
    }

    /// The kind's API is gone (its CRD was removed): so are its objects.
    fn forget(&self, kind: WatchKind) {
        let mut inner = self.inner.lock();
        let known = inner.mapper.known(kind);
        if known.is_empty() {
            return;
        }
        for at in &known {
            inner.mapper.delete(kind, at);
        }
        self.emit(&mut inner, false, kind);
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

    /// One failed session: counted by kind, and the source down with the
    /// cause first (refused, DNS, TLS, timeout, the HTTP status) and the
    /// whole chain after it, the API's Status message included.
    fn failed(&self, kind: WatchKind, failure: &WatchFailure) {
        self.event("error");
        self.ctx
            .metrics
            .request_failed(&self.source, failure.kind());
        let message = format!(
            "{}: {}",
            failure.cause().describe(),
            crate::sources::health::cause_chain(failure)
        );
        self.ctx
            .health
            .failed(&self.source, kind.as_str(), &message);
    }

    /// Count what the views did not recognise in one object.
    fn unknown(&self, unknown: &mut Vec<UnknownValue>) {
        self.ctx.count_unknown(unknown);
        unknown.clear();
    }

    fn malformed(&self, kind: WatchKind, at: &ObjRef, error: &str) {
        warn!(source = %self.source, kind = kind.as_str(), namespace = %at.namespace(), name = %at.name(), error = %error, "skipping an object that does not parse");
        self.event("malformed");
        self.ctx.metrics.unknown_value(&self.source, "object");
    }
}

/// Kinds a cluster may lack without anything being wrong: the MCE and Agent
/// CRDs exist only where MCE and the assisted installer are installed, and
/// HostedControlPlanes only where control planes are hosted. An absent or
/// forbidden optional kind is disabled rather than holding the source down
/// (docs/design.md §9.7); every other configured kind is required.
pub fn optional(kind: WatchKind) -> bool {
    matches!(
        kind,
        WatchKind::MultiClusterEngine | WatchKind::Agent | WatchKind::HostedControlPlane
    )
}

/// How often an absent or forbidden optional kind is looked for again: a CRD
/// installed later (or RBAC granted) is picked up without a restart, at the
/// cost of one list request per kind every five minutes.
pub const DISABLED_RECHECK: Duration = Duration::from_secs(300);

/// Why one list-then-watch session of a kind ended.
#[derive(Debug, thiserror::Error)]
pub enum WatchFailure {
    #[error("nothing received from the API server, not even a bookmark, for {0:?}")]
    Idle(Duration),
    #[error("{verb} {resource}")]
    Request {
        verb: &'static str,
        resource: String,
        #[source]
        cause: kube::Error,
    },
    #[error("watch {resource}: the API server sent an error event: {} ({}, {})", .status.message, .status.reason, .status.code)]
    Event {
        resource: String,
        status: Box<kube::core::Status>,
    },
    #[error("list {0}: the answer carries no resourceVersion")]
    NoResourceVersion(String),
}

impl WatchFailure {
    /// The HTTP status the API server answered, if it answered one.
    fn code(&self) -> Option<u16> {
        match self {
            WatchFailure::Request {
                cause: kube::Error::Api(status),
                ..
            } => Some(status.code),
            WatchFailure::Event { status, .. } => Some(status.code),
            _ => None,
        }
    }

    /// The exporter-wide error kind (the label of
    /// `hcpflow_source_request_errors_total`).
    fn kind(&self) -> RequestErrorKind {
        match self {
            WatchFailure::Idle(_) => RequestErrorKind::timeout,
            WatchFailure::Request { cause, .. } => match cause_of(cause) {
                Cause::Timeout => RequestErrorKind::timeout,
                Cause::ConnectRefused | Cause::Dns | Cause::Tls | Cause::Connect => {
                    RequestErrorKind::connect
                }
                Cause::Status(code) => status_kind(code),
                Cause::Decode => RequestErrorKind::decode,
                Cause::Credentials => RequestErrorKind::credentials,
                Cause::Other => RequestErrorKind::other,
            },
            WatchFailure::Event { status, .. } => status_kind(status.code),
            WatchFailure::NoResourceVersion(_) => RequestErrorKind::decode,
        }
    }

    /// A finer cause than the metric label can hold (the label set is
    /// shared with the HTTP sources): for the log line and `/readyz`.
    fn cause(&self) -> Cause {
        match self {
            WatchFailure::Idle(_) => Cause::Timeout,
            WatchFailure::Request { cause, .. } => cause_of(cause),
            WatchFailure::Event { status, .. } => Cause::Status(status.code),
            WatchFailure::NoResourceVersion(_) => Cause::Decode,
        }
    }
}

/// What went wrong with a kube request, as a person debugging it asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    ConnectRefused,
    Dns,
    Tls,
    Timeout,
    /// Another connection failure (reset, unreachable, closed early).
    Connect,
    /// The API server answered this HTTP status (its message is in the chain).
    Status(u16),
    Decode,
    Credentials,
    Other,
}

impl Cause {
    pub fn describe(self) -> String {
        match self {
            Cause::ConnectRefused => "connection refused".into(),
            Cause::Dns => "DNS lookup failed".into(),
            Cause::Tls => "TLS handshake failed".into(),
            Cause::Timeout => "timed out".into(),
            Cause::Connect => "connection failed".into(),
            Cause::Status(code) => format!("HTTP {code}"),
            Cause::Decode => "unreadable answer".into(),
            Cause::Credentials => "credentials".into(),
            Cause::Other => "error".into(),
        }
    }
}

/// Classify a kube client error by walking its causes: kube wraps hyper,
/// hyper-util, rustls and io errors in each other, and only the innermost
/// says whether it was a refused connection, a DNS failure or TLS.
pub fn cause_of(error: &kube::Error) -> Cause {
    match error {
        kube::Error::Api(status) => return Cause::Status(status.code),
        kube::Error::SerdeError(_)
        | kube::Error::FromUtf8(_)
        | kube::Error::LinesCodecMaxLineLengthExceeded => return Cause::Decode,
        kube::Error::Auth(_) => return Cause::Credentials,
        kube::Error::RustlsTls(_) => return Cause::Tls,
        _ => {}
    }
    let mut transport = false;
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => return Cause::ConnectRefused,
                std::io::ErrorKind::TimedOut => return Cause::Timeout,
                _ => transport = true,
            }
        }
        if e.is::<rustls::Error>() {
            return Cause::Tls;
        }
        if e.is::<tokio::time::error::Elapsed>() {
            return Cause::Timeout;
        }
        let text = e.to_string().to_ascii_lowercase();
        if text.contains("dns error") || text.contains("failed to lookup address") {
            return Cause::Dns;
        }
        if text.contains("certificate") || text.contains("tls") {
            return Cause::Tls;
        }
        next = e.source();
    }
    match error {
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
            Cause::Connect
        }
        _ if transport => Cause::Connect,
        _ => Cause::Other,
    }
}

fn status_kind(code: u16) -> RequestErrorKind {
    match code {
        500..=599 => RequestErrorKind::status_5xx,
        400..=499 => RequestErrorKind::status_4xx,
        _ => RequestErrorKind::other,
    }
}

fn with_jitter(d: Duration) -> Duration {
    d.mul_f64(rand::rng().random_range(0.8..1.2))
}

/// One backoff for the whole management cluster, not one per kind
/// (docs/design.md §9.6): kinds failing together are one retry round, so the
/// delay doubles once per round, and the first kind to list again resets it
/// and wakes every other kind, so after an outage all kinds relist within
/// moments of the first instead of each sitting out its own long delay.
struct Backoff {
    next: Duration,
    grown_at: Option<tokio::time::Instant>,
}

impl Shared {
    /// The wait before this kind's next attempt.
    fn next_delay(&self, cfg: &KubeSourceConfig) -> Duration {
        let max = cfg.max_backoff.max(cfg.min_backoff);
        let now = tokio::time::Instant::now();
        let mut backoff = self.backoff.lock();
        let delay = backoff.next;
        // Another kind failing within the same round shares its delay.
        if backoff
            .grown_at
            .is_none_or(|at| now.duration_since(at) >= delay)
        {
            backoff.next = (delay * 2).min(max);
            backoff.grown_at = Some(now);
        }
        delay
    }

    /// A kind listed: the cluster answers, so every waiting kind retries now.
    fn list_succeeded(&self, cfg: &KubeSourceConfig) {
        {
            let mut backoff = self.backoff.lock();
            backoff.next = cfg.min_backoff;
            backoff.grown_at = None;
        }
        self.relists.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Sleep `delay` (jittered) or until any kind of this source lists.
    async fn wait_retry(&self, delay: Duration) {
        let mut relists = self.relists.subscribe();
        tokio::select! {
            _ = tokio::time::sleep(with_jitter(delay)) => {}
            _ = relists.changed() => {}
        }
    }

    /// `--kube-environment` only drives the namespace fallback for cluster
    /// ids; say once, loudly, when the cluster shows it is wrong.
    fn check_environment(&self, kind: WatchKind, at: &ObjRef) {
        if kind != WatchKind::HostedCluster
            || self
                .environment_warned
                .load(std::sync::atomic::Ordering::Relaxed)
        {
            return;
        }
        if let Some(why) = environment_mismatch(self.mode, &self.environment, at.namespace())
            && !self
                .environment_warned
                .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            warn!(source = %self.source, namespace = %at.namespace(), name = %at.name(), "{why}");
        }
    }
}

/// Why a HostedCluster's namespace contradicts the configured environment,
/// if it does. In ARO mode HostedClusters live in `ocm-<env>-<id>`; the
/// environment serves only to read `<id>` out of it when the id label is
/// missing (docs/design.md §4.2).
pub fn environment_mismatch(mode: KubeMode, environment: &str, namespace: &str) -> Option<String> {
    if mode != KubeMode::Aro || environment.is_empty() {
        return None;
    }
    let prefix = format!("ocm-{environment}-");
    if namespace.starts_with(&prefix) {
        return None;
    }
    let seen = namespace
        .strip_prefix("ocm-")
        .and_then(|rest| rest.split('-').next())
        .filter(|e| !e.is_empty());
    Some(match seen {
        Some(other) => format!(
            "HostedCluster namespace {namespace} is of environment {other:?}, not the configured {environment:?} (sources.kube[].environment / --kube-environment): cluster ids of HostedClusters without the id label cannot be read from their namespace"
        ),
        None => format!(
            "HostedCluster namespace {namespace} is not of the form ocm-{environment}-<id> (sources.kube[].environment / --kube-environment): cluster ids of HostedClusters without the id label cannot be read from their namespace"
        ),
    })
}

async fn watch_kind(shared: Arc<Shared>, cfg: KubeSourceConfig, client: Client, kind: WatchKind) {
    use objects as o;
    let own_labels = match kind {
        WatchKind::ManifestWork => Some(cfg.manifestwork_label.clone()),
        // Only control-plane pods, by label: the cluster's other pods are
        // never listed, let alone cached.
        WatchKind::ControlPlanePod => Some(cfg.control_plane_pod_label.clone()),
        _ => None,
    };
    let own_namespace = match kind {
        WatchKind::ManifestWork if !cfg.manifestwork_namespace.is_empty() => {
            Some(cfg.manifestwork_namespace.clone())
        }
        _ => None,
    };
    // `diagnose` narrows a kind to one creation (docs/design.md §12.4):
    // its namespace wins, its selectors are ANDed with the kind's own.
    let scope = cfg.scope.as_ref().and_then(|s| s.get(&kind));
    let selectors = Selectors {
        labels: and_selectors(own_labels, scope.and_then(|s| s.labels.clone())),
        fields: scope.and_then(|s| s.fields.clone()),
    };
    let namespace = scope.and_then(|s| s.namespace.clone()).or(own_namespace);
    fn api<K>(client: Client, namespace: &Option<String>) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    {
        match namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        }
    }
    let (shared, cfg, s) = (&*shared, &cfg, selectors);
    match kind {
        WatchKind::ManifestWork => {
            watch_loop::<o::ManifestWork>(shared, cfg, api(client, &namespace), s, kind).await
        }
        WatchKind::HostedCluster => {
            watch_loop::<o::HostedCluster>(shared, cfg, api(client, &namespace), s, kind).await
        }
        WatchKind::NodePool => {
            watch_loop::<o::NodePool>(shared, cfg, api(client, &namespace), s, kind).await
        }
        WatchKind::HostedControlPlane => {
            let api = api(client, &namespace);
            watch_loop::<o::HostedControlPlane>(shared, cfg, api, s, kind).await
        }
        // Cluster-scoped: a scope narrows them by selector only.
        WatchKind::ManagedCluster => {
            watch_loop::<o::ManagedCluster>(shared, cfg, Api::all(client), s, kind).await
        }
        WatchKind::ControlPlanePod => {
            let api = api(client, &namespace);
            watch_loop::<o::ControlPlanePod>(shared, cfg, api, s, kind).await
        }
        WatchKind::MultiClusterEngine => {
            watch_loop::<o::MultiClusterEngine>(shared, cfg, Api::all(client), s, kind).await
        }
        WatchKind::Agent => {
            watch_loop::<o::Agent>(shared, cfg, api(client, &namespace), s, kind).await
        }
    }
}

/// Two label selectors as one (a comma is AND).
fn and_selectors(a: Option<String>, b: Option<String>) -> Option<String> {
    match (a.filter(|s| !s.is_empty()), b.filter(|s| !s.is_empty())) {
        (Some(a), Some(b)) => Some(format!("{a},{b}")),
        (a, b) => a.or(b),
    }
}

struct Selectors {
    labels: Option<String>,
    fields: Option<String>,
}

/// How one list-then-watch session ended.
enum Ended {
    /// 410 Gone on a watch: the API server forgot our version; relist at once.
    Expired,
    /// 410 on a list's continue token: the list took longer than the
    /// server keeps its snapshot. Relisting at once could loop on a list
    /// that is always too slow, so this waits the backoff, without
    /// counting the source down (nothing failed).
    ListExpired,
    Failed(WatchFailure),
}

/// Keep one kind watched forever: list, then watch from the list's version,
/// re-watching when the server ends a watch and relisting after an error,
/// an expired version or an idle deadline.
///
/// This is the kube list/watch protocol written out rather than kube-rs's
/// `watcher`, because the watcher swallows BOOKMARK events and has no idle
/// deadline: a hung API server (socket open, nothing sent) would leave the
/// source looking fine forever. Here every event and bookmark is evidence of
/// life, and silence past `idle_timeout` is a failure (docs/design.md §9.6).
async fn watch_loop<K>(
    shared: &Shared,
    cfg: &KubeSourceConfig,
    api: Api<DeserializeGuard<K>>,
    selectors: Selectors,
    kind: WatchKind,
) where
    K: Resource<DynamicType = ()> + ToFacts + Clone + DeserializeOwned + Debug + Send + 'static,
{
    // group/version/resource, e.g. hypershift.openshift.io/v1beta1/hostedclusters
    let resource = format!("{}/{}", K::api_version(&()), K::plural(&()));
    let session = Session {
        shared,
        cfg,
        api: &api,
        selectors: &selectors,
        kind,
        resource: &resource,
        mapper_cfg: MapperConfig::from(cfg),
    };
    let mut first_sync = true;
    loop {
        let ended = session.run(&mut first_sync).await;
        let failure = match ended {
            Ended::Expired => {
                debug!(source = %shared.source, kind = kind.as_str(), "resourceVersion expired; relisting");
                continue;
            }
            Ended::ListExpired => {
                let delay = shared.next_delay(cfg);
                debug!(source = %shared.source, kind = kind.as_str(), retry_in = ?delay, "list continue token expired; relisting");
                shared.wait_retry(delay).await;
                continue;
            }
            Ended::Failed(failure) => failure,
        };
        let code = failure.code();
        if optional(kind) && matches!(code, Some(404 | 403)) {
            let (state, reason) = disabled_reason(&failure, &resource);
            if state == KindState::absent {
                shared.forget(kind);
            }
            shared
                .ctx
                .health
                .disabled(&shared.source, kind.as_str(), state, &reason);
            tokio::time::sleep(DISABLED_RECHECK).await;
            continue;
        }
        let reason = if matches!(failure, WatchFailure::Idle(_)) {
            metrics::RestartReason::idle
        } else {
            metrics::RestartReason::error
        };
        shared.metrics.restarted(&shared.source, reason);
        shared.failed(kind, &failure);
        let delay = shared.next_delay(cfg);
        // The source's going down is logged once by the health (with the
        // cause); each retry only at debug, so an outage is not a flood.
        debug!(source = %shared.source, kind = kind.as_str(), error = %crate::sources::health::cause_chain(&failure), retry_in = ?delay, "kube watch failed");
        shared.wait_retry(delay).await;
    }
}

/// A 404 or 403 of an optional kind: absent or forbidden, with the cause a
/// person fixes it by.
fn disabled_reason(failure: &WatchFailure, resource: &str) -> (KindState, String) {
    let message = match failure {
        WatchFailure::Request {
            cause: kube::Error::Api(status),
            ..
        } => status.message.clone(),
        WatchFailure::Event { status, .. } => status.message.clone(),
        _ => String::new(),
    };
    match failure.code() {
        Some(404) => (
            KindState::absent,
            format!("{resource} is not served by this API server (CRD not installed)"),
        ),
        _ => (
            KindState::forbidden,
            format!("RBAC forbids list/watch of {resource}: {message}"),
        ),
    }
}

struct Session<'a, K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug> {
    shared: &'a Shared,
    cfg: &'a KubeSourceConfig,
    api: &'a Api<DeserializeGuard<K>>,
    selectors: &'a Selectors,
    kind: WatchKind,
    resource: &'a str,
    mapper_cfg: MapperConfig,
}

impl<K> Session<'_, K>
where
    K: Resource<DynamicType = ()> + ToFacts + Clone + DeserializeOwned + Debug + Send + 'static,
{
    async fn run(&self, first_sync: &mut bool) -> Ended {
        let relist_span = tracing::info_span!("kube.relist", source = %self.shared.source, kind = self.kind.as_str());
        let version = match self.relist(first_sync).instrument(relist_span).await {
            Ok(version) => version,
            Err(ended) => return ended,
        };
        self.watch(version).await
    }

    /// Time one request against the idle deadline and count it.
    async fn request<T>(
        &self,
        verb: &'static str,
        call: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, WatchFailure> {
        let started = tokio::time::Instant::now();
        let result = tokio::time::timeout(self.cfg.idle_timeout, call).await;
        self.shared
            .ctx
            .metrics
            .request_done(&self.shared.source, started.elapsed().as_secs_f64());
        match result {
            Err(_) => Err(WatchFailure::Idle(self.cfg.idle_timeout)),
            Ok(Err(cause)) => Err(WatchFailure::Request {
                verb,
                resource: self.resource.to_string(),
                cause,
            }),
            Ok(Ok(answer)) => Ok(answer),
        }
    }

    /// List every page, each handed to the mapper as it comes; at the end,
    /// known objects missing from the list are deleted. Returns the list's
    /// version.
    async fn relist(&self, first_sync: &mut bool) -> Result<String, Ended> {
        let shared = self.shared;
        shared.event("init");
        let mut seen = BTreeSet::new();
        let mut unknown = Vec::new();
        let mut continue_token: Option<String> = None;
        let version = loop {
            let mut lp = ListParams::default().limit(self.cfg.page_size.max(1));
            lp.label_selector = self.selectors.labels.clone();
            lp.field_selector = self.selectors.fields.clone();
            lp.continue_token = continue_token.take();
            let page = match self.request("list", self.api.list(&lp)).await {
                Ok(page) => page,
                // An expired continue token: start the list again.
                Err(failure) if failure.code() == Some(410) => return Err(Ended::ListExpired),
                Err(failure) => return Err(Ended::Failed(failure)),
            };
            let mut items = Vec::with_capacity(page.items.len());
            for guard in page.items {
                shared.event("init_apply");
                match guard.0 {
                    Ok(mut obj) => {
                        // Nothing downstream reads managedFields.
                        obj.meta_mut().managed_fields = None;
                        let at = ObjRef::of(obj.meta());
                        shared.check_environment(self.kind, &at);
                        seen.insert(at.clone());
                        items.push((at, obj.facts(&self.mapper_cfg, &mut unknown)));
                        shared.unknown(&mut unknown);
                    }
                    Err(invalid) => {
                        let at = ObjRef::of(&invalid.metadata);
                        shared.malformed(self.kind, &at, &invalid.error);
                        // Keep what we knew of it: unreadable is not gone.
                        seen.insert(at);
                    }
                }
            }
            shared.relisted_page(self.kind, items, *first_sync);
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => continue_token = Some(token),
                None => {
                    break page
                        .metadata
                        .resource_version
                        .filter(|v| !v.is_empty())
                        .ok_or_else(|| {
                            Ended::Failed(WatchFailure::NoResourceVersion(
                                self.resource.to_string(),
                            ))
                        })?;
                }
            }
        };
        shared.event("init_done");
        shared.relisted(self.kind, seen, *first_sync);
        *first_sync = false;
        shared.list_succeeded(self.cfg);
        Ok(version)
    }

    /// Watch from `version` until something fails; a watch the server ends
    /// (its timeout) is re-opened from the last version seen.
    async fn watch(&self, mut version: String) -> Ended {
        loop {
            let span = tracing::info_span!("kube.watch", source = %self.shared.source, kind = self.kind.as_str());
            match self.watch_once(&mut version).instrument(span).await {
                Ok(()) => continue,
                Err(ended) => return ended,
            }
        }
    }

    async fn watch_once(&self, version: &mut String) -> Result<(), Ended> {
        let shared = self.shared;
        // The server ends each watch before the idle deadline could pass
        // (three quarters of it): a healthy but quiet API server then proves
        // itself by closing the watch cleanly even where its bookmarks come
        // only once a minute, and re-watching from the last version is cheap
        // (no relist).
        let server_timeout = self
            .cfg
            .watch_timeout
            .min(self.cfg.idle_timeout.mul_f64(0.75));
        let mut wp = WatchParams::default().timeout(
            u32::try_from(server_timeout.as_secs())
                .unwrap_or(290)
                .clamp(1, 290),
        );
        // Bookmarks are the evidence a quiet watch is alive (the default,
        // said here because the idle deadline depends on it).
        wp.bookmarks = true;
        wp.label_selector = self.selectors.labels.clone();
        wp.field_selector = self.selectors.fields.clone();
        // A watch's duration is counted until its headers: its lifetime is
        // the server's timeout, no measure of the API server's latency.
        let stream = match self.request("watch", self.api.watch(&wp, version)).await {
            Ok(stream) => stream,
            Err(failure) if failure.code() == Some(410) => return Err(Ended::Expired),
            Err(failure) => return Err(Ended::Failed(failure)),
        };
        let mut stream = std::pin::pin!(stream);
        let mut unknown = Vec::new();
        loop {
            let next = match tokio::time::timeout(self.cfg.idle_timeout, stream.next()).await {
                Err(_) => return Err(Ended::Failed(WatchFailure::Idle(self.cfg.idle_timeout))),
                // The server ended the watch (its timeout): it answered, so
                // it is alive; watch again from where it left off.
                Ok(None) => {
                    shared.refresh_health();
                    return Ok(());
                }
                Ok(Some(next)) => next,
            };
            let event = match next {
                Ok(event) => event,
                Err(cause) => {
                    return Err(Ended::Failed(WatchFailure::Request {
                        verb: "watch",
                        resource: self.resource.to_string(),
                        cause,
                    }));
                }
            };
            match event {
                WatchEvent::Added(guard) | WatchEvent::Modified(guard) => {
                    shared.event("apply");
                    match guard.0 {
                        Ok(mut obj) => {
                            obj.meta_mut().managed_fields = None;
                            if let Some(v) = obj.meta().resource_version.clone() {
                                *version = v;
                            }
                            let at = ObjRef::of(obj.meta());
                            shared.check_environment(self.kind, &at);
                            let facts = obj.facts(&self.mapper_cfg, &mut unknown);
                            shared.unknown(&mut unknown);
                            shared.applied(self.kind, at, facts);
                        }
                        Err(invalid) => {
                            if let Some(v) = invalid.metadata.resource_version.clone() {
                                *version = v;
                            }
                            shared.malformed(
                                self.kind,
                                &ObjRef::of(&invalid.metadata),
                                &invalid.error,
                            );
                            shared.refresh_health();
                        }
                    }
                }
                WatchEvent::Deleted(guard) => {
                    shared.event("delete");
                    let meta = match &guard.0 {
                        Ok(obj) => obj.meta(),
                        Err(invalid) => &invalid.metadata,
                    };
                    if let Some(v) = meta.resource_version.clone() {
                        *version = v;
                    }
                    shared.deleted(self.kind, &ObjRef::of(meta));
                }
                WatchEvent::Bookmark(bookmark) => {
                    shared.event("bookmark");
                    *version = bookmark.metadata.resource_version;
                    shared.refresh_health();
                }
                WatchEvent::Error(status) => {
                    shared.event("error");
                    if status.code == 410 {
                        shared
                            .ctx
                            .metrics
                            .request_failed(&shared.source, RequestErrorKind::status_4xx);
                        return Err(Ended::Expired);
                    }
                    return Err(Ended::Failed(WatchFailure::Event {
                        resource: self.resource.to_string(),
                        status,
                    }));
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn an_environment_the_namespaces_contradict_is_named() {
        let check = |mode, env, ns| environment_mismatch(mode, env, ns);
        assert_eq!(check(KubeMode::Aro, "prod", "ocm-prod-2abc-name"), None);
        let other = check(KubeMode::Aro, "prod", "ocm-int-2abc").unwrap();
        assert!(
            other.contains(r#"of environment "int", not the configured "prod""#),
            "{other}"
        );
        let foreign = check(KubeMode::Aro, "prod", "clusters").unwrap();
        assert!(
            foreign.contains("not of the form ocm-prod-<id>"),
            "{foreign}"
        );
        // Self-managed hubs and an unset environment have nothing to contradict.
        assert_eq!(check(KubeMode::SelfManaged, "prod", "clusters"), None);
        assert_eq!(check(KubeMode::Aro, "", "clusters"), None);
    }

    #[test]
    fn optional_kinds_are_the_ones_a_cluster_may_lack() {
        let optional: Vec<WatchKind> = WatchKind::ALL
            .into_iter()
            .filter(|k| optional(*k))
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

    #[test]
    fn causes_name_what_went_wrong() {
        let status = kube::core::Status::failure("agents is forbidden", "Forbidden").with_code(403);
        let api = kube::Error::Api(Box::new(status));
        assert_eq!(cause_of(&api), Cause::Status(403));
        let failure = WatchFailure::Request {
            verb: "list",
            resource: "agent-install.openshift.io/v1beta1/agents".into(),
            cause: api,
        };
        assert_eq!(failure.kind(), RequestErrorKind::status_4xx);
        let refused =
            kube::Error::ReadEvents(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(cause_of(&refused), Cause::ConnectRefused);
        let reset =
            kube::Error::ReadEvents(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(cause_of(&reset), Cause::Connect);
        let dns = kube::Error::Service("dns error: failed to lookup address information".into());
        assert_eq!(cause_of(&dns), Cause::Dns);
        let idle = WatchFailure::Idle(Duration::from_secs(90));
        assert_eq!(idle.kind(), RequestErrorKind::timeout);
        assert_eq!(idle.cause().describe(), "timed out");
    }
}
