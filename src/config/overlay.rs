//! Laying flag and environment values over the file's.
//!
//! The override shapes are plain data, defined here rather than by the
//! command line, so configuration never depends on how values were parsed:
//! `cli` maps its clap arguments into [`Overrides`], and tests or other
//! front ends can build one directly.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use url::Url;

use super::error::FieldError;
use super::types::{
    Auth, ClustersServiceApi, ClustersServiceConfig, Config, HttpSourceConfig, KubeMode,
    KubeSourceConfig, LogFormat, MaestroConfig, RpFrontendConfig, SOURCE_CLUSTERS_SERVICE,
    SOURCE_MAESTRO, SOURCE_RP_FRONTEND,
};
use crate::model::Hop;

/// Every `serve` setting that can come from outside the file. `None` leaves
/// the file (or the default) in charge, so an unset flag never beats a key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    pub listen: Option<SocketAddr>,
    pub log_format: Option<LogFormat>,
    pub shutdown_grace: Option<Duration>,
    pub state_dir: Option<PathBuf>,
    pub slo_creation_target: Option<Duration>,
    pub slo_terminal_hops: Option<Vec<Hop>>,
    /// Per-hop budgets to replace; hops not named keep theirs.
    pub slo_hop_budgets: Vec<(Hop, Duration)>,
    pub shard: Option<u32>,
    pub total_shards: Option<u32>,
    pub history_retention: Option<Duration>,
    pub history_max_per_cluster: Option<usize>,
    pub rp_frontend: RpFrontendOverrides,
    pub clusters_service: ClustersServiceOverrides,
    pub maestro: HttpOverrides,
    pub kube: KubeOverrides,
    pub ui_trace_url_template: Option<String>,
    pub ui_grafana_url: Option<Url>,
}

/// The HTTP settings every polled source shares.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HttpOverrides {
    pub base_url: Option<Url>,
    pub bearer_token_file: Option<PathBuf>,
    pub ca_file: Option<PathBuf>,
    pub insecure_skip_tls_verify: Option<bool>,
    pub timeout: Option<Duration>,
    pub page_size: Option<u32>,
    pub fast_poll_interval: Option<Duration>,
    pub slow_poll_interval: Option<Duration>,
    pub full_relist_interval: Option<Duration>,
}

impl HttpOverrides {
    pub fn any_set(&self) -> bool {
        *self != HttpOverrides::default()
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct RpFrontendOverrides {
    pub http: HttpOverrides,
    pub api_version: Option<String>,
    pub subscriptions: Option<Vec<String>>,
    pub resource_ids: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClustersServiceOverrides {
    pub http: HttpOverrides,
    pub api: Option<ClustersServiceApi>,
}

/// Management clusters named outside the file. Naming any replaces the
/// file's list; `mode` and `environment` apply to every management cluster.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KubeOverrides {
    pub kubeconfig: Option<PathBuf>,
    /// `context` or `name=context`, one management cluster each.
    pub contexts: Option<Vec<String>>,
    /// The name of the cluster this pod runs in, watched through its
    /// service account.
    pub in_cluster: Option<String>,
    pub mode: Option<KubeMode>,
    pub environment: Option<String>,
}

impl KubeOverrides {
    /// Whether the overrides name management clusters (and so replace the
    /// file's list).
    pub fn names_clusters(&self) -> bool {
        self.kubeconfig.is_some() || self.contexts.is_some() || self.in_cluster.is_some()
    }
}

impl Config {
    /// Lays flag/environment values over the file's. A `--<source>-base-url`
    /// creates a source the file does not have; other per-source settings
    /// without a base URL anywhere are an error rather than silently unused.
    pub fn apply_overrides(&mut self, o: &Overrides) -> Vec<FieldError> {
        self.apply_overrides_except(o, &BTreeSet::new())
    }

    /// [`Config::apply_overrides`], leaving alone the source sections that
    /// failed to parse (their error is already reported, and creating them
    /// from a flag would hide it).
    pub(super) fn apply_overrides_except(
        &mut self,
        o: &Overrides,
        failed: &BTreeSet<String>,
    ) -> Vec<FieldError> {
        let mut errors = Vec::new();
        if let Some(listen) = o.listen {
            self.listen = listen;
        }
        if let Some(format) = o.log_format {
            self.log_format = format;
        }
        if let Some(grace) = o.shutdown_grace {
            self.shutdown_grace = grace;
        }
        if let Some(retention) = o.history_retention {
            self.history.retention = retention;
        }
        if let Some(max) = o.history_max_per_cluster {
            self.history.max_per_cluster = max;
        }
        if let Some(dir) = &o.state_dir {
            self.state_dir = Some(dir.clone());
        }
        if let Some(target) = o.slo_creation_target {
            self.slo.creation_target = target;
        }
        for (hop, budget) in &o.slo_hop_budgets {
            self.slo.hop_budgets.set(*hop, *budget);
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
        if let Some(template) = &o.ui_trace_url_template {
            self.ui.trace_url_template = Some(template.clone());
        }
        if let Some(url) = &o.ui_grafana_url {
            self.ui.grafana_url = Some(url.clone());
        }

        let rp = &o.rp_frontend.http;
        let rp_own_set = o.rp_frontend.api_version.is_some()
            || o.rp_frontend.subscriptions.is_some()
            || o.rp_frontend.resource_ids.is_some();
        if !failed.contains("sources.rp_frontend")
            && let Some(cfg) = overlay_source(
                &mut self.sources.rp_frontend,
                SOURCE_RP_FRONTEND,
                rp,
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

        let cs = &o.clusters_service.http;
        if !failed.contains("sources.clusters_service")
            && let Some(cfg) = overlay_source(
                &mut self.sources.clusters_service,
                SOURCE_CLUSTERS_SERVICE,
                cs,
                o.clusters_service.api.is_some(),
                ClustersServiceConfig::new,
                |c| &mut c.http,
                &mut errors,
            )
            && let Some(api) = o.clusters_service.api
        {
            cfg.api = api;
        }

        if !failed.contains("sources.maestro") {
            overlay_source(
                &mut self.sources.maestro,
                SOURCE_MAESTRO,
                &o.maestro,
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
    fn overlay_kube(&mut self, o: &KubeOverrides, errors: &mut Vec<FieldError>) {
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

/// The current context of a kubeconfig file.
fn current_context(path: &Path) -> Result<String, String> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| format!("{} cannot be read as a kubeconfig: {e}", path.display()))?;
    kubeconfig
        .current_context
        .filter(|c| !c.is_empty())
        .ok_or_else(|| format!("{} has no current-context", path.display()))
}
