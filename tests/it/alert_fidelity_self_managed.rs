//! Alert fidelity on the self-managed world (`hcp-flow demo --world
//! self-managed`): a real Prometheus loads every rule of `alerts/` and
//! scrapes the real exporter reading the simulated MCE hub (faults on, speed
//! 60, so hop budgets are seconds), while the test reads the demo's public
//! ground truth. At the end every firing alert is read from Prometheus
//! (`ALERTS`) as firing episodes and judged strictly, as
//! tests/it/alert_fidelity.rs does for the ARO world (`common::fidelity`):
//!
//! - recall: every hub fault whose alert was due during the run raised it
//!   in an episode that began between the fault taking effect and its due
//!   time plus [`SLACK`], naming its operation, hop and pool;
//! - precision: every episode, on every hub cluster and of the fleet, has
//!   a cause that was there when it began.
//!
//! It runs about 100 seconds, longer (90 s at most) until each hub fault
//! occurred among the churn arrivals with its alert due: which rare fault
//! falls in the window depends on the seed.

use crate::common::procs;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::exporter::{self, Served};
use crate::common::fidelity;
use crate::common::load;
use crate::common::world::{self, TestWorld};
use hcp_flow::demo::GROUND_TRUTH_PATH;
use hcp_flow::sim::{WorldConfig, WorldKind};
use jiff::{SignedDuration, Timestamp};
use procs::{Process, tempdir};
use serde_json::Value;

/// How long the test watches the world.
const WATCH: Duration = Duration::from_secs(100);
/// How much longer it may watch until every fault of [`FAULTS`] could be
/// judged: which rare fault falls in the window depends on the seed.
const MORE: Duration = Duration::from_secs(90);
/// Two evaluation intervals (1 s), one scrape (1 s), one second of
/// condition-time rounding and time for a debug exporter sharing two cores
/// with the world and Prometheus (as the ARO fidelity test allows).
const SLACK: SignedDuration = SignedDuration::from_secs(2 + 1 + 1 + 4);

/// The hub's faults; each must be judged at least once.
const FAULTS: [&str; 8] = [
    "kubevirt_machines_pending",
    "no_free_agent",
    "release_image_invalid",
    "hosted_cluster_degraded",
    "managed_cluster_never_joins",
    // A deletion the HostedCluster's finalizer holds.
    "hosted_cluster_finalizer_stuck",
    // A pool added after the creation whose machines never come.
    "added_pool_vm_unschedulable",
    "added_pool_no_free_agent",
];

/// Faults the hub serves too (its None clusters' added pool, upgrades) but
/// whose alert comes due too late for this run to judge them every time (an
/// upgrade's budget is 75 world-minutes past a start 25–45 minutes into a
/// cluster's life): judged when they occur, required by the ARO fidelity
/// test, which runs longer.
const JUDGED_WHEN_DUE: [&str; 3] = [
    "node_pool_never_reaches_ignition",
    "upgrade_stuck_partial",
    "node_pool_stuck_updating",
];

/// The hub, the exporter and a Prometheus with every rule of `alerts/`,
/// on a heavy share of the machine (`load`).
struct Run {
    prometheus_process: Process,
    prometheus: String,
    _exporter: Served,
    exporter: String,
    _world: TestWorld,
    client: reqwest::Client,
    watching_since: Timestamp,
    _machine: load::Share,
}

impl Run {
    async fn start(seed: u64) -> Run {
        let machine = load::heavy();
        let world = world::start(WorldConfig {
            kind: WorldKind::SelfManaged,
            ..world::demo(60, seed)
        })
        .await;
        let exporter = exporter::of_world(&world)
            .routes(world.routes())
            .serve()
            .await;
        let dir = tempdir("alert-fidelity-self-managed");
        let (prometheus_process, prometheus) = procs::prometheus("prometheus")
            .shipped_rules()
            .scrape("hcp-flow", &exporter.url)
            .start(&dir);
        let mut run = Run {
            prometheus_process,
            prometheus,
            exporter: exporter.url.clone(),
            _exporter: exporter,
            _world: world,
            client: reqwest::Client::new(),
            watching_since: Timestamp::now(),
            _machine: machine,
        };
        let ready = procs::wait_scraped(
            &run.client,
            &run.prometheus,
            Some(&run.exporter),
            Duration::from_secs(240),
        )
        .await;
        assert!(ready, "never ready\n{}", run.prometheus_process.log_tail());
        run.watching_since = Timestamp::now();
        run
    }

