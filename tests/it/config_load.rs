//! Loading and validating the configuration file: every error kind, with its
//! key path, and all of them at once.

// A failed unwrap is a failed test, with the value in the message.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hcp_flow::config::{
    Auth, ClustersServiceApi, Config, ConfigError, FieldError, LogFormat, Overrides,
    check_cluster_resource_id, check_config, is_guid, shard_of,
};
use hcp_flow::model::Hop;
use pretty_assertions::assert_eq;

const CA_FIXTURE: &str = "tests/fixtures/config/ca.pem";
const EXAMPLE: &str = "examples/hcp-flow.yaml";

/// A scratch directory of its own for each test (tests run in parallel).
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("hcp-flow-config-{}-{name}", std::process::id()));
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

fn check_yaml(scratch: &Scratch, yaml: &str) -> Result<Config, Vec<FieldError>> {
    check_config(&scratch.file("hcp-flow.yaml", yaml))
}

fn errors_of(scratch: &Scratch, yaml: &str) -> Vec<FieldError> {
    match check_yaml(scratch, yaml) {
        Ok(config) => panic!("expected errors, got a valid config: {config:#?}"),
        Err(errors) => errors,
    }
}

fn paths(errors: &[FieldError]) -> Vec<&str> {
    errors.iter().map(|e| e.path.as_str()).collect()
}

fn find<'a>(errors: &'a [FieldError], path: &str) -> &'a FieldError {
    errors
        .iter()
        .find(|e| e.path == path)
        .unwrap_or_else(|| panic!("no error at {path}; errors: {errors:#?}"))
}

const MINIMAL_CS: &str = "sources:\n  clusters_service:\n    base_url: https://cs.example:8000\n";

#[test]
fn example_file_is_valid_and_complete() {
    let config = check_config(Path::new(EXAMPLE)).unwrap();
    let rp = config.sources.rp_frontend.as_ref().unwrap();
    let cs = config.sources.clusters_service.as_ref().unwrap();
    let maestro = config.sources.maestro.as_ref().unwrap();
    assert_eq!(config.log_format, LogFormat::Json);
    assert_eq!(config.slo.creation_target, Duration::from_secs(20 * 60));
    assert_eq!(rp.api_version, "2024-06-10-preview");
    assert_eq!(rp.subscriptions.len(), 1);
    assert_eq!(rp.resource_ids.len(), 1);
    assert_eq!(cs.api, ClustersServiceApi::AroHcpV1alpha1);
    assert_eq!(cs.http.page_size, 500);
    assert_eq!(maestro.http.timeout, Duration::from_secs(30));
    assert_eq!(maestro.http.slow_poll_interval, Duration::from_secs(180));
    assert_eq!(
        config.terminal_hops(),
        vec![Hop::RpFrontend, Hop::HostedCluster]
    );
}

/// The example's commented-out credential lines are valid too: uncommented
/// and pointed at files that exist, the example still checks.
#[test]
fn example_credential_lines_are_valid_when_uncommented() {
    let scratch = Scratch::new("example-creds");
    let token = scratch.file("token", "not-a-real-token\n");
    let ca = std::fs::canonicalize(CA_FIXTURE).unwrap();
    let text = std::fs::read_to_string(EXAMPLE).unwrap();
    let mut uncommented = 0;
    let rewritten: Vec<String> = text
        .lines()
        .map(|line| {
            let trimmed = line.trim_start();
            let indent = &line[..line.len() - trimmed.len()];
            if let Some(rest) = trimmed.strip_prefix("# auth: {bearer_token_file: ") {
                assert!(rest.ends_with('}'), "{line}");
                uncommented += 1;
                format!("{indent}auth: {{bearer_token_file: {}}}", token.display())
            } else if trimmed.starts_with("# ca_file: ") {
                uncommented += 1;
                format!("{indent}ca_file: {}", ca.display())
            } else {
                line.to_string()
            }
        })
        .collect();
    assert_eq!(uncommented, 4, "two sources show auth and ca_file");
    let config = check_yaml(&scratch, &rewritten.join("\n")).unwrap();
    let cs = config.sources.clusters_service.unwrap();
    assert_eq!(cs.http.auth, Auth::BearerTokenFile(token));
    assert_eq!(cs.http.ca_file, Some(ca));
}

