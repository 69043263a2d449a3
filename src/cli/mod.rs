//! The command line: `serve`, `demo`, `diagnose`, `check-config`, `bench`.
//!
//! Every `serve` setting is a flag and an `HCPFLOW_*` variable as well as a
//! file key; clap resolves flag over variable, and [`Config::load`] lays the
//! result over the file. Flags carry no defaults of their own (an unset flag is
//! `None`), otherwise a default would silently beat the file. Credentials are
//! only ever named by file path here.

use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use url::Url;

use crate::config::{
    ClustersServiceApi, ClustersServiceOverrides, Config, ConfigError, HttpOverrides,
    KubeOverrides, LogFormat, Overrides, RpFrontendOverrides, check_config,
};
use crate::model::Hop;

// The simulated world's subcommands, built with the `sim` feature only.
#[cfg(feature = "sim")]
mod tools;
#[cfg(feature = "sim")]
pub use tools::{BenchArgs, DemoArgs};

/// Follows every OpenShift hosted control plane creation hop by hop (RP
/// frontend, Clusters Service, Maestro, ManifestWork, HostedCluster, control
/// plane, ManagedCluster, NodePool) and exports it as Prometheus metrics and
/// traces.
#[derive(Parser, Debug, Clone, PartialEq)]
#[command(name = "hcp-flow", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// [`Parser::parse`], then the rules between flags that clap's
    /// attributes cannot state; an error exits as clap's own do.
    pub fn parse_checked() -> Cli {
        Cli::parse().checked().unwrap_or_else(|e| e.exit())
    }

    /// The rules between flags' values that clap's attributes cannot
    /// state (they relate flags, not values), as clap errors.
    pub fn checked(self) -> Result<Cli, clap::Error> {
        #[cfg(feature = "sim")]
        if let Command::Demo(demo) = &self.command {
            demo.check()?;
        }
        Ok(self)
    }
}

// ServeArgs is large, but a Command is built once per process; boxing it
// would only make matching on it clumsier for main.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug, Clone, PartialEq)]
pub enum Command {
    /// Run the exporter against real upstreams, configured by file, flags and
    /// HCPFLOW_* variables (flag > variable > file > default).
    Serve(ServeArgs),
    /// Run a simulated fleet and the exporter against it in one process.
    #[cfg(feature = "sim")]
    Demo(DemoArgs),
    /// Where is this creation stuck, since when, and why: walk every hop of
    /// one cluster live with serve's configuration and credentials (or ask a
    /// running exporter with --from), print each hop and a verdict. Exit
    /// code: 0 ready, 1 in progress within budget (or at risk), 2 stuck past
    /// a budget, 3 failed, 4 a hop could not be read or the cluster was not
    /// found, 5 degraded (no operation in flight; a hop regressed after the
    /// creation completed). The verdict judges the operation in flight: the
    /// creation or the deletion.
    Diagnose(DiagnoseArgs),
    /// Load and validate a configuration file; print every error as
    /// `<field.path>: <message>` and exit non-zero if there is any.
    CheckConfig(CheckConfigArgs),
    /// Measure scrape latency and memory against a simulated fleet.
    #[cfg(feature = "sim")]
    Bench(BenchArgs),
}

impl Command {
    /// The log format asked for on the command line or in the environment;
    /// `None` for `serve` without one means "whatever the file says".
    pub fn log_format(&self) -> Option<LogFormat> {
        match self {
            Command::Serve(a) => a.overrides.log_format,
            #[cfg(feature = "sim")]
            Command::Demo(a) => Some(a.log_format),
            #[cfg(feature = "sim")]
            Command::Bench(a) => Some(a.log_format),
            Command::Diagnose(a) => a.serve.overrides.log_format.or(Some(LogFormat::Text)),
            Command::CheckConfig(_) => Some(LogFormat::Text),
        }
    }
}

#[derive(Args, Debug, Clone, PartialEq)]
pub struct ServeArgs {
    /// YAML configuration file. Optional: flags and variables alone can
    /// configure everything.
    #[arg(long, env = "HCPFLOW_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    #[command(flatten)]
    pub overrides: ServeOverrides,
}

impl ServeArgs {
    /// The effective, validated configuration.
    pub fn load_config(&self) -> Result<Config, ConfigError> {
        Config::load(self.config.as_deref(), &Overrides::from(&self.overrides))
    }
}

