//! The simulated world's per-cluster faults on the HTTP and kube wire, with
//! the alert each should raise: a NodePool's bundle never applied (ARO HCP
//! places each NodePool in a bundle and ManifestWork of its own), and a
//! creation the RP accepted that never reached Clusters Service
//! (`not_handed_over`, off unless the config asks for it).

use crate::common::exporter;
use crate::common::world as testworld;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use hcp_flow::model::{Hop, Phase};
use hcp_flow::sim::{Endpoints, FaultKind, LatencyModel, SimClock, World, WorldConfig};
use jiff::Timestamp;
use serde_json::Value;

fn t0() -> Timestamp {
    "2026-03-01T12:00:00Z".parse().unwrap()
}

fn cfg(clusters: usize, seed: u64, not_handed_over: f64) -> WorldConfig {
    WorldConfig {
        clusters,
        speed: 1.0,
        seed,
        faults: true,
        churn: false,
        latency: LatencyModel::none(),
        subscriptions: 2,
        not_handed_over,
        failure_burst: None,
        kind: hcp_flow::sim::WorldKind::Aro,
    }
}

/// A world an hour in, served over HTTP and on its management clusters.
async fn serve(cfg: WorldConfig) -> (World, Endpoints) {
    crate::common::init();
    let world = World::new(cfg, SimClock::manual(t0()));
    world.clock().advance(Duration::from_secs(3600));
    let endpoints = world.serve().await.unwrap();
    world.serve_kube().await.unwrap();
    world.sync_kube();
    (world, endpoints)
}

async fn get(url: &url::Url, path: &str) -> (u16, Value) {
    let r = reqwest::get(format!("{}{path}", url.as_str().trim_end_matches('/')))
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

/// Every bundle Maestro serves.
async fn bundles(ep: &Endpoints) -> Vec<Value> {
    let (status, body) = get(&ep.maestro, "/api/maestro/v1/resource-bundles?size=1000").await;
    assert_eq!(status, 200);
    body["items"].as_array().unwrap().clone()
}

fn labelled<'a>(bundles: &'a [Value], cluster_id: &str) -> Vec<&'a Value> {
    bundles
        .iter()
        .filter(|b| b["metadata"]["labels"]["api.openshift.com/id"] == cluster_id)
        .collect()
}

