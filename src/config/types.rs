//! The configuration's typed shape, its defaults, and what follows from it
//! (terminal and observable hops, the operator-facing summary).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use url::Url;

pub use super::kube::{KubeMode, KubeSourceConfig};
use super::slo::SloConfig;
use crate::model::{Hop, Ownership};

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address the HTTP server listens on.
    pub listen: SocketAddr,
    pub log_format: LogFormat,
    /// On SIGTERM: how long in-flight scrapes and the last spans may take
    /// before the process exits anyway (keep it below the pod's
    /// `terminationGracePeriodSeconds`).
    #[serde(with = "humantime_serde")]
    pub shutdown_grace: Duration,
    /// Where the times only the exporter observed are kept across restarts
    /// (docs/design/03-timeline-model.md §3.8). None: they restart with the process.
    pub state_dir: Option<PathBuf>,
    pub slo: SloConfig,
    pub shard: ShardConfig,
    pub sources: SourcesConfig,
    pub ui: UiConfig,
    pub history: HistoryConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([0, 0, 0, 0], 9464)),
            log_format: LogFormat::Text,
            shutdown_grace: Duration::from_secs(10),
            state_dir: None,
            slo: SloConfig::default(),
            shard: ShardConfig::default(),
            sources: SourcesConfig::default(),
            ui: UiConfig::default(),
            history: HistoryConfig::default(),
        }
    }
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Default, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, for log pipelines.
    Json,
}

impl LogFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        }
    }
}

/// Where the web UI's cluster page links to (docs/ui.md). Both are optional:
/// without them the page shows the trace id and no Grafana link.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct UiConfig {
    /// A trace UI's URL with `{trace_id}` where the creation's trace id goes
    /// (e.g. `https://jaeger.example/trace/{trace_id}`).
    pub trace_url_template: Option<String>,
    /// Grafana's base URL; the cluster page links the cluster dashboard
    /// there.
    pub grafana_url: Option<Url>,
}

/// How many ended operations each cluster keeps, and for how long
/// (docs/design/15b-operations.md §15.12): served in its JSON, drawn on its page, kept in
/// the state store.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct HistoryConfig {
    /// Ended operations older than this are dropped (ARM keeps operation
    /// records for seven days).
    #[serde(with = "humantime_serde")]
    pub retention: Duration,
    /// At most this many per cluster, the oldest dropped first; 0 keeps none.
    pub max_per_cluster: usize,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        let limits = crate::model::HistoryLimits::default();
        HistoryConfig {
            retention: limits.retention,
            max_per_cluster: limits.max_per_cluster,
        }
    }
}

impl HistoryConfig {
    pub fn limits(&self) -> crate::model::HistoryLimits {
        crate::model::HistoryLimits {
            retention: self.retention,
            max_per_cluster: self.max_per_cluster,
        }
    }
}

/// What [`UiConfig::trace_url_template`] must hold.
pub const TRACE_ID_PLACEHOLDER: &str = "{trace_id}";

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ShardConfig {
    /// This instance's shard, 0-based.
    pub index: u32,
    /// How many shards split the fleet by a stable hash of cluster_id.
    pub total: u32,
}

impl Default for ShardConfig {
    fn default() -> Self {
        ShardConfig { index: 0, total: 1 }
    }
}

impl ShardConfig {
    /// The shard a cluster belongs to: the first 8 bytes of SHA-256 of the
    /// cluster id, big-endian, modulo `total`. Stable across versions,
    /// restarts and machines, so a fleet split over several instances never
    /// loses or double-counts a cluster.
    pub fn shard_of(&self, cluster_id: &str) -> u32 {
        shard_of(cluster_id, self.total)
    }

    /// Whether this instance follows the cluster.
    pub fn owns(&self, cluster_id: &str) -> bool {
        self.shard_of(cluster_id) == self.index
    }
}

/// The shard of a cluster: one definition, in the model.
pub use crate::model::shard_of;

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct SourcesConfig {
    pub rp_frontend: Option<RpFrontendConfig>,
    pub clusters_service: Option<ClustersServiceConfig>,
    pub maestro: Option<MaestroConfig>,
    /// Management clusters watched over the Kubernetes API, one source
    /// `kube/<mgmt_cluster>` each.
    pub kube: Vec<KubeSourceConfig>,
}