/// Every `serve` setting as an optional flag/variable. `None` leaves the file
/// (or the default) in charge.
#[derive(Args, Debug, Clone, Default, PartialEq)]
pub struct ServeOverrides {
    /// Address the HTTP server (/metrics, /healthz, /readyz, /api/v1) listens
    /// on. Default: 0.0.0.0:9464. Config key: listen.
    #[arg(long, env = "HCPFLOW_LISTEN", value_name = "ADDR")]
    pub listen: Option<SocketAddr>,

    /// Log line format: text (human-readable) or json (one object per line).
    /// Default: text. Config key: log_format.
    #[arg(long, env = "HCPFLOW_LOG_FORMAT", value_enum, value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,

    /// On SIGTERM: how long in-flight scrapes and the last spans may take
    /// before the process exits anyway (e.g. 10s; keep it below the pod's
    /// terminationGracePeriodSeconds). Default: 10s. Config key:
    /// shutdown_grace.
    #[arg(
        long,
        env = "HCPFLOW_SHUTDOWN_GRACE",
        value_name = "DURATION",
        value_parser = parse_duration
    )]
    pub shutdown_grace: Option<Duration>,

    /// How long each cluster keeps its ended operations (served in its JSON,
    /// drawn on its page, kept across restarts). Default: 7d. Config key:
    /// history.retention.
    #[arg(
        long,
        env = "HCPFLOW_HISTORY_RETENTION",
        value_name = "DURATION",
        value_parser = parse_duration
    )]
    pub history_retention: Option<Duration>,

    /// At most this many ended operations per cluster, the oldest dropped
    /// first (0 keeps none). Default: 20. Config key:
    /// history.max_per_cluster.
    #[arg(long, env = "HCPFLOW_HISTORY_MAX_PER_CLUSTER", value_name = "N")]
    pub history_max_per_cluster: Option<usize>,

    /// Directory where the times only the exporter observed (phase changes
    /// upstream gives no time for, first readiness, completion, SLO verdicts)
    /// are kept across restarts, in one file replaced atomically every 15s
    /// when it changed and at shutdown. Created if missing; it must be
    /// writable, else the exporter does not start. A corrupt or
    /// other-version file is logged and ignored. Default: none (those times
    /// restart with the process and are marked observed in the JSON).
    /// Config key: state_dir.
    #[arg(long, env = "HCPFLOW_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// A creation is good when it completes within this long (e.g. 20m, 1h).
    /// Default: 20m. Config key: slo.creation_target.
    #[arg(
        long,
        env = "HCPFLOW_SLO_CREATION_TARGET",
        value_name = "DURATION",
        value_parser = parse_duration
    )]
    pub slo_creation_target: Option<Duration>,

    /// Comma-separated hops whose readiness completes a creation (e.g.
    /// hosted_cluster,rp_frontend). Default: derived from the sources
    /// (hosted_cluster with Maestro, plus rp_frontend with the RP frontend;
    /// clusters_service when neither). Config key: slo.terminal_hops.
    #[arg(
        long,
        env = "HCPFLOW_SLO_TERMINAL_HOPS",
        value_name = "HOPS",
        value_delimiter = ',',
        value_parser = parse_hop
    )]
    pub slo_terminal_hops: Option<Vec<Hop>>,

    /// How long a hop may stay pending, progressing or unknown while its
    /// creation is in flight, as `hop=duration` pairs (e.g.
    /// `hosted_cluster=15m,node_pool=30m`); hops not named keep the file's
    /// or the default budget. A never-Available HostedCluster Degraded past
    /// its budget is failed. Config key: slo.hop_budgets.<hop>.
    #[arg(
        long,
        env = "HCPFLOW_SLO_HOP_BUDGETS",
        value_name = "HOP=DURATION",
        value_delimiter = ',',
        value_parser = parse_hop_budget
    )]
    pub slo_hop_budgets: Option<Vec<(Hop, Duration)>>,

    /// This instance's shard, 0-based; it follows the clusters whose
    /// SHA-256(cluster_id) mod total-shards equals it. Default: 0. Config
    /// key: shard.index.
    #[arg(long, env = "HCPFLOW_SHARD", value_name = "INDEX")]
    pub shard: Option<u32>,

    /// How many instances split the fleet. Default: 1. Config key:
    /// shard.total.
    #[arg(long, env = "HCPFLOW_TOTAL_SHARDS", value_name = "N")]
    pub total_shards: Option<u32>,

    /// The web UI links each creation's trace to this URL, with {trace_id}
    /// replaced by the trace id (e.g.
    /// https://jaeger.example/trace/{trace_id}). Default: none (the trace id
    /// is shown without a link). Config key: ui.trace_url_template.
    #[arg(long, env = "HCPFLOW_UI_TRACE_URL_TEMPLATE", value_name = "TEMPLATE")]
    pub ui_trace_url_template: Option<String>,

    /// Grafana's base URL; the web UI's cluster page links the cluster
    /// dashboard (uid hcp-flow-cluster) there. Default: none (no link).
    /// Config key: ui.grafana_url.
    #[arg(
        long,
        env = "HCPFLOW_UI_GRAFANA_URL",
        value_name = "URL",
        value_parser = parse_url
    )]
    pub ui_grafana_url: Option<Url>,

    #[command(flatten)]
    pub rp_frontend: RpFrontendFlags,

    #[command(flatten)]
    pub clusters_service: ClustersServiceFlags,

    #[command(flatten)]
    pub maestro: MaestroFlags,

    #[command(flatten)]
    pub kube: KubeFlags,
}

