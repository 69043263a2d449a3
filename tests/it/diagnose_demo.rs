//! `hcp-flow diagnose` against the demo (docs/design/12-interfaces.md §12.4): on every
//! cluster of a faulty world, the exit code is the one the world's ground
//! truth implies and the verdict names the hop of the injected fault; the
//! configuration file the demo writes is what `diagnose --config` reads; a
//! source that cannot be read is reported (exit 4) with the other hops
//! still printed; `--from` asks the running exporter and agrees.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::exporter;
use crate::common::world as testworld;
use hcp_flow::config::{Config, Overrides};
use hcp_flow::diagnose::{self, Outcome};
use hcp_flow::sim::ground::GroundTruthCluster;
use hcp_flow::sim::{WorldConfig, WorldKind};
use jiff::Timestamp;

/// How far from a fault's due time a verdict may still be either side:
/// the sources' poll intervals, whole-second upstream times and a debug
/// build sharing two cores with the world.
const SLACK: jiff::SignedDuration = jiff::SignedDuration::from_secs(6);

/// The hop each injected fault stops (what the verdict must name).
fn fault_hop(fault: &str) -> &'static [&'static str] {
    match fault {
        "clusters_service_error"
        | "unknown_clusters_service_state"
        | "clusters_service_uninstall_error" => &["clusters_service"],
        "bundle_never_applied" | "maestro_status_not_updated" => &["maestro_bundle"],
        // A pool's bundle never applied: its creation is stuck (at the
        // NodePool it waits for, or the bundle that carries it).
        "node_pool_bundle_never_applied" => &["maestro_bundle", "node_pool"],
        "hosted_cluster_degraded" | "hosted_cluster_unavailable" => &["hosted_cluster"],
        "node_pool_stuck" | "kubevirt_machines_pending" | "no_free_agent" => &["node_pool"],
        "release_image_invalid" => &["hosted_cluster"],
        "unknown_provisioning_state" | "not_handed_over" | "rp_stuck_deleting" => &["rp_frontend"],
        "managed_cluster_never_joins" => &["managed_cluster"],
        // A deletion waits at the first hop of its flow read directly: the
        // management cluster's object where one is read, else the bundle.
        "hosted_cluster_finalizer_stuck" => &["hosted_cluster", "maestro_bundle"],
        "manifestwork_agent_gone" => &["manifestwork", "maestro_bundle"],
        // Day 2: the pool's hop, or the HostedCluster an upgrade waits at.
        "node_pool_never_reaches_ignition"
        | "added_pool_vm_unschedulable"
        | "added_pool_no_free_agent"
        | "node_pool_stuck_updating" => &["node_pool"],
        "upgrade_stuck_partial" => &["hosted_cluster"],
        other => panic!("a fault this test does not know: {other}"),
    }
}

