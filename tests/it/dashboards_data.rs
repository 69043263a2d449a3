//! Every panel of every dashboard returns data from the demo through a real
//! Prometheus, and the latency panels show exemplars that open a creation's
//! trace (docs/dashboards.md).
//!
//! Two demos run side by side, each in process (world + exporter, as
//! `hcp-flow demo` runs them) and scraped every second by its own `prometheus`
//! with `alerts/` loaded (the SLO panels read recording rules) and exemplar
//! storage on (Prometheus then asks for OpenMetrics, the only format that
//! carries exemplars):
//!
//! - a healthy fleet (`faults: false`): every target of every panel returns a
//!   number, except the panels docs/dashboards.md lists as fault-only;
//! - a faulty fleet (`faults: true`, the demo's default): every target of every
//!   panel returns a number, the fault-only ones included, and the query of
//!   every latency panel returns exemplars from `/api/v1/query_exemplars`
//!   whose `trace_id` is the trace id of a cluster Prometheus saw.
//!
//! Queries go out as Grafana sends them: instant targets to `/api/v1/query`,
//! the others to `/api/v1/query_range`, with the dashboard's variables
//! replaced by values that exist (see `Fleet::variable_values` and
//! `builtins`).
//! A check that never sees every panel filled fails with the empty panels,
//! their queries and the Prometheus log tail.
//!
//! Needs `prometheus` (Debian package; .ci/run installs it). Processes run on
//! loopback with temporary storage and are killed by pid when the test ends.

use crate::common::procs;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::common::exporter::{self, Served};
use crate::common::world::{self, TestWorld};
use hcp_flow::sim::WorldConfig;
use procs::{Process, label_values, query, query_exemplars, query_range, tempdir};
use promql_parser::parser::{Expr, LabelModifier};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::common::ROOT;

/// The histograms whose quantile panels must show exemplars: the exporter
/// attaches the operation's trace id to every observation of both. The
/// dashboards' `$operation` takes its default, `create`, whose trace id is
/// derived from the cluster id alone (see `trace_id`).
const LATENCY_HISTOGRAMS: [&str; 2] = [
    "hcpflow_operation_duration_seconds_bucket",
    "hcpflow_hop_duration_seconds_bucket",
];

/// How long a fleet may take to fill every panel. The demo at speed 60
/// completes creations it saw start within about 20 s; the rest is margin
/// for a loaded machine. Only a failing run waits this long.
const FILL_LIMIT: Duration = Duration::from_secs(150);

/// The step of the test's range queries: the scrape interval, so no sample
/// goes unseen in a run that lasts seconds.
const STEP_S: f64 = 1.0;

/// The scrape interval Grafana assumes for a Prometheus data source unless
/// one is configured; `$__rate_interval` derives from it.
const GRAFANA_SCRAPE_INTERVAL_S: f64 = 15.0;

/// Where docs/dashboards.md lists the fault-only panels (a table of
/// `dashboard file | panel title | …` rows under this heading).
const FAULT_ONLY_HEADING: &str = "## Fault-only panels";

// ---------------------------------------------------------------------------
// The dashboards, as Grafana reads them

#[derive(Debug)]
struct Dashboard {
    file: String,
    /// The default time range (`time.from` = `now-<range>`), in seconds.
    range_s: f64,
    variables: Vec<Value>,
    panels: Vec<Panel>,
}

#[derive(Debug)]
struct Panel {
    title: String,
    kind: String,
    /// The panel's JSON, for the structural checks.
    json: Value,
    targets: Vec<Target>,
}

#[derive(Debug)]
struct Target {
    ref_id: String,
    expr: String,
    /// Grafana runs a range query unless the target is instant only.
    range: bool,
    instant: bool,
    exemplar: bool,
}

impl Target {
    /// A histogram quantile over one of [`LATENCY_HISTOGRAMS`]: the latency
    /// the exemplars explain.
    fn latency_histogram(&self) -> Option<&'static str> {
        let quantile = quantile_of(&self.expr)?;
        LATENCY_HISTOGRAMS
            .into_iter()
            .find(|h| quantile.names.contains(*h))
    }
}

