//! What goes wrong in a configuration, each problem at its key path.

use std::fmt;
use std::path::PathBuf;

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
