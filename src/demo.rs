//! `hcp-flow demo`: a simulated world on loopback and the configuration
//! that points the exporter at it. Kept apart from `app` so the exporter's
//! wiring knows nothing of the simulation; the benchmark builds on it too.

use std::net::SocketAddr;
use std::time::Duration;

use crate::config::{
    ClustersServiceApi, ClustersServiceConfig, Config, HttpSourceConfig, MaestroConfig,
    MaestroGrpcConfig, RpFrontendConfig,
};
use crate::sim::kube::{ClusterLayout, KubeSimError, write_kubeconfig};
use crate::sim::mgmt::MgmtCluster;
use crate::sim::{Endpoints, LatencyModel, SimClock, World, WorldConfig, WorldKind};
use crate::sources::kube::{KubeMode, KubeSourceConfig};

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("the simulated world could not start")]
    World(#[source] std::io::Error),
    #[error("the simulated management clusters could not start")]
    KubeWorld(#[source] std::io::Error),
    #[error("the simulated world's threads could not start")]
    Threads(#[from] crate::background::BackgroundError),
    #[error("the demo kubeconfig could not be written")]
    Kubeconfig(#[source] KubeSimError),
    #[error("the demo configuration file could not be written")]
    ConfigFile(#[source] crate::config::WriteError),
    #[error("no port is left after {base} for instance {index} of the split demo")]
    NoPortLeft { base: SocketAddr, index: usize },
    #[error("the Prometheus scrape configuration could not be written as YAML")]
    ScrapeYaml(#[source] serde_saphyr::SerializeError),
    #[error("cannot write {path}")]
    ScrapeFile {
        path: String,
        #[source]
        cause: std::io::Error,
    },
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
    /// The threads the world serves on, as low in priority as the
    /// exporter's sources: its upstreams run elsewhere in production, and
    /// on a shared machine a world on the process's priority starved the
    /// sources that read it (docs/design/11-simulated-world.md §11.1).
    _threads: crate::background::Background,
}

/// Where the demo serves its ground truth, on the exporter's port.
pub const GROUND_TRUTH_PATH: &str = "/api/v1/demo/ground-truth";

/// The demo's own routes: its ground truth (docs/design/11-simulated-world.md §11.6) as JSON.
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
                ClusterLayout::Aro => "management cluster",
                ClusterLayout::SelfManaged => {
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
    let threads = crate::background::Background::start()?;
    // The ARO HCP services exist only in a world with ARO; a self-managed
    // hub is read through its Kubernetes API alone. Their servers are
    // spawned on the world's threads.
    let serving = world.clone();
    let started = threads.run(async move {
        let endpoints = match serving.config().kind.aro() {
            true => Some(serving.serve().await.map_err(DemoError::World)?),
            false => None,
        };
        let mgmt_clusters = serving.serve_kube().await.map_err(DemoError::KubeWorld)?;
        Ok::<_, DemoError>((endpoints, mgmt_clusters))
    });
    let (endpoints, mgmt_clusters) = started
        .await
        .ok_or_else(|| DemoError::World(std::io::Error::other("the world's threads stopped")))??;
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
        _threads: threads,
    })
}

/// One kube source per management cluster of the world, through its context
/// in `kubeconfig`: ARO mode with the world's environment, or `self_managed`
/// for the MCE hub, and the backoffs divided by the speed (budgets are the
/// model's, set in [`demo_config`]).
/// How the exporter reads a world's layout: the demo is where the world's
/// words meet the exporter's configuration.
pub fn kube_mode(layout: ClusterLayout) -> KubeMode {
    match layout {
        ClusterLayout::Aro => KubeMode::Aro,
        ClusterLayout::SelfManaged => KubeMode::SelfManaged,
    }
}

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
            let mut k = KubeSourceConfig::new(&c.name, kube_mode(c.mode));
            k.kubeconfig = Some(kubeconfig.to_path_buf());
            k.context = Some(c.name.clone());
            if c.mode == ClusterLayout::Aro {
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

/// How `hcp-flow demo` deploys exporters over its world (`--topology`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Topology {
    /// One exporter reading every source.
    #[default]
    Single,
    /// ARO HCP's production shape (docs/design/08-scopes-and-scale-out.md §8.2): one service-side
    /// exporter, and one per management cluster reading only its own
    /// Kubernetes API.
    Split,
}

/// What one exporter of a split demo reads (docs/design/08-scopes-and-scale-out.md §8.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The RP frontend, Clusters Service and Maestro: hops 1–3 directly.
    Service,
    /// One management cluster's Kubernetes API: hops 4–8 directly.
    Management,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Service => "service",
            Role::Management => "management",
        }
    }
}

