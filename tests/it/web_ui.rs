//! The web UI in a real headless browser (docs/ui.md): the demo world and
//! the exporter run in process, faults on, at speed 60; Debian's `chromium`
//! loads the pages, runs their scripts against the exporter's JSON and dumps
//! the DOM it rendered. The test then compares the DOM with the exporter's
//! own JSON.
//!
//! At speed 60 the fleet changes several times a second, faster than a
//! browser starts, so world and exporter share one clock that the test
//! stops before it reads: once the exporter's JSON holds still, the page and
//! the JSON describe the same moment and are compared exactly (the JSON is
//! read before and after each page, and both must agree).
//!
//! - the fleet page's funnel holds, for each hop and phase, the number of
//!   in-flight creations `/api/v1/clusters` places there (at their
//!   verdict's hop, docs/ui.md);
//! - a creation whose Clusters Service failed (the demo's ground truth
//!   names it) is listed among the failures with its failed hop;
//! - its cluster page draws every hop with the phase the JSON gives it, the
//!   error code on the failed hop, and the trace and Grafana links built
//!   from the configured template and URL.
//!
//! Every assertion reads content only the pages' scripts produce
//! (`data-rendered`, `data-*` attributes, no placeholder left), so a script
//! error fails the test.
//!
//! Screenshots of both pages go to a temporary directory; with
//! `HCPFLOW_UI_SCREENSHOTS=1` they replace `docs/images/ui-fleet.png` and
//! `docs/images/ui-cluster.png` (what the README shows).
//!
//! Needs `chromium` (Debian package; .ci/run installs it).

use crate::common::procs;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::common::browser::Browser;
use crate::common::{exporter, world};
use hcp_flow::clock::Clock;
use hcp_flow::demo::GROUND_TRUTH_PATH;

use procs::{tempdir, wait_for};
use serde_json::Value;

use crate::common::ROOT;
const HOPS: [&str; 8] = [
    "rp_frontend",
    "clusters_service",
    "maestro_bundle",
    "manifestwork",
    "hosted_cluster",
    "control_plane",
    "managed_cluster",
    "node_pool",
];
const TRACE_TEMPLATE: &str = "https://traces.example.invalid/trace/{trace_id}";
const GRAFANA: &str = "https://grafana.example.invalid/";
/// How often a page is read again if the JSON still moved under it.
const ATTEMPTS: usize = 3;
/// The shared clock's step while it runs.
const TICK: Duration = Duration::from_millis(100);

/// The attributes of every `<tag …>` in a serialised DOM, in order.
fn tags(dom: &str, tag: &str) -> Vec<BTreeMap<String, String>> {
    let open = format!("<{tag} ");
    let mut out = Vec::new();
    let mut rest = dom;
    while let Some(i) = rest.find(&open) {
        rest = &rest[i + open.len()..];
        let end = rest.find('>').unwrap_or(rest.len());
        out.push(attributes(&rest[..end]));
        rest = &rest[end..];
    }
    out
}

fn attributes(mut s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    loop {
        s = s.trim_start();
        let Some(eq) = s.find('=') else { break };
        let name = s[..eq].trim();
        // A bare attribute before this one (`hidden`, `disabled`).
        let name = name.rsplit(' ').next().unwrap_or(name).to_string();
        let after = &s[eq + 1..];
        let Some(value) = after.strip_prefix('"') else {
            break;
        };
        let close = value.find('"').unwrap_or(value.len());
        let raw = &value[..close];
        out.insert(
            name,
            raw.replace("&quot;", "\"")
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&nbsp;", "\u{a0}")
                .replace("&amp;", "&"),
        );
        s = &value[(close + 1).min(value.len())..];
    }
    out
}

/// The part of the DOM inside the element with this id (to the next
/// `</section>`: every region of the pages is one section).
fn region<'a>(dom: &'a str, id: &str) -> &'a str {
    let start = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in the page"));
    let end = dom[start..]
        .find("</section>")
        .map_or(dom.len(), |e| start + e);
    &dom[start..end]
}

