//! A restart never moves a published time for upstream state that did not
//! change (docs/design/03-timeline-model.md §3.8).
//!
//! In process: the store keeps the memory of live clusters only, and only
//! with a state store. End to end: the real `hcp-flow serve --state-dir D`
//! against a simulated world whose clock stands still, stopped with SIGTERM
//! and started again on the same directory, must publish exactly the same
//! per-cluster `*_timestamp_seconds` series and the same JSON times and
//! verdicts; the same restart without a state directory must move some
//! observed time (else the test could not fail).

use crate::common::store;
use crate::common::world as testworld;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hcp_flow::demo::{self};
use hcp_flow::model::testing::{batch, obs};
use hcp_flow::model::{ClusterMemory, Hop, HopMemory, Memory, ModelConfig, Phase};
use hcp_flow::sim::{SimClock, World, WorldConfig};
use hcp_flow::state_store::FILE_NAME;
use hcp_flow::store::Store;
use jiff::Timestamp;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_hcp-flow");

fn t(minutes: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + minutes * 60).unwrap()
}

fn store() -> Arc<Store> {
    store::builder()
        .model(ModelConfig {
            terminal_hops: vec![Hop::ClustersService],
            ..ModelConfig::default()
        })
        .sources(&["test"])
        .build()
}

fn remembered(since: Timestamp) -> ClusterMemory {
    ClusterMemory {
        hops: vec![HopMemory {
            hop: Hop::ClustersService,
            phase: Phase::Progressing,
            since,
            since_observed: true,
            ready_at: None,
            ended: false,
            ended_via_maestro: false,
            objects: Vec::new(),
        }],
        ..ClusterMemory::default()
    }
}

#[test]
fn without_a_state_store_nothing_is_remembered() {
    let _machine = crate::common::load::share();
    let store = store();
    store.apply_at(
        batch(
            true,
            t(1),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("installing", Phase::Progressing)
                    .created(t(0)),
            ],
        ),
        t(1),
    );
    assert!(!store.memory_dirty());
    assert!(store.memory_snapshot().is_empty());
}

#[test]
fn the_store_remembers_live_clusters_and_forgets_deleted_ones() {
    let _machine = crate::common::load::share();
    let store = store();
    let mut memory = Memory::default();
    memory.clusters.insert("c-live".into(), remembered(t(2)));
    memory.clusters.insert("c-deleted".into(), remembered(t(3)));
    store.restore(memory);
    assert!(!store.memory_dirty(), "what was read is on disk");

    store.apply_at(
        batch(
            true,
            t(10),
            vec![
                obs("c-live", Hop::ClustersService)
                    .state("installing", Phase::Progressing)
                    .created(t(0)),
                obs("c-new", Hop::ClustersService)
                    .state("validating", Phase::Pending)
                    .created(t(9)),
            ],
        ),
        t(10),
    );
    assert!(store.memory_dirty());
    let snapshot = store.memory_snapshot();
    let ids: Vec<&str> = snapshot
        .clusters
        .iter()
        .map(|(id, _)| id.as_str())
        .collect();
    // c-deleted is kept until every source has synced without showing it.
    assert_eq!(ids, ["c-deleted", "c-live", "c-new"]);
    let new = &snapshot.clusters[2].1;
    let cs = new
        .hops
        .iter()
        .find(|h| h.hop == Hop::ClustersService)
        .unwrap();
    assert!(cs.since_observed, "CS gives no time for its state: {cs:?}");
    assert_eq!(cs.since, t(10));
    store.memory_saved(snapshot.generation);
    assert!(!store.memory_dirty());

    // Every source has listed: a restored cluster nobody showed is gone.
    store.health().listed("test", "*");
    store.tick_at(t(11));
    let ids: Vec<String> = store
        .memory_snapshot()
        .clusters
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(ids, ["c-live", "c-new"]);
    assert!(store.memory_dirty());

    // A deleted cluster leaves the memory with its timeline.
    let mut gone = obs("c-new", Hop::ClustersService);
    gone.observation.change = hcp_flow::model::Change::Gone;
    store.apply_at(batch(false, t(12), vec![gone]), t(12));
    let ids: Vec<String> = store
        .memory_snapshot()
        .clusters
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(ids, ["c-live"]);
}

/// A running `hcp-flow serve` and what it logged.
struct Serve {
    child: Child,
    base: String,
    stderr: Arc<Mutex<String>>,
}

