//! The `hcp-flow` binary: parse the command line, set up logging, start the
//! parts, stop them on SIGTERM/Ctrl-C. Wiring only.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use hcp_flow::app::{self, Exporter};
use hcp_flow::cli::{Cli, Command};
use hcp_flow::config::LogFormat;
#[cfg(feature = "sim")]
use hcp_flow::demo::{DemoSettings, Role, SplitInstance, Topology, start_demo_world};

/// How many nice levels the exporter's background threads run below its
/// servers, when not the default (docs/deploy.md).
const NICENESS_VAR: &str = "HCPFLOW_BACKGROUND_NICENESS";

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse_checked();
    if let Ok(value) = std::env::var(NICENESS_VAR) {
        let niceness: i32 = value
            .trim()
            .parse()
            .ok()
            .filter(|n| (0..=19).contains(n))
            .with_context(|| format!("{NICENESS_VAR}={value:?}: a number from 0 to 19"))?;
        hcp_flow::background::set_niceness(niceness);
    }
    // reqwest is built with rustls and no default provider; kube uses ring too.
    let _ = rustls::crypto::ring::default_provider().install_default();

    match cli.command {
        Command::CheckConfig(args) => {
            let ok = args
                .run(&mut std::io::stdout(), &mut std::io::stderr())
                .context("writing the report")?;
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Serve(args) => {
            let config = load_config(&args)?;
            let telemetry = init_logging(config.log_format)?;
            config.log_warnings();
            let grace = config.shutdown_grace;
            let runtime = runtime()?;
            runtime.block_on(serve(config))?;
            // A blocked flush must not hold the exit past the grace period.
            runtime.shutdown_timeout(Duration::from_millis(100));
            telemetry.shutdown_within(grace);
            tracing::info!("stopped");
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(feature = "sim")]
        Command::Demo(args) => {
            let telemetry = init_logging(args.log_format)?;
            let settings = DemoSettings {
                clusters: args.clusters as usize,
                speed: args.speed,
                seed: args.seed,
                faults: !args.no_faults,
                listen: args.listen,
                world: args.world,
                maestro_stream: !args.maestro_rest,
            };
            let runtime = runtime()?;
            match args.topology {
                Topology::Single => runtime.block_on(demo(settings))?,
                Topology::Split => runtime.block_on(demo_split(settings))?,
            }
            runtime.shutdown_timeout(Duration::from_millis(100));
            telemetry.shutdown_within(DEMO_SHUTDOWN_GRACE);
            Ok(ExitCode::SUCCESS)
        }
        Command::Diagnose(args) if args.watch => {
            let _telemetry = init_logging(args.serve.overrides.log_format.unwrap_or_default())?;
            let runtime = runtime()?;
            let code = runtime.block_on(diagnose_watch(&args))?;
            runtime.shutdown_timeout(Duration::from_millis(100));
            Ok(ExitCode::from(code))
        }
        Command::Diagnose(args) => {
            // Logs go to stderr: stdout is the report.
            let _telemetry = init_logging(args.serve.overrides.log_format.unwrap_or_default())?;
            let runtime = runtime()?;
            let report = match &args.from {
                Some(url) => runtime.block_on(hcp_flow::diagnose::from_exporter(url, &args.target)),
                None => {
                    let config = load_config(&args.serve)?;
                    runtime.block_on(hcp_flow::diagnose::live(&config, &args.target, args.wait))
                }
            };
            runtime.shutdown_timeout(Duration::from_millis(100));
            match report {
                Ok(report) => {
                    print!(
                        "{}",
                        hcp_flow::diagnose::render::render(&report, args.output)
                    );
                    Ok(ExitCode::from(report.exit_code()))
                }
                Err(error) => {
                    // Nothing could be read at all: that is exit 4 too, with why.
                    eprintln!(
                        "hcp-flow diagnose: {}",
                        hcp_flow::sources::health::cause_chain(&error)
                    );
                    Ok(ExitCode::from(
                        hcp_flow::diagnose::Outcome::Unreadable as u8,
                    ))
                }
            }
        }
        #[cfg(feature = "sim")]
        Command::Bench(args) => {
            let _telemetry = init_logging(args.log_format)?;
            let (clusters, scrapes) = (args.clusters as usize, args.scrapes as usize);
            let mut flat = true;
            let report = if let Some(duration) = args.soak {
                let figures = runtime()?
                    .block_on(hcp_flow::bench::soak::soak(clusters, duration, args.speed))?;
                flat = figures.flat();
                hcp_flow::bench::soak::report_soak(&figures)
            } else if args.kube {
                runtime()?.block_on(hcp_flow::bench::run_kube(clusters, scrapes, args.history))?
            } else if args.warm_restart {
                runtime()?.block_on(hcp_flow::bench::run_warm(
                    clusters,
                    args.shards,
                    args.downtime,
                ))?
            } else {
                runtime()?.block_on(hcp_flow::bench::run(
                    clusters,
                    scrapes,
                    args.shards,
                    args.maestro_watch,
                    args.maestro,
                    args.history,
                ))?
            };
            match &args.output {
                Some(path) => std::fs::write(path, &report)
                    .with_context(|| format!("writing {}", path.display()))?,
                None => print!("{report}"),
            }
            if !flat {
                eprintln!(
                    "memory grew by more than {:.0} % after the warm-up",
                    hcp_flow::bench::soak::MAX_GROWTH * 100.0
                );
                return Ok(ExitCode::FAILURE);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// serve's configuration, every field error on its own line.
fn load_config(args: &hcp_flow::cli::ServeArgs) -> anyhow::Result<hcp_flow::config::Config> {
    args.load_config().map_err(|e| {
        let lines: Vec<String> = e
            .into_field_errors()
            .iter()
            .map(|f| f.to_string())
            .collect();
        anyhow::anyhow!("invalid configuration:\n  {}", lines.join("\n  "))
    })
}

/// The demo is for one machine: it stops quickly.
#[cfg(feature = "sim")]
const DEMO_SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Logs (text or JSON) and, when OTEL_EXPORTER_OTLP_* is set, the exporter's
/// own spans over OTLP. The returned guard flushes them on drop paths.
fn init_logging(format: LogFormat) -> anyhow::Result<hcp_flow::telemetry::Telemetry> {
    hcp_flow::telemetry::init(format).context("setting up logging and telemetry")
}

async fn serve(config: hcp_flow::config::Config) -> Result<(), hcp_flow::Error> {
    let listener = app::bind(config.listen).await?;
    let exporter = Exporter::start(&config, 1.0)?;
    app::log_startup_summary(&config, &exporter);
    tracing::info!(
        listen = %config.listen,
        "hcp-flow serving; /readyz turns ready once every kind of every source has listed"
    );
    exporter
        .serve(listener, shutdown_signal(), config.shutdown_grace)
        .await?;
    Ok(())
}

/// `diagnose --watch`: walk, draw, and again every interval until the
/// verdict says the operation ended or Ctrl-C; the last verdict's code.
async fn diagnose_watch(args: &hcp_flow::cli::DiagnoseArgs) -> anyhow::Result<u8> {
    use std::io::{IsTerminal, Write};
    // Where each walk reads: a running exporter, or the upstreams with
    // serve's configuration.
    let live = match &args.from {
        Some(_) => None,
        None => Some(load_config(&args.serve)?),
    };
    let terminal = std::io::stdout().is_terminal();
    let mut last;
    let mut frames = 0u64;
    loop {
        let report = match (&live, &args.from) {
            (Some(config), _) => hcp_flow::diagnose::live(config, &args.target, args.wait).await,
            (None, Some(url)) => hcp_flow::diagnose::from_exporter(url, &args.target).await,
            (None, None) => anyhow::bail!("diagnose --watch needs --from or a configuration"),
        };
        frames += 1;
        let mut out = std::io::stdout().lock();
        // A terminal is redrawn in place; a pipe gets one frame after another.
        if terminal {
            write!(out, "\x1b[2J\x1b[H")?;
        } else if frames > 1 {
            writeln!(out)?;
        }
        writeln!(
            out,
            "hcp-flow diagnose --watch {} (walk {frames}, {})",
            args.target,
            jiff::Timestamp::now().strftime("%H:%M:%S")
        )?;
        let ended = match &report {
            Ok(report) => {
                write!(
                    out,
                    "{}",
                    hcp_flow::diagnose::render::render(
                        report,
                        hcp_flow::diagnose::render::Output::Table
                    )
                )?;
                last = report.exit_code();
                report.watch_ends()
            }
            Err(error) => {
                writeln!(
                    out,
                    "nothing could be read: {}",
                    hcp_flow::sources::health::cause_chain(error)
                )?;
                last = hcp_flow::diagnose::Outcome::Unreadable as u8;
                false
            }
        };
        out.flush()?;
        drop(out);
        if ended {
            return Ok(last);
        }
        tokio::select! {
            _ = tokio::time::sleep(args.interval) => {}
            _ = tokio::signal::ctrl_c() => return Ok(last),
        }
    }
}

#[cfg(feature = "sim")]
async fn demo(settings: DemoSettings) -> anyhow::Result<()> {
    let listener = app::bind(settings.listen).await?;
    let demo = start_demo_world(&settings, hcp_flow::sim::LatencyModel::realistic()).await?;
    let exporter = Exporter::start(&demo.config, settings.speed)?.with_routes(demo.routes());
    let base = format!(
        "http://{}",
        listener.local_addr().context("reading the bound address")?
    );
    let target = demo.config.slo.creation_target;
    println!(
        "hcp-flow demo: {world} world, {clusters} simulated clusters, speed {speed}×, seed {seed}, faults {faults}\n\
         \x20 SLO target {target:.1?} (1200 s / {speed}); histogram buckets and hop budgets divided by {speed} too\n\
         \x20 simulated upstreams: {upstreams}\n\
         \x20 open:\n\
         \x20   {base}/metrics            Prometheus metrics\n\
         \x20   {base}/api/v1/clusters    every creation's timeline (JSON)\n\
         \x20   {base}/readyz             sync status of each source\n\
         \x20   {base}{truth}  each cluster's injected fault and the alert it should raise\n\
         \x20   {base}/                   the web UI: fleet funnel, failures, each cluster's flow\n\
         \x20 configuration file of this world (for serve and diagnose): {config_path}\n\
         \x20   hcp-flow diagnose --config {config_path} CLUSTER_ID\n\
         \x20 Ctrl-C stops.",
        world = settings.world.as_str(),
        clusters = settings.clusters,
        speed = settings.speed,
        seed = settings.seed,
        faults = if settings.faults { "on" } else { "off" },
        upstreams = demo.describe_upstreams(),
        truth = hcp_flow::demo::GROUND_TRUTH_PATH,
        config_path = demo.config_path.display(),
    );
    exporter
        .serve(listener, shutdown_signal(), DEMO_SHUTDOWN_GRACE)
        .await?;
    Ok(())
}

/// ARO HCP's production shape over one world: the service-side exporter on
/// `--listen`, one per management cluster on the ports after it, each a
/// real exporter with only its own sources (docs/design/08-scopes-and-scale-out.md §8.2).
#[cfg(feature = "sim")]
async fn demo_split(settings: DemoSettings) -> anyhow::Result<()> {
    // --listen first, as in the single demo: a port in use fails at once.
    let service_listener = app::bind(settings.listen).await?;
    let demo = start_demo_world(&settings, hcp_flow::sim::LatencyModel::realistic()).await?;
    let mut instances = hcp_flow::demo::split_configs(&demo.config);
    let mut listeners = vec![service_listener];
    for index in 1..instances.len() {
        let addr = hcp_flow::demo::split_listen(settings.listen, index)?;
        listeners.push(app::bind(addr).await?);
    }
    // Each file names the address its instance really listens on.
    for (instance, listener) in instances.iter_mut().zip(&listeners) {
        instance.config.listen = listener.local_addr().context("reading the bound address")?;
    }
    let bound: Vec<(&SplitInstance, std::net::SocketAddr)> =
        instances.iter().map(|i| (i, i.config.listen)).collect();
    let files = demo.write_split(&bound)?;

    // One signal stops every instance.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut serving = Vec::new();
    for (instance, listener) in instances.iter().zip(listeners) {
        let mut exporter = Exporter::start(&instance.config, settings.speed)
            .with_context(|| format!("starting instance {}", instance.name))?;
        // The ground truth is the world's, not a management cluster's.
        if instance.role == Role::Service {
            exporter = exporter.with_routes(demo.routes());
        }
        let mut stop = stop_rx.clone();
        let stopped = async move {
            let _ = stop.wait_for(|stopped| *stopped).await;
        };
        serving.push(exporter.serve(listener, stopped, DEMO_SHUTDOWN_GRACE));
    }

    let target = demo.config.slo.creation_target;
    let mut banner = format!(
        "hcp-flow demo: {world} world, {clusters} simulated clusters, speed {speed}×, seed {seed}, faults {faults}, topology split\n\
         \x20 SLO target {target:.1?} (1200 s / {speed}); histogram buckets and hop budgets divided by {speed} too\n\
         \x20 simulated upstreams: {upstreams}\n\
         \x20 ARO HCP's production shape: one exporter on the service side, one per management cluster\n",
        world = settings.world.as_str(),
        clusters = settings.clusters,
        speed = settings.speed,
        seed = settings.seed,
        faults = if settings.faults { "on" } else { "off" },
        upstreams = demo.describe_upstreams(),
    );
    for (instance, config_path) in instances.iter().zip(&files.configs) {
        let base = format!("http://{}", instance.config.listen);
        let reads: Vec<String> = instance
            .config
            .sources
            .http_sources()
            .iter()
            .map(|(name, _)| name.to_string())
            .chain(instance.config.sources.kube.iter().map(|k| k.source_name()))
            .collect();
        banner.push_str(&format!(
            "  instance {name}, role {role}, reads {reads}\n\
             \x20   {base}/metrics            Prometheus metrics\n\
             \x20   {base}/api/v1/clusters    every creation's timeline (JSON)\n\
             \x20   {base}/readyz             sync status of its sources\n\
             \x20   {base}/                   the web UI\n",
            name = instance.name,
            role = instance.role.as_str(),
            reads = reads.join(", "),
        ));
        if instance.role == Role::Service {
            banner.push_str(&format!(
                "    {base}{truth}  each cluster's injected fault and the alert it should raise\n",
                truth = hcp_flow::demo::GROUND_TRUTH_PATH,
            ));
        }
        banner.push_str(&format!(
            "    configuration file: {}\n",
            config_path.display()
        ));
    }
    banner.push_str(&format!(
        "  Prometheus scrape configuration (also in {path}):\n\n{yaml}\n\n\
         \x20 configuration file of the whole world (for serve and diagnose): {config_path}\n\
         \x20   hcp-flow diagnose --config {config_path} CLUSTER_ID\n\
         \x20 Ctrl-C stops.",
        path = files.scrape_config.display(),
        yaml = files.scrape_yaml.trim_end(),
        config_path = demo.config_path.display(),
    ));
    println!("{banner}");

    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop_tx.send(true);
    });
    futures::future::try_join_all(serving).await?;
    Ok(())
}

/// Ctrl-C or SIGTERM (what Kubernetes sends before killing the pod).
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down");
}