#[test]
fn yaml_numbers_and_booleans_keep_their_types() {
    let scratch = Scratch::new("types");
    let config = check_yaml(
        &scratch,
        "shard: {index: 2, total: 3}\n\
         sources:\n  maestro:\n    base_url: http://maestro:8000\n    page_size: 250\n    \
         insecure_skip_tls_verify: true\n  rp_frontend:\n    base_url: https://rp\n    \
         insecure_skip_tls_verify: false\n    \
         subscriptions: [6b690bec-0c16-4ecb-8f67-781caf40bba7]\n",
    )
    .unwrap();
    assert_eq!(config.shard.index, 2);
    assert_eq!(config.shard.total, 3);
    let maestro = config.sources.maestro.unwrap().http;
    assert_eq!(maestro.page_size, 250);
    assert!(maestro.insecure_skip_tls_verify);
    let rp = config.sources.rp_frontend.unwrap().http;
    assert!(!rp.insecure_skip_tls_verify);
}

#[test]
fn quoted_numbers_and_bare_durations_are_type_errors_with_paths() {
    let scratch = Scratch::new("type-errors");
    let errors = errors_of(
        &scratch,
        "sources:\n  maestro:\n    base_url: http://m\n    page_size: \"100\"\n  \
         clusters_service:\n    base_url: http://cs\n    timeout: 10\n",
    );
    assert_eq!(
        paths(&errors),
        vec![
            "sources.clusters_service.timeout",
            "sources.maestro.page_size"
        ]
    );
    assert!(
        find(&errors, "sources.maestro.page_size")
            .message
            .contains("string")
    );
    assert!(
        find(&errors, "sources.clusters_service.timeout")
            .message
            .contains("duration")
    );
}

#[test]
fn defaults_fill_what_the_file_leaves_out() {
    let scratch = Scratch::new("defaults");
    let config = check_yaml(&scratch, MINIMAL_CS).unwrap();
    assert_eq!(config.listen.to_string(), "0.0.0.0:9464");
    assert_eq!(config.log_format, LogFormat::Text);
    assert_eq!(config.shard.total, 1);
    let cs = config.sources.clusters_service.unwrap();
    assert_eq!(cs.api, ClustersServiceApi::AroHcpV1alpha1);
    assert_eq!(cs.http.auth, Auth::None);
    assert_eq!(cs.http.timeout, Duration::from_secs(10));
    assert_eq!(cs.http.page_size, 100);
    assert_eq!(cs.http.fast_poll_interval, Duration::from_secs(15));
    assert_eq!(cs.http.slow_poll_interval, Duration::from_secs(120));
    assert_eq!(cs.http.full_relist_interval, Duration::from_secs(600));
    assert!(!cs.http.insecure_skip_tls_verify);
    assert_eq!(cs.http.ca_file, None);
}

#[test]
fn null_values_mean_default() {
    let scratch = Scratch::new("nulls");
    let config = check_yaml(
        &scratch,
        "listen: ~\nslo:\nsources:\n  maestro: ~\n  clusters_service:\n    \
         base_url: https://cs\n    ca_file:\n    timeout: ~\n",
    )
    .unwrap();
    assert!(config.sources.maestro.is_none());
    let cs = config.sources.clusters_service.unwrap();
    assert_eq!(cs.http.ca_file, None);
    assert_eq!(cs.http.timeout, Duration::from_secs(10));
}

