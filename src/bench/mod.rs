//! `hcp-flow bench`: figures for docs/performance.md, measured, never asserted
//! in unit tests.
//!
//! Two parts: the exposition path alone (a store filled with N synthetic
//! clusters, scraped repeatedly: latency, bytes, series, memory), and the
//! whole exporter against the simulated world over HTTP (see `app`). A third,
//! [`kube`], measures the management side: watches of a simulated Kubernetes
//! API server holding N HostedClusters and everything around them.

pub mod baseline;
pub mod pin;
pub mod soak;

use std::io::Write as _;
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
            creation_target: Duration::from_secs(1200),
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
                    std::hint::black_box(chunk);
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

/// A scraper that reads as Prometheus does: with Prometheus's `Accept`
/// header, the whole body into one buffer kept from scrape to scrape
/// (Prometheus takes it from a pool sized by its last scrape of the
/// target). The clock stops when the last byte has arrived; reading the
/// text comes after it, as the scraper's own parsing is not the exporter's
/// cost. A buffer new to every scrape cost the scraping core a tenth or
/// more of its time in page faults on 48 MiB (docs/performance.md).
pub struct Scraper {
    client: reqwest::Client,
    url: String,
    body: Vec<u8>,
}

impl Scraper {
    pub fn new(client: reqwest::Client, url: String) -> Scraper {
        Scraper {
            client,
            url,
            body: Vec::new(),
        }
    }

    /// One scrape of the plain text, timed until its last byte; its text is
    /// then [`Scraper::text`].
    pub async fn scrape(&mut self) -> Result<Duration, BenchError> {
        self.read(None).await
    }

    /// The last scrape's body as text.
    pub fn text(&self) -> Result<&str, BenchError> {
        std::str::from_utf8(&self.body).map_err(BenchError::NotText)
    }

    /// `scrapes` plain scrapes in a row: their times; the last one's body
    /// stays in [`Scraper::text`].
    pub async fn timed(&mut self, scrapes: usize) -> Result<Latency, BenchError> {
        self.repeat(scrapes, None).await
    }

    /// Scrapes as Prometheus makes them by default, asking for gzip: the
    /// time until the compressed body has arrived, and its size. Undecoded,
    /// as a scraper on another host would receive it.
    pub async fn gzip(&mut self, scrapes: usize) -> Result<(Latency, usize), BenchError> {
        let latency = self.repeat(scrapes, Some("gzip")).await?;
        Ok((latency, self.body.len()))
    }

    async fn repeat(
        &mut self,
        scrapes: usize,
        encoding: Option<&str>,
    ) -> Result<Latency, BenchError> {
        let mut samples = Vec::with_capacity(scrapes);
        for _ in 0..scrapes.max(1) {
            samples.push(self.read(encoding).await?);
        }
        Ok(Latency::from_samples(samples))
    }

    async fn read(&mut self, encoding: Option<&str>) -> Result<Duration, BenchError> {
        let mut request = self.client.get(&self.url).header(
            reqwest::header::ACCEPT,
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
        );
        if let Some(encoding) = encoding {
            request = request.header(reqwest::header::ACCEPT_ENCODING, encoding);
        }
        self.body.clear();
        let start = Instant::now();
        let mut response = request.send().await.map_err(BenchError::Scrape)?;
        while let Some(chunk) = response.chunk().await.map_err(BenchError::Scrape)? {
            self.body.extend_from_slice(&chunk);
        }
        Ok(start.elapsed())
    }
}

/// A loopback port nothing listens on, for the exporter the bench starts.
fn free_port() -> Result<u16, BenchError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(BenchError::World)
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Resident memory for a report, to a tenth of a MiB: the target, 150 MB,
/// is 143.05 MiB, and a side that holds 142.6 or 143.4 MiB reads "143" either way.
fn rss_text(bytes: Option<u64>) -> String {
    bytes
        .map(|b| format!("{:.1} MiB", mib(b)))
        .unwrap_or_else(|| "n/a".into())
}

