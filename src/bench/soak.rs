//! `hcp-flow bench --soak DURATION`: is memory flat under churn
//! (docs/performance.md)? The simulated world runs both sides at once, the
//! ARO HCP services and the management clusters' Kubernetes API servers,
//! with clusters created and deleted continuously and every creation's
//! conditions moving as it progresses. `hcp-flow serve` reads all of it as
//! a child process and is scraped every few seconds; its resident memory is
//! sampled throughout. The check fails when memory after the warm-up grows
//! by more than 10 %.

use std::time::{Duration, Instant};

use super::pin::Pinning;
use super::{BenchError, Serving, free_port, mib, ready_deadline, resident_memory_of, serve_child};

/// How often the soak scrapes, as a Prometheus with a short interval would.
const SCRAPE_EVERY: Duration = Duration::from_secs(5);
/// How often it reads the exporter's resident memory.
const SAMPLE_EVERY: Duration = Duration::from_secs(30);
/// Growth after the warm-up that fails the check.
pub const MAX_GROWTH: f64 = 0.10;

/// One reading of the soak.
#[derive(Clone, Debug)]
pub struct SoakSample {
    /// Since `/readyz`.
    pub at: Duration,
    /// The exporter's resident bytes.
    pub rss: u64,
    /// Clusters the world serves (its ground truth), so that memory is read
    /// against the population: memory that follows a growing world is not
    /// a leak.
    pub world_clusters: usize,
    /// Clusters the exporter tracks (`/api/v1/fleet`); `None` when it did
    /// not answer.
    pub tracked_clusters: Option<usize>,
}

/// What a soak measured.
#[derive(Clone, Debug)]
pub struct SoakFigures {
    pub clusters: usize,
    pub duration: Duration,
    pub warm_up: Duration,
    pub samples: Vec<SoakSample>,
    pub scrapes: usize,
    pub failed_scrapes: usize,
    pub time_to_ready: Duration,
    pub pinning: String,
    /// At the end: clusters the exporter tracks that the world no longer
    /// holds, counted by the hops they still show (`+`-joined), most first.
    pub extra_by_hops: Vec<(String, usize)>,
    /// At the end: clusters the world holds that the exporter does not show.
    pub missing: usize,
}

impl SoakFigures {
    /// Resident memory at the end of the warm-up (the first sample at or
    /// after it), and the most after it.
    pub fn baseline_and_peak(&self) -> Option<(u64, u64)> {
        let after: Vec<u64> = self
            .samples
            .iter()
            .filter(|s| s.at >= self.warm_up)
            .map(|s| s.rss)
            .collect();
        Some((*after.first()?, *after.iter().max()?))
    }

    /// Growth after the warm-up, as a fraction of its baseline.
    pub fn growth(&self) -> Option<f64> {
        let (baseline, peak) = self.baseline_and_peak()?;
        Some(peak as f64 / baseline.max(1) as f64 - 1.0)
    }

    /// Flat: at most [`MAX_GROWTH`] after the warm-up. No sample after the
    /// warm-up is not flat: nothing was shown.
    pub fn flat(&self) -> bool {
        self.growth().is_some_and(|g| g <= MAX_GROWTH)
    }
}

/// The warm-up of a soak of `duration`: a third of it, at most ten minutes
/// (the world's first relists and the exporter's caches fill in it).
pub fn warm_up_of(duration: Duration) -> Duration {
    (duration / 3).min(Duration::from_secs(600))
}