#[test]
fn clusters_mgmt_api_and_bearer_token_parse() {
    let scratch = Scratch::new("cs-api");
    let token = scratch.file("cs-token", "t0ken\n");
    let config = check_yaml(
        &scratch,
        &format!(
            "sources:\n  clusters_service:\n    base_url: https://cs\n    api: clusters_mgmt/v1\n    \
             auth:\n      bearer_token_file: {}\n",
            token.display()
        ),
    )
    .unwrap();
    let cs = config.sources.clusters_service.unwrap();
    assert_eq!(cs.api, ClustersServiceApi::ClustersMgmtV1);
    assert_eq!(cs.api.path_prefix(), "/api/clusters_mgmt/v1");
    assert_eq!(cs.http.auth, Auth::BearerTokenFile(token));
}

#[test]
fn unknown_keys_are_reported_with_their_path() {
    let scratch = Scratch::new("unknown");
    let errors = errors_of(
        &scratch,
        "listne: 0.0.0.0:1\nslo:\n  creation_targte: 5m\nsources:\n  maestro:\n    \
         base_url: http://m\n    fast_pol_interval: 5s\n  clusters_servce:\n    base_url: http://cs\n",
    );
    assert_eq!(
        paths(&errors),
        vec![
            "listne",
            "slo.creation_targte",
            "sources.clusters_servce",
            "sources.maestro.fast_pol_interval",
        ]
    );
    let misspelt = find(&errors, "sources.maestro.fast_pol_interval");
    assert!(
        misspelt.message.contains("fast_poll_interval"),
        "the message lists the valid keys: {}",
        misspelt.message
    );
    // The misspelt source is not also reported as "no source configured".
    assert!(!paths(&errors).contains(&"sources"));
}

#[test]
fn unknown_enum_values_are_reported_with_their_path() {
    let scratch = Scratch::new("enums");
    let errors = errors_of(
        &scratch,
        "log_format: xml\nslo:\n  terminal_hops: [hosted_cluster, hostedcluster]\n\
         sources:\n  clusters_service:\n    base_url: http://cs\n    api: v2\n",
    );
    assert_eq!(
        paths(&errors),
        vec![
            "log_format",
            "slo.terminal_hops[1]",
            "sources.clusters_service.api",
        ]
    );
}

#[test]
fn bad_url_is_reported_at_base_url() {
    let scratch = Scratch::new("bad-url");
    let errors = errors_of(
        &scratch,
        "sources:\n  maestro:\n    base_url: ftp://maestro:21\n  clusters_service:\n    \
         base_url: not a url\n  rp_frontend:\n    base_url: https://rp/?x=1\n    \
         subscriptions: [6b690bec-0c16-4ecb-8f67-781caf40bba7]\n",
    );
    assert_eq!(
        paths(&errors),
        vec![
            "sources.clusters_service.base_url",
            "sources.maestro.base_url",
            "sources.rp_frontend.base_url",
        ]
    );
    assert!(
        find(&errors, "sources.maestro.base_url")
            .message
            .contains("http or https")
    );
    assert!(
        find(&errors, "sources.rp_frontend.base_url")
            .message
            .contains("query")
    );
}

#[test]
fn bad_duration_is_reported_with_its_path() {
    let scratch = Scratch::new("bad-duration");
    let errors = errors_of(
        &scratch,
        "slo:\n  creation_target: 20 minutes please\nsources:\n  maestro:\n    \
         base_url: http://m\n    slow_poll_interval: 2x\n",
    );
    assert_eq!(
        paths(&errors),
        vec!["slo.creation_target", "sources.maestro.slow_poll_interval"]
    );
}

#[test]
fn zero_durations_and_page_size_out_of_range() {
    let scratch = Scratch::new("zero");
    let errors = errors_of(
        &scratch,
        "slo: {creation_target: 0s}\nsources:\n  maestro:\n    base_url: http://m\n    \
         timeout: 0s\n    page_size: 0\n    fast_poll_interval: 0s\n  clusters_service:\n    \
         base_url: http://cs\n    page_size: 10001\n",
    );
    assert_eq!(
        paths(&errors),
        vec![
            "slo.creation_target",
            "sources.clusters_service.page_size",
            "sources.maestro.fast_poll_interval",
            "sources.maestro.page_size",
            "sources.maestro.timeout",
        ]
    );
}

