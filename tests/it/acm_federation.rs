//! The ACM observability path with real processes: the chart's ACM bundle
//! (rendered by Helm's engine with `charts/hcp-flow/ci/acm-hub-values.yaml`)
//! on a hub that sees only what ACM's metrics collector would ship.
//!
//! - A "management cluster" Prometheus scrapes the in-process demo exporter
//!   and evaluates `alerts/` directly: the reference.
//! - A "hub" Prometheus federates from it the way ACM's metrics-collector
//!   does (stolostron/multicluster-observability-operator: the endpoint
//!   operator turns each allowlist `names` entry into the collector flag
//!   `--match={__name__="NAME"}` and each `matches` entry into
//!   `--match={MATCH}`; the collector GETs `/federate` with those `match[]`,
//!   sets `cluster` and `clusterID` on every series, overriding any value,
//!   and elides `prometheus`, `prometheus_replica` and `managed_cluster`).
//!   It evaluates the rendered `thanos-ruler-custom-rules` /
//!   `custom_rules.yaml`, as the hub's Thanos ruler would.
//!
//! Checked: every series the hub's rules and the ACM dashboards select is
//! in the allowlist (statically, parsed with a PromQL parser). Then, over
//! 100 s of the demo with faults on (60x: creations move through hops,
//! fail, complete and are deleted): every rule evaluates without error on
//! both; the hub fires the reference's per-cluster alerts, label for label,
//! within a few evaluation intervals, and nothing else (it may resolve
//! later, see below); those alerts carry the collector's `cluster` and
//! `clusterID`; the ACM dashboard queries that show data on the management
//! cluster show data on the hub. Every problem is reported in one failure.
//!
//! Like the collector's remote write, which carries no staleness markers,
//! the hub keeps a series that vanished upstream (a hop's previous phase,
//! an old `via`) until the query lookback passes: Prometheus writes no
//! staleness markers for federated samples that keep their timestamps. On a
//! real hub the lookback is 5m, or twice the collection interval when that
//! is longer; here it is 5m. Rules must hold while old and new series of a
//! hop coexist. Not imitated: the collection interval (5m by default, 2s
//! here) and Thanos itself.
//!
//! Needs `prometheus` and helm-python-sdk (`HCPFLOW_HELM_PYTHON`), as the
//! end-to-end and chart tests do.