    /// Every cluster the ground truth named while watching: its latest
    /// record and when it was last served.
    /// ... for `length`, then for at most [`MORE`] while `enough` says what
    /// was seen is not enough yet.
    async fn watch(
        &self,
        length: Duration,
        enough: impl Fn(&BTreeMap<String, (Value, Timestamp)>) -> bool,
    ) -> BTreeMap<String, (Value, Timestamp)> {
        let mut seen = BTreeMap::new();
        let start = tokio::time::Instant::now();
        loop {
            let elapsed = start.elapsed();
            if elapsed >= length + MORE || (elapsed >= length && enough(&seen)) {
                break;
            }
            let truth: Value = self
                .client
                .get(format!("{}{GROUND_TRUTH_PATH}", self.exporter))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let at = parse(&truth["at"]).unwrap();
            for item in truth["items"].as_array().unwrap() {
                let id = item["cluster_id"].as_str().unwrap().to_string();
                seen.insert(id, (item.clone(), at));
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        seen
    }
}

fn parse(v: &Value) -> Option<Timestamp> {
    v.as_str()?.parse().ok()
}

/// The deadline (due plus [`SLACK`]) of `fault` when a run that watched
/// from `since` to `end` judges it: it took effect while watched, its alert
/// was due before the end, and the cluster, last served at `last_served`,
/// still existed then.
fn judged(
    fault: &fidelity::Fault,
    last_served: Timestamp,
    since: Timestamp,
    end: Timestamp,
) -> Option<Timestamp> {
    let (fault_at, due) = (fault.fault_at?, fault.due?);
    let deadline = due.checked_add(SLACK).ok()?;
    let alive = last_served >= deadline.checked_sub(SignedDuration::from_secs(2)).ok()?;
    (fault_at >= since && deadline <= end && alive).then_some(deadline)
}

const TEST: &str =
    "alert_fidelity_self_managed::every_hub_fault_raises_its_alert_and_healthy_clusters_none";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_hub_fault_raises_its_alert_and_healthy_clusters_none() {
    let (seed, _seed) = fidelity::seed(TEST);
    let run = Run::start(seed).await;
    let every_fault_judgeable = |seen: &BTreeMap<String, (Value, Timestamp)>| {
        let now = Timestamp::now();
        FAULTS.iter().all(|f| {
            seen.values().any(|(item, last)| {
                fidelity::Fault::of(item).is_some_and(|fault| {
                    fault.fault == *f && judged(&fault, *last, run.watching_since, now).is_some()
                })
            })
        })
    };
    let seen = run.watch(WATCH, every_fault_judgeable).await;
    let end = Timestamp::now();
    let episodes = fidelity::episodes(&run.client, &run.prometheus, run.watching_since).await;
    let truth: Value = run
        .client
        .get(format!("{}{GROUND_TRUTH_PATH}", run.exporter))
        .send()
        .await
        .expect("the ground truth")
        .json()
        .await
        .expect("the ground truth as JSON");
    let judge = fidelity::Judge {
        faults: seen
            .values()
            .filter_map(|(item, _)| fidelity::Fault::of(item))
            .collect(),
        episodes: &episodes,
        bursts: Vec::new(),
        malformed: fidelity::Malformed::of(&truth),
        clusters: seen.keys().cloned().collect(),
    };

    // Recall: judged when the fault took effect while watched, its alert
    // was due (with slack) before the end, and the cluster still existed.
    let mut table = fidelity::Table::new();
    for (id, (item, last_served)) in &seen {
        let Some(fault) = fidelity::Fault::of(item) else {
            continue;
        };
        let Some(deadline) = judged(&fault, *last_served, run.watching_since, end) else {
            continue;
        };
        assert!(
            FAULTS
                .iter()
                .chain(&JUDGED_WHEN_DUE)
                .any(|f| *f == fault.fault),
            "{id}: {} is not a fault of the hub",
            fault.fault
        );
        fidelity::count(&mut table, &fault, judge.judge(&fault, deadline));
    }
    // Precision: every episode has its cause.
    let (false_alarms, forecasts) = fidelity::unexplained(&judge);

    let judged: usize = table.values().map(|r| r.judged).sum();
    let in_time: usize = table.values().map(|r| r.in_time).sum();
    let charged = episodes.len() - forecasts.len();
    let rendered = fidelity::render(&table);
    eprintln!(
        "self-managed alert fidelity (seed {seed}) over {:.0}s, {} clusters seen:\n{rendered}recall {:.2} ({in_time}/{judged}), precision {:.2} ({} of {charged} episodes explained; {} forecasts of healthy hops)\nunexplained episodes:\n  {}\nforecasts without a fault:\n  {}",
        end.duration_since(run.watching_since).as_secs_f64(),
        seen.len(),
        in_time as f64 / judged.max(1) as f64,
        (charged - false_alarms.len()) as f64 / charged.max(1) as f64,
        charged - false_alarms.len(),
        forecasts.len(),
        false_alarms.join("\n  "),
        forecasts.join("\n  "),
    );
    let never: Vec<&str> = FAULTS
        .iter()
        .copied()
        .filter(|f| {
            !table
                .iter()
                .any(|((_, fault), r)| fault == f && r.judged > 0)
        })
        .collect();
    assert!(
        never.is_empty(),
        "faults never judged: {never:?}\n{rendered}"
    );
    let failures: Vec<&String> = table.values().flat_map(|r| &r.failures).collect();
    assert!(
        failures.is_empty(),
        "hub faults whose alert did not fire in time:\n  {}\n{rendered}",
        failures
            .iter()
            .map(|m| m.as_str())
            .collect::<Vec<_>>()
            .join("\n  ")
    );
    assert!(
        false_alarms.is_empty(),
        "alert episodes no fault or cause explains:\n  {}",
        false_alarms.join("\n  ")
    );
}
