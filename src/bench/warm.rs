//! `hcp-flow bench --warm-restart`: what a restart costs an exporter that
//! hears Maestro on its gRPC stream and keeps a state directory.
//!
//! One `hcp-flow serve` starts cold on an empty state directory, runs until
//! its Maestro source is up and some more, so the state file is written,
//! and is stopped as Kubernetes stops it: SIGTERM, which writes the state
//! file once more. The world goes on for the downtime; what changed in it
//! meanwhile for the clusters the exporter followed is noted from the
//! world's own plans: bundles whose `Available` turned True, clusters gone.
//! A second `serve` then starts on the same state directory, and the bench
//! measures when it is ready, when its Maestro source is up, what its first
//! scrape shows, and when a scrape first reflects every change of the
//! downtime. Whatever the exporter does on a restart is measured as it is.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::end_to_end::bench_config;
use super::figures::resident_memory_of;
use super::process::{Readiness, Spawned, Stopped, free_port, ready_deadline, spawn_child};
use super::readings::{
    available_bundles, cluster_ids, kind_states, source_up, value_of, value_where,
};
use super::report::rss_text;
use super::scraper::Scraper;
use super::{BenchError, MaestroMode, pin};

/// The source whose restart is measured.
const SOURCE: &str = "maestro";
/// How long the first exporter runs once its Maestro source is up: the
/// state file is written every 15 s while the memory changes.
const SETTLE: Duration = Duration::from_secs(30);
/// How much longer the first exporter is given for its first state write.
const FIRST_WRITE_WITHIN: Duration = Duration::from_secs(30);
/// How long past its `shutdown_grace` a stopping exporter may take to exit
/// before it is killed.
const EXIT_SLACK: Duration = Duration::from_secs(20);
/// Changes are looked for by a scrape at most this often, and never in more
/// than a tenth of the exporter's time (a scrape of 50,000 clusters takes
/// a tenth of a second).
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// How much longer than the cold start the warm restart may take to
/// reflect the downtime: its list is paced (docs/design/03-timeline-model.md §3.10).
const WARM_LIMIT_FACTOR: f64 = 2.0;

/// What `hcp-flow bench --warm-restart` measured.
#[derive(Clone, Debug)]
pub struct WarmFigures {
    pub clusters: usize,
    /// The exporter followed shard 0 of this many.
    pub shards: u32,
    /// Clusters the first exporter tracked before its SIGTERM.
    pub tracked: usize,
    pub cold: StartFigures,
    pub warm: StartFigures,
    /// From the first exporter's Maestro source up to its SIGTERM.
    pub ran_before_stop: Duration,
    /// `hcpflow_state_store_writes_total{result="ok"}` before the SIGTERM.
    pub state_writes: Option<f64>,
    /// `hcpflow_state_store_clusters` before the SIGTERM.
    pub state_clusters: Option<f64>,
    /// The state file's size once the first exporter had exited.
    pub state_file_bytes: Option<u64>,
    /// The readings file's size once the first exporter had exited
    /// (docs/design/03-timeline-model.md §3.10).
    pub readings_file_bytes: Option<u64>,
    pub rss_before_stop: Option<u64>,
    pub stop: Stopped,
    /// From the SIGTERM to the second exporter's spawn.
    pub downtime: Duration,
    pub changes: ChangeFigures,
    /// The second exporter's, once the changes were reflected (or not).
    pub rss_warm_end: Option<u64>,
    pub pinning: String,
}

/// One start of the exporter, timed from its spawn.
#[derive(Clone, Debug)]
pub struct StartFigures {
    /// Its first ready `/readyz`.
    pub ready: Duration,
    /// Its first scrape with `hcpflow_source_up{source="maestro"} 1`;
    /// `None` when none came within the bench's deadline.
    pub up: Option<Duration>,
    pub rss_at_ready: Option<u64>,
    pub first_scrape: FirstScrape,
}