/// Management clusters watched over the Kubernetes API (hops manifestwork,
/// hosted_cluster, control_plane, managed_cluster, node_pool). Any of
/// `--kubeconfig`, `--kube-contexts`, `--kube-in-cluster` replaces the
/// file's `sources.kube` list; `--kube-mode` and `--kube-environment` apply
/// to every management cluster, from the file or from flags.
#[derive(Args, Debug, Clone, Default, PartialEq)]
#[command(next_help_heading = "Management clusters (Kubernetes watches)")]
pub struct KubeFlags {
    /// Kubeconfig file of the management clusters. Alone, its current context
    /// is watched, named after the context; with --kube-contexts, those
    /// contexts. Config key: sources.kube[].kubeconfig.
    #[arg(long = "kubeconfig", env = "HCPFLOW_KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// Comma-separated contexts to watch, one management cluster each, as
    /// `context` (mgmt_cluster = the context's name) or `name=context`. From
    /// --kubeconfig, else from the default kubeconfig (KUBECONFIG or
    /// ~/.kube/config). Config keys: sources.kube[].context and
    /// sources.kube[].mgmt_cluster.
    #[arg(
        long = "kube-contexts",
        env = "HCPFLOW_KUBE_CONTEXTS",
        value_name = "CONTEXTS",
        value_delimiter = ','
    )]
    pub contexts: Option<Vec<String>>,

    /// Watch the cluster this pod runs in (its service account), labelled
    /// mgmt_cluster=NAME. Config keys: sources.kube[].in_cluster and
    /// sources.kube[].mgmt_cluster.
    #[arg(
        long = "kube-in-cluster",
        env = "HCPFLOW_KUBE_IN_CLUSTER",
        value_name = "NAME"
    )]
    pub in_cluster: Option<String>,

    /// How management-cluster objects map to cluster ids: aro (label
    /// api.openshift.com/id, ocm-<env>-<id> namespaces) or self_managed (MCE:
    /// spec.clusterID, else <namespace>/<name>). Default: aro. Config key:
    /// sources.kube[].mode.
    #[arg(
        long = "kube-mode",
        env = "HCPFLOW_KUBE_MODE",
        value_enum,
        value_name = "MODE"
    )]
    pub mode: Option<crate::sources::kube::KubeMode>,

    /// The <env> of ARO namespaces ocm-<env>-<id>[-<name>] (e.g. int, stg,
    /// prod). Used only to read a cluster's id from its HostedCluster,
    /// NodePool or control-plane namespace when the object lacks the
    /// api.openshift.com/id label: a wrong value leaves such clusters
    /// unfollowed, and a HostedCluster namespace that contradicts it is
    /// logged once as a warning. Required in aro mode, unused in
    /// self_managed mode. Config key: sources.kube[].environment.
    #[arg(
        long = "kube-environment",
        env = "HCPFLOW_KUBE_ENVIRONMENT",
        value_name = "ENV"
    )]
    pub environment: Option<String>,
}