#[test]
fn poll_intervals_must_be_ordered() {
    let scratch = Scratch::new("intervals");
    let errors = errors_of(
        &scratch,
        "sources:\n  maestro:\n    base_url: http://m\n    fast_poll_interval: 5m\n    \
         slow_poll_interval: 2m\n  clusters_service:\n    base_url: http://cs\n    \
         slow_poll_interval: 20m\n    full_relist_interval: 10m\n",
    );
    assert_eq!(
        paths(&errors),
        vec![
            "sources.clusters_service.slow_poll_interval",
            "sources.maestro.fast_poll_interval",
        ]
    );
    let fast = find(&errors, "sources.maestro.fast_poll_interval");
    assert!(
        fast.message.contains("5m") && fast.message.contains("2m"),
        "{fast}"
    );

    // Equal intervals are fine (a constant poll rate).
    let config = check_yaml(
        &scratch,
        "sources:\n  maestro:\n    base_url: http://m\n    fast_poll_interval: 1m\n    \
         slow_poll_interval: 1m\n    full_relist_interval: 1m\n",
    );
    assert!(config.is_ok(), "{config:?}");
}

#[test]
fn missing_files_are_reported() {
    let scratch = Scratch::new("missing");
    let not_pem = scratch.file("not-a-cert.pem", "hello\n");
    let errors = errors_of(
        &scratch,
        &format!(
            "sources:\n  maestro:\n    base_url: https://m\n    ca_file: /nonexistent/ca.pem\n    \
             auth: {{bearer_token_file: /nonexistent/token}}\n  clusters_service:\n    \
             base_url: https://cs\n    ca_file: {}\n",
            not_pem.display()
        ),
    );
    assert_eq!(
        paths(&errors),
        vec![
            "sources.clusters_service.ca_file",
            "sources.maestro.auth.bearer_token_file",
            "sources.maestro.ca_file",
        ]
    );
    assert!(
        find(&errors, "sources.clusters_service.ca_file")
            .message
            .contains("no PEM certificate")
    );
    assert!(
        find(&errors, "sources.maestro.auth.bearer_token_file")
            .message
            .contains("/nonexistent/token")
    );
}

#[test]
fn a_directory_is_not_a_token_file() {
    let scratch = Scratch::new("dir-token");
    let errors = errors_of(
        &scratch,
        &format!(
            "sources:\n  maestro:\n    base_url: https://m\n    auth: {{bearer_token_file: {}}}\n",
            scratch.0.display()
        ),
    );
    assert!(
        find(&errors, "sources.maestro.auth.bearer_token_file")
            .message
            .contains("directory")
    );
}

#[test]
fn missing_config_file_is_one_error_at_its_path() {
    let path = Path::new("/nonexistent/hcp-flow.yaml");
    let errors = check_config(path).unwrap_err();
    assert_eq!(paths(&errors), vec!["/nonexistent/hcp-flow.yaml"]);
    assert!(errors[0].message.contains("cannot read"));

    let err = Config::load(Some(path), &Overrides::default()).unwrap_err();
    assert!(matches!(err, ConfigError::Read { .. }));
    assert!(
        std::error::Error::source(&err).is_some(),
        "the io error is kept as the source"
    );
}

#[test]
fn yaml_syntax_error_has_line_and_column() {
    let scratch = Scratch::new("syntax");
    let file = scratch.file("hcp-flow.yaml", "sources:\n  maestro: [\n    base_url: x\n");
    let errors = check_config(&file).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(errors[0].path, file.display().to_string());
    assert!(errors[0].message.contains("line"), "{}", errors[0].message);
    assert!(!errors[0].message.contains('\n'));

    let errors = errors_of(&scratch, "listen: 1\nlisten: 2\n");
    assert!(
        errors[0].message.contains("duplicate"),
        "{}",
        errors[0].message
    );
}

