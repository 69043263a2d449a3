//! The command line: parsing, and precedence flag > environment > file >
//! default.

// A failed unwrap is a failed test, with the value in the message.

use crate::common::child;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use clap::error::ErrorKind;
use hcp_flow::cli::{Cli, Command, ServeArgs};
use hcp_flow::config::{Auth, ClustersServiceApi, Config, ConfigError, FieldError, LogFormat};
use hcp_flow::model::Hop;
use pretty_assertions::assert_eq;

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("hcp-flow-cli-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn file(&self, name: &str, content: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, content).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const FILE: &str = "\
listen: 0.0.0.0:9100
log_format: json
shard: {index: 1, total: 4}
sources:
  maestro:
    base_url: http://maestro:8000
    timeout: 30s
    slow_poll_interval: 3m
    insecure_skip_tls_verify: true
  rp_frontend:
    base_url: https://rp
    subscriptions: [6b690bec-0c16-4ecb-8f67-781caf40bba7]
";

fn serve(args: &[&str]) -> ServeArgs {
    let mut argv = vec!["hcp-flow", "serve"];
    argv.extend_from_slice(args);
    match Cli::try_parse_from(argv).unwrap().command {
        Command::Serve(serve) => serve,
        other => panic!("parsed {other:?}"),
    }
}

fn load(args: &[&str]) -> Result<Config, Vec<FieldError>> {
    serve(args)
        .load_config()
        .map_err(ConfigError::into_field_errors)
}

fn parse_error(argv: &[&str]) -> clap::Error {
    match Cli::try_parse_from(argv) {
        Ok(cli) => panic!("{argv:?} parsed as {cli:?}"),
        Err(e) => e,
    }
}

#[test]
fn serve_without_flags_overrides_nothing() {
    let args = serve(&[]);
    assert_eq!(args.config, None);
    assert_eq!(args.overrides, Default::default());
    assert_eq!(Command::Serve(args).log_format(), None);
}

#[test]
fn serve_flags_parse_into_typed_values() {
    let args = serve(&[
        "--config=/etc/hcp-flow.yaml",
        "--listen=127.0.0.1:1234",
        "--log-format=json",
        "--slo-creation-target=1h30m",
        "--slo-terminal-hops=hosted_cluster,rp_frontend",
        "--shard=2",
        "--total-shards=3",
        "--rp-frontend-subscriptions=a,b",
        "--rp-frontend-resource-ids",
        "/subscriptions/x",
        "--rp-frontend-api-version=2026-09-01-preview",
        "--clusters-service-api=clusters_mgmt/v1",
        "--clusters-service-page-size=500",
        "--maestro-base-url=http://maestro:8000",
        "--maestro-fast-poll-interval=5s",
        "--maestro-insecure-skip-tls-verify",
        "--rp-frontend-insecure-skip-tls-verify=false",
        "--maestro-bearer-token-file=/run/token",
    ]);
    let o = &args.overrides;
    assert_eq!(args.config, Some(PathBuf::from("/etc/hcp-flow.yaml")));
    assert_eq!(
        o.listen,
        Some("127.0.0.1:1234".parse::<SocketAddr>().unwrap())
    );
    assert_eq!(o.log_format, Some(LogFormat::Json));
    assert_eq!(o.slo_creation_target, Some(Duration::from_secs(5400)));
    assert_eq!(
        o.slo_terminal_hops,
        Some(vec![Hop::HostedCluster, Hop::RpFrontend])
    );
    assert_eq!((o.shard, o.total_shards), (Some(2), Some(3)));
    assert_eq!(
        o.rp_frontend.subscriptions,
        Some(vec!["a".to_string(), "b".to_string()])
    );
    assert_eq!(
        o.rp_frontend.resource_ids,
        Some(vec!["/subscriptions/x".to_string()])
    );
    assert_eq!(
        o.rp_frontend.api_version.as_deref(),
        Some("2026-09-01-preview")
    );
    assert_eq!(
        o.clusters_service.api,
        Some(ClustersServiceApi::ClustersMgmtV1)
    );
    assert_eq!(o.clusters_service.page_size, Some(500));
    assert_eq!(
        o.maestro.base_url.as_ref().map(|u| u.as_str()),
        Some("http://maestro:8000/")
    );
    assert_eq!(o.maestro.fast_poll_interval, Some(Duration::from_secs(5)));
    assert_eq!(o.maestro.insecure_skip_tls_verify, Some(true));
    assert_eq!(o.rp_frontend.insecure_skip_tls_verify, Some(false));
    assert_eq!(o.clusters_service.insecure_skip_tls_verify, None);
    assert_eq!(
        o.maestro.bearer_token_file,
        Some(PathBuf::from("/run/token"))
    );
}

#[test]
fn bad_flag_values_are_rejected_by_the_parser() {
    for argv in [
        &["hcp-flow", "serve", "--maestro-timeout=10"][..],
        &["hcp-flow", "serve", "--maestro-base-url=not a url"],
        &[
            "hcp-flow",
            "serve",
            "--slo-terminal-hops=hosted_cluster,hostedcluster",
        ],
        &["hcp-flow", "serve", "--clusters-service-api=v2"],
        &["hcp-flow", "serve", "--maestro-page-size=-1"],
        &["hcp-flow", "serve", "--log-format=xml"],
        &[
            "hcp-flow",
            "serve",
            "--maestro-insecure-skip-tls-verify=maybe",
        ],
    ] {
        let err = parse_error(argv);
        assert!(
            matches!(
                err.kind(),
                ErrorKind::ValueValidation | ErrorKind::InvalidValue
            ),
            "{argv:?}: {err}"
        );
    }
    let err = parse_error(&["hcp-flow", "serve", "--maestro-timeout=10"]);
    assert!(err.to_string().contains("--maestro-timeout"), "{err}");
}

#[test]
fn no_flag_takes_a_token() {
    // Tokens come from files only: there is no flag to pass one.
    let err = parse_error(&["hcp-flow", "serve", "--maestro-bearer-token=abc"]);
    assert_eq!(err.kind(), ErrorKind::UnknownArgument);
}

#[test]
fn flags_beat_the_file_and_the_file_beats_defaults() {
    let scratch = Scratch::new("flag-over-file");
    let file = scratch.file("c.yaml", FILE);
    let file = file.to_str().unwrap();
    let config = load(&[
        "--config",
        file,
        "--listen=127.0.0.1:9200",
        "--total-shards=8",
        "--maestro-timeout=5s",
        "--maestro-insecure-skip-tls-verify=false",
        "--rp-frontend-subscriptions=FDEA43EA-0230-4A7D-BDEE-F3AFF2183B1D",
    ])
    .unwrap();
    // Flag.
    assert_eq!(config.listen.to_string(), "127.0.0.1:9200");
    assert_eq!(config.shard.total, 8);
    let maestro = config.sources.maestro.as_ref().unwrap();
    assert_eq!(maestro.http.timeout, Duration::from_secs(5));
    assert!(!maestro.http.insecure_skip_tls_verify);
    let rp = config.sources.rp_frontend.as_ref().unwrap();
    assert_eq!(
        rp.subscriptions,
        vec!["FDEA43EA-0230-4A7D-BDEE-F3AFF2183B1D".to_string()],
        "a list flag replaces the file's list"
    );
    // File.
    assert_eq!(config.log_format, LogFormat::Json);
    assert_eq!(config.shard.index, 1);
    assert_eq!(maestro.http.slow_poll_interval, Duration::from_secs(180));
    // Default.
    assert_eq!(maestro.http.fast_poll_interval, Duration::from_secs(15));
    assert_eq!(maestro.http.full_relist_interval, Duration::from_secs(600));
    assert!(config.sources.clusters_service.is_none());
}

#[test]
fn a_base_url_flag_creates_a_source() {
    let config = load(&[
        "--clusters-service-base-url=https://cs:8000",
        "--clusters-service-api=clusters_mgmt/v1",
        "--rp-frontend-base-url=https://rp",
        "--rp-frontend-resource-ids=/subscriptions/6b690bec-0c16-4ecb-8f67-781caf40bba7/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters/c1",
    ])
    .unwrap();
    let cs = config.sources.clusters_service.as_ref().unwrap();
    assert_eq!(cs.http.base_url.as_str(), "https://cs:8000/");
    assert_eq!(cs.api, ClustersServiceApi::ClustersMgmtV1);
    assert_eq!(cs.http.page_size, 100);
    let rp = config.sources.rp_frontend.as_ref().unwrap();
    assert_eq!(rp.api_version, "2024-06-10-preview");
    assert_eq!(rp.resource_ids.len(), 1);
    assert!(config.sources.maestro.is_none());
    assert_eq!(config.terminal_hops(), vec![Hop::RpFrontend]);
}

#[test]
fn source_flags_without_a_base_url_are_an_error() {
    let errors = load(&[
        "--clusters-service-base-url=https://cs",
        "--maestro-timeout=5s",
        "--rp-frontend-subscriptions=6b690bec-0c16-4ecb-8f67-781caf40bba7",
    ])
    .unwrap_err();
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        vec!["sources.maestro.base_url", "sources.rp_frontend.base_url"]
    );
    assert!(
        errors[0].message.contains("--maestro-base-url")
            && errors[0].message.contains("HCPFLOW_MAESTRO_BASE_URL"),
        "{}",
        errors[0].message
    );
}

