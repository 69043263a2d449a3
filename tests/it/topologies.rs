//! Every documented topology against one simulated world on one manual
//! clock, each instance a real exporter (`Exporter::start_with_clock`: its
//! real sources, store and ticker), and the counters it exposes compared with
//! what the world's ground truth says happened:
//! - one instance reading everything;
//! - a service + management split, whose sums must count each creation once;
//! - an RP-only instance, which must show every RP resource (provisional ids);
//! - RP + Maestro without Clusters Service, which must not count false lates.
//!
//! The clock moves in steps; after each step every instance must show the
//! truth before the next one, so what each instance observed is a pure
//! function of the world and the steps.

use crate::common::exporter;
use crate::common::world as testworld;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hcp_flow::app::Exporter;
use hcp_flow::clock::Clock;
use hcp_flow::config::Config;

use hcp_flow::metrics::exposition::Format;
use hcp_flow::model::{Hop, Phase, provisional_cluster_id};
use hcp_flow::sim::{Truth, TruthCluster, WorldConfig};
use hcp_flow::store::Store;
use jiff::Timestamp;

const SPEED: f64 = 60.0;
const CLUSTERS: usize = 24;
/// One step of world time (two minutes at the demo's speed).
const STEP: Duration = Duration::from_secs(2);
const STEPS: usize = 75;

/// Which hops an instance must show, under which id, for one truth cluster.
type Expect = fn(&TruthCluster) -> Vec<(String, Hop, Phase)>;

/// An instance to start: its name, how it shapes the world's configuration,
/// and what it must show.
type Shape = (&'static str, fn(Config) -> Config, Expect);

struct Instance {
    name: &'static str,
    store: Arc<Store>,
    expect: Expect,
    _exporter: Exporter,
}

fn service_view(c: &TruthCluster) -> Vec<(String, Hop, Phase)> {
    c.hops
        .iter()
        .map(|(hop, h)| (c.cluster_id.clone(), *hop, h.phase))
        .collect()
}

fn management_view(c: &TruthCluster) -> Vec<(String, Hop, Phase)> {
    c.management
        .iter()
        .map(|(hop, h)| (c.cluster_id.clone(), *hop, h.phase))
        .collect()
}

fn single_view(c: &TruthCluster) -> Vec<(String, Hop, Phase)> {
    Hop::ALL
        .iter()
        .filter_map(|hop| Some((c.cluster_id.clone(), *hop, c.expected(*hop)?.phase)))
        .collect()
}

fn rp_only_view(c: &TruthCluster) -> Vec<(String, Hop, Phase)> {
    c.hops
        .get(&Hop::RpFrontend)
        .map(|h| {
            (
                provisional_cluster_id(&c.resource_id),
                Hop::RpFrontend,
                h.phase,
            )
        })
        .into_iter()
        .collect()
}

fn rp_and_maestro_view(c: &TruthCluster) -> Vec<(String, Hop, Phase)> {
    let mut want = rp_only_view(c);
    want.extend(
        c.hops
            .iter()
            .filter(|(hop, _)| !matches!(hop, Hop::RpFrontend | Hop::ClustersService))
            .map(|(hop, h)| (c.cluster_id.clone(), *hop, h.phase)),
    );
    want
}

fn sample_sum(body: &str, family: &str, labels: &[(&str, &str)]) -> f64 {
    body.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(family)?;
            if !(rest.starts_with('{') || rest.starts_with(' ')) {
                return None;
            }
            labels
                .iter()
                .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")))
                .then(|| rest.rsplit(' ').next()?.parse::<f64>().ok())?
        })
        .sum()
}

/// The counters that must add up across instances.
#[derive(Clone, Debug, Default, PartialEq)]
struct Counts {
    good: f64,
    late: f64,
    failed: f64,
    creations_ended: f64,
}

fn counts(store: &Store) -> Counts {
    let body = store.scrape(Format::Text);
    let slo = |outcome| {
        sample_sum(
            &body,
            "hcpflow_operation_slo_events_total",
            &[("operation", "create"), ("outcome", outcome)],
        )
    };
    Counts {
        good: slo("good"),
        late: slo("late"),
        failed: slo("failed"),
        creations_ended: sample_sum(
            &body,
            "hcpflow_operation_duration_seconds_count",
            &[("operation", "create")],
        ),
    }
}

