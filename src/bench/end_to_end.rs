//! The whole exporter, a `hcp-flow serve` child, against the simulated
//! world over HTTP.

use std::time::{Duration, Instant};

use super::BenchError;
use super::figures::{Latency, resident_memory_of, series_in};
use super::pin;
use super::process::{
    Scraper, Serving, free_port, on_threads, ready_deadline, serve_child, upstream_threads,
};

/// What the end-to-end benchmark measured of a `hcp-flow serve` process
/// reading the simulated world over HTTP.
#[derive(Clone, Debug)]
pub struct EndToEndFigures {
    pub clusters: usize,
    pub time_to_ready: Duration,
    pub scrape: Latency,
    /// Scrapes asking for gzip, and the compressed body's size.
    pub scrape_gzip: Latency,
    pub gzip_bytes: usize,
    pub bytes: usize,
    pub series: usize,
    pub rss: Option<u64>,
    /// Resident memory at /readyz, before any scrape: what the fleet
    /// costs, apart from what scraping adds.
    pub rss_at_ready: Option<u64>,
    /// Upstream requests per fast-poll cycle, by source.
    pub requests_per_cycle: Vec<(String, f64)>,
    pub cycle: Duration,
    /// From a bundle's `Available` turning True in Maestro to `/metrics`
    /// showing it, for the bundles that turned while the bench watched.
    pub maestro_to_metrics: Latency,
    /// Bundles that turned while the bench watched and were not shown by
    /// its end, which waits up to two fast-poll cycles for the last ones.
    pub maestro_not_shown: usize,
    /// The exporter followed shard 0 of this many.
    pub shards: u32,
    /// Clusters that shard tracked once ready.
    pub tracked: usize,
    /// Where the exporter, the world and the scraper ran.
    pub pinning: String,
}

fn counter_by_source(body: &str, family: &str) -> Vec<(String, f64)> {
    body.lines()
        .filter(|l| l.starts_with(family))
        .filter_map(|l| {
            let source = l.split("source=\"").nth(1)?.split('"').next()?.to_string();
            let value = l.rsplit(' ').next()?.parse().ok()?;
            Some((source, value))
        })
        .collect()
}

/// Start the world with `clusters` clusters (real time, realistic latency,
/// no faults), run `hcp-flow serve` against it as a child process with
/// production defaults, wait for /readyz, then measure.
/// `shards`: the exporter follows shard 0 of that many (`--shard 0
/// --total-shards N`) over the whole world, so the figures are one
/// shard's cost.
pub async fn end_to_end(
    clusters: usize,
    scrapes: usize,
    shards: u32,
    maestro_watch: Duration,
) -> Result<EndToEndFigures, BenchError> {
    use crate::sim::{SimClock, World, WorldConfig};
    let pinning = pin::Pinning::apply();
    let world = World::new(
        // The world's defaults (ARO, churn, realistic latency) without faults.
        WorldConfig {
            clusters,
            faults: false,
            ..WorldConfig::default()
        },
        SimClock::Real,
    );
    let upstreams = upstream_threads()?;
    let serving = world.clone();
    let endpoints = on_threads(&upstreams, async move { serving.serve().await })
        .await?
        .map_err(BenchError::World)?;
    let port = free_port()?;
    let settings = crate::demo::DemoSettings {
        clusters,
        speed: 1.0,
        seed: 1,
        faults: false,
        listen: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        world: crate::sim::WorldKind::Aro,
        maestro_stream: false,
    };
    let mut config = crate::demo::demo_config(&settings, &world, &endpoints);
    config.shard = crate::config::ShardConfig {
        index: 0,
        total: shards.max(1),
    };
    let cycle = config
        .sources
        .maestro
        .as_ref()
        .map(|m| m.http.fast_poll_interval)
        .unwrap_or(Duration::from_secs(15));
    let path = std::env::temp_dir().join(format!("hcp-flow-bench-{}.yaml", std::process::id()));
    let Serving {
        child,
        pid,
        base,
        client,
        time_to_ready,
    } = serve_child(&config, &path, &pinning, ready_deadline(clusters)).await?;
    let rss_at_ready = resident_memory_of(&pid);

    let mut scraper = Scraper::new(client, format!("{base}/metrics"));

    scraper.scrape().await?;
    let before = scraper.text()?;
    let tracked = tracked_clusters(before);
    let requests_before = counter_by_source(before, "hcpflow_source_requests_total");
    let cycles = 3u32;
    // The cycles over which requests are counted are also watched: bundles
    // that turn Available in them, timed until /metrics shows them.
    let watching = Instant::now();
    let (maestro_to_metrics, maestro_not_shown) = maestro_change_latency(
        &world,
        &mut scraper,
        cycle * cycles,
        cycle * 2,
        shards.max(1),
        maestro_watch,
    )
    .await?;
    let watched = watching.elapsed();
    let scrape = scraper.timed(scrapes).await?;
    let last = scraper.text()?;
    let requests_after = counter_by_source(last, "hcpflow_source_requests_total");
    let (bytes, series) = (last.len(), series_in(last));
    let (scrape_gzip, gzip_bytes) = scraper.gzip(scrapes).await?;
    let elapsed_cycles = (watched.as_secs_f64() / cycle.as_secs_f64()).max(1.0);
    let requests_per_cycle = requests_after
        .iter()
        .map(|(source, after)| {
            let before = requests_before
                .iter()
                .find(|(s, _)| s == source)
                .map(|(_, v)| *v)
                .unwrap_or(0.0);
            (source.clone(), (after - before) / elapsed_cycles)
        })
        .collect();
    let rss = resident_memory_of(&pid);
    drop(child);
    let _ = std::fs::remove_file(&path);
    Ok(EndToEndFigures {
        clusters,
        time_to_ready,
        scrape,
        scrape_gzip,
        gzip_bytes,
        bytes,
        series,
        rss,
        rss_at_ready,
        requests_per_cycle,
        cycle,
        maestro_to_metrics,
        maestro_not_shown,
        shards: shards.max(1),
        tracked,
        pinning: pinning.describe(),
    })
}

