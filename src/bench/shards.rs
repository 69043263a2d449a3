//! What each shard costs against one instance (`hcp-flow bench --shards N`,
//! N > 1): one unsharded `hcp-flow serve` and the N shards side by side
//! against one simulated world, so every instance reads the same fleet in
//! the same watch window (docs/design/08-scopes-and-scale-out.md §8.3).

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use super::end_to_end::bench_config;
use super::figures::{Latency, fleet_level_series_in, resident_memory_of, series_in};
use super::process::{Serving, free_port, ready_deadline, spawn_child, wait_ready};
use super::readings::{by_source, cluster_ids};
use super::scraper::Scraper;
use super::{BenchError, MaestroMode, pin};

/// One instance of the comparison.
#[derive(Clone, Debug)]
pub struct InstanceFigures {
    /// `None`: the unsharded instance; `Some(i)`: shard `i` of the run's N.
    pub shard: Option<u32>,
    /// Clusters tracked at the first scrape after every instance was ready.
    pub tracked: usize,
    pub time_to_ready: Duration,
    pub rss_at_ready: Option<u64>,
    pub rss: Option<u64>,
    pub series: usize,
    pub fleet_series: usize,
    pub bytes: usize,
    pub scrape: Latency,
    /// Upstream requests per fast-poll cycle by source
    /// (`hcpflow_source_requests_total`), over the run's one window.
    pub per_cycle: Vec<(String, f64)>,
}

/// Whether the shards' clusters add up to the unsharded instance's, at
/// one round of scrapes of every instance back to back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SumCheck {
    /// Clusters tracked, summed over the shards.
    pub sum: usize,
    /// Clusters the unsharded instance tracked.
    pub whole: usize,
    /// Clusters a shard tracked that hash to another shard.
    pub misplaced: usize,
    /// Clusters more than one shard tracked.
    pub shared: usize,
    /// Clusters tracked by exactly one of the unsharded instance and the
    /// shards together: the world changed between their polls.
    pub differing: usize,
}

impl SumCheck {
    /// The check over one round: `whole`'s ids against `shards`' (shard i
    /// at index i of `total`).
    pub fn of(whole: &HashSet<String>, shards: &[HashSet<String>], total: u32) -> SumCheck {
        let mut seen: HashSet<&str> = HashSet::new();
        let mut shared = 0;
        let mut misplaced = 0;
        for (index, ids) in shards.iter().enumerate() {
            for id in ids {
                if !seen.insert(id.as_str()) {
                    shared += 1;
                }
                if u32::try_from(index).ok() != Some(crate::model::shard_of(id, total)) {
                    misplaced += 1;
                }
            }
        }
        let differing = seen.iter().filter(|id| !whole.contains(**id)).count()
            + whole
                .iter()
                .filter(|id| !seen.contains(id.as_str()))
                .count();
        SumCheck {
            sum: shards.iter().map(HashSet::len).sum(),
            whole: whole.len(),
            misplaced,
            shared,
            differing,
        }
    }

    /// The sum equals the whole, and no shard holds another's cluster.
    pub fn holds(&self) -> bool {
        self.sum == self.whole && self.misplaced == 0 && self.shared == 0
    }
}

/// The comparison: every instance, and the sum check over its rounds.
#[derive(Clone, Debug)]
pub struct ShardFigures {
    pub clusters: usize,
    pub mode: MaestroMode,
    pub shards: u32,
    pub cycle: Duration,
    pub full_relist: Duration,
    /// Between the first and the last round the requests compare.
    pub window: Option<Duration>,
    /// The unsharded instance first, then shard 0, 1, ….
    pub instances: Vec<InstanceFigures>,
    /// Each round's check, in order.
    pub rounds: Vec<SumCheck>,
    pub pinning: String,
}

impl ShardFigures {
    /// The first round whose check held (1-based), if any.
    pub fn held_at(&self) -> Option<usize> {
        self.rounds.iter().position(SumCheck::holds).map(|i| i + 1)
    }
}

/// A pause between two rounds of the window.
pub const ROUND_EVERY: Duration = Duration::from_secs(5);

/// Rounds at most after the window, for the sum check alone, while the
/// instances catch up with a world that moved between their polls.
const EXTRA_ROUNDS: usize = 6;

