//! Management clusters in the configuration: file, flags, validation with
//! field paths, derived hops, and the docs/example covering every key.

use std::path::{Path, PathBuf};

use clap::Parser;
use hcp_flow::cli::{Cli, Command};
use hcp_flow::config::{Config, FieldError, Overrides};
use hcp_flow::model::Hop;
use hcp_flow::sim::kube::write_kubeconfig;
use hcp_flow::sources::kube::{KubeMode, KubeSourceConfig};

fn dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "hcp-flow-kube-config-{}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A kubeconfig with contexts `mgmt-1` and `mgmt-2` (current: `mgmt-1`).
fn kubeconfig(dir: &Path) -> PathBuf {
    let path = dir.join("kubeconfig");
    write_kubeconfig(
        &path,
        &[
            ("mgmt-1", "http://127.0.0.1:1"),
            ("mgmt-2", "http://127.0.0.1:2"),
        ],
    )
    .unwrap();
    path
}

fn load_yaml(dir: &Path, yaml: &str, overrides: &Overrides) -> Result<Config, Vec<FieldError>> {
    let path = dir.join("hcp-flow.yaml");
    std::fs::write(&path, yaml).unwrap();
    Config::load(Some(&path), overrides).map_err(|e| e.into_field_errors())
}

fn overrides(args: &[&str]) -> Overrides {
    let mut argv = vec!["hcp-flow", "serve"];
    argv.extend_from_slice(args);
    match Cli::try_parse_from(argv).unwrap().command {
        Command::Serve(s) => Overrides::from(&s.overrides),
        other => panic!("not serve: {other:?}"),
    }
}

fn paths(errors: &[FieldError]) -> Vec<&str> {
    errors.iter().map(|e| e.path.as_str()).collect()
}

#[test]
fn a_file_lists_management_clusters() {
    let d = dir("file");
    let kc = kubeconfig(&d);
    let yaml = format!(
        "sources:\n  kube:\n    - kubeconfig: {kc}\n      context: mgmt-2\n      environment: prod\n      max_backoff: 5m\n    - mgmt_cluster: hub\n      in_cluster: true\n      mode: self_managed\n",
        kc = kc.display()
    );
    let config = load_yaml(&d, &yaml, &Overrides::default()).unwrap();
    let kube = &config.sources.kube;
    assert_eq!(kube.len(), 2);
    // The context names the management cluster when mgmt_cluster is left out.
    assert_eq!(kube[0].mgmt_cluster, "mgmt-2");
    assert_eq!(kube[0].source_name(), "kube/mgmt-2");
    assert_eq!(kube[0].max_backoff, std::time::Duration::from_secs(300));
    assert_eq!(kube[1].mode, KubeMode::SelfManaged);
    assert!(kube[1].in_cluster);
    // Kube-only: the HostedCluster completes a creation, every management hop is observed.
    assert_eq!(config.terminal_hops(), vec![Hop::HostedCluster]);
    assert_eq!(
        config.observable_hops(),
        vec![
            Hop::Manifestwork,
            Hop::HostedCluster,
            Hop::ControlPlane,
            Hop::ManagedCluster,
            Hop::NodePool
        ]
    );
    assert!(
        config
            .summary()
            .contains("source kube/mgmt-2: context mgmt-2 of")
    );
}

