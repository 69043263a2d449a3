//! End to end with the real tools: `hcp-flow demo` (world + exporter) → a real
//! Prometheus scraping it with `alerts/` loaded → every rule expression and
//! every dashboard query evaluates through the HTTP API → an injected failure
//! fires an alert that reaches a real Alertmanager and a local webhook
//! receiver standing in for Slack. That every panel returns data is
//! tests/it/dashboards_data.rs.
//!
//! Needs `prometheus` and `prometheus-alertmanager` (Debian packages; .ci/run
//! installs them). Processes run on loopback with temporary storage and are
//! killed by pid when the test ends.

use crate::common::procs;
use crate::common::promql::collect_names;
use procs::{query, tempdir, wait_for};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{exporter, world};
use serde_json::Value;

use crate::common::ROOT;

/// Webhook payloads Alertmanager delivered.
type Received = Arc<Mutex<Vec<Value>>>;

async fn webhook_receiver() -> (SocketAddr, Received) {
    let received: Received = Arc::default();
    let sink = received.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let sink = sink.clone();
            async move {
                sink.lock().unwrap().push(body);
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (addr, received)
}

/// Every rule expression in `alerts/*.yaml`.
fn rule_expressions() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(Path::new(ROOT).join("alerts")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let doc: Value = serde_saphyr::from_str(&text).unwrap();
        for group in doc["groups"].as_array().cloned().unwrap_or_default() {
            for rule in group["rules"].as_array().cloned().unwrap_or_default() {
                let name = rule["alert"]
                    .as_str()
                    .or(rule["record"].as_str())
                    .unwrap_or("?")
                    .to_string();
                if let Some(expr) = rule["expr"].as_str() {
                    out.push((name, expr.to_string()));
                }
            }
        }
    }
    out
}