fn add(a: &Counts, b: &Counts) -> Counts {
    Counts {
        good: a.good + b.good,
        late: a.late + b.late,
        failed: a.failed + b.failed,
        creations_ended: a.creations_ended + b.creations_ended,
    }
}

/// What one creation did, from the truth snapshots taken at every step.
#[derive(Clone, Debug, Default)]
struct Life {
    created_at: Option<Timestamp>,
    completed_at: Option<Timestamp>,
    /// The first step at which the owner's view showed a failed hop.
    failed_at: Option<Timestamp>,
    /// The first step at which truth no longer showed the cluster.
    gone_at: Option<Timestamp>,
}

/// When a creation completed, as its owner reads it.
type Completion = fn(&TruthCluster) -> Option<Timestamp>;

fn completed_through_maestro(c: &TruthCluster) -> Option<Timestamp> {
    c.completed_at
}

fn rp_succeeded(c: &TruthCluster) -> Option<Timestamp> {
    c.hops.get(&Hop::RpFrontend).and_then(|h| h.ready_at)
}

/// Each creation's life as the owner (reading `view`) saw it, step by step.
fn lives(
    snapshots: &[(Timestamp, Truth)],
    view: Expect,
    completion: Completion,
) -> BTreeMap<String, Life> {
    let mut lives: BTreeMap<String, Life> = BTreeMap::new();
    for (now, truth) in snapshots {
        let seen: BTreeSet<&str> = truth
            .clusters
            .iter()
            .map(|c| c.cluster_id.as_str())
            .collect();
        for c in &truth.clusters {
            let life = lives.entry(c.cluster_id.clone()).or_default();
            life.created_at = Some(c.created_at);
            life.completed_at = life.completed_at.or(completion(c));
            if view(c).iter().any(|(_, _, phase)| *phase == Phase::Failed) {
                life.failed_at = life.failed_at.or(Some(*now));
            }
        }
        for (id, life) in lives.iter_mut() {
            if !seen.contains(id.as_str()) && life.gone_at.is_none() {
                life.gone_at = Some(*now);
            }
        }
    }
    lives
}

/// The counters an owner of every creation must show, by the SLO's rules
/// (docs/design.md §6.1): good if it completed within the target, failed if
/// it failed first, late the moment it passed the target in flight; counted
/// only when that happened after the load at `loaded_at`.
fn expected(run: &Run, view: Expect, completion: Completion) -> Counts {
    let lives = lives(&run.snapshots, view, completion);
    let (loaded_at, end) = (run.snapshots[0].0, run.end);
    let mut want = Counts::default();
    for life in lives.values() {
        let Some(created) = life.created_at else {
            continue;
        };
        let deadline = created + jiff::SignedDuration::try_from(run.target).unwrap();
        let completed = life
            .completed_at
            .filter(|c| life.failed_at.is_none_or(|f| *c <= f));
        let verdict = match (completed, life.failed_at) {
            (Some(c), _) if c <= deadline => Some(("good", c)),
            (None, Some(f)) if f < deadline => Some(("failed", f)),
            _ if deadline <= end && life.gone_at.is_none_or(|g| deadline < g) => {
                Some(("late", deadline))
            }
            _ => None,
        };
        if let Some((outcome, at)) = verdict
            && at > loaded_at
        {
            match outcome {
                "good" => want.good += 1.0,
                "failed" => want.failed += 1.0,
                _ => want.late += 1.0,
            }
        }
        if let Some(at) = completed.or(life.failed_at)
            && at > loaded_at
        {
            want.creations_ended += 1.0;
        }
    }
    want
}

fn mismatches(instance: &Instance, truth: &Truth) -> Vec<String> {
    let mut wrong = Vec::new();
    for cluster in &truth.clusters {
        for (id, hop, phase) in (instance.expect)(cluster) {
            let got = instance
                .store
                .with_timeline(&id, |t| t.phase(hop))
                .flatten();
            if got != Some(phase) {
                wrong.push(format!(
                    "{}: {id} {hop}: truth {phase:?}, exporter {got:?}",
                    instance.name
                ));
            }
        }
    }
    wrong
}

