//! Every documented topology against one simulated world on one manual
//! clock, each instance a real exporter (`Exporter::start_with_clock`: its
//! real sources, store and ticker), and the counters it exposes compared with
//! what the world's ground truth says happened:
//! - one instance reading everything;
//! - a service + management split, whose sums must count each creation once;
//! - an RP-only instance, which must show every RP resource (provisional ids);
//! - RP + Maestro without Clusters Service, which must not count false lates;
//! - for every operation (creation, deletion, a pool's creation, removal and
//!   upgrade, a control plane's upgrade) in a churning world: one instance,
//!   the ARO split (a service-side instance and one per management
//!   cluster), three shards, RP only and RP + Maestro, each hop timed where
//!   it is read directly and each operation counted and ended once
//!   (docs/design/08-scopes-and-scale-out.md §8.2).
//!
//! The clock moves in steps; after each step every instance must show the
//! truth before the next one, so what each instance observed is a pure
//! function of the world and the steps.

use crate::common::exporter;
use crate::common::otlp;
use crate::common::world as testworld;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hcp_flow::app::Exporter;
use hcp_flow::clock::Clock;
use hcp_flow::config::Config;

use hcp_flow::metrics::exposition::Format;
use hcp_flow::model::{
    Event, EventListener, Fleet, Hop, OperationKind, Phase, Via, provisional_cluster_id, shard_of,
};
use hcp_flow::sim::ground::Day2OperationTruth;
use hcp_flow::sim::{Truth, TruthCluster, WorldConfig};
use hcp_flow::store::Store;
use hcp_flow::traces::{CreationTracer, TraceMetrics, TracerOptions};
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

/// An [`Expect`] a test builds from what it derives (a management
/// cluster's name, a shard's index).
type DynExpect = Box<dyn Fn(&TruthCluster) -> Vec<(String, Hop, Phase)> + Send + Sync>;

/// [`Shape`] for instances a test derives from the world (one per
/// management cluster, one per shard).
struct DynShape {
    name: String,
    shape: Box<dyn Fn(Config) -> Config>,
    expect: DynExpect,
    /// Export its operation spans over OTLP to the run's receiver, as its
    /// configuration says a deployed instance would (root spans only where
    /// it is not management-only).
    traced: bool,
}

impl From<Shape> for DynShape {
    fn from((name, shape, expect): Shape) -> DynShape {
        DynShape {
            name: name.to_string(),
            shape: Box::new(shape),
            expect: Box::new(expect),
            traced: false,
        }
    }
}

struct Instance {
    name: String,
    store: Arc<Store>,
    expect: DynExpect,
    ended: Arc<Ended>,
    tracer: Option<Arc<CreationTracer>>,
    _exporter: Exporter,
}

