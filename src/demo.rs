//! `hcp-flow demo`: a simulated world on loopback and the configuration
//! that points the exporter at it. Kept apart from `app` so the exporter's
//! wiring knows nothing of the simulation; the benchmark builds on it too.

use std::net::SocketAddr;
use std::time::Duration;

use crate::config::{
    ClustersServiceApi, ClustersServiceConfig, Config, HttpSourceConfig, MaestroConfig,
    MaestroGrpcConfig, RpFrontendConfig,
};
use crate::sim::kube::{KubeSimError, write_kubeconfig};
use crate::sim::mgmt::MgmtCluster;
use crate::sim::{Endpoints, LatencyModel, SimClock, World, WorldConfig, WorldKind};
use crate::sources::kube::{KubeMode, KubeSourceConfig};

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("the simulated world could not start")]
    World(#[source] std::io::Error),
    #[error("the simulated management clusters could not start")]
    KubeWorld(#[source] std::io::Error),
    #[error("the demo kubeconfig could not be written")]
    Kubeconfig(#[source] KubeSimError),
    #[error("the demo configuration file could not be written")]
    ConfigFile(#[source] crate::config::WriteError),
}

/// Settings of `hcp-flow demo`.
#[derive(Clone, Debug)]
pub struct DemoSettings {
    pub clusters: usize,
    pub speed: f64,
    pub seed: u64,
    pub faults: bool,
    pub listen: SocketAddr,
    /// Which world `start_demo_world` runs (`--world`).
    pub world: WorldKind,
    /// Hear Maestro over its gRPC stream (the demo's default) rather than
    /// by polling its REST API alone (`--maestro-rest`).
    pub maestro_stream: bool,
}

/// A simulated world and the exporter configuration that reads it.
pub struct Demo {
    pub world: World,
    /// The ARO HCP services; `None` in a self-managed world, which has none.
    pub endpoints: Option<Endpoints>,
    /// The world's management clusters and self-managed hub (one simulated
    /// Kubernetes API server each), watched through `kubeconfig`.
    pub mgmt_clusters: Vec<MgmtCluster>,
    pub kubeconfig: DemoKubeconfig,
    pub config: Config,
    /// `config` as a file `serve` and `diagnose --config` read, beside the
    /// kubeconfig (and removed with it).
    pub config_path: std::path::PathBuf,
}

/// Where the demo serves its ground truth, on the exporter's port.
pub const GROUND_TRUTH_PATH: &str = "/api/v1/demo/ground-truth";

/// The demo's own routes: its ground truth (docs/design.md §11.6) as JSON.
pub fn ground_truth_routes(world: World) -> axum::Router {
    axum::Router::new().route(
        GROUND_TRUTH_PATH,
        axum::routing::get(move || {
            let world = world.clone();
            async move { axum::Json(world.ground_truth()) }
        }),
    )
}

impl Demo {
    /// The routes `hcp-flow demo` serves beside the exporter's.
    pub fn routes(&self) -> axum::Router {
        ground_truth_routes(self.world.clone())
    }

    /// What the demo banner says about the simulated upstreams.
    pub fn describe_upstreams(&self) -> String {
        let mut out = match &self.endpoints {
            Some(e) => format!(
                "RP frontend {}, Clusters Service {}, Maestro {}",
                e.rp_frontend, e.clusters_service, e.maestro
            ),
            None => "no ARO HCP services (self-managed world)".to_string(),
        };
        for c in &self.mgmt_clusters {
            let what = match c.mode {
                KubeMode::Aro => "management cluster",
                KubeMode::SelfManaged => {
                    "MCE hub (self-managed: MultiClusterEngine, KubeVirt/Agent/None HostedClusters, Agents)"
                }
            };
            out.push_str(&format!("\n    {what} {} at {}", c.name, c.url));
        }
        out.push_str(&format!(
            "\n    kubeconfig with one context per Kubernetes API server: {}",
            self.kubeconfig.path().display()
        ));
        out
    }
}

/// A kubeconfig in its own temporary directory, removed when dropped.
#[derive(Debug)]
pub struct DemoKubeconfig {
    dir: std::path::PathBuf,
    path: std::path::PathBuf,
}

impl DemoKubeconfig {
    fn write(clusters: &[MgmtCluster]) -> Result<DemoKubeconfig, DemoError> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("hcp-flow-demo-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|cause| {
            DemoError::Kubeconfig(KubeSimError::Kubeconfig {
                path: dir.display().to_string(),
                cause,
            })
        })?;
        let path = dir.join("kubeconfig");
        let servers: Vec<(&str, &str)> = clusters
            .iter()
            .map(|c| (c.name.as_str(), c.url.as_str()))
            .collect();
        write_kubeconfig(&path, &servers).map_err(DemoError::Kubeconfig)?;
        Ok(DemoKubeconfig { dir, path })
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// The temporary directory the kubeconfig is in.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }
}

impl Drop for DemoKubeconfig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Start the world on loopback and derive a configuration for it: the same
/// sources as production, with poll intervals and the SLO target divided by
/// the speed so every signal shows within minutes.
pub async fn start_demo_world(
    settings: &DemoSettings,
    latency: LatencyModel,
) -> Result<Demo, DemoError> {
    let world = WorldConfig {
        clusters: settings.clusters,
        speed: settings.speed,
        seed: settings.seed,
        faults: settings.faults,
        churn: true,
        latency,
        subscriptions: 3,
        not_handed_over: 0.0,
        failure_burst: None,
        kind: settings.world,
    };
    start_world(settings, world, SimClock::Real).await
}

/// [`start_demo_world`] for any world and clock (tests drive a manual one).
pub async fn start_world(
    settings: &DemoSettings,
    world: WorldConfig,
    clock: SimClock,
) -> Result<Demo, DemoError> {
    let world = World::new(world, clock);
    // The ARO HCP services exist only in a world with ARO; a self-managed
    // hub is read through its Kubernetes API alone.
    let endpoints = match world.config().kind.aro() {
        true => Some(world.serve().await.map_err(DemoError::World)?),
        false => None,
    };
    let mgmt_clusters = world.serve_kube().await.map_err(DemoError::KubeWorld)?;
    let kubeconfig = DemoKubeconfig::write(&mgmt_clusters)?;
    let mut config = match &endpoints {
        Some(endpoints) => demo_config(settings, &world, endpoints),
        None => base_config(settings, &world),
    };
    config.sources.kube = demo_kube_sources(settings, &world, kubeconfig.path());
    let config_path = kubeconfig.dir().join("hcp-flow.yaml");
    config
        .write_yaml(
            &config_path,
            "The configuration of a running `hcp-flow demo`: its simulated upstreams on loopback.\n\
             `hcp-flow diagnose --config THIS_FILE CLUSTER` walks one of its clusters live;\n\
             `hcp-flow serve --config THIS_FILE` runs a second exporter over the same world.\n\
             Removed when the demo stops.",
        )
        .map_err(DemoError::ConfigFile)?;
    Ok(Demo {
        world,
        endpoints,
        mgmt_clusters,
        kubeconfig,
        config,
        config_path,
    })
}

/// One kube source per management cluster of the world, through its context
/// in `kubeconfig`: ARO mode with the world's environment, or `self_managed`
/// for the MCE hub, and the backoffs divided by the speed (budgets are the
/// model's, set in [`demo_config`]).
pub fn demo_kube_sources(
    settings: &DemoSettings,
    world: &World,
    kubeconfig: &std::path::Path,
) -> Vec<KubeSourceConfig> {
    let speed = if settings.speed > 0.0 {
        settings.speed
    } else {
        1.0
    };
    world
        .mgmt_clusters()
        .iter()
        .map(|c| {
            let mut k = KubeSourceConfig::new(&c.name, c.mode);
            k.kubeconfig = Some(kubeconfig.to_path_buf());
            k.context = Some(c.name.clone());
            if c.mode == KubeMode::Aro {
                k.environment = crate::sim::mgmt::KUBE_ENVIRONMENT.to_string();
            }
            k.min_backoff = Duration::from_millis(200);
            k.max_backoff = k.max_backoff.div_f64(speed).max(Duration::from_secs(2));
            k
        })
        .collect()
}

/// What every demo configuration holds, whatever its world: the listen
/// address, and the SLO target and hop budgets divided by the speed.
pub fn base_config(settings: &DemoSettings, world: &World) -> Config {
    let speed = if settings.speed > 0.0 {
        settings.speed
    } else {
        1.0
    };
    let mut config = Config {
        listen: settings.listen,
        ..Config::default()
    };
    config.slo.creation_target = config.slo.creation_target.div_f64(speed);
    // The world's truth assumes these budgets (the defaults, scaled alike).
    config.slo.hop_budgets = world.hop_budgets();
    let operations = &mut config.slo.operations;
    for target in [
        &mut operations.node_pool_create.target,
        &mut operations.node_pool_delete.target,
        &mut operations.upgrade.target,
        &mut operations.node_pool_upgrade.target,
    ] {
        *target = target.div_f64(speed);
    }
    operations.upgrade.hop_budgets = crate::model::HopBudgets::upgrade_defaults()
        .scaled(speed)
        .iter()
        .map(|(hop, budget)| (hop, budget.into()))
        .collect();
    let delete = &mut config.slo.operations.delete;
    delete.target = delete.target.div_f64(speed);
    delete.hop_budgets = world
        .delete_budgets()
        .iter()
        .map(|(hop, budget)| (hop, budget.into()))
        .collect();
    config
}

pub fn demo_config(settings: &DemoSettings, world: &World, endpoints: &Endpoints) -> Config {
    let speed = if settings.speed > 0.0 {
        settings.speed
    } else {
        1.0
    };
    let scaled = |d: Duration, floor: Duration| (d.div_f64(speed)).max(floor);
    let http = |url: &url::Url| {
        let mut http = HttpSourceConfig::new(url.clone());
        http.fast_poll_interval = scaled(http.fast_poll_interval, Duration::from_millis(500));
        http.slow_poll_interval = scaled(http.slow_poll_interval, Duration::from_secs(2));
        http.full_relist_interval = scaled(http.full_relist_interval, Duration::from_secs(10));
        http
    };
    let mut config = base_config(settings, world);
    config.sources.rp_frontend = Some(RpFrontendConfig {
        http: http(&endpoints.rp_frontend),
        api_version: crate::config::default_rp_api_version(),
        subscriptions: world.subscriptions(),
        resource_ids: Vec::new(),
        node_pool_rotation: scaled(
            crate::config::defaults::node_pool_rotation(),
            Duration::from_secs(10),
        ),
    });
    config.sources.clusters_service = Some(ClustersServiceConfig {
        http: http(&endpoints.clusters_service),
        api: ClustersServiceApi::AroHcpV1alpha1,
        search_scope: None,
        node_pool_rotation: scaled(
            crate::config::defaults::node_pool_rotation(),
            Duration::from_secs(10),
        ),
    });
    let grpc = settings.maestro_stream.then(|| {
        let mut grpc = MaestroGrpcConfig::new(
            endpoints.maestro_grpc.clone(),
            crate::sim::MAESTRO_SOURCE_ID,
        );
        // Reconnect fast on loopback: the world's faults drop the stream.
        grpc.reconnect_backoff = Duration::from_millis(200);
        Box::new(grpc)
    });
    config.sources.maestro = Some(MaestroConfig {
        http: http(&endpoints.maestro),
        search_scope: None,
        grpc,
    });
    config
}