#[test]
fn a_document_that_is_not_a_mapping_is_rejected() {
    let scratch = Scratch::new("not-mapping");
    let errors = errors_of(&scratch, "- listen\n- sources\n");
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(errors[0].message.contains("mapping"));
}

#[test]
fn an_empty_file_has_no_source() {
    let scratch = Scratch::new("empty");
    let errors = errors_of(&scratch, "");
    assert_eq!(paths(&errors), vec!["sources"]);
    assert!(errors[0].message.contains("no source configured"));
}

#[test]
fn shard_index_must_be_below_total() {
    let scratch = Scratch::new("shard");
    let errors = errors_of(
        &scratch,
        &format!("shard: {{index: 3, total: 3}}\n{MINIMAL_CS}"),
    );
    assert_eq!(paths(&errors), vec!["shard.index"]);
    assert!(
        errors[0].message.contains("0 to 2"),
        "{}",
        errors[0].message
    );

    let errors = errors_of(
        &scratch,
        &format!("shard: {{index: 0, total: 0}}\n{MINIMAL_CS}"),
    );
    assert_eq!(paths(&errors), vec!["shard.total"]);
}

#[test]
fn rp_frontend_needs_well_formed_subscriptions_or_resource_ids() {
    let scratch = Scratch::new("rp");
    let errors = errors_of(
        &scratch,
        "sources:\n  rp_frontend:\n    base_url: https://rp\n",
    );
    assert_eq!(paths(&errors), vec!["sources.rp_frontend"]);

    let errors = errors_of(
        &scratch,
        "sources:\n  rp_frontend:\n    base_url: https://rp\n    api_version: latest\n    \
         subscriptions: [6b690bec-0c16-4ecb-8f67-781caf40bba7, my-sub]\n    resource_ids:\n      \
         - /subscriptions/6b690bec-0c16-4ecb-8f67-781caf40bba7/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters/ok\n      \
         - /subscriptions/6b690bec-0c16-4ecb-8f67-781caf40bba7/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm\n",
    );
    assert_eq!(
        paths(&errors),
        vec![
            "sources.rp_frontend.api_version",
            "sources.rp_frontend.resource_ids[1]",
            "sources.rp_frontend.subscriptions[1]",
        ]
    );
}

#[test]
fn resource_id_and_guid_shapes() {
    let ok = "/subscriptions/6b690bec-0c16-4ecb-8f67-781caf40bba7/resourceGroups/resourceGroupName/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters/create-with-tags";
    assert_eq!(check_cluster_resource_id(ok), Ok(()));
    // ARM ids are case-insensitive in their fixed segments.
    assert_eq!(check_cluster_resource_id(&ok.to_lowercase()), Ok(()));
    for bad in [
        "",
        "subscriptions/6b690bec-0c16-4ecb-8f67-781caf40bba7",
        "/subscriptions/not-a-guid/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters/c",
        "/subscriptions/6b690bec-0c16-4ecb-8f67-781caf40bba7/resourceGroups//providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters/c",
        "/subscriptions/6b690bec-0c16-4ecb-8f67-781caf40bba7/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters/",
        "/subscriptions/6b690bec-0c16-4ecb-8f67-781caf40bba7/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters/c/nodePools/p",
    ] {
        assert!(check_cluster_resource_id(bad).is_err(), "{bad}");
    }
    assert!(is_guid("FDEA43EA-0230-4A7D-BDEE-F3AFF2183B1D"));
    assert!(!is_guid("FDEA43EA02304A7DBDEEF3AFF2183B1D"));
    assert!(!is_guid("ZDEA43EA-0230-4A7D-BDEE-F3AFF2183B1D"));
}

#[test]
fn no_source_configured() {
    let scratch = Scratch::new("no-source");
    let errors = errors_of(&scratch, "listen: 127.0.0.1:9000\nsources: {}\n");
    assert_eq!(paths(&errors), vec!["sources"]);
}