fn dashboards() -> Vec<Dashboard> {
    fn walk(list: &Value, out: &mut Vec<Panel>) {
        for panel in list.as_array().into_iter().flatten() {
            // Rows hold no query; a collapsed row carries its panels inside.
            if panel["type"] != "row" {
                out.push(Panel {
                    title: panel["title"].as_str().unwrap_or("(untitled)").to_string(),
                    kind: panel["type"].as_str().unwrap_or_default().to_string(),
                    json: panel.clone(),
                    targets: panel["targets"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|t| {
                            let instant = t["instant"] == true;
                            Target {
                                ref_id: t["refId"].as_str().unwrap_or("?").to_string(),
                                expr: t["expr"].as_str().unwrap_or_default().to_string(),
                                range: t["range"] == true || !instant,
                                instant,
                                exemplar: t["exemplar"] == true,
                            }
                        })
                        .collect(),
                });
            }
            walk(&panel["panels"], out);
        }
    }
    let mut paths: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join("dashboards"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    let out: Vec<Dashboard> = paths
        .iter()
        .map(|path| {
            let file = path.file_name().unwrap().to_string_lossy().to_string();
            let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap())
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(
                doc["time"]["to"], "now",
                "{file}: the test knows only ranges that end now"
            );
            let from = doc["time"]["from"].as_str().unwrap_or_default();
            let range_s = from
                .strip_prefix("now-")
                .and_then(|d| humantime::parse_duration(d).ok())
                .unwrap_or_else(|| panic!("{file}: time.from {from:?} is not now-<duration>"))
                .as_secs_f64();
            let mut panels = Vec::new();
            walk(&doc["panels"], &mut panels);
            let mut titles = BTreeSet::new();
            for panel in &panels {
                assert!(
                    titles.insert(&panel.title),
                    "{file}: two panels titled {:?}; docs/dashboards.md names panels by title",
                    panel.title
                );
            }
            Dashboard {
                file,
                range_s,
                variables: doc["templating"]["list"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
                panels,
            }
        })
        .collect();
    assert!(!out.is_empty(), "no dashboards/*.json");
    out
}

/// (dashboard file, panel title) of every panel docs/dashboards.md lists as
/// fault-only. Every entry must name a panel that exists: a stale list would
/// excuse nothing and mislead the reader.
fn fault_only(dashboards: &[Dashboard]) -> BTreeSet<(String, String)> {
    let doc = std::fs::read_to_string(Path::new(ROOT).join("docs/dashboards.md")).unwrap();
    let section = doc
        .split_once(&format!("\n{FAULT_ONLY_HEADING}\n"))
        .map(|(_, rest)| rest.split("\n## ").next().unwrap_or_default())
        .unwrap_or_else(|| panic!("docs/dashboards.md has no {FAULT_ONLY_HEADING:?} section"));
    let mut out = BTreeSet::new();
    for line in section.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let file = cells.get(1).unwrap_or(&"").trim_matches('`');
        let Some(title) = cells.get(2).filter(|_| file.ends_with(".json")) else {
            continue; // the header and separator rows
        };
        let exists = dashboards
            .iter()
            .any(|d| d.file == file && d.panels.iter().any(|p| p.title == *title));
        assert!(
            exists,
            "docs/dashboards.md lists {file} / {title:?} as fault-only, but no such panel exists"
        );
        out.insert((file.to_string(), title.to_string()));
    }
    out
}

// ---------------------------------------------------------------------------
// PromQL shape

struct Quantile {
    q: f64,
    /// The labels of the `by (…)` aggregation inside.
    by: BTreeSet<String>,
    names: BTreeSet<String>,
}

/// `histogram_quantile(q, <aggregation by (…)>(…))`, parsed by a real PromQL
/// parser; none for any other expression.
fn quantile_of(expr: &str) -> Option<Quantile> {
    // Placeholders in place of the variables: only the shape matters here.
    let placeholder =
        |name: &str| Some(if name.starts_with("__") { "1m" } else { "x" }.to_string());
    let substituted =
        substitute_with(expr, placeholder).unwrap_or_else(|e| panic!("{e} in {expr}"));
    let parsed = promql_parser::parser::parse(&substituted)
        .unwrap_or_else(|e| panic!("not PromQL: {expr}: {e}"));
    let Expr::Call(call) = parsed else {
        return None;
    };
    if call.func.name != "histogram_quantile" {
        return None;
    }
    let [q, inner] = call.args.args.as_slice() else {
        return None;
    };
    let Expr::NumberLiteral(q) = q.as_ref() else {
        return None;
    };
    let by = match inner.as_ref() {
        Expr::Aggregate(a) => match &a.modifier {
            Some(LabelModifier::Include(labels)) => labels.labels.iter().cloned().collect(),
            _ => BTreeSet::new(),
        },
        _ => BTreeSet::new(),
    };
    let mut names = BTreeSet::new();
    crate::common::promql::collect_names(inner, &mut names);
    Some(Quantile {
        q: q.val,
        by,
        names,
    })
}