use crate::common::procs;
use crate::common::promql::collect_names;
use procs::{
    now_secs, query, query_at, query_range, start_prometheus, tempdir, wait_for, wait_ready,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use crate::common::{exporter, helm, world};
use serde_json::{Value, json};

use crate::common::ROOT;
/// The values a hub install uses (docs/acm.md).
const HUB_VALUES: &str = "charts/hcp-flow/ci/acm-hub-values.yaml";
/// What the collector stamps on every series of this management cluster:
/// its ManagedCluster name and its cluster id.
const MGMT_CLUSTER: &str = "mgmt-a";
const MGMT_CLUSTER_ID: &str = "0f3c5a52-7d2e-4b8f-9a61-3c2d1e0f4a5b";
/// Series the rules use that ACM's own default allowlist ships
/// (`metrics_list.yaml` of its `observability-metrics-allowlist`), not the
/// chart's: `up` (HCPExporterTargetDown).
const ACM_DEFAULT_NAMES: [&str; 1] = ["up"];
/// The collector's default `--elide-label`s.
const ELIDED_LABELS: &str = "prometheus|prometheus_replica|managed_cluster";
/// How far behind the reference the hub may be: one scrape of the exporter
/// (1s), one federation (2s), one evaluation (1s), with room for jitter.
const LAG: f64 = 6.0;
/// How often the hub scrapes the management cluster's `/federate` (s).
const FEDERATION_INTERVAL: f64 = 2.0;
/// How long the test watches both (seconds).
const WINDOW: f64 = 100.0;
/// The hub's query lookback (Prometheus' default, as Thanos query's).
const LOOKBACK: f64 = 300.0;

/// What the chart installs on the hub for ACM.
struct AcmBundle {
    /// `custom_rules.yaml` of `thanos-ruler-custom-rules`.
    rules: String,
    /// `metrics_list.yaml` of `observability-metrics-custom-allowlist`.
    allowlist: Value,
    /// (file name, dashboard) of every `grafana-custom-dashboard` ConfigMap.
    dashboards: Vec<(String, Value)>,
}

/// Renders the chart with the hub values through tests/chart/render.py.
fn render_acm_bundle() -> AcmBundle {
    let values = std::fs::read_to_string(Path::new(ROOT).join(HUB_VALUES)).unwrap();
    let result = helm::render(
        "hcp-flow",
        "open-cluster-management-observability",
        vec![json!({"name": "hub", "values_yaml": values})],
    );
    let hub = &result["scenarios"]["hub"];
    assert!(
        hub["error"].is_null(),
        "the hub values do not render: {hub}"
    );
    let mut config_maps = Vec::new();
    for (template, text) in hub["manifests"].as_object().unwrap() {
        // Helm separates the documents of one template with `---` lines.
        let mut docs = vec![String::new()];
        for line in text.as_str().unwrap().lines() {
            if line.trim_end() == "---" {
                docs.push(String::new());
            } else {
                docs.last_mut().unwrap().push_str(&format!("{line}\n"));
            }
        }
        for doc in docs.iter().filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        }) {
            if template.ends_with("NOTES.txt") {
                continue;
            }
            let doc: Value = serde_saphyr::from_str(doc)
                .unwrap_or_else(|e| panic!("{template} does not parse: {e}\n{doc}"));
            if doc["kind"] == "ConfigMap" {
                config_maps.push(doc);
            }
        }
    }
    let data = |name: &str, key: &str| -> String {
        config_maps
            .iter()
            .find(|c| c["metadata"]["name"] == name)
            .and_then(|c| c["data"][key].as_str())
            .unwrap_or_else(|| panic!("the hub install has no ConfigMap {name} with key {key}"))
            .to_string()
    };
    let allowlist: Value = serde_saphyr::from_str(&data(
        "observability-metrics-custom-allowlist",
        "metrics_list.yaml",
    ))
    .unwrap();
    let dashboards: Vec<(String, Value)> = config_maps
        .iter()
        .filter(|c| c["metadata"]["labels"]["grafana-custom-dashboard"] == "true")
        .flat_map(|c| c["data"].as_object().unwrap().clone())
        .map(|(file, text)| (file, serde_json::from_str(text.as_str().unwrap()).unwrap()))
        .collect();
    assert!(
        !dashboards.is_empty(),
        "the hub install has no ACM dashboard"
    );
    AcmBundle {
        rules: data("thanos-ruler-custom-rules", "custom_rules.yaml"),
        allowlist,
        dashboards,
    }
}

impl AcmBundle {
    /// The collector's `match[]` selectors, built as ACM's endpoint operator
    /// builds its `--match` flags, plus ACM's default names the rules use.
    fn federation_matches(&self) -> Vec<String> {
        let strings = |key: &str| -> Vec<String> {
            self.allowlist[key]
                .as_array()
                .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
                .unwrap_or_default()
        };
        let mut out: Vec<String> = strings("names")
            .iter()
            .map(String::as_str)
            .chain(ACM_DEFAULT_NAMES)
            .map(|name| format!("{{__name__=\"{name}\"}}"))
            .collect();
        out.extend(strings("matches").iter().map(|m| format!("{{{m}}}")));
        out
    }

    /// (alert or record name, expr) of every rule on the hub.
    fn rules(&self) -> Vec<(String, String)> {
        let doc: Value = serde_saphyr::from_str(&self.rules).unwrap();
        let mut out = Vec::new();
        for group in doc["groups"].as_array().unwrap() {
            for rule in group["rules"].as_array().unwrap() {
                let name = rule["alert"].as_str().or(rule["record"].as_str()).unwrap();
                out.push((name.to_string(), rule["expr"].as_str().unwrap().to_string()));
            }
        }
        out
    }