/// The name of the service-side instance of a split demo; a management
/// instance is named after its management cluster.
pub const SERVICE_INSTANCE: &str = "service";

/// One exporter of a split demo.
#[derive(Clone, Debug, PartialEq)]
pub struct SplitInstance {
    pub name: String,
    pub role: Role,
    pub config: Config,
}

/// ARO HCP's production shape out of one configuration reading everything:
/// the service side's HTTP sources alone, then one instance per management
/// cluster with only that cluster's watches. Everything else (SLO, budgets,
/// listen) is kept as it is: the instances must judge alike, and the caller
/// gives each its own port. The service instance comes first.
pub fn split_configs(config: &Config) -> Vec<SplitInstance> {
    let mut service = config.clone();
    service.sources.kube.clear();
    let mut instances = vec![SplitInstance {
        name: SERVICE_INSTANCE.to_string(),
        role: Role::Service,
        config: service,
    }];
    for kube in &config.sources.kube {
        let mut management = config.clone();
        management.sources.rp_frontend = None;
        management.sources.clusters_service = None;
        management.sources.maestro = None;
        management.sources.kube = vec![kube.clone()];
        instances.push(SplitInstance {
            name: kube.mgmt_cluster.clone(),
            role: Role::Management,
            config: management,
        });
    }
    instances
}

/// Where instance `index` of a split demo listens: the ports after `base`'s,
/// or port 0 for each when `base` asks for any free port.
pub fn split_listen(base: SocketAddr, index: usize) -> Result<SocketAddr, DemoError> {
    if base.port() == 0 {
        return Ok(base);
    }
    let port = u16::try_from(index)
        .ok()
        .and_then(|i| base.port().checked_add(i))
        .ok_or(DemoError::NoPortLeft { base, index })?;
    Ok(SocketAddr::new(base.ip(), port))
}

/// The Prometheus job every split instance is scraped as.
pub const SCRAPE_JOB: &str = "hcp-flow";

/// A Prometheus `scrape_configs` covering every instance: one job, one
/// static target per instance, labelled with its role and name so a query
/// can tell the service side from each management cluster's instance. The
/// labels avoid `mgmt_cluster`: a target label of that name would rename
/// the exporter's own `mgmt_cluster` label to `exported_mgmt_cluster`.
pub fn scrape_config(instances: &[(&SplitInstance, SocketAddr)]) -> Result<String, DemoError> {
    #[derive(serde::Serialize)]
    struct File<'a> {
        scrape_configs: [Job<'a>; 1],
    }
    #[derive(serde::Serialize)]
    struct Job<'a> {
        job_name: &'a str,
        static_configs: Vec<Target<'a>>,
    }
    #[derive(serde::Serialize)]
    struct Target<'a> {
        targets: [String; 1],
        labels: Labels<'a>,
    }
    #[derive(serde::Serialize)]
    struct Labels<'a> {
        instance_role: &'a str,
        instance_name: &'a str,
    }
    let file = File {
        scrape_configs: [Job {
            job_name: SCRAPE_JOB,
            static_configs: instances
                .iter()
                .map(|(instance, addr)| Target {
                    targets: [addr.to_string()],
                    labels: Labels {
                        instance_role: instance.role.as_str(),
                        instance_name: &instance.name,
                    },
                })
                .collect(),
        }],
    };
    serde_saphyr::to_string(&file).map_err(DemoError::ScrapeYaml)
}

/// The files a split demo writes beside [`Demo::config_path`].
#[derive(Clone, Debug)]
pub struct SplitFiles {
    /// One configuration file per instance, in the instances' order.
    pub configs: Vec<std::path::PathBuf>,
    pub scrape_config: std::path::PathBuf,
    /// The scrape configuration as written, to print.
    pub scrape_yaml: String,
}