// ---------------------------------------------------------------------------
// The structure: no Prometheus needed

/// Every latency panel drawn over time asks Grafana for exemplars, and the
/// fleet overview keeps its per-hop p50/p95 panel with the slowest hop first.
/// Instant targets (stat panels) are exempt: a single number has nowhere to
/// draw a dot.
#[test]
fn latency_panels_ask_for_exemplars_and_the_overview_ranks_hops() {
    let dashboards = dashboards();
    let mut missing = Vec::new();
    let mut covered = BTreeSet::new();
    for d in &dashboards {
        for p in &d.panels {
            for t in p.targets.iter().filter(|t| t.range) {
                if let Some(histogram) = t.latency_histogram() {
                    covered.insert(histogram);
                    if !t.exemplar {
                        missing.push(format!(
                            "{} / {:?} / {}: {}",
                            d.file, p.title, t.ref_id, t.expr
                        ));
                    }
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "latency targets without \"exemplar\": true (their dots would not show):\n  {}",
        missing.join("\n  ")
    );
    for histogram in LATENCY_HISTOGRAMS {
        assert!(
            covered.contains(histogram),
            "no time-series panel shows a quantile of {histogram}: nothing shows its exemplars"
        );
    }

    let overview = dashboards
        .iter()
        .find(|d| d.file == "hcp-flow-fleet-overview.json")
        .expect("the fleet overview dashboard");
    let per_hop = overview.panels.iter().find(|p| {
        let quantiles: BTreeSet<String> = p
            .targets
            .iter()
            .filter(|t| t.range)
            .filter_map(|t| quantile_of(&t.expr))
            .filter(|q| {
                q.by.contains("hop") && q.names.contains("hcpflow_hop_duration_seconds_bucket")
            })
            .map(|q| q.q.to_string())
            .collect();
        p.kind == "timeseries" && quantiles.contains("0.5") && quantiles.contains("0.95")
    });
    let per_hop = per_hop.expect(
        "the fleet overview needs a time series of p50 and p95 of hcpflow_hop_duration_seconds by hop",
    );
    let legend = &per_hop.json["options"]["legend"];
    assert!(
        legend["sortDesc"] == true && legend["sortBy"].is_string(),
        "{:?}: the legend must list the slowest hop first (sortBy, sortDesc), got {legend}",
        per_hop.title
    );
}

// ---------------------------------------------------------------------------
// A fleet: the demo and a Prometheus scraping it

struct Fleet {
    name: &'static str,
    prometheus: Process,
    // Kept alive: dropping them stops the exporter and the upstreams.
    _exporter: Served,
    _world: TestWorld,
    _machine: crate::common::load::Share,
    url: String,
    client: reqwest::Client,
    /// When Prometheus first scraped the exporter (Unix seconds): range
    /// queries start here, the only time Prometheus has data for.
    since: f64,
    dir: PathBuf,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

impl Fleet {
    async fn start(name: &'static str, clusters: usize, faults: bool) -> Fleet {
        // Every panel must fill within a limit: timing-sensitive (`load`).
        let machine = crate::common::load::heavy();
        let dir = tempdir(&format!("dashboards-{name}"));
        let world = world::start(WorldConfig {
            faults,
            ..world::demo(clusters, 7)
        })
        .await;
        let exporter = exporter::of_world(&world).serve().await;
        let (prometheus, url) = procs::prometheus("prometheus")
            .shipped_rules()
            .scrape("hcp-flow", &exporter.url)
            // Without it Prometheus drops exemplars at ingestion.
            .flag("--enable-feature=exemplar-storage")
            .start(&dir);
        let client = reqwest::Client::new();
        let scraped = procs::wait_scraped(&client, &url, None, Duration::from_secs(60)).await;
        assert!(
            scraped,
            "{name}: Prometheus never scraped the exporter\n{}",
            prometheus.log_tail()
        );
        Fleet {
            name,
            prometheus,
            _exporter: exporter,
            _world: world,
            _machine: machine,
            url,
            client,
            since: now(),
            dir,
        }
    }

    /// Polls until every target of every panel `required` picks returns a
    /// number in one round (what one look at the dashboards shows), or fails
    /// listing the last round's empty targets.
    async fn wait_until_filled(
        &self,
        dashboards: &[Dashboard],
        required: impl Fn(&Dashboard, &Panel) -> bool,
    ) {
        let started = std::time::Instant::now();
        let mut empty = Vec::new();
        let filled = procs::wait_for("every panel to return data", FILL_LIMIT, async || {
            empty = self.empty_targets(dashboards, &required).await;
            empty.is_empty().then_some(())
        })
        .await;
        assert!(
            filled.is_some(),
            "{} fleet: these panels returned no data within {FILL_LIMIT:?}:\n{}\n{}",
            self.name,
            empty.join("\n"),
            self.prometheus.log_tail()
        );
        eprintln!(
            "{} fleet: every required panel returned data after {:?}",
            self.name,
            started.elapsed()
        );
    }

    /// One round over the dashboards: a line per required target that
    /// returns no number (or an error), with its query.
    async fn empty_targets(
        &self,
        dashboards: &[Dashboard],
        required: &impl Fn(&Dashboard, &Panel) -> bool,
    ) -> Vec<String> {
        let mut empty = Vec::new();
        let end = now();
        for d in dashboards {
            let values = match self.variable_values(d, end).await {
                Ok(values) => values,
                Err(e) => {
                    empty.push(format!("{}: variables: {e}", d.file));
                    continue;
                }
            };
            for p in d.panels.iter().filter(|p| required(d, p)) {
                for t in &p.targets {
                    let at = format!("{} / {:?} / {}", d.file, p.title, t.ref_id);
                    let expr = match substitute(&t.expr, &values) {
                        Ok(expr) => expr,
                        Err(e) => {
                            empty.push(format!("{at}: {e} in {}", t.expr));
                            continue;
                        }
                    };
                    if t.instant {
                        let r = query(&self.client, &self.url, &expr).await;
                        if !r.as_ref().is_ok_and(has_number) {
                            empty.push(format!("{at} (instant): {expr}\n    => {r:?}"));
                        }
                    }
                    if t.range {
                        let start = self.since.max(end - d.range_s);
                        let r =
                            query_range(&self.client, &self.url, &expr, start, end, STEP_S).await;
                        if !r.as_ref().is_ok_and(has_number) {
                            empty.push(format!("{at} (range): {expr}\n    => {r:?}"));
                        }
                    }
                }
            }
        }
        empty
    }

    /// A value for each of the dashboard's variables that exists now, plus
    /// Grafana's built-in ones.
    ///
    /// - `query` variables run their own query (`label_values(selector,
    ///   label)`) over the time Prometheus has data for and take the first
    ///   value in sort order, as Grafana does with no saved choice; a
    ///   variable in [`PREFERRED`] takes the first value that also has the
    ///   preferred series now.
    /// - `textbox`, `constant` and `custom` variables take their own value.
    /// - `datasource` variables select the data source, never a query's text:
    ///   left out, so a query that used one would fail.
    async fn variable_values(
        &self,
        d: &Dashboard,
        end: f64,
    ) -> Result<BTreeMap<String, String>, String> {
        let mut values = builtins(d.range_s);
        for v in &d.variables {
            let name = v["name"].as_str().unwrap_or_default();
            let value = match v["type"].as_str().unwrap_or_default() {
                "datasource" => continue,
                "textbox" | "constant" => v["query"].as_str().unwrap_or_default().to_string(),
                "custom" => v["current"]["value"]
                    .as_str()
                    .or_else(|| v["query"].as_str()?.split(',').next())
                    .unwrap_or_default()
                    .trim()
                    .to_string(),
                "query" => self.query_variable(name, v, end).await?,
                other => {
                    return Err(format!(
                        "${name}: variables of type {other:?} are unknown to this test; teach it"
                    ));
                }
            };
            values.insert(name.to_string(), value);
        }
        Ok(values)
    }

    async fn query_variable(&self, name: &str, v: &Value, end: f64) -> Result<String, String> {
        let definition = v["definition"]
            .as_str()
            .or_else(|| v["query"]["query"].as_str())
            .or_else(|| v["query"].as_str())
            .unwrap_or_default();
        let (selector, label) = definition
            .trim()
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
            .and_then(|q| q.rsplit_once(','))
            .ok_or_else(|| {
                format!("${name}: only label_values(selector, label) is known to this test, got {definition:?}")
            })?;
        let mut candidates = label_values(
            &self.client,
            &self.url,
            label.trim(),
            selector.trim(),
            self.since,
            end,
        )
        .await?;
        candidates.sort();
        if let Some((_, preferred)) = PREFERRED.iter().find(|(n, _)| *n == name) {
            let now: BTreeSet<String> = query(&self.client, &self.url, preferred)
                .await?
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s["metric"][label.trim()].as_str().map(str::to_string))
                .collect();
            candidates.retain(|c| now.contains(c));
        }
        candidates
            .into_iter()
            .next()
            .ok_or_else(|| format!("${name}: no value yet ({definition})"))
    }

    /// Polls until the query of every latency target returns exemplars whose
    /// `trace_id` is the trace id of a cluster Prometheus saw, or fails.
    async fn wait_for_exemplars(&self, dashboards: &[Dashboard]) {
        let mut problems = Vec::new();
        let found = procs::wait_for(
            "exemplars on every latency panel",
            Duration::from_secs(60),
            async || {
                problems = self.exemplar_problems(dashboards).await;
                problems.is_empty().then_some(())
            },
        )
        .await;
        assert!(
            found.is_some(),
            "{} fleet: latency panels without the exemplars Grafana would draw:\n{}\n{}",
            self.name,
            problems.join("\n"),
            self.prometheus.log_tail()
        );
    }

    async fn exemplar_problems(&self, dashboards: &[Dashboard]) -> Vec<String> {
        let end = now();
        // Every cluster id Prometheus saw, churned ones included: an exemplar
        // must open the trace of a creation that really happened.
        let traces: BTreeMap<String, String> = match label_values(
            &self.client,
            &self.url,
            "cluster_id",
            "hcpflow_cluster_info",
            self.since,
            end,
        )
        .await
        {
            Ok(ids) => ids.into_iter().map(|id| (trace_id(&id), id)).collect(),
            Err(e) => return vec![format!("cluster ids: {e}")],
        };
        let mut problems = Vec::new();
        let mut checked = 0;
        for d in dashboards {
            // The targets Grafana asks exemplars for that explain a latency.
            let targets: Vec<(&Panel, &Target)> = d
                .panels
                .iter()
                .flat_map(|p| p.targets.iter().map(move |t| (p, t)))
                .filter(|(_, t)| t.range && t.exemplar && t.latency_histogram().is_some())
                .collect();
            if targets.is_empty() {
                continue;
            }
            let values = match self.variable_values(d, end).await {
                Ok(values) => values,
                Err(e) => {
                    problems.push(format!("{}: variables: {e}", d.file));
                    continue;
                }
            };
            for (p, t) in targets {
                checked += 1;
                let at = format!("{} / {:?} / {}", d.file, p.title, t.ref_id);
                let expr = match substitute(&t.expr, &values) {
                    Ok(expr) => expr,
                    Err(e) => {
                        problems.push(format!("{at}: {e}"));
                        continue;
                    }
                };
                let start = self.since.max(end - d.range_s);
                let series = match query_exemplars(&self.client, &self.url, &expr, start, end).await
                {
                    Ok(series) => series,
                    Err(e) => {
                        problems.push(format!("{at}: {expr}\n    => {e}"));
                        continue;
                    }
                };
                let exemplars: Vec<&Value> = series
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|s| s["exemplars"].as_array().into_iter().flatten())
                    .collect();
                if exemplars.is_empty() {
                    problems.push(format!("{at}: no exemplars for {expr}"));
                }
                for e in exemplars {
                    let id = e["labels"]["trace_id"].as_str().unwrap_or_default();
                    if !traces.contains_key(id) {
                        problems.push(format!(
                            "{at}: exemplar {e} has no trace_id of a cluster Prometheus saw ({expr})"
                        ));
                        break;
                    }
                }
            }
        }
        if checked == 0 {
            problems.push("no latency target with \"exemplar\": true at all".to_string());
        }
        problems
    }
}

/// Query variables whose first value need not fill every panel, and the
/// series that picks one that does: the cluster drill-down is checked on a
/// creation that completed (an in-flight one has no completion time to
/// show, which is right, not a gap).
const PREFERRED: [(&str, &str); 1] = [(
    "cluster_id",
    "hcpflow_cluster_creation_completed_timestamp_seconds",
)];

/// Grafana's built-in variables for a dashboard whose range is `range_s`:
/// `$__range` is the whole range (Prometheus evaluates a window longer than
/// its data with the data it has), `$__interval` the query step, and
/// `$__rate_interval` max(`$__interval` + scrape interval, 4 × scrape
/// interval) with Grafana's default 15 s scrape interval: 60 s.
fn builtins(range_s: f64) -> BTreeMap<String, String> {
    let rate_interval_s = (STEP_S + GRAFANA_SCRAPE_INTERVAL_S).max(4.0 * GRAFANA_SCRAPE_INTERVAL_S);
    [
        ("__range", format!("{range_s}s")),
        ("__range_s", format!("{range_s}")),
        ("__range_ms", format!("{}", range_s * 1000.0)),
        ("__interval", format!("{STEP_S}s")),
        ("__interval_ms", format!("{}", STEP_S * 1000.0)),
        ("__rate_interval", format!("{rate_interval_s}s")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Replaces `$name`, `${name}` and `${name:format}` from `values`. A name it
/// does not know is an error: Grafana would send it to Prometheus verbatim,
/// and the panel would fail.
fn substitute(expr: &str, values: &BTreeMap<String, String>) -> Result<String, String> {
    substitute_with(expr, |name| values.get(name).cloned())
}

fn substitute_with(
    expr: &str,
    value_of: impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = expr;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, used) = match after.strip_prefix('{') {
            Some(inner) => {
                let end = inner.find('}').ok_or("unclosed ${")?;
                let name = inner[..end].split(':').next().unwrap_or_default();
                (name, end + 2)
            }
            None => {
                let end = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                (&after[..end], end)
            }
        };
        let value = value_of(name).ok_or_else(|| format!("unknown variable ${name}"))?;
        out.push_str(&value);
        rest = &after[used..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A result with at least one sample that is a number: an instant vector's
/// `value`, a matrix's `values`, or a scalar. NaN (0/0 of an empty window)
/// counts as no data: Grafana draws nothing for it.
fn has_number(result: &Value) -> bool {
    let number = |pair: &Value| {
        pair[1]
            .as_str()
            .and_then(|v| v.parse::<f64>().ok())
            .is_some_and(|v| !v.is_nan())
    };
    match result.as_array() {
        Some(items) if items.first().is_some_and(Value::is_number) => number(result),
        Some(items) => items.iter().any(|s| {
            number(&s["value"]) || s["values"].as_array().into_iter().flatten().any(number)
        }),
        None => false,
    }
}

/// The trace id docs/traces.md defines: the first 16 bytes of
/// SHA-256("hcp-flow/" + cluster_id), in hex. Computed here, not taken from
/// the crate, so the test checks the exporter against the documentation.
fn trace_id(cluster_id: &str) -> String {
    let digest = Sha256::digest(format!("hcp-flow/{cluster_id}").as_bytes());
    hex::encode(&digest[..16])
}

// ---------------------------------------------------------------------------
// The fleets

/// A healthy fleet fills every panel but the fault-only ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_demo_fills_every_panel_but_the_fault_only_ones() {
    let dashboards = dashboards();
    let fault_only = fault_only(&dashboards);
    let fleet = Fleet::start("healthy", 20, false).await;
    fleet
        .wait_until_filled(&dashboards, |d, p| {
            !fault_only.contains(&(d.file.clone(), p.title.clone()))
        })
        .await;
}

/// The demo with its faults fills every panel, the fault-only ones included,
/// and its latency panels carry exemplars that open real creations' traces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faulty_demo_fills_every_panel_and_latency_panels_show_exemplars() {
    let dashboards = dashboards();
    // The demo's default size: the per-version panels need 20 succeeded
    // creations of one version (alerts/versions.yaml), and with a third of
    // the fleet faulted and the rest split between two versions, 30
    // clusters end 16 of the most common one, short of it.
    let fleet = Fleet::start("faulty", 50, true).await;
    fleet.wait_until_filled(&dashboards, |_, _| true).await;
    fleet.wait_for_exemplars(&dashboards).await;
}

#[test]
fn substitute_replaces_every_form_and_refuses_unknown_variables() {
    let values: BTreeMap<String, String> = [("cluster_id", "c1"), ("__range", "3600s")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(
        substitute(
            "x{cluster_id=\"$cluster_id\"}[${__range}] / y{a=\"${cluster_id:regex}\"}",
            &values
        ),
        Ok("x{cluster_id=\"c1\"}[3600s] / y{a=\"c1\"}".to_string())
    );
    assert_eq!(
        substitute("x{hop=\"$hop\"}", &values),
        Err("unknown variable $hop".to_string())
    );
}
