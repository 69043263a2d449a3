//! The simulated world after its creations, read from what it serves (the
//! Maestro REST API and the management clusters' kube API, parsed as JSON,
//! never the plans): one NodePool has one name in every view.

use std::collections::{BTreeMap, BTreeSet};

use hcp_flow::sim::{Endpoints, LatencyModel, SimClock, World, WorldConfig, WorldKind};
use jiff::Timestamp;
use serde_json::Value;

fn t0() -> Timestamp {
    "2026-03-01T12:00:00Z".parse().unwrap()
}

fn cfg(clusters: usize, seed: u64) -> WorldConfig {
    WorldConfig {
        clusters,
        speed: 1.0,
        seed,
        faults: true,
        churn: false,
        latency: LatencyModel::none(),
        subscriptions: 2,
        not_handed_over: 0.0,
        failure_burst: None,
        kind: WorldKind::Aro,
    }
}

/// A world served over HTTP and on its management clusters, its clock at
/// t0 until a test moves it.
async fn serve(world: &World) -> Endpoints {
    crate::common::init();
    let endpoints = world.serve().await.unwrap();
    world.serve_kube().await.unwrap();
    world.sync_kube();
    endpoints
}

/// Every bundle Maestro serves.
async fn bundles(ep: &Endpoints) -> Vec<Value> {
    let url = format!(
        "{}/api/maestro/v1/resource-bundles?size=10000",
        ep.maestro.as_str().trim_end_matches('/')
    );
    let body: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    body["items"].as_array().unwrap().clone()
}

/// The object a bundle's ManifestWork carries (its manifest).
fn carried(bundle: &Value) -> &Value {
    &bundle["manifests"][0]["spec"]["workload"]["manifests"][0]
}

/// The status feedback of the object a bundle carries, parsed
/// (`None` while the bundle has no status).
fn feedback(bundle: &Value) -> Option<(Value, Value)> {
    let work: Value = serde_json::from_str(
        bundle["status"]["resourceStatus"][0]["statusFeedback"]["values"][0]["fieldValue"]
            ["jsonRaw"]
            .as_str()?,
    )
    .ok()?;
    let manifest = work["resourceStatus"]["manifests"][0].clone();
    let status: Value = serde_json::from_str(
        manifest["statusFeedback"]["values"][0]["fieldValue"]["jsonRaw"].as_str()?,
    )
    .ok()?;
    Some((manifest["resourceMeta"].clone(), status))
}

/// Every object of `kind` on the world's ARO management clusters.
fn kube_objects(world: &World, kind: &str) -> Vec<Value> {
    world
        .mgmt_clusters()
        .iter()
        .flat_map(|c| c.api.objects(kind))
        .collect()
}

fn name_of(obj: &Value) -> (String, String) {
    (
        obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        obj["metadata"]["name"].as_str().unwrap().to_string(),
    )
}

#[tokio::test]
async fn a_node_pool_has_one_name_in_the_feedback_and_on_the_management_cluster() {
    let _machine = crate::common::load::share();
    let world = World::new(cfg(80, 5), SimClock::manual(t0()));
    let ep = serve(&world).await;
    let bundles = bundles(&ep).await;
    let node_pools: BTreeMap<(String, String), Value> = kube_objects(&world, "NodePool")
        .into_iter()
        .map(|o| (name_of(&o), o))
        .collect();
    let hosted: BTreeSet<(String, String)> = kube_objects(&world, "HostedCluster")
        .iter()
        .map(name_of)
        .collect();
    let mut compared = 0;
    for b in &bundles {
        let Some((meta, _)) = feedback(b) else {
            continue;
        };
        let key = (
            meta["namespace"].as_str().unwrap().to_string(),
            meta["name"].as_str().unwrap().to_string(),
        );
        // The feedback names the object the bundle carries.
        assert_eq!(meta["name"], carried(b)["metadata"]["name"], "{b}");
        match meta["kind"].as_str().unwrap() {
            "NodePool" => {
                let np = node_pools
                    .get(&key)
                    .unwrap_or_else(|| panic!("no NodePool {key:?} on a management cluster"));
                // Its cluster is the HostedCluster of the same namespace,
                // by the name both views give it.
                let cluster = np["spec"]["clusterName"].as_str().unwrap();
                assert_eq!(carried(b)["spec"]["clusterName"], cluster);
                assert!(hosted.contains(&(key.0.clone(), cluster.to_string())));
                assert!(key.1.starts_with(&format!("{cluster}-np-")), "{key:?}");
                compared += 1;
            }
            "HostedCluster" => assert!(hosted.contains(&key), "no HostedCluster {key:?}"),
            other => panic!("unexpected kind {other}"),
        }
    }
    assert!(compared >= 40, "only {compared} pools compared");
    // And no management-side NodePool is unknown to the service side.
    let fed: BTreeSet<(String, String)> = bundles
        .iter()
        .filter(|b| carried(b)["kind"] == "NodePool")
        .map(|b| name_of(carried(b)))
        .collect();
    for key in node_pools.keys() {
        assert!(fed.contains(key), "{key:?} has no bundle");
    }
}
