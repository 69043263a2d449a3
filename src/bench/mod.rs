//! `hcp-flow bench`: figures for docs/performance.md, measured, never asserted
//! in unit tests.
//!
//! Two parts: the exposition path alone ([`in_process`]: a store filled with
//! N synthetic clusters, scraped repeatedly: latency, bytes, series, memory),
//! and the whole exporter against the simulated world over HTTP
//! ([`end_to_end`], see `app`). A third, [`kube`], measures the management
//! side: watches of a simulated Kubernetes API server holding N
//! HostedClusters and everything around them. The end-to-end part runs once
//! per way of reading Maestro ([`MaestroMode`]: REST polls, the gRPC
//! stream); [`warm`] stops an exporter with SIGTERM and starts it again on
//! its state directory. `process` starts the exporter they measure,
//! `readings` reads its scrapes, `figures` holds what they share, `report`
//! writes the markdown.

pub mod baseline;
pub mod end_to_end;
pub mod figures;
pub mod history;
pub mod in_process;
pub mod kube;
pub mod pin;
pub mod process;
pub mod readings;
pub mod report;
pub mod scraper;
pub mod shards;
pub mod soak;
pub mod warm;

use std::time::Duration;

pub use end_to_end::{EndToEndFigures, end_to_end};
pub use figures::{Latency, mib, ms, resident_memory, resident_memory_of};
pub use in_process::{ExpositionFigures, exposition, synthetic_cluster, synthetic_store};
pub use kube::{KubeFigures, kube};
pub use process::{SHIPPED_ALLOCATOR_ENV, ready_deadline, upstream_threads};
pub use report::{report, report_kube, report_shards};
pub use scraper::{ScrapeError, Scraper};

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
    Scrape(#[from] ScrapeError),
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
    #[error("could not stop `hcp-flow serve` with SIGTERM")]
    Stop(#[source] std::io::Error),
    #[error("`hcp-flow serve` exited while the bench measured it ({0})")]
    Exited(String),
    #[error("the exporter's source {0} was not up within {1:?}")]
    NotUp(String, Duration),
    #[error("could not seed the state directory {path}")]
    StateStore {
        path: String,
        #[source]
        cause: crate::state_store::StateStoreError,
    },
}

/// How the end-to-end exporter reads Maestro (`sources.maestro.grpc` or
/// not, docs/design/09b-reading-the-upstreams.md §9.10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaestroMode {
    /// REST polls alone: incremental every fast-poll interval, a full
    /// relist every `full_relist_interval`.
    Rest,
    /// The gRPC CloudEvents stream, with a REST list after each
    /// subscription and every `full_relist_interval`.
    Stream,
}

impl MaestroMode {
    pub fn as_str(self) -> &'static str {
        match self {
            MaestroMode::Rest => "rest",
            MaestroMode::Stream => "stream",
        }
    }
}

/// `hcp-flow bench --maestro`: which of the [`MaestroMode`]s the end-to-end
/// part runs, each against a fresh world of the same size and seed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum MaestroChoice {
    /// Poll Maestro's REST API only: an incremental poll every fast-poll
    /// interval (15 s), a full relist every 10 minutes.
    Rest,
    /// Hear bundle status on Maestro's gRPC CloudEvents stream
    /// (`sources.maestro.grpc`); REST only for a list after each
    /// subscription and every 10 minutes, and to read a bundle first heard
    /// on the stream by id.
    Stream,
    /// `rest`, then `stream`, in one report.
    #[default]
    Both,
}

impl MaestroChoice {
    pub fn modes(self) -> &'static [MaestroMode] {
        match self {
            MaestroChoice::Rest => &[MaestroMode::Rest],
            MaestroChoice::Stream => &[MaestroMode::Stream],
            MaestroChoice::Both => &[MaestroMode::Rest, MaestroMode::Stream],
        }
    }
}

/// `hcp-flow bench`: both benchmarks, as the markdown docs/performance.md
/// quotes; the end-to-end one once per way of reading Maestro in `maestro`,
/// each against a fresh world of the same size and seed. With `shards` > 1
/// the end-to-end part is [`shards::compare`] instead: one unsharded
/// instance and every shard side by side against one world.
pub async fn run(
    clusters: usize,
    scrapes: usize,
    shards: u32,
    maestro_watch: std::time::Duration,
    maestro: MaestroChoice,
    history: Option<u32>,
) -> Result<String, BenchError> {
    let exposition = tokio::task::spawn_blocking(move || exposition(clusters, scrapes))
        .await
        .map_err(|e| BenchError::Aborted(e.to_string()))?;
    let pinning = pin::Pinning::apply();
    if shards > 1 {
        let mut runs = Vec::new();
        for mode in maestro.modes() {
            runs.push(
                shards::compare(clusters, scrapes, shards, maestro_watch, *mode, &pinning).await?,
            );
        }
        return Ok(report_shards(&exposition, &runs));
    }
    let mut runs = Vec::new();
    for mode in maestro.modes() {
        runs.push(
            end_to_end(
                clusters,
                scrapes,
                shards,
                maestro_watch,
                *mode,
                &pinning,
                history,
            )
            .await?,
        );
    }
    Ok(report(&exposition, &runs))
}

/// `hcp-flow bench --warm-restart`: a stream-mode exporter with a state
/// directory stopped with SIGTERM and started again after `downtime`, as
/// the markdown docs/performance.md quotes.
pub async fn run_warm(
    clusters: usize,
    shards: u32,
    downtime: std::time::Duration,
) -> Result<String, BenchError> {
    let figures = warm::warm_restart(clusters, shards, downtime).await?;
    Ok(warm::report_warm(&figures))
}

/// `hcp-flow bench --kube`: the management-side benchmark, as the markdown
/// docs/performance.md quotes (100 timed changes).
pub async fn run_kube(
    clusters: usize,
    scrapes: usize,
    history: Option<u32>,
) -> Result<String, BenchError> {
    let figures = kube(clusters, scrapes, 100, history).await?;
    Ok(report_kube(&figures))
}
