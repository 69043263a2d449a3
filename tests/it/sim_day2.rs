//! The simulated world after its creations (docs/design/11-simulated-world.md §11.10), read
//! from what it serves (the RP, Clusters Service and Maestro HTTP APIs and
//! the management clusters' kube API, parsed as JSON, never the plans): one
//! NodePool has one name in every view; a pool added, a pool removed, a
//! control-plane upgrade and a pool upgrade, each as its upstreams show it;
//! each day-2 fault, and what its ground truth names.

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
    // Twenty minutes on: pools added after the creation are there too.
    world
        .clock()
        .advance(std::time::Duration::from_secs(20 * 60));
    world.sync_kube();
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

// ---- Day 2, read from the wire ----

/// Every NodePool `name` on the management clusters, with its object.
fn kube_node_pool(world: &World, name: &str) -> Option<Value> {
    world.sync_kube();
    kube_objects(world, "NodePool")
        .into_iter()
        .find(|o| o["metadata"]["name"] == name)
}

fn kube_object(world: &World, kind: &str, name: &str) -> Option<Value> {
    world.sync_kube();
    kube_objects(world, kind)
        .into_iter()
        .find(|o| o["metadata"]["name"] == name)
}

/// The bundle carrying NodePool (or HostedCluster) `name`, as served now.
async fn bundle_carrying(ep: &Endpoints, name: &str) -> Option<Value> {
    bundles(ep)
        .await
        .into_iter()
        .find(|b| carried(b)["metadata"]["name"] == name)
}

fn condition<'a>(obj: &'a Value, kind: &str) -> Option<&'a Value> {
    obj["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
}

fn time(v: &Value) -> Timestamp {
    v.as_str().unwrap().parse().unwrap()
}

/// A world of `n` ARO clusters (no churn) at t0, served.
async fn aro_world(n: usize, seed: u64) -> (World, Endpoints) {
    let world = World::new(cfg(n, seed), SimClock::manual(t0()));
    let ep = serve(&world).await;
    (world, ep)
}

/// The first healthy day-2 operation of `kind` that begins after t0.
fn healthy_op(world: &World, kind: &str) -> hcp_flow::sim::ground::Day2OperationTruth {
    // Every one planned: look an hour ahead on a copy of the clock.
    let probe = World::new(world.config().clone(), SimClock::manual(t0()));
    probe.clock().advance(std::time::Duration::from_secs(3600));
    probe
        .day2_operations()
        .into_iter()
        .filter(|o| o.operation == kind && o.fault.is_none() && o.ended.is_some())
        .find(|o| o.requested.unwrap_or(o.started) > t0())
        .unwrap_or_else(|| panic!("no healthy {kind} after t0"))
}

fn go_to(world: &World, t: Timestamp) {
    world.clock().set(t);
    world.sync_kube();
}