#[test]
fn flag_values_are_validated_like_file_values() {
    let errors = load(&[
        "--maestro-base-url=ftp://m",
        "--maestro-fast-poll-interval=10m",
        "--shard=4",
        "--total-shards=4",
        "--maestro-bearer-token-file=/nonexistent/token",
    ])
    .unwrap_err();
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        vec![
            "shard.index",
            "sources.maestro.auth.bearer_token_file",
            "sources.maestro.base_url",
            "sources.maestro.fast_poll_interval",
        ]
    );
}

#[test]
fn a_bearer_token_flag_names_a_file() {
    let scratch = Scratch::new("token-flag");
    let token = scratch.file("token", "secret\n");
    let config = load(&[
        "--maestro-base-url=https://m",
        &format!("--maestro-bearer-token-file={}", token.display()),
    ])
    .unwrap();
    assert_eq!(
        config.sources.maestro.unwrap().http.auth,
        Auth::BearerTokenFile(token)
    );
}

#[test]
fn a_broken_file_section_is_not_replaced_by_flags() {
    let scratch = Scratch::new("broken-section");
    let file = scratch.file(
        "c.yaml",
        "sources:\n  maestro:\n    base_url: http://m\n    timeout: 10\n",
    );
    let errors = load(&[
        "--config",
        file.to_str().unwrap(),
        "--maestro-base-url=http://other",
    ])
    .unwrap_err();
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, vec!["sources.maestro.timeout"]);
}