#[test]
fn terminal_hops_must_be_observable_and_distinct() {
    let scratch = Scratch::new("terminal");
    let errors = errors_of(
        &scratch,
        &format!(
            "slo:\n  terminal_hops: [clusters_service, managed_cluster, clusters_service, hosted_cluster]\n{MINIMAL_CS}"
        ),
    );
    assert_eq!(
        paths(&errors),
        vec![
            "slo.terminal_hops[1]",
            "slo.terminal_hops[2]",
            "slo.terminal_hops[3]",
        ]
    );
    assert!(
        find(&errors, "slo.terminal_hops[2]")
            .message
            .contains("twice")
    );
    assert!(
        find(&errors, "slo.terminal_hops[3]")
            .message
            .contains("no configured source observes hosted_cluster")
    );
}

#[test]
fn several_errors_are_all_reported_at_once() {
    let scratch = Scratch::new("several");
    let errors = errors_of(
        &scratch,
        "shard: {index: 5, total: 2}\nslo: {creation_target: 0s}\nsources:\n  maestro:\n    \
         base_url: http://m\n    bogus: 1\n  clusters_service:\n    base_url: gopher://cs\n    \
         fast_poll_interval: 10m\n    page_size: 0\n    ca_file: /nonexistent/ca.pem\n  \
         rp_frontend:\n    base_url: https://rp\n",
    );
    assert_eq!(
        paths(&errors),
        vec![
            "shard.index",
            "slo.creation_target",
            "sources.clusters_service.base_url",
            "sources.clusters_service.ca_file",
            "sources.clusters_service.fast_poll_interval",
            "sources.clusters_service.page_size",
            "sources.maestro.bogus",
            "sources.rp_frontend",
        ]
    );
    for e in &errors {
        assert!(!e.message.is_empty() && !e.message.contains('\n'), "{e}");
    }
}

#[test]
fn invalid_config_error_lists_every_error() {
    let scratch = Scratch::new("display");
    let file = scratch.file("c.yaml", "shard: {index: 1, total: 1}\n");
    let err = Config::load(Some(&file), &Overrides::default()).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("shard.index: "), "{text}");
    assert!(text.contains("sources: no source configured"), "{text}");
    assert_eq!(err.into_field_errors().len(), 2);
}

#[test]
fn terminal_hops_are_derived_from_sources() {
    let url = url::Url::parse("http://x").unwrap();
    let mut config = Config::default();
    config.sources.clusters_service =
        Some(hcp_flow::config::ClustersServiceConfig::new(url.clone()));
    assert_eq!(config.terminal_hops(), vec![Hop::ClustersService]);

    config.sources.maestro = Some(hcp_flow::config::MaestroConfig::new(url.clone()));
    assert_eq!(config.terminal_hops(), vec![Hop::HostedCluster]);

    config.sources.rp_frontend = Some(hcp_flow::config::RpFrontendConfig::new(url.clone()));
    assert_eq!(
        config.terminal_hops(),
        vec![Hop::RpFrontend, Hop::HostedCluster]
    );

    config.sources.maestro = None;
    assert_eq!(config.terminal_hops(), vec![Hop::RpFrontend]);

    config.slo.terminal_hops = vec![Hop::ClustersService];
    assert_eq!(config.terminal_hops(), vec![Hop::ClustersService]);
}

#[test]
fn shard_of_is_stable_and_spreads_clusters() {
    // Pinned values: changing the hash would silently move clusters between
    // running instances.
    assert_eq!(shard_of("2mhbq0ctd2ocpmp1ka7hgcgf3tlkpjo9", 1), 0);
    // Independently computed: int.from_bytes(sha256(id)[:8], "big") % total.
    assert_eq!(shard_of("abc", 1000), 74);
    assert_eq!(shard_of("", 7), 1);
    assert_eq!(shard_of("cluster-42", 3), 1);
    assert_eq!(shard_of("abc", 0), 0, "a zero total never panics");

    let mut config = Config::default();
    config.shard.total = 4;
    let mut counts = [0u32; 4];
    for i in 0..4000 {
        let id = format!("cluster-{i}");
        let shard = config.shard_of(&id);
        assert_eq!(shard, config.shard_of(&id));
        counts[shard as usize] += 1;
    }
    for count in counts {
        assert!((800..1200).contains(&count), "uneven split: {counts:?}");
    }
    config.shard.index = 2;
    let owned = (0..4000)
        .filter(|i| config.shard.owns(&format!("cluster-{i}")))
        .count();
    assert_eq!(owned as u32, counts[2]);
}