/// Every ManifestWork and NodePool name on the world's management clusters.
fn kube_names(world: &World, kind: &str) -> BTreeSet<String> {
    world
        .mgmt_clusters()
        .iter()
        .flat_map(|c| c.api.objects(kind))
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_node_pool_bundle_never_applied_leaves_its_pool_unknown_and_the_rest_going() {
    let _machine = crate::common::load::share();
    let (world, ep) = serve(cfg(300, 11, 0.0)).await;
    let truth = world.truth();
    let faulted: Vec<_> = truth
        .clusters
        .iter()
        .filter(|c| c.fault == Some(FaultKind::NodePoolBundleNeverApplied))
        .collect();
    assert!(faulted.len() >= 5, "only {} such clusters", faulted.len());
    let bundles = bundles(&ep).await;
    let works = kube_names(&world, "ManifestWork");
    for c in faulted {
        let id = c.cluster_id.as_str();
        let mine = labelled(&bundles, id);
        let by_name = |name: &str| mine.iter().find(|b| b["name"] == name).unwrap();
        // The first pool's bundle has no status; the HostedCluster's does.
        let pool = by_name(&format!("{id}-np-1"));
        assert!(pool["status"].is_null(), "{pool}");
        assert!(by_name(id)["status"]["conditions"].is_array());
        // On the management cluster: the pool's work without status, and
        // no NodePool behind it.
        assert!(works.contains(&format!("{id}-np-1")));
        assert!(works.contains(id));
        let work = world
            .mgmt_clusters()
            .iter()
            .flat_map(|m| m.api.objects("ManifestWork"))
            .find(|o| o["metadata"]["name"] == format!("{id}-np-1"))
            .unwrap();
        assert!(
            work["status"]["conditions"].is_null(),
            "never applied: {work}"
        );
        assert_eq!(c.hops[&Hop::HostedCluster].phase, Phase::Ready);
        assert_eq!(c.hops[&Hop::NodePool].phase, Phase::Unknown);
        assert_eq!(c.hops[&Hop::MaestroBundle].phase, Phase::Progressing);
        assert!(c.completed_at.is_some(), "the cluster itself is created");
        assert_eq!(c.expected_alert, Some("HCPMaestroStatusNotUpdated"));
        assert_eq!(
            c.expected(Hop::Manifestwork).unwrap().phase,
            Phase::Progressing,
            "on the management cluster, one work is not applied"
        );
    }
}

#[tokio::test]
async fn a_creation_not_handed_over_exists_only_at_the_rp() {
    let _machine = crate::common::load::share();
    let (world, ep) = serve(cfg(60, 4, 0.25)).await;
    let truth = world.truth();
    let lost: Vec<_> = truth
        .clusters
        .iter()
        .filter(|c| c.fault == Some(FaultKind::NotHandedOver))
        .collect();
    assert!(
        (5..=30).contains(&lost.len()),
        "{} of 60 not handed over",
        lost.len()
    );
    let bundles = bundles(&ep).await;
    let works = kube_names(&world, "ManifestWork");
    let (status, cs) = get(
        &ep.clusters_service,
        "/api/aro_hcp/v1alpha1/clusters?size=500",
    )
    .await;
    assert_eq!(status, 200);
    let cs_names: BTreeSet<&str> = cs["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for c in lost {
        assert_eq!(
            c.hops.keys().collect::<Vec<_>>(),
            [&Hop::RpFrontend],
            "{c:?}"
        );
        let rp = &c.hops[&Hop::RpFrontend];
        assert_eq!((rp.phase, rp.state.as_str()), (Phase::Pending, "Accepted"));
        assert!(c.completed_at.is_none() && !c.failed, "never completes");
        assert_eq!(c.expected_alert, Some("HCPCreationNotHandedOver"));
        assert!(c.management.is_empty());

        let (status, body) = get(
            &ep.rp_frontend,
            &format!("{}?api-version=2024-06-10-preview", c.resource_id),
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(body["properties"]["provisioningState"], "Accepted");
        assert!(!cs_names.contains(c.name.as_str()), "{} in CS", c.name);
        let (status, _) = get(
            &ep.clusters_service,
            &format!("/api/aro_hcp/v1alpha1/clusters/{}", c.cluster_id),
        )
        .await;
        assert_eq!(status, 404);
        assert!(labelled(&bundles, &c.cluster_id).is_empty());
        assert!(!works.iter().any(|w| w.starts_with(&c.cluster_id)));
    }

    // Drawn from its own stream: every other cluster is what it was.
    let without = World::new(cfg(60, 4, 0.0), SimClock::manual(t0()));
    without.clock().advance(Duration::from_secs(3600));
    let before = without.truth();
    let plain = |truth: &hcp_flow::sim::Truth| {
        let mut t = truth.clone();
        t.clusters.iter_mut().for_each(|c| {
            c.management.clear();
            c.management_faults = Default::default();
            if c.expected_alert == Some("HCPManagedClusterNotJoined") {
                c.expected_alert = None;
            }
        });
        t
    };
    let (before, after) = (plain(&before), plain(&truth));
    for c in &after.clusters {
        if c.fault != Some(FaultKind::NotHandedOver) {
            assert_eq!(Some(c), before.cluster(&c.cluster_id), "{}", c.cluster_id);
        }
    }
}

#[test]
fn every_fault_names_an_alert_of_the_bundle() {
    let _machine = crate::common::load::share();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("alerts");
    let mut alerts = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        alerts.extend(
            text.lines()
                .filter_map(|l| l.trim().strip_prefix("- alert: "))
                .map(|a| a.trim().to_string()),
        );
    }
    let kinds = [
        FaultKind::ClustersServiceError,
        FaultKind::BundleNeverApplied,
        FaultKind::MaestroStatusNotUpdated,
        FaultKind::HostedClusterDegraded,
        FaultKind::NodePoolStuck,
        FaultKind::UnknownClustersServiceState,
        FaultKind::UnknownProvisioningState,
        FaultKind::NodePoolBundleNeverApplied,
        FaultKind::NotHandedOver,
    ];
    for kind in kinds {
        let alert = kind.expected_alert();
        assert!(
            alerts.contains(alert),
            "{kind:?} expects {alert}, which alerts/ does not define"
        );
    }
    assert!(alerts.contains("HCPManagedClusterNotJoined"));
}

/// The exporter reading a world where some creations were never handed
/// over: each shows as an RP-only cluster under its provisional id, and the
/// alert the truth names fires on the series the exporter renders for it
/// (promtool, timestamps shifted so the RP's creation is time 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exporter_shows_a_creation_not_handed_over_and_its_alert_fires() {
    let _machine = crate::common::load::share();
    crate::common::init();
    let speed = 60.0;
    let world = World::new(
        WorldConfig {
            speed,
            churn: false,
            ..cfg(30, 4, 0.25)
        },
        SimClock::Real,
    );
    let endpoints = world.serve().await.unwrap();
    let config =
        hcp_flow::demo::demo_config(&testworld::settings(world.config()), &world, &endpoints);
    let exporter = exporter::with_config(&config).time_scale(speed).start();
    let started = std::time::Instant::now();
    while !exporter.store.ready() {
        assert!(started.elapsed() < Duration::from_secs(30), "never synced");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let truth = world.truth();
    let lost: Vec<_> = truth
        .clusters
        .iter()
        .filter(|c| c.fault == Some(FaultKind::NotHandedOver))
        .collect();
    assert!(!lost.is_empty());
    let body = exporter
        .store
        .scrape(hcp_flow::metrics::exposition::Format::Text);
    for c in &lost {
        let id = hcp_flow::model::provisional_cluster_id(&c.resource_id);
        let hops = exporter
            .store
            .with_timeline(&id, |t| t.hops.keys().copied().collect::<Vec<_>>())
            .unwrap_or_else(|| panic!("{} not shown under {id}", c.resource_id));
        assert_eq!(hops, [Hop::RpFrontend]);
        assert_eq!(c.expected_alert, Some("HCPCreationNotHandedOver"));
    }

    let c = lost[0];
    let id = hcp_flow::model::provisional_cluster_id(&c.resource_id);
    // The exporter's own creation time (the RP's `createdAt`, milliseconds
    // and all) becomes time 0.
    let created_line =
        format!(r#"hcpflow_cluster_created_timestamp_seconds{{cluster_id="{id}"}} "#);
    let base: f64 = body
        .lines()
        .find_map(|l| l.strip_prefix(created_line.as_str()))
        .unwrap_or_else(|| panic!("no creation time for {id}"))
        .parse()
        .unwrap();
    assert!((base - c.created_at.as_millisecond() as f64 / 1000.0).abs() < 0.001);
    let mut series = String::new();
    for line in body.lines().filter(|l| {
        !l.starts_with('#')
            && (l.contains(&format!(r#"cluster_id="{id}""#))
                || l.starts_with(r#"hcpflow_source_up{source="clusters_service"}"#)
                || l.starts_with("hcpflow_hop_budget_seconds{"))
    }) {
        let (name_labels, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = name_labels.split_once('{').unwrap();
        let mut value: f64 = value.parse().unwrap();
        if name.ends_with("_timestamp_seconds") {
            value -= base;
        }
        series.push_str(&format!(
            "      - series: '{name}{{job=\"hcp-flow\",instance=\"x:9464\",{labels}'\n        values: '{value}x40'\n"
        ));
    }
    let budget: f64 = body
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                r#"hcpflow_hop_budget_seconds{operation="create",hop="clusters_service"} "#,
            )
        })
        .expect("the exporter publishes the clusters_service budget")
        .parse()
        .unwrap();
    let due_minute = (budget / 60.0).ceil().max(1.0) as u32;
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let expect = |minutes: u32, n: usize| {
        format!(
            "      - expr: count(ALERTS{{alertname=\"HCPCreationNotHandedOver\", alertstate=\"firing\"}}) or vector(0)\n        eval_time: {minutes}m\n        exp_samples:\n          - labels: '{{}}'\n            value: {n}\n"
        )
    };
    let test = format!(
        "rule_files:\n  - {}\n  - {}\n  - {}\nevaluation_interval: 1m\ngroup_eval_order:\n  - hcp-flow-identity\n  - hcp-flow-budgets\n  - hcp-flow-handover\ntests:\n  - interval: 1m\n    input_series:\n{series}    promql_expr_test:\n{}{}",
        repo.join("alerts/identity.yaml").display(),
        repo.join("alerts/budgets.yaml").display(),
        repo.join("alerts/handover.yaml").display(),
        // The clusters_service budget this world's exporter publishes.
        expect(due_minute - 1, 0),
        expect(due_minute, 1),
    );
    let dir = std::env::temp_dir().join(format!("hcp-flow-handover-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("handover.yaml");
    std::fs::write(&file, &test).unwrap();
    let out = std::process::Command::new("promtool")
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .unwrap_or_else(|e| {
            panic!("promtool not runnable ({e}): install Debian's prometheus; .ci/run does")
        });
    let _ = std::fs::remove_dir_all(&dir);
    exporter.stop();
    assert!(
        out.status.success(),
        "promtool:\n{}{}\n--- test ---\n{test}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
