//! Configuration: the YAML file, flags and `HCPFLOW_*` variables, validated.
//!
//! Precedence is flag > environment > file > default. Clap resolves flag over
//! environment into [`ServeOverrides`]; [`Config::load`] lays those over the
//! file. Every problem is reported with the dotted path of the key it concerns
//! (`sources.maestro.fast_poll_interval`), and all of them at once, because an
//! SRE fixing a config in a pipeline should not have to iterate one error at a
//! time.
//!
//! The file is read in two steps: YAML into an untyped tree (syntax errors with
//! line and column), then each section into its typed shape on its own, so one
//! bad section does not hide the errors of the others.

use std::collections::BTreeSet;
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use url::Url;

use crate::cli::{HttpOverrides, KubeFlags, ServeOverrides};
use crate::model::{Hop, HopBudgets};
pub use crate::sources::kube::{KubeMode, KubeSourceConfig};

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address the HTTP server listens on.
    pub listen: SocketAddr,
    pub log_format: LogFormat,
    pub slo: SloConfig,
    pub shard: ShardConfig,
    pub sources: SourcesConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([0, 0, 0, 0], 9464)),
            log_format: LogFormat::Text,
            slo: SloConfig::default(),
            shard: ShardConfig::default(),
            sources: SourcesConfig::default(),
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

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SloConfig {
    /// A creation is good when it completes within this (docs/design.md §6.1).
    #[serde(with = "humantime_serde")]
    pub creation_target: Duration,
    /// Hops whose readiness completes a creation. Empty: derived from the
    /// sources in scope (hosted_cluster when visible, plus rp_frontend when
    /// the RP is in scope; clusters_service when neither is).
    pub terminal_hops: Vec<Hop>,
    /// How long each hop may stay not ready (docs/design.md §3.5); a
    /// never-Available HostedCluster Degraded past its budget is failed.
    pub hop_budgets: HopBudgets,
}

impl Default for SloConfig {
    fn default() -> Self {
        SloConfig {
            creation_target: Duration::from_secs(1200),
            terminal_hops: Vec::new(),
            hop_budgets: HopBudgets::default(),
        }
    }
}

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
    #[serde(default = "defaults::timeout", with = "humantime_serde")]
    pub timeout: Duration,
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
}

impl RpFrontendConfig {
    pub fn new(base_url: Url) -> RpFrontendConfig {
        RpFrontendConfig {
            http: HttpSourceConfig::new(base_url),
            api_version: default_rp_api_version(),
            subscriptions: Vec::new(),
            resource_ids: Vec::new(),
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
}

impl ClustersServiceConfig {
    pub fn new(base_url: Url) -> ClustersServiceConfig {
        ClustersServiceConfig {
            http: HttpSourceConfig::new(base_url),
            api: ClustersServiceApi::default(),
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
}

impl MaestroConfig {
    pub fn new(base_url: Url) -> MaestroConfig {
        MaestroConfig {
            http: HttpSourceConfig::new(base_url),
        }
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
});

flat_source_shape!(RawClustersService => ClustersServiceConfig {
    #[serde(default)]
    api: ClustersServiceApi,
});

flat_source_shape!(RawMaestro => MaestroConfig {});

/// One problem in the configuration, at a dotted key path
/// (`sources.rp_frontend.subscriptions[1]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

impl FieldError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read configuration file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid configuration ({} error(s)):\n{}", errors.len(), render_errors(errors))]
    Invalid { errors: Vec<FieldError> },
}

impl ConfigError {
    /// Every problem as a field error; a read failure is one error at the
    /// file's path.
    pub fn into_field_errors(self) -> Vec<FieldError> {
        match self {
            ConfigError::Read { path, source } => vec![FieldError::new(
                path.display().to_string(),
                format!("cannot read configuration file: {source}"),
            )],
            ConfigError::Invalid { errors } => errors,
        }
    }
}

fn render_errors(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(|e| format!("  {e}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Loads and validates `path` alone (no flags, no environment), for
/// `hcp-flow check-config`.
pub fn check_config(path: &Path) -> Result<Config, Vec<FieldError>> {
    Config::load(Some(path), &ServeOverrides::default()).map_err(ConfigError::into_field_errors)
}

/// The top-level keys, and the keys of `sources`, in the order they are
/// documented.
const TOP_KEYS: &[&str] = &["listen", "log_format", "slo", "shard", "sources"];
const SOURCE_KEYS: &[&str] = &[
    SOURCE_RP_FRONTEND,
    SOURCE_CLUSTERS_SERVICE,
    SOURCE_MAESTRO,
    SOURCE_KUBE,
];

/// What reading the file produced: the config as far as it parsed, the
/// errors, and which sections failed (so their absence does not cause a
/// second, misleading error such as "no source configured").
struct ParsedFile {
    config: Config,
    errors: Vec<FieldError>,
    failed: BTreeSet<String>,
}

impl Config {
    /// Reads `file` (if any), lays `overrides` over it and validates the
    /// result. Every error is reported, each with its key path.
    pub fn load(file: Option<&Path>, overrides: &ServeOverrides) -> Result<Config, ConfigError> {
        let parsed = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                })?;
                parse_file(&text, &path.display().to_string())
            }
            None => ParsedFile {
                config: Config::default(),
                errors: Vec::new(),
                failed: BTreeSet::new(),
            },
        };
        let ParsedFile {
            mut config,
            mut errors,
            failed,
        } = parsed;
        errors.extend(config.apply_overrides_except(overrides, &failed));

        let sources_complete = !failed.iter().any(|p| p.starts_with("sources"));
        errors.extend(config.validate_checking_sources(sources_complete));
        // Sorted by path, so the output groups by section and does not depend
        // on the order of keys in the file.
        errors.sort_by(|a, b| a.path.cmp(&b.path));
        if errors.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError::Invalid { errors })
        }
    }