pub async fn soak(
    clusters: usize,
    duration: Duration,
    speed: f64,
) -> Result<SoakFigures, BenchError> {
    use crate::sim::{SimClock, WorldConfig, WorldKind};
    let pinning = Pinning::apply();
    let port = free_port()?;
    let settings = crate::demo::DemoSettings {
        clusters,
        speed,
        seed: 1,
        faults: true,
        listen: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        world: WorldKind::Aro,
        maestro_stream: false,
    };
    // The world's defaults: ARO, churn, faults, realistic latency.
    let world = WorldConfig {
        clusters,
        speed,
        ..WorldConfig::default()
    };
    let demo = crate::demo::start_world(&settings, world, SimClock::Real)
        .await
        .map_err(|e| BenchError::Aborted(e.to_string()))?;
    let path = demo.kubeconfig.dir().join("soak.yaml");
    let Serving {
        child,
        pid,
        base,
        client,
        time_to_ready,
        ..
    } = serve_child(&demo.config, &path, &pinning, ready_deadline(clusters)).await?;
    let warm_up = warm_up_of(duration);
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut next_sample = started;
    let (mut scrapes, mut failed_scrapes) = (0, 0);
    let sample = async |at: Duration| -> Option<SoakSample> {
        let rss = resident_memory_of(&pid)?;
        let tracked_clusters = tracked_clusters(&client, &base).await;
        Some(SoakSample {
            at,
            rss,
            world_clusters: demo.world.truth().clusters.len(),
            tracked_clusters,
        })
    };
    while started.elapsed() < duration {
        if Instant::now() >= next_sample {
            samples.extend(sample(started.elapsed()).await);
            next_sample += SAMPLE_EVERY;
        }
        let scraped = client
            .get(format!("{base}/metrics"))
            .header(reqwest::header::ACCEPT_ENCODING, "gzip")
            .send()
            .await
            .and_then(|r| r.error_for_status());
        match scraped {
            Ok(response) => match response.bytes().await {
                Ok(_) => scrapes += 1,
                Err(_) => failed_scrapes += 1,
            },
            Err(_) => failed_scrapes += 1,
        }
        tokio::time::sleep(SCRAPE_EVERY).await;
    }
    samples.extend(sample(started.elapsed()).await);
    // Which clusters the exporter holds that the world does not, and by
    // which hops: a count above the world's is a lag somewhere, and the
    // hops say whose.
    let world_ids: std::collections::HashSet<String> = demo
        .world
        .truth()
        .clusters
        .into_iter()
        .map(|c| c.cluster_id)
        .collect();
    let mut scraper = super::Scraper::new(client, format!("{base}/metrics"))?;
    scraper.scrape().await?;
    let (extra_by_hops, missing) = reconcile(scraper.text()?, &world_ids);
    drop(child);
    Ok(SoakFigures {
        extra_by_hops,
        missing,
        clusters,
        duration,
        warm_up,
        samples,
        scrapes,
        failed_scrapes,
        time_to_ready,
        pinning: pinning.describe(),
    })
}

/// Clusters a scrape shows (`hcpflow_hop_phase`) that are not in `world`,
/// counted by the hops they show; and how many of `world` it does not show.
pub fn reconcile(
    body: &str,
    world: &std::collections::HashSet<String>,
) -> (Vec<(String, usize)>, usize) {
    let mut hops: std::collections::BTreeMap<&str, Vec<&str>> = std::collections::BTreeMap::new();
    for line in body.lines() {
        let Some(labels) = line.strip_prefix("hcpflow_hop_phase{") else {
            continue;
        };
        let label = |name: &str| {
            let start = labels.find(&format!("{name}=\""))? + name.len() + 2;
            let len = labels.get(start..)?.find('"')?;
            labels.get(start..start + len)
        };
        if let (Some(id), Some(hop)) = (label("cluster_id"), label("hop")) {
            hops.entry(id).or_default().push(hop);
        }
    }
    let missing = world
        .iter()
        .filter(|id| !hops.contains_key(id.as_str()))
        .count();
    let mut extra: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for (id, mut shown) in hops {
        if world.contains(id) {
            continue;
        }
        shown.sort_unstable();
        *extra.entry(shown.join("+")).or_default() += 1;
    }
    let mut extra: Vec<(String, usize)> = extra.into_iter().collect();
    extra.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    (extra, missing)
}

/// How many clusters the exporter tracks, from its fleet summary.
async fn tracked_clusters(client: &reqwest::Client, base: &str) -> Option<usize> {
    let summary: serde_json::Value = client
        .get(format!("{base}/api/v1/fleet"))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    summary["clusters"]
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
}