/// What the first scrape the exporter answered showed.
#[derive(Clone, Debug)]
pub struct FirstScrape {
    /// From the spawn.
    pub at: Duration,
    /// `hcpflow_source_up{source="maestro"}`.
    pub maestro_up: Option<bool>,
    /// `hcpflow_source_kind_info{source="maestro"}`: kind and state.
    pub kinds: Vec<(String, String)>,
    /// Clusters with an `hcpflow_cluster_info`.
    pub tracked: usize,
    /// `hcpflow_state_store_clusters`: what the state file gave back.
    pub restored: Option<f64>,
}

/// What changed in the world while the exporter was down, and when the
/// restarted exporter's scrapes reflected it.
#[derive(Clone, Debug, Default)]
pub struct ChangeFigures {
    /// Bundles of followed clusters whose `Available` turned True.
    pub turned_available: usize,
    /// Clusters the exporter tracked that were gone from every upstream.
    pub vanished: usize,
    /// Changes the second exporter's first scrape already reflected.
    pub reflected_on_first_scrape: usize,
    /// From the second spawn to the end of the first scrape that reflected
    /// every change still in the world; `None` if none did by the end.
    pub all_reflected: Option<Duration>,
    /// When the bench stopped looking (from the second spawn).
    pub looked_until: Duration,
    /// Still unreflected then: bundles not shown Available, clusters still
    /// shown.
    pub unreflected_bundles: usize,
    pub unreflected_vanished: usize,
    /// Bundles deleted from the world (or their cluster gone) before a
    /// scrape showed them: nothing left to reflect.
    pub dropped: usize,
}

/// The changes of the downtime still to be seen in a scrape.
#[derive(Debug, Default)]
struct Changes {
    /// Bundle name → the world's time it stops existing, if it does.
    bundles: HashMap<String, Option<i64>>,
    /// Cluster ids that must no longer have an `hcpflow_cluster_info`.
    vanished: HashSet<String>,
    figures: ChangeFigures,
    first_checked: bool,
}

impl Changes {
    /// What changed in `world` between `stop_ms` and `end_ms` for the
    /// clusters `followed` (tracked by the exporter at its stop) of shard 0
    /// of `shards`; `alive_at_stop` is each cluster the world had at the
    /// stop with the time it goes.
    fn during(
        world: &crate::sim::World,
        (stop_ms, end_ms): (i64, i64),
        shards: u32,
        followed: &HashSet<String>,
        alive_at_stop: &[(String, Option<i64>)],
    ) -> Changes {
        let in_downtime = |t: i64| (stop_ms + 1..=end_ms).contains(&t);
        let vanished: HashSet<String> = alive_at_stop
            .iter()
            .filter(|(id, gone)| followed.contains(id) && gone.is_some_and(in_downtime))
            .map(|(id, _)| id.clone())
            .collect();
        let mut bundles = HashMap::new();
        let plans = world.planned(end_ms);
        let live = plans.iter().filter(|p| {
            crate::model::shard_of(&p.cluster_id, shards) == 0
                && p.gone_at.is_none_or(|g| g > end_ms)
        });
        for plan in live {
            let ends = [plan.bundle_deleted, plan.gone_at]
                .into_iter()
                .flatten()
                .min();
            if ends.is_some_and(|t| t <= end_ms) {
                continue;
            }
            for bundle in &plan.bundles {
                let turned = bundle
                    .available
                    .filter(|at| in_downtime(*at))
                    .filter(|at| bundle.frozen.is_none_or(|f| f >= *at));
                if turned.is_some() {
                    bundles.insert(bundle.name.clone(), ends);
                }
            }
        }
        Changes {
            figures: ChangeFigures {
                turned_available: bundles.len(),
                vanished: vanished.len(),
                ..ChangeFigures::default()
            },
            bundles,
            vanished,
            first_checked: false,
        }
    }

    fn pending(&self) -> usize {
        self.bundles.len() + self.vanished.len()
    }

