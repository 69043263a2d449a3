//! docs/configuration.md, the example and `--help` cannot drift from the code.

// A failed unwrap is a failed test, with the value in the message.

use std::path::PathBuf;
use std::time::Duration;

use clap::CommandFactory;
use hcp_flow::cli::Cli;
use hcp_flow::config::{
    Auth, ClustersServiceConfig, Config, MaestroConfig, MaestroGrpcConfig, RpFrontendConfig,
    defaults,
};
use serde_json::Value;

const DOC: &str = "docs/configuration.md";
const EXAMPLE: &str = "examples/hcp-flow.yaml";

fn doc() -> String {
    std::fs::read_to_string(DOC).unwrap()
}

fn subcommand(name: &str) -> clap::Command {
    Cli::command()
        .find_subcommand(name)
        .unwrap_or_else(|| panic!("no subcommand {name}"))
        .clone()
}

#[test]
fn command_definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn every_serve_flag_and_variable_is_documented() {
    let doc = doc();
    let serve = subcommand("serve");
    let mut checked = 0;
    for arg in serve.get_arguments() {
        let Some(long) = arg.get_long() else {
            continue;
        };
        if long == "help" {
            continue;
        }
        assert!(
            doc.contains(&format!("`--{long}`")),
            "{DOC} does not document --{long}"
        );
        let env = arg
            .get_env()
            .unwrap_or_else(|| panic!("--{long} has no environment variable"))
            .to_string_lossy()
            .into_owned();
        assert_eq!(
            env,
            format!("HCPFLOW_{}", long.to_uppercase().replace('-', "_")),
            "the variable of --{long} is its flag in upper snake case"
        );
        assert!(
            doc.contains(&format!("`{env}`")),
            "{DOC} does not document {env}"
        );
        checked += 1;
    }
    // --config, 9 global settings, 9 per source, 3 RP-only, 1 CS-only, 5
    // for management clusters, 2 for the web UI and 2 for the history.
    assert_eq!(checked, 1 + 9 + 3 * 9 + 3 + 1 + 5 + 2 + 2);
}

#[test]
fn every_flag_of_the_other_commands_is_documented() {
    let doc = doc();
    for name in ["demo", "bench"] {
        for arg in subcommand(name).get_arguments() {
            if let Some(long) = arg.get_long().filter(|l| *l != "help") {
                assert!(
                    doc.contains(&format!("| `{name}` | `--{long}` |")),
                    "{DOC} does not document `{name} --{long}`"
                );
            }
        }
    }
}

#[test]
fn every_flag_explains_itself_in_help() {
    let cli = Cli::command();
    for sub in cli.get_subcommands() {
        assert!(sub.get_about().is_some(), "{} has no about", sub.get_name());
        for arg in sub.get_arguments() {
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(
                help.len() > 15,
                "{} {:?} has no real help text",
                sub.get_name(),
                arg.get_id()
            );
        }
    }
}

/// The per-source help texts name their defaults as literals (clap's
/// `concat!` needs them); they must be the defaults the code applies.
#[test]
fn defaults_named_in_help_are_the_real_ones() {
    let serve = subcommand("serve");
    let help_of = |long: &str| -> String {
        serve
            .get_arguments()
            .find(|a| a.get_long() == Some(long))
            .and_then(|a| a.get_help())
            .map(|h| h.to_string())
            .unwrap_or_else(|| panic!("no help for --{long}"))
    };
    let d = |v: Duration| humantime::format_duration(v).to_string();
    for source in ["rp-frontend", "clusters-service", "maestro"] {
        for (flag, default) in [
            ("timeout", d(defaults::timeout())),
            ("page-size", defaults::page_size().to_string()),
            ("fast-poll-interval", d(defaults::fast_poll())),
            ("slow-poll-interval", d(defaults::slow_poll())),
            ("full-relist-interval", d(defaults::full_relist())),
        ] {
            let help = help_of(&format!("{source}-{flag}"));
            assert!(
                help.contains(&format!("Default: {default}.")),
                "--{source}-{flag}: {help}"
            );
        }
        let help = help_of(&format!("{source}-page-size"));
        assert!(help.contains(&format!("1 to {}", defaults::MAX_PAGE_SIZE)));
    }
    let config = Config::default();
    assert!(help_of("listen").contains(&config.listen.to_string()));
    assert!(help_of("slo-creation-target").contains(&d(config.slo.creation_target)));
    assert!(
        help_of("rp-frontend-api-version").contains(&hcp_flow::config::default_rp_api_version())
    );
}

/// Every key of a fully populated config, as a dotted path.
fn all_keys() -> Vec<String> {
    let url = url::Url::parse("https://x").unwrap();
    let mut config = Config::default();
    let mut rp = RpFrontendConfig::new(url.clone());
    rp.http.ca_file = Some(PathBuf::from("/ca.pem"));
    rp.http.auth = Auth::BearerTokenFile(PathBuf::from("/token"));
    config.sources.rp_frontend = Some(rp);
    config.sources.clusters_service = Some(ClustersServiceConfig::new(url.clone()));
    let mut maestro = MaestroConfig::new(url.clone());
    let mut grpc = MaestroGrpcConfig::new(url, "clusters-service");
    grpc.bearer_token_file = Some(PathBuf::from("/token"));
    grpc.client_cert_file = Some(PathBuf::from("/tls.crt"));
    grpc.client_key_file = Some(PathBuf::from("/tls.key"));
    grpc.ca_file = Some(PathBuf::from("/ca.pem"));
    maestro.grpc = Some(Box::new(grpc));
    config.sources.maestro = Some(maestro);
    let value = serde_json::to_value(&config).unwrap();
    let mut keys = Vec::new();
    walk(&value, String::new(), &mut keys);
    keys
}

fn walk(value: &Value, path: String, keys: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let child = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                walk(v, child, keys);
            }
        }
        _ => keys.push(path),
    }
}

#[test]
fn every_config_key_is_documented_and_in_the_example() {
    let doc = doc();
    let example = std::fs::read_to_string(EXAMPLE).unwrap();
    let keys = all_keys();
    assert!(keys.len() > 30, "{keys:?}");
    for key in &keys {
        let generic = ["rp_frontend", "clusters_service", "maestro"]
            .iter()
            .fold(key.clone(), |k, s| {
                k.replace(&format!("sources.{s}."), "sources.<source>.")
            });
        let generic = match generic.strip_prefix("slo.hop_budgets.") {
            Some(_) => "slo.hop_budgets.<hop>".to_string(),
            None => generic,
        };
        assert!(
            doc.contains(&format!("`{key}`")) || doc.contains(&format!("`{generic}`")),
            "{DOC} does not document `{key}`"
        );
        let leaf = key.rsplit('.').next().unwrap();
        assert!(
            example.contains(&format!("{leaf}:")),
            "{EXAMPLE} does not show `{leaf}`"
        );
    }
}