#[test]
fn with_the_rp_and_clusters_service_the_terminal_hops_are_rp_and_hosted_cluster() {
    let d = dir("terminal");
    let o = overrides(&[
        "--rp-frontend-base-url",
        "http://rp:8443",
        "--rp-frontend-subscriptions",
        "6b690bec-0c16-4ecb-8f67-781caf40bba7",
        "--clusters-service-base-url",
        "http://cs:8000",
        "--kube-in-cluster",
        "mgmt-1",
        "--kube-environment",
        "prod",
    ]);
    let config = load_yaml(&d, "", &o).unwrap();
    assert_eq!(
        config.terminal_hops(),
        vec![Hop::RpFrontend, Hop::HostedCluster]
    );
    // Without Clusters Service no CS-keyed timeline can hold an RP hop: the
    // RP completes its own (provisional) timelines instead.
    let o_rp = overrides(&[
        "--rp-frontend-base-url",
        "http://rp:8443",
        "--rp-frontend-subscriptions",
        "6b690bec-0c16-4ecb-8f67-781caf40bba7",
        "--kube-in-cluster",
        "mgmt-1",
        "--kube-environment",
        "prod",
    ]);
    let config = load_yaml(&d, "", &o_rp).unwrap();
    assert_eq!(config.terminal_hops(), vec![Hop::HostedCluster]);
    // A terminal hop only a management cluster sees is accepted.
    let o2 = overrides(&[
        "--kube-in-cluster",
        "m",
        "--kube-environment",
        "prod",
        "--slo-terminal-hops",
        "managed_cluster",
    ]);
    assert!(load_yaml(&d, "", &o2).is_ok());
    let o3 = overrides(&[
        "--maestro-base-url",
        "http://m:8000",
        "--slo-terminal-hops",
        "control_plane",
    ]);
    let errors = load_yaml(&d, "", &o3).unwrap_err();
    assert_eq!(paths(&errors), vec!["slo.terminal_hops[0]"]);
}

