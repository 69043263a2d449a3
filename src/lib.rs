//! hcp-flow follows every hosted control plane creation through each hop of its
//! path and turns what it sees into Prometheus metrics and traces.
//!
//! Data flows one way: source → (views) → observation → timeline →
//! (exposition | spans | JSON); docs/design/01-overview.md §1.2 and §1.3 draw it.

pub mod api;
pub mod app;
pub mod background;
#[cfg(feature = "sim")]
pub mod bench;
pub mod cli;
pub use hcp_flow_clock as clock;
pub mod config;
#[cfg(feature = "sim")]
pub mod demo;
pub mod diagnose;
pub mod metrics;
/// The timeline model, a crate of its own (`crates/hcp-flow-model`): pure,
/// no runtime, no I/O; its path here stays `crate::model`.
pub use hcp_flow_model as model;
pub mod server;
#[cfg(feature = "sim")]
pub use hcp_flow_sim as sim;
pub mod sources;
pub mod state_store;
pub mod store;
pub mod supervise;
pub mod tcp;
pub mod telemetry;
pub mod traces;
pub mod ui;
pub mod views;

/// Any error the library's entry points return, for a caller that handles
/// them alike (the binary). Each module keeps its own precise type; this
/// wraps it transparently, so the message and the chain of causes a user
/// sees are the module's own.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error(transparent)]
    App(#[from] app::AppError),
    #[cfg(feature = "sim")]
    #[error(transparent)]
    Demo(#[from] demo::DemoError),
    #[cfg(feature = "sim")]
    #[error(transparent)]
    Bench(#[from] bench::BenchError),
    #[error(transparent)]
    Telemetry(#[from] telemetry::TelemetryError),
    #[error(transparent)]
    Traces(#[from] traces::TracesError),
    #[error(transparent)]
    OtlpConfig(#[from] traces::OtlpConfigError),
    #[error(transparent)]
    Export(#[from] traces::ExportError),
    #[error(transparent)]
    Source(#[from] sources::http::SourceError),
    #[error(transparent)]
    HttpClient(#[from] sources::http::BuildError),
    #[error(transparent)]
    KubeSource(#[from] sources::kube::KubeSourceError),
    #[cfg(feature = "sim")]
    #[error(transparent)]
    KubeSim(#[from] sim::kube::KubeSimError),
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::config;

    /// The binary prints an error and its causes; wrapping must not change
    /// either.
    #[test]
    fn the_crate_error_shows_the_module_error_and_its_causes_unchanged() {
        let read = || config::ConfigError::Read {
            path: "/etc/hcp-flow.yaml".into(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        };
        let wrapped = super::Error::from(read());
        assert_eq!(wrapped.to_string(), read().to_string());
        assert_eq!(
            wrapped.source().map(ToString::to_string),
            Some("no such file".to_string())
        );
    }
}
