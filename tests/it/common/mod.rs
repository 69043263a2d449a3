//! The one harness every integration test uses: the simulated world, the
//! exporter, the model's store, kube sources, real Prometheus and
//! Alertmanager processes, Chromium, an OTLP receiver, promtool, raw-TCP
//! stand-ins and a source's context. A test states what differs from the
//! defaults here, not how to start things.

pub mod browser;
pub mod child;
pub mod demo;
pub mod exporter;
pub mod fidelity;
pub mod helm;
pub mod hypershift;
pub mod kube;
pub mod load;
pub mod otlp;
pub mod procs;
pub mod promql;
pub mod promtool;
pub mod source;
pub mod standin;
pub mod store;
pub mod world;

/// The repository root: fixtures, `alerts/`, `dashboards/`, `charts/`.
pub const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Once per process, before any TLS client or server: the crate builds
/// rustls without a default provider (production picks ring in `main`).
pub fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
        // Worlds, exporters and other tests share two cores here: every
        // thread at one priority, so no exporter falls behind the world it
        // reads (docs/development.md).
        hcp_flow::background::set_niceness(0);
    });
}