impl From<&ServeOverrides> for Overrides {
    fn from(o: &ServeOverrides) -> Overrides {
        Overrides {
            listen: o.listen,
            log_format: o.log_format,
            shutdown_grace: o.shutdown_grace,
            history_retention: o.history_retention,
            history_max_per_cluster: o.history_max_per_cluster,
            state_dir: o.state_dir.clone(),
            slo_creation_target: o.slo_creation_target,
            slo_terminal_hops: o.slo_terminal_hops.clone(),
            slo_hop_budgets: o.slo_hop_budgets.clone().unwrap_or_default(),
            shard: o.shard,
            total_shards: o.total_shards,
            rp_frontend: RpFrontendOverrides {
                http: o.rp_frontend.http(),
                api_version: o.rp_frontend.api_version.clone(),
                subscriptions: o.rp_frontend.subscriptions.clone(),
                resource_ids: o.rp_frontend.resource_ids.clone(),
            },
            clusters_service: ClustersServiceOverrides {
                http: o.clusters_service.http(),
                api: o.clusters_service.api,
            },
            maestro: o.maestro.http(),
            kube: KubeOverrides::from(&o.kube),
            ui_trace_url_template: o.ui_trace_url_template.clone(),
            ui_grafana_url: o.ui_grafana_url.clone(),
        }
    }
}

impl From<&KubeFlags> for KubeOverrides {
    fn from(k: &KubeFlags) -> KubeOverrides {
        KubeOverrides {
            kubeconfig: k.kubeconfig.clone(),
            contexts: k.contexts.clone(),
            in_cluster: k.in_cluster.clone(),
            mode: k.mode,
            environment: k.environment.clone(),
        }
    }
}

/// One flag group per source. Clap cannot prefix the flags of a flattened
/// struct, so the three groups are generated; `id` must be unique across the
/// whole command, hence set explicitly. The defaults named in the help texts
/// are checked against `config::defaults` by a test.
macro_rules! source_flags {
    (
        $(#[$sm:meta])*
        $name:ident {
            flag: $flag:literal,
            env: $env:literal,
            key: $key:literal,
            label: $label:literal,
        }
        { $($extra:tt)* }
    ) => {
        $(#[$sm])*
        #[derive(Args, Debug, Clone, Default, PartialEq)]
        #[command(next_help_heading = concat!($label, " source"))]
        pub struct $name {
            #[arg(
                id = concat!($flag, "-base-url"),
                long = concat!($flag, "-base-url"),
                env = concat!("HCPFLOW_", $env, "_BASE_URL"),
                value_name = "URL",
                value_parser = parse_url,
                help = concat!(
                    "Base URL of the ", $label, " (http or https). Given without a sources.",
                    $key, " section in the file, it turns the source on. Config key: sources.",
                    $key, ".base_url"
                )
            )]
            pub base_url: Option<Url>,

            #[arg(
                id = concat!($flag, "-bearer-token-file"),
                long = concat!($flag, "-bearer-token-file"),
                env = concat!("HCPFLOW_", $env, "_BEARER_TOKEN_FILE"),
                value_name = "FILE",
                help = concat!(
                    "File holding the bearer token for the ", $label,
                    "; re-read when it changes, never logged (tokens are never taken from flags). \
                     Default: no authentication. Config key: sources.",
                    $key, ".auth.bearer_token_file"
                )
            )]
            pub bearer_token_file: Option<PathBuf>,

            #[arg(
                id = concat!($flag, "-ca-file"),
                long = concat!($flag, "-ca-file"),
                env = concat!("HCPFLOW_", $env, "_CA_FILE"),
                value_name = "FILE",
                help = concat!(
                    "PEM bundle of CAs to trust for the ", $label,
                    ", in addition to the system roots. Config key: sources.", $key, ".ca_file"
                )
            )]
            pub ca_file: Option<PathBuf>,

            #[arg(
                id = concat!($flag, "-insecure-skip-tls-verify"),
                long = concat!($flag, "-insecure-skip-tls-verify"),
                env = concat!("HCPFLOW_", $env, "_INSECURE_SKIP_TLS_VERIFY"),
                value_name = "BOOL",
                num_args = 0..=1,
                require_equals = true,
                default_missing_value = "true",
                value_parser = clap::builder::BoolishValueParser::new(),
                help = concat!(
                    "Turn TLS certificate verification off for the ", $label,
                    " (test setups only; logged as a warning). Default: false. Config key: sources.",
                    $key, ".insecure_skip_tls_verify"
                )
            )]
            pub insecure_skip_tls_verify: Option<bool>,

            #[arg(
                id = concat!($flag, "-timeout"),
                long = concat!($flag, "-timeout"),
                env = concat!("HCPFLOW_", $env, "_TIMEOUT"),
                value_name = "DURATION",
                value_parser = parse_duration,
                help = concat!(
                    "Timeout of one request to the ", $label,
                    ". Default: 10s. Config key: sources.", $key, ".timeout"
                )
            )]
            pub timeout: Option<Duration>,

            #[arg(
                id = concat!($flag, "-page-size"),
                long = concat!($flag, "-page-size"),
                env = concat!("HCPFLOW_", $env, "_PAGE_SIZE"),
                value_name = "N",
                help = concat!(
                    "Items per page when listing the ", $label,
                    " (1 to 10000). Default: 100. Config key: sources.", $key, ".page_size"
                )
            )]
            pub page_size: Option<u32>,

            #[arg(
                id = concat!($flag, "-fast-poll-interval"),
                long = concat!($flag, "-fast-poll-interval"),
                env = concat!("HCPFLOW_", $env, "_FAST_POLL_INTERVAL"),
                value_name = "DURATION",
                value_parser = parse_duration,
                help = concat!(
                    "Poll interval of the ", $label,
                    " while a creation is in flight. Default: 15s. Config key: sources.",
                    $key, ".fast_poll_interval"
                )
            )]
            pub fast_poll_interval: Option<Duration>,

            #[arg(
                id = concat!($flag, "-slow-poll-interval"),
                long = concat!($flag, "-slow-poll-interval"),
                env = concat!("HCPFLOW_", $env, "_SLOW_POLL_INTERVAL"),
                value_name = "DURATION",
                value_parser = parse_duration,
                help = concat!(
                    "Poll interval of the ", $label,
                    " when every cluster is settled. Default: 2m. Config key: sources.",
                    $key, ".slow_poll_interval"
                )
            )]
            pub slow_poll_interval: Option<Duration>,

            #[arg(
                id = concat!($flag, "-full-relist-interval"),
                long = concat!($flag, "-full-relist-interval"),
                env = concat!("HCPFLOW_", $env, "_FULL_RELIST_INTERVAL"),
                value_name = "DURATION",
                value_parser = parse_duration,
                help = concat!(
                    "Interval of a full relist of the ", $label,
                    ", which catches deletions. Default: 10m. Config key: sources.",
                    $key, ".full_relist_interval"
                )
            )]
            pub full_relist_interval: Option<Duration>,

            $($extra)*
        }

        impl $name {
            /// The shared HTTP settings of this group.
            pub fn http(&self) -> HttpOverrides {
                HttpOverrides {
                    base_url: self.base_url.clone(),
                    bearer_token_file: self.bearer_token_file.clone(),
                    ca_file: self.ca_file.clone(),
                    insecure_skip_tls_verify: self.insecure_skip_tls_verify,
                    timeout: self.timeout,
                    page_size: self.page_size,
                    fast_poll_interval: self.fast_poll_interval,
                    slow_poll_interval: self.slow_poll_interval,
                    full_relist_interval: self.full_relist_interval,
                }
            }
        }
    };
}