/// The markdown `hcp-flow bench --soak` prints: the verdict, then the curve.
pub fn report_soak(s: &SoakFigures) -> String {
    let verdict = match (s.baseline_and_peak(), s.growth()) {
        (Some((baseline, peak)), Some(growth)) => format!(
            "{}: {:.0} MiB after the warm-up, at most {:.0} MiB after it ({:+.1} %, limit +{:.0} %)",
            if s.flat() { "flat" } else { "GROWING" },
            mib(baseline),
            mib(peak),
            growth * 100.0,
            MAX_GROWTH * 100.0
        ),
        _ => "no memory sample after the warm-up: nothing shown".to_string(),
    };
    let mut out = format!(
        "## Soak ({} clusters, both sides, churn, a scrape every {:?}, {:?})\n\n\
         | figure | value |\n|---|---|\n\
         | time to /readyz | {:.1} s |\n\
         | scrapes (failed) | {} ({}) |\n\
         | warm-up | {:?} |\n\
         | memory | {verdict} |\n\
         | CPUs | {} |\n\n\
         | since /readyz | resident memory | clusters in the world | tracked by the exporter |\n|---|---|---|---|\n",
        s.clusters,
        SCRAPE_EVERY,
        s.duration,
        s.time_to_ready.as_secs_f64(),
        s.scrapes,
        s.failed_scrapes,
        s.warm_up,
        s.pinning,
    );
    for sample in &s.samples {
        out.push_str(&format!(
            "| {}:{:02} | {:.0} MiB | {} | {} |\n",
            sample.at.as_secs() / 60,
            sample.at.as_secs() % 60,
            mib(sample.rss),
            sample.world_clusters,
            sample
                .tracked_clusters
                .map_or("–".to_string(), |n| n.to_string()),
        ));
    }
    let extra: usize = s.extra_by_hops.iter().map(|(_, n)| n).sum();
    out.push_str(&format!(
        "\nAt the end: {extra} tracked clusters the world no longer holds, {} of the world's not shown.\n",
        s.missing
    ));
    if !s.extra_by_hops.is_empty() {
        out.push_str("\n| hops the extra clusters still show | clusters |\n|---|---|\n");
        for (hops, n) in &s.extra_by_hops {
            out.push_str(&format!("| {hops} | {n} |\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(samples: &[(u64, u64)]) -> SoakFigures {
        SoakFigures {
            clusters: 1,
            duration: Duration::from_secs(90),
            warm_up: Duration::from_secs(30),
            samples: samples
                .iter()
                .map(|(s, mb)| SoakSample {
                    at: Duration::from_secs(*s),
                    rss: mb << 20,
                    world_clusters: 1,
                    tracked_clusters: Some(1),
                })
                .collect(),
            scrapes: 0,
            failed_scrapes: 0,
            time_to_ready: Duration::ZERO,
            pinning: String::new(),
            extra_by_hops: Vec::new(),
            missing: 0,
        }
    }

    #[test]
    fn the_clusters_a_scrape_shows_beyond_the_world_are_counted_by_their_hops() {
        let body = "\
hcpflow_hop_phase{cluster_id=\"live\",hop=\"rp_frontend\",phase=\"ready\",state=\"Succeeded\",via=\"direct\"} 1
hcpflow_hop_phase{cluster_id=\"left-1\",hop=\"rp_frontend\",phase=\"deleting\",state=\"Deleting\",via=\"direct\"} 1
hcpflow_hop_phase{cluster_id=\"left-1\",hop=\"clusters_service\",phase=\"deleting\",state=\"uninstalling\",via=\"direct\"} 1
hcpflow_hop_phase{cluster_id=\"left-2\",hop=\"clusters_service\",phase=\"deleting\",state=\"uninstalling\",via=\"direct\"} 1
hcpflow_hop_phase{cluster_id=\"left-3\",hop=\"rp_frontend\",phase=\"ready\",state=\"Succeeded\",via=\"direct\"} 1
hcpflow_hop_phase{cluster_id=\"left-3\",hop=\"clusters_service\",phase=\"ready\",state=\"ready\",via=\"direct\"} 1
hcpflow_hop_phase_since_timestamp_seconds{cluster_id=\"left-4\",hop=\"rp_frontend\"} 1
";
        let world = ["live", "not-yet-seen"].map(String::from).into();
        let (extra, missing) = reconcile(body, &world);
        assert_eq!(
            extra,
            vec![
                ("clusters_service+rp_frontend".to_string(), 2),
                ("clusters_service".to_string(), 1)
            ]
        );
        assert_eq!(missing, 1);
        let mut f = figures(&[(0, 1)]);
        (f.extra_by_hops, f.missing) = (extra, missing);
        let report = report_soak(&f);
        assert!(
            report.contains(
                "3 tracked clusters the world no longer holds, 1 of the world's not shown"
            ),
            "{report}"
        );
        assert!(
            report.contains("| clusters_service+rp_frontend | 2 |"),
            "{report}"
        );
    }

    #[test]
    fn growth_counts_from_the_end_of_the_warm_up_on_both_sides_of_the_limit() {
        // Growth during the warm-up does not count.
        let warming = figures(&[(0, 50), (15, 90), (30, 100), (60, 104), (90, 109)]);
        assert_eq!(warming.baseline_and_peak(), Some((100 << 20, 109 << 20)));
        assert!(warming.flat(), "{:?}", warming.growth());
        let growing = figures(&[(0, 50), (30, 100), (60, 105), (90, 111)]);
        assert!(!growing.flat(), "{:?}", growing.growth());
        assert!(report_soak(&growing).contains("GROWING"));
        // Each row reads memory against the world's and the exporter's counts.
        assert!(
            report_soak(&growing).contains("| 1:30 | 111 MiB | 1 | 1 |"),
            "{}",
            report_soak(&growing)
        );
        // Nothing after the warm-up shows nothing.
        let short = figures(&[(0, 50), (15, 60)]);
        assert!(!short.flat());
        assert!(report_soak(&short).contains("nothing shown"));
    }

    #[test]
    fn the_warm_up_is_a_third_of_the_soak_up_to_ten_minutes() {
        assert_eq!(warm_up_of(Duration::from_secs(90)), Duration::from_secs(30));
        assert_eq!(
            warm_up_of(Duration::from_secs(3600)),
            Duration::from_secs(600)
        );
    }
}