impl Serve {
    fn start(config: &Path, state_dir: Option<&Path>) -> Serve {
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            probe.local_addr().unwrap().port()
        };
        let mut args = vec![
            "serve".to_string(),
            "--config".to_string(),
            config.display().to_string(),
            "--listen".to_string(),
            format!("127.0.0.1:{port}"),
        ];
        if let Some(dir) = state_dir {
            args.extend(["--state-dir".to_string(), dir.display().to_string()]);
        }
        let mut child = Command::new(BIN)
            .args(&args)
            .env("RUST_LOG", "info")
            .env_remove("HCPFLOW_STATE_DIR")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = drain(child.stderr.take().unwrap());
        Serve {
            child,
            base: format!("http://127.0.0.1:{port}"),
            stderr,
        }
    }

    fn get(&self, path: &str) -> Option<(u16, String)> {
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let response = client.get(format!("{}{path}", self.base)).send().ok()?;
        let status = response.status().as_u16();
        Some((status, response.text().ok()?))
    }

    /// Ready, and two views a moment apart agree (late identity details,
    /// such as the management cluster read from provision shards, have
    /// arrived).
    fn settled_view(&mut self) -> View {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "hcp-flow serve exited with {status}:\n{}",
                    self.stderr.lock().unwrap()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(90),
                "not ready and settled within 90s:\n{}",
                self.stderr.lock().unwrap()
            );
            if self.get("/readyz").is_some_and(|(s, _)| s == 200) {
                let first = self.view();
                std::thread::sleep(Duration::from_millis(700));
                let second = self.view();
                if first == second && !first.times.is_empty() {
                    return second;
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn view(&self) -> View {
        let metrics = self.get("/metrics").map(|(_, b)| b).unwrap_or_default();
        let clusters = self
            .get("/api/v1/clusters")
            .and_then(|(_, b)| serde_json::from_str::<Value>(&b).ok())
            .unwrap_or(Value::Null);
        View {
            times: cluster_time_series(&metrics),
            json: json_times(&clusters),
        }
    }

    /// SIGTERM, and a clean exit within the grace period.
    fn stop(mut self) -> String {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let start = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > Duration::from_secs(15) {
                let _ = self.child.kill();
                panic!("hcp-flow serve did not exit within 15s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        std::thread::sleep(Duration::from_millis(100));
        let log = self.stderr.lock().unwrap().clone();
        assert!(status.success(), "exit status {status:?}:\n{log}");
        log
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn drain(stream: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            let mut text = sink.lock().unwrap();
            text.push_str(&line);
            text.push('\n');
        }
    });
    text
}

/// What a restart must not move.
#[derive(Debug, PartialEq)]
struct View {
    /// Every per-cluster `*_timestamp_seconds` series → its value as written.
    times: BTreeMap<String, String>,
    /// Per cluster: its times, outcome and verdict, and per hop its phase
    /// and times, as the JSON API shows them.
    json: BTreeMap<String, Value>,
}

fn cluster_time_series(metrics: &str) -> BTreeMap<String, String> {
    metrics
        .lines()
        .filter(|l| l.starts_with("hcpflow_") && l.contains("cluster_id=\""))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let name = series.split('{').next()?;
            name.ends_with("_timestamp_seconds")
                .then(|| (series.to_string(), value.to_string()))
        })
        .collect()
}

fn json_times(clusters: &Value) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for item in clusters["items"].as_array().cloned().unwrap_or_default() {
        let id = item["cluster_id"].as_str().unwrap_or_default().to_string();
        let mut hops = serde_json::Map::new();
        for (hop, h) in item["hops"].as_object().cloned().unwrap_or_default() {
            let objects: Vec<Value> = h["objects"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|o| serde_json::json!([o["name"], o["phase"], o["since"]]))
                .collect();
            hops.insert(
                hop,
                serde_json::json!({
                    "phase": h["phase"],
                    "state": h["state"],
                    "since": h["since"],
                    "ready_at": h["ready_at"],
                    "started_at": h["started_at"],
                    "objects": objects,
                }),
            );
        }
        out.insert(
            id,
            serde_json::json!({
                "created_at": item["created_at"],
                "completed_at": item["completed_at"],
                "failed_at": item["failed_at"],
                "outcome": item["outcome"],
                "slo": item["slo"],
                "hops": hops,
            }),
        );
    }
    out
}