#[test]
fn demo_defaults_and_limits() {
    let cli = Cli::try_parse_from(["hcp-flow", "demo"]).unwrap();
    let Command::Demo(demo) = &cli.command else {
        panic!("{cli:?}")
    };
    assert_eq!(demo.clusters, 50);
    assert_eq!(demo.speed, 60.0);
    assert_eq!(demo.seed, 7);
    assert_eq!(demo.listen.to_string(), "127.0.0.1:9464");
    assert!(!demo.no_faults);
    assert_eq!(cli.command.log_format(), Some(LogFormat::Text));

    let cli = Cli::try_parse_from([
        "hcp-flow",
        "demo",
        "--clusters=5",
        "--speed=0.5",
        "--seed=42",
        "--no-faults",
        "--listen=0.0.0.0:9999",
        "--log-format=json",
    ])
    .unwrap();
    let Command::Demo(demo) = &cli.command else {
        panic!("{cli:?}")
    };
    assert_eq!(
        (demo.clusters, demo.speed, demo.seed, demo.no_faults),
        (5, 0.5, 42, true)
    );
    assert_eq!(demo.log_format, LogFormat::Json);

    for bad in [
        "--speed=0",
        "--speed=-1",
        "--speed=NaN",
        "--speed=inf",
        "--clusters=0",
    ] {
        let err = parse_error(&["hcp-flow", "demo", bad]);
        assert_eq!(err.kind(), ErrorKind::ValueValidation, "{bad}: {err}");
    }
}

