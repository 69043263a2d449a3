//! Configuration: the YAML file, flags and `HCPFLOW_*` variables, validated.
//!
//! Shapes only for now; loading, flags, env and validation live here too.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use url::Url;

use crate::model::Hop;

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

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SloConfig {
    /// A creation is good when it completes within this (DESIGN section 5).
    #[serde(with = "humantime_serde")]
    pub creation_target: Duration,
    /// Hops whose readiness completes a creation. Empty: derived from the
    /// sources in scope (hosted_cluster when visible, plus rp_frontend when
    /// the RP is in scope; clusters_service when neither is).
    pub terminal_hops: Vec<Hop>,
}

impl Default for SloConfig {
    fn default() -> Self {
        SloConfig {
            creation_target: Duration::from_secs(1200),
            terminal_hops: Vec::new(),
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

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct SourcesConfig {
    pub rp_frontend: Option<RpFrontendConfig>,
    pub clusters_service: Option<ClustersServiceConfig>,
    pub maestro: Option<MaestroConfig>,
}

/// Settings every HTTP-polled source shares.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HttpSourceConfig {
    pub base_url: Url,
    #[serde(default)]
    pub auth: Auth,
    /// PEM bundle of CAs to trust in addition to the system roots.
    #[serde(default)]
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
#[serde(deny_unknown_fields)]
pub struct RpFrontendConfig {
    #[serde(flatten)]
    pub http: HttpSourceConfig,
    #[serde(default = "default_rp_api_version")]
    pub api_version: String,
    /// Subscriptions whose hcpOpenShiftClusters are listed.
    #[serde(default)]
    pub subscriptions: Vec<String>,
    /// Individual cluster resource ids to GET.
    #[serde(default)]
    pub resource_ids: Vec<String>,
}

pub fn default_rp_api_version() -> String {
    "2024-06-10-preview".to_string()
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClustersServiceConfig {
    #[serde(flatten)]
    pub http: HttpSourceConfig,
    #[serde(default)]
    pub api: ClustersServiceApi,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Default)]
pub enum ClustersServiceApi {
    /// `/api/aro_hcp/v1alpha1` (what ARO HCP uses).
    #[default]
    #[serde(rename = "aro_hcp/v1alpha1")]
    AroHcpV1alpha1,
    /// `/api/clusters_mgmt/v1`.
    #[serde(rename = "clusters_mgmt/v1")]
    ClustersMgmtV1,
}

impl ClustersServiceApi {
    pub fn path_prefix(self) -> &'static str {
        match self {
            ClustersServiceApi::AroHcpV1alpha1 => "/api/aro_hcp/v1alpha1",
            ClustersServiceApi::ClustersMgmtV1 => "/api/clusters_mgmt/v1",
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MaestroConfig {
    #[serde(flatten)]
    pub http: HttpSourceConfig,
}
