//! The simulated world's node pools, continued (`sim_node_pools`): the
//! `cs_node_pool_error` fault, paging, the transport faults and counting
//! on the new routes, and a cluster's deletion taking its pools.

use std::collections::BTreeSet;

use hcp_flow::sim::{Api, Day2Config, Fault, SimClock, World};
use jiff::SignedDuration;
use serde_json::Value;

use crate::sim_node_pools::{
    NEW, base, both, cfg, cs_pools, cs_since, cs_state, fed_back_of_pool, get, get_once, rp_pools,
    rp_state, serve, short, t0, ts, whole,
};

/// `cs_node_pool_error`: drawn only when asked; the added pool's Clusters
/// Service node pool goes from `validating` to `error` with a message, the
/// ARM nodePool `Failed`; no bundle and no NodePool ever; the ground truth
/// names the operation, the pool and the failing hop.
#[tokio::test]
async fn a_pool_clusters_service_fails_is_failed_on_both_and_nowhere_else() {
    let _machine = crate::common::load::share();
    let config = cfg(300, 5);
    let on = Day2Config::default();
    assert!(on.cs_node_pool_error, "on by default");
    let hour = std::time::Duration::from_secs(3600);
    let off = World::with_day2(
        config.clone(),
        SimClock::manual(t0()),
        Day2Config {
            cs_node_pool_error: false,
            ..Day2Config::default()
        },
    );
    off.clock().advance(hour);
    let probe = World::with_day2(config.clone(), SimClock::manual(t0()), on);
    probe.clock().advance(hour);
    let (off_items, on_items) = (off.ground_truth().items, probe.ground_truth().items);
    assert!(
        off_items
            .iter()
            .all(|i| i.fault != Some("cs_node_pool_error")),
        "off when asked"
    );
    // Turning it on changes only the clusters it takes: a pool Clusters
    // Service fails when added, or during its upgrade.
    assert_eq!(off_items.len(), on_items.len());
    for (a, b) in off_items.iter().zip(&on_items) {
        if !matches!(
            b.fault,
            Some("cs_node_pool_error" | "cs_node_pool_upgrade_error")
        ) {
            assert_eq!(a, b);
        } else {
            assert_eq!(a.fault, None, "taken from healthy clusters only");
        }
    }
    let item = on_items
        .into_iter()
        .find(|i| i.fault == Some("cs_node_pool_error"))
        .expect("a cs_node_pool_error in 300 clusters");
    assert_eq!(item.operation, Some("node_pool_create"));
    assert_eq!(item.failed_hop, Some("clusters_service"));
    assert_eq!(item.expected_alert, Some("HCPOperationFailed"));
    let name = item.node_pool.clone().unwrap();
    let pool = short(&name).to_string();
    let (at, due) = (item.fault_at.unwrap(), item.alert_due_at.unwrap());
    assert_eq!((due - at).get_seconds(), 60);

    let world = World::with_day2(config, SimClock::manual(t0()), on);
    let ep = serve(&world).await;
    world.serve_kube().await.unwrap();
    let rid = item.resource_id.clone();
    world.clock().set(at - SignedDuration::from_secs(1));
    let (rp, cs) = both(&ep, &rid, &item.cluster_id, &pool).await;
    let (rp, cs) = (rp.unwrap(), cs.unwrap());
    assert_eq!((rp_state(&rp), cs_state(&cs)), ("Accepted", "validating"));
    world.clock().set(at + SignedDuration::from_mins(30));
    let (rp, cs) = both(&ep, &rid, &item.cluster_id, &pool).await;
    let (rp, cs) = (rp.unwrap(), cs.unwrap());
    assert_eq!((rp_state(&rp), cs_state(&cs)), ("Failed", "error"));
    assert_eq!(cs_since(&cs), at);
    assert_eq!(cs["status"]["current_replicas"], 0);
    let message = cs["status"]["message"].as_str().unwrap();
    assert!(message.contains("quota"), "{message}");
    let degraded = rp["properties"]["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Degraded")
        .unwrap();
    assert_eq!(degraded["status"], "True");
    // Nothing was created past Clusters Service.
    assert!(
        fed_back_of_pool(&ep, &item.cluster_id, &pool)
            .await
            .is_none()
    );
    let url = format!(
        "{}/api/maestro/v1/resource-bundles?size=10000",
        base(&ep.maestro)
    );
    let (_, bundles) = get(&url).await;
    let bundle = format!("{}-{pool}", item.cluster_id);
    assert!(
        bundles["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["name"] != bundle.as_str())
    );
    world.sync_kube();
    assert!(
        world
            .mgmt_clusters()
            .iter()
            .flat_map(|c| c.api.objects("NodePool"))
            .all(|o| o["metadata"]["name"] != name.as_str())
    );
    let op = world
        .day2_operations()
        .into_iter()
        .find(|o| o.node_pool.as_deref() == Some(name.as_str()))
        .unwrap();
    assert_eq!(
        (op.operation, op.ended, op.fault, op.failed_hop),
        (
            "node_pool_create",
            None,
            Some("cs_node_pool_error"),
            Some("clusters_service")
        )
    );
    assert_eq!(op.started, whole(ts(&rp["systemData"]["createdAt"])));
}

/// Paging: ARM `$top` with `nextLink`/`$skipToken`, Clusters Service
/// `page`/`size` with `total`; both walk every pool once.
#[tokio::test]
async fn node_pool_lists_page() {
    let _machine = crate::common::load::share();
    let world = World::new(cfg(30, 6), SimClock::manual(t0()));
    let ep = serve(&world).await;
    world.clock().advance(std::time::Duration::from_secs(3600));
    let truth = world.truth();
    let mut checked = 0;
    for c in truth.clusters.iter().filter(|c| c.completed_at.is_some()) {
        let (_, all) = get(&rp_pools(&ep, &c.resource_id, None, NEW)).await;
        let all: Vec<String> = all["value"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap().to_string())
            .collect();
        if all.len() < 2 {
            continue;
        }
        let mut walked = Vec::new();
        let mut next = Some(format!(
            "{}&$top=1",
            rp_pools(&ep, &c.resource_id, None, NEW)
        ));
        while let Some(url) = next {
            let (status, page) = get(&url).await;
            assert_eq!(status, 200, "{page}");
            let items = page["value"].as_array().unwrap();
            assert!(items.len() <= 1);
            walked.extend(
                items
                    .iter()
                    .map(|v| v["name"].as_str().unwrap().to_string()),
            );
            next = page["nextLink"].as_str().map(str::to_string);
            assert!(walked.len() <= all.len(), "no page repeats");
        }
        assert_eq!(
            BTreeSet::from_iter(walked),
            BTreeSet::from_iter(all.clone())
        );

        let mut ids = Vec::new();
        for page in 1..=all.len() + 1 {
            let (_, body) = get(&cs_pools(
                &ep,
                &c.cluster_id,
                &format!("?page={page}&size=1"),
            ))
            .await;
            assert_eq!(body["total"], all.len());
            assert_eq!(body["page"], page);
            assert_eq!(body["size"], body["items"].as_array().unwrap().len());
            ids.extend(
                body["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| i["id"].as_str().unwrap().to_string()),
            );
        }
        assert_eq!(ids.len(), all.len());
        assert_eq!(BTreeSet::from_iter(ids), BTreeSet::from_iter(all.clone()));
        // `search` on the pool's id.
        let q = format!("?search={}", urlencode(&format!("id = '{}'", all[0])));
        let (_, one) = get(&cs_pools(&ep, &c.cluster_id, &q)).await;
        assert_eq!(one["total"], 1, "{one}");
        checked += 1;
    }
    assert!(checked > 0, "a cluster with two pools");
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The world's transport faults cover the new routes as the old ones, and
/// every node pool request is counted per API.
#[tokio::test]
async fn transport_faults_and_counting_cover_node_pools() {
    let _machine = crate::common::load::share();
    let mut config = cfg(10, 7);
    config.faults = false;
    let world = World::new(config, SimClock::manual(t0()));
    let ep = serve(&world).await;
    let truth = world.truth();
    let c = &truth.clusters[0];
    let rp = rp_pools(&ep, &c.resource_id, None, NEW);
    let cs = cs_pools(&ep, &c.cluster_id, "");
    let before = world.node_pool_requests();
    let served = world.items_served();

    world.inject(Fault::ServerErrors {
        api: Api::RpFrontend,
        for_requests: 1,
    });
    world.inject(Fault::ServerErrors {
        api: Api::ClustersService,
        for_requests: 1,
    });
    let (s, e) = get_once(&rp).await;
    assert_eq!(
        (s, e["error"]["code"].as_str()),
        (500, Some("InternalServerError"))
    );
    let (s, e) = get_once(&cs).await;
    assert_eq!((s, e["kind"].as_str()), (500, Some("Error")));
    // A fault answers before the route: nothing is counted.
    assert_eq!(world.node_pool_requests(), before);

    world.inject(Fault::MalformedJson {
        api: Api::ClustersService,
        for_requests: 1,
    });
    let r = reqwest::get(&cs).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(r.json::<Value>().await.is_err(), "a truncated body");

    let (s, rp_list) = get(&rp).await;
    assert_eq!(s, 200);
    let (s, cs_list) = get(&cs).await;
    assert_eq!(s, 200);
    let (s, _) = get(&cs_pools(&ep, &c.cluster_id, "/np-1/status")).await;
    assert_eq!(s, 200);
    let after = world.node_pool_requests();
    assert_eq!(after["rp_frontend"], before["rp_frontend"] + 1);
    assert_eq!(after["clusters_service"], before["clusters_service"] + 2);
    let now = world.items_served();
    let n = |v: &Value, k: &str| v[k].as_array().unwrap().len() as u64;
    assert_eq!(
        now["rp_frontend"],
        served["rp_frontend"] + n(&rp_list, "value")
    );
    assert_eq!(
        now["clusters_service"],
        served["clusters_service"] + n(&cs_list, "items") + 1
    );
}

/// A cluster's deletion takes its pools: Deleting / uninstalling with it,
/// and no nodePools once the cluster is gone (404 as for any missing
/// parent).
#[tokio::test]
async fn a_deleted_cluster_takes_its_pools() {
    let _machine = crate::common::load::share();
    let mut config = cfg(20, 11);
    config.churn = true;
    config.faults = false;
    let world = World::new(config, SimClock::manual(t0()));
    let ep = serve(&world).await;
    let c = world
        .truth()
        .clusters
        .iter()
        .min_by_key(|c| c.created_at)
        .cloned()
        .unwrap();
    let mut t = t0();
    let (mut deleting, mut uninstalling, mut gone) = (false, false, false);
    while t < t0() + SignedDuration::from_mins(60) && !gone {
        world.clock().set(t);
        let (status, cluster) = get(&format!(
            "{}{}?api-version={NEW}",
            base(&ep.rp_frontend),
            c.resource_id
        ))
        .await;
        let (ps, list) = get(&rp_pools(&ep, &c.resource_id, None, NEW)).await;
        if status == 404 {
            assert_eq!(ps, 404, "no nodePools without the cluster");
            gone = true;
        } else if cluster["properties"]["provisioningState"] == "Deleting" {
            deleting = true;
            for v in list["value"].as_array().unwrap() {
                assert_eq!(rp_state(v), "Deleting");
            }
            let (s, cl) = get(&format!(
                "{}/api/aro_hcp/v1alpha1/clusters/{}",
                base(&ep.clusters_service),
                c.cluster_id
            ))
            .await;
            if s == 200 && cl["status"]["state"] == "uninstalling" {
                let (_, pools) = get(&cs_pools(&ep, &c.cluster_id, "")).await;
                for p in pools["items"].as_array().unwrap() {
                    assert_eq!(cs_state(p), "uninstalling");
                }
                uninstalling = true;
            }
        }
        t += SignedDuration::from_secs(5);
    }
    assert!(
        deleting && uninstalling && gone,
        "{deleting} {uninstalling} {gone}"
    );
}