/// How many times `of`'s median `time` takes.
fn p50_ratio(time: &Latency, of: &Latency) -> f64 {
    time.p50.as_secs_f64() / of.p50.as_secs_f64().max(1e-9)
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

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

/// Threads for the simulated upstreams, below the scraper's priority. They
/// share a core with the scraping client; in production the upstreams run
/// elsewhere and a Prometheus does not wait for them, so on that core the
/// scraper comes first (docs/performance.md). The world still gets all of
/// the core between scrapes.
pub fn upstream_threads() -> Result<crate::background::Background, BenchError> {
    Ok(crate::background::Background::start()?)
}

/// Run `task` (which spawns servers) on `threads`, and wait for it.
async fn on_threads<T: Send + 'static>(
    threads: &crate::background::Background,
    task: impl std::future::Future<Output = T> + Send + 'static,
) -> Result<T, BenchError> {
    let handle = threads
        .handle()
        .ok_or_else(|| BenchError::World(std::io::Error::other("upstream threads stopped")))?;
    handle
        .spawn(task)
        .await
        .map_err(|e| BenchError::World(std::io::Error::other(e.to_string())))
}

/// The exporter as a child process, killed when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
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

/// `hcp-flow serve` running as a child process on a configuration the
/// benchmark wrote, ready (its `/readyz` answered 200).
struct Serving {
    child: Child,
    pid: String,
    base: String,
    client: reqwest::Client,
    /// From spawning the child to its first ready `/readyz`.
    time_to_ready: Duration,
}

/// How long a fleet of `clusters` may take to become ready: at Maestro's
/// own list speed (4.7 ms per bundle, about 2.5 bundles per cluster) one
/// full list takes about 12 ms per cluster, so 50,000 clusters need ten
/// minutes before anything else; twice that, and never less than ten
/// minutes.
pub fn ready_deadline(clusters: usize) -> Duration {
    Duration::from_secs(600).max(Duration::from_millis(25 * clusters as u64))
}

/// The allocator settings the image gives the exporter (Containerfile): the
/// bench runs it as it ships. glibc gives a thread that allocates while
/// another holds an arena an arena of its own, up to eight per core, and
/// each keeps what was freed in it; two arenas hold the management side's
/// memory some 2 MB lower and steadier at 10,000 clusters, at no cost to a
/// scrape (docs/performance.md).
pub const SHIPPED_ALLOCATOR_ENV: &[(&str, &str)] = &[("MALLOC_ARENA_MAX", "2")];

/// `hcp-flow serve --config path` as the bench starts it: this very binary,
/// pinned as `pinning` says, with the image's allocator settings unless
/// the bench's own environment sets them otherwise.
fn serve_command(
    pinning: &pin::Pinning,
    exe: &std::path::Path,
    path: &std::path::Path,
) -> std::process::Command {
    let mut command = pinning.command(exe);
    command
        .args(["serve", "--config"])
        .arg(path)
        .env("RUST_LOG", "warn");
    for (name, value) in SHIPPED_ALLOCATOR_ENV {
        if std::env::var_os(name).is_none() {
            command.env(name, value);
        }
    }
    command
}

