//! `hcp-flow bench`: figures for docs/performance.md, measured, never asserted
//! in unit tests.
//!
//! Two parts: the exposition path alone ([`in_process`]: a store filled with
//! N synthetic clusters, scraped repeatedly: latency, bytes, series, memory),
//! and the whole exporter against the simulated world over HTTP
//! ([`end_to_end`], see `app`). A third, [`kube`], measures the management
//! side: watches of a simulated Kubernetes API server holding N
//! HostedClusters and everything around them. `process` starts the exporter
//! they measure, `figures` holds what they share, `report` writes the markdown.

pub mod baseline;
pub mod end_to_end;
pub mod figures;
pub mod in_process;
pub mod kube;
pub mod pin;
pub mod process;
pub mod report;
pub mod soak;

use std::time::Duration;

pub use end_to_end::{EndToEndFigures, end_to_end};
pub use figures::{Latency, mib, ms, resident_memory, resident_memory_of};
pub use in_process::{ExpositionFigures, exposition, synthetic_cluster, synthetic_store};
pub use kube::{KubeFigures, kube};
pub use process::{SHIPPED_ALLOCATOR_ENV, Scraper, ready_deadline, upstream_threads};
pub use report::{report, report_kube};

use process::{Serving, free_port, serve_child};

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("the simulated world could not start")]
    World(#[source] std::io::Error),
    #[error("could not write the exporter's configuration to {path}")]
    Config {
        path: String,
        #[source]
        cause: std::io::Error,
    },
    #[error("could not serialise the exporter's configuration: {0}")]
    Serialise(String),
    #[error("could not start `hcp-flow serve`")]
    Spawn(#[source] std::io::Error),
    #[error("the exporter did not become ready within {0:?}")]
    NotReady(Duration),
    #[error("scraping the exporter failed")]
    Scrape(#[source] reqwest::Error),
    #[error("the exporter's /metrics is not UTF-8 text")]
    NotText(#[source] std::str::Utf8Error),
    #[error("the exposition benchmark did not finish: {0}")]
    Aborted(String),
    #[error("the simulated Kubernetes API server refused an object")]
    KubeObject(#[source] crate::sim::kube::KubeSimError),
    #[error("a change to {0} never showed in /metrics within {1:?}")]
    NotVisible(String, Duration),
    #[error("the simulated upstreams' threads could not start")]
    Threads(#[from] crate::background::BackgroundError),
}

/// `hcp-flow bench`: both benchmarks, as the markdown docs/performance.md quotes.
pub async fn run(
    clusters: usize,
    scrapes: usize,
    shards: u32,
    maestro_watch: std::time::Duration,
) -> Result<String, BenchError> {
    let exposition = tokio::task::spawn_blocking(move || exposition(clusters, scrapes))
        .await
        .map_err(|e| BenchError::Aborted(e.to_string()))?;
    let end_to_end = end_to_end(clusters, scrapes, shards, maestro_watch).await?;
    Ok(report(&exposition, &end_to_end))
}

/// `hcp-flow bench --kube`: the management-side benchmark, as the markdown
/// docs/performance.md quotes (100 timed changes).
pub async fn run_kube(clusters: usize, scrapes: usize) -> Result<String, BenchError> {
    let figures = kube(clusters, scrapes, 100).await?;
    Ok(report_kube(&figures))
}
