//! The simulated world over real HTTP: envelopes, paging, search, nesting,
//! reference shapes and transport faults.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use hcp_flow::model::{Hop, Phase};
use hcp_flow::sim::{Api, Endpoints, Fault, LatencyModel, SimClock, World, WorldConfig};
use jiff::Timestamp;
use serde_json::Value;

fn t0() -> Timestamp {
    "2026-03-01T12:00:00Z".parse().unwrap()
}

async fn start(clusters: usize, faults: bool) -> (World, Endpoints, reqwest::Client) {
    crate::common::init();
    let cfg = WorldConfig {
        clusters,
        speed: 1.0,
        seed: 21,
        faults,
        churn: false,
        latency: LatencyModel::none(),
        subscriptions: 2,
        not_handed_over: 0.0,
        failure_burst: None,
        kind: hcp_flow::sim::WorldKind::Aro,
    };
    let world = World::new(cfg, SimClock::manual(t0()));
    let endpoints = world.serve().await.unwrap();
    (world, endpoints, reqwest::Client::new())
}

async fn get(client: &reqwest::Client, url: &str) -> (u16, Value) {
    let r = client.get(url).send().await.unwrap();
    let status = r.status().as_u16();
    assert_eq!(r.headers()["content-type"], "application/json");
    (status, r.json().await.unwrap())
}

fn url(base: &url::Url, path_and_query: &str) -> String {
    format!("{}{}", base.as_str().trim_end_matches('/'), path_and_query)
}

const V: &str = "2024-06-10-preview";

#[tokio::test]
async fn rp_lists_pages_by_next_link_and_gets_one() {
    let _machine = crate::common::load::share();
    let (world, ep, client) = start(30, false).await;
    let truth = world.truth();
    let mut ids = BTreeSet::new();
    for sub in world.subscriptions() {
        let mut next = Some(url(
            &ep.rp_frontend,
            &format!(
                "/subscriptions/{sub}/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters?api-version={V}&$top=4"
            ),
        ));
        let mut pages = 0;
        while let Some(u) = next {
            let (status, body) = get(&client, &u).await;
            assert_eq!(status, 200, "{body}");
            let value = body["value"].as_array().unwrap();
            assert!(value.len() <= 4);
            for r in value {
                assert!(ids.insert(r["id"].as_str().unwrap().to_string()));
                assert_eq!(r["type"], "Microsoft.RedHatOpenShift/hcpOpenShiftClusters");
            }
            next = body["nextLink"].as_str().map(str::to_string);
            if let Some(n) = &next {
                assert!(
                    n.starts_with(ep.rp_frontend.as_str()) && n.contains("$skipToken="),
                    "{n}"
                );
            }
            pages += 1;
        }
        assert!(pages >= 2);
    }
    let expected: BTreeSet<String> = truth
        .clusters
        .iter()
        .map(|c| c.resource_id.clone())
        .collect();
    assert_eq!(ids, expected);

    // GET by id, ARM ids are case-insensitive.
    let c = &truth.clusters[0];
    let (status, body) = get(
        &client,
        &url(
            &ep.rp_frontend,
            &format!("{}?api-version={V}", c.resource_id.to_lowercase()),
        ),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["id"], c.resource_id.as_str());
    assert_eq!(
        body["properties"]["provisioningState"],
        c.hops[&Hop::RpFrontend].state.as_str()
    );
    assert_eq!(
        body["systemData"]["createdAt"]
            .as_str()
            .unwrap()
            .parse::<Timestamp>()
            .unwrap(),
        c.created_at
    );
    assert!(
        body["properties"].get("status").is_none(),
        "status.conditions only from 2026-06-30-preview"
    );

    let (status, body) = get(
        &client,
        &url(
            &ep.rp_frontend,
            &format!("{}?api-version=2026-06-30-preview", c.resource_id),
        ),
    )
    .await;
    assert_eq!(status, 200);
    let types: Vec<&str> = body["properties"]["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["Available", "Degraded", "Progressing"]);

    // ARM errors.
    let missing = c.resource_id.replace(&c.name, "nope");
    let (status, body) = get(
        &client,
        &url(&ep.rp_frontend, &format!("{missing}?api-version={V}")),
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "ResourceNotFound");
    let (status, body) = get(&client, &url(&ep.rp_frontend, &c.resource_id)).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], "MissingApiVersionParameter");
    let (status, body) = get(
        &client,
        &url(
            &ep.rp_frontend,
            &format!("{}?api-version=2020-01-01", c.resource_id),
        ),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2024-06-10-preview")
    );
}