#[test]
fn serialized_config_loads_back_identically() {
    let scratch = Scratch::new("roundtrip");
    let token = scratch.file("token", "x\n");
    let mut config = check_config(Path::new(EXAMPLE)).unwrap();
    config.shard = hcp_flow::config::ShardConfig { index: 1, total: 2 };
    if let Some(cs) = config.sources.clusters_service.as_mut() {
        cs.api = ClustersServiceApi::ClustersMgmtV1;
        cs.http.auth = Auth::BearerTokenFile(token);
        cs.http.ca_file = Some(std::fs::canonicalize(CA_FIXTURE).unwrap());
        cs.http.insecure_skip_tls_verify = true;
    }
    let yaml = serde_saphyr::to_string(&config).unwrap();
    let loaded = check_yaml(&scratch, &yaml).unwrap();
    assert_eq!(loaded, config, "YAML was:\n{yaml}");
}

#[test]
fn summary_names_sources_without_secrets() {
    let scratch = Scratch::new("summary");
    let token = scratch.file("token", "super-secret-token\n");
    let config = check_yaml(
        &scratch,
        &format!(
            "sources:\n  maestro:\n    base_url: https://m\n    insecure_skip_tls_verify: true\n    \
             auth: {{bearer_token_file: {}}}\n",
            token.display()
        ),
    )
    .unwrap();
    let summary = config.summary();
    assert!(summary.contains("source maestro: https://m/"), "{summary}");
    assert!(summary.contains("TLS verification OFF"), "{summary}");
    assert!(
        summary.contains("terminal hops hosted_cluster"),
        "{summary}"
    );
    assert!(!summary.contains("super-secret-token"));
}

#[test]
fn a_broken_source_section_does_not_cascade() {
    let scratch = Scratch::new("cascade");
    let errors = errors_of(
        &scratch,
        "slo:\n  terminal_hops: [hosted_cluster]\nsources:\n  maestro:\n    base_url: http://m\n    \
         timeout: soon\n",
    );
    // Only the real problem: not "no source configured", nor "no source
    // observes hosted_cluster".
    assert_eq!(paths(&errors), vec!["sources.maestro.timeout"]);
}

#[test]
fn the_types_deserialize_directly_with_unknown_keys_rejected() {
    // Code that deserializes the shapes itself (not through check_config)
    // gets the same flat source sections and the same strictness.
    let text = std::fs::read_to_string(EXAMPLE).unwrap();
    let direct: Config = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(direct, check_config(Path::new(EXAMPLE)).unwrap());

    let err = serde_saphyr::from_str::<Config>(
        "sources:\n  maestro:\n    base_url: http://m\n    page_sise: 5\n",
    )
    .unwrap_err();
    assert!(err.to_string().contains("page_sise"), "{err}");
}