#[test]
fn bench_defaults() {
    let cli = Cli::try_parse_from(["hcp-flow", "bench"]).unwrap();
    let Command::Bench(bench) = cli.command else {
        panic!()
    };
    assert_eq!((bench.clusters, bench.scrapes), (10_000, 200));
    assert_eq!(bench.output, None);

    let cli =
        Cli::try_parse_from(["hcp-flow", "bench", "--scrapes=3", "--output=bench.md"]).unwrap();
    let Command::Bench(bench) = cli.command else {
        panic!()
    };
    assert_eq!(bench.scrapes, 3);
    assert_eq!(bench.output, Some(PathBuf::from("bench.md")));
}

/// The end-to-end bench runs both ways of reading Maestro unless told one;
/// the warm restart is a mode of its own, with its downtime.
#[test]
fn bench_maestro_modes_and_the_warm_restart() {
    use hcp_flow::bench::{MaestroChoice, MaestroMode};
    let bench = |args: &[&str]| {
        let cli = Cli::try_parse_from([&["hcp-flow", "bench"], args].concat()).unwrap();
        let Command::Bench(bench) = cli.command else {
            panic!()
        };
        bench
    };
    let defaults = bench(&[]);
    assert_eq!(defaults.maestro, MaestroChoice::Both);
    assert_eq!(
        defaults.maestro.modes(),
        [MaestroMode::Rest, MaestroMode::Stream]
    );
    assert!(!defaults.warm_restart);
    assert_eq!(defaults.downtime, Duration::from_secs(60));
    assert_eq!(
        bench(&["--maestro", "stream"]).maestro.modes(),
        [MaestroMode::Stream]
    );
    assert_eq!(
        bench(&["--maestro=rest"]).maestro.modes(),
        [MaestroMode::Rest]
    );
    let warm = bench(&["--warm-restart", "--downtime", "10s", "--shards", "2"]);
    assert!(warm.warm_restart);
    assert_eq!((warm.downtime, warm.shards), (Duration::from_secs(10), 2));

    let err = parse_error(&["hcp-flow", "bench", "--maestro", "grpc"]);
    assert_eq!(err.kind(), ErrorKind::InvalidValue, "{err}");
    for conflicting in [
        &["--warm-restart", "--kube"][..],
        &["--warm-restart", "--soak", "1m"],
        &["--warm-restart", "--maestro", "rest"],
        &["--warm-restart", "--maestro-watch", "1m"],
        &["--kube", "--maestro", "stream"],
        &["--soak", "1m", "--maestro", "rest"],
    ] {
        let err = parse_error(&[&["hcp-flow", "bench"], conflicting].concat());
        assert_eq!(
            err.kind(),
            ErrorKind::ArgumentConflict,
            "{conflicting:?}: {err}"
        );
    }
    let err = parse_error(&["hcp-flow", "bench", "--downtime", "10s"]);
    assert_eq!(err.kind(), ErrorKind::MissingRequiredArgument, "{err}");
}

