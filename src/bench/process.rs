//! The exporter the benches measure, as a child process.

use std::time::{Duration, Instant};

use super::BenchError;
use super::pin;

/// A loopback port nothing listens on, for the exporter the bench starts.
pub(super) fn free_port() -> Result<u16, BenchError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(BenchError::World)
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
pub(super) async fn on_threads<T: Send + 'static>(
    threads: &crate::background::Background,
    task: impl std::future::Future<Output = T> + Send + 'static,
) -> Result<T, BenchError> {
    threads
        .run(task)
        .await
        .ok_or_else(|| BenchError::World(std::io::Error::other("upstream threads stopped")))
}

/// The exporter as a child process, killed when dropped.
pub(super) struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// How a child asked to stop with SIGTERM ended.
#[derive(Clone, Debug)]
pub struct Stopped {
    /// From the signal to its exit (or to the SIGKILL that ended it).
    pub took: Duration,
    /// Its exit status, as the OS words it (`exit status: 0`); `None`
    /// when it had not exited within its time and was killed.
    pub status: Option<String>,
}

impl Child {
    /// Its exit status, if it has exited.
    pub(super) fn exited(&mut self) -> Option<String> {
        self.0.try_wait().ok().flatten().map(|s| s.to_string())
    }

    /// Ask it to stop as Kubernetes does, with SIGTERM, and wait up to
    /// `within` for it to exit; past that it is killed.
    pub(super) async fn terminate(&mut self, within: Duration) -> Result<Stopped, BenchError> {
        let started = Instant::now();
        send_term(&self.0).map_err(BenchError::Stop)?;
        loop {
            if let Some(status) = self.0.try_wait().map_err(BenchError::Stop)? {
                return Ok(Stopped {
                    took: started.elapsed(),
                    status: Some(status.to_string()),
                });
            }
            if started.elapsed() > within {
                let _ = self.0.kill();
                let _ = self.0.wait();
                return Ok(Stopped {
                    took: started.elapsed(),
                    status: None,
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// SIGTERM to `child`, through rustix's safe API (this crate forbids
/// unsafe code).
#[cfg(target_os = "linux")]
fn send_term(child: &std::process::Child) -> std::io::Result<()> {
    use rustix::process::{Pid, Signal, kill_process};
    kill_process(Pid::from_child(child), Signal::TERM).map_err(std::io::Error::from)
}

/// SIGTERM to `child` through `kill(1)` where rustix is not a dependency.
#[cfg(not(target_os = "linux"))]
fn send_term(child: &std::process::Child) -> std::io::Result<()> {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()?;
    match status.success() {
        true => Ok(()),
        false => Err(std::io::Error::other(format!("kill -TERM: {status}"))),
    }
}

/// `hcp-flow serve` just started as a child process on a configuration
/// the benchmark wrote: not ready yet.
pub(super) struct Spawned {
    pub(super) child: Child,
    pub(super) pid: String,
    pub(super) base: String,
    pub(super) client: reqwest::Client,
    /// Just before the child was spawned.
    pub(super) started: Instant,
}

/// `hcp-flow serve` running as a child process on a configuration the
/// benchmark wrote, ready (its `/readyz` answered 200).
pub(super) struct Serving {
    pub(super) child: Child,
    pub(super) pid: String,
    pub(super) base: String,
    pub(super) client: reqwest::Client,
    /// From spawning the child to its first ready `/readyz`.
    pub(super) time_to_ready: Duration,
    /// No source relists before this instant plus its
    /// `full_relist_interval`: every source's first list ended after it.
    pub(super) first_lists_ended_after: Instant,
}

/// What one answer of `/readyz` says.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Readiness {
    pub(super) ready: bool,
    /// Every source, in `/readyz`'s order.
    pub(super) sources: Vec<String>,
    /// Sources whose first list has not completed.
    pub(super) unsynced: Vec<String>,
    /// Sources up (every enabled kind listed since its last failure).
    pub(super) up: Vec<String>,
}

impl Readiness {
    /// Reads `/readyz`'s JSON body; `None` when it is not that JSON.
    pub(super) fn parse(body: &[u8]) -> Option<Readiness> {
        let json: serde_json::Value = serde_json::from_slice(body).ok()?;
        let mut readiness = Readiness {
            ready: json.get("ready")?.as_bool()?,
            ..Readiness::default()
        };
        for source in json.get("sources")?.as_array()? {
            let name = source.get("source")?.as_str()?.to_string();
            readiness.sources.push(name.clone());
            if source.get("synced").and_then(|v| v.as_bool()) != Some(true) {
                readiness.unsynced.push(name.clone());
            }
            if source.get("up").and_then(|v| v.as_bool()) == Some(true) {
                readiness.up.push(name);
            }
        }
        Some(readiness)
    }

    /// Asks `base`'s `/readyz`; `None` when it does not answer yet.
    pub(super) async fn get(client: &reqwest::Client, base: &str) -> Option<Readiness> {
        let response = client.get(format!("{base}/readyz")).send().await.ok()?;
        Readiness::parse(&response.bytes().await.ok()?)
    }
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
/// scrape (docs/performance.md). A fixed mmap threshold of 512 KiB: left
/// to itself glibc raises it to the largest block freed so far (up to
/// 32 MiB), after which a sync's large buffers are carved from the arenas
/// and their room stays resident; fixed, they are mapped and given back,
/// while a scrape's 256 KiB chunks stay below it (some 5 MiB less at
/// 10,000 clusters on each side, and a slower service-side scrape p50:
/// docs/performance.md).
pub const SHIPPED_ALLOCATOR_ENV: &[(&str, &str)] = &[
    ("MALLOC_ARENA_MAX", "2"),
    ("MALLOC_MMAP_THRESHOLD_", "524288"),
];

/// The exporter's log filter under the bench: warnings only, so its
/// logging costs nothing measurable, unless `HCPFLOW_BENCH_CHILD_LOG` sets
/// another filter to see what a run did (docs/development.md).
fn child_log_filter() -> String {
    std::env::var("HCPFLOW_BENCH_CHILD_LOG").unwrap_or_else(|_| "warn".to_string())
}

/// `hcp-flow serve --config path` as the bench starts it: this very binary,
/// pinned as `pinning` says, with the image's allocator settings unless
/// the bench's own environment sets them otherwise.
pub(super) fn serve_command(
    pinning: &pin::Pinning,
    exe: &std::path::Path,
    path: &std::path::Path,
) -> std::process::Command {
    let mut command = pinning.command(exe);
    command
        .args(["serve", "--config"])
        .arg(path)
        .env("RUST_LOG", child_log_filter());
    for (name, value) in SHIPPED_ALLOCATOR_ENV {
        if std::env::var_os(name).is_none() {
            command.env(name, value);
        }
    }
    command
}

/// Write `config` to `path` and start `hcp-flow serve --config path` (this
/// very binary).
pub(super) fn spawn_child(
    config: &crate::config::Config,
    path: &std::path::Path,
    pinning: &pin::Pinning,
) -> Result<Spawned, BenchError> {
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
    Ok(Spawned {
        child,
        pid,
        base: format!("http://{}", config.listen),
        client: reqwest::Client::new(),
        started,
    })
}

/// Wait up to `ready_within` (from the spawn) for `spawned` to be ready,
/// asking `/readyz` every 100 ms; each answer also bounds when each
/// source's first list ended.
pub(super) async fn wait_ready(
    mut spawned: Spawned,
    ready_within: Duration,
) -> Result<Serving, BenchError> {
    let started = spawned.started;
    // The last instant each source was seen not yet listed.
    let mut unlisted_at: std::collections::HashMap<String, Instant> = Default::default();
    let sources = loop {
        let asked = Instant::now();
        if let Some(readiness) = Readiness::get(&spawned.client, &spawned.base).await {
            for source in &readiness.unsynced {
                unlisted_at.insert(source.clone(), asked);
            }
            if readiness.ready {
                break readiness.sources;
            }
        }
        if let Some(status) = spawned.child.exited() {
            return Err(BenchError::Exited(status));
        }
        if started.elapsed() > ready_within {
            return Err(BenchError::NotReady(ready_within));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let time_to_ready = started.elapsed();
    // A source never seen unlisted may have listed at once: the spawn bounds it.
    let first_lists_ended_after = sources
        .iter()
        .chain(unlisted_at.keys())
        .map(|s| unlisted_at.get(s).copied().unwrap_or(started))
        .min()
        .unwrap_or(started);
    Ok(Serving {
        child: spawned.child,
        pid: spawned.pid,
        base: spawned.base,
        client: spawned.client,
        time_to_ready,
        first_lists_ended_after,
    })
}

/// Write `config` to `path`, start `hcp-flow serve --config path` (this very
/// binary) and wait up to `ready_within` for it to be ready.
pub(super) async fn serve_child(
    config: &crate::config::Config,
    path: &std::path::Path,
    pinning: &pin::Pinning,
    ready_within: Duration,
) -> Result<Serving, BenchError> {
    wait_ready(spawn_child(config, path, pinning)?, ready_within).await
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// `/readyz` as the exporter's own server answers it: which sources
    /// have listed and which are up.
    #[tokio::test]
    async fn readiness_is_read_from_the_servers_readyz() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let store = crate::bench::synthetic_store(1);
        let health = store.health();
        health.declare("maestro", &["resource-bundles", "resource-bundle-stream"]);
        health.declare("rp_frontend", &["hcpOpenShiftClusters"]);
        health.listed("maestro", "resource-bundles");
        health.listed("rp_frontend", "hcpOpenShiftClusters");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(crate::server::serve(
            listener,
            store.clone(),
            std::future::pending(),
        ));
        let client = reqwest::Client::new();
        let mut readiness = Readiness::get(&client, &base).await.unwrap();
        readiness.unsynced.sort();
        assert!(!readiness.ready);
        // The synthetic store's own source has never listed.
        assert_eq!(readiness.unsynced, ["maestro", "test"]);
        assert_eq!(readiness.up, ["rp_frontend"]);
        let mut sources = readiness.sources.clone();
        sources.sort();
        assert_eq!(sources, ["maestro", "rp_frontend", "test"]);

        health.listed("maestro", "resource-bundle-stream");
        let readiness = Readiness::get(&client, &base).await.unwrap();
        assert!(readiness.up.contains(&"maestro".to_string()));
        assert_eq!(readiness.unsynced, ["test"]);
        server.abort();
        assert_eq!(Readiness::parse(b"not json"), None);
        assert_eq!(Readiness::parse(br#"{"sources": []}"#), None);
    }
}