/// One unsharded instance and `shards` shards, side by side against one
/// world of `clusters` clusters (realistic latency, churn, no faults),
/// Maestro read as `mode` says. The request window is three fast-poll
/// cycles (at most `watch`), ending before any instance's first relist.
pub async fn compare(
    clusters: usize,
    scrapes: usize,
    shards: u32,
    watch: Duration,
    mode: MaestroMode,
    pinning: &pin::Pinning,
) -> Result<ShardFigures, BenchError> {
    let super::end_to_end::BenchWorld {
        world,
        endpoints,
        _upstreams,
    } = super::end_to_end::start_bench_world(clusters).await?;
    let instances: Vec<Option<u32>> = std::iter::once(None).chain((0..shards).map(Some)).collect();
    let mut configs = Vec::new();
    for shard in &instances {
        let mut config = bench_config(&world, &endpoints, free_port()?, 1, mode);
        if let Some(index) = shard {
            config.shard = crate::config::ShardConfig {
                index: *index,
                total: shards,
            };
        }
        configs.push(config);
    }
    let cycle = configs
        .first()
        .and_then(|c| c.sources.maestro.as_ref())
        .map(|m| m.http.fast_poll_interval)
        .unwrap_or(Duration::from_secs(15));
    let full_relist = configs
        .first()
        .and_then(|c| c.sources.maestro.as_ref())
        .map(|m| m.http.full_relist_interval)
        .unwrap_or(Duration::from_secs(600));
    // All started at once, each waited for on its own, so each one's time
    // to /readyz and memory at it are its own.
    let paths: Vec<std::path::PathBuf> = (0..configs.len())
        .map(|i| {
            std::env::temp_dir().join(format!("hcp-flow-bench-{}-{i}.yaml", std::process::id()))
        })
        .collect();
    let mut spawned = Vec::new();
    for (config, path) in configs.iter().zip(&paths) {
        spawned.push(spawn_child(config, path, pinning)?);
    }
    let deadline = ready_deadline(clusters);
    let ready = futures::future::join_all(spawned.into_iter().map(|s| async move {
        let serving = wait_ready(s, deadline).await?;
        let rss = resident_memory_of(&serving.pid);
        Ok::<(Serving, Option<u64>), BenchError>((serving, rss))
    }))
    .await;
    let mut serving = Vec::new();
    for result in ready {
        serving.push(result?);
    }
    let until = serving
        .iter()
        .map(|(s, _)| s.first_lists_ended_after + full_relist)
        .min()
        .and_then(|t| t.checked_sub(Duration::from_secs(1)))
        .unwrap_or_else(Instant::now);
    let mut scrapers = Vec::new();
    for (s, _) in &serving {
        scrapers.push(Scraper::new(
            s.client.clone(),
            format!("{}/metrics", s.base),
        )?);
    }

    // Rounds: every instance scraped back to back, the requests of the
    // first and last kept, each round's sum checked.
    let window = (cycle * 3).min(watch);
    let started = Instant::now();
    let mut rounds = Vec::new();
    let mut first: Option<Counted> = None;
    let mut last: Option<Counted> = None;
    let mut tracked = Vec::new();
    loop {
        let (at, requests, ids) = round(&mut scrapers).await?;
        rounds.push(check(&ids, shards));
        if tracked.is_empty() {
            tracked = ids.iter().map(HashSet::len).collect();
        }
        if at < until {
            match first {
                None => first = Some((at, requests)),
                Some(_) => last = Some((at, requests)),
            }
        }
        if started.elapsed() >= window || Instant::now() >= until {
            break;
        }
        tokio::time::sleep(ROUND_EVERY).await;
    }
    // A world that churns may differ between two instances' polls: a few
    // more rounds give them the chance to agree, requests no longer counted.
    let mut extra = 0;
    while !rounds.iter().any(SumCheck::holds) && extra < EXTRA_ROUNDS {
        tokio::time::sleep(ROUND_EVERY).await;
        let (_, _, ids) = round(&mut scrapers).await?;
        rounds.push(check(&ids, shards));
        extra += 1;
    }
    let (counted, per_cycle) = per_cycle(first.as_ref(), last.as_ref(), cycle, serving.len());

    let mut figures = Vec::new();
    for (index, ((s, rss_at_ready), scraper)) in serving.iter().zip(&mut scrapers).enumerate() {
        let scrape = scraper.timed(scrapes).await?;
        let body = scraper.text()?;
        figures.push(InstanceFigures {
            shard: instances.get(index).copied().flatten(),
            tracked: tracked.get(index).copied().unwrap_or(0),
            time_to_ready: s.time_to_ready,
            rss_at_ready: *rss_at_ready,
            rss: resident_memory_of(&s.pid),
            series: series_in(body),
            fleet_series: fleet_level_series_in(body),
            bytes: body.len(),
            scrape,
            per_cycle: per_cycle.get(index).cloned().unwrap_or_default(),
        });
    }
    drop(serving);
    for path in &paths {
        let _ = std::fs::remove_file(path);
    }
    Ok(ShardFigures {
        clusters,
        mode,
        shards,
        cycle,
        full_relist,
        window: counted,
        instances: figures,
        rounds,
        pinning: match pinning {
            pin::Pinning::Pinned { exporter, others } => format!(
                "the {} exporters together on CPU {exporter}; world and scraper on CPU {others} (taskset)",
                instances.len()
            ),
            pin::Pinning::Shared(_) => pinning.describe(),
        },
    })
}

/// Each instance's requests by source (`hcpflow_source_requests_total`).
type BySource = Vec<Vec<(String, f64)>>;

/// A round's requests, and when the round ended.
type Counted = (Instant, BySource);

/// Scrape every instance once, back to back: when the round ended, each
/// one's requests by source, each one's tracked cluster ids.
type Round = (Instant, BySource, Vec<HashSet<String>>);