impl Demo {
    /// Write each instance's configuration (as the chart would deploy it)
    /// and the Prometheus scrape configuration over them all, beside the
    /// world's configuration file and removed with it. `instances` carries
    /// each instance's bound address.
    pub fn write_split(
        &self,
        instances: &[(&SplitInstance, SocketAddr)],
    ) -> Result<SplitFiles, DemoError> {
        let dir = self.kubeconfig.dir();
        let mut configs = Vec::new();
        for (instance, _) in instances {
            let path = dir.join(format!("hcp-flow-{}.yaml", file_stem(&instance.name)));
            instance
                .config
                .write_yaml(
                    &path,
                    &format!(
                        "The {role} instance `{name}` of a running `hcp-flow demo --topology split`:\n\
                         what the chart deploys for it in ARO HCP (docs/design/08-scopes-and-scale-out.md §8.2).\n\
                         Removed when the demo stops.",
                        role = instance.role.as_str(),
                        name = instance.name,
                    ),
                )
                .map_err(DemoError::ConfigFile)?;
            configs.push(path);
        }
        let scrape_yaml = format!(
            "# Prometheus scrape configuration of a running `hcp-flow demo --topology split`:\n\
             # every instance, labelled with its role and name. Its world runs sped up:\n\
             # scrape every few seconds.\n{}",
            scrape_config(instances)?
        );
        let scrape_config = dir.join("prometheus-scrape.yaml");
        std::fs::write(&scrape_config, &scrape_yaml).map_err(|cause| DemoError::ScrapeFile {
            path: scrape_config.display().to_string(),
            cause,
        })?;
        Ok(SplitFiles {
            configs,
            scrape_config,
            scrape_yaml,
        })
    }
}