#[test]
fn check_config_prints_a_summary_or_one_line_per_error() {
    let scratch = Scratch::new("check");
    let good = scratch.file("good.yaml", FILE);
    let cli = Cli::try_parse_from(["hcp-flow", "check-config", good.to_str().unwrap()]).unwrap();
    let Command::CheckConfig(check) = cli.command else {
        panic!()
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert!(check.run(&mut out, &mut err).unwrap());
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.starts_with(&format!("{}: OK\n", good.display())),
        "{out}"
    );
    assert!(
        out.contains("source maestro: http://maestro:8000/"),
        "{out}"
    );
    assert!(out.contains("TLS verification OFF"), "{out}");
    assert!(err.is_empty());

    let bad = scratch.file(
        "bad.yaml",
        "shard: {index: 9}\nsources:\n  maestro:\n    base_url: http://m\n    fast_poll_interval: 1h\n    tiemout: 3s\n",
    );
    let cli = Cli::try_parse_from(["hcp-flow", "check-config", bad.to_str().unwrap()]).unwrap();
    let Command::CheckConfig(check) = cli.command else {
        panic!()
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert!(!check.run(&mut out, &mut err).unwrap());
    assert!(out.is_empty());
    let err = String::from_utf8(err).unwrap();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(lines[0].starts_with("shard.index: "), "{err}");
    assert!(
        lines[1].starts_with("sources.maestro.tiemout: unknown field"),
        "{err}"
    );
}

/// The environment layer is clap's own (`Arg::env`), which reads the process
/// environment. Variables are never set in this process (that is unsafe with
/// parallel tests); the test binary runs itself as a child with them set.
#[test]
fn environment_sits_between_flags_and_file() {
    let scratch = Scratch::new("env");
    let file = scratch.file("c.yaml", FILE);
    let vars = [
        ("HCPFLOW_CONFIG", file.as_os_str()),
        ("HCPFLOW_LISTEN", "127.0.0.1:9300".as_ref()),
        ("HCPFLOW_MAESTRO_TIMEOUT", "3s".as_ref()),
        ("HCPFLOW_MAESTRO_PAGE_SIZE", "50".as_ref()),
        ("HCPFLOW_MAESTRO_INSECURE_SKIP_TLS_VERIFY", "false".as_ref()),
        (
            "HCPFLOW_SLO_TERMINAL_HOPS",
            "hosted_cluster,node_pool".as_ref(),
        ),
        (
            "HCPFLOW_RP_FRONTEND_SUBSCRIPTIONS",
            "FDEA43EA-0230-4A7D-BDEE-F3AFF2183B1D,6b690bec-0c16-4ecb-8f67-781caf40bba7".as_ref(),
        ),
        (
            "HCPFLOW_CLUSTERS_SERVICE_BASE_URL",
            "https://cs:8000".as_ref(),
        ),
        ("HCPFLOW_CLUSTERS_SERVICE_API", "clusters_mgmt/v1".as_ref()),
        ("HCPFLOW_STATE_DIR", "/var/lib/from-env".as_ref()),
    ];
    child::run_alone("config_cli::env_child_parses_variables", &vars);
}

#[test]
#[ignore = "run as a child process by environment_sits_between_flags_and_file"]
fn env_child_parses_variables() {
    if !child::is_child() {
        eprintln!("not a child of environment_sits_between_flags_and_file; nothing to check");
        return;
    }
    // The flag beats its variable; the variables beat the file.
    let config = load(&["--maestro-page-size=75"]).unwrap();
    assert_eq!(config.listen.to_string(), "127.0.0.1:9300");
    let maestro = config.sources.maestro.as_ref().unwrap();
    assert_eq!(maestro.http.page_size, 75, "flag over variable");
    assert_eq!(
        maestro.http.timeout,
        Duration::from_secs(3),
        "variable over file"
    );
    assert!(!maestro.http.insecure_skip_tls_verify, "variable over file");
    assert_eq!(
        maestro.http.slow_poll_interval,
        Duration::from_secs(180),
        "file over default"
    );
    assert_eq!(maestro.http.fast_poll_interval, Duration::from_secs(15));
    assert_eq!(
        config.slo.terminal_hops,
        vec![Hop::HostedCluster, Hop::NodePool]
    );
    assert_eq!(
        config
            .sources
            .rp_frontend
            .as_ref()
            .unwrap()
            .subscriptions
            .len(),
        2
    );
    let cs = config.sources.clusters_service.as_ref().unwrap();
    assert_eq!(cs.api, ClustersServiceApi::ClustersMgmtV1);
    assert_eq!(cs.http.base_url.as_str(), "https://cs:8000/");
    // The file's value stays where no variable is set.
    assert_eq!(config.log_format, LogFormat::Json);
    assert_eq!(config.state_dir, Some(PathBuf::from("/var/lib/from-env")));
    let flagged = load(&["--state-dir", "/var/lib/from-flag"]).unwrap();
    assert_eq!(flagged.state_dir, Some(PathBuf::from("/var/lib/from-flag")));
}

#[test]
fn the_state_dir_comes_from_the_file_or_the_flag_and_must_name_a_directory() {
    let scratch = Scratch::new("state-dir");
    let file = scratch.file("c.yaml", &format!("{FILE}state_dir: /var/lib/hcp-flow\n"));
    let file = file.to_str().unwrap();
    let config = load(&["--config", file]).unwrap();
    assert_eq!(config.state_dir, Some(PathBuf::from("/var/lib/hcp-flow")));
    assert!(config.summary().contains("state_dir: /var/lib/hcp-flow"));
    let config = load(&["--config", file, "--state-dir", "/data"]).unwrap();
    assert_eq!(
        config.state_dir,
        Some(PathBuf::from("/data")),
        "flag over file"
    );
    let unset = scratch.file("u.yaml", FILE);
    let config = load(&["--config", unset.to_str().unwrap()]).unwrap();
    assert_eq!(config.state_dir, None);
    assert!(config.summary().contains("state_dir: none"));

    // A file where the directory should be, or an empty path, is refused
    // with its key; a directory that does not exist yet is fine (serve
    // creates it).
    let plain = scratch.file("plain", "x");
    let errors = load(&["--config", file, "--state-dir", plain.to_str().unwrap()]).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].path, "state_dir");
    assert!(
        errors[0].message.contains("not a directory"),
        "{}",
        errors[0].message
    );
    let empty = scratch.file("e.yaml", &format!("{FILE}state_dir: \"\"\n"));
    let errors = load(&["--config", empty.to_str().unwrap()]).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].path, "state_dir");
    assert!(
        errors[0].message.contains("must name"),
        "{}",
        errors[0].message
    );
    // The command line refuses an empty path itself.
    let _ = parse_error(&["hcp-flow", "serve", "--state-dir", ""]);
    let errors = Config::from_yaml_str("state_dir: [a]\n", "t").unwrap_err();
    assert_eq!(errors[0].path, "state_dir", "{errors:?}");
}