/// Watch the world's bundles for `window`, and on until
/// [`MAESTRO_CHANGES`] were timed (at most `at_most`, `bench --maestro-watch`): each
/// one whose `Available` turns
/// True in it is timed from that instant (the world's own plan) to the end
/// of the first scrape that shows it, `hcpflow_hop_condition{hop=
/// "maestro_bundle", condition="Available", status="true"}` for its
/// object. Scrapes follow one another, so the figure includes up to one
/// scrape of delay. Returns the latencies and how many were never shown.
async fn maestro_change_latency(
    world: &crate::sim::World,
    scraper: &mut Scraper,
    window: Duration,
    grace: Duration,
    shards: u32,
    at_most: Duration,
) -> Result<(Latency, usize), BenchError> {
    let started = Instant::now();
    let mut checked = world.now_ms();
    let mut waiting: std::collections::HashMap<String, i64> = std::collections::HashMap::new();
    let mut latencies = Vec::new();
    // Churn replaces clusters only as the first ones go, a few minutes in:
    // the watch goes on past `window` until enough bundles were timed.
    let enough = |timed: usize, elapsed: Duration| {
        elapsed >= window && (timed >= MAESTRO_CHANGES || elapsed >= at_most)
    };
    while !enough(latencies.len(), started.elapsed()) {
        // Bundles that turned since the last look, each taken once.
        let now = world.now_ms();
        // As shard 0 of `shards`, the exporter shows its own clusters only.
        let followed = |id: &str| crate::model::shard_of(id, shards) == 0;
        for plan in world.plans(now).iter().filter(|p| followed(&p.cluster_id)) {
            for bundle in &plan.bundles {
                let turned = bundle
                    .available
                    .filter(|at| (checked + 1..=now).contains(at))
                    .filter(|at| bundle.frozen.is_none_or(|f| f >= *at));
                if let Some(at) = turned {
                    waiting.insert(bundle.name.clone(), at);
                }
            }
        }
        checked = now;
        scrape_and_time(scraper, world, &mut waiting, &mut latencies).await?;
    }
    // A bundle that turned in the watch's last seconds has had less than a
    // poll to show: it is given `grace` before it counts as not shown, and
    // no new bundle is taken meanwhile.
    let closing = Instant::now();
    while !waiting.is_empty() && closing.elapsed() < grace {
        scrape_and_time(scraper, world, &mut waiting, &mut latencies).await?;
    }
    Ok((Latency::from_samples(latencies), waiting.len()))
}

/// One scrape, and what it shows timed by [`time_shown`].
async fn scrape_and_time(
    scraper: &mut Scraper,
    world: &crate::sim::World,
    waiting: &mut std::collections::HashMap<String, i64>,
    latencies: &mut Vec<Duration>,
) -> Result<(), BenchError> {
    scraper.scrape().await?;
    time_shown(scraper.text()?, world.now_ms(), waiting, latencies);
    Ok(())
}

/// Moves the bundles a scrape shows Available from `waiting` (name → the
/// world's time it turned) to `latencies`.
fn time_shown(
    body: &str,
    seen_at: i64,
    waiting: &mut std::collections::HashMap<String, i64>,
    latencies: &mut Vec<Duration>,
) {
    let shown = available_bundles(body);
    waiting.retain(|name, at| {
        if shown.contains(name.as_str()) {
            let ms = u64::try_from(seen_at - *at).unwrap_or(0);
            latencies.push(Duration::from_millis(ms));
            false
        } else {
            true
        }
    });
}

/// Clusters an exporter tracks, from a scrape (`hcpflow_cluster_info` has
/// one series per tracked cluster).
fn tracked_clusters(body: &str) -> usize {
    body.lines()
        .filter(|l| l.starts_with("hcpflow_cluster_info{"))
        .count()
}

/// Bundles the Maestro figure wants timed, and how long it may watch for
/// them.
const MAESTRO_CHANGES: usize = 50;

/// Objects of `hcpflow_hop_condition` for a Maestro bundle whose Available
/// is True, in a scrape's body.
fn available_bundles(body: &str) -> std::collections::HashSet<&str> {
    const WANT: &str = r#"hop="maestro_bundle",condition="Available",status="true","#;
    body.lines()
        .filter(|l| l.starts_with("hcpflow_hop_condition{") && l.contains(WANT))
        .filter_map(|l| {
            let rest = &l[l.find("object=\"")? + "object=\"".len()..];
            Some(&rest[..rest.find('"')?])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::in_process::synthetic_store;
    use crate::metrics::exposition::Format;

    /// The Maestro figure reads the exporter's real exposition: every
    /// synthetic cluster's bundle is Available, and only bundles are found
    /// (the ManifestWork carries the same condition under another hop).
    #[test]
    fn available_bundles_are_read_from_a_real_scrape() {
        let store = synthetic_store(3);
        let body = store.scrape(Format::OpenMetrics);
        let found: std::collections::BTreeSet<&str> =
            available_bundles(&body).into_iter().collect();
        assert_eq!(
            found,
            ["bundle-0", "bundle-1", "bundle-2"].into_iter().collect()
        );
    }
}