source_flags! {
    /// Flags of the ARO HCP RP frontend source (hop rp_frontend).
    RpFrontendFlags {
        flag: "rp-frontend",
        env: "RP_FRONTEND",
        key: "rp_frontend",
        label: "RP frontend",
    }
    {
        /// ARM api-version used on the RP frontend. Default: 2024-06-10-preview.
        /// Config key: sources.rp_frontend.api_version.
        #[arg(
            long = "rp-frontend-api-version",
            env = "HCPFLOW_RP_FRONTEND_API_VERSION",
            value_name = "VERSION"
        )]
        pub api_version: Option<String>,

        /// Comma-separated subscription ids whose hcpOpenShiftClusters are
        /// listed. Replaces the file's list. Config key:
        /// sources.rp_frontend.subscriptions.
        #[arg(
            long = "rp-frontend-subscriptions",
            env = "HCPFLOW_RP_FRONTEND_SUBSCRIPTIONS",
            value_name = "IDS",
            value_delimiter = ','
        )]
        pub subscriptions: Option<Vec<String>>,

        /// Comma-separated hcpOpenShiftClusters resource ids read one by one.
        /// Replaces the file's list. Config key: sources.rp_frontend.resource_ids.
        #[arg(
            long = "rp-frontend-resource-ids",
            env = "HCPFLOW_RP_FRONTEND_RESOURCE_IDS",
            value_name = "IDS",
            value_delimiter = ','
        )]
        pub resource_ids: Option<Vec<String>>,
    }
}

