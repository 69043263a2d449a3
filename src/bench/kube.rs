//! The management side: a `hcp-flow serve` child watching one simulated
//! Kubernetes API server.

use std::time::{Duration, Instant};

use jiff::SignedDuration;

use jiff::Timestamp;

use super::BenchError;
use super::figures::{Latency, fleet_level_series_in, resident_memory_of, series_in};
use super::pin;
use super::process::{
    Serving, free_port, on_threads, ready_deadline, serve_child, upstream_threads,
};
use super::scraper::Scraper;

/// What the management-side benchmark measured of a `hcp-flow serve`
/// process watching one simulated Kubernetes API server.
#[derive(Clone, Debug)]
pub struct KubeFigures {
    pub clusters: usize,
    /// Copies of the last scrape's body in the bench's process: the floor
    /// the HTTP scrape is compared with.
    pub memcpy: super::figures::Latency,
    /// The week of history each cluster held (`--history`).
    pub history: Option<super::history::SeededHistory>,
    /// Objects the API server holds (ManifestWorks, HostedClusters,
    /// HostedControlPlanes, control-plane pods, ManagedClusters, NodePools).
    pub objects: usize,
    /// From the child's start to /readyz (the first list of every kind).
    pub time_to_ready: Duration,
    /// Object change applied in the API server → its new value in a
    /// `/metrics` scrape (an upper bound: includes one scrape's duration).
    pub event_to_metrics: Latency,
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
        mode: crate::sim::kube::ClusterLayout::Aro,
        created_at: ago(60),
        manifestwork_applied_at: Some(ago(59)),
        hosted_cluster_available_at: Some(ago(40)),
        control_plane_ready_at: Some(ago(45)),
        managed_cluster_joined_at: Some(ago(35)),
        node_pools: vec![("np-1".to_string(), 2, Some(ago(30)))],
        faults: Default::default(),
        hub: Default::default(),
        deletion: Default::default(),
    }
}

/// What cluster `i` does after its creation, so the fleet has day-2
/// operations in flight as a real one does: one cluster in twenty adds a
/// pool (created two minutes ago, its machines not ready yet), another one
/// in twenty upgrades its control plane (started five minutes ago) and its
/// pool (updating since a minute ago). At 10,000 clusters: 500 pool
/// creations, 500 upgrades and 500 pool upgrades in flight.
fn bench_extras(i: usize, now: Timestamp) -> crate::sim::kube::KubeExtras {
    use crate::sim::kube::KubeExtras;
    use crate::sim::kube::objects::{KubeAddedPool, KubePoolUpgrade, KubeUpgrade};
    let ago = |minutes: i64| now - SignedDuration::from_mins(minutes);
    match i % 20 {
        0 => KubeExtras {
            added_pool: Some(KubeAddedPool {
                pool: "np-2".to_string(),
                replicas: 2,
                created: ago(2),
                ignition: Some(ago(1)),
                machines: None,
                nodes: None,
                ready: None,
                pending: None,
            }),
            ..KubeExtras::default()
        },
        10 => {
            let to = "4.20.5".to_string();
            KubeExtras {
                upgrade: Some(KubeUpgrade {
                    to: to.clone(),
                    requested: ago(6),
                    started: ago(5),
                    completed: None,
                }),
                pool_upgrades: vec![KubePoolUpgrade {
                    pool: "np-1".to_string(),
                    to,
                    started: ago(1),
                    done: None,
                }],
                ..KubeExtras::default()
            }
        }
        _ => KubeExtras::default(),
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
    history: Option<u32>,
) -> Result<KubeFigures, BenchError> {
    use crate::sim::kube::{KubeApiServer, objects_with, write_kubeconfig};
    let pinning = pin::Pinning::apply();
    let upstreams = upstream_threads()?;
    let (api, url) = on_threads(&upstreams, KubeApiServer::start())
        .await?
        .map_err(BenchError::World)?;
    let now = Timestamp::now();
    let mut objects = 0;
    let mut pools = Vec::with_capacity(clusters);
    let mut cluster_ids = Vec::with_capacity(clusters);
    for i in 0..clusters {
        let spec = bench_spec(i, now);
        cluster_ids.push(spec.cluster_id.clone());
        for obj in objects_with(&spec, &bench_extras(i, now), now) {
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
    let seeded = if let Some(operations) = history {
        let state = dir.join("state");
        let seeded = super::history::seed(&state, cluster_ids, operations as usize, now)?;
        config.state_dir = Some(state);
        Some(seeded)
    } else {
        None
    };
    let path = dir.join("hcp-flow.yaml");
    let Serving {
        child,
        pid,
        base,
        client,
        time_to_ready,
        ..
    } = serve_child(&config, &path, &pinning, ready_deadline(clusters)).await?;
    let rss_at_ready = resident_memory_of(&pid);
    let mut scraper = Scraper::new(client, format!("{base}/metrics"))?;

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
    let memcpy = super::figures::memcpy_of(last.as_bytes(), scrapes);
    let (bytes, series) = (last.len(), series_in(last));
    let fleet_series = fleet_level_series_in(last);
    let (scrape_gzip, gzip_bytes) = scraper.gzip(scrapes).await?;
    let scrape_reqwest = scraper.timed_reqwest(scrapes).await?;
    let rss = resident_memory_of(&pid);
    drop(child);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(KubeFigures {
        history: seeded,
        memcpy,
        clusters,
        objects,
        time_to_ready,
        event_to_metrics: Latency::from_samples(latencies),
        scrape,
        scrape_gzip,
        scrape_reqwest,
        gzip_bytes,
        bytes,
        series,
        fleet_series,
        rss_at_ready,
        rss,
        pinning: pinning.describe(),
    })
}
