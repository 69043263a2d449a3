//! Reading the YAML file: text into an untyped tree (syntax errors with line
//! and column), then each section into its typed shape on its own.

use std::collections::BTreeSet;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::error::FieldError;
use super::types::{
    Config, KubeSourceConfig, SOURCE_CLUSTERS_SERVICE, SOURCE_KUBE, SOURCE_MAESTRO,
    SOURCE_RP_FRONTEND,
};

/// The top-level keys, and the keys of `sources`, in the order they are
/// documented.
const TOP_KEYS: &[&str] = &[
    "listen",
    "log_format",
    "shutdown_grace",
    "state_dir",
    "slo",
    "shard",
    "sources",
    "ui",
    "history",
];
const SOURCE_KEYS: &[&str] = &[
    SOURCE_RP_FRONTEND,
    SOURCE_CLUSTERS_SERVICE,
    SOURCE_MAESTRO,
    SOURCE_KUBE,
];

/// What reading the file produced: the config as far as it parsed, the
/// errors, and which sections failed (so their absence does not cause a
/// second, misleading error such as "no source configured").
pub(super) struct ParsedFile {
    pub(super) config: Config,
    pub(super) errors: Vec<FieldError>,
    pub(super) failed: BTreeSet<String>,
}

impl Config {
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
}

/// YAML text → the untyped tree → each section typed on its own.
pub(super) fn parse_file(text: &str, origin: &str) -> ParsedFile {
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
            "shutdown_grace" => {
                if let Some(v) = typed::<HumanDuration>(&mut out, "shutdown_grace", value) {
                    out.config.shutdown_grace = v.0;
                }
            }
            "state_dir" => {
                if let Some(v) = typed(&mut out, "state_dir", value) {
                    out.config.state_dir = Some(v);
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
            "ui" => {
                if let Some(v) = typed(&mut out, "ui", value) {
                    out.config.ui = v;
                }
            }
            "history" => {
                if let Some(v) = typed(&mut out, "history", value) {
                    out.config.history = v;
                }
            }
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
/// A bare duration value (`10s`, `1m30s`) where the key is a scalar.
#[derive(serde::Deserialize)]
struct HumanDuration(#[serde(with = "humantime_serde")] std::time::Duration);

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
