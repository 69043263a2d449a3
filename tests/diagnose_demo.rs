//! `hcp-flow diagnose` against the demo (docs/design.md §12.4): on every
//! cluster of a faulty world, the exit code is the one the world's ground
//! truth implies and the verdict names the hop of the injected fault; the
//! configuration file the demo writes is what `diagnose --config` reads; a
//! source that cannot be read is reported (exit 4) with the other hops
//! still printed; `--from` asks the running exporter and agrees.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use hcp_flow::app::{self, Exporter};
use hcp_flow::config::{Config, Overrides};
use hcp_flow::demo::{DemoSettings, start_demo_world};
use hcp_flow::diagnose::{self, Outcome};
use hcp_flow::sim::LatencyModel;
use hcp_flow::sim::ground::GroundTruthCluster;
use jiff::Timestamp;

/// How far from a fault's due time a verdict may still be either side:
/// the sources' poll intervals, whole-second upstream times and a debug
/// build sharing two cores with the world.
const SLACK: jiff::SignedDuration = jiff::SignedDuration::from_secs(6);

/// The hop each injected fault stops (what the verdict must name).
fn fault_hop(fault: &str) -> &'static str {
    match fault {
        "clusters_service_error" | "unknown_clusters_service_state" => "clusters_service",
        "bundle_never_applied"
        | "maestro_status_not_updated"
        | "node_pool_bundle_never_applied" => "maestro_bundle",
        "hosted_cluster_degraded" | "hosted_cluster_unavailable" => "hosted_cluster",
        "node_pool_stuck" => "node_pool",
        "unknown_provisioning_state" | "not_handed_over" => "rp_frontend",
        "managed_cluster_never_joins" => "managed_cluster",
        other => panic!("a fault this test does not know: {other}"),
    }
}

/// The exit codes the ground truth allows at an instant between `from` and
/// `to` (the diagnosis took that long), or None where it cannot say (the
/// due time is too close).
fn allowed(truth: &GroundTruthCluster, from: Timestamp, to: Timestamp) -> Option<Vec<u8>> {
    let Some(fault) = truth.fault else {
        // Healthy: ready, or in progress (perhaps at risk, or deleted).
        return Some(vec![0, 1]);
    };
    let failing = matches!(fault, "clusters_service_error" | "hosted_cluster_degraded");
    let due = truth.alert_due_at?;
    if due <= from - SLACK {
        return Some(match fault {
            _ if failing => vec![3],
            // The regression ends after 25–35 world minutes.
            "hosted_cluster_unavailable" => vec![0, 2],
            // An unknown state is not a stuck state until the hop's budget
            // has passed since it began; the alert is about the source.
            "unknown_clusters_service_state" | "unknown_provisioning_state" => vec![1, 2],
            _ => vec![2],
        });
    }
    if due >= to + SLACK {
        // Not due yet: a failure may show before its alert's hold ends, and
        // a hop may be stuck early when its phase began before the fault.
        return Some(if failing {
            vec![0, 1, 3]
        } else {
            vec![0, 1, 2]
        });
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_cluster_exits_as_its_ground_truth_implies_and_names_the_faults_hop() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let settings = DemoSettings {
        clusters: 30,
        speed: 60.0,
        seed: 17,
        faults: true,
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    let demo = start_demo_world(&settings, LatencyModel::none())
        .await
        .unwrap();
    // The running exporter, for --from.
    let exporter = Exporter::start(&demo.config, settings.speed).unwrap();
    let listener = app::bind(settings.listen).await.unwrap();
    let exporter_url: url::Url = format!("http://{}", listener.local_addr().unwrap())
        .parse()
        .unwrap();
    tokio::spawn(exporter.serve(listener, std::future::pending(), Duration::from_secs(1)));

    // What the demo wrote is what a user passes to `diagnose --config`.
    let config = Config::load(Some(&demo.config_path), &Overrides::default()).unwrap();
    assert_eq!(config.sources.kube.len(), demo.config.sources.kube.len());

    // Let faults pass their budgets (10–30 s at this speed).
    tokio::time::sleep(Duration::from_secs(40)).await;

    let mut by_code: BTreeMap<u8, usize> = BTreeMap::new();
    let mut by_fault: BTreeMap<&str, usize> = BTreeMap::new();
    let mut judged = 0;
    let mut problems = Vec::new();
    let truth = demo.world.ground_truth();
    for item in &truth.items {
        let from = demo.world.ground_truth().at;
        // What an SRE has: the ARM resource id (Clusters Service may not
        // have the cluster yet, and then its id is known to nobody).
        let target = if item.resource_id.is_empty() {
            &item.cluster_id
        } else {
            &item.resource_id
        };
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
        if let Some(fault) = now.fault
            && matches!(code, 2 | 3)
        {
            *by_fault.entry(fault).or_default() += 1;
            if verdict["hop"] != fault_hop(fault) {
                problems.push(format!(
                    "{} ({fault}): the verdict names {} instead of {}: {}",
                    item.cluster_id,
                    verdict["hop"],
                    fault_hop(fault),
                    report.verdict_line()
                ));
            }
            // The sentence says which hop, and how long or what failed.
            let reason = verdict["reason"].as_str().unwrap_or_default();
            if !reason.contains(fault_hop(fault)) {
                problems.push(format!("{}: reason {reason:?}", item.cluster_id));
            }
        }
        // --from asks the running exporter the same question.
        if report.unreadable.is_empty() && matches!(code, 2 | 3) {
            let remote = diagnose::from_exporter(&exporter_url, target)
                .await
                .unwrap();
            if remote.exit_code() != code {
                problems.push(format!(
                    "{}: live says {code}, the exporter says {}: {}",
                    item.cluster_id,
                    remote.exit_code(),
                    remote.verdict_line()
                ));
            }
        }
    }
    eprintln!("exit codes: {by_code:?}; stuck or failed by fault: {by_fault:?}; judged {judged}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(judged >= 20, "only {judged} clusters judged");
    // The world at this age holds stuck and failed creations of several
    // kinds, so the test saw the verdicts that matter.
    assert!(by_code.get(&2).is_some_and(|n| *n > 0), "{by_code:?}");
    assert!(by_code.get(&3).is_some_and(|n| *n > 0), "{by_code:?}");
    assert!(by_fault.len() >= 3, "{by_fault:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unreadable_source_is_reported_with_the_other_hops_and_exit_4() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let settings = DemoSettings {
        clusters: 6,
        speed: 60.0,
        seed: 3,
        faults: false,
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    let demo = start_demo_world(&settings, LatencyModel::none())
        .await
        .unwrap();
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
    let _ = rustls::crypto::ring::default_provider().install_default();
    let settings = DemoSettings {
        clusters: 6,
        speed: 60.0,
        seed: 5,
        faults: false,
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    let demo = runtime
        .block_on(start_demo_world(&settings, LatencyModel::none()))
        .unwrap();
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