#[test]
fn hop_budgets_come_from_the_file_then_the_flag_one_hop_at_a_time() {
    let scratch = Scratch::new("hop-budgets");
    let file = scratch.file(
        "c.yaml",
        "slo:\n  hop_budgets:\n    hosted_cluster: 5m\n    node_pool: 40m\n",
    );
    let file = file.to_str().unwrap();
    let config = load(&[
        "--config",
        file,
        "--maestro-base-url=http://maestro:8000",
        "--slo-hop-budgets=node_pool=1h,manifestwork=2m",
    ])
    .unwrap();
    let budgets = config.slo.hop_budgets;
    assert_eq!(budgets.hosted_cluster, Duration::from_secs(300), "file");
    assert_eq!(
        budgets.node_pool,
        Duration::from_secs(3600),
        "flag over file"
    );
    assert_eq!(budgets.manifestwork, Duration::from_secs(120), "flag");
    assert_eq!(budgets.maestro_bundle, Duration::from_secs(600), "default");

    for bad in [
        "--slo-hop-budgets=hostedcluster=5m",
        "--slo-hop-budgets=hosted_cluster",
        "--slo-hop-budgets=hosted_cluster=0s",
    ] {
        parse_error(&["hcp-flow", "serve", bad]);
    }
    let unknown = scratch.file("u.yaml", "slo:\n  hop_budgets:\n    hostedcluster: 5m\n");
    let errors = load(&["--config", unknown.to_str().unwrap()]).unwrap_err();
    assert!(
        errors.iter().any(|e| e.to_string().contains("slo")),
        "{errors:?}"
    );
}
