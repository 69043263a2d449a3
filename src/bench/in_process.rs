//! The exposition path alone: a store filled with N synthetic clusters,
//! scraped repeatedly in-process.

use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};

use super::baseline;
use super::figures::{Latency, resident_memory, series_in};
use crate::metrics::exposition::Format;
use crate::metrics::fleet::RenderConfig;
use crate::model::testing::{Obs, batch, obs, rp};
use crate::model::{ConditionStatus, Hop, ModelConfig, Phase, Via};
use crate::store::{Store, StoreConfig};

/// What the exposition benchmark measured.
#[derive(Clone, Debug)]
pub struct ExpositionFigures {
    pub clusters: usize,
    pub series: usize,
    pub bytes: usize,
    pub openmetrics: Latency,
    pub text: Latency,
    /// OpenMetrics rendered and gzipped (level 1), as served to a scraper
    /// that asks for gzip.
    pub gzip: Latency,
    pub gzip_bytes: usize,
    /// OpenMetrics assembled as a plain HTTP body is, through the server's
    /// chunk writer, the chunks dropped instead of sent: the assembly alone.
    pub chunked: Latency,
    /// What the chunk writer handed on, per scrape.
    pub chunked_bytes: usize,
    /// Copying the same number of bytes: the floor any exposition pays.
    pub memcpy: Latency,
    /// The same samples rendered by prometheus-client's generic encoder
    /// (see [`baseline`]): the yardstick of the ratio.
    pub generic_encoder: Latency,
    pub generic_encoder_samples: usize,
    pub fill: Duration,
    pub rss_before: Option<u64>,
    pub rss_after: Option<u64>,
}

/// One synthetic creation seen on the service-side hops, as the world shows
/// a settled cluster: RP, CS, bundle, and through Maestro the ManifestWork,
/// HostedCluster and one node pool.
pub fn synthetic_cluster(i: usize, at: Timestamp) -> Vec<Obs> {
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
            .mgmt_cluster(if i.is_multiple_of(2) {
                "mgmt-1"
            } else {
                "mgmt-2"
            }),
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
            targets: crate::model::OperationTargets::default().with(
                crate::model::OperationKind::Create,
                Duration::from_secs(1200),
            ),
            terminal_hops: vec![Hop::HostedCluster, Hop::RpFrontend],
            shard: None,
            hop_budgets: Default::default(),
            ..ModelConfig::default()
        },
        render: RenderConfig::default(),
        time_scale: 1.0,
        sources: vec!["test".to_string()],
        clock: Default::default(),
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
    let (bytes, series) = (body.len(), series_in(&body));
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
    let mut gzip_bytes = 0;
    let gzip = Latency::from_samples(
        (0..scrapes.max(1))
            .map(|_| {
                let start = Instant::now();
                let body = store.scrape(Format::OpenMetrics);
                let zipped = crate::server::gzip_body(body.as_bytes()).unwrap_or_default();
                let took = start.elapsed();
                gzip_bytes = zipped.len();
                std::hint::black_box(zipped);
                took
            })
            .collect(),
    );
    let mut chunked_bytes = 0;
    let chunked = Latency::from_samples(
        (0..scrapes.max(1))
            .map(|_| {
                let mut sent = 0;
                let start = Instant::now();
                let mut writer = crate::server::ChunkWriter::new(|chunk: Vec<u8>| {
                    sent += chunk.len();
                    crate::server::recycle_chunk(std::hint::black_box(chunk));
                    Ok(())
                });
                let result = store
                    .scrape_to(Format::OpenMetrics, &mut writer)
                    .and_then(|()| writer.flush());
                let took = start.elapsed();
                drop(writer);
                chunked_bytes = if result.is_ok() { sent } else { 0 };
                took
            })
            .collect(),
    );
    let source = vec![b'x'; bytes];
    let memcpy = Latency::from_samples(
        (0..scrapes.max(1))
            .map(|_| {
                let start = Instant::now();
                let copy = std::hint::black_box(&source).clone();
                let took = start.elapsed();
                std::hint::black_box(copy);
                took
            })
            .collect(),
    );
    drop(source);
    let rss_after = resident_memory();
    // After the RSS reading: the baseline's registry is the bench's, not
    // the exporter's, memory.
    let (registry, generic_encoder_samples) =
        baseline::registry_of(&store.scrape(Format::OpenMetrics));
    let generic_encoder = Latency::from_samples(
        (0..scrapes.max(1))
            .map(|_| {
                let start = Instant::now();
                let body = baseline::encode(&registry);
                let took = start.elapsed();
                std::hint::black_box(body);
                took
            })
            .collect(),
    );
    drop(registry);
    ExpositionFigures {
        clusters,
        series,
        bytes,
        openmetrics,
        text,
        gzip,
        gzip_bytes,
        chunked,
        chunked_bytes,
        memcpy,
        generic_encoder,
        generic_encoder_samples,
        fill,
        rss_before,
        rss_after,
    }
}