impl SourcesConfig {
    /// The configured sources as (source label, shared HTTP settings), in path
    /// order.
    pub fn http_sources(&self) -> Vec<(&'static str, &HttpSourceConfig)> {
        let mut out = Vec::new();
        if let Some(rp) = &self.rp_frontend {
            out.push((SOURCE_RP_FRONTEND, &rp.http));
        }
        if let Some(cs) = &self.clusters_service {
            out.push((SOURCE_CLUSTERS_SERVICE, &cs.http));
        }
        if let Some(m) = &self.maestro {
            out.push((SOURCE_MAESTRO, &m.http));
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        !self.has_service_side() && self.kube.is_empty()
    }

    /// Whether any service-side (HTTP) source is configured.
    pub fn has_service_side(&self) -> bool {
        self.rp_frontend.is_some() || self.clusters_service.is_some() || self.maestro.is_some()
    }

    /// Whether only management clusters are read: such an instance sees a
    /// creation's later hops but never its start, so the root span of its
    /// trace is the service side's instance's (one root per trace).
    pub fn management_only(&self) -> bool {
        !self.kube.is_empty() && !self.has_service_side()
    }
}

/// Source names: the YAML key under `sources`, and the `source` label value.
pub const SOURCE_RP_FRONTEND: &str = "rp_frontend";
pub const SOURCE_CLUSTERS_SERVICE: &str = "clusters_service";
pub const SOURCE_MAESTRO: &str = "maestro";
pub const SOURCE_KUBE: &str = "kube";

/// Settings every HTTP-polled source shares. In YAML these keys sit directly
/// in the source's section, next to the source's own keys.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HttpSourceConfig {
    pub base_url: Url,
    #[serde(default)]
    pub auth: Auth,
    /// PEM bundle of CAs to trust in addition to the system roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// Turn TLS verification off for this source. Never the default.
    #[serde(default)]
    pub insecure_skip_tls_verify: bool,
    /// Deadline of one whole request, body included.
    #[serde(default = "defaults::timeout", with = "humantime_serde")]
    pub timeout: Duration,
    /// Deadline of the TCP and TLS connection (capped at `timeout`).
    #[serde(default = "defaults::connect_timeout", with = "humantime_serde")]
    pub connect_timeout: Duration,
    #[serde(default = "defaults::page_size")]
    pub page_size: u32,
    /// Poll interval while some cluster of this source is in flight.
    #[serde(default = "defaults::fast_poll", with = "humantime_serde")]
    pub fast_poll_interval: Duration,
    /// Poll interval for settled clusters.
    #[serde(default = "defaults::slow_poll", with = "humantime_serde")]
    pub slow_poll_interval: Duration,
    /// Full relist (catches deletions).
    #[serde(default = "defaults::full_relist", with = "humantime_serde")]
    pub full_relist_interval: Duration,
}

pub mod defaults {
    use std::time::Duration;
    pub fn timeout() -> Duration {
        Duration::from_secs(10)
    }
    /// Shorter than `timeout`: an unreachable upstream is told apart from
    /// a slow one, and fails fast.
    pub fn connect_timeout() -> Duration {
        Duration::from_secs(5)
    }
    pub fn page_size() -> u32 {
        100
    }
    pub fn fast_poll() -> Duration {
        Duration::from_secs(15)
    }
    pub fn slow_poll() -> Duration {
        Duration::from_secs(120)
    }
    pub fn full_relist() -> Duration {
        Duration::from_secs(600)
    }
    /// A cluster's node pools at the RP and Clusters Service are read at
    /// least this often (docs/design/15b-operations.md §15.11): at 10,000 clusters and a
    /// 10 s fast poll, 28 clusters a poll.
    pub fn node_pool_rotation() -> Duration {
        Duration::from_secs(3600)
    }
    /// Upper bound of `page_size`: Clusters Service and Maestro cap their own
    /// pages well below this, and a larger page only makes one request slower.
    pub const MAX_PAGE_SIZE: u32 = 10_000;
}