fn assert_rendered(dom: &str, main: &str) {
    let rendered = tags(dom, "main")
        .into_iter()
        .find(|a| a.get("id").map(String::as_str) == Some(main))
        .unwrap_or_else(|| panic!("no <main id={main}>:\n{dom}"));
    assert_eq!(
        rendered.get("data-rendered").map(String::as_str),
        Some("true"),
        "the page's script did not render (a script error leaves the placeholders):\n{dom}"
    );
    assert!(
        !dom.contains("class=\"placeholder\""),
        "a region was left as its placeholder:\n{dom}"
    );
}

// ---------------------------------------------------------------------------
// The funnel, restated from docs/ui.md over the timeline JSON

/// Where a creation stands: its verdict's hop, else the furthest hop seen.
fn position(timeline: &Value) -> Option<&'static str> {
    let hops = &timeline["hops"];
    let hop = timeline["verdict"]["hop"].as_str();
    HOPS.into_iter()
        .find(|h| Some(*h) == hop && hops.get(*h).is_some())
        .or_else(|| HOPS.into_iter().rev().find(|h| hops.get(*h).is_some()))
}

fn expected_funnel(clusters: &Value) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    for t in clusters["items"].as_array().unwrap() {
        if t["outcome"] != "in_flight" {
            continue;
        }
        if let Some(hop) = position(t) {
            let phase = t["hops"][hop]["phase"].as_str().unwrap().to_string();
            *out.entry((hop.to_string(), phase)).or_default() += 1;
        }
    }
    out
}

fn dom_funnel(dom: &str) -> BTreeMap<(String, String), u64> {
    tags(region(dom, "funnel"), "td")
        .into_iter()
        .filter_map(|a| {
            let count: u64 = a.get("data-count")?.parse().ok()?;
            (count > 0).then(|| ((a["data-hop"].clone(), a["data-phase"].clone()), count))
        })
        .collect()
}

// ---------------------------------------------------------------------------

struct Run {
    base: String,
    client: reqwest::Client,
}