fn cs_ids(body: &Value) -> BTreeSet<String> {
    body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn clusters_service_pages_and_searches() {
    let _machine = crate::common::load::share();
    let (world, ep, client) = start(40, false).await;
    let truth = world.truth();
    for prefix in ["/api/aro_hcp/v1alpha1", "/api/clusters_mgmt/v1"] {
        let mut all = BTreeSet::new();
        for page in 1..=5 {
            let (status, body) = get(
                &client,
                &url(
                    &ep.clusters_service,
                    &format!("{prefix}/clusters?page={page}&size=10"),
                ),
            )
            .await;
            assert_eq!(status, 200);
            assert_eq!(body["kind"], "ClusterList");
            assert_eq!(body["page"], page);
            assert_eq!(body["total"], 40);
            assert_eq!(body["size"], body["items"].as_array().unwrap().len());
            all.extend(cs_ids(&body));
            for item in body["items"].as_array().unwrap() {
                assert_eq!(
                    item["href"],
                    format!("{prefix}/clusters/{}", item["id"].as_str().unwrap())
                );
                assert_eq!(item["state"], item["status"]["state"]);
            }
        }
        assert_eq!(all.len(), 40);
    }
    let cs = |p: &str| {
        url(
            &ep.clusters_service,
            &format!("/api/aro_hcp/v1alpha1/clusters{p}"),
        )
    };
    let state_of = |id: &str| {
        truth.cluster(id).unwrap().hops[&Hop::ClustersService]
            .state
            .clone()
    };

    let q = "state not in ('ready','hibernating','error')";
    let (status, body) = get(
        &client,
        &format!("{}?{}", cs(""), serde_urlencoded(&[("search", q)])),
    )
    .await;
    assert_eq!(status, 200);
    let in_flight = cs_ids(&body);
    assert!(!in_flight.is_empty());
    let expected: BTreeSet<String> = truth
        .clusters
        .iter()
        .filter(|c| {
            !["ready", "hibernating", "error"]
                .contains(&c.hops[&Hop::ClustersService].state.as_str())
        })
        .map(|c| c.cluster_id.clone())
        .collect();
    assert_eq!(in_flight, expected);

    let two: Vec<&String> = in_flight.iter().take(2).collect();
    let q = format!(
        "id in ('{}', '{}') and state in ('{}')",
        two[0],
        two[1],
        state_of(two[0])
    );
    let (_, body) = get(
        &client,
        &format!("{}?{}", cs(""), serde_urlencoded(&[("search", &q)])),
    )
    .await;
    assert!(cs_ids(&body).contains(two[0]));
    assert!(body["total"].as_u64().unwrap() <= 2);

    let since = (t0() - jiff::SignedDuration::from_mins(10)).to_string();
    let q = format!("creation_timestamp >= '{since}'");
    let (_, body) = get(
        &client,
        &format!("{}?{}", cs(""), serde_urlencoded(&[("search", &q)])),
    )
    .await;
    let young = cs_ids(&body);
    assert!(!young.is_empty() && young.len() < 40);

    let (status, body) = get(
        &client,
        &format!(
            "{}?{}",
            cs(""),
            serde_urlencoded(&[("search", "flavour = 'x'")])
        ),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(body["kind"], "Error");
    for k in ["id", "href", "code", "reason", "operation_id"] {
        assert!(body.get(k).is_some(), "error body lacks {k}: {body}");
    }

    // Sub-resources.
    let c = &truth.clusters[3];
    let (status, body) = get(&client, &cs(&format!("/{}/status", c.cluster_id))).await;
    assert_eq!(status, 200);
    assert_eq!(body["state"], c.hops[&Hop::ClustersService].state.as_str());
    let (status, body) = get(&client, &cs(&format!("/{}/provision_shard", c.cluster_id))).await;
    assert_eq!(status, 200);
    let aks = body["azure_shard"]["aks_management_cluster_resource_id"]
        .as_str()
        .unwrap();
    assert_eq!(aks.rsplit('/').next().unwrap(), c.mgmt_cluster);
    assert!(body["maestro_config"]["consumer_name"].is_string());
    let (status, body) = get(&client, &cs("/doesnotexist")).await;
    assert_eq!(status, 404);
    assert_eq!(body["kind"], "Error");
}

fn serde_urlencoded(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

#[tokio::test]
async fn maestro_pages_searches_incrementally_and_nests_three_levels() {
    let _machine = crate::common::load::share();
    let (world, ep, client) = start(40, false).await;
    let list = |q: &str| {
        url(
            &ep.maestro,
            &format!("/api/maestro/v1/resource-bundles?{q}"),
        )
    };
    let (status, body) = get(&client, &list("page=2&size=15")).await;
    assert_eq!(status, 200);
    assert_eq!(body["kind"], "ResourceBundleList");
    // Every cluster has the HostedCluster's bundle and one per NodePool
    // (one or two pools each).
    let total = body["total"].as_u64().unwrap();
    assert!(
        (80..=120).contains(&total),
        "{total} bundles for 40 clusters"
    );
    assert_eq!(
        (body["page"].as_u64(), body["size"].as_u64()),
        (Some(2), Some(15))
    );

    let (_, body) = get(&client, &list("size=100&orderBy=updated_at%20desc")).await;
    let items = body["items"].as_array().unwrap().clone();
    let updated: Vec<Timestamp> = items
        .iter()
        .map(|b| b["updated_at"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(updated.windows(2).all(|w| w[0] >= w[1]));

    // Incremental query: nothing newer than the newest, then something after time passes.
    let newest = updated[0].to_string();
    let q = serde_urlencoded(&[("search", &format!("updated_at > '{newest}'"))]);
    let (_, body) = get(&client, &list(&q)).await;
    assert_eq!(body["total"], 0);
    world.clock().advance(Duration::from_secs(120));
    let (_, body) = get(&client, &list(&q)).await;
    let changed = body["items"].as_array().unwrap();
    assert!(!changed.is_empty());
    assert!(changed.iter().all(|b| {
        b["updated_at"]
            .as_str()
            .unwrap()
            .parse::<Timestamp>()
            .unwrap()
            > updated[0]
    }));

    let consumer = items[0]["consumer_name"].as_str().unwrap();
    let q = serde_urlencoded(&[(
        "search",
        &format!("consumer_name = '{consumer}' and updated_at >= '2000-01-01T00:00:00Z'"),
    )]);
    let (_, body) = get(&client, &list(&q)).await;
    let n = body["total"].as_u64().unwrap();
    assert!(n > 0 && n < total);
    assert!(
        body["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["consumer_name"] == consumer)
    );

    let (status, body) = get(
        &client,
        &list(&serde_urlencoded(&[(
            "search",
            "payload->'metadata'->>'name' = 'x'",
        )])),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(body["kind"], "Error");
    assert!(body["reason"].is_string() && body["operation_id"].is_string());

    // Three levels: bundle → ManifestWork status → HostedCluster / NodePool
    // status; the HostedCluster and each NodePool in a bundle of its own.
    let truth = world.truth();
    let (_, body) = get(&client, &list("size=200")).await;
    let mut checked = 0;
    let mut carried: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for b in body["items"].as_array().unwrap() {
        let id = b["metadata"]["labels"]["api.openshift.com/id"]
            .as_str()
            .unwrap();
        let c = truth.cluster(id).unwrap();
        assert_eq!(
            b["href"],
            format!(
                "/api/maestro/v1/resource-bundles/{}",
                b["id"].as_str().unwrap()
            )
        );
        let name = b["name"].as_str().unwrap();
        let work = &b["manifests"][0];
        assert_eq!(
            (work["kind"].as_str(), work["metadata"]["name"].as_str()),
            (Some("ManifestWork"), Some(name)),
            "the bundle is named after the ManifestWork it carries"
        );
        let inner = work["spec"]["workload"]["manifests"].as_array().unwrap();
        assert_eq!(inner.len(), 1, "one HostedCluster or one NodePool per work");
        let kind = inner[0]["kind"].as_str().unwrap().to_string();
        carried
            .entry(id.to_string())
            .or_default()
            .push((kind.clone(), name.to_string()));
        if b["status"].is_null() {
            assert_ne!(c.hops[&Hop::MaestroBundle].phase, Phase::Ready);
            continue;
        }
        assert!(
            b["status"]["ObservedVersion"].is_number() && b["status"]["SequenceID"].is_string()
        );
        let mc = &b["status"]["resourceStatus"][0];
        assert_eq!(mc["resourceMeta"]["kind"], "ManifestWork");
        let fv = &mc["statusFeedback"]["values"][0];
        assert_eq!(
            (fv["name"].as_str(), fv["fieldValue"]["type"].as_str()),
            (Some("status"), Some("JsonRaw"))
        );
        let mw: Value =
            serde_json::from_str(fv["fieldValue"]["jsonRaw"].as_str().unwrap()).unwrap();
        let mw_available = mw["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Available" && c["status"] == "True");
        if c.hops[&Hop::Manifestwork].phase == Phase::Ready {
            assert!(mw_available, "a ready hop has every work Available");
        }
        let manifests = mw["resourceStatus"]["manifests"].as_array().unwrap();
        assert_eq!(manifests.len(), 1);
        assert_eq!(manifests[0]["resourceMeta"]["kind"], kind.as_str());
        if kind == "NodePool" {
            let values = manifests[0]["statusFeedback"]["values"].as_array().unwrap();
            let nps: Value =
                serde_json::from_str(values[0]["fieldValue"]["jsonRaw"].as_str().unwrap()).unwrap();
            assert!(nps["replicas"].is_number());
            assert_eq!(values[1]["name"], "replicas");
            assert_eq!(values[1]["fieldValue"]["type"], "Integer");
            assert!(values[1]["fieldValue"]["integer"].as_i64().unwrap() >= 1);
            assert_eq!(
                manifests[0]["resourceMeta"]["name"], inner[0]["metadata"]["name"],
                "the feedback is the carried NodePool's"
            );
            checked += 1;
            continue;
        }
        let hc = &manifests[0];
        assert!(
            hc["resourceMeta"]["namespace"]
                .as_str()
                .unwrap()
                .ends_with(id)
        );
        let hcs: Value = serde_json::from_str(
            hc["statusFeedback"]["values"][0]["fieldValue"]["jsonRaw"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        let available = hcs["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Available")
            .unwrap();
        assert_eq!(
            available["status"] == "True",
            c.hops[&Hop::HostedCluster].phase == Phase::Ready
        );
        if available["status"] == "True" {
            let at: Timestamp = available["lastTransitionTime"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(Some(at), c.hops[&Hop::HostedCluster].ready_at);
        }
        assert_eq!(
            hcs["version"]["history"][0]["state"],
            c.hops[&Hop::HostedCluster].state.as_str()
        );
        checked += 1;
    }
    assert!(checked > 50);
    assert_eq!(carried.len(), 40, "every cluster has bundles");
    for (id, bundles) in &carried {
        let hcs: Vec<&(String, String)> = bundles
            .iter()
            .filter(|(k, _)| k == "HostedCluster")
            .collect();
        assert_eq!(hcs.len(), 1, "{id}: {bundles:?}");
        assert_eq!(
            &hcs[0].1, id,
            "the HostedCluster's work is named after the cluster"
        );
        let pools: Vec<&(String, String)> =
            bundles.iter().filter(|(k, _)| k == "NodePool").collect();
        // One or two from the creation, and one a cluster may add later.
        assert!((1..=3).contains(&pools.len()), "{id}: {bundles:?}");
        assert!(
            pools
                .iter()
                .all(|(_, n)| n.starts_with(&format!("{id}-np-"))),
            "{id}: {bundles:?}"
        );
    }

    let bid = body["items"][0]["id"].as_str().unwrap();
    let (status, one) = get(
        &client,
        &url(
            &ep.maestro,
            &format!("/api/maestro/v1/resource-bundles/{bid}"),
        ),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(one["id"], bid);
    let (status, _) = get(
        &client,
        &url(&ep.maestro, "/api/maestro/v1/resource-bundles/nope"),
    )
    .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn transport_faults_burst_garble_and_go_down() {
    let _machine = crate::common::load::share();
    let (world, ep, client) = start(5, false).await;
    let cs = url(&ep.clusters_service, "/api/aro_hcp/v1alpha1/clusters");

    world.inject(Fault::ServerErrors {
        api: Api::ClustersService,
        for_requests: 2,
    });
    for _ in 0..2 {
        let (status, body) = get(&client, &cs).await;
        assert_eq!(status, 500);
        assert_eq!(body["kind"], "Error");
    }
    assert_eq!(get(&client, &cs).await.0, 200);

    world.inject(Fault::MalformedJson {
        api: Api::Maestro,
        for_requests: 1,
    });
    let r = client
        .get(url(&ep.maestro, "/api/maestro/v1/resource-bundles"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["content-type"], "application/json");
    assert!(serde_json::from_str::<Value>(&r.text().await.unwrap()).is_err());
    assert_eq!(
        get(
            &client,
            &url(&ep.maestro, "/api/maestro/v1/resource-bundles")
        )
        .await
        .0,
        200
    );

    let sub = &world.subscriptions()[0];
    let rp = url(
        &ep.rp_frontend,
        &format!(
            "/subscriptions/{sub}/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters?api-version={V}"
        ),
    );
    world.inject(Fault::Down {
        api: Api::RpFrontend,
    });
    let mut refused = false;
    for _ in 0..50 {
        match client.get(&rp).send().await {
            Err(e) if e.is_connect() => {
                refused = true;
                break;
            }
            Err(_) => {}
            Ok(r) => assert_eq!(r.status().as_u16(), 503),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(refused, "the RP port should refuse connections while down");
    // The other APIs are unaffected.
    assert_eq!(get(&client, &cs).await.0, 200);
    world.inject(Fault::Up {
        api: Api::RpFrontend,
    });
    let mut back = false;
    for _ in 0..100 {
        if let Ok(r) = client.get(&rp).send().await
            && r.status().as_u16() == 200
        {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(back, "the RP should answer again once up");
}

#[tokio::test]
async fn latency_is_charged_per_item() {
    let _machine = crate::common::load::share();
    crate::common::init();
    let cfg = WorldConfig {
        clusters: 20,
        speed: 1.0,
        seed: 3,
        faults: false,
        churn: false,
        latency: LatencyModel {
            base: Duration::from_millis(5),
            per_item: Duration::from_millis(10),
        },
        subscriptions: 1,
        not_handed_over: 0.0,
        failure_burst: None,
        kind: hcp_flow::sim::WorldKind::Aro,
    };
    let world = World::new(cfg, SimClock::manual(t0()));
    let ep = world.serve().await.unwrap();
    let client = reqwest::Client::new();
    let timed = |size: usize| {
        let client = client.clone();
        let u = url(
            &ep.maestro,
            &format!("/api/maestro/v1/resource-bundles?size={size}"),
        );
        async move {
            let start = std::time::Instant::now();
            let r = client.get(u).send().await.unwrap();
            assert_eq!(r.status().as_u16(), 200);
            start.elapsed()
        }
    };
    assert!(timed(20).await >= Duration::from_millis(205));
    assert!(timed(1).await < Duration::from_millis(200));
}

// ------------------------------------------------- shapes against the reference

/// Every key path of a JSON document; array elements share `[]`, and maps
/// keyed by data (tags, identities) collapse to `*`.
fn key_paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            let dynamic = prefix.ends_with(".tags")
                || prefix.ends_with("userAssignedIdentities")
                    && !prefix.contains("operatorsAuthentication");
            for (k, child) in m {
                let p = format!("{prefix}.{}", if dynamic { "*" } else { k });
                out.insert(p.clone());
                key_paths(child, &p, out);
            }
        }
        Value::Array(a) => {
            for child in a {
                key_paths(child, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

fn keys(v: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    key_paths(v, "", &mut out);
    out
}

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/sim/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn assert_same_keys(
    reference: &BTreeSet<String>,
    served: &BTreeSet<String>,
    allowed_extra: &[&str],
    what: &str,
) {
    let missing: Vec<_> = reference.difference(served).collect();
    let extra: Vec<_> = served
        .difference(reference)
        .filter(|k| !allowed_extra.iter().any(|a| k.starts_with(a)))
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{what}: missing {missing:?}, unexpected {extra:?}"
    );
}

#[tokio::test]
async fn served_json_has_the_reference_field_names() {
    let _machine = crate::common::load::share();
    let (world, ep, client) = start(20, false).await;
    world.clock().advance(Duration::from_secs(3600));
    let truth = world.truth();
    let done = truth
        .clusters
        .iter()
        .find(|c| c.completed_at.is_some())
        .unwrap();

    for (version, file, extra) in [
        (
            "2024-06-10-preview",
            "rp-2024-06-10-preview-HcpOpenShiftClusters_Get_MaximumSet_Gen.json",
            vec![],
        ),
        (
            "2026-09-01-preview",
            "rp-2026-09-01-preview-HcpOpenShiftClusters_Get_MaximumSet_Gen.json",
            vec![".properties.status"],
        ),
    ] {
        let reference = fixture(file)["responses"]["200"]["body"].clone();
        let (status, served) = get(
            &client,
            &url(
                &ep.rp_frontend,
                &format!("{}?api-version={version}", done.resource_id),
            ),
        )
        .await;
        assert_eq!(status, 200);
        assert_same_keys(&keys(&reference), &keys(&served), &extra, version);
    }

    let (_, served) = get(
        &client,
        &url(
            &ep.clusters_service,
            &format!("/api/aro_hcp/v1alpha1/clusters/{}", done.cluster_id),
        ),
    )
    .await;
    let reference = fixture("clusters-service-aro_hcp-v1alpha1-cluster.cs-cluster-creating.json");
    assert_same_keys(
        &keys(&reference),
        &keys(&served),
        &[
            ".id",
            ".state",
            ".status",
            ".creation_timestamp",
            ".api.url",
        ],
        "CS cluster",
    );

    let (_, served) = get(
        &client,
        &url(
            &ep.clusters_service,
            &format!(
                "/api/aro_hcp/v1alpha1/clusters/{}/provision_shard",
                done.cluster_id
            ),
        ),
    )
    .await;
    let mut reference = fixture("clusters-service-aro_hcp-v1alpha1-provision_shard.json");
    // A field of the test harness that captured the fixture, not of the API.
    reference.as_object_mut().unwrap().remove("_cluster_href");
    assert_same_keys(&keys(&reference), &keys(&served), &[], "provision shard");

    // The nested ManifestWork status against Maestro's watched ManifestWork.
    let (_, body) = get(
        &client,
        &url(&ep.maestro, "/api/maestro/v1/resource-bundles?size=100"),
    )
    .await;
    let bundle = body["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["metadata"]["labels"]["api.openshift.com/id"] == done.cluster_id.as_str())
        .unwrap();
    let raw = bundle["status"]["resourceStatus"][0]["statusFeedback"]["values"][0]["fieldValue"]["jsonRaw"].as_str().unwrap();
    let served: Value = serde_json::from_str(raw).unwrap();
    let reference = fixture("manifestwork.watched.json")["status"].clone();
    assert_same_keys(
        &keys(&reference),
        &keys(&served),
        &[".resourceStatus.manifests[].statusFeedback.values[].fieldValue.integer"],
        "ManifestWork status",
    );
    // The bundle's own keys per docs/design/10-upstream-facts.md §10.6.
    let top: BTreeSet<&str> = bundle
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let expected: BTreeSet<&str> = [
        "id",
        "kind",
        "href",
        "name",
        "consumer_name",
        "version",
        "created_at",
        "updated_at",
        "metadata",
        "manifests",
        "manifest_configs",
        "delete_option",
        "status",
    ]
    .into();
    assert_eq!(top, expected);
    let status_keys: BTreeSet<&str> = bundle["status"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        status_keys,
        [
            "ObservedVersion",
            "SequenceID",
            "conditions",
            "resourceStatus"
        ]
        .into()
    );
}