/// Every panel target of every dashboard: (dashboard file, panel title, expr).
fn dashboard_queries() -> Vec<(String, String, String)> {
    fn walk(file: &str, panels: &[Value], out: &mut Vec<(String, String, String)>) {
        for panel in panels {
            let title = panel["title"].as_str().unwrap_or("?").to_string();
            for target in panel["targets"].as_array().cloned().unwrap_or_default() {
                if let Some(expr) = target["expr"].as_str() {
                    out.push((file.to_string(), title.clone(), expr.to_string()));
                }
            }
            if let Some(inner) = panel["panels"].as_array() {
                walk(file, inner, out);
            }
        }
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(Path::new(ROOT).join("dashboards")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        walk(
            &file,
            doc["panels"].as_array().map(Vec::as_slice).unwrap_or(&[]),
            &mut out,
        );
    }
    out
}

/// Grafana's variables, replaced the way Grafana would for a 1-minute range.
fn substitute(expr: &str, cluster_id: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("${__rate_interval}", "1m")
        .replace("$__interval", "15s")
        .replace("$__range", "5m")
        .replace("${cluster_id}", cluster_id)
        .replace("$cluster_id", cluster_id)
        .replace("${mgmt_cluster}", ".*")
        .replace("$mgmt_cluster", ".*")
        .replace("${source}", ".*")
        .replace("$source", ".*")
        .replace("${hop}", ".*")
        .replace("$hop", ".*")
        .replace("${operation}", "create")
        .replace("$operation", "create")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn demo_scraped_by_prometheus_fires_alerts_into_alertmanager() {
    // Alerts against their budgets: timing-sensitive (`load`).
    let _machine = crate::common::load::heavy();
    let dir = tempdir("e2e");

    // 1. The demo: world + exporter, in process, on loopback.
    let world = world::start(world::demo(30, 7)).await;
    let exporter = exporter::of_world(&world).serve().await;

    // 2. Slack stands in as a webhook; Alertmanager routes everything to it.
    let (hook, received) = webhook_receiver().await;
    std::fs::write(
        dir.join("alertmanager.yml"),
        format!(
            "route:\n  receiver: hook\n  group_by: [alertname, cluster_id]\n  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: hook\n    webhook_configs:\n      - url: http://{hook}/hook\n        send_resolved: false\n"
        ),
    )
    .unwrap();
    let (alertmanager, am) =
        procs::start_alertmanager("alertmanager", &dir.join("alertmanager.yml"), &dir);

    // 3. Prometheus scrapes the exporter every second with the project's rules.
    let (prometheus_process, prometheus) = procs::prometheus("prometheus")
        .shipped_rules()
        .alertmanager(&am)
        .scrape("hcp-flow", &exporter.url)
        .start(&dir);
    let client = reqwest::Client::new();
    let logs = || {
        format!(
            "{}\n{}",
            prometheus_process.log_tail(),
            alertmanager.log_tail()
        )
    };

    let scraped = procs::wait_scraped(&client, &prometheus, None, Duration::from_secs(60)).await;
    assert!(scraped, "Prometheus never scraped the exporter\n{}", logs());

    // 4. Every metric name used in alerts/ and dashboards/ is in a real scrape.
    let body = reqwest::get(format!("{}/metrics", exporter.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let exposed: BTreeSet<String> = body
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect();
    let used = metric_names_used();
    let missing: Vec<&String> = used
        .iter()
        .filter(|name| {
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(name);
            !exposed.contains(*name) && !exposed.contains(base)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "used in alerts/ or dashboards/ but not exposed: {missing:?}"
    );

    // 5. Let creations happen, then evaluate every expression.
    let cluster_id = wait_for(
        "a completed creation",
        Duration::from_secs(120),
        async || {
            let r = query(
                &client,
                &prometheus,
                "hcpflow_cluster_creation_completed_timestamp_seconds",
            )
            .await
            .ok()?;
            r.as_array()?.first()?["metric"]["cluster_id"]
                .as_str()
                .map(str::to_string)
        },
    )
    .await
    .unwrap_or_else(|| panic!("no creation completed\n{}", logs()));
    let mut errors = Vec::new();
    for (name, expr) in rule_expressions() {
        if let Err(e) = query(&client, &prometheus, &expr).await {
            errors.push(format!("rule {name}: {e}"));
        }
    }
    let panels = dashboard_queries();
    assert!(!panels.is_empty(), "no dashboard queries found");
    for (file, title, expr) in &panels {
        if let Err(e) = query(&client, &prometheus, &substitute(expr, &cluster_id)).await {
            errors.push(format!("{file} / {title}: {e}"));
        }
    }
    assert!(
        errors.is_empty(),
        "expressions failed:\n{}",
        errors.join("\n")
    );

    // 6. An injected failure (CS error OCM4001 among the demo's faults) fires
    //    an alert that reaches the webhook naming the cluster and hop.
    let delivered = wait_for(
        "a failed-hop alert at the webhook",
        Duration::from_secs(180),
        async || {
            let payloads = received.lock().unwrap().clone();
            payloads.into_iter().find_map(|p| {
                let alerts = p["alerts"].as_array()?.clone();
                alerts.into_iter().find(|a| {
                    a["labels"]["cluster_id"].is_string()
                        && a["labels"]["hop"].is_string()
                        && a["labels"]["alertname"]
                            .as_str()
                            .is_some_and(|n| n.contains("Failed"))
                })
            })
        },
    )
    .await;
    let alert = delivered.unwrap_or_else(|| {
        panic!(
            "no failed-hop alert reached the webhook; received: {:?}\n{}",
            received.lock().unwrap(),
            logs()
        )
    });
    let description = alert["annotations"]["description"]
        .as_str()
        .unwrap_or_default();
    let cluster = alert["labels"]["cluster_id"].as_str().unwrap();
    assert!(
        description.contains(cluster),
        "description does not name the cluster: {description}"
    );
    assert!(
        description.contains(alert["labels"]["hop"].as_str().unwrap()),
        "description does not name the hop: {description}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Metric names referenced by PromQL in alerts/ and dashboards/, parsed with a
/// real PromQL parser (recording-rule outputs are not exporter metrics).
fn metric_names_used() -> BTreeSet<String> {
    let recorded: BTreeSet<String> = rule_expressions()
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| n.contains(':'))
        .collect();
    let mut names = BTreeSet::new();
    let exprs = rule_expressions().into_iter().map(|(_, e)| e).chain(
        dashboard_queries()
            .into_iter()
            .map(|(_, _, e)| substitute(&e, "x")),
    );
    for expr in exprs {
        let ast = promql_parser::parser::parse(&expr)
            .unwrap_or_else(|e| panic!("not PromQL: {expr}: {e}"));
        collect_names(&ast, &mut names);
    }
    names.retain(|n| n.starts_with("hcpflow_") && !recorded.contains(n));
    names
}
