//! Checks the alerting bundle: Prometheus rules (`alerts/`), their promtool
//! unit tests (`alerts/tests/`), the Alertmanager configuration
//! (`alertmanager/`), the runbooks (`docs/runbooks.md`) and the Grafana
//! dashboards (`dashboards/`).
//!
//! The real tools are required, not skipped: a bundle that was never loaded by
//! promtool and amtool is not known to work. Debian's `prometheus` and
//! `prometheus-alertmanager` packages provide them (`.ci/run` installs them).

// Everything unwrapped here is the repository's own files: a panic is the
// test failing with the path in the message.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use serde_json::Value;

const RUNBOOK_PREFIX: &str = "https://github.com/hcp-flow/hcp-flow/blob/main/docs/runbooks.md#";
const SEVERITIES: [&str; 3] = ["critical", "warning", "info"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Files directly in `dir` whose name ends with `.{ext}`, sorted.
fn files(dir: &str, ext: &str) -> Vec<PathBuf> {
    let dir = repo().join(dir);
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == ext))
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no *.{ext} files in {}", dir.display());
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Runs a tool from the repository root; panics with its output if it fails,
/// and with install instructions if it is missing.
fn run(tool: &str, args: &[&str]) -> String {
    let output = Command::new(tool)
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                panic!(
                    "`{tool}` is not installed: install Debian prometheus / \
                     prometheus-alertmanager (apt-get install -y prometheus \
                     prometheus-alertmanager); .ci/run does"
                )
            }
            panic!("cannot run `{tool}`: {e}")
        });
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "`{tool} {}` failed ({}):\n{stdout}\n{stderr}",
        args.join(" "),
        output.status
    );
    stdout
}