/// A management cluster's name as a file name: its own characters where a
/// path allows them, so no name can write outside the demo's directory.
fn file_stem(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' => c,
            _ => '_',
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests: a panic is the failure report

    use super::*;
    use crate::config::KubeMode;

    /// A configuration reading everything: the three HTTP sources and
    /// three management clusters.
    fn everything() -> Config {
        let url = |s: &str| url::Url::parse(s).unwrap();
        let mut config = Config::default();
        config.sources.rp_frontend = Some(RpFrontendConfig {
            http: HttpSourceConfig::new(url("http://127.0.0.1:8000/")),
            api_version: crate::config::default_rp_api_version(),
            subscriptions: vec!["6b690bec-0c16-4ecb-8f67-781caf40bba7".into()],
            resource_ids: Vec::new(),
            node_pool_rotation: Duration::from_secs(1800),
        });
        config.sources.clusters_service = Some(ClustersServiceConfig {
            http: HttpSourceConfig::new(url("http://127.0.0.1:8001/")),
            api: ClustersServiceApi::AroHcpV1alpha1,
            search_scope: None,
            node_pool_rotation: Duration::from_secs(1800),
        });
        config.sources.maestro = Some(MaestroConfig {
            http: HttpSourceConfig::new(url("http://127.0.0.1:8002/")),
            search_scope: None,
            grpc: None,
        });
        config.sources.kube = ["mgmt-1", "mgmt-2", "mgmt-3"]
            .into_iter()
            .map(|name| KubeSourceConfig::new(name, KubeMode::Aro))
            .collect();
        config
    }

    #[test]
    fn the_service_instance_keeps_the_http_sources_and_no_kube() {
        let config = everything();
        let instances = split_configs(&config);
        let service = &instances[0];
        assert_eq!(
            (service.name.as_str(), service.role),
            (SERVICE_INSTANCE, Role::Service)
        );
        assert!(service.config.sources.kube.is_empty());
        assert_eq!(
            service.config.sources.rp_frontend,
            config.sources.rp_frontend
        );
        assert_eq!(
            service.config.sources.clusters_service,
            config.sources.clusters_service
        );
        assert_eq!(service.config.sources.maestro, config.sources.maestro);
        assert_eq!(
            instances.iter().filter(|i| i.role == Role::Service).count(),
            1
        );
    }

    #[test]
    fn each_management_instance_watches_one_cluster_and_reads_no_http_source() {
        let instances = split_configs(&everything());
        let management: Vec<&SplitInstance> = instances
            .iter()
            .filter(|i| i.role == Role::Management)
            .collect();
        assert_eq!(management.len(), 3);
        for instance in management {
            let sources = &instance.config.sources;
            assert_eq!(sources.kube.len(), 1, "{}", instance.name);
            assert_eq!(sources.kube[0].mgmt_cluster, instance.name);
            assert!(!sources.has_service_side(), "{}", instance.name);
        }
    }

    #[test]
    fn the_management_instances_together_watch_every_cluster_once() {
        let config = everything();
        let watched: Vec<KubeSourceConfig> = split_configs(&config)
            .into_iter()
            .flat_map(|i| i.config.sources.kube)
            .collect();
        assert_eq!(watched, config.sources.kube);
    }

    #[test]
    fn only_the_service_instance_sends_root_spans() {
        // The rule app.rs turns root spans off by: a management instance
        // that sent them too would give each trace two roots.
        for instance in split_configs(&everything()) {
            assert_eq!(
                instance.config.sources.management_only(),
                instance.role == Role::Management,
                "{}",
                instance.name
            );
        }
    }

    #[test]
    fn everything_but_the_sources_is_kept() {
        let mut config = everything();
        config.slo.creation_target = Duration::from_secs(20);
        for instance in split_configs(&config) {
            let mut expected = config.clone();
            expected.sources = instance.config.sources.clone();
            assert_eq!(instance.config, expected, "{}", instance.name);
        }
    }

    #[test]
    fn instances_listen_on_the_next_ports_or_each_on_any_port() {
        let base: SocketAddr = "127.0.0.1:9464".parse().unwrap();
        let ports: Vec<u16> = (0..3)
            .map(|i| split_listen(base, i).unwrap().port())
            .collect();
        assert_eq!(ports, [9464, 9465, 9466]);
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        assert_eq!(split_listen(any, 2).unwrap(), any);
        let last: SocketAddr = "127.0.0.1:65535".parse().unwrap();
        assert!(matches!(
            split_listen(last, 1),
            Err(DemoError::NoPortLeft { index: 1, .. })
        ));
    }

    #[test]
    fn the_scrape_config_has_one_labelled_target_per_instance() {
        let instances = split_configs(&everything());
        let bound: Vec<(&SplitInstance, SocketAddr)> = instances
            .iter()
            .enumerate()
            .map(|(i, instance)| {
                let addr = split_listen("127.0.0.1:9464".parse().unwrap(), i).unwrap();
                (instance, addr)
            })
            .collect();
        let yaml = scrape_config(&bound).unwrap();
        let parsed: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
        let jobs = parsed["scrape_configs"].as_array().unwrap();
        assert_eq!(jobs.len(), 1, "{yaml}");
        assert_eq!(jobs[0]["job_name"], SCRAPE_JOB, "{yaml}");
        let targets: Vec<(String, String, String)> = jobs[0]["static_configs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let s = |v: &serde_json::Value| v.as_str().unwrap().to_string();
                assert_eq!(t["targets"].as_array().unwrap().len(), 1, "{yaml}");
                (
                    s(&t["targets"][0]),
                    s(&t["labels"]["instance_role"]),
                    s(&t["labels"]["instance_name"]),
                )
            })
            .collect();
        let want = |port: u16, role: &str, name: &str| {
            (
                format!("127.0.0.1:{port}"),
                role.to_string(),
                name.to_string(),
            )
        };
        assert_eq!(
            targets,
            [
                want(9464, "service", "service"),
                want(9465, "management", "mgmt-1"),
                want(9466, "management", "mgmt-2"),
                want(9467, "management", "mgmt-3"),
            ],
            "{yaml}"
        );
    }

    #[test]
    fn no_management_cluster_name_leaves_the_directory() {
        assert_eq!(
            file_stem("hcp-underlay-westus3-mgmt-1"),
            "hcp-underlay-westus3-mgmt-1"
        );
        assert_eq!(file_stem("../etc/x y"), ".._etc_x_y");
    }
}