#[tokio::test]
async fn an_added_pool_appears_after_the_creation_and_becomes_ready() {
    let _machine = crate::common::load::share();
    let (world, ep) = aro_world(120, 8).await;
    let op = healthy_op(&world, "node_pool_create");
    let name = op.node_pool.clone().unwrap();
    // Before: the creation is done, the pool is nowhere.
    go_to(&world, op.started - jiff::SignedDuration::from_secs(5));
    assert!(kube_node_pool(&world, &name).is_none());
    let truth = world.truth();
    let c = truth.cluster(&op.cluster_id).unwrap();
    let completed = c.completed_at.unwrap();
    assert!(completed < op.started, "added after the creation completed");

    // Created: not ready, in both views.
    go_to(&world, op.started + jiff::SignedDuration::from_secs(1));
    let np = kube_node_pool(&world, &name).expect("the NodePool exists");
    assert_eq!(time(&np["metadata"]["creationTimestamp"]), op.started);
    assert_eq!(
        condition(&np["status"], "Ready").unwrap()["status"],
        "False"
    );
    let b = bundle_carrying(&ep, &name).await.expect("its bundle");
    let (_, fed) = feedback(&b).expect("its status");
    assert_eq!(condition(&fed, "Ready").unwrap()["status"], "False");
    assert_eq!(
        condition(&fed, "ReachedIgnitionEndpoint").unwrap()["reason"],
        "ignitionNotReached"
    );

    // Ready 3–6 minutes later, its conditions turned True in order.
    let ended = op.ended.unwrap();
    let took = (ended - op.started).get_seconds();
    assert!((180..=360).contains(&took), "{took}s");
    go_to(&world, ended + jiff::SignedDuration::from_secs(1));
    let np = kube_node_pool(&world, &name).unwrap();
    let (_, fed) = feedback(&bundle_carrying(&ep, &name).await.unwrap()).unwrap();
    for status in [&np["status"], &fed] {
        let order: Vec<Timestamp> = [
            "ReachedIgnitionEndpoint",
            "AllMachinesReady",
            "AllNodesHealthy",
            "Ready",
        ]
        .iter()
        .map(|k| {
            let c = condition(status, k).unwrap();
            assert_eq!(c["status"], "True", "{k}: {status}");
            time(&c["lastTransitionTime"])
        })
        .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
        assert!(order[0] > op.started);
        assert_eq!(*order.last().unwrap(), ended);
        let desired = np["spec"]["replicas"].as_i64().unwrap();
        assert_eq!(status["replicas"].as_i64(), Some(desired));
        assert_eq!(
            status["nodesInfo"]["nodeVersions"][0]["readyNodeCount"].as_i64(),
            Some(desired)
        );
        assert!(status["version"].is_string(), "rolled out: {status}");
    }
}

#[tokio::test]
async fn a_removed_pool_is_deleted_then_gone_from_every_view() {
    let _machine = crate::common::load::share();
    let (world, ep) = aro_world(160, 9).await;
    let op = healthy_op(&world, "node_pool_delete");
    let name = op.node_pool.clone().unwrap();
    go_to(&world, op.started - jiff::SignedDuration::from_secs(10));
    let np = kube_node_pool(&world, &name).expect("there before");
    assert!(np["metadata"]["deletionTimestamp"].is_null());
    let work = bundle_carrying(&ep, &name).await.unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string();

    go_to(&world, op.started + jiff::SignedDuration::from_secs(1));
    let np = kube_node_pool(&world, &name).unwrap();
    assert_eq!(time(&np["metadata"]["deletionTimestamp"]), op.started);
    // Clusters Service deleted it first: the bundle's deleted_at, then
    // the ManifestWork's deletionTimestamp, lead the NodePool's.
    let b = bundle_carrying(&ep, &name).await.unwrap();
    let deleted_at = time(&b["deleted_at"]);
    assert!(deleted_at <= op.started, "{deleted_at} {}", op.started);
    let mw = kube_object(&world, "ManifestWork", &work).unwrap();
    assert!(time(&mw["metadata"]["deletionTimestamp"]) <= op.started);
    // The cluster's other bundles are not deleted.
    let others = bundles(&ep).await;
    let id = &op.cluster_id;
    assert!(
        others
            .iter()
            .filter(|o| o["metadata"]["labels"]["api.openshift.com/id"] == id.as_str())
            .filter(|o| o["name"] != work.as_str())
            .all(|o| o["deleted_at"].is_null())
    );

    let ended = op.ended.unwrap();
    let took = (ended - op.started).get_seconds();
    assert!((100..=300).contains(&took), "{took}s");
    go_to(&world, ended + jiff::SignedDuration::from_secs(1));
    assert!(kube_node_pool(&world, &name).is_none());
    assert!(kube_object(&world, "ManifestWork", &work).is_none());
    assert!(bundle_carrying(&ep, &name).await.is_none());
    // The cluster lives on.
    assert!(kube_object(&world, "ManifestWork", id).is_some());
}

/// The HostedCluster status of a cluster as served by both views:
/// (management cluster, Maestro feedback).
async fn hosted_cluster_views(world: &World, ep: &Endpoints, id: &str) -> (Value, Value) {
    world.sync_kube();
    let mgmt = kube_objects(world, "HostedCluster")
        .into_iter()
        .find(|o| o["spec"]["clusterID"] == id)
        .unwrap();
    let b = bundles(ep)
        .await
        .into_iter()
        .find(|b| b["name"] == id)
        .unwrap();
    let (_, fed) = feedback(&b).unwrap();
    (mgmt["status"].clone(), fed)
}

