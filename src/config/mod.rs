//! Configuration: the YAML file, flags and `HCPFLOW_*` variables, validated.
//!
//! Precedence is flag > environment > file > default. Clap resolves flag over
//! environment, the command line hands the result over as [`Overrides`], and
//! [`Config::load`] lays those over the file. Every problem is reported with the dotted path of the key it concerns
//! (`sources.maestro.fast_poll_interval`), and all of them at once, because an
//! SRE fixing a config in a pipeline should not have to iterate one error at a
//! time.
//!
//! The file is read in two steps: YAML into an untyped tree (syntax errors with
//! line and column), then each section into its typed shape on its own, so one
//! bad section does not hide the errors of the others.
//!
//! [`Config::load`] lives here because it strings the steps together: the
//! files below depend on `types` (with `slo`, the part of it for targets and
//! budgets) and `error` only, never on each other.

mod error;
mod file;
pub mod kube;
mod overlay;
mod slo;
mod types;
mod validate;
mod write;

use std::collections::BTreeSet;
use std::path::Path;

pub use error::{ConfigError, FieldError};
pub use overlay::{
    ClustersServiceOverrides, HttpOverrides, KubeOverrides, Overrides, RpFrontendOverrides,
};
pub use slo::{OperationSloConfig, OperationsSloConfig, SloConfig, UpgradeSloConfig};
pub use types::{
    Auth, ClustersServiceApi, ClustersServiceConfig, Config, HistoryConfig, HttpSourceConfig,
    KubeMode, KubeSourceConfig, LogFormat, MaestroConfig, MaestroGrpcConfig, RpFrontendConfig,
    SOURCE_CLUSTERS_SERVICE, SOURCE_KUBE, SOURCE_MAESTRO, SOURCE_RP_FRONTEND, ShardConfig,
    SourcesConfig, TRACE_ID_PLACEHOLDER, UiConfig, default_rp_api_version, defaults, grpc_defaults,
    shard_of,
};
pub use validate::{check_cluster_resource_id, is_guid};
pub use write::WriteError;

use file::{ParsedFile, parse_file};

/// Loads and validates `path` alone (no flags, no environment), for
/// `hcp-flow check-config`.
pub fn check_config(path: &Path) -> Result<Config, Vec<FieldError>> {
    Config::load(Some(path), &Overrides::default()).map_err(ConfigError::into_field_errors)
}

impl Config {
    /// Reads `file` (if any), lays `overrides` over it and validates the
    /// result. Every error is reported, each with its key path.
    pub fn load(file: Option<&Path>, overrides: &Overrides) -> Result<Config, ConfigError> {
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
}