/// The exit codes the ground truth allows at an instant between `from` and
/// `to` (the diagnosis took that long), or None where it cannot say (the
/// due time is too close).
fn allowed(truth: &GroundTruthCluster, from: Timestamp, to: Timestamp) -> Option<Vec<u8>> {
    let Some(fault) = truth.fault else {
        // Healthy: ready, or in progress (perhaps at risk, or being deleted).
        return Some(vec![0, 1]);
    };
    let failing = matches!(
        fault,
        "clusters_service_error"
            | "hosted_cluster_degraded"
            | "release_image_invalid"
            | "clusters_service_uninstall_error"
    );
    // Faults that strike after the creation completed with no operation
    // of theirs in flight: the cluster is degraded, never stuck
    // (docs/design/15-operations.md §15.7).
    let after_completion = matches!(
        fault,
        "managed_cluster_never_joins" | "hosted_cluster_unavailable"
    );
    // A pool's operation (its creation, with the cluster or added later; its
    // upgrade) or the control plane's upgrade stuck: the cluster reads as
    // its worst operation in flight, stuck (docs/design/15-operations.md §15.7).
    let operation_stuck = matches!(
        fault,
        "node_pool_stuck"
            | "kubevirt_machines_pending"
            | "no_free_agent"
            | "node_pool_bundle_never_applied"
            | "node_pool_never_reaches_ignition"
            | "added_pool_vm_unschedulable"
            | "added_pool_no_free_agent"
            | "upgrade_stuck_partial"
            | "node_pool_stuck_updating"
    );
    let due = truth.alert_due_at?;
    if due <= from - SLACK {
        return Some(match fault {
            _ if operation_stuck => vec![2],
            _ if failing => vec![3],
            // The regression ends after 25–35 world minutes. Read once, a
            // HostedCluster not Available now may show a creation that never
            // completed (stuck) as well as a completed one regressed.
            "hosted_cluster_unavailable" => vec![0, 2, 5],
            // The service side's status froze before the creation completed;
            // a management cluster read directly shows it completed, and the
            // frozen bundle then degrades a finished cluster.
            "maestro_status_not_updated" => vec![2, 5],
            _ if after_completion => vec![5],
            // An unknown state is not a stuck state until the hop's budget
            // has passed since it began; the alert is about the source.
            "unknown_clusters_service_state" | "unknown_provisioning_state" => vec![1, 2],
            _ => vec![2],
        });
    }
    if due >= to + SLACK {
        // Not due yet: a failure may show before its alert's hold ends, and
        // a hop may be stuck (or degraded) early when its phase began
        // before the fault.
        return Some(if failing {
            vec![0, 1, 3]
        } else if operation_stuck {
            vec![0, 1, 2]
        } else if after_completion || fault == "maestro_status_not_updated" {
            vec![0, 1, 2, 5]
        } else {
            vec![0, 1, 2]
        });
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_cluster_exits_as_its_ground_truth_implies_and_names_the_faults_hop() {
    let seen = every_cluster(WorldKind::Aro, 30, 17).await;
    // The world at this age holds stuck and failed creations of several
    // kinds, so the test saw the verdicts that matter.
    assert!(seen.judged >= 20, "only {} clusters judged", seen.judged);
    assert!(
        seen.by_code.get(&2).is_some_and(|n| *n > 0),
        "{:?}",
        seen.by_code
    );
    assert!(
        seen.by_code.get(&3).is_some_and(|n| *n > 0),
        "{:?}",
        seen.by_code
    );
    assert!(seen.by_fault.len() >= 3, "{:?}", seen.by_fault);
    // Faults after a creation completed read degraded, never stuck.
    assert!(
        seen.by_code.get(&5).is_some_and(|n| *n > 0),
        "{:?}",
        seen.by_code
    );
}

/// The self-managed hub: targets are HostedCluster ids, `namespace/name`
/// either way (the exporter keys a cluster by `spec.clusterID` when set).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_hub_cluster_exits_as_its_ground_truth_implies() {
    let seen = every_cluster(WorldKind::SelfManaged, 20, 5).await;
    assert!(seen.judged >= 12, "only {} clusters judged", seen.judged);
    assert!(
        seen.by_ns_name > 0,
        "no cluster was found by namespace/name alone"
    );
    assert!(seen.by_fault.len() >= 2, "{:?}", seen.by_fault);
}

struct Seen {
    by_code: BTreeMap<u8, usize>,
    by_fault: BTreeMap<&'static str, usize>,
    judged: usize,
    /// Clusters keyed by `spec.clusterID`, diagnosed by `namespace/name`.
    by_ns_name: usize,
}

/// Diagnose every cluster of a faulty demo world live, judge each exit code
/// and verdict against the ground truth, and fail with every problem found.
async fn every_cluster(world: WorldKind, clusters: usize, seed: u64) -> Seen {
    let demo = testworld::start(WorldConfig {
        kind: world,
        ..testworld::demo(clusters, seed)
    })
    .await;
    // The running exporter, for --from.
    let exporter = exporter::of_world(&demo).serve().await;
    let exporter_url: url::Url = exporter.url.parse().unwrap();

    // What the demo wrote is what a user passes to `diagnose --config`.
    let config = Config::load(Some(&demo.config_path), &Overrides::default()).unwrap();
    assert_eq!(config.sources.kube.len(), demo.config.sources.kube.len());

    // Let faults pass their budgets (10–30 s at this speed).
    tokio::time::sleep(Duration::from_secs(40)).await;

    let mut by_code: BTreeMap<u8, usize> = BTreeMap::new();
    let mut by_fault: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut judged = 0;
    let mut by_ns_name = 0;
    let client = reqwest::Client::new();
    let mut problems = Vec::new();
    let truth = demo.world.ground_truth();
    for item in &truth.items {
        let from = demo.world.ground_truth().at;
        // What an SRE has: the ARM resource id (Clusters Service may not
        // have the cluster yet, and then its id is known to nobody).
        let mut target = if item.resource_id.is_empty() {
            item.cluster_id.clone()
        } else {
            item.resource_id.clone()
        };
        // A hub cluster keyed by its spec.clusterID: ask by namespace/name,
        // what `kubectl get hostedcluster -A` shows.
        if world == WorldKind::SelfManaged && !target.contains('/') {
            let t: serde_json::Value = client
                .get(format!("{exporter_url}api/v1/clusters/{target}"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap_or_default();
            if let (Some(ns), Some(name)) = (t["namespace"].as_str(), t["name"].as_str())
                && !ns.is_empty()
            {
                target = format!("{ns}/{name}");
                by_ns_name += 1;
            }
        }
        let target = &target;
        let report = diagnose::live(&config, target, Duration::from_secs(20))
            .await
            .unwrap();
        let after = demo.world.ground_truth();
        // Deleted by the churn meanwhile: nothing to judge.
        let Some(now) = after.items.iter().find(|c| c.cluster_id == item.cluster_id) else {
            continue;
        };
        let code = report.exit_code();
        *by_code.entry(code).or_default() += 1;
        let Some(allowed) = allowed(now, from, after.at) else {
            continue;
        };
        judged += 1;
        let verdict = report
            .timeline
            .as_ref()
            .map(|t| t["verdict"].clone())
            .unwrap_or_default();
        if !allowed.contains(&code) {
            problems.push(format!(
                "{} ({:?}, due {:?}): exit {code}, allowed {allowed:?}: {}",
                item.cluster_id,
                now.fault,
                now.alert_due_at,
                report.verdict_line()
            ));
            continue;
        }
        // A day-2 fault past its due time: the stuck operation is listed
        // with its own verdict, the operation and pool the fault hit.
        if let (Some(fault), Some(operation), Some(due)) =
            (now.fault, now.operation, now.alert_due_at)
            && matches!(
                operation,
                "node_pool_create" | "upgrade" | "node_pool_upgrade"
            )
            && due <= from - SLACK
        {
            let ops = report
                .timeline
                .as_ref()
                .and_then(|t| t["operations"].as_array().cloned())
                .unwrap_or_default();
            let stuck = ops.iter().any(|o| {
                o["operation"] == operation
                    && o["verdict"] == "stuck"
                    && now
                        .node_pool
                        .as_deref()
                        .is_none_or(|p| o["node_pool"].as_str() == Some(p))
            });
            if !stuck {
                problems.push(format!(
                    "{} ({fault}): no {operation} stuck among its operations: {ops:?}",
                    item.cluster_id
                ));
            }
        }
        if let Some(fault) = now.fault
            && matches!(code, 2 | 3 | 5)
        {
            *by_fault.entry(fault).or_default() += 1;
            let hops = fault_hop(fault);
            let named = verdict["hop"].as_str().unwrap_or_default();
            if !hops.contains(&named) {
                problems.push(format!(
                    "{} ({fault}): the verdict names {named} instead of {hops:?}: {}",
                    item.cluster_id,
                    report.verdict_line()
                ));
            }
            // The sentence says which hop, and how long or what failed.
            let reason = verdict["reason"].as_str().unwrap_or_default();
            if !reason.contains(named) {
                problems.push(format!("{}: reason {reason:?}", item.cluster_id));
            }
        }
        // --from asks the running exporter the same question.
        if report.unreadable.is_empty() && matches!(code, 2 | 3 | 5) {
            let remote = diagnose::from_exporter(&exporter_url, target)
                .await
                .unwrap();
            // The demo's sources fail now and then (injected 5xx): an
            // exporter that says so answers 4, rightly.
            // A walk reads each upstream once and cannot know a completion
            // it did not see; the exporter, which watched the creation
            // complete, rightly says degraded where the walk says stuck.
            let remembers_completion = code == 2 && remote.exit_code() == 5;
            if remote.unreadable.is_empty() && remote.exit_code() != code && !remembers_completion {
                problems.push(format!(
                    "{}: live says {code}, the exporter says {}: {}",
                    item.cluster_id,
                    remote.exit_code(),
                    remote.verdict_line()
                ));
            }
        }
    }
    eprintln!(
        "{world:?}: exit codes {by_code:?}; stuck or failed by fault {by_fault:?}; judged {judged}"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    Seen {
        by_code,
        by_fault,
        judged,
        by_ns_name,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unreadable_source_is_reported_with_the_other_hops_and_exit_4() {
    let demo = testworld::start(WorldConfig {
        faults: false,
        ..testworld::demo(6, 3)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut config = Config::load(Some(&demo.config_path), &Overrides::default()).unwrap();
    // Maestro moved away: nothing listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let maestro = config.sources.maestro.as_mut().unwrap();
    maestro.http.base_url = format!("http://127.0.0.1:{port}/").parse().unwrap();
    // By ARM resource id: found whether or not Clusters Service has it yet.
    // The newest cluster: the oldest may be deleted by the churn meanwhile.
    let id = demo
        .world
        .ground_truth()
        .items
        .last()
        .unwrap()
        .resource_id
        .clone();
    let report = diagnose::live(&config, &id, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(report.outcome(), Outcome::Unreadable, "{report:?}");
    assert_eq!(report.unreadable.len(), 1, "{:?}", report.unreadable);
    assert_eq!(report.unreadable[0].source, "maestro");
    let table = diagnose::render::render(&report, diagnose::render::Output::Table);
    // The hops the other sources show are still there.
    assert!(table.contains("clusters_service"), "{table}");
    assert!(table.contains("could not be read: maestro"), "{table}");
    assert!(table.contains("(exit 4)"), "{table}");
}

#[test]
fn the_binary_reads_the_demo_config_and_prints_each_format() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let demo = runtime.block_on(testworld::start(WorldConfig {
        faults: false,
        ..testworld::demo(6, 5)
    }));
    std::thread::sleep(Duration::from_secs(3));
    let item = demo.world.ground_truth().items[0].clone();
    let run = |output: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_hcp-flow"))
            .args(["diagnose", "--config"])
            .arg(&demo.config_path)
            .args(["--output", output, "--wait", "20s", &item.resource_id])
            .env_remove("HCPFLOW_CONFIG")
            .output()
            .unwrap()
    };
    let table = run("table");
    let stdout = String::from_utf8_lossy(&table.stdout);
    let code = table.status.code().unwrap();
    assert!(
        matches!(code, 0 | 1),
        "a healthy cluster: exit {code}\n{stdout}\n{}",
        String::from_utf8_lossy(&table.stderr)
    );
    assert!(stdout.contains(&item.cluster_id), "{stdout}");
    assert!(stdout.contains("HOP"), "{stdout}");
    assert!(stdout.contains(&format!("(exit {code})")), "{stdout}");

    let json: serde_json::Value = serde_json::from_slice(&run("json").stdout).unwrap();
    assert_eq!(json["timeline"]["cluster_id"], item.cluster_id.as_str());
    assert!(json["exit_code"].as_u64().is_some_and(|c| c <= 1), "{json}");

    let markdown = String::from_utf8_lossy(&run("markdown").stdout).to_string();
    assert!(markdown.starts_with("# hcp-flow diagnose"), "{markdown}");
    assert!(markdown.contains("## Timeline"), "{markdown}");
    assert!(markdown.contains("trace id is `"), "{markdown}");
    drop(demo);
    drop(runtime);
}

/// The world's counters once the previous walk's watches are closed (the
/// simulated API server counts what it sends until the connection goes).
async fn settled_counters(demo: &hcp_flow::demo::Demo) -> BTreeMap<String, u64> {
    tokio::time::sleep(Duration::from_secs(2)).await;
    demo.world.items_served()
}

/// What each upstream answered between two readings of the world's counters.
fn served_since(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(source, n)| (source.clone(), n - before.get(source).copied().unwrap_or(0)))
        .collect()
}

/// The cheatsheet's targeted queries (docs/design/12-interfaces.md §12.4): a walk reads
/// one creation from every upstream, not the fleet. Counted where the
/// objects are served, so a source that lists the fleet cannot pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_walk_reads_one_creation_from_each_upstream_not_the_fleet() {
    const CLUSTERS: usize = 150;
    let demo = testworld::start(WorldConfig {
        faults: false,
        ..testworld::demo(CLUSTERS, 11)
    })
    .await;
    let config = Config::load(Some(&demo.config_path), &Overrides::default()).unwrap();
    // Long enough for the oldest creations to reach their control planes.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let truth = demo.world.ground_truth();
    // Creations whose HostedCluster exists, the newest first (the churn
    // deletes the oldest), and a few that have not reached it.
    let on_a_management_cluster: std::collections::HashSet<String> = demo
        .mgmt_clusters
        .iter()
        .flat_map(|c| c.api.objects("HostedCluster"))
        .filter_map(|hc| {
            hc["metadata"]["labels"]["api.openshift.com/id"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    let (far, near): (Vec<_>, Vec<_>) = truth
        .items
        .iter()
        .rev()
        .filter(|i| !i.resource_id.is_empty())
        .partition(|i| on_a_management_cluster.contains(&i.cluster_id));
    let mut walked_to_the_control_plane = 0;
    for item in far.into_iter().take(5).chain(near.into_iter().take(2)) {
        let before = settled_counters(&demo).await;
        let group_before = in_group_of(&demo.world.ground_truth(), &item.resource_id);
        let report = diagnose::live(&config, &item.resource_id, Duration::from_secs(20))
            .await
            .unwrap();
        let cost = served_since(&before, &demo.world.items_served());
        // Clusters Service is first searched by subscription and resource
        // group: the clusters of that group, a fifth of this fleet. The
        // churn creates clusters in the group while the walk runs, so the
        // group is the larger of its sizes before and after the walk.
        let in_group = group_before.max(in_group_of(&demo.world.ground_truth(), &item.resource_id));
        // Deleted by the churn meanwhile: nothing to find.
        if !demo
            .world
            .ground_truth()
            .items
            .iter()
            .any(|i| i.cluster_id == item.cluster_id)
        {
            continue;
        }
        let timeline = report.timeline.as_ref().unwrap_or_else(|| {
            panic!(
                "{} not found: {} (served {cost:?})",
                item.resource_id,
                report.verdict_line()
            )
        });
        let mgmt = timeline["mgmt_cluster"].as_str().unwrap_or_default();
        for (source, n) in &cost {
            let bound = match source.as_str() {
                // Each cluster of the group is listed, and its provision
                // shard read once; then the target by id, and its node
                // pools (a walk has no rotation through the group's).
                "clusters_service" => 2 * in_group + 10,
                // The target's management cluster: its objects and the
                // events about them while the walk watches.
                s if s == format!("kube/{mgmt}") => 30,
                // Other management clusters are never read once the
                // target's is known from its provision shard (a few events
                // may still go to the previous walk's closing watches).
                s if s.starts_with("kube/") => 5,
                _ => 20,
            };
            assert!(
                *n <= bound,
                "{}: {source} answered {n} objects (bound {bound}, fleet {CLUSTERS}): {cost:?}",
                item.cluster_id
            );
        }
        let hops = &timeline["hops"];
        if [
            "maestro_bundle",
            "manifestwork",
            "hosted_cluster",
            "control_plane",
        ]
        .iter()
        .all(|hop| hops.get(hop).is_some())
        {
            walked_to_the_control_plane += 1;
        }
    }
    assert!(
        walked_to_the_control_plane > 0,
        "no walk reached a control plane, so the narrowed management-side reads were not shown to find anything"
    );
    // The counters count: a bare id Clusters Service does not know (it may
    // be a self-managed spec.clusterID) is looked for on every management
    // cluster, and that costs their whole fleet; the services answer for
    // the id alone.
    let before = settled_counters(&demo).await;
    let report = diagnose::live(&config, "no-such-cluster", Duration::from_secs(20))
        .await
        .unwrap();
    assert!(report.timeline.is_none());
    let cost = served_since(&before, &demo.world.items_served());
    let management_side: u64 = cost
        .iter()
        .filter(|(source, _)| source.starts_with("kube/"))
        .map(|(_, n)| n)
        .sum();
    assert!(
        management_side >= CLUSTERS as u64 / 2,
        "a fleet-wide read answered only {cost:?}"
    );
    assert!(cost["clusters_service"] <= 5, "{cost:?}");
    assert_eq!(cost["maestro"], 0, "{cost:?}");
    // An ARM id the RP does not have is not found, at the cost of one GET.
    let before = settled_counters(&demo).await;
    let missing = format!("{}-gone", truth.items[0].resource_id);
    let report = diagnose::live(&config, &missing, Duration::from_secs(20))
        .await
        .unwrap();
    assert!(report.timeline.is_none());
    let cost = served_since(&before, &demo.world.items_served());
    assert!(
        cost["clusters_service"] + cost["rp_frontend"] <= 2 * in_group_of(&truth, &missing) + 10,
        "{cost:?}"
    );
    assert_eq!(cost["maestro"], 0, "{cost:?}");
    for (source, n) in cost.iter().filter(|(s, _)| s.starts_with("kube/")) {
        assert!(*n <= 5, "{source} answered {n}: {cost:?}");
    }
}

/// How many of the world's clusters share `resource_id`'s subscription and
/// resource group.
fn in_group_of(truth: &hcp_flow::sim::ground::GroundTruth, resource_id: &str) -> u64 {
    let group = resource_id
        .to_ascii_lowercase()
        .split("/providers/")
        .next()
        .unwrap_or_default()
        .to_string();
    truth
        .items
        .iter()
        .filter(|i| i.resource_id.to_ascii_lowercase().starts_with(&group))
        .count() as u64
}