source_flags! {
    /// Flags of the Clusters Service source (hop clusters_service).
    ClustersServiceFlags {
        flag: "clusters-service",
        env: "CLUSTERS_SERVICE",
        key: "clusters_service",
        label: "Clusters Service",
    }
    {
        /// Clusters Service API to read: aro_hcp/v1alpha1 (ARO HCP) or
        /// clusters_mgmt/v1. Default: aro_hcp/v1alpha1. Config key:
        /// sources.clusters_service.api.
        #[arg(
            long = "clusters-service-api",
            env = "HCPFLOW_CLUSTERS_SERVICE_API",
            value_enum,
            value_name = "API"
        )]
        pub api: Option<ClustersServiceApi>,
    }
}

source_flags! {
    /// Flags of the Maestro source (hop maestro_bundle, and manifestwork,
    /// hosted_cluster and node_pool through status feedback).
    MaestroFlags {
        flag: "maestro",
        env: "MAESTRO",
        key: "maestro",
        label: "Maestro server",
    }
    {}
}

#[derive(Args, Debug, Clone, PartialEq)]
pub struct DiagnoseArgs {
    /// The creation to diagnose: an ARM resource id
    /// (/subscriptions/…/hcpOpenShiftClusters/NAME), a Clusters Service
    /// cluster id, or a HostedCluster NAMESPACE/NAME (self-managed).
    #[arg(value_name = "TARGET")]
    pub target: String,

    /// How to print the result: table (a person at a terminal), json (a
    /// script), markdown (an incident document with the whole timeline and
    /// the trace id).
    #[arg(long, value_enum, default_value = "table", value_name = "FORMAT")]
    pub output: crate::diagnose::render::Output,

    /// Ask a running exporter at this base URL (its /api/v1/clusters/{id},
    /// /readyz and published budgets) instead of walking the upstreams.
    #[arg(long, value_name = "URL")]
    pub from: Option<Url>,

    /// Walking live: how long to wait for every source's first list before
    /// judging with what was read (a source still not listed is reported as
    /// unreadable, exit code 4).
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = parse_duration)]
    pub wait: Duration,

    /// Walk again every --interval and redraw (table output) until the
    /// verdict says the operation ended (ready, failed, degraded or deleted)
    /// or Ctrl-C; exit with the last verdict's code. Works with --from.
    #[arg(long)]
    pub watch: bool,

    /// With --watch: how long between two walks.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = parse_duration, requires = "watch")]
    pub interval: Duration,

    /// serve's configuration: the same file, flags and HCPFLOW_* variables
    /// (state_dir is never written by diagnose, and no traces are sent).
    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Args, Debug, Clone, PartialEq)]
pub struct CheckConfigArgs {
    /// The YAML configuration file to check (alone: flags and HCPFLOW_*
    /// variables are not applied).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

impl CheckConfigArgs {
    /// Checks the file: on success writes "<file>: OK" and a summary to
    /// `out`; otherwise writes one `<field.path>: <message>` line per error
    /// to `err`. Returns whether the file is valid (the exit status).
    pub fn run(&self, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<bool> {
        match check_config(&self.file) {
            Ok(config) => {
                writeln!(out, "{}: OK", self.file.display())?;
                for line in config.summary().lines() {
                    writeln!(out, "  {line}")?;
                }
                Ok(true)
            }
            Err(errors) => {
                for e in &errors {
                    writeln!(err, "{e}")?;
                }
                Ok(false)
            }
        }
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim())
        .map_err(|e| format!("{e} (use a duration such as 15s, 2m or 1h30m)"))
}

fn parse_url(s: &str) -> Result<Url, String> {
    Url::parse(s.trim()).map_err(|e| format!("{e} (expected e.g. https://host:8443)"))
}

fn parse_hop(s: &str) -> Result<Hop, String> {
    Hop::parse(s.trim()).ok_or_else(|| {
        format!(
            "unknown hop `{s}`; hops are {}",
            Hop::ALL.map(Hop::as_str).join(", ")
        )
    })
}

fn parse_hop_budget(s: &str) -> Result<(Hop, Duration), String> {
    let (hop, budget) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not hop=duration, e.g. hosted_cluster=15m"))?;
    let budget = parse_duration(budget.trim())?;
    if budget.is_zero() {
        return Err(format!("the budget of {hop} must be longer than 0s"));
    }
    Ok((parse_hop(hop)?, budget))
}