/// The first differences between two views, for the failure message.
fn differences(before: &View, after: &View) -> Vec<String> {
    let mut out = Vec::new();
    for (series, value) in &before.times {
        match after.times.get(series) {
            Some(v) if v == value => {}
            Some(v) => out.push(format!("{series}: {value} → {v}")),
            None => out.push(format!("{series}: {value} → absent")),
        }
    }
    for series in after.times.keys() {
        if !before.times.contains_key(series) {
            out.push(format!("{series}: absent → {}", after.times[series]));
        }
    }
    for (id, value) in &before.json {
        if after.json.get(id) != Some(value) {
            out.push(format!(
                "JSON {id}:\n  before {value}\n  after  {}",
                after.json.get(id).unwrap_or(&Value::Null)
            ));
        }
    }
    out
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hcp-flow-restart-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A world standing still at the current time, serving its APIs on
/// loopback, and a config file for `serve` that reads it.
fn frozen_world(runtime: &tokio::runtime::Runtime, dir: &Path) -> (World, PathBuf) {
    let now = Timestamp::from_second(Timestamp::now().as_second()).unwrap();
    let world = World::new(
        WorldConfig {
            speed: 1.0,
            churn: false,
            ..testworld::demo(30, 11)
        },
        SimClock::manual(now),
    );
    let endpoints = runtime.block_on(world.serve()).unwrap();
    let mut config = demo::demo_config(&testworld::settings(world.config()), &world, &endpoints);
    config.log_format = hcp_flow::config::LogFormat::Json;
    config.shutdown_grace = Duration::from_secs(5);
    // The world stands still but the exporter's clock does not: nothing
    // that falls due with elapsed time alone (a late verdict, a degraded
    // HostedCluster past its budget) may come due between the two runs, or
    // a legitimate change would look like a moved time. So the target and
    // the budgets are far longer than the test.
    let long = Duration::from_secs(30 * 24 * 3600);
    config.slo.creation_target = long;
    for hop in Hop::ALL {
        config.slo.hop_budgets.set(hop, long);
    }
    // JSON is YAML.
    let path = dir.join("config.yaml");
    std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
    (world, path)
}

fn assert_some_time_is_observed(view: &View) {
    let observed = view
        .json
        .values()
        .flat_map(|c| c["hops"].as_object().cloned().unwrap_or_default())
        .filter(|(_, h)| h["since"]["observed"] == Value::Bool(true))
        .count();
    assert!(
        observed > 0,
        "no hop shows an observed since: the test would prove nothing"
    );
}

#[test]
fn a_restart_with_a_state_dir_moves_no_published_time() {
    // The TLS provider the blocking client needs, when run alone.
    crate::common::init();
    let _machine = crate::common::load::share();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = scratch("with");
    let (_world, config) = frozen_world(&runtime, &dir);
    let state_dir = dir.join("state");

    // Without a state directory, observed times restart with the process.
    let mut first = Serve::start(&config, None);
    let before = first.settled_view();
    assert_some_time_is_observed(&before);
    first.stop();
    // Observed times are written with sub-second precision; a pause makes
    // sure the next process's clock reads later.
    std::thread::sleep(Duration::from_millis(1100));
    let mut second = Serve::start(&config, None);
    let after = second.settled_view();
    second.stop();
    assert_eq!(
        before.times.keys().collect::<Vec<_>>(),
        after.times.keys().collect::<Vec<_>>(),
        "the same series either way"
    );
    assert!(
        !differences(&before, &after).is_empty(),
        "a restart without a state dir moved no observed time: the check below could not fail"
    );

    // With one, nothing moves.
    let mut first = Serve::start(&config, Some(&state_dir));
    let before = first.settled_view();
    let log = first.stop();
    assert!(
        state_dir.join(FILE_NAME).is_file(),
        "the last write at shutdown left no state file:\n{log}"
    );
    std::thread::sleep(Duration::from_millis(1100));
    let mut second = Serve::start(&config, Some(&state_dir));
    let after = second.settled_view();
    let log = second.stop();
    let restored = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["fields"]["setting"] == "restored")
        .unwrap_or_else(|| panic!("no `restored` line in the startup summary:\n{log}"));
    let restored = restored["fields"]["value"].as_str().unwrap().to_string();
    assert!(
        restored.starts_with(&format!("{} cluster(s)", before.json.len())),
        "{restored}"
    );
    let moved = differences(&before, &after);
    assert!(
        moved.is_empty(),
        "{} of {} per-cluster times and {} timelines compared moved across a restart with a state dir (the first 30):\n{}",
        moved.len(),
        before.times.len(),
        before.json.len(),
        moved
            .iter()
            .take(30)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(before.times.len() > 60, "{} series", before.times.len());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A state file that cannot be used never stops the exporter; a state
/// directory that cannot be written does, at once, saying why.
#[test]
fn a_corrupt_state_file_is_ignored_and_an_unwritable_state_dir_stops_the_start() {
    let _machine = crate::common::load::share();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = scratch("corrupt");
    let (_world, config) = frozen_world(&runtime, &dir);
    let state_dir = dir.join("state");
    std::fs::create_dir_all(&state_dir).unwrap();
    std::fs::write(state_dir.join(FILE_NAME), b"not gzip at all").unwrap();

    let mut serve = Serve::start(&config, Some(&state_dir));
    let view = serve.settled_view();
    assert!(!view.json.is_empty());
    let log = serve.stop();
    assert!(log.contains("state file ignored"), "{log}");
    let restored = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["fields"]["setting"] == "restored")
        .unwrap_or_else(|| panic!("no `restored` line:\n{log}"));
    let restored = restored["fields"]["value"].as_str().unwrap();
    assert!(restored.starts_with("nothing: "), "{restored}");
    assert!(restored.contains("not gzip"), "{restored}");
    assert!(state_dir.join("state.json.gz.ignored").is_file());
    // The shutdown wrote a good file in its place.
    assert!(state_dir.join(FILE_NAME).is_file());

    let not_a_dir = dir.join("plain-file");
    std::fs::write(&not_a_dir, b"x").unwrap();
    let output = Command::new(BIN)
        .args(["serve", "--config", config.to_str().unwrap()])
        .args(["--listen", "127.0.0.1:0", "--state-dir"])
        .arg(not_a_dir.join("below"))
        .env_remove("HCPFLOW_STATE_DIR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("state directory") && stderr.contains("cannot be created"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
