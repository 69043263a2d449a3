//! `hcp-flow bench`: figures for docs/performance.md, measured, never asserted
//! in unit tests.
//!
//! Two parts: the exposition path alone (a store filled with N synthetic
//! clusters, scraped repeatedly: latency, bytes, series, memory), and the
//! whole exporter against the simulated world over HTTP (see `app`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};

use crate::metrics::exposition::Format;
use crate::metrics::fleet::RenderConfig;
use crate::model::testing::{Obs, batch, obs, rp};
use crate::model::{ConditionStatus, Hop, ModelConfig, Phase, Via};
use crate::store::{Store, StoreConfig};

/// Latency distribution of repeated measurements.
#[derive(Clone, Debug)]
pub struct Latency {
    pub samples: usize,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl Latency {
    pub fn from_samples(mut samples: Vec<Duration>) -> Latency {
        samples.sort_unstable();
        let at = |q: f64| {
            let index = ((samples.len() as f64 - 1.0) * q).round() as usize;
            samples.get(index).copied().unwrap_or_default()
        };
        Latency {
            samples: samples.len(),
            p50: at(0.50),
            p99: at(0.99),
            max: samples.last().copied().unwrap_or_default(),
        }
    }
}

/// What the exposition benchmark measured.
#[derive(Clone, Debug)]
pub struct ExpositionFigures {
    pub clusters: usize,
    pub series: usize,
    pub bytes: usize,
    pub openmetrics: Latency,
    pub text: Latency,
    pub fill: Duration,
    pub rss_before: Option<u64>,
    pub rss_after: Option<u64>,
}

/// Resident set size of this process in bytes (Linux), if readable.
pub fn resident_memory() -> Option<u64> {
    resident_memory_of("self")
}

/// Resident set size of a process (`"self"` or a pid) in bytes.
pub fn resident_memory_of(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// One synthetic creation seen on the service-side hops, as the world shows
/// a settled cluster: RP, CS, bundle, and through Maestro the ManifestWork,
/// HostedCluster and one node pool.
fn synthetic_cluster(i: usize, at: Timestamp) -> Vec<Obs> {
    let id = format!("2c4f{i:028x}");
    let name = format!("cluster-{i}");
    let rid = format!(
        "/subscriptions/sub-{}/resourcegroups/rg-{}/providers/microsoft.redhatopenshift/hcpopenshiftclusters/{name}",
        i % 7,
        i % 50
    );
    let created = at
        .checked_sub(SignedDuration::from_mins(30 + (i % 600) as i64))
        .unwrap_or(at);
    vec![
        obs(&id, Hop::ClustersService)
            .state("ready", Phase::Ready)
            .created(created)
            .resource_id(&rid)
            .name(&name)
            .platform("azure")
            .mgmt_cluster(if i % 2 == 0 { "mgmt-1" } else { "mgmt-2" }),
        rp(&rid).state("Succeeded", Phase::Ready).created(created),
        obs(&id, Hop::MaestroBundle)
            .object(&format!("bundle-{i}"))
            .state("Available", Phase::Ready)
            .created(created)
            .updated(at)
            .condition(
                "Applied",
                ConditionStatus::True,
                "AppliedManifestWorkComplete",
                at,
            )
            .condition("Available", ConditionStatus::True, "ResourcesAvailable", at),
        obs(&id, Hop::Manifestwork)
            .via(Via::Maestro)
            .state("Available", Phase::Ready)
            .condition(
                "Applied",
                ConditionStatus::True,
                "AppliedManifestWorkComplete",
                at,
            )
            .condition("Available", ConditionStatus::True, "ResourcesAvailable", at),
        obs(&id, Hop::HostedCluster)
            .via(Via::Maestro)
            .state("Available", Phase::Ready)
            .since(at)
            .condition("Available", ConditionStatus::True, "AsExpected", at)
            .condition("Progressing", ConditionStatus::False, "AsExpected", at)
            .condition("Degraded", ConditionStatus::False, "AsExpected", at),
        obs(&id, Hop::NodePool)
            .via(Via::Maestro)
            .object(&format!("{name}-np-1"))
            .state("Ready", Phase::Ready)
            .replicas(3, 3, 3)
            .condition("Ready", ConditionStatus::True, "AsExpected", at),
    ]
}

/// A store holding `clusters` synthetic creations.
pub fn synthetic_store(clusters: usize) -> Arc<Store> {
    let store = Store::new(StoreConfig {
        model: ModelConfig {
            creation_target: Duration::from_secs(1200),
            terminal_hops: vec![Hop::HostedCluster, Hop::RpFrontend],
            shard: None,
        },
        render: RenderConfig::default(),
        time_scale: 1.0,
        sources: vec!["test".to_string()],
    });
    let now = Timestamp::now();
    for chunk_start in (0..clusters).step_by(500) {
        let observations = (chunk_start..(chunk_start + 500).min(clusters))
            .flat_map(|i| synthetic_cluster(i, now))
            .collect();
        store.apply_at(batch(chunk_start == 0, now, observations), now);
    }
    store
}

/// Scrape a store of `clusters` synthetic creations `scrapes` times per format.
pub fn exposition(clusters: usize, scrapes: usize) -> ExpositionFigures {
    let rss_before = resident_memory();
    let started = Instant::now();
    let store = synthetic_store(clusters);
    let fill = started.elapsed();
    let body = store.scrape(Format::OpenMetrics);
    let bytes = body.len();
    let series = body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .count();
    drop(body);
    let time = |format: Format| {
        let samples = (0..scrapes.max(1))
            .map(|_| {
                let start = Instant::now();
                let body = store.scrape(format);
                let took = start.elapsed();
                std::hint::black_box(body);
                took
            })
            .collect();
        Latency::from_samples(samples)
    };
    let openmetrics = time(Format::OpenMetrics);
    let text = time(Format::Text);
    let rss_after = resident_memory();
    ExpositionFigures {
        clusters,
        series,
        bytes,
        openmetrics,
        text,
        fill,
        rss_before,
        rss_after,
    }
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
