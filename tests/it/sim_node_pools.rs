//! The simulated world's node pools on the RP frontend (ARM `nodePools`)
//! and Clusters Service (`node_pools`), read over HTTP as a source would
//! (docs/design/11-simulated-world.md §11.10): the shapes the reference names, each pool's
//! states over time beside the NodePool the world already serves, the two
//! services agreeing by the backend's mapping. The fault, paging and the
//! transport faults are `sim_node_pools_faults`'.

use std::collections::BTreeSet;

use hcp_flow::sim::{Endpoints, LatencyModel, SimClock, World, WorldConfig, WorldKind};
use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

pub(crate) const NEW: &str = "2026-09-01-preview";
const OLD: &str = "2024-06-10-preview";

pub(crate) fn t0() -> Timestamp {
    "2026-03-01T12:00:00Z".parse().unwrap()
}

pub(crate) fn cfg(clusters: usize, seed: u64) -> WorldConfig {
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

pub(crate) async fn serve(world: &World) -> Endpoints {
    crate::common::init();
    world.serve().await.unwrap()
}

pub(crate) fn base(u: &url::Url) -> String {
    u.as_str().trim_end_matches('/').to_string()
}

/// One GET as it is answered.
pub(crate) async fn get_once(url: &str) -> (u16, Value) {
    let r = reqwest::get(url).await.unwrap();
    let status = r.status().as_u16();
    let body = r.json().await.unwrap_or(Value::Null);
    (status, body)
}

/// One GET, again past a spontaneous 5xx burst (a world with faults on
/// has them, a 503 and up to two 500s after it).
pub(crate) async fn get(url: &str) -> (u16, Value) {
    for _ in 0..10 {
        let (status, body) = get_once(url).await;
        if status < 500 {
            return (status, body);
        }
    }
    panic!("{url}: 5xx ten times");
}

/// The reference's property names (tests/fixtures/sim/node-pool-schemas.json,
/// taken from the reference OpenAPI documents).
fn schemas() -> Value {
    fixture("node-pool-schemas.json")
}

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/sim/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn names(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

/// Every key of `served` is one the schema names, and every name in `must`.
fn within(served: &Value, schema: &Value, must: &[&str], what: &str) {
    let allowed = names(&schema["properties"]);
    let served = keys(served);
    let extra: Vec<_> = served.difference(&allowed).collect();
    assert!(extra.is_empty(), "{what}: not in the reference {extra:?}");
    for k in must.iter().copied().chain(
        schema["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str),
    ) {
        assert!(served.contains(k), "{what}: {k} missing");
    }
}

/// The ARM path of a cluster's nodePools (optionally one).
pub(crate) fn rp_pools(
    ep: &Endpoints,
    resource_id: &str,
    pool: Option<&str>,
    version: &str,
) -> String {
    let pool = pool.map(|p| format!("/{p}")).unwrap_or_default();
    format!(
        "{}{resource_id}/nodePools{pool}?api-version={version}",
        base(&ep.rp_frontend)
    )
}

pub(crate) fn cs_pools(ep: &Endpoints, id: &str, rest: &str) -> String {
    format!(
        "{}/api/aro_hcp/v1alpha1/clusters/{id}/node_pools{rest}",
        base(&ep.clusters_service)
    )
}

/// The README's node pool mapping (Clusters Service → ARM).
pub(crate) fn mapped(cs: &str) -> &'static str {
    match cs {
        "validating" | "pending" | "validating_update" | "pending_update" => "Accepted",
        "installing" => "Provisioning",
        "ready" => "Succeeded",
        "updating" => "Updating",
        "uninstalling" => "Deleting",
        "recoverable_error" | "error" => "Failed",
        other => panic!("not a node pool state: {other}"),
    }
}

pub(crate) fn ts(v: &Value) -> Timestamp {
    v.as_str()
        .unwrap_or_else(|| panic!("not a time: {v}"))
        .parse()
        .unwrap()
}

pub(crate) fn whole(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap()
}

/// One pool as both services serve it now: (ARM nodePool, CS node pool),
/// each `None` when absent (404).
pub(crate) async fn both(
    ep: &Endpoints,
    resource_id: &str,
    id: &str,
    pool: &str,
) -> (Option<Value>, Option<Value>) {
    let (s, rp) = get(&rp_pools(ep, resource_id, Some(pool), NEW)).await;
    let rp = match s {
        200 => Some(rp),
        404 => None,
        other => panic!("RP {other}: {rp}"),
    };
    let (s, cs) = get(&cs_pools(ep, id, &format!("/{pool}"))).await;
    let cs = match s {
        200 => Some(cs),
        404 => None,
        other => panic!("CS {other}: {cs}"),
    };
    (rp, cs)
}

pub(crate) fn rp_state(v: &Value) -> &str {
    v["properties"]["provisioningState"].as_str().unwrap()
}

pub(crate) fn cs_state(v: &Value) -> &str {
    v["status"]["state"]["value"].as_str().unwrap()
}

pub(crate) fn cs_since(v: &Value) -> Timestamp {
    ts(&v["status"]["state"]["last_updated_timestamp"])
}

/// The ARM pool name (Clusters Service's id) of a NodePool
/// `<HostedCluster name>-<pool>`.
pub(crate) fn short(node_pool: &str) -> &str {
    node_pool.split_once('-').unwrap().1
}

/// The status fed back for NodePool `name` through its Maestro bundle.
async fn fed_back(ep: &Endpoints, name: &str) -> Option<Value> {
    let url = format!(
        "{}/api/maestro/v1/resource-bundles?size=10000",
        base(&ep.maestro)
    );
    let (_, body) = get(&url).await;
    let b = body["items"].as_array().unwrap().iter().find(|b| {
        b["manifests"][0]["spec"]["workload"]["manifests"][0]["metadata"]["name"] == name
    })?;
    let work: Value = serde_json::from_str(
        b["status"]["resourceStatus"][0]["statusFeedback"]["values"][0]["fieldValue"]["jsonRaw"]
            .as_str()?,
    )
    .ok()?;
    serde_json::from_str(
        work["resourceStatus"]["manifests"][0]["statusFeedback"]["values"][0]["fieldValue"]
            ["jsonRaw"]
            .as_str()?,
    )
    .ok()
}

fn ready_since(status: &Value) -> Option<Timestamp> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready" && c["status"] == "True")
        .map(|c| ts(&c["lastTransitionTime"]))
}

fn healthy_op(config: &WorldConfig, kind: &str) -> hcp_flow::sim::ground::Day2OperationTruth {
    let probe = World::new(config.clone(), SimClock::manual(t0()));
    probe.clock().advance(std::time::Duration::from_secs(3600));
    probe
        .day2_operations()
        .into_iter()
        .filter(|o| o.operation == kind && o.fault.is_none() && o.ended.is_some())
        .find(|o| o.requested.unwrap_or(o.started) > t0() + SignedDuration::from_mins(2))
        .unwrap_or_else(|| panic!("no healthy {kind} after t0"))
}

fn resource_id(world: &World, id: &str) -> String {
    world.truth().cluster(id).unwrap().resource_id.clone()
}

#[tokio::test]
async fn node_pools_have_the_reference_field_names() {
    let _machine = crate::common::load::share();
    let world = World::new(cfg(20, 3), SimClock::manual(t0()));
    let ep = serve(&world).await;
    world.clock().advance(std::time::Duration::from_secs(3600));
    let truth = world.truth();
    let done = truth
        .clusters
        .iter()
        .find(|c| c.completed_at.is_some())
        .unwrap();
    let s = schemas();
    for (version, example) in [
        (
            OLD,
            "rp-2024-06-10-preview-NodePools_Get_MaximumSet_Gen.json",
        ),
        (
            NEW,
            "rp-2026-09-01-preview-NodePools_Get_MaximumSet_Gen.json",
        ),
    ] {
        let rs = &s["rp"][version];
        let (status, list) = get(&rp_pools(&ep, &done.resource_id, None, version)).await;
        assert_eq!(status, 200, "{list}");
        within(&list, &rs["NodePoolListResult"], &["value"], "ARM list");
        let item = &list["value"][0];
        // The tracked resource's fields as the example has them.
        let example = &fixture(example)["responses"]["200"]["body"];
        assert_eq!(keys(item), keys(example), "{version}: tracked resource");
        assert_eq!(keys(&item["systemData"]), keys(&example["systemData"]));
        let name = item["name"].as_str().unwrap();
        assert_eq!(
            item["id"].as_str().unwrap(),
            format!("{}/nodePools/{name}", done.resource_id)
        );
        assert_eq!(
            item["type"],
            "Microsoft.RedHatOpenShift/hcpOpenShiftClusters/nodePools"
        );
        let p = &item["properties"];
        within(
            p,
            &rs["NodePoolProperties"],
            &["provisioningState", "version", "replicas", "platform"],
            "properties",
        );
        within(
            &p["platform"],
            &rs["NodePoolPlatformProfile"],
            &["subnetId"],
            "platform",
        );
        within(
            &p["platform"]["osDisk"],
            &rs["OsDiskProfile"],
            &[],
            "osDisk",
        );
        within(
            &p["version"],
            &rs["NodePoolVersionProfile"],
            &["id"],
            "version",
        );
        assert!(names(&rs["ProvisioningState"]["enum"]).contains(rp_state(item)));
        match rs.get("Condition") {
            Some(cond) => {
                within(
                    &p["status"],
                    &rs["ResourceStatus"],
                    &["conditions"],
                    "status",
                );
                for c in p["status"]["conditions"].as_array().unwrap() {
                    within(c, cond, &[], "condition");
                }
            }
            None => assert!(p.get("status").is_none(), "{version} has no status"),
        }
        // One read is the list's item.
        let (status, one) = get(&rp_pools(&ep, &done.resource_id, Some(name), version)).await;
        assert_eq!((status, &one), (200, item));
    }

    let cs = &s["clusters_service"];
    let paths = names(&cs["paths"]);
    for p in [
        "/api/aro_hcp/v1alpha1/clusters/{cluster_id}/node_pools",
        "/api/aro_hcp/v1alpha1/clusters/{cluster_id}/node_pools/{node_pool_id}",
        "/api/aro_hcp/v1alpha1/clusters/{cluster_id}/node_pools/{node_pool_id}/status",
    ] {
        assert!(paths.contains(p), "{p} is the reference's");
    }
    let (status, list) = get(&cs_pools(&ep, &done.cluster_id, "")).await;
    assert_eq!(status, 200, "{list}");
    // `kind` is what the service returns beside the schema's four.
    let mut envelope = list.clone();
    assert_eq!(envelope["kind"], "NodePoolList");
    envelope.as_object_mut().unwrap().remove("kind");
    within(
        &envelope,
        &cs["NodePoolList"],
        &["items", "page", "size", "total"],
        "CS list",
    );
    let item = &list["items"][0];
    within(
        item,
        &cs["NodePool"],
        &[
            "kind",
            "id",
            "href",
            "replicas",
            "version",
            "azure_node_pool",
            "status",
        ],
        "CS node pool",
    );
    assert_eq!(item["kind"], "NodePool");
    let np = &item["azure_node_pool"];
    within(
        np,
        &cs["AzureNodePool"],
        &["resource_name", "vm_size"],
        "azure_node_pool",
    );
    within(&np["os_disk"], &cs["AzureNodePoolOsDisk"], &[], "os_disk");
    within(
        &np["encryption_at_host"],
        &cs["AzureNodePoolEncryptionAtHost"],
        &[],
        "encryption_at_host",
    );
    within(&item["version"], &cs["Version"], &["id"], "version");
    within(
        &item["management_upgrade"],
        &cs["NodePoolManagementUpgrade"],
        &[],
        "management_upgrade",
    );
    within(
        &item["node_drain_grace_period"],
        &cs["Value"],
        &[],
        "node_drain_grace_period",
    );
    let status = &item["status"];
    within(
        status,
        &cs["NodePoolStatus"],
        &["kind", "id", "href", "current_replicas", "message", "state"],
        "status",
    );
    within(
        &status["state"],
        &cs["NodePoolState"],
        &["kind", "value", "last_updated_timestamp"],
        "state",
    );
    let id = item["id"].as_str().unwrap();
    // The ARM nodePool's name is the CS node pool's id and resource_name.
    assert_eq!(np["resource_name"], id);
    let (s1, one) = get(&cs_pools(&ep, &done.cluster_id, &format!("/{id}"))).await;
    assert_eq!((s1, &one), (200, item));
    let (s2, st) = get(&cs_pools(&ep, &done.cluster_id, &format!("/{id}/status"))).await;
    assert_eq!((s2, &st), (200, status));
    assert_eq!(
        st["href"].as_str().unwrap(),
        format!(
            "/api/aro_hcp/v1alpha1/clusters/{}/node_pools/{id}/status",
            done.cluster_id
        )
    );

    // clusters_mgmt v1 serves the pools too, but defines no status there.
    let mgmt_paths = names(&cs["clusters_mgmt_paths"]);
    assert!(
        mgmt_paths
            .contains("/api/clusters_mgmt/v1/clusters/{cluster_id}/node_pools/{node_pool_id}")
    );
    let mgmt = format!(
        "{}/api/clusters_mgmt/v1/clusters/{}/node_pools",
        base(&ep.clusters_service),
        done.cluster_id
    );
    let (s3, l) = get(&mgmt).await;
    assert_eq!(s3, 200);
    assert_eq!(
        l["items"][0]["href"].as_str().unwrap(),
        format!(
            "/api/clusters_mgmt/v1/clusters/{}/node_pools/{id}",
            done.cluster_id
        )
    );
    let (s4, _) = get(&format!("{mgmt}/{id}/status")).await;
    assert_eq!(s4, 404);

    // Errors: the API's own bodies, for a missing cluster and a missing pool.
    let (s5, e) = get(&cs_pools(&ep, "0000nosuchcluster", "")).await;
    assert_eq!(s5, 404);
    let mut err = e.clone();
    err.as_object_mut().unwrap().remove("operation_id");
    within(
        &err,
        &cs["Error"],
        &["kind", "id", "href", "code", "reason"],
        "CS error",
    );
    assert!(e["operation_id"].is_string());
    let (s6, e) = get(&cs_pools(&ep, &done.cluster_id, "/np-99")).await;
    assert_eq!((s6, e["kind"].as_str()), (404, Some("Error")));
    let (s7, e) = get(&rp_pools(&ep, &done.resource_id, Some("np-99"), NEW)).await;
    assert_eq!(
        (s7, e["error"]["code"].as_str()),
        (404, Some("ResourceNotFound"))
    );
    let missing = done.resource_id.replace("hcp-", "nosuch-");
    let (s8, e) = get(&rp_pools(&ep, &missing, None, NEW)).await;
    assert_eq!(
        (s8, e["error"]["code"].as_str()),
        (404, Some("ResourceNotFound"))
    );
}

/// A pool created with the cluster: Accepted/validating with the cluster,
/// then pending, installing, and ready the instant its NodePool is Ready
/// at its replicas; the two services agree at every step.
#[tokio::test]
async fn a_creation_pool_moves_with_its_node_pool() {
    let _machine = crate::common::load::share();
    let world = World::new(cfg(40, 4), SimClock::manual(t0()));
    let ep = serve(&world).await;
    // A healthy creation, followed from its start: the world is a function
    // of the clock, which may go back before t0.
    let c = world
        .truth()
        .clusters
        .iter()
        .find(|c| c.fault.is_none())
        .cloned()
        .unwrap();
    world
        .clock()
        .set(c.created_at - SignedDuration::from_secs(1));
    let (status, _) = get(&rp_pools(&ep, &c.resource_id, None, NEW)).await;
    assert_eq!(status, 404, "no cluster, no nodePools");
    world
        .clock()
        .set(c.created_at + SignedDuration::from_secs(1));
    let (_, list) = get(&rp_pools(&ep, &c.resource_id, None, NEW)).await;
    let first = list["value"][0].clone();
    let pool = first["name"].as_str().unwrap().to_string();
    assert_eq!(ts(&first["systemData"]["createdAt"]), c.created_at);
    let mut seen: Vec<String> = Vec::new();
    let mut ready_at = None;
    let mut t = c.created_at + SignedDuration::from_secs(1);
    let end = c.created_at + SignedDuration::from_mins(25);
    while t < end {
        world.clock().set(t);
        let (rp, cs) = both(&ep, &c.resource_id, &c.cluster_id, &pool).await;
        let rp = rp.expect("the ARM nodePool exists with the cluster");
        let state = match &cs {
            Some(cs) => {
                assert_eq!(rp_state(&rp), mapped(cs_state(cs)), "at {t}");
                assert!(cs_since(cs) <= t);
                cs_state(cs).to_string()
            }
            None => {
                assert_eq!(rp_state(&rp), "Accepted");
                "none".into()
            }
        };
        if seen.last() != Some(&state) {
            seen.push(state.clone());
        }
        // Followed to its readiness (a day-2 upgrade may come after it).
        if state == "ready" {
            ready_at = cs.as_ref().map(cs_since);
            break;
        }
        t += SignedDuration::from_secs(10);
    }
    let order = ["none", "validating", "pending", "installing", "ready"];
    let ranks: Vec<usize> = seen
        .iter()
        .map(|s| order.iter().position(|o| o == s).unwrap())
        .collect();
    assert!(ranks.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    assert!(seen.contains(&"installing".to_string()), "{seen:?}");
    if let Some(ready) = ready_at {
        // The fed-back NodePool: Ready True at its replicas, since then.
        let (_, list) = get(&cs_pools(&ep, &c.cluster_id, "")).await;
        let item = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["id"] == pool.as_str())
            .unwrap()
            .clone();
        assert_eq!(item["status"]["current_replicas"], item["replicas"]);
        let fed = fed_back_of_pool(&ep, &c.cluster_id, &pool).await.unwrap();
        assert_eq!(ready_since(&fed), Some(whole(ready)));
        assert_eq!(fed["replicas"], item["replicas"]);
    } else {
        panic!("never ready in 25 minutes: {seen:?} ({:?})", c.fault);
    }
}

/// The fed-back status of the NodePool `pool` of cluster `id` (its bundle
/// is `<id>-<pool>`).
pub(crate) async fn fed_back_of_pool(ep: &Endpoints, id: &str, pool: &str) -> Option<Value> {
    let url = format!(
        "{}/api/maestro/v1/resource-bundles?size=10000",
        base(&ep.maestro)
    );
    let (_, body) = get(&url).await;
    let b = body["items"]
        .as_array()?
        .iter()
        .find(|b| b["name"] == format!("{id}-{pool}").as_str())?;
    let name = b["manifests"][0]["spec"]["workload"]["manifests"][0]["metadata"]["name"]
        .as_str()?
        .to_string();
    fed_back(ep, &name).await
}

/// A pool added after the creation: absent before its request, then
/// Accepted/validating, pending, installing (its bundle handed to Maestro)
/// and ready when its NodePool is; `createdAt` is the request.
#[tokio::test]
async fn an_added_pool_is_requested_then_ready_with_its_node_pool() {
    let _machine = crate::common::load::share();
    let config = cfg(120, 8);
    let op = healthy_op(&config, "node_pool_create");
    let world = World::new(config, SimClock::manual(t0()));
    let ep = serve(&world).await;
    let rid = resource_id(&world, &op.cluster_id);
    let pool = short(op.node_pool.as_deref().unwrap()).to_string();
    let mut t = op.started - SignedDuration::from_secs(60);
    let mut seen: Vec<String> = Vec::new();
    let mut requested = None;
    while t <= op.ended.unwrap() + SignedDuration::from_secs(10) {
        world.clock().set(t);
        let (rp, cs) = both(&ep, &rid, &op.cluster_id, &pool).await;
        let (_, list) = get(&rp_pools(&ep, &rid, None, NEW)).await;
        let listed = list["value"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["name"] == pool.as_str());
        assert_eq!(listed, rp.is_some(), "a GET and the list agree at {t}");
        let state = match (&rp, &cs) {
            (None, None) => "none".to_string(),
            (Some(rp), Some(cs)) => {
                assert_eq!(rp_state(rp), mapped(cs_state(cs)), "at {t}");
                requested = Some(ts(&rp["systemData"]["createdAt"]));
                cs_state(cs).to_string()
            }
            other => panic!("one service without the other at {t}: {other:?}"),
        };
        if seen.last() != Some(&state) {
            seen.push(state);
        }
        t += SignedDuration::from_secs(2);
    }
    assert_eq!(
        seen,
        ["none", "validating", "pending", "installing", "ready"],
        "{op:?}"
    );
    // Asked 15–45 s before its NodePool existed.
    let lead = (op.started - requested.unwrap()).get_seconds();
    assert!((14..=46).contains(&lead), "{lead}s");
    let (_, cs) = both(&ep, &rid, &op.cluster_id, &pool).await;
    let cs = cs.unwrap();
    assert_eq!(whole(cs_since(&cs)), op.ended.unwrap());
    assert_eq!(cs["status"]["current_replicas"], cs["replicas"]);
    let fed = fed_back_of_pool(&ep, &op.cluster_id, &pool).await.unwrap();
    assert_eq!(ready_since(&fed), op.ended);
}

/// A pool removed: Deleting / uninstalling from the request (before the
/// NodePool's deletionTimestamp), gone from both services when its NodePool
/// is gone from the management cluster.
#[tokio::test]
async fn a_removed_pool_is_deleting_then_gone_with_its_node_pool() {
    let _machine = crate::common::load::share();
    let config = cfg(160, 9);
    let op = healthy_op(&config, "node_pool_delete");
    let world = World::new(config, SimClock::manual(t0()));
    let ep = serve(&world).await;
    world.serve_kube().await.unwrap();
    let rid = resource_id(&world, &op.cluster_id);
    let name = op.node_pool.clone().unwrap();
    let pool = short(&name).to_string();
    let on_mgmt = |world: &World| {
        world.sync_kube();
        world
            .mgmt_clusters()
            .iter()
            .flat_map(|c| c.api.objects("NodePool"))
            .any(|o| o["metadata"]["name"] == name.as_str())
    };
    world
        .clock()
        .set(op.started - SignedDuration::from_secs(10));
    let (rp, cs) = both(&ep, &rid, &op.cluster_id, &pool).await;
    assert_eq!(rp_state(&rp.unwrap()), "Succeeded");
    assert_eq!(cs_state(&cs.unwrap()), "ready");

    world.clock().set(op.started);
    let (rp, cs) = both(&ep, &rid, &op.cluster_id, &pool).await;
    let (rp, cs) = (rp.unwrap(), cs.unwrap());
    assert_eq!(rp_state(&rp), "Deleting");
    assert_eq!(cs_state(&cs), "uninstalling");
    assert!(
        cs_since(&cs) <= op.started,
        "asked before the NodePool deletes"
    );
    assert_eq!(ts(&rp["systemData"]["lastModifiedAt"]), cs_since(&cs));
    // Gone with the NodePool, to the second; before the bundle is.
    let (mut cs_gone, mut np_gone) = (None, None);
    let mut t = op.started;
    while t <= op.ended.unwrap() + SignedDuration::from_secs(2) {
        world.clock().set(t);
        let (rp, cs) = both(&ep, &rid, &op.cluster_id, &pool).await;
        assert_eq!(rp.is_some(), cs.is_some(), "at {t}");
        if let Some(cs) = &cs {
            assert_eq!(cs_state(cs), "uninstalling");
        }
        if cs.is_none() && cs_gone.is_none() {
            cs_gone = Some(t);
            let (_, list) = get(&rp_pools(&ep, &rid, None, NEW)).await;
            assert!(
                list["value"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|v| v["name"] != pool.as_str())
            );
        }
        if np_gone.is_none() && !on_mgmt(&world) {
            np_gone = Some(t);
        }
        t += SignedDuration::from_secs(1);
    }
    let (cs_gone, np_gone) = (cs_gone.unwrap(), np_gone.unwrap());
    assert!(
        (cs_gone - np_gone).get_seconds().abs() <= 1,
        "{cs_gone} {np_gone}"
    );
    assert!(cs_gone <= op.ended.unwrap());
}

/// A pool's upgrade: Updating / updating from `UpdatingVersion`'s start,
/// the RP naming the target, Clusters Service the release running; ready
/// again, at the target, when the NodePool runs it.
#[tokio::test]
async fn a_pool_upgrade_is_updating_until_the_pool_runs_the_target() {
    let _machine = crate::common::load::share();
    let config = cfg(120, 8);
    let op = healthy_op(&config, "node_pool_upgrade");
    let world = World::new(config, SimClock::manual(t0()));
    let ep = serve(&world).await;
    let rid = resource_id(&world, &op.cluster_id);
    let pool = short(op.node_pool.as_deref().unwrap()).to_string();
    let target = op.target_version.clone().unwrap();
    let minor = target.rsplit_once('.').unwrap().0.to_string();

    world.clock().set(op.started - SignedDuration::from_secs(5));
    let (rp, cs) = both(&ep, &rid, &op.cluster_id, &pool).await;
    let (rp, cs) = (rp.unwrap(), cs.unwrap());
    assert_eq!((rp_state(&rp), cs_state(&cs)), ("Succeeded", "ready"));
    assert_ne!(cs["version"]["raw_id"], target.as_str());

    world.clock().set(op.started + SignedDuration::from_secs(1));
    let (rp, cs) = both(&ep, &rid, &op.cluster_id, &pool).await;
    let (rp, cs) = (rp.unwrap(), cs.unwrap());
    assert_eq!((rp_state(&rp), cs_state(&cs)), ("Updating", "updating"));
    assert_eq!(whole(cs_since(&cs)), op.started);
    assert_eq!(rp["properties"]["version"]["id"], minor.as_str());
    assert_ne!(
        cs["version"]["raw_id"],
        target.as_str(),
        "not running it yet"
    );

    let ended = op.ended.unwrap();
    world.clock().set(ended + SignedDuration::from_secs(1));
    let (rp, cs) = both(&ep, &rid, &op.cluster_id, &pool).await;
    let (rp, cs) = (rp.unwrap(), cs.unwrap());
    assert_eq!((rp_state(&rp), cs_state(&cs)), ("Succeeded", "ready"));
    assert_eq!(whole(cs_since(&cs)), ended);
    assert_eq!(cs["version"]["id"], format!("openshift-v{target}").as_str());
    let fed = fed_back_of_pool(&ep, &op.cluster_id, &pool).await.unwrap();
    assert_eq!(fed["version"], target.as_str());
}