#[test]
fn flags_create_one_source_per_context() {
    let d = dir("flags");
    let kc = kubeconfig(&d);
    let kc_arg = kc.display().to_string();
    let o = overrides(&[
        "--kubeconfig",
        &kc_arg,
        "--kube-contexts",
        "mgmt-1,second=mgmt-2",
        "--kube-mode",
        "aro",
        "--kube-environment",
        "int",
    ]);
    // The flags replace the file's list; mode and environment apply to all.
    let yaml = "sources:\n  kube:\n    - mgmt_cluster: from-file\n      in_cluster: true\n      environment: prod\n";
    let config = load_yaml(&d, yaml, &o).unwrap();
    let got: Vec<(&str, Option<&str>, &str)> = config
        .sources
        .kube
        .iter()
        .map(|k| {
            (
                k.mgmt_cluster.as_str(),
                k.context.as_deref(),
                k.environment.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("mgmt-1", Some("mgmt-1"), "int"),
            ("second", Some("mgmt-2"), "int")
        ]
    );
    assert!(
        config
            .sources
            .kube
            .iter()
            .all(|k| k.kubeconfig.as_deref() == Some(kc.as_path()))
    );

    // --kubeconfig alone: its current context.
    let config = load_yaml(
        &d,
        "",
        &overrides(&["--kubeconfig", &kc_arg, "--kube-environment", "int"]),
    )
    .unwrap();
    assert_eq!(config.sources.kube.len(), 1);
    assert_eq!(config.sources.kube[0].mgmt_cluster, "mgmt-1");

    // Mode and environment without any management cluster are an error.
    let errors = load_yaml(
        &d,
        "sources:\n  maestro:\n    base_url: http://m:8000\n",
        &overrides(&["--kube-mode", "self-managed"]),
    )
    .unwrap_err();
    assert_eq!(paths(&errors), vec!["sources.kube"]);
    // The file's list takes mode and environment from the flags.
    let config = load_yaml(&d, yaml, &overrides(&["--kube-mode", "self_managed"])).unwrap();
    assert_eq!(config.sources.kube[0].mode, KubeMode::SelfManaged);
}

#[test]
fn every_kube_error_has_its_field_path() {
    let d = dir("errors");
    let kc = kubeconfig(&d);
    let kc = kc.display();
    let yaml = format!(
        "sources:
  kube:
    - mgmt_cluster: mgmt-1
      kubeconfig: {kc}
      context: nope
      environment: prod
    - mgmt_cluster: mgmt-1
      in_cluster: true
      kubeconfig: {kc}
      environment: prod
    - mgmt_cluster: 'has space'
      in_cluster: true
      environment: prod
      min_backoff: 10s
      max_backoff: 1s
      page_size: 0
      watch: []
      watch_timeout: 0s
      idle_timeout: 500ms
    - mgmt_cluster: no-env
      kubeconfig: /does/not/exist
"
    );
    let errors = load_yaml(&d, &yaml, &Overrides::default()).unwrap_err();
    let got = paths(&errors);
    for want in [
        "sources.kube[0].context",
        "sources.kube[1].mgmt_cluster",
        "sources.kube[1].in_cluster",
        "sources.kube[2].mgmt_cluster",
        "sources.kube[2].min_backoff",
        "sources.kube[2].page_size",
        "sources.kube[2].watch",
        "sources.kube[2].watch_timeout",
        "sources.kube[2].idle_timeout",
        "sources.kube[3].kubeconfig",
        "sources.kube[3].environment",
    ] {
        assert!(got.contains(&want), "no error at {want}: {errors:#?}");
    }
    let context = errors
        .iter()
        .find(|e| e.path == "sources.kube[0].context")
        .unwrap();
    assert!(context.message.contains("mgmt-1, mgmt-2"), "{context}");

    // A key of the wrong type or misspelt: its index and key, and no
    // misleading "no source configured".
    let errors = load_yaml(&d, "sources:\n  kube:\n    - mgmt_cluster: a\n      in_cluster: true\n      environment: prod\n    - mgmt_cluster: b\n      page_size: many\n", &Overrides::default()).unwrap_err();
    assert_eq!(paths(&errors), vec!["sources.kube[1].page_size"]);
    let errors = load_yaml(
        &d,
        "sources:\n  kube:\n    mgmt_cluster: a\n",
        &Overrides::default(),
    )
    .unwrap_err();
    assert_eq!(paths(&errors), vec!["sources.kube"]);
}

#[test]
fn check_config_reports_kube_errors() {
    let d = dir("check");
    let path = d.join("bad.yaml");
    std::fs::write(
        &path,
        "sources:\n  kube:\n    - mgmt_cluster: m\n      in_cluster: true\n",
    )
    .unwrap();
    let args = hcp_flow::cli::CheckConfigArgs { file: path };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert!(!args.run(&mut out, &mut err).unwrap());
    let err = String::from_utf8(err).unwrap();
    assert!(
        err.starts_with("sources.kube[0].environment: required in aro mode"),
        "{err}"
    );
}

#[test]
fn every_kube_key_is_documented_and_in_the_example() {
    let doc = std::fs::read_to_string("docs/configuration.md").unwrap();
    let example = std::fs::read_to_string("examples/hcp-flow.yaml").unwrap();
    let mut cfg = KubeSourceConfig::new("m", KubeMode::Aro);
    cfg.kubeconfig = Some(PathBuf::from("/k"));
    cfg.context = Some("c".into());
    cfg.watch = Some(vec![]);
    let value = serde_json::to_value(&cfg).unwrap();
    let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
    // The degraded budget and its re-check interval moved to slo.hop_budgets.
    assert_eq!(keys.len(), 16, "{keys:?}");
    for key in keys {
        assert!(
            doc.contains(&format!("`sources.kube[].{key}`")),
            "docs/configuration.md lacks sources.kube[].{key}"
        );
        assert!(
            example.contains(&format!("{key}:")),
            "the example lacks {key}"
        );
    }
    // The example checks cleanly, with its two management clusters.
    let config = hcp_flow::config::check_config(Path::new("examples/hcp-flow.yaml")).unwrap();
    assert_eq!(config.sources.kube.len(), 2);
    assert_eq!(
        config.sources.kube[1].mgmt_cluster,
        "hcp-underlay-westus3-mgmt-2"
    );
}