    /// Parses a YAML document (what a file holds) without flags and without
    /// validating. Errors carry key paths; `origin` names the document in
    /// errors that have no key (syntax errors).
    pub fn from_yaml_str(text: &str, origin: &str) -> Result<Config, Vec<FieldError>> {
        let parsed = parse_file(text, origin);
        if parsed.errors.is_empty() {
            Ok(parsed.config)
        } else {
            Err(parsed.errors)
        }
    }

    /// Lays flag/environment values over the file's. A `--<source>-base-url`
    /// creates a source the file does not have; other per-source settings
    /// without a base URL anywhere are an error rather than silently unused.
    pub fn apply_overrides(&mut self, o: &ServeOverrides) -> Vec<FieldError> {
        self.apply_overrides_except(o, &BTreeSet::new())
    }

    /// [`Config::apply_overrides`], leaving alone the source sections that
    /// failed to parse (their error is already reported, and creating them
    /// from a flag would hide it).
    fn apply_overrides_except(
        &mut self,
        o: &ServeOverrides,
        failed: &BTreeSet<String>,
    ) -> Vec<FieldError> {
        let mut errors = Vec::new();
        if let Some(listen) = o.listen {
            self.listen = listen;
        }
        if let Some(format) = o.log_format {
            self.log_format = format;
        }
        if let Some(target) = o.slo_creation_target {
            self.slo.creation_target = target;
        }
        if let Some(hops) = &o.slo_terminal_hops {
            self.slo.terminal_hops = hops.clone();
        }
        if let Some(index) = o.shard {
            self.shard.index = index;
        }
        if let Some(total) = o.total_shards {
            self.shard.total = total;
        }

        let rp = o.rp_frontend.http();
        let rp_own_set = o.rp_frontend.api_version.is_some()
            || o.rp_frontend.subscriptions.is_some()
            || o.rp_frontend.resource_ids.is_some();
        if !failed.contains("sources.rp_frontend")
            && let Some(cfg) = overlay_source(
                &mut self.sources.rp_frontend,
                SOURCE_RP_FRONTEND,
                &rp,
                rp_own_set,
                RpFrontendConfig::new,
                |c| &mut c.http,
                &mut errors,
            )
        {
            if let Some(v) = &o.rp_frontend.api_version {
                cfg.api_version = v.clone();
            }
            if let Some(v) = &o.rp_frontend.subscriptions {
                cfg.subscriptions = v.clone();
            }
            if let Some(v) = &o.rp_frontend.resource_ids {
                cfg.resource_ids = v.clone();
            }
        }

        let cs = o.clusters_service.http();
        if !failed.contains("sources.clusters_service")
            && let Some(cfg) = overlay_source(
                &mut self.sources.clusters_service,
                SOURCE_CLUSTERS_SERVICE,
                &cs,
                o.clusters_service.api.is_some(),
                ClustersServiceConfig::new,
                |c| &mut c.http,
                &mut errors,
            )
            && let Some(api) = o.clusters_service.api
        {
            cfg.api = api;
        }

        let m = o.maestro.http();
        if !failed.contains("sources.maestro") {
            overlay_source(
                &mut self.sources.maestro,
                SOURCE_MAESTRO,
                &m,
                false,
                MaestroConfig::new,
                |c| &mut c.http,
                &mut errors,
            );
        }
        if !failed.contains("sources.kube") {
            self.overlay_kube(&o.kube, &mut errors);
        }
        errors
    }

