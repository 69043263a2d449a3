//! The arguments of `demo` and `bench`: the subcommands that run the
//! simulated world, built with the `sim` feature only (the shipped image has
//! neither, docs/deploy.md).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{Cli, parse_duration};
use crate::config::LogFormat;
use crate::demo::Topology;
use crate::sim::WorldKind;

#[derive(Args, Debug, Clone, PartialEq)]
pub struct DemoArgs {
    /// Clusters in the simulated fleet.
    #[arg(long, default_value_t = 50, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub clusters: u32,

    /// How much faster than real time the simulated world runs (> 0; 60 turns
    /// a 20-minute creation into 20 seconds).
    #[arg(long, default_value_t = 60.0, value_name = "X", value_parser = parse_speed)]
    pub speed: f64,

    /// Seed of the simulated world; the same seed replays the same fleet and
    /// faults.
    #[arg(long, default_value_t = 7, value_name = "S")]
    pub seed: u64,

    /// Address the exporter's HTTP server listens on (loopback by default:
    /// the demo is for the local machine).
    #[arg(
        long,
        env = "HCPFLOW_LISTEN",
        default_value = "127.0.0.1:9464",
        value_name = "ADDR"
    )]
    pub listen: SocketAddr,

    /// Simulate only healthy creations (no stuck bundles, failed clusters or
    /// failing upstreams).
    #[arg(long)]
    pub no_faults: bool,

    /// Which simulated world to run: ARO HCP, a self-managed MCE hub read
    /// through its Kubernetes API only (HostedClusters in namespaces clusters
    /// and hcp), or both side by side with --clusters clusters in each.
    #[arg(long, value_enum, default_value_t = WorldKind::Aro, value_name = "WORLD")]
    pub world: WorldKind,

    /// Read Maestro by polling its REST API only, instead of hearing bundle
    /// status over its gRPC CloudEvents stream (the default).
    #[arg(long)]
    pub maestro_rest: bool,

    /// How the exporter is deployed over the world: single (one exporter
    /// reading every source) or split (ARO HCP's production shape: one
    /// service-side exporter on --listen and one per management cluster on
    /// the ports after it; --world aro only).
    #[arg(long, value_enum, default_value_t = Topology::Single, value_name = "TOPOLOGY")]
    pub topology: Topology,

    /// Log line format: text (human-readable) or json (one object per line).
    #[arg(long, env = "HCPFLOW_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, value_name = "FORMAT")]
    pub log_format: LogFormat,
}

impl DemoArgs {
    /// The rules between the demo's flags that clap's attributes cannot
    /// state, as a clap error.
    pub(super) fn check(&self) -> Result<(), clap::Error> {
        if self.topology == Topology::Split && self.world != WorldKind::Aro {
            // The split is ARO HCP's: a self-managed hub has no service side
            // to split from its management cluster.
            return Err(<Cli as clap::CommandFactory>::command().error(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "--topology split needs --world aro (got --world {}): it splits ARO HCP's service side from its management clusters",
                    self.world.as_str()
                ),
            ));
        }
        Ok(())
    }
}

#[derive(Args, Debug, Clone, PartialEq)]
pub struct BenchArgs {
    /// Clusters in the simulated fleet.
    #[arg(long, default_value_t = 10_000, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub clusters: u32,

    /// How many scrapes of /metrics to time (the p50/p99 come from these).
    #[arg(long, default_value_t = 200, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub scrapes: u32,

    /// Also write the results as a markdown table to this file.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Run the management-side benchmark instead: HostedClusters with their
    /// ManifestWorks, ManagedClusters and NodePools in a simulated
    /// Kubernetes API server, watched by `hcp-flow serve`.
    #[arg(long)]
    pub kube: bool,

    /// Run the soak instead, for this long (e.g. 30m): both sides of a
    /// churning world read by `hcp-flow serve`, scraped every 5 s, its
    /// resident memory sampled every 30 s. Exits 1 when memory after the
    /// warm-up (a third of the soak, at most 10 minutes) grows by more
    /// than 10 %.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "kube")]
    pub soak: Option<Duration>,

    /// Above 1: the end-to-end part runs one unsharded exporter and every
    /// shard of this many (`--shard i --total-shards N`) side by side
    /// against one simulated fleet, and reports each one's cost against
    /// the unsharded one's and whether the shards' clusters add up to it.
    /// With `--warm-restart`, the exporter follows shard 0 of this many.
    /// 1: the whole fleet.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), conflicts_with_all = ["kube", "soak"])]
    pub shards: u32,

    /// How long each end-to-end run may watch for Maestro bundles turning
    /// Available, to time how soon /metrics shows them (it stops sooner
    /// once 50 are timed and a minute has passed; a small fleet may never
    /// have 50). Upstream requests are counted over the same watch.
    #[arg(long, default_value = "6m", value_name = "DURATION", value_parser = parse_duration, conflicts_with_all = ["kube", "soak", "warm_restart"])]
    pub maestro_watch: Duration,

    /// How the end-to-end exporter reads Maestro. `both` runs it once each
    /// way, each against a fresh world of the same size and seed, and
    /// reports the runs side by side, a column each.
    #[arg(long, value_enum, default_value_t = crate::bench::MaestroChoice::Both, value_name = "MODE", conflicts_with_all = ["kube", "soak", "warm_restart"])]
    pub maestro: crate::bench::MaestroChoice,

    /// Measure a warm restart instead: `hcp-flow serve` hearing Maestro's
    /// stream with a fresh state directory runs until Maestro is up and 30 s
    /// more, is stopped with SIGTERM, stays down for `--downtime` while the
    /// world goes on, and starts again on the same state directory. Reports
    /// both starts' time to /readyz and to Maestro up, the restarted one's
    /// first scrape, and when its scrapes reflect every change of the
    /// downtime.
    #[arg(long, conflicts_with_all = ["kube", "soak"])]
    pub warm_restart: bool,

    /// Give the exporter a state directory in which every cluster holds
    /// this many ended operations (8: a busy week, every kind a live
    /// cluster has; 0: a state directory and no history), each hop timed,
    /// restored as a restart would, so resident memory includes what the
    /// history costs (docs/design/15b-operations.md §15.12). End-to-end and `--kube` runs.
    #[arg(long, value_name = "OPERATIONS", value_parser = clap::value_parser!(u32).range(0..=20), conflicts_with_all = ["soak", "warm_restart"])]
    pub history: Option<u32>,

    /// How long the warm restart's exporter stays down while the world
    /// goes on (needs `--warm-restart`).
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = parse_duration, requires = "warm_restart")]
    pub downtime: Duration,

    /// World speed of the soak: world delays, and the exporter's poll
    /// intervals, divided by this (more churn per minute).
    #[arg(long, default_value_t = 1.0, value_name = "X", requires = "soak")]
    pub speed: f64,

    /// Log line format: text (human-readable) or json (one object per line).
    #[arg(long, env = "HCPFLOW_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, value_name = "FORMAT")]
    pub log_format: LogFormat,
}

fn parse_speed(s: &str) -> Result<f64, String> {
    let speed: f64 = s
        .trim()
        .parse()
        .map_err(|e| format!("`{s}` is not a number: {e}"))?;
    if speed.is_finite() && speed > 0.0 {
        Ok(speed)
    } else {
        Err(format!("must be a finite number > 0, got {s}"))
    }
}