async fn round(scrapers: &mut [Scraper]) -> Result<Round, BenchError> {
    let mut requests = Vec::new();
    let mut ids = Vec::new();
    for scraper in scrapers.iter_mut() {
        scraper.scrape().await?;
        let body = scraper.text()?;
        requests.push(by_source(body, REQUESTS));
        ids.push(cluster_ids(body).into_iter().map(str::to_string).collect());
    }
    Ok((Instant::now(), requests, ids))
}

const REQUESTS: &str = "hcpflow_source_requests_total";

/// The round's check: the unsharded instance's ids first, then the shards'.
fn check(ids: &[HashSet<String>], shards: u32) -> SumCheck {
    match ids.split_first() {
        Some((whole, rest)) => SumCheck::of(whole, rest, shards),
        None => SumCheck::of(&HashSet::new(), &[], shards),
    }
}

/// Requests per fast-poll cycle for each of `instances`, between two
/// rounds; the window, `None` when there was no second round before the
/// first relist.
fn per_cycle(
    first: Option<&Counted>,
    last: Option<&Counted>,
    cycle: Duration,
    instances: usize,
) -> (Option<Duration>, Vec<Vec<(String, f64)>>) {
    let (Some((from, before)), Some((to, after))) = (first, last) else {
        return (None, vec![Vec::new(); instances]);
    };
    let window = to.duration_since(*from);
    let cycles = window.as_secs_f64() / cycle.as_secs_f64().max(1e-9);
    if cycles <= 0.0 {
        return (None, vec![Vec::new(); instances]);
    }
    let rates = before
        .iter()
        .zip(after)
        .map(|(before, after)| {
            let before: BTreeMap<&str, f64> =
                before.iter().map(|(s, v)| (s.as_str(), *v)).collect();
            after
                .iter()
                .map(|(source, v)| {
                    let was = before.get(source.as_str()).copied().unwrap_or(0.0);
                    (source.clone(), (v - was) / cycles)
                })
                .collect()
        })
        .collect();
    (Some(window), rates)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(of: &[&str]) -> HashSet<String> {
        of.iter().map(|s| s.to_string()).collect()
    }

    /// Split ids by the shard they hash to, as shards would track them.
    fn split(all: &[&str], total: u32) -> Vec<HashSet<String>> {
        (0..total)
            .map(|i| {
                all.iter()
                    .filter(|id| crate::model::shard_of(id, total) == i)
                    .map(|s| s.to_string())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn the_sum_check_holds_only_for_disjoint_shards_that_add_up() {
        let all = ["c1", "c2", "c3", "c4", "c5", "c6", "c7"];
        let whole = ids(&all);
        let mut shards = split(&all, 3);
        let exact = SumCheck::of(&whole, &shards, 3);
        assert!(exact.holds(), "{exact:?}");
        assert_eq!((exact.sum, exact.whole, exact.differing), (7, 7, 0));

        // A cluster the whole saw go that a shard still tracks.
        let fewer = ids(&all[1..]);
        let late = SumCheck::of(&fewer, &shards, 3);
        assert!(!late.holds());
        assert_eq!((late.sum, late.whole, late.differing), (7, 6, 1));

        // A cluster in the wrong shard and in two shards: never holds,
        // even when the count adds up.
        let moved = shards
            .iter()
            .position(|s| !s.is_empty())
            .and_then(|i| shards[i].iter().next().cloned().map(|id| (i, id)));
        let (from, id) = moved.unwrap();
        shards[from].remove(&id);
        shards[(from + 1) % 3].insert(id.clone());
        let wrong = SumCheck::of(&whole, &shards, 3);
        assert_eq!((wrong.sum, wrong.misplaced), (7, 1));
        assert!(!wrong.holds());
        shards[from].insert(id);
        let twice = SumCheck::of(&whole, &shards, 3);
        assert_eq!(twice.shared, 1);
        assert!(!twice.holds());
    }

    #[test]
    fn requests_per_cycle_are_each_instances_own_delta() {
        let at = Instant::now();
        let first = (
            at,
            vec![
                vec![("maestro".to_string(), 10.0)],
                vec![("maestro".to_string(), 4.0)],
            ],
        );
        let last = (
            at + Duration::from_secs(30),
            vec![
                vec![("maestro".to_string(), 16.0), ("rp".to_string(), 2.0)],
                vec![("maestro".to_string(), 7.0)],
            ],
        );
        let (window, rates) = per_cycle(Some(&first), Some(&last), Duration::from_secs(15), 2);
        assert_eq!(window, Some(Duration::from_secs(30)));
        assert_eq!(
            rates,
            vec![
                vec![("maestro".to_string(), 3.0), ("rp".to_string(), 1.0)],
                vec![("maestro".to_string(), 1.5)],
            ]
        );
        let (none, empty) = per_cycle(Some(&first), None, Duration::from_secs(15), 2);
        assert_eq!((none, empty.len()), (None, 2));
    }
}