impl Run {
    async fn json(&self, path: &str) -> Value {
        self.client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Wait until the exporter's JSON holds still: the clock is stopped, but
    /// sources finish the polls and watch events already under way.
    async fn settle(&self) {
        let mut last = String::new();
        for _ in 0..20 {
            let now = self.json("/api/v1/clusters").await.to_string();
            if now == last {
                return;
            }
            last = now;
            tokio::time::sleep(Duration::from_millis(1500)).await;
        }
        panic!("the exporter's JSON never held still after the clock stopped");
    }

    async fn status(&self, path: &str) -> u16 {
        self.client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }
}

fn cluster_path(id: &str) -> String {
    id.split('/')
        .map(|s| {
            percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_render_the_fleet_and_a_failed_creation_as_the_exporter_sees_them() {
    let started = Instant::now();
    let dir = tempdir("web-ui");
    let browser = Browser::new(&dir);

    // One clock for the world and the exporter, run at real pace until the
    // test stops it.
    let clock = Clock::manual(jiff::Timestamp::now());
    let running = Arc::new(AtomicBool::new(true));
    let ticking = (clock.clone(), running.clone());
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(TICK).await;
            if ticking.1.load(Ordering::SeqCst) {
                ticking.0.advance(TICK);
            }
        }
    });
    let mut world = world::start_with_clock(world::demo(50, 7), clock.clone()).await;
    world.config.ui.trace_url_template = Some(TRACE_TEMPLATE.to_string());
    world.config.ui.grafana_url = Some(url::Url::parse(GRAFANA).unwrap());
    let exporter = exporter::of_world(&world)
        .clock(clock.clone())
        .routes(world.routes())
        .serve()
        .await;
    let base = exporter.url.clone();
    let run = Run {
        base: base.clone(),
        client: reqwest::Client::new(),
    };

    // A creation whose Clusters Service failed, failed in the exporter too,
    // while the churn deletes some cluster.
    let faulty = wait_for(
        "a creation whose Clusters Service failed, and a deletion in flight",
        Duration::from_secs(90),
        async || {
            let deleting = run.json("/api/v1/clusters?operation=delete&limit=1").await;
            if deleting["total"].as_u64().unwrap_or(0) == 0 {
                return None;
            }
            let truth = run.json(GROUND_TRUTH_PATH).await;
            for item in truth["items"].as_array()? {
                if item["fault"] != "clusters_service_error" {
                    continue;
                }
                let id = item["cluster_id"].as_str()?;
                let t = run
                    .json(&format!("/api/v1/clusters/{}", cluster_path(id)))
                    .await;
                if t["hops"]["clusters_service"]["phase"] == "failed" {
                    return Some(id.to_string());
                }
            }
            None
        },
    )
    .await
    .expect("the demo shows no creation whose Clusters Service failed");
    running.store(false, Ordering::SeqCst);
    run.settle().await;

    // The plain list is unchanged; with parameters it is one page of rows.
    let all = run.json("/api/v1/clusters").await;
    assert!(all["items"].as_array().unwrap().len() > 1, "{all}");
    assert!(all.get("total").is_none());
    let page = run.json("/api/v1/clusters?in_flight=true&limit=3").await;
    assert!(page["items"].as_array().unwrap().len() <= 3, "{page}");
    assert!(page["total"].as_u64().is_some(), "{page}");
    assert_eq!(run.status("/api/v1/clusters?hop=nowhere").await, 400);
    let fleet = run.json("/api/v1/fleet").await;
    assert!(
        fleet["hop_budgets_seconds"]["maestro_bundle"]
            .as_f64()
            .unwrap()
            > 0.0
    );

    // The fleet page: the funnel as /api/v1/clusters places the creations.
    let mut fleet_dom = String::new();
    let mut tries = Vec::new();
    for _ in 0..ATTEMPTS {
        let before = expected_funnel(&run.json("/api/v1/clusters").await);
        fleet_dom = browser.dom(&format!("{base}/")).await;
        let after = expected_funnel(&run.json("/api/v1/clusters").await);
        assert_rendered(&fleet_dom, "fleet");
        let shown = dom_funnel(&fleet_dom);
        if shown == before || shown == after {
            tries.clear();
            break;
        }
        tries.push(format!(
            "before {before:?}\nshown  {shown:?}\nafter  {after:?}"
        ));
    }
    assert!(
        tries.is_empty(),
        "the funnel never matched /api/v1/clusters:\n{}",
        tries.join("\n\n")
    );
    let failed_rows = tags(region(&fleet_dom, "failed"), "tr");
    let row = failed_rows
        .iter()
        .find(|a| a.get("data-cluster-id") == Some(&faulty))
        .unwrap_or_else(|| {
            panic!(
                "{faulty} is not among the failures:\n{}",
                region(&fleet_dom, "failed")
            )
        });
    // The failed hop the exporter's verdict names (the fleet is still), and
    // the Clusters Service error code.
    let json = run
        .json(&format!("/api/v1/clusters/{}", cluster_path(&faulty)))
        .await;
    let verdict = &json["verdict"];
    assert_eq!(row["data-status"], "failed");
    assert_eq!(verdict["status"], "failed");
    assert_eq!(Some(row["data-hop"].as_str()), verdict["hop"].as_str());
    let code = json["hops"]["clusters_service"]["error"]["code"]
        .as_str()
        .unwrap();
    let failed_text = region(&fleet_dom, "failed");
    assert!(
        failed_text.contains(&format!(">{code}<")),
        "the failure's error code is not shown:\n{failed_text}"
    );
    let sources = tags(region(&fleet_dom, "sources"), "tr");
    for source in ["rp_frontend", "clusters_service", "maestro"] {
        assert!(
            sources
                .iter()
                .any(|a| a.get("data-source").map(String::as_str) == Some(source)),
            "source {source} missing from the fleet page"
        );
    }

    // The cluster page: every hop with the phase the JSON gives it.
    let page_url = format!("{base}/ui/clusters/{}", cluster_path(&faulty));
    let json_path = format!("/api/v1/clusters/{}", cluster_path(&faulty));
    let mut cluster_dom = String::new();
    let mut timeline = Value::Null;
    let mut mismatches = Vec::new();
    for _ in 0..ATTEMPTS {
        let before = run.json(&json_path).await;
        cluster_dom = browser.dom(&page_url).await;
        let after = run.json(&json_path).await;
        assert_rendered(&cluster_dom, "cluster");
        let boxes: BTreeMap<String, String> = tags(region(&cluster_dom, "flow"), "div")
            .into_iter()
            .filter_map(|a| Some((a.get("data-hop")?.clone(), a.get("data-phase")?.clone())))
            .collect();
        mismatches = HOPS
            .iter()
            .filter_map(|hop| {
                let want = |t: &Value| {
                    t["hops"][*hop]["phase"]
                        .as_str()
                        .unwrap_or("none")
                        .to_string()
                };
                let shown = boxes.get(*hop).cloned().unwrap_or_default();
                (shown != want(&before) && shown != want(&after)).then(|| {
                    format!(
                        "{hop}: page {shown:?}, JSON {:?} then {:?}",
                        want(&before),
                        want(&after)
                    )
                })
            })
            .collect();
        timeline = after;
        if mismatches.is_empty() {
            break;
        }
    }
    assert!(
        mismatches.is_empty(),
        "hops drawn wrong on {page_url}:\n{}",
        mismatches.join("\n")
    );
    assert!(
        cluster_dom.contains("data-hop=\"clusters_service\" data-phase=\"failed\""),
        "the failed hop is not drawn failed"
    );
    let code = timeline["hops"]["clusters_service"]["error"]["code"]
        .as_str()
        .unwrap();
    assert!(
        tags(region(&cluster_dom, "flow"), "div")
            .iter()
            .any(|a| a.get("data-error-code").map(String::as_str) == Some(code)),
        "the error code {code} is not on the failed hop"
    );
    // The history drawn as the JSON holds it: as many rows as ended
    // operations, each with as many hop lanes as the entry has hops.
    let history = timeline["history"].as_array().cloned().unwrap_or_default();
    let drawn = region(&cluster_dom, "history");
    assert!(
        drawn.contains(&format!("data-history=\"{}\"", history.len())),
        "the history region does not hold {} operations:\n{drawn}",
        history.len()
    );
    let rows = tags(drawn, "tr");
    let drawn_rows: Vec<&BTreeMap<String, String>> = rows
        .iter()
        .filter(|a| a.contains_key("data-operation"))
        .collect();
    assert_eq!(drawn_rows.len(), history.len(), "{drawn}");
    for (row, entry) in drawn_rows.iter().zip(&history) {
        assert_eq!(row["data-operation"], entry["operation"].as_str().unwrap());
        assert_eq!(
            row["data-hops"],
            entry["hops"].as_array().map_or(0, Vec::len).to_string()
        );
    }
    // Conditions coloured by what they mean: a negative condition
    // (`Degraded`) is good when false, drawn as ready, not failed.
    let conditions = region(&cluster_dom, "conditions");
    let mut judged = 0;
    for row in conditions.split("<tr").skip(1) {
        let attrs = attributes(row);
        let (Some(kind), Some(status)) = (attrs.get("data-condition"), attrs.get("data-status"))
        else {
            continue;
        };
        let negative = kind.ends_with("Degraded");
        let want = match (status.as_str(), negative) {
            ("true", false) | ("false", true) => "phase-ready",
            ("true", true) | ("false", false) => "phase-failed",
            _ => "phase-unknown",
        };
        assert!(
            row.contains(want),
            "{kind}={status} is not drawn {want}: <tr{}",
            &row[..row.len().min(400)]
        );
        judged += 1;
    }
    assert!(judged > 0, "no condition drawn:\n{conditions}");
    let trace_id = timeline["trace_id"].as_str().unwrap();
    let links = tags(region(&cluster_dom, "identity"), "a");
    let trace = links
        .iter()
        .find(|a| a.contains_key("data-trace-link"))
        .expect("a trace link");
    assert_eq!(
        trace["href"],
        TRACE_TEMPLATE.replace("{trace_id}", trace_id)
    );
    let grafana = links
        .iter()
        .find(|a| a.contains_key("data-grafana-link"))
        .expect("a Grafana link");
    assert!(
        grafana["href"]
            .starts_with("https://grafana.example.invalid/d/hcp-flow-cluster?var-cluster_id="),
        "{}",
        grafana["href"]
    );

    // A deletion in flight: the fleet page's deletion funnel and the
    // cluster page's deletion flow, each hop as the JSON has it.
    let deleting = run.json("/api/v1/clusters?operation=delete&limit=1").await;
    let deleted = deleting["items"][0]["cluster_id"]
        .as_str()
        .expect("a deletion in flight")
        .to_string();
    let fleet = run.json("/api/v1/fleet").await;
    assert!(
        fleet["in_flight"]["delete"].as_u64().unwrap() >= 1,
        "{fleet}"
    );
    let delete_dom = browser.dom(&format!("{base}/?operation=delete")).await;
    assert_rendered(&delete_dom, "fleet");
    assert!(
        delete_dom.contains("data-operation=\"delete\""),
        "the funnel is not the deletion's"
    );
    assert!(
        tags(region(&delete_dom, "in-flight"), "tr")
            .iter()
            .any(|a| a.get("data-cluster-id") == Some(&deleted)),
        "{deleted} is not listed among the deletions in flight"
    );
    let json = run
        .json(&format!("/api/v1/clusters/{}", cluster_path(&deleted)))
        .await;
    assert_eq!(json["operation_in_flight"], "delete", "{json}");
    let dom = browser
        .dom(&format!("{base}/ui/clusters/{}", cluster_path(&deleted)))
        .await;
    assert_rendered(&dom, "cluster");
    let drawn: BTreeMap<String, String> = tags(region(&dom, "operations"), "div")
        .into_iter()
        .filter_map(|a| {
            Some((
                a.get("data-delete-hop")?.clone(),
                a.get("data-phase")?.clone(),
            ))
        })
        .collect();
    assert_eq!(drawn.len(), HOPS.len(), "{drawn:?}");
    let deletion = json["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["operation"] == "delete")
        .expect("the deletion among the operations");
    for hop in HOPS {
        let gone = deletion["hops"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|h| h["hop"] == hop && !h["done_at"].is_null());
        let want = if gone {
            "ready".to_string()
        } else {
            json["hops"][hop]["phase"]
                .as_str()
                .unwrap_or("none")
                .to_string()
        };
        assert_eq!(drawn[hop], want, "{hop} of {deleted}'s deletion");
    }

    // An unknown cluster renders as such, not as a broken page.
    let missing = browser
        .dom(&format!("{base}/ui/clusters/no/such:cluster"))
        .await;
    assert_rendered(&missing, "cluster");
    assert!(missing.contains("data-found=\"false\""), "{missing}");

    // Screenshots: the fleet, and the richest creation in flight (the failed
    // one when none is).
    let shown = richest_in_flight(&run.json("/api/v1/clusters").await).unwrap_or(faulty);
    let fleet_png = dir.join("ui-fleet.png");
    let cluster_png = dir.join("ui-cluster.png");
    browser.screenshot(&format!("{base}/"), &fleet_png).await;
    browser
        .screenshot(
            &format!("{base}/ui/clusters/{}", cluster_path(&shown)),
            &cluster_png,
        )
        .await;
    if std::env::var_os("HCPFLOW_UI_SCREENSHOTS").is_some_and(|v| v == "1") {
        let images = Path::new(ROOT).join("docs/images");
        std::fs::create_dir_all(&images).unwrap();
        std::fs::copy(&fleet_png, images.join("ui-fleet.png")).unwrap();
        std::fs::copy(&cluster_png, images.join("ui-cluster.png")).unwrap();
    }
    eprintln!("web UI checked in {:?}", started.elapsed());
}

/// The in-flight creation with the most hops seen, node pools first: the
/// cluster page with the most to show.
fn richest_in_flight(clusters: &Value) -> Option<String> {
    clusters["items"]
        .as_array()?
        .iter()
        .filter(|t| t["outcome"] == "in_flight")
        .max_by_key(|t| {
            let hops = t["hops"].as_object().map_or(0, |h| h.len());
            (t["hops"].get("node_pool").is_some(), hops)
        })
        .and_then(|t| t["cluster_id"].as_str().map(str::to_string))
}