struct Run {
    /// Each instance's store, by name, still running.
    stores: BTreeMap<&'static str, Arc<Store>>,
    /// Each instance's counters at the end, by name.
    counts: BTreeMap<&'static str, Counts>,
    /// The truth at the load and at every step.
    snapshots: Vec<(Timestamp, Truth)>,
    end: Timestamp,
    target: Duration,
    /// Every cluster id each instance shows at the end, by name.
    ids: BTreeMap<&'static str, BTreeSet<String>>,
    truth: Truth,
}

/// Start the world on a manual clock, one exporter per `(name, config,
/// expectation)`, and walk the clock.
async fn run(seed: u64, instances: Vec<Shape>) -> Run {
    let t0: Timestamp = "2026-03-01T12:00:00Z".parse().unwrap();
    let clock = Clock::manual(t0);
    let world = WorldConfig {
        speed: SPEED,
        churn: false,
        ..testworld::demo(CLUSTERS, seed)
    };
    let demo = testworld::start_with_clock(world, clock.clone()).await;
    let target = demo.config.slo.creation_target;
    let instances: Vec<Instance> = instances
        .into_iter()
        .map(|(name, shape, expect)| {
            let exporter = exporter::with_config(&shape(demo.config.clone()))
                .time_scale(SPEED)
                .clock(clock.clone())
                .start();
            Instance {
                name,
                store: exporter.store.clone(),
                expect,
                _exporter: exporter,
            }
        })
        .collect();

    // The load: every instance lists the world as it is at t0.
    wait_for("every instance loaded", Duration::from_secs(30), || {
        instances
            .iter()
            .all(|i| i.store.ready() && !i.store.loading())
    })
    .await;
    let loaded_at = clock.now();

    let mut snapshots = vec![(loaded_at, demo.world.truth())];

    for step in 1..=STEPS {
        clock.advance(STEP);
        let now = clock.now();
        let truth = demo.world.truth();
        snapshots.push((now, truth.clone()));
        // Every instance shows this instant's truth before the clock moves on.
        let started = Instant::now();
        loop {
            let wrong: Vec<String> = instances
                .iter()
                .flat_map(|i| mismatches(i, &truth))
                .collect();
            if wrong.is_empty() {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "step {step} at {now}: instances never caught up:\n{}",
                wrong.join("\n")
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // Let each instance's ticker settle deadlines due at the last instant.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let end = clock.now();
    let truth = demo.world.truth();
    Run {
        stores: instances
            .iter()
            .map(|i| (i.name, i.store.clone()))
            .collect(),
        counts: instances
            .iter()
            .map(|i| (i.name, counts(&i.store)))
            .collect(),
        ids: instances
            .iter()
            .map(|i| {
                let ids = i
                    .store
                    .with_timelines(|t| t.map(|t| t.cluster_id.clone()).collect());
                (i.name, ids)
            })
            .collect(),
        snapshots,
        end,
        target,
        truth,
    }
}

async fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let started = Instant::now();
    while !ok() {
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn everything(config: Config) -> Config {
    config
}

fn service_only(mut config: Config) -> Config {
    config.sources.kube.clear();
    config
}

fn management_only(mut config: Config) -> Config {
    config.sources.rp_frontend = None;
    config.sources.clusters_service = None;
    config.sources.maestro = None;
    config
}

fn rp_only(mut config: Config) -> Config {
    config.sources.clusters_service = None;
    config.sources.maestro = None;
    config.sources.kube.clear();
    config
}

fn rp_and_maestro(mut config: Config) -> Config {
    config.sources.clusters_service = None;
    config.sources.kube.clear();
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_deployment_counts_each_creation_once() {
    // Seed 1 decides good, late and failed creations after the load.
    let run = run(
        1,
        vec![
            ("single", everything, single_view),
            ("service", service_only, service_view),
            ("management", management_only, management_view),
        ],
    )
    .await;
    // The service side owns every creation and reads it through Maestro; one
    // instance reading everything prefers the management side's direct view.
    let want = expected(&run, service_view, completed_through_maestro);
    assert!(
        want.good >= 3.0 && want.late >= 1.0 && want.failed >= 1.0,
        "the world decided too little to compare: {want:?}"
    );
    let split = add(&run.counts["service"], &run.counts["management"]);
    assert_eq!(
        split, want,
        "service + management against the truth: {:?}",
        run.counts
    );
    let want_single = expected(&run, single_view, completed_through_maestro);
    assert_eq!(
        run.counts["single"], want_single,
        "one instance against the truth"
    );
    assert_eq!(
        run.counts["management"],
        Counts::default(),
        "a management-only instance owns no creation"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rp_only_and_rp_with_maestro_show_every_resource_and_count_no_false_late() {
    let run = run(
        12,
        vec![
            ("rp", rp_only, rp_only_view),
            ("rp+maestro", rp_and_maestro, rp_and_maestro_view),
        ],
    )
    .await;
    // Every RP resource is there, under its provisional id.
    let resources: BTreeSet<String> = run
        .truth
        .clusters
        .iter()
        .filter(|c| c.hops.contains_key(&Hop::RpFrontend))
        .map(|c| provisional_cluster_id(&c.resource_id))
        .collect();
    assert!(resources.len() >= CLUSTERS / 2);
    assert!(run.ids["rp"].is_superset(&resources), "{:?}", run.ids["rp"]);
    assert!(run.ids["rp+maestro"].is_superset(&resources));
    // The RP sees each creation from its start and completes it with its
    // Succeeded: the counters are the truth's, with no false late; Maestro's
    // timelines (under CS ids) count nothing, so nothing is counted twice.
    // Through the HTTP surface of the RP-only instance: each resource in
    // /metrics with its identities, in the JSON list as `rp_only`, and found
    // by its ARM resource id as the RP serves it.
    let store = run.stores["rp"].clone();
    let body = store.scrape(Format::Text);
    for c in run
        .truth
        .clusters
        .iter()
        .filter(|c| c.hops.contains_key(&Hop::RpFrontend))
    {
        let id = provisional_cluster_id(&c.resource_id);
        let info = body
            .lines()
            .find(|l| {
                l.starts_with("hcpflow_cluster_info{")
                    && l.contains(&format!("cluster_id=\"{id}\""))
            })
            .unwrap_or_else(|| panic!("no hcpflow_cluster_info for {id}"));
        for (label, value) in [
            ("resource_id", c.resource_id.to_ascii_lowercase()),
            ("subscription_id", c.subscription_id.to_ascii_lowercase()),
            ("resource_group", c.resource_group.clone()),
            ("name", c.name.clone()),
        ] {
            assert!(
                info.contains(&format!("{label}=\"{value}\"")),
                "{label} in {info}"
            );
        }
    }
    let listener = hcp_flow::app::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(hcp_flow::server::serve(
        listener,
        store,
        std::future::pending(),
    ));
    let list: serde_json::Value = reqwest::get(format!("{base}/api/v1/clusters"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let items = list["items"].as_array().unwrap();
    let listed: BTreeSet<String> = items
        .iter()
        .filter(|i| i["join"] == "rp_only")
        .map(|i| i["cluster_id"].as_str().unwrap().to_string())
        .collect();
    assert!(listed.is_superset(&resources));
    let one = &run.truth.clusters[0];
    let found = reqwest::get(format!("{base}/api/v1/clusters{}", one.resource_id))
        .await
        .unwrap();
    assert_eq!(
        found.status(),
        200,
        "by ARM resource id {}",
        one.resource_id
    );
    let found: serde_json::Value = found.json().await.unwrap();
    assert_eq!(
        found["cluster_id"],
        provisional_cluster_id(&one.resource_id)
    );
    assert_eq!(found["hops"]["rp_frontend"]["via"], "direct");

    let want = expected(&run, rp_only_view, rp_succeeded);
    assert!(want.good >= 3.0, "{want:?}");
    assert_eq!(run.counts["rp"], want);
    assert_eq!(run.counts["rp+maestro"], want);
}