    /// (dashboard, panel title, expr) of every panel target and variable query.
    fn dashboard_queries(&self) -> Vec<(String, String, String)> {
        fn walk(file: &str, title: &str, v: &Value, out: &mut Vec<(String, String, String)>) {
            match v {
                Value::Object(map) => {
                    let title = map.get("title").and_then(Value::as_str).unwrap_or(title);
                    for (k, v) in map {
                        match (k.as_str(), v) {
                            ("expr", Value::String(e)) if !e.is_empty() => {
                                out.push((file.into(), title.into(), e.clone()));
                            }
                            // A query variable: `label_values(EXPR, label)`.
                            ("query", Value::Object(q)) => {
                                let q = q.get("query").and_then(Value::as_str).unwrap_or("");
                                if let Some(expr) = q
                                    .trim()
                                    .strip_prefix("label_values(")
                                    .and_then(|q| q.strip_suffix(')'))
                                    .and_then(|q| q.rsplit_once(','))
                                    .map(|(expr, _)| expr.trim())
                                {
                                    out.push((
                                        file.into(),
                                        format!("variable {title}"),
                                        expr.into(),
                                    ));
                                }
                            }
                            _ => walk(file, title, v, out),
                        }
                    }
                }
                Value::Array(items) => items.iter().for_each(|v| walk(file, title, v, out)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        for (file, dashboard) in &self.dashboards {
            walk(file, "?", dashboard, &mut out);
        }
        out
    }
}

/// Grafana's variables replaced as Grafana would for a short range;
/// `cluster_id` picks one cluster, the others match everything.
fn substitute(expr: &str, cluster_id: &str) -> String {
    let mut out = String::new();
    let mut rest = expr;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (var, tail) = if let Some(braced) = after.strip_prefix('{') {
            let end = braced.find('}').unwrap();
            (&braced[..end], &braced[end + 1..])
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        out.push_str(match var {
            "__rate_interval" => "1m",
            "__interval" => "15s",
            "__range" => "5m",
            "cluster_id" => cluster_id,
            _ => ".*",
        });
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// Metric names an expression selects.
fn names_selected(expr: &str) -> BTreeSet<String> {
    let ast =
        promql_parser::parser::parse(expr).unwrap_or_else(|e| panic!("not PromQL: {expr}: {e}"));
    let mut names = BTreeSet::new();
    collect_names(&ast, &mut names);
    names
}

/// Whether one of the `match[]` selectors selects series named `name`: its
/// `__name__` matchers accept the name. Other label matchers of a `matches`
/// entry narrow what ships and are left to the running check below.
fn covered(name: &str, selectors: &[String]) -> bool {
    selectors.iter().any(|selector| {
        let promql_parser::parser::Expr::VectorSelector(v) = promql_parser::parser::parse(selector)
            .unwrap_or_else(|e| panic!("match[] {selector} is not a selector: {e}"))
        else {
            panic!("match[] {selector} is not a selector");
        };
        v.name.as_deref().is_none_or(|n| n == name)
            && v.matchers
                .matchers
                .iter()
                .filter(|m| m.name == "__name__")
                .all(|m| m.is_match(name))
    })
}

#[test]
fn allowlist_covers_every_series_the_hub_rules_and_acm_dashboards_select() {
    let bundle = render_acm_bundle();
    let selectors = bundle.federation_matches();
    let rules = bundle.rules();
    assert!(!rules.is_empty(), "no rules in custom_rules.yaml");
    // Recording rules run on the hub: their outputs need no shipping.
    let recorded: BTreeSet<&str> = rules
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| n.contains(':'))
        .collect();
    let mut missing = BTreeMap::<String, BTreeSet<String>>::new();
    let mut checked = BTreeSet::new();
    let uses = rules
        .iter()
        .map(|(name, expr)| (format!("rule {name}"), expr.clone()))
        .chain(
            bundle
                .dashboard_queries()
                .into_iter()
                .map(|(file, title, expr)| (format!("{file} / {title}"), substitute(&expr, "x"))),
        );
    for (user, expr) in uses {
        for name in names_selected(&expr) {
            if recorded.contains(name.as_str()) {
                continue;
            }
            checked.insert(name.clone());
            if !covered(&name, &selectors) {
                missing.entry(name).or_default().insert(user.clone());
            }
        }
    }
    // Guard against a walk that finds nothing to check.
    assert!(
        checked.contains("hcpflow_hop_phase") && checked.contains("hcpflow_cluster_info"),
        "the rules and dashboards select {checked:?}"
    );
    assert!(
        missing.is_empty(),
        "series the hub needs but ACM's collector would not ship \
         (not in charts/hcp-flow/files/acm/metrics_list.yaml): {missing:#?}"
    );
}

/// Per-cluster alerts firing over time: labels (without the collector's
/// and `alertstate`) → the evaluation times at which it fired.
type Firing = BTreeMap<BTreeMap<String, String>, Vec<f64>>;

async fn firing(
    client: &reqwest::Client,
    prometheus: &str,
    start: f64,
    end: f64,
) -> Result<Firing, String> {
    let result = query_range(
        client,
        prometheus,
        r#"ALERTS{alertstate="firing", cluster_id!=""}"#,
        start,
        end,
        1.0,
    )
    .await?;
    let mut out = Firing::new();
    for series in result.as_array().unwrap() {
        let labels: BTreeMap<String, String> = series["metric"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| !["alertstate", "cluster", "clusterID"].contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect();
        let times = series["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[0].as_f64().unwrap());
        out.entry(labels).or_default().extend(times);
    }
    Ok(out)
}

/// "alertname cluster_id {the labels that tell alerts of a cluster apart}".
fn describe(labels: &BTreeMap<String, String>) -> String {
    let detail: Vec<String> = labels
        .iter()
        .filter(|(k, _)| {
            ![
                "__name__",
                "alertname",
                "cluster_id",
                "instance",
                "job",
                "mgmt_cluster",
                "name",
                "severity",
            ]
            .contains(&k.as_str())
        })
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!(
        "{} {} {{{}}}",
        labels["alertname"],
        labels["cluster_id"],
        detail.join(", ")
    )
}

/// The first lines of a long list, and how many more there are.
fn at_most(lines: &[String], n: usize) -> String {
    let mut out = lines
        .iter()
        .take(n)
        .cloned()
        .collect::<Vec<_>>()
        .join("\n  ");
    if lines.len() > n {
        out.push_str(&format!("\n  … and {} more", lines.len() - n));
    }
    out
}

/// Alerts the management cluster fires at a time in [start, end] that the
/// hub does not fire within LAG of it: "alertname cluster_id at t: {labels}".
///
/// Not required: an episode on the management cluster shorter than one
/// federation interval, which the hub, sampling every two seconds, may never
/// see (a hop at risk for a second before it turned ready).
fn missing_on_hub(reference: &Firing, hub: &Firing, start: f64, end: f64) -> Vec<String> {
    let mut out = Vec::new();
    for (labels, times) in reference {
        let other = hub.get(labels).map(Vec::as_slice).unwrap_or(&[]);
        let brief: Vec<(f64, f64)> = episodes(times)
            .into_iter()
            .filter(|(from, to)| to - from < FEDERATION_INTERVAL)
            .collect();
        if let Some(t) = times
            .iter()
            .filter(|t| (start..=end).contains(*t))
            .filter(|t| !brief.iter().any(|(from, to)| (*from..=*to).contains(*t)))
            .find(|t| !other.iter().any(|o| (*t - LAG..=*t + LAG).contains(o)))
        {
            out.push(format!(
                "{} at {:.0}s into the window",
                describe(labels),
                t - start
            ));
        }
    }
    out
}

/// Runs of firing times (the range query's 1s steps) without a gap.
fn episodes(times: &[f64]) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    for &t in times {
        match out.last_mut() {
            Some((_, end)) if t - *end <= 1.5 => *end = t,
            _ => out.push((t, t)),
        }
    }
    out
}

/// Firing episodes of the hub, touching [start, end], that the management
/// cluster does not account for. Accounted for: the management cluster
/// fired the same alert from at most LAG after the episode began, and the
/// episode ended at most the lookback after the management cluster stopped
/// (the series behind it lingered); or the episode lasted no longer than LAG
/// (a hop moved on right at its budget, and the hub, a few seconds behind,
/// saw the old phase past it).
fn extra_on_hub(
    hub: &Firing,
    reference: &Firing,
    start: f64,
    end: f64,
) -> Vec<(String, String, f64)> {
    let mut out = Vec::new();
    for (labels, times) in hub {
        let other = reference.get(labels).map(Vec::as_slice).unwrap_or(&[]);
        for (a, b) in episodes(times) {
            if b < start || a > end || b - a <= LAG {
                continue;
            }
            let during: Vec<f64> = other
                .iter()
                .copied()
                .filter(|r| (a - LAG..=b + LAG).contains(r))
                .collect();
            let accounted = during
                .first()
                .zip(during.last())
                .is_some_and(|(first, last)| *first <= a + LAG && b <= last + LOOKBACK + LAG);
            if !accounted {
                let line = format!(
                    "{} from {:.0}s to {:.0}s into the window (the management cluster: {})",
                    describe(labels),
                    a - start,
                    b - start,
                    match (during.first(), during.last()) {
                        (Some(f), Some(l)) => format!("{:.0}s to {:.0}s", f - start, l - start),
                        _ => "never".to_string(),
                    }
                );
                out.push((line, labels["cluster_id"].clone(), a));
            }
        }
    }
    out
}

/// Every series of one hosted cluster at a time, with its sample's own
/// time: "name{labels} = value @ time", for a failure's message.
async fn series_of_cluster(
    client: &reqwest::Client,
    prometheus: &str,
    cluster_id: &str,
    at: f64,
) -> String {
    let selector = format!(r#"{{cluster_id="{cluster_id}", __name__!="ALERTS"}}"#);
    let Ok(values) = query_at(client, prometheus, &selector, at).await else {
        return "(the query failed)".to_string();
    };
    let mut lines = Vec::new();
    for series in values.as_array().into_iter().flatten() {
        let mut labels = series["metric"].as_object().cloned().unwrap_or_default();
        let name = labels
            .remove("__name__")
            .and_then(|n| n.as_str().map(str::to_string))
            .unwrap_or_default();
        // timestamp() keeps the sample's own time only for a bare selector.
        let exact: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}={:?}", v.as_str().unwrap_or("")))
            .collect();
        let time = query_at(
            client,
            prometheus,
            &format!("timestamp({name}{{{}}})", exact.join(",")),
            at,
        )
        .await
        .ok()
        .and_then(|r| r[0]["value"][1].as_str().map(str::to_string))
        .unwrap_or_else(|| "?".to_string());
        for k in ["cluster_id", "cluster", "clusterID"] {
            labels.remove(k);
        }
        let shown: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("?")))
            .collect();
        let value = series["value"][1].as_str().unwrap_or("?");
        lines.push(format!("{name}{{{}}} = {value} @ {time}", shown.join(",")));
    }
    lines.sort();
    at_most(&lines, 60)
}

/// Rules whose last evaluation failed: rule name → error.
async fn failing_rules(client: &reqwest::Client, prometheus: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Ok(response) = client
        .get(format!("{prometheus}/api/v1/rules"))
        .send()
        .await
    else {
        return out;
    };
    let body: Value = response.json().await.unwrap_or_default();
    for group in body["data"]["groups"].as_array().into_iter().flatten() {
        for rule in group["rules"].as_array().into_iter().flatten() {
            if rule["health"] == "err" {
                out.insert(
                    rule["name"].as_str().unwrap_or("?").to_string(),
                    rule["lastError"].as_str().unwrap_or("?").to_string(),
                );
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hub_fires_the_management_clusters_per_cluster_alerts_from_allowlisted_series() {
    // Alerts against their budgets: timing-sensitive (`load`).
    let _machine = crate::common::load::heavy();
    let dir = tempdir("acm");
    let bundle = render_acm_bundle();
    std::fs::write(dir.join("custom_rules.yaml"), &bundle.rules).unwrap();

    // The demo fleet with faults: a Clusters Service error fails a hop of
    // a few clusters at once (HCPHopFailed), more as churn creates clusters.
    let world = world::start(world::demo(30, 7)).await;
    let exporter = exporter::of_world(&world).serve().await;

    // The management cluster's Prometheus, with the external labels the
    // platform Prometheus of OpenShift carries (the collector elides them).
    let (mgmt_process, mgmt) = procs::prometheus("prometheus-mgmt")
        .external_label("prometheus", "openshift-monitoring/k8s")
        .external_label("prometheus_replica", "prometheus-k8s-0")
        .shipped_rules()
        .scrape("hcp-flow", &exporter.url)
        .start(&dir);
    let mgmt_addr = mgmt.trim_start_matches("http://").to_string();

    // The hub: what the collector ships, and the ruler's rules.
    let hub_config = json!({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [dir.join("custom_rules.yaml")],
        "scrape_configs": [{
            "job_name": "acm-metrics-collector",
            "scrape_interval": format!("{FEDERATION_INTERVAL}s"),
            "scrape_timeout": format!("{FEDERATION_INTERVAL}s"),
            "honor_labels": true,
            // The exporter's sample times, as the collector forwards them.
            // Prometheus writes no staleness markers for samples that carry
            // their own time, so a series that vanishes upstream (a hop's
            // previous phase) lingers here for the 5m lookback: what the
            // collector's remote write, which carries no staleness markers,
            // does to Thanos on a real hub.
            "honor_timestamps": true,
            "metrics_path": "/federate",
            "params": {"match[]": bundle.federation_matches()},
            "static_configs": [{"targets": [mgmt_addr]}],
            "metric_relabel_configs": [
                {"action": "labeldrop", "regex": ELIDED_LABELS},
                {"target_label": "cluster", "replacement": MGMT_CLUSTER},
                {"target_label": "clusterID", "replacement": MGMT_CLUSTER_ID},
            ],
        }],
    });
    // JSON is YAML; Prometheus reads it as its configuration.
    let (hub_process, hub) = start_prometheus("prometheus-hub", &hub_config.to_string(), &dir);
    let client = reqwest::Client::new();
    let logs = || format!("{}\n{}", mgmt_process.log_tail(), hub_process.log_tail());
    for base in [&mgmt, &hub] {
        assert!(
            wait_ready(&client, base, Duration::from_secs(30)).await,
            "{base} never became ready\n{}",
            logs()
        );
    }
    // Warm: the hub has the exporter's series and has recorded from them
    // (identities, hop budgets); its alerts can fire from then on.
    let warm = wait_for(
        "the hub to record from the shipped series",
        Duration::from_secs(60),
        async || {
            for expr in [
                format!(
                    "hcpflow_build_info{{cluster=\"{MGMT_CLUSTER}\", clusterID=\"{MGMT_CLUSTER_ID}\"}}"
                ),
                "hcpflow_hop_budget_seconds".to_string(),
                "hcpflow:cluster_identity:info".to_string(),
            ] {
                let r = query(&client, &hub, &expr).await.ok()?;
                r.as_array()?.first()?;
            }
            Some(())
        },
    )
    .await;
    assert!(warm.is_some(), "nothing reached the hub\n{}", logs());

    // Watch a fixed window: long enough for creations to move through
    // hops, fail, complete and be deleted, so that series vanish and the
    // hub must live with the ones that linger. Rule errors are sampled as
    // they happen: a rule's error lasts until its next evaluation succeeds.
    let start = now_secs() + LAG;
    let end = start + WINDOW + LAG;
    let mut errors = [BTreeMap::new(), BTreeMap::new()];
    while now_secs() < end {
        for (seen, base) in errors.iter_mut().zip([&mgmt, &hub]) {
            for (rule, error) in failing_rules(&client, base).await {
                seen.entry(rule).or_insert(error);
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    // Every problem is collected, so that one run says all that is wrong.
    let mut problems = Vec::new();
    let [mgmt_errors, hub_errors] = errors;
    if !mgmt_errors.is_empty() || !hub_errors.is_empty() {
        let list = |errors: &BTreeMap<String, String>| -> String {
            let lines: Vec<String> = errors
                .iter()
                .map(|(rule, e)| format!("{rule}: {}", e.chars().take(400).collect::<String>()))
                .collect();
            at_most(&lines, 20)
        };
        problems.push(format!(
            "rules failed to evaluate\non the management cluster:\n  {}\non the hub:\n  {}",
            list(&mgmt_errors),
            list(&hub_errors)
        ));
    }

    let reference = firing(&client, &mgmt, start, end).await.unwrap();
    let on_hub = firing(&client, &hub, start, end).await.unwrap();
    assert!(
        !reference.is_empty(),
        "no per-cluster alert fired on the management cluster\n{}",
        logs()
    );
    eprintln!(
        "per-cluster alerts on the management cluster: {:?}",
        reference
            .keys()
            .map(|l| format!("{} {}", l["alertname"], l["cluster_id"]))
            .collect::<BTreeSet<_>>()
    );
    let window = (start, end - LAG);
    // The hub fires what the management cluster fires, at most LAG later.
    // It may go on firing for up to the lookback after the management
    // cluster resolved (the series that held the alert lingers), but it
    // fires nothing the management cluster did not.
    let hub_lacks = missing_on_hub(&reference, &on_hub, window.0, window.1);
    let hub_adds = extra_on_hub(&on_hub, &reference, window.0, window.1);
    if !hub_lacks.is_empty() || !hub_adds.is_empty() {
        // Which series the hub lacks, to say why.
        let names = |r: Result<Value, String>| -> BTreeSet<String> {
            r.unwrap_or_default()
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s["metric"]["__name__"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        let expr = r#"count by (__name__) ({__name__=~"hcpflow_.+|up"})"#;
        let on_mgmt = names(query(&client, &mgmt, expr).await);
        let shipped = names(query(&client, &hub, expr).await);
        problems.push(format!(
            "the hub's alerts differ from the management cluster's\n\
             firing on the management cluster, not on the hub:\n  {}\n\
             firing on the hub, not on the management cluster:\n  {}\n\
             series not shipped to the hub: {:?}",
            at_most(&hub_lacks, 12),
            at_most(
                &hub_adds
                    .iter()
                    .map(|(line, ..)| line.clone())
                    .collect::<Vec<_>>(),
                12
            ),
            on_mgmt.difference(&shipped).collect::<Vec<_>>(),
        ));
        // What each side held of the first extra alert's cluster when the
        // hub began to fire it, to tell a lingering series from a lag.
        if let Some((_, cluster_id, at)) = hub_adds.first() {
            for (side, base) in [("the management cluster", &mgmt), ("the hub", &hub)] {
                problems.push(format!(
                    "{side} at the hub's first firing, cluster {cluster_id}:\n  {}",
                    series_of_cluster(&client, base, cluster_id, *at).await
                ));
            }
        }
    }

    // docs/acm.md: alerts on the hub keep the collector's labels, so a
    // notification says which management cluster a creation runs on.
    let expr = format!(
        r#"ALERTS{{alertstate="firing", cluster_id!="", cluster!="{MGMT_CLUSTER}"}}
           or ALERTS{{alertstate="firing", cluster_id!="", clusterID!="{MGMT_CLUSTER_ID}"}}"#
    );
    let unlabelled: BTreeSet<String> = query_range(&client, &hub, &expr, start, end, 1.0)
        .await
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["metric"]["alertname"].as_str().unwrap().to_string())
        .collect();
    if !unlabelled.is_empty() {
        problems.push(format!(
            "alerts on the hub without the collector's cluster and clusterID \
             (their rules aggregate the labels away): {unlabelled:?}"
        ));
    }

    // The ACM dashboards: what shows data on the management cluster shows
    // data on the hub, evaluated at the same instant (both store the
    // exporter's own sample times).
    let cluster_id = reference.keys().next().unwrap()["cluster_id"].clone();
    let at = now_secs() - LAG;
    let mut blank = Vec::new();
    for (file, title, expr) in bundle.dashboard_queries() {
        let expr = substitute(&expr, &cluster_id);
        let has_data = |r: &Value| r.as_array().is_some_and(|a| !a.is_empty());
        let on_mgmt = query_at(&client, &mgmt, &expr, at).await;
        let shown = query_at(&client, &hub, &expr, at).await;
        match (on_mgmt, shown) {
            (Err(e), _) => blank.push(format!(
                "{file} / {title}: fails on the management cluster: {e}: {expr}"
            )),
            (_, Err(e)) => blank.push(format!("{file} / {title}: fails on the hub: {e}: {expr}")),
            (Ok(m), Ok(h)) if has_data(&m) && !has_data(&h) => {
                blank.push(format!("{file} / {title}: no data on the hub: {expr}"))
            }
            _ => {}
        }
    }
    if !blank.is_empty() {
        problems.push(format!(
            "ACM dashboard queries that show data on the management cluster but not on the hub:\n  {}",
            at_most(&blank, 12)
        ));
    }
    assert!(problems.is_empty(), "{}\n{}", problems.join("\n\n"), logs());
    drop((mgmt_process, hub_process));
    let _ = std::fs::remove_dir_all(&dir);
}