#[test]
fn a_base_url_that_already_ends_in_the_api_path_is_rejected_with_the_fix() {
    let scratch = Scratch::new("api-path");
    let errors = errors_of(
        &scratch,
        "sources:\n  maestro:\n    base_url: https://maestro.example/api/maestro/v1/\n  \
         clusters_service:\n    base_url: https://proxy.example/cs/api/clusters_mgmt/v1\n  \
         rp_frontend:\n    base_url: https://rp.example/subscriptions/6b690bec-0c16-4ecb-8f67-781caf40bba7\n    \
         subscriptions: [6b690bec-0c16-4ecb-8f67-781caf40bba7]\n",
    );
    assert_eq!(
        paths(&errors),
        vec![
            "sources.clusters_service.base_url",
            "sources.maestro.base_url",
            "sources.rp_frontend.base_url",
        ]
    );
    let cs = &find(&errors, "sources.clusters_service.base_url").message;
    assert!(cs.contains("`/api/clusters_mgmt/v1`"), "{cs}");
    assert!(
        cs.contains("set base_url to https://proxy.example/cs"),
        "the fix keeps the proxy prefix: {cs}"
    );
    let maestro = &find(&errors, "sources.maestro.base_url").message;
    assert!(
        maestro.contains("set base_url to https://maestro.example/"),
        "{maestro}"
    );
    let rp = &find(&errors, "sources.rp_frontend.base_url").message;
    assert!(rp.contains("set base_url to https://rp.example/"), "{rp}");

    // A path prefix that is not an API path is a routing proxy: accepted.
    let ok = check_yaml(
        &scratch,
        "sources:\n  maestro:\n    base_url: https://proxy.example/maestro/\n",
    );
    assert!(ok.is_ok(), "{ok:?}");
}

#[test]
fn connect_timeout_is_positive_and_within_the_total() {
    let scratch = Scratch::new("connect-timeout");
    let errors = errors_of(
        &scratch,
        "sources:\n  maestro:\n    base_url: http://m\n    connect_timeout: 0s\n  \
         clusters_service:\n    base_url: http://cs\n    timeout: 3s\n    connect_timeout: 4s\n",
    );
    assert_eq!(
        paths(&errors),
        vec![
            "sources.clusters_service.connect_timeout",
            "sources.maestro.connect_timeout",
        ]
    );
    assert!(
        find(&errors, "sources.clusters_service.connect_timeout")
            .message
            .contains("must not be longer than timeout")
    );
}

#[test]
fn an_rp_frontend_page_size_is_refused_because_the_arm_list_takes_none() {
    let scratch = Scratch::new("rp-page-size");
    let errors = errors_of(
        &scratch,
        "sources:\n  rp_frontend:\n    base_url: https://rp.example\n    page_size: 50\n    \
         subscriptions: [6b690bec-0c16-4ecb-8f67-781caf40bba7]\n",
    );
    assert_eq!(paths(&errors), vec!["sources.rp_frontend.page_size"]);
    let message = &find(&errors, "sources.rp_frontend.page_size").message;
    assert!(message.contains("nextLink"), "{message}");
}

#[test]
fn ui_links_must_be_web_urls_with_a_place_for_the_trace_id() {
    let scratch = Scratch::new("ui");
    let sources = "sources:\n  maestro:\n    base_url: http://maestro:8000\n";
    let errors = errors_of(
        &scratch,
        &format!(
            "{sources}ui:\n  trace_url_template: https://jaeger.example/trace/\n  grafana_url: ftp://grafana.example\n"
        ),
    );
    assert_eq!(
        paths(&errors),
        vec!["ui.grafana_url", "ui.trace_url_template"]
    );
    assert!(
        find(&errors, "ui.trace_url_template")
            .message
            .contains("{trace_id}")
    );
    let errors = errors_of(
        &scratch,
        &format!("{sources}ui:\n  trace_url_template: \"javascript:alert('{{trace_id}}')\"\n"),
    );
    assert_eq!(paths(&errors), vec!["ui.trace_url_template"]);

    let config = check_yaml(
        &scratch,
        &format!("{sources}ui:\n  trace_url_template: https://jaeger.example/trace/{{trace_id}}\n"),
    )
    .unwrap();
    assert_eq!(
        config.ui.trace_url_template.as_deref(),
        Some("https://jaeger.example/trace/{trace_id}")
    );
    // A flag beats the file.
    let overrides = Overrides {
        ui_grafana_url: Some(url::Url::parse("https://grafana.example/sub").unwrap()),
        ..Overrides::default()
    };
    let config = Config::load(Some(&scratch.file("ui.yaml", sources)), &overrides).unwrap();
    assert_eq!(
        config.ui.grafana_url.map(|u| u.to_string()).as_deref(),
        Some("https://grafana.example/sub")
    );
}
