//! The whole exporter, a `hcp-flow serve` child, against the simulated
//! world over HTTP, reading Maestro one way ([`MaestroMode`]).

use std::time::{Duration, Instant};

use super::figures::{Latency, fleet_level_series_in, resident_memory_of, series_in};
use super::process::{
    Serving, free_port, on_threads, ready_deadline, serve_child, upstream_threads,
};
use super::readings::{available_bundles, by_source, cluster_ids};
use super::scraper::Scraper;
use super::{BenchError, MaestroMode, pin};

/// What the end-to-end benchmark measured of a `hcp-flow serve` process
/// reading the simulated world over HTTP.
#[derive(Clone, Debug)]
pub struct EndToEndFigures {
    pub clusters: usize,
    /// Copies of the last scrape's body in the bench's process: the floor
    /// the HTTP scrape is compared with.
    pub memcpy: super::figures::Latency,
    /// The week of history each cluster held (`--history`).
    pub history: Option<super::history::SeededHistory>,
    /// How the exporter read Maestro.
    pub mode: MaestroMode,
    pub time_to_ready: Duration,
    pub scrape: Latency,
    /// The same scrapes through reqwest, a second copy on the scraper's
    /// core: as runs before 2026-11-28 (third) timed them.
    pub scrape_reqwest: Latency,
    /// Scrapes asking for gzip, and the compressed body's size.
    pub scrape_gzip: Latency,
    pub gzip_bytes: usize,
    pub bytes: usize,
    pub series: usize,
    /// Of `series`, those without a `cluster_id` label.
    pub fleet_series: usize,
    pub rss: Option<u64>,
    /// Resident memory at /readyz, before any scrape: what the fleet
    /// costs, apart from what scraping adds.
    pub rss_at_ready: Option<u64>,
    /// What the exporter asked its upstreams once ready.
    pub requests: Requests,
    /// The same once it had read the node pools in flight at start.
    pub steady: SteadyRequests,
    pub cycle: Duration,
    /// The sources' `full_relist_interval` (the shortest of them).
    pub full_relist: Duration,
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

/// What the exporter asked its upstreams in steady state: between the
/// first scrape after /readyz and the last scrape of the watch that ended
/// before any source's first full relist could begin (its first list's
/// end plus its `full_relist_interval`), so no relist is counted.
#[derive(Clone, Debug, Default)]
pub struct Requests {
    /// Between the two scrapes whose counters are compared; `None` when no
    /// scrape of the watch ended before the first relist could begin.
    pub window: Option<Duration>,
    /// Upstream requests per fast-poll cycle, by source.
    pub per_cycle: Vec<(String, f64)>,
    /// Maestro REST requests per minute (`hcpflow_source_requests_total`).
    pub maestro_per_minute: Option<f64>,
    /// Bundles Maestro answered per minute, as the world counts them.
    pub maestro_bundles_served_per_minute: Option<f64>,
    /// Bundles of the followed clusters the world created per minute: in
    /// stream mode each is read by id once, when first heard on the stream.
    pub bundles_created_per_minute: Option<f64>,
    /// How the world's node pools moved at the RP and Clusters Service over
    /// the same window, per fast-poll cycle (clusters with a pool that
    /// moved, pool state changes), and the pool operations in flight at its
    /// end: what the node pool reads above are to be O(docs/design/15b-operations.md §15.11).
    pub pool_changes: Option<PoolChangesPerCycle>,
}

/// [`crate::sim::PoolChanges`] per fast-poll cycle.
#[derive(Clone, Copy, Debug, Default)]
pub struct PoolChangesPerCycle {
    pub rp_clusters: f64,
    pub cs_clusters: f64,
    pub rp_changes: f64,
    pub cs_changes: f64,
    pub in_flight: u64,
}

/// Upstream requests in steady state: from the first scrape that shows the
/// RP and Clusters Service sources caught up on the node pools in flight
/// at start (`hcpflow_node_pool_reads_queued` below one batch each) over a
/// minute, still before any first relist (docs/design/15b-operations.md §15.11).
#[derive(Clone, Debug, Default)]
pub struct SteadyRequests {
    /// From /readyz to that scrape; `None` when it did not come in time
    /// for a minute's window before the first relist.
    pub caught_up_after: Option<Duration>,
    pub requests: Requests,
}

/// The counters one scrape showed, and the world's beside them.
struct Reading {
    at: Instant,
    world_ms: i64,
    requests: Vec<(String, f64)>,
    maestro_served: u64,
    /// Node pool requests the world answered, by source (docs/design/15b-operations.md
    /// §15.11): the part of `requests` that reads pools.
    pool_requests: std::collections::BTreeMap<String, u64>,
}

/// Readings after each scrape of the watch, the first and the last taken
/// before `until`.
struct RequestWindow {
    until: Instant,
    first: Option<Reading>,
    last: Option<Reading>,
}

const REQUESTS: &str = "hcpflow_source_requests_total";

impl RequestWindow {
    fn new(until: Instant) -> RequestWindow {
        RequestWindow {
            until,
            first: None,
            last: None,
        }
    }