impl HttpSourceConfig {
    pub fn new(base_url: Url) -> HttpSourceConfig {
        HttpSourceConfig {
            base_url,
            auth: Auth::None,
            ca_file: None,
            insecure_skip_tls_verify: false,
            timeout: defaults::timeout(),
            connect_timeout: defaults::connect_timeout(),
            page_size: defaults::page_size(),
            fast_poll_interval: defaults::fast_poll(),
            slow_poll_interval: defaults::slow_poll(),
            full_relist_interval: defaults::full_relist(),
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Auth {
    #[default]
    None,
    /// A bearer token read from this file, re-read when the file changes.
    BearerTokenFile(PathBuf),
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(from = "RawRpFrontend", into = "RawRpFrontend")]
pub struct RpFrontendConfig {
    pub http: HttpSourceConfig,
    pub api_version: String,
    /// Subscriptions whose hcpOpenShiftClusters are listed.
    pub subscriptions: Vec<String>,
    /// Individual cluster resource ids to GET.
    pub resource_ids: Vec<String>,
    /// How long a cluster's `nodePools` may go unread: the slow rotation
    /// through every cluster (docs/design/15b-operations.md §15.11). Zero reads none.
    pub node_pool_rotation: Duration,
}

impl RpFrontendConfig {
    pub fn new(base_url: Url) -> RpFrontendConfig {
        RpFrontendConfig {
            http: HttpSourceConfig::new(base_url),
            api_version: default_rp_api_version(),
            subscriptions: Vec::new(),
            resource_ids: Vec::new(),
            node_pool_rotation: defaults::node_pool_rotation(),
        }
    }
}

pub fn default_rp_api_version() -> String {
    "2024-06-10-preview".to_string()
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(from = "RawClustersService", into = "RawClustersService")]
pub struct ClustersServiceConfig {
    pub http: HttpSourceConfig,
    pub api: ClustersServiceApi,
    /// A `search` condition ANDed into every search the source sends, so it
    /// reads only the clusters it matches: how `diagnose` reads one
    /// creation's clusters instead of the fleet. None in `serve`.
    pub search_scope: Option<String>,
    /// How long a cluster's `node_pools` may go unread: the slow rotation
    /// through every cluster (docs/design/15b-operations.md §15.11). Zero reads none.
    pub node_pool_rotation: Duration,
}

impl ClustersServiceConfig {
    pub fn new(base_url: Url) -> ClustersServiceConfig {
        ClustersServiceConfig {
            http: HttpSourceConfig::new(base_url),
            api: ClustersServiceApi::default(),
            search_scope: None,
            node_pool_rotation: defaults::node_pool_rotation(),
        }
    }
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ClustersServiceApi {
    /// `/api/aro_hcp/v1alpha1` (what ARO HCP uses).
    #[default]
    #[serde(rename = "aro_hcp/v1alpha1")]
    #[value(name = "aro_hcp/v1alpha1")]
    AroHcpV1alpha1,
    /// `/api/clusters_mgmt/v1`.
    #[serde(rename = "clusters_mgmt/v1")]
    #[value(name = "clusters_mgmt/v1")]
    ClustersMgmtV1,
}

impl ClustersServiceApi {
    pub fn path_prefix(self) -> &'static str {
        match self {
            ClustersServiceApi::AroHcpV1alpha1 => "/api/aro_hcp/v1alpha1",
            ClustersServiceApi::ClustersMgmtV1 => "/api/clusters_mgmt/v1",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ClustersServiceApi::AroHcpV1alpha1 => "aro_hcp/v1alpha1",
            ClustersServiceApi::ClustersMgmtV1 => "clusters_mgmt/v1",
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(from = "RawMaestro", into = "RawMaestro")]
pub struct MaestroConfig {
    pub http: HttpSourceConfig,
    /// The whole `search` of every list, replacing the incremental
    /// `updated_at` search: Maestro reads a search holding `->>` as one
    /// JSONB expression, so a label search cannot be ANDed with another
    /// condition. How `diagnose` reads one creation's bundles. None in `serve`.
    pub search_scope: Option<String>,
    /// Hear bundle status over Maestro's gRPC CloudEvents stream, with the
    /// REST list only to reconcile (docs/design/09b-reading-the-upstreams.md §9.10). None: poll.
    pub grpc: Option<Box<MaestroGrpcConfig>>,
}

impl MaestroConfig {
    pub fn new(base_url: Url) -> MaestroConfig {
        MaestroConfig {
            http: HttpSourceConfig::new(base_url),
            search_scope: None,
            grpc: None,
        }
    }
}

/// `sources.maestro.grpc`: Maestro's gRPC CloudEvents service
/// (docs/design/09b-reading-the-upstreams.md §9.10).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MaestroGrpcConfig {
    /// `http://host:port` (plaintext, Maestro's chart default) or
    /// `https://host:port` (TLS 1.3, what Maestro requires with TLS).
    pub address: Url,
    /// The source id subscribed as: the id the bundles were created with
    /// (Clusters Service's), since Maestro sends a subscriber only the
    /// status of its source's bundles.
    pub source_id: String,
    /// A bearer token (`--grpc-authn-type=token`), re-read at each connect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_file: Option<PathBuf>,
    /// A client certificate and key (`--grpc-authn-type=mtls`), PEM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cert_file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_key_file: Option<PathBuf>,
    /// PEM bundle of the CAs trusted for the server; without it the
    /// system's roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// A stream silent this long (no heartbeat, no event) is reconnected.
    #[serde(default = "grpc_defaults::heartbeat_timeout", with = "humantime_serde")]
    pub heartbeat_timeout: Duration,
    /// Deadline of the TCP and TLS connection and of the subscription's
    /// answer.
    #[serde(default = "defaults::connect_timeout", with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// First pause before reconnecting; doubles per failure up to a minute.
    #[serde(default = "grpc_defaults::reconnect_backoff", with = "humantime_serde")]
    pub reconnect_backoff: Duration,
}

pub mod grpc_defaults {
    use std::time::Duration;
    /// Maestro sends a heartbeat every 10 s; its own end-to-end tests
    /// allow 20 s.
    pub fn heartbeat_timeout() -> Duration {
        Duration::from_secs(20)
    }
    /// sdk-go's first reconnect delay.
    pub fn reconnect_backoff() -> Duration {
        Duration::from_secs(5)
    }
    /// sdk-go's cap.
    pub const MAX_RECONNECT_BACKOFF: Duration = Duration::from_secs(60);
}

impl MaestroGrpcConfig {
    pub fn new(address: Url, source_id: &str) -> MaestroGrpcConfig {
        MaestroGrpcConfig {
            address,
            source_id: source_id.to_string(),
            bearer_token_file: None,
            client_cert_file: None,
            client_key_file: None,
            ca_file: None,
            heartbeat_timeout: grpc_defaults::heartbeat_timeout(),
            connect_timeout: defaults::connect_timeout(),
            reconnect_backoff: grpc_defaults::reconnect_backoff(),
        }
    }

    /// TLS (1.3) or plaintext, from the address's scheme.
    pub fn tls(&self) -> bool {
        self.address.scheme() == "https"
    }
}

/// Generates the flat wire shape of one source section and the conversions to
/// and from its typed shape. Flat, because serde's `deny_unknown_fields` does
/// not work through `#[serde(flatten)]` (and flatten buffers values, which
/// loses integer and boolean types with some deserializers): a misspelt key
/// must be an error with its path, not silently ignored.
macro_rules! flat_source_shape {
    ($raw:ident => $target:ident { $($(#[$fm:meta])* $f:ident : $t:ty,)* }) => {
        #[derive(Deserialize, Serialize)]
        #[serde(deny_unknown_fields)]
        struct $raw {
            base_url: Url,
            #[serde(default)]
            auth: Auth,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            ca_file: Option<PathBuf>,
            #[serde(default)]
            insecure_skip_tls_verify: bool,
            #[serde(default = "defaults::timeout", with = "humantime_serde")]
            timeout: Duration,
            #[serde(default = "defaults::connect_timeout", with = "humantime_serde")]
            connect_timeout: Duration,
            #[serde(default = "defaults::page_size")]
            page_size: u32,
            #[serde(default = "defaults::fast_poll", with = "humantime_serde")]
            fast_poll_interval: Duration,
            #[serde(default = "defaults::slow_poll", with = "humantime_serde")]
            slow_poll_interval: Duration,
            #[serde(default = "defaults::full_relist", with = "humantime_serde")]
            full_relist_interval: Duration,
            $($(#[$fm])* $f: $t,)*
        }

        impl From<$raw> for $target {
            fn from(raw: $raw) -> $target {
                $target {
                    http: HttpSourceConfig {
                        base_url: raw.base_url,
                        auth: raw.auth,
                        ca_file: raw.ca_file,
                        insecure_skip_tls_verify: raw.insecure_skip_tls_verify,
                        timeout: raw.timeout,
                        connect_timeout: raw.connect_timeout,
                        page_size: raw.page_size,
                        fast_poll_interval: raw.fast_poll_interval,
                        slow_poll_interval: raw.slow_poll_interval,
                        full_relist_interval: raw.full_relist_interval,
                    },
                    $($f: raw.$f,)*
                }
            }
        }

        impl From<$target> for $raw {
            fn from(typed: $target) -> $raw {
                let HttpSourceConfig {
                    base_url,
                    auth,
                    ca_file,
                    insecure_skip_tls_verify,
                    timeout,
                    connect_timeout,
                    page_size,
                    fast_poll_interval,
                    slow_poll_interval,
                    full_relist_interval,
                } = typed.http;
                $raw {
                    base_url,
                    auth,
                    ca_file,
                    insecure_skip_tls_verify,
                    timeout,
                    connect_timeout,
                    page_size,
                    fast_poll_interval,
                    slow_poll_interval,
                    full_relist_interval,
                    $($f: typed.$f,)*
                }
            }
        }
    };
}

flat_source_shape!(RawRpFrontend => RpFrontendConfig {
    #[serde(default = "default_rp_api_version")]
    api_version: String,
    #[serde(default)]
    subscriptions: Vec<String>,
    #[serde(default)]
    resource_ids: Vec<String>,
    #[serde(default = "defaults::node_pool_rotation", with = "humantime_serde")]
    node_pool_rotation: Duration,
});

flat_source_shape!(RawClustersService => ClustersServiceConfig {
    #[serde(default)]
    api: ClustersServiceApi,
    /// Set by `diagnose` only, never read from a file (docs/design/12-interfaces.md §12.4).
    #[serde(skip)]
    search_scope: Option<String>,
    #[serde(default = "defaults::node_pool_rotation", with = "humantime_serde")]
    node_pool_rotation: Duration,
});

flat_source_shape!(RawMaestro => MaestroConfig {
    /// Set by `diagnose` only, never read from a file (docs/design/12-interfaces.md §12.4).
    #[serde(skip)]
    search_scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    grpc: Option<Box<MaestroGrpcConfig>>,
});

impl Config {
    /// Logs what an SRE must not miss about a valid config (TLS verification
    /// turned off). Separate from [`Config::load`] because logging is set up
    /// from the loaded config, so it can only run after loading.
    pub fn log_warnings(&self) {
        for (name, http) in self.sources.http_sources() {
            if http.insecure_skip_tls_verify {
                tracing::warn!(
                    source = name,
                    base_url = %http.base_url,
                    "TLS certificate verification is turned off for this source"
                );
            }
        }
    }

    /// Hops whose readiness completes a creation: `slo.terminal_hops` when
    /// set, else derived from the sources in scope (docs/design/03-timeline-model.md §3.6).
    pub fn terminal_hops(&self) -> Vec<Hop> {
        if !self.slo.terminal_hops.is_empty() {
            return self.slo.terminal_hops.clone();
        }
        let mut hops = Vec::new();
        // The RP completes a creation only where it joins one: through
        // Clusters Service. RP resources no CS cluster shows complete on
        // their own (docs/design/04-identities-and-joins.md §4.4).
        if self.sources.rp_frontend.is_some() && self.sources.clusters_service.is_some() {
            hops.push(Hop::RpFrontend);
        }
        // Maestro sees the HostedCluster through status feedback, a
        // management cluster directly.
        let hc_visible = self.sources.maestro.is_some()
            || self
                .sources
                .kube
                .iter()
                .any(|k| k.observable_hops().contains(&Hop::HostedCluster));
        if hc_visible {
            hops.push(Hop::HostedCluster);
        }
        if hops.is_empty() {
            hops.push(Hop::ClustersService);
        }
        hops
    }

    /// Which creations this instance counts (docs/design/08-scopes-and-scale-out.md §8.2): the one
    /// that sees their start. RP resources not joined are counted where the
    /// RP is read; every other timeline where Clusters Service is read, or —
    /// with no RP to see an earlier start — where Maestro or a self-managed
    /// hub is. A management-only ARO instance counts none: its service-side
    /// instance does.
    pub fn ownership(&self) -> Ownership {
        let s = &self.sources;
        let self_managed_hub = s.kube.iter().any(|k| k.mode == KubeMode::SelfManaged);
        Ownership {
            provisional: true,
            joined: s.clusters_service.is_some()
                || (s.rp_frontend.is_none() && (s.maestro.is_some() || self_managed_hub)),
        }
    }

    /// Hops some configured source can see, in path order. Maestro sees
    /// ManifestWork, HostedCluster and NodePool through status feedback
    /// (docs/design/02-hops-and-phases.md §2.6); management clusters add what their watches see.
    pub fn observable_hops(&self) -> Vec<Hop> {
        let mut hops = Vec::new();
        if self.sources.rp_frontend.is_some() {
            hops.push(Hop::RpFrontend);
        }
        if self.sources.clusters_service.is_some() {
            hops.push(Hop::ClustersService);
        }
        if self.sources.maestro.is_some() {
            hops.extend([
                Hop::MaestroBundle,
                Hop::Manifestwork,
                Hop::HostedCluster,
                Hop::NodePool,
            ]);
        }
        for kube in &self.sources.kube {
            hops.extend(kube.observable_hops());
        }
        hops.sort_by_key(|h| h.index());
        hops.dedup();
        hops
    }

    /// The shard `cluster_id` belongs to; see [`ShardConfig::shard_of`].
    pub fn shard_of(&self, cluster_id: &str) -> u32 {
        self.shard.shard_of(cluster_id)
    }

    /// A few lines saying what is configured, without secrets (paths to
    /// credential files are not secret; their contents are never read here).
    pub fn summary(&self) -> String {
        let mut lines = vec![
            format!("listen: {}", self.listen),
            format!("log_format: {}", self.log_format.as_str()),
            format!(
                "shutdown_grace: {}",
                humantime::format_duration(self.shutdown_grace)
            ),
            format!(
                "state_dir: {}",
                match &self.state_dir {
                    Some(dir) => dir.display().to_string(),
                    None => "none (times only the exporter observed restart with it)".to_string(),
                }
            ),
            format!("shard: {} of {}", self.shard.index, self.shard.total),
            format!(
                "history: {} per cluster for {}",
                self.history.max_per_cluster,
                humantime::format_duration(self.history.retention)
            ),
            format!(
                "ui: trace links {}, grafana {}",
                self.ui.trace_url_template.as_deref().unwrap_or("none"),
                self.ui.grafana_url.as_ref().map_or("none", |u| u.as_str())
            ),
            format!(
                "slo: creation target {}, terminal hops {}{}",
                humantime::format_duration(self.slo.creation_target),
                join_hops(&self.terminal_hops()),
                if self.slo.terminal_hops.is_empty() {
                    " (derived from sources)"
                } else {
                    ""
                }
            ),
        ];
        if let Some(rp) = &self.sources.rp_frontend {
            lines.push(format!(
                "source rp_frontend: {} (api-version {}, {} subscription(s), {} resource id(s)){}",
                rp.http.base_url,
                rp.api_version,
                rp.subscriptions.len(),
                rp.resource_ids.len(),
                http_summary(&rp.http)
            ));
        }
        if let Some(cs) = &self.sources.clusters_service {
            lines.push(format!(
                "source clusters_service: {} (api {}){}",
                cs.http.base_url,
                cs.api.as_str(),
                http_summary(&cs.http)
            ));
        }
        if let Some(m) = &self.sources.maestro {
            lines.push(format!(
                "source maestro: {}{}",
                m.http.base_url,
                http_summary(&m.http)
            ));
        }
        for k in &self.sources.kube {
            let env = if k.environment.is_empty() {
                String::new()
            } else {
                format!(", environment {}", k.environment)
            };
            lines.push(format!(
                "source kube/{}: {} (mode {}{env}); watches {}",
                k.mgmt_cluster,
                k.describe_client(),
                k.mode.as_str(),
                k.kinds()
                    .iter()
                    .map(|w| w.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            ));
        }
        lines.join("\n")
    }
}

fn http_summary(http: &HttpSourceConfig) -> String {
    let auth = match &http.auth {
        Auth::None => "no auth".to_string(),
        Auth::BearerTokenFile(p) => format!("bearer token from {}", p.display()),
    };
    let tls = if http.insecure_skip_tls_verify {
        "TLS verification OFF".to_string()
    } else if let Some(ca) = &http.ca_file {
        format!("extra CAs from {}", ca.display())
    } else {
        "system CAs".to_string()
    };
    format!(
        "\n    {auth}; {tls}; timeout {}; page size {}; poll {} in flight, {} settled, full relist {}",
        humantime::format_duration(http.timeout),
        http.page_size,
        humantime::format_duration(http.fast_poll_interval),
        humantime::format_duration(http.slow_poll_interval),
        humantime::format_duration(http.full_relist_interval),
    )
}

pub(super) fn join_hops(hops: &[Hop]) -> String {
    if hops.is_empty() {
        return "none".to_string();
    }
    hops.iter()
        .map(|h| h.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