    /// What a scrape that ended `at` after the spawn, at the world's
    /// `world_ms`, reflects.
    fn check(&mut self, body: &str, world_ms: i64, at: Duration) {
        let shown = available_bundles(body);
        let tracked = cluster_ids(body);
        let mut dropped = 0;
        self.bundles.retain(|name, ends| {
            if shown.contains(name.as_str()) {
                return false;
            }
            let gone = ends.is_some_and(|t| t <= world_ms);
            dropped += usize::from(gone);
            !gone
        });
        self.vanished.retain(|id| tracked.contains(id.as_str()));
        let pending = self.pending();
        let figures = &mut self.figures;
        figures.dropped += dropped;
        if !self.first_checked {
            self.first_checked = true;
            figures.reflected_on_first_scrape =
                figures.turned_available + figures.vanished - figures.dropped - pending;
        }
        if pending == 0 && figures.all_reflected.is_none() {
            figures.all_reflected = Some(at);
        }
        figures.looked_until = at;
        figures.unreflected_bundles = self.bundles.len();
        figures.unreflected_vanished = self.vanished.len();
    }
}

/// A file or directory of the bench's, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Start a stream-mode exporter with a fresh state directory over a world
/// of `clusters` clusters, stop it with SIGTERM once its state is written,
/// keep the world going for `downtime`, start it again on the same state
/// directory and measure both starts.
pub async fn warm_restart(
    clusters: usize,
    shards: u32,
    downtime: Duration,
) -> Result<WarmFigures, BenchError> {
    let shards = shards.max(1);
    let pinning = pin::Pinning::apply();
    let super::end_to_end::BenchWorld {
        world,
        endpoints,
        _upstreams,
    } = super::end_to_end::start_bench_world(clusters).await?;
    let unique = format!(
        "{}-{}",
        std::process::id(),
        world.clock().now().as_millisecond()
    );
    let tmp = std::env::temp_dir();
    let state = Scratch(tmp.join(format!("hcp-flow-bench-state-{unique}")));
    let path = Scratch(tmp.join(format!("hcp-flow-bench-warm-{unique}.yaml")));
    let mut config = bench_config(
        &world,
        &endpoints,
        free_port()?,
        shards,
        MaestroMode::Stream,
    );
    config.state_dir = Some(state.0.clone());
    let cycle = config
        .sources
        .maestro
        .as_ref()
        .map_or(Duration::from_secs(15), |m| m.http.fast_poll_interval);
    let limit = ready_deadline(clusters);

    // Cold: nothing in the state directory.
    let mut cold_child = spawn_child(&config, &path.0, &pinning)?;
    let cold = start(
        &mut cold_child,
        &world,
        &mut Changes::default(),
        limit,
        cycle,
    )
    .await?;
    let up = cold
        .up
        .ok_or_else(|| BenchError::NotUp(SOURCE.to_string(), limit))?;
    let up_at = cold_child.started + up;
    // Running on until the state file was written.
    tokio::time::sleep_until((up_at + SETTLE).into()).await;
    let mut scraper = Scraper::new(
        cold_child.client.clone(),
        format!("{}/metrics", cold_child.base),
    )?;
    let state_writes = loop {
        scraper.scrape().await?;
        let writes = value_where(
            scraper.text()?,
            "hcpflow_state_store_writes_total",
            "result",
            "ok",
        );
        if writes.is_some_and(|w| w >= 1.0) || up_at.elapsed() > SETTLE + FIRST_WRITE_WITHIN {
            break writes;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let last = scraper.text()?;
    let followed: HashSet<String> = cluster_ids(last).into_iter().map(String::from).collect();
    let state_clusters = value_of(last, "hcpflow_state_store_clusters");
    let rss_before_stop = resident_memory_of(&cold_child.pid);

    // SIGTERM, as Kubernetes stops a pod; the world goes on.
    let stop_ms = world.now_ms();
    let alive_at_stop: Vec<(String, Option<i64>)> = world
        .planned(stop_ms)
        .iter()
        .map(|p| (p.cluster_id.clone(), p.gone_at))
        .filter(|(_, gone)| gone.is_none_or(|g| g > stop_ms))
        .collect();
    let stopping = Instant::now();
    let ran_before_stop = stopping.duration_since(up_at);
    let stop = cold_child
        .child
        .terminate(config.shutdown_grace + EXIT_SLACK)
        .await?;
    drop(cold_child);
    let state_file_bytes = std::fs::metadata(state.0.join(crate::state_store::FILE_NAME))
        .ok()
        .map(|m| m.len());
    let readings_file_bytes =
        std::fs::metadata(state.0.join(crate::state_store::READINGS_FILE_NAME))
            .ok()
            .map(|m| m.len());
    tokio::time::sleep_until((stopping + downtime).into()).await;

    // Warm: the same state directory, on a port of its own.
    config.listen.set_port(free_port()?);
    let end_ms = world.now_ms();
    let mut changes = Changes::during(&world, (stop_ms, end_ms), shards, &followed, &alive_at_stop);
    let mut warm_child = spawn_child(&config, &path.0, &pinning)?;
    let downtime = stopping.elapsed();
    // The warm list is paced (a quarter of each page's time on top) and
    // reconciles what was restored while the stream's events apply: at
    // 50,000 clusters it outlasts the cold list's deadline, and a figure
    // beats "not within".
    let warm_limit = limit.mul_f64(WARM_LIMIT_FACTOR);
    let warm = start(&mut warm_child, &world, &mut changes, warm_limit, cycle).await?;
    let rss_warm_end = resident_memory_of(&warm_child.pid);
    drop(warm_child);
    Ok(WarmFigures {
        clusters,
        shards,
        tracked: followed.len(),
        cold,
        warm,
        ran_before_stop,
        state_writes,
        state_clusters,
        state_file_bytes,
        readings_file_bytes,
        rss_before_stop,
        stop,
        downtime,
        changes: changes.figures,
        rss_warm_end,
        pinning: pinning.describe(),
    })
}

/// Follow one start of the exporter from its spawn: its first scrape (as
/// soon as it answers), its first ready `/readyz`, its first scrape with
/// Maestro up, and scrapes until every change in `changes` is reflected or
/// two fast-poll `cycle`s after both ready and up. Fails when it is not
/// ready within `limit` or exits.
async fn start(
    spawned: &mut Spawned,
    world: &crate::sim::World,
    changes: &mut Changes,
    limit: Duration,
    cycle: Duration,
) -> Result<StartFigures, BenchError> {
    let started = spawned.started;
    let mut scraper = Scraper::new(spawned.client.clone(), format!("{}/metrics", spawned.base))?;
    // The first scrape the exporter answers.
    while let Err(error) = scraper.scrape().await {
        if let Some(status) = spawned.child.exited() {
            return Err(BenchError::Exited(status));
        }
        if started.elapsed() > limit {
            return Err(error);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let at = started.elapsed();
    let body = scraper.text()?;
    let mut kinds = kind_states(body, SOURCE);
    kinds.sort();
    let first_scrape = FirstScrape {
        at,
        maestro_up: source_up(body, SOURCE),
        kinds,
        tracked: cluster_ids(body).len(),
        restored: value_of(body, "hcpflow_state_store_clusters"),
    };
    let mut up = (first_scrape.maestro_up == Some(true)).then_some(at);
    changes.check(body, world.now_ms(), at);

    let mut ready = None;
    let mut rss_at_ready = None;
    let mut next_check = Instant::now() + CHECK_EVERY;
    let mut stop_looking: Option<Instant> = None;
    loop {
        let mut scrape_now = false;
        let asking = ready.is_none() || up.is_none();
        if asking && let Some(readiness) = Readiness::get(&spawned.client, &spawned.base).await {
            if ready.is_none() && readiness.ready {
                ready = Some(started.elapsed());
                rss_at_ready = resident_memory_of(&spawned.pid);
            }
            // /readyz says so; the figure is the scrape's.
            scrape_now = up.is_none() && readiness.up.iter().any(|s| s == SOURCE);
        }
        if scrape_now || (changes.pending() > 0 && Instant::now() >= next_check) {
            let took = scraper.scrape().await?;
            let at = started.elapsed();
            let body = scraper.text()?;
            if up.is_none() && source_up(body, SOURCE) == Some(true) {
                up = Some(at);
            }
            changes.check(body, world.now_ms(), at);
            next_check = Instant::now() + CHECK_EVERY.max(took * 10);
        }
        if ready.is_some() && up.is_some() {
            let until = *stop_looking.get_or_insert_with(|| Instant::now() + cycle * 2);
            if changes.pending() == 0 || Instant::now() >= until {
                break;
            }
        }
        if let Some(status) = spawned.child.exited() {
            return Err(BenchError::Exited(status));
        }
        if started.elapsed() > limit {
            match ready {
                None => return Err(BenchError::NotReady(limit)),
                // Never up: reported as such.
                Some(_) => break,
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(StartFigures {
        ready: ready.unwrap_or(limit),
        up,
        rss_at_ready,
        first_scrape,
    })
}

/// The markdown `hcp-flow bench --warm-restart` prints.
pub fn report_warm(w: &WarmFigures) -> String {
    let secs = |d: Duration| format!("{:.1} s", d.as_secs_f64());
    let up = |s: &StartFigures| {
        s.up.map_or_else(|| "not within the bench's deadline".to_string(), secs)
    };
    let first = |s: &StartFigures| {
        let f = &s.first_scrape;
        let kinds: Vec<String> = f.kinds.iter().map(|(k, s)| format!("`{k}` {s}")).collect();
        format!(
            "at {}: {}; up {}; {} clusters; {} restored",
            secs(f.at),
            match kinds.is_empty() {
                true => "no kind".to_string(),
                false => kinds.join(", "),
            },
            f.maestro_up
                .map_or("absent".to_string(), |u| u8::from(u).to_string()),
            f.tracked,
            f.restored.map_or("n/a".to_string(), |r| format!("{r:.0}")),
        )
    };
    let c = &w.changes;
    let reflected = match (c.turned_available + c.vanished, c.all_reflected) {
        (0, _) => "no change to reflect".to_string(),
        (_, Some(at)) => format!(
            "{} after the warm start (a scrape at most every {} s, and in at most a tenth of the exporter's time)",
            secs(at),
            CHECK_EVERY.as_secs()
        ),
        (_, None) => format!(
            "not within {}: {} bundles not shown Available, {} vanished clusters still shown",
            secs(c.looked_until),
            c.unreflected_bundles,
            c.unreflected_vanished
        ),
    };
    let mut out = format!(
        "## Warm restart (`hcp-flow serve` hearing Maestro's stream, with a state directory; {} clusters, realistic upstream latency)\n\n\
         | figure | cold start | warm restart |\n|---|---|---|\n\
         | time to /readyz | {} | {} |\n\
         | time to `hcpflow_source_up{{source=\"maestro\"}} 1` | {} | {} |\n\
         | first scrape: Maestro's `hcpflow_source_kind_info` states, `hcpflow_source_up`, clusters shown, `hcpflow_state_store_clusters` | {} | {} |\n\
         | exporter resident memory at /readyz | {} | {} |\n\n",
        w.clusters,
        secs(w.cold.ready),
        secs(w.warm.ready),
        up(&w.cold),
        up(&w.warm),
        first(&w.cold),
        first(&w.warm),
        rss_text(w.cold.rss_at_ready),
        rss_text(w.warm.rss_at_ready),
    );
    out.push_str(&format!(
        "| figure | value |\n|---|---|\n\
         | shard | {} |\n\
         | ran after Maestro was up, before SIGTERM | {} |\n\
         | state file before SIGTERM | {} writes, {} clusters; {} bytes after the exit |\n\
         | Maestro's readings file after the exit | {} |\n\
         | SIGTERM → exit | {} ({}) |\n\
         | downtime (SIGTERM → the new process), the world going on | {} |\n\
         | changes during the downtime (followed clusters) | {} bundles turned Available, {} clusters vanished |\n\
         | every downtime change reflected in /metrics | {} |\n\
         | changes already reflected by the first warm scrape | {} of {} |\n\
         | bundles deleted from the world before a scrape showed them | {} |\n\
         | exporter resident memory before SIGTERM / at the end of the warm run | {} / {} |\n\
         | CPUs | {} |\n",
        match w.shards {
            1 => format!("the whole fleet: {} clusters tracked", w.tracked),
            n => format!(
                "0 of {n} (`--shard 0 --total-shards {n}`): {} clusters tracked",
                w.tracked
            ),
        },
        secs(w.ran_before_stop),
        w.state_writes
            .map_or("n/a".to_string(), |n| format!("{n:.0}")),
        w.state_clusters
            .map_or("n/a".to_string(), |n| format!("{n:.0}")),
        w.state_file_bytes
            .map_or("no file".to_string(), |b| b.to_string()),
        w.readings_file_bytes
            .map_or("no file".to_string(), |b| format!("{b} bytes")),
        secs(w.stop.took),
        w.stop
            .status
            .clone()
            .unwrap_or_else(|| "did not exit in time: killed".to_string()),
        secs(w.downtime),
        c.turned_available,
        c.vanished,
        reflected,
        c.reflected_on_first_scrape,
        c.turned_available + c.vanished,
        c.dropped,
        rss_text(w.rss_before_stop),
        rss_text(w.rss_warm_end),
        w.pinning,
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::in_process::synthetic_store;
    use crate::metrics::exposition::Format;

    /// A change counts as reflected when a real scrape shows it: a bundle
    /// Available, a vanished cluster without its `hcpflow_cluster_info`.
    /// A bundle gone from the world first is dropped, not waited for.
    #[test]
    fn changes_are_reflected_by_a_real_scrape() {
        let store = synthetic_store(2);
        let body = store.scrape(Format::OpenMetrics);
        let tracked: Vec<String> = cluster_ids(&body).into_iter().map(String::from).collect();
        let mut changes = Changes {
            bundles: [
                ("bundle-0".to_string(), None),
                ("bundle-never".to_string(), Some(5_000)),
                ("bundle-later".to_string(), None),
            ]
            .into_iter()
            .collect(),
            vanished: ["gone-cluster".to_string(), tracked[0].clone()]
                .into_iter()
                .collect(),
            figures: ChangeFigures {
                turned_available: 3,
                vanished: 2,
                ..ChangeFigures::default()
            },
            first_checked: false,
        };
        changes.check(&body, 1_000, Duration::from_secs(1));
        // bundle-0 shown, gone-cluster absent.
        assert_eq!(changes.figures.reflected_on_first_scrape, 2);
        assert_eq!(changes.pending(), 3);
        assert_eq!(changes.figures.all_reflected, None);
        changes.check(&body, 6_000, Duration::from_secs(2));
        assert_eq!(changes.figures.dropped, 1);
        assert_eq!(changes.figures.reflected_on_first_scrape, 2);
        assert_eq!(changes.figures.unreflected_bundles, 1);
        assert_eq!(changes.figures.unreflected_vanished, 1);
        assert_eq!(changes.figures.looked_until, Duration::from_secs(2));

        let empty = synthetic_store(0).scrape(Format::OpenMetrics);
        changes.bundles.clear();
        changes.check(&empty, 7_000, Duration::from_secs(3));
        assert_eq!(changes.pending(), 0);
        assert_eq!(changes.figures.all_reflected, Some(Duration::from_secs(3)));
    }

    /// The downtime's changes come from the world's plans: only what
    /// turned or went inside the downtime, of followed clusters.
    #[test]
    fn downtime_changes_are_read_from_the_worlds_plans() {
        let world = crate::sim::World::new(
            super::super::end_to_end::bench_world(40),
            crate::sim::SimClock::Real,
        );
        let now = world.now_ms();
        let plans = world.planned(now);
        let alive: Vec<(String, Option<i64>)> = plans
            .iter()
            .map(|p| (p.cluster_id.clone(), p.gone_at))
            .collect();
        let followed: HashSet<String> = alive.iter().map(|(id, _)| id.clone()).collect();
        // Over the whole next hour, the world's churn deletes some of them
        // and its new clusters' bundles turn Available.
        let hour = 3_600_000;
        let changes = Changes::during(&world, (now, now + hour), 1, &followed, &alive);
        let gone = alive
            .iter()
            .filter(|(_, g)| g.is_some_and(|g| g > now && g <= now + hour))
            .count();
        assert!(gone > 0);
        assert_eq!(changes.figures.vanished, gone);
        assert!(changes.figures.turned_available > 0);
        // Nothing happens in an empty downtime.
        let none = Changes::during(&world, (now, now), 1, &followed, &alive);
        assert_eq!(none.pending(), 0);
        // Nothing of clusters the exporter did not follow.
        let other = Changes::during(&world, (now, now + hour), 1, &HashSet::new(), &alive);
        assert_eq!(other.figures.vanished, 0);
    }
}
