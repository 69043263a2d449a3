//! Slack and Telegram through a real Alertmanager running the example
//! configuration (`alertmanager/alertmanager.yml` and its templates), fed by
//! a real Prometheus evaluating `alerts/` over the in-process demo with
//! faults on. Loopback stand-ins of the Slack incoming webhook and of the
//! Telegram Bot API record what Alertmanager posts.
//!
//! - Warning: a Clusters Service error fails the clusters_service and
//!   rp_frontend hops of a cluster (HCPHopFailed, to #hcp-flow-alerts) until
//!   the cluster is deleted, which resolves it.
//! - Critical: a completed HostedCluster loses Available for a while
//!   (HCPHostedClusterUnavailable, paging to Telegram and #hcp-flow-page),
//!   then comes back.
//! - Inhibition: a bundle that never reports makes both
//!   HCPMaestroStatusNotUpdated and HCPOperationStuckAtHop fire on the same
//!   cluster and hop; only the specific one may reach Slack.
//!
//! Needs `prometheus` and `prometheus-alertmanager` (Debian packages;
//! .ci/run installs them).

use crate::common::procs;
use procs::{now_secs, query, start_alertmanager, tempdir, wait_for, wait_ready};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::common::{exporter, world};
use hcp_flow::sim::FaultKind;
use hcp_flow::sim::WorldConfig;
use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::common::ROOT;
const RUNBOOKS: &str = "https://github.com/hcp-flow/hcp-flow/blob/main/docs/runbooks.md";
/// The alerts that inhibit HCPOperationStuckAtHop on the same cluster and hop.
const SPECIFIC: [&str; 5] = [
    "HCPMaestroBundleNotApplied",
    "HCPManifestWorkNotApplied",
    "HCPMaestroStatusNotUpdated",
    "HCPHostedClusterDegraded",
    "HCPNodePoolBelowDesired",
];

/// The test's `group_wait` and `group_interval`, in seconds (see
/// [`example_config`]).
const GROUP_WAIT: f64 = 3.0;
const GROUP_INTERVAL: f64 = 5.0;

/// One POST a stand-in received: when, its path, its JSON body.
#[derive(Clone, Debug)]
struct Post {
    at: f64,
    path: String,
    body: Value,
}

type Posts = Arc<Mutex<Vec<Post>>>;