fn rel(path: &Path) -> String {
    path.strip_prefix(repo())
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

// ---------------------------------------------------------------------------
// Rule files

#[derive(Debug, Deserialize)]
struct RuleFile {
    groups: Vec<RuleGroup>,
}

#[derive(Debug, Deserialize)]
struct RuleGroup {
    name: String,
    rules: Vec<Rule>,
}

#[derive(Debug, Deserialize)]
struct Rule {
    alert: Option<String>,
    record: Option<String>,
    expr: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

/// (file, group, rule) for every rule of every file in `alerts/`.
fn rules() -> Vec<(PathBuf, String, Rule)> {
    let mut out = Vec::new();
    for path in files("alerts", "yaml") {
        let file: RuleFile = serde_saphyr::from_str(&read(&path))
            .unwrap_or_else(|e| panic!("{} is not a rule file: {e}", rel(&path)));
        assert_eq!(
            file.groups.len(),
            1,
            "{}: one group per file (one concern per group)",
            rel(&path)
        );
        for group in file.groups {
            for rule in group.rules {
                out.push((path.clone(), group.name.clone(), rule));
            }
        }
    }
    out
}

#[derive(Debug, Deserialize)]
struct TestFile {
    rule_files: Vec<String>,
    tests: Vec<TestGroup>,
}

#[derive(Debug, Deserialize)]
struct TestGroup {
    #[serde(default)]
    alert_rule_test: Vec<AlertTest>,
}

#[derive(Debug, Deserialize)]
struct AlertTest {
    alertname: String,
    #[serde(default)]
    exp_alerts: Vec<Value>,
}

/// GitHub's anchor for a Markdown heading: lower case, punctuation dropped,
/// spaces to dashes.
fn github_anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn runbook_anchors() -> BTreeSet<String> {
    read(&repo().join("docs/runbooks.md"))
        .lines()
        .filter_map(|line| line.strip_prefix("## "))
        .map(github_anchor)
        .collect()
}

#[test]
fn promtool_checks_every_rule_file() {
    let paths: Vec<String> = files("alerts", "yaml").iter().map(|p| rel(p)).collect();
    let mut args = vec!["check", "rules"];
    args.extend(paths.iter().map(String::as_str));
    let out = run("promtool", &args);
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn promtool_unit_tests_pass() {
    let paths: Vec<String> = files("alerts/tests", "yaml")
        .iter()
        .map(|p| rel(p))
        .collect();
    let mut args = vec!["test", "rules"];
    args.extend(paths.iter().map(String::as_str));
    run("promtool", &args);
}

#[test]
fn every_alert_is_named_labelled_and_annotated() {
    let anchors = runbook_anchors();
    let mut alerts = 0;
    for (path, group, rule) in rules() {
        let file = rel(&path);
        for key in rule.labels.keys() {
            assert!(
                key != "cluster" && key != "_id",
                "{file}/{group}: label `{key}` is rewritten by ACM's collector"
            );
        }
        if let Some(record) = &rule.record {
            assert!(
                record.contains(':'),
                "{file}: recording rule {record} must be level:metric:operation"
            );
            continue;
        }
        let Some(name) = &rule.alert else {
            panic!("{file}/{group}: a rule that is neither alert nor record");
        };
        alerts += 1;
        assert!(
            name.starts_with("HCP") && name.chars().all(|c| c.is_ascii_alphanumeric()),
            "{file}: {name} is not an HCP-prefixed CamelCase name"
        );
        let severity = rule.labels.get("severity").map(String::as_str);
        assert!(
            severity.is_some_and(|s| SEVERITIES.contains(&s)),
            "{file}: {name} has severity {severity:?}"
        );
        let summary = rule.annotations.get("summary").map(String::as_str);
        assert!(
            summary.is_some_and(|s| !s.trim().is_empty() && !s.contains("{{")),
            "{file}: {name} needs a static summary, has {summary:?}"
        );
        let description = rule
            .annotations
            .get("description")
            .unwrap_or_else(|| panic!("{file}: {name} has no description"));
        // Per-cluster alerts join the identity record: their description must
        // say which cluster (id and name) and for how long.
        if rule.expr.contains("hcpflow:cluster_identity:info") {
            for needle in ["$labels.cluster_id", "$labels.name", "humanizeDuration"] {
                assert!(
                    description.contains(needle),
                    "{file}: {name} description lacks {needle}"
                );
            }
        }
        let url = rule
            .annotations
            .get("runbook_url")
            .unwrap_or_else(|| panic!("{file}: {name} has no runbook_url"));
        let anchor = url.strip_prefix(RUNBOOK_PREFIX).unwrap_or_else(|| {
            panic!("{file}: {name} runbook_url {url} is not in docs/runbooks.md")
        });
        assert_eq!(anchor, name.to_lowercase(), "{file}: {name} runbook anchor");
        assert!(
            anchors.contains(anchor),
            "{file}: {name}: docs/runbooks.md has no `## {name}` section"
        );
    }
    assert!(alerts > 0, "no alerts found in alerts/");
}

#[test]
fn every_alert_has_promtool_tests_before_and_at_its_threshold() {
    let rule_files: BTreeSet<String> = files("alerts", "yaml")
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let mut firing: BTreeSet<String> = BTreeSet::new();
    let mut quiet: BTreeSet<String> = BTreeSet::new();
    let mut tested_files: BTreeSet<String> = BTreeSet::new();
    for path in files("alerts/tests", "yaml") {
        let test: TestFile = serde_saphyr::from_str(&read(&path))
            .unwrap_or_else(|e| panic!("{} is not a promtool test file: {e}", rel(&path)));
        tested_files.insert(path.file_name().unwrap().to_string_lossy().into_owned());
        for file in &test.rule_files {
            let name = Path::new(file).file_name().unwrap().to_string_lossy();
            assert!(
                rule_files.contains(name.as_ref()),
                "{} loads {file}, which is not in alerts/",
                rel(&path)
            );
        }
        for case in test.tests.iter().flat_map(|t| &t.alert_rule_test) {
            if case.exp_alerts.is_empty() {
                quiet.insert(case.alertname.clone());
            } else {
                firing.insert(case.alertname.clone());
            }
        }
    }
    assert_eq!(
        rule_files, tested_files,
        "each rule file (one group) needs a test file of the same name in alerts/tests/"
    );
    for (path, _, rule) in rules() {
        let Some(name) = rule.alert else { continue };
        assert!(
            firing.contains(&name),
            "{}: no promtool case shows {name} firing",
            rel(&path)
        );
        assert!(
            quiet.contains(&name),
            "{}: no promtool case shows {name} not firing before its threshold",
            rel(&path)
        );
    }
}

// ---------------------------------------------------------------------------
// Alertmanager

#[test]
fn amtool_checks_the_alertmanager_config() {
    let out = run("amtool", &["check-config", "alertmanager/alertmanager.yml"]);
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn alertmanager_routes_each_severity_to_its_receiver() {
    // (labels of an alert, the receivers it must reach)
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "alertname=HCPOperationLatencyBudgetBurn",
                "severity=critical",
                "slo=latency",
                "operation=delete",
            ],
            "hcp-flow-page",
        ),
        (
            &[
                "alertname=HCPHostedClusterUnavailable",
                "severity=critical",
                "cluster_id=c1",
                "hop=hosted_cluster",
            ],
            "hcp-flow-page",
        ),
        (
            &["alertname=HCPExporterAbsent", "severity=critical"],
            "hcp-flow-page",
        ),
        (
            &[
                "alertname=HCPOperationStuckAtHop",
                "severity=warning",
                "cluster_id=c1",
                "operation=delete",
                "hop=maestro_bundle",
            ],
            "hcp-flow-ticket",
        ),
        (
            &[
                "alertname=HCPOperationSuccessBudgetBurn",
                "severity=warning",
                "slo=success",
                "operation=create",
            ],
            "hcp-flow-ticket",
        ),
        (
            &[
                "alertname=HCPSourceDown",
                "severity=warning",
                "source=kube/mc-1",
            ],
            "hcp-flow-ticket",
        ),
        (
            &[
                "alertname=HCPUnknownUpstreamValues",
                "severity=info",
                "source=maestro",
            ],
            "hcp-flow-quiet",
        ),
        // An alert without a known severity still reaches people.
        (&["alertname=SomethingElse"], "hcp-flow-ticket"),
    ];
    for (labels, receiver) in cases {
        let verify = format!("--verify.receivers={receiver}");
        let mut args = vec![
            "config",
            "routes",
            "test",
            "--config.file=alertmanager/alertmanager.yml",
            verify.as_str(),
        ];
        args.extend_from_slice(labels);
        let out = run("amtool", &args);
        assert_eq!(out.trim(), *receiver, "route for {labels:?}");
    }
}

#[test]
fn alertmanager_inhibits_what_a_down_source_feeds() {
    let config: Value =
        serde_saphyr::from_str(&read(&repo().join("alertmanager/alertmanager.yml")))
            .unwrap_or_else(|e| panic!("alertmanager.yml: {e}"));
    let rules = config["inhibit_rules"].as_array().expect("inhibit_rules");
    let text = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|m| m.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let has = |source: &str, target: &str| {
        rules.iter().any(|r| {
            text(&r["source_matchers"])
                .iter()
                .any(|m| m.contains(source))
                && text(&r["target_matchers"])
                    .iter()
                    .any(|m| m.contains(target))
        })
    };
    assert!(
        has("HCPExporterAbsent", "HCP.+"),
        "exporter absent inhibits all"
    );
    // A health alert never fires on a cluster being deleted, and a stuck
    // deletion must never be held back by one.
    assert!(
        rules.iter().any(|r| {
            let targets = text(&r["target_matchers"]);
            targets.iter().any(|m| m.contains("HCPOperationStuckAtHop"))
                && targets.iter().any(|m| m == "operation=\"create\"")
        }),
        "the specific hop alerts must inhibit HCPOperationStuckAtHop of creations only"
    );
    for (source, target) in [
        ("source=\"rp_frontend\"", "hop=\"rp_frontend\""),
        ("source=\"clusters_service\"", "hop=\"clusters_service\""),
        ("source=\"maestro\"", "hop=\"maestro_bundle\""),
        ("source=\"maestro\"", "via=\"maestro\""),
        ("source=~\"kube/.+\"", "via=\"direct\""),
    ] {
        assert!(
            has(source, target),
            "no inhibition from {source} to {target}"
        );
    }
}

#[test]
fn alertmanager_templates_name_cluster_hop_and_runbook() {
    for template in ["hcpflow.slack.text", "hcpflow.telegram.message"] {
        let text = format!("--template.text={{{{ template \"{template}\" . }}}}");
        let out = run(
            "amtool",
            &[
                "template",
                "render",
                "--template.glob=alertmanager/templates/*.tmpl",
                text.as_str(),
                "--template.data=alertmanager/testdata/stuck-alert.json",
            ],
        );
        for needle in [
            "alpha (2jkq1a7d9r0s8t6u5v4w3x2y1z0abcde)",
            "maestro_bundle",
            "2025-06-01 10:20 UTC",
            "docs/runbooks.md#hcpoperationstuckathop",
        ] {
            assert!(out.contains(needle), "{template} lacks {needle}:\n{out}");
        }
    }
}

// ---------------------------------------------------------------------------
// Dashboards

fn panels(list: &Value, out: &mut Vec<Value>) {
    for panel in list.as_array().into_iter().flatten() {
        out.push(panel.clone());
        panels(&panel["panels"], out);
    }
}

#[test]
fn dashboards_have_datasource_uid_units_and_rate_intervals() {
    let mut uids = BTreeSet::new();
    for path in files("dashboards", "json") {
        let file = rel(&path);
        let dashboard: Value =
            serde_json::from_str(&read(&path)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let uid = dashboard["uid"].as_str().unwrap_or_default();
        assert!(!uid.is_empty(), "{file}: no uid");
        assert!(uids.insert(uid.to_owned()), "{file}: uid {uid} used twice");
        assert!(
            dashboard["schemaVersion"].as_u64().is_some_and(|v| v >= 36),
            "{file}: schemaVersion below 36"
        );
        let variables = dashboard["templating"]["list"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            variables.iter().any(|v| v["name"] == "datasource"
                && v["type"] == "datasource"
                && v["query"] == "prometheus"),
            "{file}: no `datasource` variable of type prometheus"
        );
        let mut all = Vec::new();
        panels(&dashboard["panels"], &mut all);
        assert!(!all.is_empty(), "{file}: no panels");
        for panel in all.iter().filter(|p| p["type"] != "row") {
            let title = panel["title"].as_str().unwrap_or("(untitled)");
            let unit = panel["fieldConfig"]["defaults"]["unit"]
                .as_str()
                .unwrap_or_default();
            assert!(!unit.is_empty(), "{file}: panel {title:?} has no unit");
            assert_eq!(
                panel["datasource"]["uid"], "${datasource}",
                "{file}: panel {title:?} does not use the datasource variable"
            );
            let targets = panel["targets"].as_array().cloned().unwrap_or_default();
            assert!(!targets.is_empty(), "{file}: panel {title:?} has no query");
            for target in targets {
                let expr = target["expr"].as_str().unwrap_or_default();
                assert!(
                    !expr.is_empty(),
                    "{file}: panel {title:?} has an empty query"
                );
                // rate() always over $__rate_interval; increase() may also
                // cover the dashboard's whole range.
                let rates = expr.matches("rate(").count();
                let increases = expr.matches("increase(").count();
                let rate_intervals = expr.matches("[$__rate_interval]").count();
                let ranges = expr.matches("[$__range]").count();
                assert!(
                    rates <= rate_intervals && rates + increases <= rate_intervals + ranges,
                    "{file}: panel {title:?}: rate( without $__rate_interval in {expr}"
                );
            }
        }
    }
}

#[test]
fn fleet_overview_links_to_the_cluster_drill_down() {
    let overview = read(&repo().join("dashboards/hcp-flow-fleet-overview.json"));
    let cluster: Value =
        serde_json::from_str(&read(&repo().join("dashboards/hcp-flow-cluster.json"))).unwrap();
    let uid = cluster["uid"].as_str().unwrap();
    assert!(
        overview.contains(&format!("/d/{uid}/")) && overview.contains("var-cluster_id="),
        "the fleet overview must link to /d/{uid}/ with var-cluster_id"
    );
    let variables = cluster["templating"]["list"].as_array().unwrap();
    assert!(
        variables.iter().any(|v| v["name"] == "cluster_id"
            && v["definition"]
                .as_str()
                .is_some_and(|d| d.contains("label_values(hcpflow_cluster_info, cluster_id)"))),
        "the cluster dashboard needs a cluster_id variable from hcpflow_cluster_info"
    );
}