async fn rp_resource(world: &World, ep: &Endpoints, id: &str) -> Value {
    let truth = world.truth();
    let rid = &truth.cluster(id).unwrap().resource_id;
    let url = format!(
        "{}{rid}?api-version=2026-06-30-preview",
        ep.rp_frontend.as_str().trim_end_matches('/')
    );
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

async fn rp_state(world: &World, ep: &Endpoints, id: &str) -> String {
    rp_resource(world, ep, id).await["properties"]["provisioningState"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn cs_state(ep: &Endpoints, id: &str) -> String {
    let url = format!(
        "{}/api/aro_hcp/v1alpha1/clusters/{id}",
        ep.clusters_service.as_str().trim_end_matches('/')
    );
    let body: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    body["status"]["state"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn an_upgrade_leads_with_desired_and_adds_a_dated_history_entry() {
    let _machine = crate::common::load::share();
    let (world, ep) = aro_world(120, 10).await;
    let op = healthy_op(&world, "upgrade");
    let id = op.cluster_id.clone();
    let target = op.target_version.clone().unwrap();
    let requested = op.requested.unwrap();

    go_to(&world, requested - jiff::SignedDuration::from_secs(1));
    for status in <[Value; 2]>::from(hosted_cluster_views(&world, &ep, &id).await) {
        let v = &status["version"];
        assert_ne!(v["desired"]["version"], target.as_str());
        assert_eq!(v["history"].as_array().unwrap().len(), 1);
        assert_eq!(v["history"][0]["state"], "Completed");
    }
    assert_eq!(rp_state(&world, &ep, &id).await, "Succeeded");
    assert_eq!(cs_state(&ep, &id).await, "ready");

    // Asked for: desired leads, the history does not have it yet.
    go_to(&world, requested + jiff::SignedDuration::from_millis(500));
    assert!(op.started > requested + jiff::SignedDuration::from_millis(500));
    for status in <[Value; 2]>::from(hosted_cluster_views(&world, &ep, &id).await) {
        let v = &status["version"];
        assert_eq!(v["desired"]["version"], target.as_str());
        assert_ne!(v["history"][0]["version"], target.as_str());
    }
    // The RP says Updating, as the world serves it by default
    // (`Day2Config::rp_updating`, below).
    assert_eq!(rp_state(&world, &ep, &id).await, "Updating");

    // Started: a Partial entry at index 0, the old one Completed after it.
    go_to(&world, op.started + jiff::SignedDuration::from_secs(1));
    let old = {
        let (mgmt, _) = hosted_cluster_views(&world, &ep, &id).await;
        mgmt["version"]["history"][1]["version"].clone()
    };
    for status in <[Value; 2]>::from(hosted_cluster_views(&world, &ep, &id).await) {
        let h = status["version"]["history"].as_array().unwrap();
        assert_eq!(h.len(), 2, "{status}");
        assert_eq!(h[0]["state"], "Partial");
        assert_eq!(h[0]["version"], target.as_str());
        assert_eq!(time(&h[0]["startedTime"]), op.started);
        assert!(h[0]["completionTime"].is_null());
        assert_eq!(h[1]["state"], "Completed");
        assert_eq!(h[1]["version"], old);
        assert!(time(&h[1]["completionTime"]) < op.started);
        assert_eq!(condition(&status, "Available").unwrap()["status"], "True");
    }
    assert_eq!(cs_state(&ep, &id).await, "updating");

    // Completed 8–15 minutes after its start.
    let ended = op.ended.unwrap();
    let took = (ended - op.started).get_seconds();
    assert!((480..=900).contains(&took), "{took}s");
    go_to(&world, ended + jiff::SignedDuration::from_secs(1));
    for status in <[Value; 2]>::from(hosted_cluster_views(&world, &ep, &id).await) {
        let h = &status["version"]["history"];
        assert_eq!(h[0]["state"], "Completed");
        assert_eq!(time(&h[0]["completionTime"]), ended);
    }
    go_to(&world, ended + jiff::SignedDuration::from_secs(120));
    assert_eq!(cs_state(&ep, &id).await, "ready");
    assert_eq!(rp_state(&world, &ep, &id).await, "Succeeded");
}

#[tokio::test]
async fn a_pool_upgrade_names_its_target_and_flips_its_version_at_the_end() {
    let _machine = crate::common::load::share();
    let (world, ep) = aro_world(120, 12).await;
    let op = healthy_op(&world, "node_pool_upgrade");
    let name = op.node_pool.clone().unwrap();
    let target = op.target_version.clone().unwrap();
    // The control plane's upgrade completed before.
    let probe = World::new(world.config().clone(), SimClock::manual(t0()));
    probe.clock().advance(std::time::Duration::from_secs(3600));
    let cp = probe
        .day2_operations()
        .into_iter()
        .find(|o| o.cluster_id == op.cluster_id && o.operation == "upgrade")
        .unwrap();
    assert!(cp.ended.unwrap() < op.started);

    go_to(&world, op.started + jiff::SignedDuration::from_secs(1));
    let np = kube_node_pool(&world, &name).unwrap();
    let (_, fed) = feedback(&bundle_carrying(&ep, &name).await.unwrap()).unwrap();
    let spec_image = bundle_carrying(&ep, &name).await.unwrap();
    assert!(
        carried(&spec_image)["spec"]["release"]["image"]
            .as_str()
            .unwrap()
            .contains(&target)
    );
    assert!(
        np["spec"]["release"]["image"]
            .as_str()
            .unwrap()
            .contains(&target)
    );
    let old = np["status"]["version"].as_str().unwrap().to_string();
    assert_ne!(old, target);
    for status in [&np["status"], &fed] {
        let c = condition(status, "UpdatingVersion").expect("UpdatingVersion");
        assert_eq!(c["status"], "True");
        assert_eq!(
            c["message"],
            format!("Updating version in progress. Target version: {target}")
        );
        assert_eq!(time(&c["lastTransitionTime"]), op.started);
        assert_eq!(status["version"], old.as_str());
        assert_eq!(condition(status, "Ready").unwrap()["status"], "True");
    }

    let ended = op.ended.unwrap();
    let took = (ended - op.started).get_seconds();
    assert!((300..=600).contains(&took), "{took}s");
    go_to(&world, ended + jiff::SignedDuration::from_secs(1));
    let np = kube_node_pool(&world, &name).unwrap();
    let (_, fed) = feedback(&bundle_carrying(&ep, &name).await.unwrap()).unwrap();
    for status in [&np["status"], &fed] {
        assert!(condition(status, "UpdatingVersion").is_none(), "{status}");
        assert_eq!(status["version"], target.as_str());
        assert_eq!(condition(status, "Ready").unwrap()["status"], "True");
        assert_eq!(
            status["nodesInfo"]["nodeVersions"][0]["ocpVersion"],
            target.as_str()
        );
    }
}

// ---- Day-2 faults: as served, and as the ground truth names them ----

/// The first cluster with `fault` an hour into a world of `kind`, and the
/// world (its clock at t0, served).
async fn faulted(
    kind: WorldKind,
    seed: u64,
    fault: &str,
) -> (World, Endpoints, hcp_flow::sim::ground::GroundTruthCluster) {
    let config = WorldConfig {
        kind,
        ..cfg(300, seed)
    };
    let probe = World::new(config.clone(), SimClock::manual(t0()));
    probe.clock().advance(std::time::Duration::from_secs(3600));
    let item = probe
        .ground_truth()
        .items
        .into_iter()
        .find(|i| i.fault == Some(fault))
        .unwrap_or_else(|| panic!("no {fault} in 300 clusters"));
    let world = World::new(config, SimClock::manual(t0()));
    let ep = serve(&world).await;
    (world, ep, item)
}

fn minutes(from: Timestamp, to: Timestamp) -> i64 {
    (to - from).get_seconds() / 60
}

#[tokio::test]
async fn a_pool_that_never_reaches_ignition_stays_at_zero_and_its_truth_names_it() {
    let _machine = crate::common::load::share();
    let (world, ep, item) = faulted(WorldKind::Aro, 5, "node_pool_never_reaches_ignition").await;
    assert_eq!(item.operation, Some("node_pool_create"));
    assert_eq!(item.expected_alert, Some("HCPOperationStuckAtHop"));
    assert_eq!(item.target_version, None);
    let name = item.node_pool.clone().unwrap();
    let (at, due) = (item.fault_at.unwrap(), item.alert_due_at.unwrap());
    assert_eq!(
        minutes(at, due),
        30,
        "the node_pool_create budget at node_pool"
    );
    go_to(&world, at + jiff::SignedDuration::from_mins(90));
    let np = kube_node_pool(&world, &name).unwrap();
    assert_eq!(time(&np["metadata"]["creationTimestamp"]), at);
    let (_, fed) = feedback(&bundle_carrying(&ep, &name).await.unwrap()).unwrap();
    for status in [&np["status"], &fed] {
        let ignition = condition(status, "ReachedIgnitionEndpoint").unwrap();
        assert_eq!(ignition["status"], "False");
        assert_eq!(ignition["reason"], "ignitionNotReached");
        assert_eq!(condition(status, "Ready").unwrap()["status"], "False");
        assert_eq!(
            status["nodesInfo"]["nodeVersions"][0]["readyNodeCount"]
                .as_i64()
                .unwrap_or(0),
            0
        );
    }
    let ops = world.day2_operations();
    let op = ops
        .iter()
        .find(|o| o.node_pool.as_deref() == Some(name.as_str()))
        .unwrap();
    assert_eq!(
        (op.operation, op.ended, op.fault),
        (
            "node_pool_create",
            None,
            Some("node_pool_never_reaches_ignition")
        )
    );
}

#[tokio::test]
async fn an_upgrade_stuck_partial_stays_partial_and_available() {
    let _machine = crate::common::load::share();
    let (world, ep, item) = faulted(WorldKind::Aro, 5, "upgrade_stuck_partial").await;
    assert_eq!(item.operation, Some("upgrade"));
    assert_eq!(item.node_pool, None);
    let target = item.target_version.clone().unwrap();
    let (at, due) = (item.fault_at.unwrap(), item.alert_due_at.unwrap());
    assert_eq!(minutes(at, due), 75, "the upgrade budget at hosted_cluster");
    go_to(&world, at + jiff::SignedDuration::from_mins(120));
    let (mgmt, fed) = hosted_cluster_views(&world, &ep, &item.cluster_id).await;
    for status in [&mgmt, &fed] {
        let h = &status["version"]["history"][0];
        assert_eq!(h["state"], "Partial");
        assert_eq!(h["version"], target.as_str());
        assert_eq!(time(&h["startedTime"]), at);
        assert!(h["completionTime"].is_null());
        assert_eq!(status["version"]["desired"]["version"], target.as_str());
        assert_eq!(condition(status, "Available").unwrap()["status"], "True");
    }
}

#[tokio::test]
async fn a_pool_stuck_updating_keeps_its_old_version() {
    let _machine = crate::common::load::share();
    let (world, ep, item) = faulted(WorldKind::Aro, 5, "node_pool_stuck_updating").await;
    assert_eq!(item.operation, Some("node_pool_upgrade"));
    let name = item.node_pool.clone().unwrap();
    let target = item.target_version.clone().unwrap();
    let (at, due) = (item.fault_at.unwrap(), item.alert_due_at.unwrap());
    assert_eq!(
        minutes(at, due),
        60,
        "the node_pool_upgrade budget at node_pool"
    );
    go_to(&world, at + jiff::SignedDuration::from_mins(120));
    let np = kube_node_pool(&world, &name).unwrap();
    let (_, fed) = feedback(&bundle_carrying(&ep, &name).await.unwrap()).unwrap();
    for status in [&np["status"], &fed] {
        let c = condition(status, "UpdatingVersion").unwrap();
        assert_eq!(c["status"], "True");
        assert_eq!(time(&c["lastTransitionTime"]), at);
        assert_eq!(
            c["message"],
            format!("Updating version in progress. Target version: {target}")
        );
        assert_ne!(status["version"], target.as_str());
        assert!(status["version"].is_string());
    }
}

#[tokio::test]
async fn a_hub_pool_added_without_machines_says_why() {
    let _machine = crate::common::load::share();
    for (fault, reason) in [
        ("added_pool_no_free_agent", "NoSuitableAgents"),
        ("added_pool_vm_unschedulable", "Unschedulable"),
    ] {
        let (world, _ep, item) = faulted(WorldKind::SelfManaged, 6, fault).await;
        assert_eq!(item.operation, Some("node_pool_create"), "{fault}");
        assert_eq!(item.expected_alert, Some("HCPOperationStuckAtHop"));
        let name = item.node_pool.clone().unwrap();
        let (at, due) = (item.fault_at.unwrap(), item.alert_due_at.unwrap());
        assert_eq!(minutes(at, due), 30);
        go_to(&world, at + jiff::SignedDuration::from_mins(60));
        let np = kube_node_pool(&world, &name).unwrap();
        assert_eq!(time(&np["metadata"]["creationTimestamp"]), at);
        let machines = condition(&np["status"], "AllMachinesReady").unwrap();
        assert_eq!(machines["status"], "False");
        assert_eq!(machines["reason"], reason, "{fault}");
        assert_eq!(
            condition(&np["status"], "Ready").unwrap()["status"],
            "False"
        );
        assert_eq!(np["status"]["replicas"], 0);
    }
}

#[test]
fn the_ground_truth_publishes_every_operation_budget_and_the_day2_operations() {
    let world = World::new(cfg(200, 5), SimClock::manual(t0()));
    world.clock().advance(std::time::Duration::from_secs(3600));
    let truth = serde_json::to_value(world.ground_truth()).unwrap();
    let budgets = &truth["operation_hop_budgets_seconds"];
    for (key, minutes) in [
        ("create/node_pool", 30.0),
        ("delete/node_pool", 20.0),
        ("node_pool_create/node_pool", 30.0),
        ("node_pool_delete/node_pool", 20.0),
        ("upgrade/hosted_cluster", 75.0),
        ("node_pool_upgrade/node_pool", 60.0),
    ] {
        assert_eq!(budgets[key].as_f64(), Some(minutes * 60.0), "{key}");
    }
    let ops = truth["day2_operations"].as_array().unwrap();
    for kind in [
        "node_pool_create",
        "node_pool_delete",
        "upgrade",
        "node_pool_upgrade",
    ] {
        assert!(ops.iter().any(|o| o["operation"] == kind), "{kind}");
    }
    // Every item names the operation its fault hits.
    for item in truth["items"].as_array().unwrap() {
        match item["fault"].as_str() {
            None => assert!(item["operation"].is_null()),
            Some("hosted_cluster_unavailable") => assert!(item["operation"].is_null()),
            Some(_) => assert!(item["operation"].is_string(), "{item}"),
        }
    }
}

#[tokio::test]
async fn the_rp_says_updating_during_an_upgrade_where_the_world_serves_it() {
    let _machine = crate::common::load::share();
    let day2 = hcp_flow::sim::Day2Config {
        rp_updating: true,
        ..Default::default()
    };
    let world = World::with_day2(cfg(120, 10), SimClock::manual(t0()), day2);
    let ep = serve(&world).await;
    let op = healthy_op(&world, "upgrade");
    let (id, requested) = (op.cluster_id.clone(), op.requested.unwrap());
    go_to(&world, requested - jiff::SignedDuration::from_secs(1));
    assert_eq!(rp_state(&world, &ep, &id).await, "Succeeded");
    go_to(&world, requested + jiff::SignedDuration::from_secs(1));
    let rp = rp_resource(&world, &ep, &id).await;
    assert_eq!(rp["properties"]["provisioningState"], "Updating");
    let target = op.target_version.clone().unwrap();
    assert!(target.starts_with(rp["properties"]["version"]["id"].as_str().unwrap()));
    let progressing = condition(&rp["properties"]["status"], "Progressing").unwrap();
    assert_eq!(progressing["status"], "True");
    assert_eq!(progressing["reason"], "Updating");
    assert_eq!(
        time(&progressing["lastTransitionTime"]),
        requested - jiff::SignedDuration::from_millis(requested.subsec_millisecond() as i64)
    );
    go_to(
        &world,
        op.ended.unwrap() + jiff::SignedDuration::from_secs(120),
    );
    assert_eq!(rp_state(&world, &ep, &id).await, "Succeeded");
}