/// Every operation end and hop end an instance's model emitted, as its
/// listeners (metrics, traces) hear them.
#[derive(Default)]
struct Ended {
    /// `(operation key, counted)` of each `OperationEnded`.
    operations: parking_lot::Mutex<Vec<(String, bool)>>,
    /// `(operation key, hop, via, counted)` of each `HopEnded`.
    hops: parking_lot::Mutex<Vec<(String, Hop, Via, bool)>>,
    /// `(operation key, verdict)` of each counted `Slo`, to name the
    /// operations two instances judged apart.
    verdicts: parking_lot::Mutex<Vec<(String, &'static str)>>,
}

impl EventListener for Ended {
    fn on_events(&self, events: &[Event], _fleet: &Fleet) {
        for event in events {
            match event {
                Event::OperationEnded {
                    cluster_id,
                    operation,
                    subject,
                    counted,
                    ..
                } => self
                    .operations
                    .lock()
                    .push((operation.key(cluster_id, subject.as_deref()), *counted)),
                Event::HopEnded {
                    cluster_id,
                    operation,
                    subject,
                    hop,
                    via,
                    counted,
                    ..
                } => self.hops.lock().push((
                    operation.key(cluster_id, subject.as_deref()),
                    *hop,
                    *via,
                    *counted,
                )),
                Event::Slo {
                    cluster_id,
                    operation,
                    subject,
                    counted: true,
                    outcome,
                } => self.verdicts.lock().push((
                    operation.key(cluster_id, subject.as_deref()),
                    outcome.as_str(),
                )),
                _ => {}
            }
        }
    }
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
/// (docs/design/06-slos-and-alerts.md §6.1): good if it completed within the target, failed if
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
    let mut expected_ids = BTreeSet::new();
    for cluster in &truth.clusters {
        let want = (instance.expect)(cluster);
        if !want.is_empty() {
            // Either id of a cluster it must show: the join may move it.
            expected_ids.insert(cluster.cluster_id.clone());
            expected_ids.insert(provisional_cluster_id(&cluster.resource_id));
        }
        for (id, hop, phase) in want {
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
    // What vanished from the world has vanished from the instance too (its
    // deletion ended): an instance that reads an absence one step after
    // another would end that deletion one step later, and judge it apart.
    let shown: Vec<String> = instance
        .store
        .with_timelines(|t| t.map(|t| t.cluster_id.clone()).collect());
    for id in shown {
        if !expected_ids.contains(&id) {
            wrong.push(format!(
                "{}: {id} gone from the truth, still shown",
                instance.name
            ));
        }
    }
    wrong
}

struct Run {
    /// Each instance's store, by name, still running.
    stores: BTreeMap<String, Arc<Store>>,
    /// Each instance's counters at the end, by name.
    counts: BTreeMap<String, Counts>,
    /// What each instance's model ended, by name.
    ended: BTreeMap<String, Arc<Ended>>,
    /// The truth at the load and at every step.
    snapshots: Vec<(Timestamp, Truth)>,
    /// Every day-2 operation the world ran while it was walked, by key, as
    /// last seen (a cluster deleted since drops out of the world's list).
    day2: BTreeMap<String, Day2OperationTruth>,
    end: Timestamp,
    target: Duration,
    /// Every cluster id each instance shows at the end, by name.
    ids: BTreeMap<String, BTreeSet<String>>,
    truth: Truth,
}

/// Start the world on a manual clock, one exporter per `(name, config,
/// expectation)`, and walk the clock.
async fn run(seed: u64, instances: Vec<Shape>) -> Run {
    let world = WorldConfig {
        speed: SPEED,
        churn: false,
        ..testworld::demo(CLUSTERS, seed)
    };
    let t0: Timestamp = "2026-03-01T12:00:00Z".parse().unwrap();
    let clock = Clock::manual(t0);
    let demo = testworld::start_with_clock(world, clock.clone()).await;
    let instances = instances.into_iter().map(DynShape::from).collect();
    walk(&demo, clock, instances, STEPS, None).await
}

/// Start one exporter per shape over `demo` (on `clock`), and walk the
/// clock `steps` times, every instance showing the truth at each step.
async fn walk(
    demo: &testworld::TestWorld,
    clock: Clock,
    instances: Vec<DynShape>,
    steps: usize,
    otlp_endpoint: Option<&str>,
) -> Run {
    let target = demo.config.slo.creation_target;
    let instances: Vec<Instance> = instances
        .into_iter()
        .map(
            |DynShape {
                 name,
                 shape,
                 expect,
                 traced,
             }| {
                let config = shape(demo.config.clone());
                let exporter = exporter::with_config(&config)
                    .time_scale(SPEED)
                    .clock(clock.clone())
                    .start();
                let ended = Arc::new(Ended::default());
                exporter.store.add_listener(ended.clone());
                let tracer = traced.then(|| {
                    let endpoint = otlp_endpoint.expect("a receiver for traced instances");
                    let env = std::collections::HashMap::from([
                        (
                            "OTEL_EXPORTER_OTLP_ENDPOINT".to_string(),
                            endpoint.to_string(),
                        ),
                        (
                            "OTEL_EXPORTER_OTLP_PROTOCOL".to_string(),
                            "grpc".to_string(),
                        ),
                        ("OTEL_SERVICE_NAME".to_string(), name.clone()),
                    ]);
                    let tracer = CreationTracer::from_env_map(&env, TraceMetrics::default())
                        .expect("valid OTLP settings")
                        .expect("an endpoint is set")
                        .with_options(TracerOptions {
                            root_spans: !config.sources.management_only(),
                        });
                    let tracer = Arc::new(tracer);
                    exporter.store.add_listener(tracer.clone());
                    tracer
                });
                Instance {
                    name,
                    store: exporter.store.clone(),
                    expect,
                    ended,
                    tracer,
                    _exporter: exporter,
                }
            },
        )
        .collect();

    // The load: every instance lists the world as it is at t0.
    // Bounds, not windows: eight exporters load beside CI's other tests.
    wait_for("every instance loaded", Duration::from_secs(120), || {
        instances
            .iter()
            .all(|i| i.store.ready() && !i.store.loading())
    })
    .await;
    let loaded_at = clock.now();

    let mut snapshots = vec![(loaded_at, demo.world.truth())];
    let mut day2 = BTreeMap::new();
    let note_day2 = |day2: &mut BTreeMap<String, Day2OperationTruth>| {
        for op in demo.world.day2_operations() {
            day2.insert(day2_key(&op), op);
        }
    };
    note_day2(&mut day2);

    for step in 1..=steps {
        clock.advance(STEP);
        let now = clock.now();
        let truth = demo.world.truth();
        snapshots.push((now, truth.clone()));
        note_day2(&mut day2);
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
                started.elapsed() < Duration::from_secs(60),
                "step {step} at {now}: instances never caught up:\n{}",
                wrong.join("\n")
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // Settle every deadline due at the last instant in every instance now,
    // as each one's ticker would at its next tick: waiting for the tickers
    // instead (a wall-clock window) left one instance's deadline unsettled
    // under load, and its late verdicts one short of another's.
    let end = clock.now();
    for instance in &instances {
        instance.store.tick_at(end);
    }
    let truth = demo.world.truth();
    for tracer in instances.iter().filter_map(|i| i.tracer.clone()) {
        tokio::task::spawn_blocking(move || tracer.flush())
            .await
            .expect("the flush ran");
    }
    Run {
        stores: instances
            .iter()
            .map(|i| (i.name.clone(), i.store.clone()))
            .collect(),
        counts: instances
            .iter()
            .map(|i| (i.name.clone(), counts(&i.store)))
            .collect(),
        ended: instances
            .iter()
            .map(|i| (i.name.clone(), i.ended.clone()))
            .collect(),
        ids: instances
            .iter()
            .map(|i| {
                let ids = i
                    .store
                    .with_timelines(|t| t.map(|t| t.cluster_id.clone()).collect());
                (i.name.clone(), ids)
            })
            .collect(),
        snapshots,
        day2,
        end,
        target,
        truth,
    }
}

/// Whether any hop of a truth cluster, on either side, reads deleting.
fn deleting(c: &TruthCluster) -> bool {
    c.management
        .values()
        .chain(c.hops.values())
        .any(|h| h.phase == Phase::Deleting)
}

/// The management instances' day-2 hop timings against the world's own
/// ledger (`World::day2_operations`, seen at every step): every operation
/// the world ended while it was walked is timed at its management hop (the
/// NodePool; the HostedCluster for an upgrade) by exactly one instance, and
/// no instance times a day-2 hop the world did not end (a pool created with
/// its cluster aside: the world's day-2 list leaves those out).
///
/// The clock stands still after the last step, so the instances are waited
/// for until they have read every end (the walk checks each hop's phase,
/// and the `node_pool` hop's aggregates a cluster's pools, so one pool's
/// reading may lag). An operation whose cluster began its deletion within a
/// step of its end may be taken by the deletion instead (separate watches:
/// the HostedCluster's `deletionTimestamp` may be read before the
/// NodePool's readiness), and is not required.
async fn day2_against_the_world(run: &Run, mgmt_clusters: &[String]) {
    let loaded_at = run.snapshots[0].0;
    let step = jiff::SignedDuration::try_from(STEP).expect("a short step");
    // When each cluster was first seen deleting (or gone), from the walk's
    // snapshots of the truth.
    let mut deleting_at: BTreeMap<&str, Timestamp> = BTreeMap::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for (at, truth) in &run.snapshots {
        let here: BTreeSet<&str> = truth
            .clusters
            .iter()
            .map(|c| c.cluster_id.as_str())
            .collect();
        for c in truth.clusters.iter().filter(|c| deleting(c)) {
            deleting_at.entry(c.cluster_id.as_str()).or_insert(*at);
        }
        for gone in seen.difference(&here) {
            deleting_at.entry(gone).or_insert(*at);
        }
        seen.extend(here);
    }
    let management_hop = |kind: &str| {
        if kind == "upgrade" {
            Hop::HostedCluster
        } else {
            Hop::NodePool
        }
    };
    let mut must = BTreeSet::new();
    let mut may = BTreeSet::new();
    for (key, op) in &run.day2 {
        let Some(ended) = op.ended else { continue };
        let hop = management_hop(op.operation);
        // The world dates an end in whole seconds.
        if ended >= loaded_at - jiff::SignedDuration::from_secs(1) && ended <= run.end {
            may.insert((key.clone(), hop));
        }
        let taken_by_deletion = deleting_at
            .get(op.cluster_id.as_str())
            .is_some_and(|d| *d <= ended + step);
        if ended > loaded_at && ended <= run.end && !taken_by_deletion {
            must.insert((key.clone(), hop));
        }
    }
    assert!(
        !must.is_empty(),
        "the world ended no day-2 operation while walked"
    );
    let timed = || {
        let mut timed: BTreeMap<(String, Hop), usize> = BTreeMap::new();
        for m in mgmt_clusters {
            let ended = &run.ended[format!("management/{m}").as_str()];
            for (key, hop, via, counted) in ended.hops.lock().iter() {
                let day2 = OperationKind::ALL
                    .iter()
                    .filter(|k| k.day2())
                    .any(|k| key.contains(&format!("/{}/", k.as_str())));
                // Timed: its duration observed, which a direct reading is.
                if day2 && *via == Via::Direct && *counted {
                    *timed.entry((key.clone(), *hop)).or_default() += 1;
                }
            }
        }
        timed
    };
    let started = Instant::now();
    let timed = loop {
        let timed = timed();
        if must.iter().all(|k| timed.contains_key(k)) || started.elapsed() > Duration::from_secs(30)
        {
            break timed;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let untimed: Vec<String> = must
        .iter()
        .filter(|k| !timed.contains_key(*k))
        .map(|(key, hop)| {
            let op = &run.day2[key];
            // What the management instances ended of that pool or cluster.
            let subject = op.node_pool.as_deref().unwrap_or(op.cluster_id.as_str());
            let seen: Vec<String> = mgmt_clusters
                .iter()
                .flat_map(|m| {
                    run.ended[format!("management/{m}").as_str()]
                        .hops
                        .lock()
                        .iter()
                        .filter(|(k, ..)| k.starts_with(&op.cluster_id) && k.contains(subject))
                        .map(|(k, h, via, counted)| format!("{k} {h} {via:?} counted={counted}"))
                        .collect::<Vec<_>>()
                })
                .collect();
            format!(
                "{key} at {hop}: started {}, ended {:?}, cluster deleting from {:?}; the \
                 management instances ended of it: {seen:?}",
                op.started,
                op.ended,
                deleting_at.get(op.cluster_id.as_str())
            )
        })
        .collect();
    assert!(
        untimed.is_empty(),
        "day-2 operations the world ended that no management instance timed (walked from {} \
         to {} in steps of {STEP:?}): {untimed:#?}",
        loaded_at,
        run.end
    );
    let twice: Vec<_> = timed.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "timed twice across the management instances: {twice:?}"
    );
    let unexplained: Vec<_> = timed
        .keys()
        .filter(|(key, _)| !key.contains("/node_pool_create/"))
        .filter(|k| !may.contains(*k))
        .collect();
    assert!(
        unexplained.is_empty(),
        "management instances timed day-2 hops the world did not end: {unexplained:?}"
    );
}

/// The management instances' creation and deletion hop timings against the
/// world, step by step (the walk's snapshots of the truth):
/// - a management hop of a creation (`manifestwork`, `hosted_cluster`,
///   `control_plane`, `managed_cluster`) that first became ready while the
///   world was walked, before its cluster's creation ended and its deletion
///   began, is timed by exactly one management instance (its cluster's);
/// - a management hop whose object left the world while its cluster was
///   deleting (a deletion that began after the load) is timed under the
///   deletion by exactly one;
/// - nothing else is: no creation hop that did not first become ready or
///   fail, and no deletion hop whose object did not go, within the walk.
///
/// Its histograms say the same: each instance's
/// `hcpflow_hop_duration_seconds_count` for a creation or deletion hop is
/// the number of those hops it timed.
async fn creation_and_deletion_against_the_world(run: &Run, mgmt_clusters: &[String]) {
    const CREATION_HOPS: [Hop; 5] = [
        Hop::Manifestwork,
        Hop::HostedCluster,
        Hop::ControlPlane,
        Hop::ManagedCluster,
        Hop::NodePool,
    ];
    let loaded_at = run.snapshots[0].0;
    // (key, hop) that must be timed, and that may be.
    let mut must: BTreeSet<(String, Hop)> = BTreeSet::new();
    let mut may: BTreeSet<(String, Hop)> = BTreeSet::new();
    // When each cluster was first seen deleting, and whether its creation
    // had ended (completed or failed) by then.
    let mut deleting_at: BTreeMap<String, Timestamp> = BTreeMap::new();
    let mut ended_at: BTreeMap<String, Timestamp> = BTreeMap::new();
    for (at, truth) in &run.snapshots {
        for c in &truth.clusters {
            if deleting(c) {
                deleting_at.entry(c.cluster_id.clone()).or_insert(*at);
            }
            if c.completed_at.is_some() || c.failed {
                ended_at.entry(c.cluster_id.clone()).or_insert(*at);
            }
        }
    }
    for pair in run.snapshots.windows(2) {
        let ((_, before), (at, now)) = (&pair[0], &pair[1]);
        for was in &before.clusters {
            if was.management.is_empty() {
                continue;
            }
            let is = now.cluster(&was.cluster_id);
            let deletion_key = format!("{}/delete", was.cluster_id);
            // Deletion: a management object that went while deleting.
            for hop in was.management.keys() {
                let gone = is.is_none_or(|c| !c.management.contains_key(hop));
                if !gone {
                    continue;
                }
                let began = deleting_at.get(&was.cluster_id);
                if began.is_some_and(|b| b <= at) {
                    may.insert((deletion_key.clone(), *hop));
                    if began.is_some_and(|b| *b > loaded_at) && *hop != Hop::NodePool {
                        must.insert((deletion_key.clone(), *hop));
                    }
                }
            }
        }
        // Creation: a hop that first became ready (its object may have come
        // and become ready within one step), or failed.
        for is in &now.clusters {
            let was = before.cluster(&is.cluster_id);
            for hop in CREATION_HOPS {
                let Some(new) = is.management.get(&hop) else {
                    continue;
                };
                let old = was.and_then(|c| c.management.get(&hop));
                let first_ready =
                    old.is_none_or(|o| o.ready_at.is_none()) && new.ready_at.is_some();
                let failed =
                    old.is_none_or(|o| o.phase != Phase::Failed) && new.phase == Phase::Failed;
                // An object that appeared within the step may have been
                // ready and lost it again before the step's end (a work
                // whose status the agent drops): the world's truth keeps
                // only what it serves at each step, the watch saw it all.
                let appeared = old.is_none();
                if !(first_ready || failed || appeared) {
                    continue;
                }
                may.insert((is.cluster_id.clone(), hop));
                let before_deletion = deleting_at.get(&is.cluster_id).is_none_or(|d| d > at);
                let in_creation = ended_at.get(&is.cluster_id).is_none_or(|e| e >= at);
                if first_ready && before_deletion && in_creation {
                    must.insert((is.cluster_id.clone(), hop));
                }
            }
        }
    }
    assert!(
        must.iter().any(|(k, _)| !k.ends_with("/delete"))
            && must.iter().any(|(k, _)| k.ends_with("/delete")),
        "the world ended no creation or no deletion hop on the management side while walked: {must:?}"
    );
    let creation_or_deletion = |key: &str| !key.contains('/') || key.ends_with("/delete");
    let timed = |name: &str| -> BTreeMap<(String, Hop), usize> {
        let mut timed = BTreeMap::new();
        for (key, hop, via, counted) in run.ended[name].hops.lock().iter() {
            if creation_or_deletion(key) && *via == Via::Direct && *counted {
                *timed.entry((key.clone(), *hop)).or_default() += 1;
            }
        }
        timed
    };
    let names: Vec<String> = mgmt_clusters
        .iter()
        .map(|m| format!("management/{m}"))
        .collect();
    let mut all: BTreeMap<(String, Hop), usize> = BTreeMap::new();
    for name in &names {
        let mine = timed(name);
        // The histogram counts what the events say was timed.
        let mut by_row: BTreeMap<(String, Hop), f64> = BTreeMap::new();
        for ((key, hop), n) in &mine {
            let operation = if key.ends_with("/delete") {
                "delete"
            } else {
                "create"
            };
            *by_row.entry((operation.to_string(), *hop)).or_default() += *n as f64;
        }
        let histogram: BTreeMap<(String, Hop), f64> = observed(&run.stores[name.as_str()])
            .hops
            .iter()
            .filter(|(k, _)| k[0] == "create" || k[0] == "delete")
            .fold(BTreeMap::new(), |mut rows, (k, v)| {
                let hop = Hop::ALL
                    .into_iter()
                    .find(|h| h.to_string() == k[1])
                    .expect("a hop label names a hop");
                *rows.entry((k[0].clone(), hop)).or_default() += v;
                rows
            });
        assert_eq!(
            histogram, by_row,
            "{name}: hcpflow_hop_duration_seconds_count against the hops it timed"
        );
        for (k, n) in mine {
            *all.entry(k).or_default() += n;
        }
    }
    let untimed: Vec<_> = must.iter().filter(|k| !all.contains_key(*k)).collect();
    assert!(
        untimed.is_empty(),
        "creation or deletion hops the world ended on the management side that no management \
         instance timed: {untimed:?}"
    );
    let twice: Vec<_> = all.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "timed more than once across the management instances: {twice:?}"
    );
    let unexplained: Vec<_> = all.keys().filter(|k| !may.contains(*k)).collect();
    assert!(
        unexplained.is_empty(),
        "management instances timed creation or deletion hops the world did not end: \
         {unexplained:?}"
    );
}

/// The key hcp-flow gives one of the world's day-2 operations
/// (docs/design/15-operations.md §15.2).
fn day2_key(op: &Day2OperationTruth) -> String {
    let kind = OperationKind::parse(op.operation).expect("the world's operations are the model's");
    let subject = kind.subject(op.node_pool.as_deref(), op.target_version.as_deref());
    kind.key(&op.cluster_id, subject.as_deref())
}

/// Which operations `names` together and one instance time apart at one
/// `(operation, hop, outcome)` row: what a failed row-by-row comparison
/// names.
fn apart(run: &Run, names: &[String], row: &[String]) -> String {
    let timed = |names: &[String]| -> BTreeMap<String, usize> {
        let mut keys = BTreeMap::new();
        for name in names {
            for (key, hop, via, counted) in run.ended[name.as_str()].hops.lock().iter() {
                let operation = OperationKind::ALL
                    .into_iter()
                    .filter(|k| *k != OperationKind::Create)
                    .find(|k| {
                        key.ends_with(&format!("/{}", k.as_str()))
                            || key.contains(&format!("/{}/", k.as_str()))
                    })
                    .unwrap_or(OperationKind::Create);
                if *via == Via::Direct
                    && *counted
                    && operation.as_str() == row[0]
                    && hop.to_string() == row[1]
                {
                    *keys.entry(key.clone()).or_default() += 1;
                }
            }
        }
        keys
    };
    let (theirs, one) = (timed(names), timed(&["single".to_string()]));
    let only = |a: &BTreeMap<String, usize>, b: &BTreeMap<String, usize>| -> Vec<String> {
        a.iter()
            .filter(|(k, n)| b.get(*k) != Some(*n))
            .map(|(k, n)| format!("{k} ×{n}"))
            .collect()
    };
    format!(
        "timed (any outcome) only by {names:?}: {:?}; only by one instance: {:?}",
        only(&theirs, &one),
        only(&one, &theirs)
    )
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

/// The id an instance reading Clusters Service (or only the management
/// side) shows a truth cluster's hops under: its CS id, unless only the RP
/// shows it yet (a creation not handed over yet), then its provisional id.
/// An RP resource deleting after its cluster left Clusters Service keeps
/// the join it had (this world hands every creation over).
fn joined_id(c: &TruthCluster, hop: Hop) -> String {
    let only_the_rp = hop == Hop::RpFrontend
        && c.hops.get(&hop).is_some_and(|h| h.phase != Phase::Deleting)
        && !c.hops.contains_key(&Hop::ClustersService)
        && !c.hops.contains_key(&Hop::MaestroBundle)
        && c.management.is_empty();
    if only_the_rp {
        provisional_cluster_id(&c.resource_id)
    } else {
        c.cluster_id.clone()
    }
}

fn churning_single_view(c: &TruthCluster) -> Vec<(String, Hop, Phase)> {
    Hop::ALL
        .iter()
        .filter_map(|hop| Some((joined_id(c, *hop), *hop, c.expected(*hop)?.phase)))
        .collect()
}

fn churning_service_view(c: &TruthCluster) -> Vec<(String, Hop, Phase)> {
    c.hops
        .iter()
        .map(|(hop, h)| (joined_id(c, *hop), *hop, h.phase))
        .collect()
}

/// Every sample of a family summed by the values of `by`, from a text
/// exposition.
fn rows(body: &str, family: &str, by: &[&str]) -> BTreeMap<Vec<String>, f64> {
    let mut out = BTreeMap::new();
    for line in body.lines() {
        let Some(rest) = line.strip_prefix(family).and_then(|r| r.strip_prefix('{')) else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        let label = |name: &str| {
            let start = labels.find(&format!("{name}=\""))? + name.len() + 2;
            let end = labels[start..].find('"')?;
            Some(labels[start..start + end].to_string())
        };
        let key: Vec<String> = by.iter().map(|l| label(l).unwrap_or_default()).collect();
        *out.entry(key).or_default() += value;
    }
    out.retain(|_, v| *v != 0.0);
    out
}

fn sum_rows(parts: &[BTreeMap<Vec<String>, f64>]) -> BTreeMap<Vec<String>, f64> {
    let mut out = BTreeMap::new();
    for part in parts {
        for (k, v) in part {
            *out.entry(k.clone()).or_default() += v;
        }
    }
    out
}

/// What an instance counted: hop durations by (operation, hop, outcome),
/// operation durations and SLO events by (operation, outcome).
#[derive(Clone, Debug, Default, PartialEq)]
struct Observed {
    hops: BTreeMap<Vec<String>, f64>,
    operations: BTreeMap<Vec<String>, f64>,
    slo: BTreeMap<Vec<String>, f64>,
}

fn observed(store: &Store) -> Observed {
    let body = store.scrape(Format::Text);
    Observed {
        hops: rows(
            &body,
            "hcpflow_hop_duration_seconds_count",
            &["operation", "hop", "outcome"],
        ),
        operations: rows(
            &body,
            "hcpflow_operation_duration_seconds_count",
            &["operation", "outcome"],
        ),
        slo: rows(
            &body,
            "hcpflow_operation_slo_events_total",
            &["operation", "outcome"],
        ),
    }
}

fn total(parts: &[Observed]) -> Observed {
    Observed {
        hops: sum_rows(&parts.iter().map(|p| p.hops.clone()).collect::<Vec<_>>()),
        operations: sum_rows(
            &parts
                .iter()
                .map(|p| p.operations.clone())
                .collect::<Vec<_>>(),
        ),
        slo: sum_rows(&parts.iter().map(|p| p.slo.clone()).collect::<Vec<_>>()),
    }
}

const OPERATIONS: [&str; 6] = [
    "create",
    "delete",
    "node_pool_create",
    "node_pool_delete",
    "upgrade",
    "node_pool_upgrade",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_is_timed_where_read_and_counted_once_in_every_topology() {
    every_operation(false).await;
}

/// The same run, with each `(operation, hop)` count of the split and of the
/// shards compared with one instance's row by row. Not yet a gate: some
/// runs still differ by one or two hops (a shard's RP deletion under a
/// provisional id, a pool's removal at its NodePool, a deletion's
/// control plane); docs/design/08-scopes-and-scale-out.md §8.2 names what is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "row-by-row equality is not yet exact in every run (docs/design/08-scopes-and-scale-out.md §8.2)"]
async fn every_operation_row_by_row_equals_one_instance_in_every_topology() {
    every_operation(true).await;
}

async fn every_operation(exact: bool) {
    const SHARDS: u32 = 3;
    // Seed 2 by default; HCPFLOW_TOPOLOGY_SEED pins another.
    let seed = std::env::var("HCPFLOW_TOPOLOGY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let t0: Timestamp = "2026-03-01T12:00:00Z".parse().unwrap();
    let clock = Clock::manual(t0);
    let world = WorldConfig {
        speed: SPEED,
        ..testworld::demo(CLUSTERS, seed)
    };
    let demo = testworld::start_with_clock(world, clock.clone()).await;
    let (received, endpoint) = otlp::grpc_receiver();
    let mut shapes: Vec<DynShape> = vec![
        DynShape::from((
            "single",
            everything as fn(Config) -> Config,
            churning_single_view as Expect,
        )),
        DynShape {
            traced: true,
            ..DynShape::from((
                "service",
                service_only as fn(Config) -> Config,
                churning_service_view as Expect,
            ))
        },
    ];
    let mgmt_clusters: Vec<String> = demo
        .config
        .sources
        .kube
        .iter()
        .map(|k| k.mgmt_cluster.clone())
        .collect();
    assert_eq!(
        mgmt_clusters.len(),
        2,
        "the ARO world has two management clusters"
    );
    for mgmt in &mgmt_clusters {
        let (keep, mine) = (mgmt.clone(), mgmt.clone());
        shapes.push(DynShape {
            name: format!("management/{mgmt}"),
            shape: Box::new(move |config| {
                let mut config = management_only(config);
                config.sources.kube.retain(|k| k.mgmt_cluster == keep);
                config
            }),
            expect: Box::new(move |c| {
                if c.mgmt_cluster == mine {
                    management_view(c)
                } else {
                    Vec::new()
                }
            }),
            traced: true,
        });
    }
    for index in 0..SHARDS {
        shapes.push(DynShape {
            name: format!("shard/{index}"),
            shape: Box::new(move |mut config| {
                config.shard = hcp_flow::config::ShardConfig {
                    index,
                    total: SHARDS,
                };
                config
            }),
            expect: Box::new(move |c| {
                churning_single_view(c)
                    .into_iter()
                    .filter(|(id, _, _)| shard_of(id, SHARDS) == index)
                    .collect()
            }),
            traced: false,
        });
    }
    // The RP alone, and the RP with Maestro but no Clusters Service
    // (docs/design/08-scopes-and-scale-out.md §8.2's last two columns), over the same churning world.
    shapes.push(DynShape::from((
        "rp",
        rp_only as fn(Config) -> Config,
        rp_only_view as Expect,
    )));
    shapes.push(DynShape::from((
        "rp+maestro",
        rp_and_maestro as fn(Config) -> Config,
        rp_and_maestro_view as Expect,
    )));
    let run = walk(&demo, clock, shapes, STEPS, Some(&endpoint)).await;
    let of = |name: &str| observed(&run.stores[name]);
    let single = of("single");
    let management: Vec<Observed> = mgmt_clusters
        .iter()
        .map(|m| of(&format!("management/{m}")))
        .collect();
    let mut split_parts = vec![of("service")];
    split_parts.extend(management.iter().cloned());
    let split = total(&split_parts);
    let shards = total(
        &(0..SHARDS)
            .map(|i| of(&format!("shard/{i}")))
            .collect::<Vec<_>>(),
    );

    let split_names: Vec<String> = std::iter::once("service".to_string())
        .chain(mgmt_clusters.iter().map(|m| format!("management/{m}")))
        .collect();
    let shard_names: Vec<String> = (0..SHARDS).map(|i| format!("shard/{i}")).collect();
    // The world ran every operation to its end while it was watched.
    for operation in OPERATIONS {
        assert!(
            single.operations.keys().any(|k| k[0] == operation),
            "no {operation} ended in the run: {:?}",
            single.operations
        );
    }
    if exact {
        // Every hop of every operation timed once: where it is read directly.
        // A pool's hops at the RP and Clusters Service are read when the pool
        // moves, and the service side hears of that through Maestro's feedback,
        // later than an instance that watches the NodePool: a pool that passes
        // those hops between two reads is not timed there (docs/design/08-scopes-and-scale-out.md
        // §8.2). Those rows may fall short by a tenth, never exceed; every other
        // row is exact.
        let polled_pool_hop = |k: &Vec<String>| {
            k[0].starts_with("node_pool_") && (k[1] == "rp_frontend" || k[1] == "clusters_service")
        };
        for (key, want) in &single.hops {
            let got = split.hops.get(key).copied().unwrap_or_default();
            if polled_pool_hop(key) {
                assert!(
                    got <= *want && got >= (want * 0.9).floor(),
                    "split {key:?}: {got} against {want} in one instance"
                );
            } else {
                assert_eq!(
                    got,
                    *want,
                    "split {key:?} against one instance; {}",
                    apart(&run, &split_names, key)
                );
            }
        }
        for key in split.hops.keys() {
            assert!(
                single.hops.contains_key(key),
                "split times {key:?}, one instance does not"
            );
        }
        // Shards: every row exact but the RP's part of a deletion, which
        // shards time more often than one instance does: an RP resource still
        // deleting after Clusters Service let its cluster go is followed again
        // under its provisional id, in that id's shard (a known gap, written in
        // docs/design/08-scopes-and-scale-out.md §8.2).
        for key in single.hops.keys().chain(shards.hops.keys()) {
            let (got, want) = (
                shards.hops.get(key).copied().unwrap_or_default(),
                single.hops.get(key).copied().unwrap_or_default(),
            );
            if key[0] == "delete" && key[1] == "rp_frontend" {
                assert!(got >= want, "shards {key:?}: {got} against {want}");
            } else {
                assert_eq!(
                    got,
                    want,
                    "shards {key:?} against one instance; {}",
                    apart(&run, &shard_names, key)
                );
            }
        }
    }
    // The management side times the hops only it reads, for every
    // operation, not only creations.
    let mgmt_total = total(&management);
    for operation in OPERATIONS {
        assert!(
            mgmt_total.hops.keys().any(|k| k[0] == operation),
            "the management instances timed no hop of {operation}: {:?}",
            mgmt_total.hops
        );
    }
    // Against the world: each day-2 operation the world ended while it was
    // walked is timed at its management hop (the NodePool, the
    // HostedCluster) by the management instances, once, and nothing else is.
    day2_against_the_world(&run, &mgmt_clusters).await;
    creation_and_deletion_against_the_world(&run, &mgmt_clusters).await;

    // Every operation's end and verdict counted once: by its owner.
    // (The split's service side completes a creation through Maestro's
    // feedback, one instance through the watch: their verdicts are each
    // checked against the truth in `a_split_deployment_counts_each_creation_once`;
    // here, that nothing is counted twice, below.)
    if exact {
        assert_eq!(
            shards.operations, single.operations,
            "operation ends, shards"
        );
        assert_eq!(shards.slo, single.slo, "SLO events, shards");
    }
    for (m, observed) in mgmt_clusters.iter().zip(&management) {
        assert!(
            observed.operations.is_empty() && observed.slo.is_empty(),
            "management/{m} owns no operation: {observed:?}"
        );
    }

    // Each operation ends once in each instance, and is counted once
    // across the split and across the shards; each hop's span (its end read
    // directly) comes from one instance of the split.
    for (name, ended) in &run.ended {
        let mut seen = BTreeSet::new();
        for (key, _) in ended.operations.lock().iter() {
            assert!(seen.insert(key.clone()), "{name}: {key} ended twice");
        }
        let mut spans = BTreeSet::new();
        for (key, hop, via, _) in ended.hops.lock().iter() {
            assert!(
                spans.insert((key.clone(), *hop, *via)),
                "{name}: {key} ended {hop} ({via:?}) twice"
            );
        }
    }
    let counted = |names: &[String]| -> Vec<String> {
        let mut keys: Vec<String> = names
            .iter()
            .flat_map(|n| {
                run.ended[n.as_str()]
                    .operations
                    .lock()
                    .iter()
                    .filter(|(_, counted)| *counted)
                    .map(|(k, _)| k.clone())
                    .collect::<Vec<_>>()
            })
            .collect();
        keys.sort();
        keys
    };
    let single_counted = counted(&["single".to_string()]);
    assert!(!single_counted.is_empty());
    let split_counted = counted(&split_names);
    let distinct: BTreeSet<&String> = split_counted.iter().collect();
    assert_eq!(
        distinct.len(),
        split_counted.len(),
        "an end counted twice across the split"
    );
    assert!(!split_counted.is_empty());
    let shard_counted = counted(&shard_names);
    let distinct: BTreeSet<&String> = shard_counted.iter().collect();
    assert_eq!(
        distinct.len(),
        shard_counted.len(),
        "an end counted twice across the shards"
    );
    if exact {
        assert_eq!(shard_counted, single_counted, "counted ends, shards");
    }
    let direct_spans = |names: &[String]| -> Vec<(String, Hop)> {
        let mut spans: Vec<(String, Hop)> = names
            .iter()
            .flat_map(|n| {
                run.ended[n.as_str()]
                    .hops
                    .lock()
                    .iter()
                    .filter(|(_, _, via, _)| *via == Via::Direct)
                    .map(|(k, h, _, _)| (k.clone(), *h))
                    .collect::<Vec<_>>()
            })
            .collect();
        spans.sort();
        spans
    };
    // Over OTLP, the split's instances each exporting what their
    // configuration says (docs/design/07-traces.md §7.4, §8.2): every span once, the
    // roots from the service side only, each hop's direct span from the
    // side that reads it, and both sides' spans of one operation under one
    // trace id.
    let spans = received.spans();
    let mut ids = BTreeSet::new();
    for got in &spans {
        assert!(
            ids.insert((got.span.trace_id.clone(), got.span.span_id.clone())),
            "{} exported twice by {}",
            got.span.name,
            got.service
        );
        let hop_of = |hops: &[Hop]| hops.iter().any(|h| got.span.name == format!("hcp.hop.{h}"));
        let management_hop = hop_of(&[
            Hop::Manifestwork,
            Hop::HostedCluster,
            Hop::ControlPlane,
            Hop::ManagedCluster,
            Hop::NodePool,
        ]);
        let service_hop = hop_of(&[Hop::RpFrontend, Hop::ClustersService, Hop::MaestroBundle]);
        let root = got.span.parent_span_id.is_empty();
        let from_management = got.service.starts_with("management/");
        assert!(
            !(root && from_management),
            "a root span from {}: {}",
            got.service,
            got.span.name
        );
        assert!(
            (!management_hop || from_management) && (!service_hop || !from_management),
            "{} from {}",
            got.span.name,
            got.service
        );
    }
    let both_sides = |name: &str| {
        spans
            .iter()
            .filter(|g| g.span.parent_span_id.is_empty() && g.span.name == name)
            .filter(|root| {
                let sides: BTreeSet<bool> = spans
                    .iter()
                    .filter(|g| {
                        g.span.trace_id == root.span.trace_id && !g.span.parent_span_id.is_empty()
                    })
                    .map(|g| g.service.starts_with("management/"))
                    .collect();
                sides.len() == 2
            })
            .count()
    };
    for operation in [
        "hcp.cluster.create",
        "hcp.cluster.delete",
        "hcp.node_pool.create",
    ] {
        assert!(
            both_sides(operation) > 0,
            "no {operation} trace holds spans of both sides ({} spans received)",
            spans.len()
        );
    }
    let split_spans = direct_spans(&split_names);
    let single_spans = direct_spans(&["single".to_string()]);
    let distinct: BTreeSet<&(String, Hop)> = split_spans.iter().collect();
    assert_eq!(
        distinct.len(),
        split_spans.len(),
        "a hop's span twice across the split"
    );
    let single_set: BTreeSet<&(String, Hop)> = single_spans.iter().collect();
    // A pool's hops at the RP and Clusters Service are polled, each
    // instance on its own rotation and wake hints (docs/design/15b-operations.md
    // §15.11): whether an instance reads a pool between two of its states
    // there depends on its own schedule, so one side may time such a hop the
    // other never saw, either way. Every other span is the same set.
    let polled_pool_hop = |span: &&(String, Hop)| {
        span.0.contains("/node_pool_") && matches!(span.1, Hop::RpFrontend | Hop::ClustersService)
    };
    for span in &distinct {
        assert!(
            single_set.contains(span) || polled_pool_hop(span),
            "{span:?}: the split's key or hop, not one instance's"
        );
    }
    for span in single_set.difference(&distinct) {
        assert!(
            polled_pool_hop(span),
            "{span:?}: one instance's span, none from the split"
        );
    }

    // RP only and RP + Maestro, for every operation (docs/design/08-scopes-and-scale-out.md §8.2):
    // each times the hops it reads directly and no other; each owns the
    // RP's resources, tracked under provisional ids since no Clusters
    // Service joins them, and counts each of their operations once (no end
    // twice: checked for every instance above); Maestro's timelines, keyed
    // by the bundles' Clusters Service ids, own nothing, so RP + Maestro
    // counts exactly what the RP alone counts, and times the RP's hop alike.
    let rp = of("rp");
    let rp_maestro = of("rp+maestro");
    for (name, observed, reads) in [
        ("rp", &rp, &["rp_frontend"][..]),
        (
            "rp+maestro",
            &rp_maestro,
            &["rp_frontend", "maestro_bundle"][..],
        ),
    ] {
        for key in observed.hops.keys() {
            assert!(
                reads.contains(&key[1].as_str()),
                "{name} times {key:?}, a hop it does not read directly"
            );
        }
        for operation in ["create", "delete"] {
            for hop in reads {
                assert!(
                    observed
                        .hops
                        .keys()
                        .any(|k| k[0] == operation && k[1] == *hop),
                    "{name} timed no {hop} of {operation}: {:?}",
                    observed.hops
                );
            }
            assert!(
                observed.operations.keys().any(|k| k[0] == operation),
                "{name} ended no {operation}: {:?}",
                observed.operations
            );
        }
        for key in &counted(&[name.to_string()]) {
            assert!(
                hcp_flow::model::is_provisional(key),
                "{name} counted {key}, not an RP resource's"
            );
        }
    }
    assert_eq!(
        counted(&["rp".to_string()]),
        counted(&["rp+maestro".to_string()]),
        "RP + Maestro counts what the RP alone counts"
    );
    let verdicts = |name: &str| -> BTreeSet<(String, &'static str)> {
        run.ended[name].verdicts.lock().iter().cloned().collect()
    };
    let (rp_verdicts, rp_maestro_verdicts) = (verdicts("rp"), verdicts("rp+maestro"));
    // What each of the two holds of an operation they judged apart.
    let held = |key: &str| -> String {
        let cluster = key.rsplit_once('/').map_or(key, |(c, _)| c);
        ["rp", "rp+maestro"]
            .iter()
            .map(|name| {
                let seen = run.stores[*name].with_timeline(cluster, |t| {
                    format!(
                        "deletion {:?}, rp_frontend {:?}",
                        t.deletion
                            .as_deref()
                            .map(|d| (d.started_at, d.slo, d.ended_at)),
                        t.hop(Hop::RpFrontend).map(|h| (h.phase, h.since, &h.state)),
                    )
                });
                format!(
                    "{name}: {}",
                    seen.unwrap_or_else(|| "no timeline".to_string())
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let apart: Vec<String> = rp_verdicts
        .symmetric_difference(&rp_maestro_verdicts)
        .map(|(key, _)| format!("{key}: {}", held(key)))
        .collect();
    assert_eq!(
        (&rp.operations, &rp.slo),
        (&rp_maestro.operations, &rp_maestro.slo),
        "operation ends and SLO events, RP alone and RP + Maestro; verdicts only the RP gave: \
         {:?}; only RP + Maestro: {:?}; held at the end: {apart:?}",
        rp_verdicts
            .difference(&rp_maestro_verdicts)
            .collect::<Vec<_>>(),
        rp_maestro_verdicts
            .difference(&rp_verdicts)
            .collect::<Vec<_>>()
    );
    // What they time of a creation and a deletion is what one instance
    // times at those hops. (Their verdicts are the RP's own, a creation
    // complete at its Succeeded, so they need not match one instance's: a
    // creation one instance saw fail at its HostedCluster is late to the
    // RP.) A pool's operations and an upgrade start at the NodePool and the
    // HostedCluster, which neither reads directly: the RP alone never sees
    // them, RP + Maestro sees them through Maestro's feedback under Clusters
    // Service ids, which it neither times nor owns.
    let rows_of = |o: &Observed, hop: &str| -> BTreeMap<Vec<String>, f64> {
        o.hops
            .iter()
            .filter(|(k, _)| k[1] == hop && (k[0] == "create" || k[0] == "delete"))
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    };
    assert_eq!(
        rows_of(&rp, "rp_frontend"),
        rows_of(&single, "rp_frontend"),
        "the RP's hop, RP alone against one instance"
    );
    assert_eq!(
        rows_of(&rp_maestro, "rp_frontend"),
        rows_of(&rp, "rp_frontend"),
        "the RP's hop timed alike with or without Maestro"
    );
    assert_eq!(
        rows_of(&rp_maestro, "maestro_bundle"),
        rows_of(&single, "maestro_bundle"),
        "the bundle's hop, RP + Maestro against one instance"
    );
    for operation in [
        "node_pool_create",
        "node_pool_delete",
        "upgrade",
        "node_pool_upgrade",
    ] {
        assert!(
            !rp.operations.keys().any(|k| k[0] == operation)
                && !rp_maestro.operations.keys().any(|k| k[0] == operation),
            "{operation} counted by an instance without Clusters Service: {:?} / {:?}",
            rp.operations,
            rp_maestro.operations
        );
    }
}