/// Write `config` to `path`, start `hcp-flow serve --config path` (this very
/// binary) and wait up to `ready_within` for it to be ready.
async fn serve_child(
    config: &crate::config::Config,
    path: &std::path::Path,
    pinning: &pin::Pinning,
    ready_within: Duration,
) -> Result<Serving, BenchError> {
    let yaml = serde_saphyr::to_string(config).map_err(|e| BenchError::Serialise(e.to_string()))?;
    std::fs::write(path, yaml).map_err(|cause| BenchError::Config {
        path: path.display().to_string(),
        cause,
    })?;
    let exe = std::env::current_exe().map_err(BenchError::Spawn)?;
    let started = Instant::now();
    let child = Child(
        serve_command(pinning, &exe, path)
            .spawn()
            .map_err(BenchError::Spawn)?,
    );
    let pid = child.0.id().to_string();
    let base = format!("http://{}", config.listen);
    let client = reqwest::Client::new();
    let limit = ready_within;
    loop {
        let ready = client
            .get(format!("{base}/readyz"))
            .send()
            .await
            .map(|r| r.status().is_success())
            .unwrap_or(false);
        if ready {
            break;
        }
        if started.elapsed() > limit {
            return Err(BenchError::NotReady(limit));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(Serving {
        child,
        pid,
        base,
        client,
        time_to_ready: started.elapsed(),
    })
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
/// [`MAESTRO_CHANGES`] were timed (at most [`MAESTRO_WATCH_AT_MOST`]): each
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
) -> Result<(Latency, usize), BenchError> {
    let started = Instant::now();
    let mut checked = world.now_ms();
    let mut waiting: std::collections::HashMap<String, i64> = std::collections::HashMap::new();
    let mut latencies = Vec::new();
    // Churn replaces clusters only as the first ones go, a few minutes in:
    // the watch goes on past `window` until enough bundles were timed.
    let enough = |timed: usize, elapsed: Duration| {
        elapsed >= window && (timed >= MAESTRO_CHANGES || elapsed >= MAESTRO_WATCH_AT_MOST)
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

/// Samples in an exposition: its lines that are neither comments nor empty.
fn series_in(body: &str) -> usize {
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .count()
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
const MAESTRO_WATCH_AT_MOST: Duration = Duration::from_secs(360);

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

/// The markdown report `hcp-flow bench` prints (or writes to `--output`).
pub fn report(exposition: &ExpositionFigures, end_to_end: &EndToEndFigures) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "## Exposition path ({} synthetic clusters, in process)\n\n\
         | figure | value |\n|---|---|\n\
         | series | {} |\n| bytes | {} ({:.1} MiB) |\n\
         | scrape OpenMetrics p50 / p99 / max | {:.1} / {:.1} / {:.1} ms ({} scrapes) |\n\
         | scrape text 0.0.4 p50 / p99 / max | {:.1} / {:.1} / {:.1} ms |\n\
         | scrape OpenMetrics + gzip (level 1) p50 / p99 | {:.1} / {:.1} ms, {} bytes ({:.1} MiB, {:.1}× smaller) |\n\
         | assembly as a plain HTTP body (chunk writer, chunks dropped) p50 / p99 | {:.1} / {:.1} ms |\n\
         | memcpy of the same bytes p50 (floor) | {:.2} ms; scrape p50 is {:.2}× it, the plain HTTP body's assembly {:.2}× |\n\
         | prometheus-client's generic encoder, same samples, p50 / p99 | {:.1} / {:.1} ms ({} samples); our scrape p50 is {:.2}× it |\n\
         | resident memory after fill and scrapes | {} |\n\n",
        exposition.clusters,
        exposition.series,
        exposition.bytes,
        exposition.bytes as f64 / 1048576.0,
        ms(exposition.openmetrics.p50),
        ms(exposition.openmetrics.p99),
        ms(exposition.openmetrics.max),
        exposition.openmetrics.samples,
        ms(exposition.text.p50),
        ms(exposition.text.p99),
        ms(exposition.text.max),
        ms(exposition.gzip.p50),
        ms(exposition.gzip.p99),
        exposition.gzip_bytes,
        exposition.gzip_bytes as f64 / 1048576.0,
        exposition.bytes as f64 / exposition.gzip_bytes.max(1) as f64,
        ms(exposition.chunked.p50),
        ms(exposition.chunked.p99),
        ms(exposition.memcpy.p50),
        p50_ratio(&exposition.openmetrics, &exposition.memcpy),
        p50_ratio(&exposition.chunked, &exposition.memcpy),
        ms(exposition.generic_encoder.p50),
        ms(exposition.generic_encoder.p99),
        exposition.generic_encoder_samples,
        p50_ratio(&exposition.openmetrics, &exposition.generic_encoder),
        rss_text(exposition.rss_after),
    ));
    out.push_str(&format!(
        "## End to end (`hcp-flow serve` against the simulated world, {} clusters, realistic upstream latency)\n\n\
         | figure | value |\n|---|---|\n\
         | shard | {} |\n\
         | time to /readyz (first full sync of every source) | {:.1} s |\n\
         | series | {} |\n| bytes | {} ({:.1} MiB) |\n\
         | scrape over HTTP p50 / p99 / max | {:.1} / {:.1} / {:.1} ms ({} scrapes) |\n\
         | scrape over HTTP asking for gzip p50 / p99 / max | {:.1} / {:.1} / {:.1} ms, {} bytes ({:.1} MiB) |\n\
         | exporter resident memory at /readyz / after the scrapes | {} / {} |\n\
         | CPUs | {} |\n",
        end_to_end.clusters,
        match end_to_end.shards {
            1 => format!("the whole fleet: {} clusters tracked", end_to_end.tracked),
            n => format!(
                "0 of {n} (`--shard 0 --total-shards {n}`): {} clusters tracked",
                end_to_end.tracked
            ),
        },
        end_to_end.time_to_ready.as_secs_f64(),
        end_to_end.series,
        end_to_end.bytes,
        end_to_end.bytes as f64 / 1048576.0,
        ms(end_to_end.scrape.p50),
        ms(end_to_end.scrape.p99),
        ms(end_to_end.scrape.max),
        end_to_end.scrape.samples,
        ms(end_to_end.scrape_gzip.p50),
        ms(end_to_end.scrape_gzip.p99),
        ms(end_to_end.scrape_gzip.max),
        end_to_end.gzip_bytes,
        end_to_end.gzip_bytes as f64 / 1048576.0,
        rss_text(end_to_end.rss_at_ready),
        rss_text(end_to_end.rss),
        end_to_end.pinning,
    ));
    out.push_str(&format!(
        "| Maestro bundle Available → shown in /metrics p50 / p99 / max | {:.1} / {:.1} / {:.1} s ({} bundles; fast poll every {:?}; includes up to one scrape; {} still not shown two cycles after the watch ended) |\n",
        end_to_end.maestro_to_metrics.p50.as_secs_f64(),
        end_to_end.maestro_to_metrics.p99.as_secs_f64(),
        end_to_end.maestro_to_metrics.max.as_secs_f64(),
        end_to_end.maestro_to_metrics.samples,
        end_to_end.cycle,
        end_to_end.maestro_not_shown,
    ));
    for (source, per_cycle) in &end_to_end.requests_per_cycle {
        out.push_str(&format!(
            "| upstream requests per fast-poll cycle ({:?}), `{}` | {:.1} |\n",
            end_to_end.cycle, source, per_cycle
        ));
    }
    out
}

/// What the management-side benchmark measured of a `hcp-flow serve`
/// process watching one simulated Kubernetes API server.
#[derive(Clone, Debug)]
pub struct KubeFigures {
    pub clusters: usize,
    /// Objects the API server holds (ManifestWorks, HostedClusters,
    /// HostedControlPlanes, control-plane pods, ManagedClusters, NodePools).
    pub objects: usize,
    /// From the child's start to /readyz (the first list of every kind).
    pub time_to_ready: Duration,
    /// Object change applied in the API server → its new value in a
    /// `/metrics` scrape (an upper bound: includes one scrape's duration).
    pub event_to_metrics: Latency,
    pub scrape: Latency,
    /// Scrapes asking for gzip, and the compressed body's size.
    pub scrape_gzip: Latency,
    pub gzip_bytes: usize,
    pub bytes: usize,
    pub series: usize,
    /// Resident memory of the exporter at /readyz (watches listed, nothing
    /// scraped yet), and after the changes and scrapes.
    pub rss_at_ready: Option<u64>,
    pub rss: Option<u64>,
    /// Where the exporter, the API server and the scraper ran.
    pub pinning: String,
}

/// The management side of cluster `i`: created an hour ago, everything
/// ready half an hour ago, one pool of two nodes.
fn bench_spec(i: usize, now: Timestamp) -> crate::sim::kube::KubeClusterSpec {
    let ago = |minutes: i64| now - SignedDuration::from_mins(minutes);
    crate::sim::kube::KubeClusterSpec {
        cluster_id: format!("bench{i:027}"),
        name: format!("hcp-{i:06}"),
        env: "bench".to_string(),
        mode: crate::sources::kube::KubeMode::Aro,
        created_at: ago(60),
        manifestwork_applied_at: Some(ago(59)),
        hosted_cluster_available_at: Some(ago(40)),
        control_plane_ready_at: Some(ago(45)),
        managed_cluster_joined_at: Some(ago(35)),
        node_pools: vec![("np-1".to_string(), 2, Some(ago(30)))],
        faults: Default::default(),
        hub: Default::default(),
    }
}

fn has_sample(body: &str, family: &str, labels: &[String], value: &str) -> bool {
    body.lines().any(|l| {
        l.starts_with(family)
            && l.rsplit(' ').next() == Some(value)
            && labels.iter().all(|needle| l.contains(needle.as_str()))
    })
}

/// Start a simulated Kubernetes API server with `clusters` HostedClusters
/// (and their ManifestWorks, control planes, ManagedClusters and NodePools),
/// run `hcp-flow serve` watching it as a child process, wait for /readyz,
/// then measure: `changes` NodePool edits each timed until `/metrics` shows
/// them, `scrapes` timed scrapes, and the child's resident memory.
pub async fn kube(
    clusters: usize,
    scrapes: usize,
    changes: usize,
) -> Result<KubeFigures, BenchError> {
    use crate::sim::kube::{KubeApiServer, objects_at, write_kubeconfig};
    let pinning = pin::Pinning::apply();
    let upstreams = upstream_threads()?;
    let (api, url) = on_threads(&upstreams, KubeApiServer::start())
        .await?
        .map_err(BenchError::World)?;
    let now = Timestamp::now();
    let mut objects = 0;
    let mut pools = Vec::with_capacity(clusters);
    for i in 0..clusters {
        let spec = bench_spec(i, now);
        for obj in objects_at(&spec, now) {
            if obj.get("kind").and_then(serde_json::Value::as_str) == Some("NodePool") {
                pools.push((spec.cluster_id.clone(), obj.clone()));
            }
            api.apply(obj).map_err(BenchError::KubeObject)?;
            objects += 1;
        }
    }
    let dir = std::env::temp_dir().join(format!("hcp-flow-bench-kube-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|cause| BenchError::Config {
        path: dir.display().to_string(),
        cause,
    })?;
    let kubeconfig = dir.join("kubeconfig");
    write_kubeconfig(&kubeconfig, &[("bench-mgmt", url.as_str())]).map_err(|e| {
        BenchError::Config {
            path: kubeconfig.display().to_string(),
            cause: std::io::Error::other(e.to_string()),
        }
    })?;
    let port = free_port()?;
    let mut source = crate::sources::kube::KubeSourceConfig::new(
        "bench-mgmt",
        crate::sources::kube::KubeMode::Aro,
    );
    source.kubeconfig = Some(kubeconfig.clone());
    source.context = Some("bench-mgmt".to_string());
    source.environment = "bench".to_string();
    let mut config = crate::config::Config {
        listen: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        ..crate::config::Config::default()
    };
    config.sources.kube = vec![source];
    let path = dir.join("hcp-flow.yaml");
    let Serving {
        child,
        pid,
        base,
        client,
        time_to_ready,
    } = serve_child(&config, &path, &pinning, ready_deadline(clusters)).await?;
    let rss_at_ready = resident_memory_of(&pid);
    let mut scraper = Scraper::new(client, format!("{base}/metrics"));

    // Each change: one NodePool's desired replicas, 2 → 3 or back, spread
    // over the fleet; timed from the API server's write to the first scrape
    // that shows the new value.
    let mut latencies = Vec::with_capacity(changes);
    let visible_within = Duration::from_secs(30);
    for k in 0..changes.min(pools.len().max(1) * 2) {
        let index = (k * 7919) % pools.len().max(1);
        let Some((cluster_id, pool)) = pools.get(index).cloned() else {
            break;
        };
        let desired = if pool
            .pointer("/spec/replicas")
            .and_then(serde_json::Value::as_u64)
            == Some(2)
        {
            3
        } else {
            2
        };
        let mut changed = pool.clone();
        changed["spec"]["replicas"] = serde_json::json!(desired);
        let labels = [
            format!("cluster_id=\"{cluster_id}\""),
            "kind=\"desired\"".to_string(),
        ];
        let applied = Instant::now();
        api.apply(changed.clone()).map_err(BenchError::KubeObject)?;
        loop {
            scraper.scrape().await?;
            if has_sample(
                scraper.text()?,
                "hcpflow_node_pool_replicas",
                &labels,
                &desired.to_string(),
            ) {
                latencies.push(applied.elapsed());
                break;
            }
            if applied.elapsed() > visible_within {
                return Err(BenchError::NotVisible(cluster_id, visible_within));
            }
        }
        if let Some(slot) = pools.get_mut(index) {
            slot.1 = changed;
        }
    }

    let scrape = scraper.timed(scrapes).await?;
    let last = scraper.text()?;
    let (bytes, series) = (last.len(), series_in(last));
    let (scrape_gzip, gzip_bytes) = scraper.gzip(scrapes).await?;
    let rss = resident_memory_of(&pid);
    drop(child);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(KubeFigures {
        clusters,
        objects,
        time_to_ready,
        event_to_metrics: Latency::from_samples(latencies),
        scrape,
        scrape_gzip,
        gzip_bytes,
        bytes,
        series,
        rss_at_ready,
        rss,
        pinning: pinning.describe(),
    })
}

/// The markdown `hcp-flow bench --kube` prints.
pub fn report_kube(k: &KubeFigures) -> String {
    format!(
        "## Management side (`hcp-flow serve` watching a simulated Kubernetes API server, {} HostedClusters, {} objects)\n\n\
         | figure | value |\n|---|---|\n\
         | time to /readyz (first list of every kind) | {:.1} s |\n\
         | watch event → visible in /metrics p50 / p99 / max | {:.0} / {:.0} / {:.0} ms ({} changes; includes one scrape) |\n\
         | series | {} |\n| bytes | {} ({:.1} MiB) |\n\
         | scrape over HTTP p50 / p99 / max | {:.1} / {:.1} / {:.1} ms ({} scrapes) |\n\
         | scrape over HTTP asking for gzip p50 / p99 / max | {:.1} / {:.1} / {:.1} ms, {} bytes ({:.1} MiB) |\n\
         | exporter resident memory at /readyz / after the scrapes | {} / {} |\n\
         | CPUs | {} |\n",
        k.clusters,
        k.objects,
        k.time_to_ready.as_secs_f64(),
        ms(k.event_to_metrics.p50),
        ms(k.event_to_metrics.p99),
        ms(k.event_to_metrics.max),
        k.event_to_metrics.samples,
        k.series,
        k.bytes,
        k.bytes as f64 / 1048576.0,
        ms(k.scrape.p50),
        ms(k.scrape.p99),
        ms(k.scrape.max),
        k.scrape.samples,
        ms(k.scrape_gzip.p50),
        ms(k.scrape_gzip.p99),
        ms(k.scrape_gzip.max),
        k.gzip_bytes,
        k.gzip_bytes as f64 / 1048576.0,
        rss_text(k.rss_at_ready),
        rss_text(k.rss),
        k.pinning,
    )
}

/// `hcp-flow bench`: both benchmarks, as the markdown docs/performance.md quotes.
pub async fn run(clusters: usize, scrapes: usize, shards: u32) -> Result<String, BenchError> {
    let exposition = tokio::task::spawn_blocking(move || exposition(clusters, scrapes))
        .await
        .map_err(|e| BenchError::Aborted(e.to_string()))?;
    let end_to_end = end_to_end(clusters, scrapes, shards).await?;
    Ok(report(&exposition, &end_to_end))
}

/// `hcp-flow bench --kube`: the management-side benchmark, as the markdown
/// docs/performance.md quotes (100 timed changes).
pub async fn run_kube(clusters: usize, scrapes: usize) -> Result<String, BenchError> {
    let figures = kube(clusters, scrapes, 100).await?;
    Ok(report_kube(&figures))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The exporter the bench measures gets the image's allocator
    /// settings, and the configuration it was given.
    #[test]
    fn the_bench_starts_the_exporter_with_the_images_allocator_settings() {
        let pinning = pin::Pinning::Shared("test".into());
        let command = serve_command(
            &pinning,
            std::path::Path::new("hcp-flow"),
            std::path::Path::new("bench.yaml"),
        );
        let envs: Vec<_> = command.get_envs().collect();
        for (name, value) in SHIPPED_ALLOCATOR_ENV {
            let given = std::env::var_os(name).unwrap_or_else(|| std::ffi::OsString::from(value));
            assert!(
                envs.contains(&(std::ffi::OsStr::new(name), Some(given.as_os_str()))),
                "{name} in {envs:?}"
            );
        }
        let args: Vec<_> = command.get_args().collect();
        assert_eq!(args, ["serve", "--config", "bench.yaml"]);
    }

    /// Either side of the 150 MB target (143.05 MiB) reads differently.
    #[test]
    fn resident_memory_is_reported_to_a_tenth_of_a_mib() {
        assert_eq!(rss_text(Some(150_000_000)), "143.1 MiB");
        assert_eq!(rss_text(Some(149_500_000)), "142.6 MiB");
        assert_eq!(rss_text(Some(150_400_000)), "143.4 MiB");
        assert_eq!(rss_text(None), "n/a");
    }
}