    /// `--kubeconfig`/`--kube-contexts`/`--kube-in-cluster` replace the file's
    /// management clusters (a list given by flag replaces the file's list);
    /// `--kube-mode`/`--kube-environment` apply to all of them.
    fn overlay_kube(&mut self, o: &KubeFlags, errors: &mut Vec<FieldError>) {
        if o.names_clusters() {
            let mut list = Vec::new();
            let mode = o.mode.unwrap_or_default();
            match &o.contexts {
                Some(contexts) => {
                    for entry in contexts.iter().map(|c| c.trim()).filter(|c| !c.is_empty()) {
                        let (name, context) = entry.split_once('=').unwrap_or((entry, entry));
                        let mut cfg = KubeSourceConfig::new(name.trim(), mode);
                        cfg.kubeconfig = o.kubeconfig.clone();
                        cfg.context = Some(context.trim().to_string());
                        list.push(cfg);
                    }
                    if list.is_empty() {
                        errors.push(FieldError::new(
                            "sources.kube",
                            "--kube-contexts / HCPFLOW_KUBE_CONTEXTS names no context",
                        ));
                    }
                }
                None => {
                    if let Some(path) = &o.kubeconfig {
                        match current_context(path) {
                            Ok(context) => {
                                let mut cfg = KubeSourceConfig::new(&context, mode);
                                cfg.kubeconfig = Some(path.clone());
                                cfg.context = Some(context);
                                list.push(cfg);
                            }
                            Err(message) => errors.push(FieldError::new(
                                "sources.kube",
                                format!(
                                    "--kubeconfig without --kube-contexts watches the file's \
                                     current context, but {message}"
                                ),
                            )),
                        }
                    }
                }
            }
            if let Some(name) = &o.in_cluster {
                let mut cfg = KubeSourceConfig::new(name.trim(), mode);
                cfg.in_cluster = true;
                list.push(cfg);
            }
            self.sources.kube = list;
        } else if (o.mode.is_some() || o.environment.is_some()) && self.sources.kube.is_empty() {
            errors.push(FieldError::new(
                "sources.kube",
                "--kube-mode / --kube-environment were given but no management cluster is \
                 configured; set sources.kube, --kube-contexts, --kubeconfig or --kube-in-cluster",
            ));
        }
        for cfg in &mut self.sources.kube {
            if let Some(mode) = o.mode {
                cfg.mode = mode;
            }
            if let Some(env) = &o.environment {
                cfg.environment = env.trim().to_string();
            }
        }
    }

    /// Every semantic problem, each with its key path. Checks that files
    /// named by the config exist and are readable, so it touches the
    /// filesystem (never reads a token).
    pub fn validate(&self) -> Vec<FieldError> {
        self.validate_checking_sources(true)
    }