/// The Slack incoming webhook: `POST /services/...` with a JSON message,
/// answered `200 ok` as Slack does.
async fn slack_standin() -> (String, Posts) {
    let posts: Posts = Arc::default();
    let sink = posts.clone();
    let app = axum::Router::new().route(
        "/{*path}",
        axum::routing::post(
            move |axum::extract::Path(path): axum::extract::Path<String>,
                  axum::Json(body): axum::Json<Value>| {
                let sink = sink.clone();
                async move {
                    sink.lock().push(Post {
                        at: now_secs(),
                        path,
                        body,
                    });
                    "ok"
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (
        format!("http://{addr}/services/T0HCPFLOW/B0HCPFLOW/test-webhook"),
        posts,
    )
}

/// The Telegram Bot API's `POST /bot<token>/sendMessage`. Alertmanager
/// 0.25 sends through telebot v3, which needs the real answer:
/// `{"ok":true,"result":<Message>}` with the message's `chat` (Alertmanager
/// logs `message.Chat.ID` after a send), or
/// `{"ok":false,"error_code":400,"description":...}` for a message Telegram
/// would refuse. Like Telegram, it refuses text whose HTML it cannot parse
/// when `parse_mode` is HTML; refusals are recorded too.
async fn telegram_standin() -> (String, Posts, Posts) {
    let posts: Posts = Arc::default();
    let refused: Posts = Arc::default();
    let (sink, refusals) = (posts.clone(), refused.clone());
    let app = axum::Router::new().route(
        "/{*path}",
        axum::routing::post(
            move |axum::extract::Path(path): axum::extract::Path<String>,
                  axum::Json(body): axum::Json<Value>| {
                let (sink, refusals) = (sink.clone(), refusals.clone());
                async move {
                    let post = Post {
                        at: now_secs(),
                        path: path.clone(),
                        body: body.clone(),
                    };
                    let text = body["text"].as_str().unwrap_or_default();
                    let error = if !path.starts_with("bot") || !path.ends_with("/sendMessage") {
                        Some((404, "Not Found".to_string()))
                    } else if body["parse_mode"] == "HTML" {
                        telegram_html_error(text)
                            .map(|e| (400, format!("Bad Request: can't parse entities: {e}")))
                    } else {
                        None
                    };
                    if let Some((code, description)) = error {
                        refusals.lock().push(post);
                        let answer =
                            json!({"ok": false, "error_code": code, "description": description});
                        return (
                            axum::http::StatusCode::from_u16(code).unwrap(),
                            axum::Json(answer),
                        );
                    }
                    let mut guard = sink.lock();
                    guard.push(post);
                    // chat_id arrives as a string (telebot sends every
                    // parameter as one); Telegram answers it as a number.
                    let chat: i64 = body["chat_id"].as_str().unwrap_or("0").parse().unwrap_or(0);
                    let answer = json!({"ok": true, "result": {
                        "message_id": guard.len(),
                        "date": now_secs() as i64,
                        "chat": {"id": chat, "type": "supergroup", "title": "hcp-flow on-call"},
                        "text": text,
                    }});
                    (axum::http::StatusCode::OK, axum::Json(answer))
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}"), posts, refused)
}

/// What Telegram's HTML parse mode refuses: a tag it does not support, an
/// unclosed or misnested tag, a named entity other than `&lt; &gt; &amp;
/// &quot;` (numeric ones are fine), a bare `<` or `&`.
fn telegram_html_error(text: &str) -> Option<String> {
    const TAGS: [&str; 14] = [
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "a",
        "code",
        "pre",
        "blockquote",
        "tg-spoiler",
    ];
    let mut open: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(['<', '&']) {
        let tail = &rest[at..];
        if tail.starts_with('&') {
            let Some(end) = tail.find(';') else {
                return Some("unescaped &".into());
            };
            let entity = &tail[1..end];
            let numeric = entity.strip_prefix('#').is_some_and(|n| {
                n.strip_prefix('x')
                    .map_or(n.chars().all(|c| c.is_ascii_digit()), |h| {
                        h.chars().all(|c| c.is_ascii_hexdigit())
                    })
            });
            if !numeric && !["lt", "gt", "amp", "quot"].contains(&entity) {
                return Some(format!("unsupported entity &{entity};"));
            }
            rest = &tail[end + 1..];
            continue;
        }
        let Some(end) = tail.find('>') else {
            return Some("unclosed start tag".into());
        };
        let tag = &tail[1..end];
        if let Some(name) = tag.strip_prefix('/') {
            if open.pop().as_deref() != Some(name) {
                return Some(format!("unexpected end tag </{name}>"));
            }
        } else {
            let name = tag.split_whitespace().next().unwrap_or("");
            if !TAGS.contains(&name) {
                return Some(format!("unsupported start tag \"{name}\""));
            }
            if name == "a" && !tag.contains("href=\"") {
                return Some("a tag without href".into());
            }
            open.push(name.to_string());
        }
        rest = &tail[end + 1..];
    }
    open.last()
        .map(|t| format!("can't find end tag corresponding to start tag \"{t}\""))
}

#[test]
fn telegram_standin_refuses_what_telegram_refuses() {
    for ok in [
        "🔥 <b>FIRING</b> x\n<code>a &lt;b&gt; &amp; &quot; &#34;</code> <a href=\"https://x/#y\">runbook</a>",
        "plain text",
    ] {
        assert_eq!(telegram_html_error(ok), None, "{ok}");
    }
    for bad in [
        "<br>",
        "<b>open",
        "<b><code>x</b></code>",
        "</b>",
        "a < b",
        "&nbsp;",
        "&",
        "<a>x</a>",
    ] {
        assert!(telegram_html_error(bad).is_some(), "accepted {bad:?}");
    }
}

/// The example configuration, rewritten only where a test must, written to
/// `dir`:
/// - `global.slack_api_url_file` points at a file holding the stand-in's URL
///   (the real path names a mounted Secret);
/// - every `telegram_configs` entry gets `api_url` = the stand-in (Telegram
///   is on the internet);
/// - `templates` globs become absolute (the file moved; the templates did not);
/// - every route's `group_wait` and `group_interval` become GROUP_WAIT and
///   GROUP_INTERVAL: the
///   test's Prometheus evaluates every second, not every 30s to 1m, so the
///   waits shrink alike and the whole run takes minutes. `repeat_interval`
///   stays: nothing here lasts long enough to repeat.
///
/// Receivers, routes, matchers, grouping, inhibitions, templates, chat id
/// and token are the example's own.
fn example_config(dir: &Path, slack_url: &str, telegram_api: &str) -> (PathBuf, Value) {
    let source = Path::new(ROOT).join("alertmanager");
    let text = std::fs::read_to_string(source.join("alertmanager.yml")).unwrap();
    let example: Value = serde_saphyr::from_str(&text).unwrap();
    let mut config = example.clone();
    let secret = dir.join("slack-webhook-url");
    std::fs::write(&secret, format!("{slack_url}\n")).unwrap();
    assert!(
        config["global"]["slack_api_url_file"].is_string(),
        "the example no longer reads the Slack URL from a file"
    );
    config["global"]["slack_api_url_file"] = json!(secret);
    for glob in config["templates"].as_array_mut().unwrap() {
        *glob = json!(source.join(glob.as_str().unwrap()));
    }
    let mut telegram = 0;
    for receiver in config["receivers"].as_array_mut().unwrap() {
        for t in receiver["telegram_configs"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            t["api_url"] = json!(telegram_api);
            telegram += 1;
        }
    }
    assert!(telegram > 0, "the example has no telegram_configs");
    fn shorten(route: &mut Value) {
        for (key, seconds) in [
            ("group_wait", GROUP_WAIT),
            ("group_interval", GROUP_INTERVAL),
        ] {
            if route.get(key).is_some() {
                route[key] = json!(format!("{seconds}s"));
            }
        }
        for child in route["routes"].as_array_mut().into_iter().flatten() {
            shorten(child);
        }
    }
    shorten(&mut config["route"]);
    let path = dir.join("alertmanager.yml");
    // JSON is YAML; Alertmanager reads it as its configuration.
    std::fs::write(&path, config.to_string()).unwrap();
    (path, example)
}

/// A Slack message as the stand-in got it.
#[derive(Clone, Debug)]
struct Slack {
    at: f64,
    channel: String,
    title: String,
    title_link: String,
    text: String,
    color: String,
}

impl Slack {
    fn from(post: &Post) -> Slack {
        let a = &post.body["attachments"][0];
        let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
        Slack {
            at: post.at,
            channel: s(&post.body["channel"]),
            title: s(&a["title"]),
            title_link: s(&a["title_link"]),
            text: s(&a["text"]),
            color: s(&a["color"]),
        }
    }

    fn firing(&self) -> bool {
        self.title.starts_with("[FIRING:")
    }

    fn resolved(&self) -> bool {
        self.title.starts_with("[RESOLVED]")
    }

    /// The alert name: the title's word after the status.
    fn alertname(&self) -> &str {
        self.title.split(' ').nth(1).unwrap_or("")
    }
}

/// The alerts a Slack message lists (the template writes each from its
/// `*summary*` line on) that are still firing: a group's message also lists
/// its alerts resolved since the last one, marked "resolved:".
fn firing_alerts(text: &str) -> Vec<String> {
    let mut alerts = alert_parts(text);
    alerts.retain(|a| !a.contains("• resolved: "));
    alerts
}

/// Cluster ids a message names, from its "cluster: NAME (ID)" parts.
fn clusters_named(text: &str) -> BTreeSet<String> {
    text.split("cluster: ")
        .skip(1)
        .filter_map(|part| {
            let line = part.lines().next()?;
            let open = line.find('(')?;
            let close = line[open..].find(')')? + open;
            Some(line[open + 1..close].to_string())
        })
        .collect()
}

/// Every "since: YYYY-MM-DD HH:MM UTC" of a message.
fn sinces(text: &str) -> Vec<jiff::Timestamp> {
    text.split("since: ")
        .skip(1)
        .map(|part| {
            let stamp = part.get(..20).unwrap_or(part);
            let civil: jiff::civil::DateTime = stamp
                .trim_end_matches(" UTC")
                .parse()
                .unwrap_or_else(|e| panic!("since is not a UTC minute: {stamp:?}: {e}"));
            civil.to_zoned(jiff::tz::TimeZone::UTC).unwrap().timestamp()
        })
        .collect()
}

/// Asserts one message says when its alerts started: a minute between the
/// test's start (floored) and now.
fn assert_since(channel: &str, text: &str, start: f64) {
    let all = sinces(text);
    assert!(!all.is_empty(), "{channel} message has no since:\n{text}");
    for since in all {
        let at = since.as_second() as f64;
        assert!(
            at >= start - start % 60.0 && at <= now_secs(),
            "{channel} message says since {since}, outside the run:\n{text}"
        );
    }
}

/// What the world says about a cluster: its name and injected fault.
type Known = BTreeMap<String, (String, Option<FaultKind>)>;

/// An alert as its Slack lines name it: cluster, hop and node pool, and for
/// a stuck alert its operation.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Named {
    alertname: String,
    cluster: String,
    hop: String,
    node_pool: Option<String>,
    operation: Option<String>,
}

impl Named {
    fn of(labels: &Value) -> Option<Named> {
        let label = |k: &str| labels[k].as_str().map(str::to_string);
        Some(Named {
            alertname: label("alertname")?,
            cluster: label("cluster_id")?,
            hop: label("hop")?,
            node_pool: label("node_pool").filter(|p| !p.is_empty()),
            operation: label("operation").filter(|o| !o.is_empty()),
        })
    }

    /// Whether one alert's part of a Slack message is this alert.
    fn is(&self, part: &str) -> bool {
        clusters_named(part).contains(&self.cluster)
            && part.contains(&format!("hop: `{}`", self.hop))
            && match &self.node_pool {
                Some(pool) => part.contains(&format!("node pool: `{pool}`")),
                None => !part.contains("node pool: `"),
            }
            && self
                .operation
                .as_ref()
                .is_none_or(|op| part.contains(&format!("The {op} operation ")))
    }
}

/// HCPOperationStuckAtHop alerts Alertmanager holds inhibited, each with the
/// alert inhibiting it, from Alertmanager's own `inhibitedBy` fingerprints.
async fn inhibited_stuck(client: &reqwest::Client, am: &str) -> BTreeSet<(Named, Named)> {
    let Ok(r) = client.get(format!("{am}/api/v2/alerts")).send().await else {
        return BTreeSet::new();
    };
    let alerts: Value = r.json().await.unwrap_or_default();
    let alerts = alerts.as_array().cloned().unwrap_or_default();
    let by_fingerprint: BTreeMap<&str, &Value> = alerts
        .iter()
        .filter_map(|a| Some((a["fingerprint"].as_str()?, &a["labels"])))
        .collect();
    let mut pairs = BTreeSet::new();
    for alert in &alerts {
        if alert["labels"]["alertname"] != "HCPOperationStuckAtHop"
            || alert["status"]["state"] != "suppressed"
        {
            continue;
        }
        let Some(stuck) = Named::of(&alert["labels"]) else {
            continue;
        };
        for by in alert["status"]["inhibitedBy"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(inhibitor) = by
                .as_str()
                .and_then(|f| by_fingerprint.get(f))
                .and_then(|labels| Named::of(labels))
                .filter(|i| SPECIFIC.contains(&i.alertname.as_str()))
            {
                pairs.insert((stuck.clone(), inhibitor));
            }
        }
    }
    pairs
}

/// The parts of a Slack message, one per alert (the template writes each
/// from its `*summary*` line on), firing or resolved.
fn alert_parts(text: &str) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.starts_with('*') || parts.is_empty() {
            parts.push(String::new());
        }
        let part = parts.last_mut().unwrap();
        part.push_str(line);
        part.push('\n');
    }
    parts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slack_and_telegram_get_firing_and_resolved_messages_grouped_and_inhibited() {
    // Alerts against their budgets: timing-sensitive (`load`).
    let _machine = crate::common::load::heavy();
    let dir = tempdir("am-channels");
    let start = now_secs();

    // The demo at 120x: faulty clusters live 90-120 s, a lost control plane
    // comes back within 20 s; budgets and holds are scaled alike.
    let world = world::start(WorldConfig {
        speed: 120.0,
        ..world::demo(50, 7)
    })
    .await;
    let exporter = exporter::of_world(&world).serve().await;

    let (slack_url, slack_posts) = slack_standin().await;
    let (telegram_api, telegram_posts, telegram_refused) = telegram_standin().await;
    let (am_config, example) = example_config(&dir, &slack_url, &telegram_api);
    let (am_process, am) = start_alertmanager("alertmanager", &am_config, &dir);

    let (prom_process, prometheus) = procs::prometheus("prometheus")
        .shipped_rules()
        .alertmanager(&am)
        .scrape("hcp-flow", &exporter.url)
        .start(&dir);
    let client = reqwest::Client::new();
    let logs = || format!("{}\n{}", prom_process.log_tail(), am_process.log_tail());
    for base in [&prometheus, &am] {
        assert!(
            wait_ready(&client, base, Duration::from_secs(30)).await,
            "{base} never became ready\n{}",
            logs()
        );
    }

    // Run until every scenario has played out, remembering what the world
    // says about each cluster (a deleted cluster leaves the truth) and which
    // stuck alerts Alertmanager held inhibited.
    let mut known = Known::new();
    let mut inhibited = BTreeSet::new();
    let mut last_progress = String::new();
    let done = wait_for(
        "firing and resolved messages on both channels, and an inhibition",
        Duration::from_secs(200),
        async || {
            for c in world.world.truth().clusters {
                known.insert(c.cluster_id, (c.name, c.fault));
            }
            inhibited.extend(inhibited_stuck(&client, &am).await);
            let slack: Vec<Slack> = slack_posts.lock().iter().map(Slack::from).collect();
            let telegram: Vec<Post> = telegram_posts.lock().clone();
            let both = |messages: &[&Slack]| -> BTreeSet<String> {
                let fired: BTreeSet<String> = messages
                    .iter()
                    .filter(|m| m.firing())
                    .flat_map(|m| clusters_named(&m.text))
                    .collect();
                messages
                    .iter()
                    .filter(|m| m.resolved())
                    .flat_map(|m| clusters_named(&m.text))
                    .filter(|c| fired.contains(c))
                    .collect()
            };
            let hop_failed: Vec<&Slack> = slack
                .iter()
                .filter(|m| m.alertname() == "HCPHopFailed")
                .collect();
            let page: Vec<&Slack> = slack
                .iter()
                .filter(|m| m.alertname() == "HCPHostedClusterUnavailable")
                .collect();
            let telegram_both: BTreeSet<String> = {
                let of = |status: &str| -> BTreeSet<String> {
                    telegram
                        .iter()
                        .filter_map(|p| p.body["text"].as_str())
                        .filter(|t| t.contains(status) && t.contains("HCPHostedClusterUnavailable"))
                        .flat_map(clusters_named)
                        .collect()
                };
                of("<b>FIRING</b>")
                    .intersection(&of("<b>RESOLVED</b>"))
                    .cloned()
                    .collect()
            };
            let fired_clusters: BTreeSet<String> = hop_failed
                .iter()
                .filter(|m| m.firing())
                .flat_map(|m| clusters_named(&m.text))
                .collect();
            let inhibitor_seen = slack.iter().any(|m| {
                inhibited.iter().any(|(_, by)| {
                    m.alertname() == by.alertname
                        && firing_alerts(&m.text).iter().any(|part| by.is(part))
                })
            });
            // Only a Clusters Service error fails the clusters_service hop
            // (a degraded HostedCluster fails its own hop too).
            let cs_error = |id: &String| {
                known
                    .get(id)
                    .is_some_and(|(_, f)| *f == Some(FaultKind::ClustersServiceError))
            };
            let cs_resolved = both(&hop_failed).into_iter().filter(cs_error).count();
            let progress = format!(
                "HCPHopFailed fired on {} clusters, resolved on {cs_resolved} with a Clusters \
                 Service error; paged and resolved on Slack {}, on Telegram {}; stuck alerts \
                 inhibited {}",
                fired_clusters.len(),
                both(&page).len(),
                telegram_both.len(),
                inhibited.len(),
            );
            if progress != last_progress {
                eprintln!("{progress}");
                last_progress = progress;
            }
            (cs_resolved > 0
                && fired_clusters.len() >= 2
                && !both(&page)
                    .intersection(&telegram_both)
                    .collect::<Vec<_>>()
                    .is_empty()
                && inhibitor_seen)
                .then_some(())
        },
    )
    .await;
    let slack: Vec<Slack> = slack_posts.lock().iter().map(Slack::from).collect();
    let telegram: Vec<Post> = telegram_posts.lock().clone();
    // Every message as received, kept with the logs when the test fails.
    let dump: Vec<Value> = slack_posts
        .lock()
        .iter()
        .chain(telegram.iter())
        .map(|p| json!({"at": p.at, "path": p.path, "body": p.body}))
        .collect();
    std::fs::write(
        dir.join("messages.json"),
        serde_json::to_string_pretty(&dump).unwrap(),
    )
    .unwrap();
    let summary = || {
        let titles: Vec<String> = slack
            .iter()
            .map(|m| format!("{} {}", m.channel, m.title))
            .collect();
        format!(
            "Slack got:\n  {}\nTelegram got {} messages, refused {:?}\n\
             every message: {}\n{}",
            titles.join("\n  "),
            telegram.len(),
            telegram_refused.lock(),
            dir.join("messages.json").display(),
            logs()
        )
    };
    assert!(
        done.is_some(),
        "not every scenario played out: {last_progress}\n{}",
        summary()
    );
    let alerts_fired = query(&client, &prometheus, "ALERTS").await.unwrap();
    eprintln!(
        "{} alert series at the end; {} Slack and {} Telegram messages",
        alerts_fired.as_array().map_or(0, Vec::len),
        slack.len(),
        telegram.len()
    );

    // Telegram: every message accepted, to the example's token and chat.
    assert!(
        telegram_refused.lock().is_empty(),
        "Telegram would refuse these messages\n{}",
        summary()
    );
    let page = &example["receivers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "hcp-flow-page")
        .unwrap()["telegram_configs"][0];
    for post in &telegram {
        assert_eq!(
            post.path,
            format!("bot{}/sendMessage", page["bot_token"].as_str().unwrap())
        );
        assert_eq!(
            post.body["chat_id"],
            page["chat_id"].as_i64().unwrap().to_string()
        );
        assert_eq!(post.body["parse_mode"], "HTML");
    }

    // Warning → #hcp-flow-alerts only: a cluster whose Clusters Service
    // failed, both failed hops in one message, then resolved by name.
    let hop_failed: Vec<&Slack> = slack
        .iter()
        .filter(|m| m.alertname() == "HCPHopFailed")
        .collect();
    for m in &hop_failed {
        assert_eq!(m.channel, "#hcp-flow-alerts", "{m:?}");
        // One group per alert name and cluster: never two clusters in one.
        assert_eq!(clusters_named(&m.text).len(), 1, "{m:?}");
    }
    assert!(
        !telegram
            .iter()
            .any(|p| p.body["text"].as_str().unwrap().contains("HCPHopFailed")),
        "a warning reached Telegram"
    );
    let (firing, resolved) = hop_failed
        .iter()
        .filter(|m| m.firing())
        .find_map(|f| {
            let id = clusters_named(&f.text).pop_first()?;
            if known.get(&id)?.1 != Some(FaultKind::ClustersServiceError) {
                return None;
            }
            let r = hop_failed
                .iter()
                .find(|r| r.resolved() && clusters_named(&r.text).contains(&id))?;
            Some((*f, *r))
        })
        .unwrap_or_else(|| {
            panic!(
                "no HCPHopFailed of a Clusters Service error fired and resolved\n{}",
                summary()
            )
        });
    let id = clusters_named(&firing.text).pop_first().unwrap();
    let (name, fault) = known.get(&id).cloned().unwrap_or_default();
    assert_eq!(
        fault,
        Some(FaultKind::ClustersServiceError),
        "{id}: {firing:?}"
    );
    let named = format!("{name} ({id})");
    for needle in [
        format!("HCPHopFailed on {named}"),
        format!("cluster: {named}"),
        "hop: `clusters_service`".to_string(),
        "severity: warning".to_string(),
        format!("<{RUNBOOKS}#hcphopfailed|runbook>"),
    ] {
        assert!(
            firing.title.contains(&needle) || firing.text.contains(&needle),
            "the firing Slack message lacks {needle:?}: {firing:#?}"
        );
    }
    assert_eq!(firing.title_link, format!("{RUNBOOKS}#hcphopfailed"));
    assert_eq!(firing.color, "warning");
    assert_since("Slack", &firing.text, start);
    // Grouping: the failed RP hop of the same cluster is in a message of
    // the same group, not a message of its own.
    assert!(
        hop_failed.iter().any(|m| {
            let alerts = firing_alerts(&m.text);
            let fired = |hop: &str| alerts.iter().any(|a| a.contains(&format!("hop: `{hop}`")));
            clusters_named(&m.text).contains(&id)
                && fired("clusters_service")
                && fired("rp_frontend")
        }),
        "no message lists both failed hops of {named}\n{}",
        summary()
    );
    assert!(
        resolved
            .title
            .starts_with(&format!("[RESOLVED] HCPHopFailed on {named}"))
            && resolved.text.contains("resolved: ")
            && resolved.color == "good"
            && resolved.at > firing.at,
        "the resolved message does not say so: {resolved:#?}"
    );
    let clusters: BTreeSet<String> = hop_failed
        .iter()
        .flat_map(|m| clusters_named(&m.text))
        .collect();
    assert!(clusters.len() >= 2, "one cluster only: {clusters:?}");

    // Critical → Telegram and #hcp-flow-page, not #hcp-flow-alerts.
    let paged: Vec<&Slack> = slack
        .iter()
        .filter(|m| m.alertname() == "HCPHostedClusterUnavailable")
        .collect();
    for m in &paged {
        assert_eq!(m.channel, "#hcp-flow-page", "{m:?}");
    }
    let texts: Vec<&str> = telegram
        .iter()
        .filter_map(|p| p.body["text"].as_str())
        .filter(|t| t.contains("HCPHostedClusterUnavailable"))
        .collect();
    // The page of a cluster whose HostedCluster was made to lose Available.
    // (A cluster whose Maestro status froze before its HostedCluster was
    // Available can page too, from the stale feedback, until the direct
    // view takes over: a known gap, docs/alerts.md, not what this test is
    // about.)
    let (t_firing, t_resolved, id) = texts
        .iter()
        .filter(|t| t.starts_with("🔥 <b>FIRING</b> HCPHostedClusterUnavailable"))
        .find_map(|f| {
            let id = clusters_named(f).into_iter().find(|id| {
                known.get(id).and_then(|(_, fault)| *fault)
                    == Some(FaultKind::HostedClusterUnavailable)
            })?;
            let r = texts.iter().find(|r| {
                r.starts_with("✅ <b>RESOLVED</b> HCPHostedClusterUnavailable")
                    && clusters_named(r).contains(&id)
            })?;
            Some((*f, *r, id))
        })
        .unwrap_or_else(|| panic!("no page fired and resolved on Telegram\n{}", summary()));
    let (name, fault) = known.get(&id).cloned().unwrap_or_default();
    assert_eq!(
        fault,
        Some(FaultKind::HostedClusterUnavailable),
        "{id}: {t_firing}"
    );
    let named = format!("{name} ({id})");
    for needle in [
        format!("cluster: {named}"),
        "hop: <code>hosted_cluster</code>".to_string(),
        "severity: critical".to_string(),
        format!("<a href=\"{RUNBOOKS}#hcphostedclusterunavailable\">runbook</a>"),
    ] {
        assert!(
            t_firing.contains(&needle),
            "the Telegram page lacks {needle:?}:\n{t_firing}"
        );
    }
    assert_since("Telegram", t_firing, start);
    assert!(
        t_resolved.contains(&format!("cluster: {named}")) && t_resolved.contains(", resolved: "),
        "the Telegram resolution does not say so:\n{t_resolved}"
    );
    for status in ["[FIRING:", "[RESOLVED]"] {
        assert!(
            paged.iter().any(|m| m.title.starts_with(status)
                && m.title.contains(&named)
                && m.text.contains("severity: critical")),
            "#hcp-flow-page has no {status} message for {named}\n{}",
            summary()
        );
    }

    // Inhibition: while the alert Alertmanager named as inhibiting a stuck
    // alert surely fires, no message carries that stuck alert as firing.
    // Surely: from the inhibitor's first firing message to a group interval
    // before the first message that lists it resolved (its resolution
    // reached Alertmanager at most that long before; the stuck alert still
    // firing then is no longer inhibited). The pairs are Alertmanager's
    // own, so a pool's stuck alert is held only against its own pool's.
    let mut checked = 0;
    for (stuck, by) in &inhibited {
        let parts = |firing: bool| {
            slack
                .iter()
                .filter(|m| m.alertname() == by.alertname)
                .flat_map(|m| alert_parts(&m.text).into_iter().map(|p| (m.at, p)))
                .filter(move |(_, part)| by.is(part) && part.contains("• resolved: ") != firing)
                .map(|(at, _)| at)
                .collect::<Vec<f64>>()
        };
        let Some(from) = parts(true).into_iter().reduce(f64::min) else {
            continue;
        };
        let until = parts(false)
            .into_iter()
            .filter(|at| *at > from)
            .reduce(f64::min)
            .map_or(f64::INFINITY, |at| at - GROUP_INTERVAL);
        checked += 1;
        let leaked: Vec<&Slack> = slack
            .iter()
            .filter(|m| {
                m.alertname() == "HCPOperationStuckAtHop"
                    && (from..until).contains(&m.at)
                    && firing_alerts(&m.text).iter().any(|part| stuck.is(part))
            })
            .collect();
        assert!(
            leaked.is_empty(),
            "{stuck:?} was sent while {by:?} fired: {leaked:#?}"
        );
    }
    assert!(
        checked > 0,
        "no inhibited stuck alert had its specific alert in Slack: {inhibited:?}\n{}",
        summary()
    );
    drop((prom_process, am_process));
    let _ = std::fs::remove_dir_all(&dir);
}