    /// After a scrape that just ended: its counters, if it ended in time.
    fn observe(&mut self, body: &str, world: &crate::sim::World) {
        let at = Instant::now();
        if at >= self.until {
            return;
        }
        let reading = Reading {
            at,
            world_ms: world.now_ms(),
            requests: by_source(body, REQUESTS),
            maestro_served: world.items_served().get("maestro").copied().unwrap_or(0),
            pool_requests: world.node_pool_requests(),
        };
        match self.first {
            None => self.first = Some(reading),
            Some(_) => self.last = Some(reading),
        }
    }

    fn figures(&self, world: &crate::sim::World, cycle: Duration, shards: u32) -> Requests {
        let (Some(first), Some(last)) = (&self.first, &self.last) else {
            return Requests::default();
        };
        let window = last.at.duration_since(first.at);
        if window.is_zero() {
            return Requests::default();
        }
        let minutes = window.as_secs_f64() / 60.0;
        let cycles = window.as_secs_f64() / cycle.as_secs_f64();
        let before = |source: &str| {
            first
                .requests
                .iter()
                .find(|(s, _)| s == source)
                .map_or(0.0, |(_, v)| *v)
        };
        let mut per_cycle: Vec<(String, f64)> = last
            .requests
            .iter()
            .map(|(source, after)| (source.clone(), (after - before(source)) / cycles))
            .collect();
        // Of those, the node pool reads (docs/design/15b-operations.md §15.11).
        per_cycle.extend(last.pool_requests.iter().map(|(source, after)| {
            let before = first.pool_requests.get(source).copied().unwrap_or(0);
            (
                format!("{source} node pools"),
                after.saturating_sub(before) as f64 / cycles,
            )
        }));
        let maestro = last
            .requests
            .iter()
            .find(|(s, _)| s == "maestro")
            .map(|(_, after)| (after - before("maestro")) / minutes);
        let served = last.maestro_served.saturating_sub(first.maestro_served) as f64 / minutes;
        let followed = |id: &str| crate::model::shard_of(id, shards) == 0;
        let created = world
            .planned(last.world_ms)
            .iter()
            .filter(|p| followed(&p.cluster_id))
            .flat_map(|p| p.bundles.iter())
            .filter(|b| (first.world_ms + 1..=last.world_ms).contains(&b.created))
            .count();
        let changes = world.node_pool_changes(first.world_ms, last.world_ms, followed);
        let pool_changes = PoolChangesPerCycle {
            rp_clusters: changes.rp_clusters as f64 / cycles,
            cs_clusters: changes.cs_clusters as f64 / cycles,
            rp_changes: changes.rp_changes as f64 / cycles,
            cs_changes: changes.cs_changes as f64 / cycles,
            in_flight: changes.in_flight,
        };
        Requests {
            window: Some(window),
            per_cycle,
            pool_changes: Some(pool_changes),
            maestro_per_minute: maestro,
            maestro_bundles_served_per_minute: Some(served),
            bundles_created_per_minute: Some(created as f64 / minutes),
        }
    }
}

/// Start the world with `clusters` clusters (real time, realistic latency,
/// no faults), run `hcp-flow serve` against it as a child process with
/// production defaults, reading Maestro as `mode` says, wait for /readyz,
/// then measure.
/// `shards`: the exporter follows shard 0 of that many (`--shard 0
/// --total-shards N`) over the whole world, so the figures are one
/// shard's cost. `pinning`: where the bench put itself and puts the
/// exporter ([`pin::Pinning::apply`], once per bench process: once pinned,
/// the process sees one CPU).
pub async fn end_to_end(
    clusters: usize,
    scrapes: usize,
    shards: u32,
    maestro_watch: Duration,
    mode: MaestroMode,
    pinning: &pin::Pinning,
    history: Option<u32>,
) -> Result<EndToEndFigures, BenchError> {
    let BenchWorld {
        world,
        endpoints,
        _upstreams,
    } = start_bench_world(clusters).await?;
    let mut config = bench_config(&world, &endpoints, free_port()?, shards, mode);
    let state = std::env::temp_dir().join(format!(
        "hcp-flow-bench-history-{}-{}",
        std::process::id(),
        mode.as_str()
    ));
    let seeded = if let Some(operations) = history {
        let ids = world.truth().clusters.into_iter().map(|c| c.cluster_id);
        let seeded =
            super::history::seed(&state, ids, operations as usize, jiff::Timestamp::now())?;
        config.state_dir = Some(state.clone());
        Some(seeded)
    } else {
        None
    };
    let cycle = config
        .sources
        .maestro
        .as_ref()
        .map(|m| m.http.fast_poll_interval)
        .unwrap_or(Duration::from_secs(15));
    let full_relist = shortest_relist(&config);
    let path = std::env::temp_dir().join(format!("hcp-flow-bench-{}.yaml", std::process::id()));
    let Serving {
        child,
        pid,
        base,
        client,
        time_to_ready,
        first_lists_ended_after,
    } = serve_child(&config, &path, pinning, ready_deadline(clusters)).await?;
    let rss_at_ready = resident_memory_of(&pid);
    let ready_at = Instant::now();

    let mut scraper = Scraper::new(client, format!("{base}/metrics"))?;
    // Counters are compared up to the last scrape that ended before any
    // source's first relist could begin (a second to spare).
    let requests_until = (first_lists_ended_after + full_relist)
        .checked_sub(Duration::from_secs(1))
        .unwrap_or(first_lists_ended_after);
    let mut requests = RequestWindow::new(requests_until);
    scraper.scrape().await?;
    let tracked = cluster_ids(scraper.text()?).len();
    requests.observe(scraper.text()?, &world);
    // The requests are counted over the watch: bundles that turn
    // Available in it, timed until /metrics shows them.
    let window = (cycle * 3).max(Duration::from_secs(60)).min(maestro_watch);
    let (maestro_to_metrics, maestro_not_shown) = maestro_change_latency(
        &world,
        &mut scraper,
        &mut requests,
        Watch {
            window,
            grace: cycle * 2,
            shards: shards.max(1),
            at_most: maestro_watch,
        },
    )
    .await?;
    let requests = requests.figures(&world, cycle, shards.max(1));
    // A small fleet has no catch-up worth a window of its own, and the
    // minute it costs would load the machine for nothing (the test suite
    // runs small benches beside timing-sensitive tests).
    let steady = if clusters >= STEADY_WINDOW_FROM_CLUSTERS {
        steady_requests(
            &world,
            &mut scraper,
            ready_at,
            requests_until,
            cycle,
            shards.max(1),
        )
        .await?
    } else {
        SteadyRequests::default()
    };
    let scrape = scraper.timed(scrapes).await?;
    let last = scraper.text()?;
    let memcpy = super::figures::memcpy_of(last.as_bytes(), scrapes);
    let (bytes, series) = (last.len(), series_in(last));
    let fleet_series = fleet_level_series_in(last);
    let (scrape_gzip, gzip_bytes) = scraper.gzip(scrapes).await?;
    let scrape_reqwest = scraper.timed_reqwest(scrapes).await?;
    let rss = resident_memory_of(&pid);
    drop(child);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(&state);
    Ok(EndToEndFigures {
        history: seeded,
        memcpy,
        clusters,
        mode,
        time_to_ready,
        scrape,
        scrape_gzip,
        scrape_reqwest,
        gzip_bytes,
        bytes,
        series,
        fleet_series,
        rss,
        rss_at_ready,
        requests,
        steady,
        cycle,
        full_relist,
        maestro_to_metrics,
        maestro_not_shown,
        shards: shards.max(1),
        tracked,
        pinning: pinning.describe(),
    })
}

/// Below this many clusters the bench counts no steady-state window.
const STEADY_WINDOW_FROM_CLUSTERS: usize = 1000;

/// [`SteadyRequests`]: scrape every few seconds until the node pool reads
/// queued at start are read, then count a minute's requests.
async fn steady_requests(
    world: &crate::sim::World,
    scraper: &mut Scraper,
    ready_at: Instant,
    until: Instant,
    cycle: Duration,
    shards: u32,
) -> Result<SteadyRequests, BenchError> {
    const QUEUED: &str = "hcpflow_node_pool_reads_queued";
    let window = (cycle * 4).max(Duration::from_secs(60));
    loop {
        if Instant::now() + window >= until {
            return Ok(SteadyRequests::default());
        }
        scraper.scrape().await?;
        let queued = by_source(scraper.text()?, QUEUED);
        let batch = crate::sources::node_pools::MAX_HINTED_PER_BATCH as f64;
        if !queued.is_empty() && queued.iter().all(|(_, n)| *n < batch) {
            break;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    let caught_up_after = ready_at.elapsed();
    let mut counted = RequestWindow::new(until);
    counted.observe(scraper.text()?, world);
    tokio::time::sleep(window).await;
    scraper.scrape().await?;
    counted.observe(scraper.text()?, world);
    Ok(SteadyRequests {
        caught_up_after: Some(caught_up_after),
        requests: counted.figures(world, cycle, shards),
    })
}

/// A simulated world of `clusters` clusters serving on threads of its own
/// (the exporter's CPU stays the exporter's), and where it listens.
pub(super) struct BenchWorld {
    pub world: crate::sim::World,
    pub endpoints: crate::sim::Endpoints,
    /// Kept for as long as the world serves.
    pub _upstreams: crate::background::Background,
}

/// Start [`bench_world`] of `clusters` on real time, as every end-to-end
/// part of the bench does.
pub(super) async fn start_bench_world(clusters: usize) -> Result<BenchWorld, BenchError> {
    let world = crate::sim::World::new(bench_world(clusters), crate::sim::SimClock::Real);
    let upstreams = upstream_threads()?;
    let serving = world.clone();
    let endpoints = on_threads(&upstreams, async move { serving.serve().await })
        .await?
        .map_err(BenchError::World)?;
    Ok(BenchWorld {
        world,
        endpoints,
        _upstreams: upstreams,
    })
}

/// The world every end-to-end run starts afresh: the world's defaults
/// (ARO, churn, realistic latency, its seed) without faults.
pub(super) fn bench_world(clusters: usize) -> crate::sim::WorldConfig {
    crate::sim::WorldConfig {
        clusters,
        faults: false,
        ..crate::sim::WorldConfig::default()
    }
}

/// The exporter's configuration over `world`: production intervals
/// (speed 1), Maestro read as `mode` says, shard 0 of `shards`.
pub(super) fn bench_config(
    world: &crate::sim::World,
    endpoints: &crate::sim::Endpoints,
    port: u16,
    shards: u32,
    mode: MaestroMode,
) -> crate::config::Config {
    let settings = crate::demo::DemoSettings {
        clusters: world.config().clusters,
        speed: 1.0,
        seed: world.config().seed,
        faults: false,
        listen: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        world: crate::sim::WorldKind::Aro,
        maestro_stream: mode == MaestroMode::Stream,
    };
    let mut config = crate::demo::demo_config(&settings, world, endpoints);
    config.shard = crate::config::ShardConfig {
        index: 0,
        total: shards.max(1),
    };
    config
}

/// The shortest `full_relist_interval` of the configured sources.
fn shortest_relist(config: &crate::config::Config) -> Duration {
    let sources = &config.sources;
    [
        sources.rp_frontend.as_ref().map(|s| &s.http),
        sources.clusters_service.as_ref().map(|s| &s.http),
        sources.maestro.as_ref().map(|s| &s.http),
    ]
    .into_iter()
    .flatten()
    .map(|http| http.full_relist_interval)
    .min()
    .unwrap_or(Duration::from_secs(600))
}

/// How long [`maestro_change_latency`] watches.
struct Watch {
    window: Duration,
    grace: Duration,
    shards: u32,
    at_most: Duration,
}

/// Watch the world's bundles for `watch.window`, and on until
/// [`MAESTRO_CHANGES`] were timed (at most `watch.at_most`, `bench
/// --maestro-watch`): each one whose `Available` turns True in it is timed
/// from that instant (the world's own plan) to the end of the first scrape
/// that shows it, `hcpflow_hop_condition{hop="maestro_bundle",
/// condition="Available", status="true"}` for its object. Scrapes follow
/// one another, so the figure includes up to one scrape of delay. Each
/// scrape's counters go to `requests`. Returns the latencies and how many
/// were never shown.
async fn maestro_change_latency(
    world: &crate::sim::World,
    scraper: &mut Scraper,
    requests: &mut RequestWindow,
    watch: Watch,
) -> Result<(Latency, usize), BenchError> {
    let started = Instant::now();
    let mut checked = world.now_ms();
    let mut waiting: std::collections::HashMap<String, i64> = std::collections::HashMap::new();
    let mut latencies = Vec::new();
    // Churn replaces clusters only as the first ones go, a few minutes in:
    // the watch goes on past `window` until enough bundles were timed.
    let enough = |timed: usize, elapsed: Duration| {
        elapsed >= watch.window && (timed >= MAESTRO_CHANGES || elapsed >= watch.at_most)
    };
    while !enough(latencies.len(), started.elapsed()) {
        // Bundles that turned since the last look, each taken once.
        let now = world.now_ms();
        // As shard 0 of `shards`, the exporter shows its own clusters only.
        let followed = |id: &str| crate::model::shard_of(id, watch.shards) == 0;
        for plan in world
            .planned(now)
            .iter()
            .filter(|p| followed(&p.cluster_id))
        {
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
        requests.observe(scraper.text()?, world);
    }
    // A bundle that turned in the watch's last seconds has had less than a
    // poll to show: it is given `grace` before it counts as not shown, and
    // no new bundle is taken meanwhile.
    let closing = Instant::now();
    while !waiting.is_empty() && closing.elapsed() < watch.grace {
        scrape_and_time(scraper, world, &mut waiting, &mut latencies).await?;
        requests.observe(scraper.text()?, world);
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
    // The scraper shares its core with the simulated upstreams, whose
    // threads run below it: scraping and reading 50 MB back to back left
    // them a tenth of the core, and the simulated Maestro's stream and APIs
    // fell minutes behind (Clusters Service's requests timed out). A pause
    // leaves them half of it; the figure includes up to one pause more.
    tokio::time::sleep(WATCH_PAUSE).await;
    Ok(())
}

/// The pause between two scrapes of the Maestro watch.
const WATCH_PAUSE: Duration = Duration::from_millis(100);

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

/// Bundles the Maestro figure wants timed.
const MAESTRO_CHANGES: usize = 50;

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests are compared between the first and the last reading taken
    /// before the first relist could begin; one reading alone is no window.
    #[test]
    fn requests_are_counted_only_before_the_first_relist() {
        let world = crate::sim::World::new(bench_world(2), crate::sim::SimClock::Real);
        let body = |maestro: u32, rp: u32| {
            format!(
                "# TYPE {REQUESTS} counter\n{REQUESTS}{{source=\"maestro\"}} {maestro}\n{REQUESTS}{{source=\"rp_frontend\"}} {rp}\n# EOF\n"
            )
        };
        let mut window = RequestWindow::new(Instant::now() + Duration::from_secs(60));
        window.observe(&body(10, 4), &world);
        assert!(
            window
                .figures(&world, Duration::from_secs(15), 1)
                .window
                .is_none()
        );
        std::thread::sleep(Duration::from_millis(30));
        window.observe(&body(13, 6), &world);
        let figures = window.figures(&world, Duration::from_secs(15), 1);
        let span = figures.window.unwrap();
        let per_minute = figures.maestro_per_minute.unwrap();
        assert!((per_minute - 3.0 / (span.as_secs_f64() / 60.0)).abs() < 1e-6);
        let rp = figures
            .per_cycle
            .iter()
            .find(|(s, _)| s == "rp_frontend")
            .unwrap()
            .1;
        assert!((rp - 2.0 / (span.as_secs_f64() / 15.0)).abs() < 1e-6);

        // Past `until`, a reading is not taken: a relist may be in it.
        let mut late = RequestWindow::new(Instant::now());
        late.observe(&body(1, 1), &world);
        late.observe(&body(500, 1), &world);
        assert!(
            late.figures(&world, Duration::from_secs(15), 1)
                .window
                .is_none()
        );
    }
}