    /// [`Config::validate`]; with `sources_complete` false (a source section
    /// did not parse, and that error is already reported) the checks that
    /// depend on which sources exist are skipped, since they would only
    /// repeat it in a misleading form ("no source configured").
    fn validate_checking_sources(&self, sources_complete: bool) -> Vec<FieldError> {
        let mut errors = Vec::new();

        if self.slo.creation_target.is_zero() {
            errors.push(FieldError::new(
                "slo.creation_target",
                "must be longer than 0s",
            ));
        }
        let observable = self.observable_hops();
        let mut seen = BTreeSet::new();
        for (i, hop) in self.slo.terminal_hops.iter().enumerate() {
            let path = format!("slo.terminal_hops[{i}]");
            if !seen.insert(*hop) {
                errors.push(FieldError::new(path, format!("{hop} is listed twice")));
            } else if sources_complete && !self.sources.is_empty() && !observable.contains(hop) {
                errors.push(FieldError::new(
                    path,
                    format!(
                        "no configured source observes {hop}, so no creation could ever \
                         complete; observed hops: {}",
                        join_hops(&observable)
                    ),
                ));
            }
        }

        if self.shard.total == 0 {
            errors.push(FieldError::new("shard.total", "must be at least 1"));
        } else if self.shard.index >= self.shard.total {
            errors.push(FieldError::new(
                "shard.index",
                format!(
                    "is {} but shards are numbered 0 to {} (shard.total is {})",
                    self.shard.index,
                    self.shard.total - 1,
                    self.shard.total
                ),
            ));
        }

        if sources_complete && self.sources.is_empty() {
            errors.push(FieldError::new(
                "sources",
                "no source configured: set at least one of sources.rp_frontend, \
                 sources.clusters_service, sources.maestro, sources.kube (or a \
                 --<source>-base-url, --kube-contexts, --kubeconfig or --kube-in-cluster flag)",
            ));
        }
        validate_kube(&self.sources.kube, &mut errors);
        if let Some(rp) = &self.sources.rp_frontend {
            validate_http(
                &format!("sources.{SOURCE_RP_FRONTEND}"),
                &rp.http,
                &mut errors,
            );
            validate_rp(rp, &mut errors);
        }
        if let Some(cs) = &self.sources.clusters_service {
            validate_http(
                &format!("sources.{SOURCE_CLUSTERS_SERVICE}"),
                &cs.http,
                &mut errors,
            );
        }
        if let Some(m) = &self.sources.maestro {
            validate_http(&format!("sources.{SOURCE_MAESTRO}"), &m.http, &mut errors);
        }
        errors
    }

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
    /// set, else derived from the sources in scope (docs/design.md §3.6).
    pub fn terminal_hops(&self) -> Vec<Hop> {
        if !self.slo.terminal_hops.is_empty() {
            return self.slo.terminal_hops.clone();
        }
        let mut hops = Vec::new();
        if self.sources.rp_frontend.is_some() {
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

    /// Hops some configured source can see, in path order. Maestro sees
    /// ManifestWork, HostedCluster and NodePool through status feedback
    /// (docs/design.md §2.6); management clusters add what their watches see.
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
            format!("shard: {} of {}", self.shard.index, self.shard.total),
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

fn join_hops(hops: &[Hop]) -> String {
    if hops.is_empty() {
        return "none".to_string();
    }
    hops.iter()
        .map(|h| h.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Applies the shared HTTP overrides to one source, creating it from a base
/// URL when the file lacks it. Returns the source when it exists afterwards
/// so the caller can lay its own settings over it.
fn overlay_source<'a, T>(
    slot: &'a mut Option<T>,
    name: &str,
    o: &HttpOverrides,
    own_settings_given: bool,
    create: impl FnOnce(Url) -> T,
    http: impl Fn(&mut T) -> &mut HttpSourceConfig,
    errors: &mut Vec<FieldError>,
) -> Option<&'a mut T> {
    if slot.is_none() {
        match &o.base_url {
            Some(url) => *slot = Some(create(url.clone())),
            None => {
                if o.any_set() || own_settings_given {
                    let flag = name.replace('_', "-");
                    let env = name.to_ascii_uppercase();
                    errors.push(FieldError::new(
                        format!("sources.{name}.base_url"),
                        format!(
                            "{name} settings were given by flag or environment but the source \
                             has no base URL; set sources.{name}.base_url, \
                             --{flag}-base-url or HCPFLOW_{env}_BASE_URL"
                        ),
                    ));
                }
                return None;
            }
        }
    }
    let cfg = slot.as_mut()?;
    let h = http(cfg);
    if let Some(url) = &o.base_url {
        h.base_url = url.clone();
    }
    if let Some(path) = &o.bearer_token_file {
        h.auth = Auth::BearerTokenFile(path.clone());
    }
    if let Some(path) = &o.ca_file {
        h.ca_file = Some(path.clone());
    }
    if let Some(insecure) = o.insecure_skip_tls_verify {
        h.insecure_skip_tls_verify = insecure;
    }
    if let Some(v) = o.timeout {
        h.timeout = v;
    }
    if let Some(v) = o.page_size {
        h.page_size = v;
    }
    if let Some(v) = o.fast_poll_interval {
        h.fast_poll_interval = v;
    }
    if let Some(v) = o.slow_poll_interval {
        h.slow_poll_interval = v;
    }
    if let Some(v) = o.full_relist_interval {
        h.full_relist_interval = v;
    }
    Some(cfg)
}

fn validate_http(prefix: &str, http: &HttpSourceConfig, errors: &mut Vec<FieldError>) {
    let url = &http.base_url;
    if url.scheme() != "http" && url.scheme() != "https" {
        errors.push(FieldError::new(
            format!("{prefix}.base_url"),
            format!(
                "scheme must be http or https, not `{}` (in {url})",
                url.scheme()
            ),
        ));
    } else if url.host_str().is_none_or(str::is_empty) {
        errors.push(FieldError::new(
            format!("{prefix}.base_url"),
            format!("{url} has no host"),
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        errors.push(FieldError::new(
            format!("{prefix}.base_url"),
            format!("{url} must not carry a query or fragment; the exporter builds its own"),
        ));
    }

    if http.timeout.is_zero() {
        errors.push(FieldError::new(
            format!("{prefix}.timeout"),
            "must be longer than 0s",
        ));
    }
    if http.page_size == 0 || http.page_size > defaults::MAX_PAGE_SIZE {
        errors.push(FieldError::new(
            format!("{prefix}.page_size"),
            format!(
                "is {} but must be between 1 and {}",
                http.page_size,
                defaults::MAX_PAGE_SIZE
            ),
        ));
    }

    let intervals = [
        ("fast_poll_interval", http.fast_poll_interval),
        ("slow_poll_interval", http.slow_poll_interval),
        ("full_relist_interval", http.full_relist_interval),
    ];
    for (key, value) in intervals {
        if value.is_zero() {
            errors.push(FieldError::new(
                format!("{prefix}.{key}"),
                "must be longer than 0s",
            ));
        }
    }
    // In-flight clusters are polled at least as often as settled ones, and a
    // full relist is the slowest loop; anything else is a typo.
    for pair in intervals.windows(2) {
        let [(fast_key, fast), (slow_key, slow)] = pair else {
            continue;
        };
        if !fast.is_zero() && !slow.is_zero() && fast > slow {
            errors.push(FieldError::new(
                format!("{prefix}.{fast_key}"),
                format!(
                    "is {} but must not be longer than {slow_key} ({}); \
                     required: fast_poll_interval <= slow_poll_interval <= full_relist_interval",
                    humantime::format_duration(*fast),
                    humantime::format_duration(*slow),
                ),
            ));
        }
    }

    if let Some(ca) = &http.ca_file
        && let Err(message) = check_ca_file(ca)
    {
        errors.push(FieldError::new(format!("{prefix}.ca_file"), message));
    }
    if let Auth::BearerTokenFile(token) = &http.auth
        && let Err(message) = check_readable_file(token)
    {
        errors.push(FieldError::new(
            format!("{prefix}.auth.bearer_token_file"),
            message,
        ));
    }
}

fn validate_rp(rp: &RpFrontendConfig, errors: &mut Vec<FieldError>) {
    let prefix = format!("sources.{SOURCE_RP_FRONTEND}");
    if !is_api_version(&rp.api_version) {
        errors.push(FieldError::new(
            format!("{prefix}.api_version"),
            format!(
                "`{}` is not an ARM api-version (YYYY-MM-DD or YYYY-MM-DD-preview, e.g. {})",
                rp.api_version,
                default_rp_api_version()
            ),
        ));
    }
    if rp.subscriptions.is_empty() && rp.resource_ids.is_empty() {
        errors.push(FieldError::new(
            prefix.clone(),
            "nothing to read: set subscriptions (listed) and/or resource_ids (fetched one by one)",
        ));
    }
    for (i, sub) in rp.subscriptions.iter().enumerate() {
        if !is_guid(sub) {
            errors.push(FieldError::new(
                format!("{prefix}.subscriptions[{i}]"),
                format!("`{sub}` is not a subscription id (a GUID such as 6b690bec-0c16-4ecb-8f67-781caf40bba7)"),
            ));
        }
    }
    for (i, id) in rp.resource_ids.iter().enumerate() {
        if let Err(why) = check_cluster_resource_id(id) {
            errors.push(FieldError::new(
                format!("{prefix}.resource_ids[{i}]"),
                format!(
                    "`{id}` is not an hcpOpenShiftClusters resource id ({why}); expected \
                     /subscriptions/<guid>/resourceGroups/<group>/providers/\
                     Microsoft.RedHatOpenShift/hcpOpenShiftClusters/<name>"
                ),
            ));
        }
    }
}

fn check_readable_file(path: &Path) -> Result<File, String> {
    let file = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    match file.metadata() {
        Ok(meta) if meta.is_dir() => Err(format!("{} is a directory, not a file", path.display())),
        Ok(_) => Ok(file),
        Err(e) => Err(format!("cannot inspect {}: {e}", path.display())),
    }
}

fn check_ca_file(path: &Path) -> Result<(), String> {
    let mut file = check_readable_file(path)?;
    // A CA bundle is public data; reading it here catches the common mistake
    // of pointing at a key or a DER file before the first poll fails on it.
    let mut text = String::new();
    file.by_ref()
        .take(16 * 1024 * 1024)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {} as PEM text: {e}", path.display()))?;
    if !text.contains("-----BEGIN CERTIFICATE-----") {
        return Err(format!(
            "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        ));
    }
    Ok(())
}

fn is_api_version(v: &str) -> bool {
    let date = v.strip_suffix("-preview").unwrap_or(v);
    let b = date.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

/// ARM subscription ids are GUIDs: 8-4-4-4-12 hex digits.
pub fn is_guid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// Checks the shape of an hcpOpenShiftClusters resource id. ARM compares the
/// fixed segments case-insensitively, and so does this.
pub fn check_cluster_resource_id(id: &str) -> Result<(), &'static str> {
    let Some(rest) = id.strip_prefix('/') else {
        return Err("it must start with /subscriptions/");
    };
    let parts: Vec<&str> = rest.split('/').collect();
    let [subs, sub, rgs, rg, providers, namespace, kind, name] = parts.as_slice() else {
        return Err("wrong number of path segments");
    };
    if !subs.eq_ignore_ascii_case("subscriptions") || !is_guid(sub) {
        return Err("it must start with /subscriptions/<guid>");
    }
    if !rgs.eq_ignore_ascii_case("resourceGroups") || rg.is_empty() {
        return Err("the resource group segment is missing");
    }
    if !providers.eq_ignore_ascii_case("providers")
        || !namespace.eq_ignore_ascii_case("Microsoft.RedHatOpenShift")
        || !kind.eq_ignore_ascii_case("hcpOpenShiftClusters")
    {
        return Err("the provider must be Microsoft.RedHatOpenShift/hcpOpenShiftClusters");
    }
    if name.is_empty() {
        return Err("the cluster name is missing");
    }
    Ok(())
}

/// YAML text → the untyped tree → each section typed on its own.
fn parse_file(text: &str, origin: &str) -> ParsedFile {
    let mut out = ParsedFile {
        config: Config::default(),
        errors: Vec::new(),
        failed: BTreeSet::new(),
    };
    let root: Value = match serde_saphyr::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            out.errors.push(yaml_syntax_error(origin, &e));
            out.failed.insert("sources".to_string());
            return out;
        }
    };
    let root = match strip_nulls(root) {
        Value::Null => return out,
        Value::Object(map) => map,
        other => {
            out.errors.push(FieldError::new(
                origin,
                format!(
                    "the configuration must be a mapping of settings, found {}",
                    kind_of(&other)
                ),
            ));
            out.failed.insert("sources".to_string());
            return out;
        }
    };

    for (key, value) in root {
        match key.as_str() {
            "listen" => {
                if let Some(v) = typed(&mut out, "listen", value) {
                    out.config.listen = v;
                }
            }
            "log_format" => {
                if let Some(v) = typed(&mut out, "log_format", value) {
                    out.config.log_format = v;
                }
            }
            "slo" => {
                if let Some(v) = typed(&mut out, "slo", value) {
                    out.config.slo = v;
                }
            }
            "shard" => {
                if let Some(v) = typed(&mut out, "shard", value) {
                    out.config.shard = v;
                }
            }
            "sources" => parse_sources(&mut out, value),
            _ => out.errors.push(unknown_key("", &key, TOP_KEYS)),
        }
    }
    out
}

fn parse_sources(out: &mut ParsedFile, value: Value) {
    let map = match value {
        Value::Object(map) => map,
        other => {
            out.errors.push(FieldError::new(
                "sources",
                format!(
                    "must be a mapping with keys {}, found {}",
                    SOURCE_KEYS.join(", "),
                    kind_of(&other)
                ),
            ));
            out.failed.insert("sources".to_string());
            return;
        }
    };
    for (key, value) in map {
        let path = format!("sources.{key}");
        match key.as_str() {
            SOURCE_RP_FRONTEND => out.config.sources.rp_frontend = typed(out, &path, value),
            SOURCE_CLUSTERS_SERVICE => {
                out.config.sources.clusters_service = typed(out, &path, value)
            }
            SOURCE_MAESTRO => out.config.sources.maestro = typed(out, &path, value),
            SOURCE_KUBE => parse_kube(out, value),
            _ => {
                out.errors.push(unknown_key("sources", &key, SOURCE_KEYS));
                // A misspelt source name is a source the user wanted.
                out.failed.insert(path);
            }
        }
    }
}

/// `sources.kube`: a list, each entry typed on its own so every bad entry is
/// reported with its index.
fn parse_kube(out: &mut ParsedFile, value: Value) {
    let items = match value {
        Value::Array(items) => items,
        other => {
            out.errors.push(FieldError::new(
                "sources.kube",
                format!(
                    "must be a list of management clusters (- mgmt_cluster: ..., kubeconfig: ...), found {}",
                    kind_of(&other)
                ),
            ));
            out.failed.insert("sources.kube".to_string());
            return;
        }
    };
    for (i, item) in items.into_iter().enumerate() {
        let path = format!("sources.kube[{i}]");
        if let Some(mut cfg) = typed::<KubeSourceConfig>(out, &path, item) {
            if cfg.mgmt_cluster.is_empty()
                && let Some(context) = &cfg.context
            {
                cfg.mgmt_cluster = context.clone();
            }
            out.config.sources.kube.push(cfg);
        } else {
            // One bad entry: the list is incomplete, like a failed section.
            out.failed.insert("sources.kube".to_string());
        }
    }
}

/// Deserializes one section, recording its error (with the full key path)
/// and marking it failed.
fn typed<T: DeserializeOwned>(out: &mut ParsedFile, path: &str, value: Value) -> Option<T> {
    match serde_path_to_error::deserialize::<_, T>(value) {
        Ok(v) => Some(v),
        Err(e) => {
            let inner = e.path().to_string();
            let full = if inner == "." {
                path.to_string()
            } else {
                format!("{path}.{inner}")
            };
            let message = e.into_inner().to_string();
            out.errors.push(FieldError::new(full, message));
            out.failed.insert(path.to_string());
            None
        }
    }
}

fn unknown_key(parent: &str, key: &str, expected: &[&str]) -> FieldError {
    let path = if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    };
    FieldError::new(
        path,
        format!(
            "unknown field `{key}`, expected one of {}",
            expected
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
}

fn yaml_syntax_error(origin: &str, e: &serde_saphyr::Error) -> FieldError {
    // The default rendering carries a source snippet over several lines and
    // hints meant for developers; check-config prints one line per error.
    let rendered = e
        .without_snippet()
        .render_with_formatter(&serde_saphyr::UserMessageFormatter);
    let message = rendered.lines().next().unwrap_or("invalid YAML").trim();
    match e.location() {
        Some(loc) if loc.line() > 0 && !message.contains(" at line ") => FieldError::new(
            origin,
            format!(
                "YAML error: {message} at line {}, column {}",
                loc.line(),
                loc.column()
            ),
        ),
        _ => FieldError::new(origin, format!("YAML error: {message}")),
    }
}

/// A key set to null means the same as the key left out (so `ca_file:` with
/// nothing after it, or `maestro: ~`, takes the default), which is what YAML
/// users expect from an empty value.
fn strip_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, strip_nulls(v)))
                .collect::<Map<String, Value>>(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(strip_nulls).collect()),
        other => other,
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// The current context of a kubeconfig file.
fn current_context(path: &Path) -> Result<String, String> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| format!("{} cannot be read as a kubeconfig: {e}", path.display()))?;
    kubeconfig
        .current_context
        .filter(|c| !c.is_empty())
        .ok_or_else(|| format!("{} has no current-context", path.display()))
}

/// A `mgmt_cluster` is a label value and part of the source name: short,
/// and made of the characters Kubernetes allows in names.
fn check_mgmt_cluster(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(
            "required: the management cluster's name (the mgmt_cluster label \
                    value); set it, or a context whose name is used"
                .to_string(),
        );
    }
    if name.len() > 253 {
        return Err(format!("is {} characters long; at most 253", name.len()));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(format!(
            "`{name}` may only hold letters, digits, `-`, `_` and `.`"
        ));
    }
    Ok(())
}

fn validate_kube(list: &[KubeSourceConfig], errors: &mut Vec<FieldError>) {
    let mut seen: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for (i, k) in list.iter().enumerate() {
        let prefix = format!("sources.{SOURCE_KUBE}[{i}]");
        let at = |key: &str| format!("{prefix}.{key}");
        if let Err(message) = check_mgmt_cluster(&k.mgmt_cluster) {
            errors.push(FieldError::new(at("mgmt_cluster"), message));
        } else if let Some(first) = seen.insert(&k.mgmt_cluster, i) {
            seen.insert(&k.mgmt_cluster, first);
            errors.push(FieldError::new(
                at("mgmt_cluster"),
                format!(
                    "`{}` is also sources.kube[{first}]; each management cluster needs its own \
                     name (it is the mgmt_cluster label and the source kube/<name>)",
                    k.mgmt_cluster
                ),
            ));
        }
        if k.in_cluster && (k.kubeconfig.is_some() || k.context.is_some()) {
            errors.push(FieldError::new(
                at("in_cluster"),
                "in_cluster uses the pod's service account; leave kubeconfig and context unset",
            ));
        }
        if !k.in_cluster
            && let Some(path) = &k.kubeconfig
        {
            match check_readable_file(path) {
                Err(message) => errors.push(FieldError::new(at("kubeconfig"), message)),
                Ok(_) => match kube::config::Kubeconfig::read_from(path) {
                    Err(e) => errors.push(FieldError::new(
                        at("kubeconfig"),
                        format!("{} is not a kubeconfig: {e}", path.display()),
                    )),
                    Ok(file) => {
                        let names: Vec<&str> =
                            file.contexts.iter().map(|c| c.name.as_str()).collect();
                        match &k.context {
                            Some(context) if !names.contains(&context.as_str()) => {
                                errors.push(FieldError::new(
                                    at("context"),
                                    format!(
                                        "no context `{context}` in {} (it has: {})",
                                        path.display(),
                                        if names.is_empty() {
                                            "none".to_string()
                                        } else {
                                            names.join(", ")
                                        }
                                    ),
                                ))
                            }
                            None if file.current_context.as_deref().is_none_or(str::is_empty) => {
                                errors.push(FieldError::new(
                                    at("context"),
                                    format!(
                                        "{} has no current-context; name the context to use",
                                        path.display()
                                    ),
                                ))
                            }
                            _ => {}
                        }
                    }
                },
            }
        }
        if k.context.as_deref() == Some("") {
            errors.push(FieldError::new(at("context"), "must not be empty"));
        }
        if k.mode == KubeMode::Aro && k.environment.trim().is_empty() {
            errors.push(FieldError::new(
                at("environment"),
                "required in aro mode: the <env> of ocm-<env>-<id> namespaces (e.g. int, stg, \
                 prod); without it control planes cannot be matched to their clusters",
            ));
        }
        if k.environment
            .contains(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        {
            errors.push(FieldError::new(
                at("environment"),
                format!(
                    "`{}` cannot be part of a namespace name (letters, digits, `-`)",
                    k.environment
                ),
            ));
        }
        for (key, value) in [
            ("manifestwork_label", &k.manifestwork_label),
            ("name_label", &k.name_label),
            ("control_plane_pod_label", &k.control_plane_pod_label),
        ] {
            if value.trim().is_empty() {
                errors.push(FieldError::new(at(key), "must not be empty"));
            }
        }
        if k.watch.as_ref().is_some_and(Vec::is_empty) {
            errors.push(FieldError::new(
                at("watch"),
                "is an empty list; leave it out to watch the mode's default kinds",
            ));
        }
        for (key, value) in [
            ("min_backoff", k.min_backoff),
            ("max_backoff", k.max_backoff),
        ] {
            if value.is_zero() {
                errors.push(FieldError::new(at(key), "must be longer than 0s"));
            }
        }
        if k.watch_timeout < Duration::from_secs(1) {
            errors.push(FieldError::new(
                at("watch_timeout"),
                "must be at least 1s (the API server counts it in whole seconds)",
            ));
        }
        if !k.min_backoff.is_zero() && k.min_backoff > k.max_backoff {
            errors.push(FieldError::new(
                at("min_backoff"),
                format!(
                    "is {} but must not be longer than max_backoff ({})",
                    humantime::format_duration(k.min_backoff),
                    humantime::format_duration(k.max_backoff)
                ),
            ));
        }
        if k.page_size == 0 || k.page_size > defaults::MAX_PAGE_SIZE {
            errors.push(FieldError::new(
                at("page_size"),
                format!(
                    "is {} but must be between 1 and {}",
                    k.page_size,
                    defaults::MAX_PAGE_SIZE
                ),
            ));
        }
    }
}
