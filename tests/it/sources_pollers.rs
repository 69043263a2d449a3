//! The pollers against an in-test HTTP server: paging, searches, request
//! counts, failures, deletions, credentials.

use crate::common::source;
use source::harness;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::http::{HeaderMap, StatusCode, Uri, header};
use hcp_flow::config::{
    Auth, ClustersServiceApi, ClustersServiceConfig, HttpSourceConfig, MaestroConfig,
    RpFrontendConfig,
};
use hcp_flow::metrics::exporter::RequestErrorKind;
use hcp_flow::model::{Batch, Change, ClusterKey, Hop, Observation, Phase};
use hcp_flow::sources::clusters_service::{ClustersServiceSource, PollKind};
use hcp_flow::sources::http::{self, HttpClient};
use hcp_flow::sources::maestro::{self, MaestroSource};
use hcp_flow::sources::rp_frontend::RpFrontendSource;
use parking_lot::Mutex;
use serde_json::{Value, json};
use url::Url;

#[derive(Debug, Clone)]
struct Request {
    path: String,
    query: HashMap<String, String>,
    authorization: Option<String>,
}

type Handler = Arc<dyn Fn(&Request) -> (u16, String) + Send + Sync>;

struct Mock {
    base: Url,
    log: Arc<Mutex<Vec<Request>>>,
}

impl Mock {
    async fn start(handler: impl Fn(&Request) -> (u16, String) + Send + Sync + 'static) -> Mock {
        let handler: Handler = Arc::new(handler);
        let log: Arc<Mutex<Vec<Request>>> = Arc::default();
        let app_log = log.clone();
        let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
            let handler = handler.clone();
            let log = app_log.clone();
            async move {
                let req = Request {
                    path: uri.path().to_string(),
                    query: url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
                        .into_owned()
                        .collect(),
                    authorization: headers
                        .get(header::AUTHORIZATION)
                        .map(|v| v.to_str().unwrap().to_string()),
                };
                log.lock().push(req.clone());
                let (status, body) = handler(&req);
                (
                    StatusCode::from_u16(status).unwrap(),
                    [(header::CONTENT_TYPE, "application/json")],
                    body,
                )
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Mock {
            base: Url::parse(&format!("http://{addr}")).unwrap(),
            log,
        }
    }

    fn requests(&self) -> Vec<Request> {
        self.log.lock().clone()
    }

    fn take(&self) -> Vec<Request> {
        std::mem::take(&mut *self.log.lock())
    }
}

fn http_config(base: &Url) -> HttpSourceConfig {
    let mut cfg = HttpSourceConfig::new(base.clone());
    cfg.timeout = Duration::from_secs(5);
    cfg
}

fn gone_keys(batches: &[Batch]) -> Vec<(ClusterKey, Hop, String)> {
    batches
        .iter()
        .flat_map(|b| &b.observations)
        .filter(|o| matches!(o.change, Change::Gone))
        .map(|o| (o.key.clone(), o.hop, o.object.clone()))
        .collect()
}

fn upserts(batches: &[Batch]) -> Vec<&Observation> {
    batches
        .iter()
        .flat_map(|b| &b.observations)
        .filter(|o| matches!(o.change, Change::Upsert(_)))
        .collect()
}

fn phase_of(o: &Observation) -> Phase {
    match &o.change {
        Change::Upsert(v) => v.phase,
        Change::Gone => panic!("gone"),
    }
}

// ---------------------------------------------------------------- RP frontend

const SUB: &str = "FDEA43EA-0230-4A7D-BDEE-F3AFF2183B1D";

fn arm_cluster(name: &str, state: &str) -> Value {
    json!({
        "id": format!("/subscriptions/{SUB}/resourceGroups/rg-1/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters/{name}"),
        "name": name,
        "type": "Microsoft.RedHatOpenShift/hcpOpenShiftClusters",
        "location": "westus3",
        "systemData": {"createdAt": "2026-06-10T22:50:00Z"},
        "properties": {"provisioningState": state, "version": {"id": "4.20", "channelGroup": "stable"}}
    })
}

fn rp_config(base: &Url) -> RpFrontendConfig {
    RpFrontendConfig {
        http: http_config(base),
        api_version: "2024-06-10-preview".into(),
        subscriptions: vec![SUB.into()],
        resource_ids: vec![],
        node_pool_rotation: hcp_flow::config::defaults::node_pool_rotation(),
    }
}

#[tokio::test]
async fn rp_list_follows_next_link_and_relists_remove_vanished() {
    let h = harness("rp_frontend");
    let round = Arc::new(Mutex::new(0));
    let r = round.clone();
    let base_cell: Arc<Mutex<String>> = Arc::default();
    let b = base_cell.clone();
    let mock = Mock::start(move |req| {
        let second_round = *r.lock() > 0;
        if req.path.ends_with("/hcpOpenShiftClusters") {
            assert_eq!(req.query.get("api-version").map(String::as_str), Some("2024-06-10-preview"));
            let next = format!("{}next-page?api-version=2024-06-10-preview&$skipToken=2", b.lock());
            (200, json!({"value": [arm_cluster("a", "Succeeded"), arm_cluster("b", "Provisioning")], "nextLink": next}).to_string())
        } else if req.path == "/next-page" {
            assert_eq!(req.query.get("$skipToken").map(String::as_str), Some("2"));
            let value = if second_round { json!([]) } else { json!([arm_cluster("c", "Failed")]) };
            (200, json!({"value": value}).to_string())
        } else {
            (404, "{}".into())
        }
    })
    .await;
    *base_cell.lock() = mock.base.to_string();
    let mut rp = RpFrontendSource::new(rp_config(&mock.base), h.ctx.clone()).unwrap();

    assert!(rp.poll_all().await);
    assert_eq!(mock.take().len(), 2, "one request per page");
    let batches = h.sink.take();
    assert_eq!(
        batches
            .iter()
            .map(|b| b.observations.len())
            .collect::<Vec<_>>(),
        vec![2, 1],
        "each page delivered as it is read"
    );
    assert!(batches.iter().all(|b| b.initial));
    let obs = upserts(&batches);
    assert_eq!(obs.len(), 3);
    assert!(
        obs.iter()
            .all(|o| matches!(&o.key, ClusterKey::ArmResourceId(id) if id == &id.to_lowercase()))
    );
    assert_eq!(h.up(), 1);

    *round.lock() = 1;
    assert!(rp.poll_all().await);
    let batches = h.sink.take();
    assert!(!batches[0].initial);
    let gone = gone_keys(&batches);
    assert_eq!(gone.len(), 1);
    assert!(matches!(&gone[0].0, ClusterKey::ArmResourceId(id) if id.ends_with("/c")));
}

/// A poll reads its targets one after another; a state an upstream reached
/// while the poll was under way is dated when it was read, never at the
/// poll's start, before it existed (docs/design/03-timeline-model.md §3.2).
/// Two instances reading one RP on different schedules then agree on when a
/// deletion began to within their polls, instead of one dating it at a poll
/// that began before the deletion did.
#[tokio::test]
async fn a_state_read_late_in_a_poll_is_dated_when_read_not_when_the_poll_began() {
    const LATER_SUB: &str = "0B6C5A3E-4F4B-4E9F-9B41-3E1C8E7E2D10";
    let mut h = harness("rp_frontend");
    let t0: jiff::Timestamp = "2026-06-10T23:00:00Z".parse().unwrap();
    let clock = hcp_flow::clock::Clock::manual(t0);
    h.ctx.clock = clock.clone();
    let upstream_clock = clock.clone();
    let mock = Mock::start(move |req| {
        if req.path.contains(LATER_SUB) {
            // The second subscription is read 30 s into the poll, after
            // its cluster began deleting.
            upstream_clock.advance(Duration::from_secs(30));
            let mut deleting = arm_cluster("late", "Deleting");
            deleting["id"] = json!(format!(
                "/subscriptions/{LATER_SUB}/resourceGroups/rg-1/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters/late"
            ));
            (200, json!({"value": [deleting]}).to_string())
        } else if req.path.ends_with("/hcpOpenShiftClusters") {
            (200, json!({"value": [arm_cluster("early", "Succeeded")]}).to_string())
        } else {
            (404, "{}".into())
        }
    })
    .await;
    let mut config = rp_config(&mock.base);
    config.subscriptions.push(LATER_SUB.into());
    let mut rp = RpFrontendSource::new(config, h.ctx.clone()).unwrap();
    assert!(rp.poll_all().await);
    let batches = h.sink.take();
    let dated = |name: &str| {
        batches
            .iter()
            .find(|b| {
                b.observations.iter().any(|o| {
                    matches!(&o.key, ClusterKey::ArmResourceId(id) if id.ends_with(&format!("/{name}")))
                })
            })
            .map(|b| b.observed_at)
    };
    assert_eq!(dated("early"), Some(t0), "read at the poll's start");
    assert_eq!(
        dated("late"),
        Some(t0 + jiff::SignedDuration::from_secs(30)),
        "read 30 s into the poll: dated then, not at the poll's start"
    );
}

#[tokio::test]
async fn rp_refuses_a_next_link_to_another_origin() {
    let h = harness("rp_frontend");
    let leads_away = Arc::new(Mutex::new(false));
    let away = leads_away.clone();
    let mock = Mock::start(move |_| {
        if *away.lock() {
            (200, json!({"value": [arm_cluster("a", "Provisioning")], "nextLink": "https://elsewhere.invalid/a"}).to_string())
        } else {
            (200, json!({"value": [arm_cluster("a", "Provisioning"), arm_cluster("b", "Succeeded")]}).to_string())
        }
    })
    .await;
    let mut rp = RpFrontendSource::new(rp_config(&mock.base), h.ctx.clone()).unwrap();
    assert!(rp.poll_all().await);
    assert_eq!(upserts(&h.sink.take()).len(), 2);
    mock.take();

    *leads_away.lock() = true;
    assert!(!rp.poll_all().await);
    assert_eq!(
        mock.requests().len(),
        1,
        "the link elsewhere is not followed"
    );
    assert_eq!(h.up(), 0);
    assert_eq!(h.errors(RequestErrorKind::other), 1);
    let batches = h.sink.take();
    // What the first page said is what upstream said; what the list did not
    // reach is not gone.
    let read: Vec<&str> = upserts(&batches)
        .iter()
        .map(|o| match &o.key {
            ClusterKey::ArmResourceId(id) => id.rsplit('/').next().unwrap_or(""),
            ClusterKey::Id(id) => id.as_str(),
        })
        .collect();
    assert_eq!(read, vec!["a"]);
    assert!(
        gone_keys(&batches).is_empty(),
        "an incomplete list removes nothing"
    );
}

#[tokio::test]
async fn rp_get_by_id_404_is_gone() {
    let h = harness("rp_frontend");
    let present = Arc::new(Mutex::new(true));
    let p = present.clone();
    let mock = Mock::start(move |req| {
        assert!(req.path.starts_with("/subscriptions/"));
        if *p.lock() {
            (200, arm_cluster("x", "Provisioning").to_string())
        } else {
            (
                404,
                json!({"error": {"code": "ResourceNotFound", "message": "gone"}}).to_string(),
            )
        }
    })
    .await;
    let mut cfg = rp_config(&mock.base);
    cfg.subscriptions.clear();
    let id = format!(
        "/subscriptions/{SUB}/resourceGroups/rg-1/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters/x"
    );
    cfg.resource_ids = vec![id.clone()];
    let mut rp = RpFrontendSource::new(cfg, h.ctx.clone()).unwrap();
    assert!(rp.poll().await);
    let batches = h.sink.take();
    assert_eq!(phase_of(upserts(&batches)[0]), Phase::Progressing);
    assert_eq!(mock.take()[0].path, id);

    *present.lock() = false;
    assert!(rp.poll_all().await);
    let gone = gone_keys(&h.sink.take());
    assert_eq!(
        gone,
        vec![(
            ClusterKey::ArmResourceId(id.to_lowercase()),
            Hop::RpFrontend,
            String::new()
        )]
    );
    assert_eq!(h.up(), 1, "a 404 by id is an answer, not a failure");
}

#[tokio::test]
async fn rp_5xx_marks_the_source_down_and_deletes_nothing() {
    let h = harness("rp_frontend");
    let failing = Arc::new(Mutex::new(false));
    let f = failing.clone();
    let mock = Mock::start(move |_| {
        if *f.lock() {
            (503, "upstream overloaded".into())
        } else {
            (
                200,
                json!({"value": [arm_cluster("a", "Succeeded")]}).to_string(),
            )
        }
    })
    .await;
    let mut rp = RpFrontendSource::new(rp_config(&mock.base), h.ctx.clone()).unwrap();
    assert!(rp.poll_all().await);
    h.sink.take();
    *failing.lock() = true;
    assert!(!rp.poll_all().await);
    assert_eq!(h.up(), 0);
    assert_eq!(h.errors(RequestErrorKind::status_5xx), 1);
    assert!(gone_keys(&h.sink.take()).is_empty());
    *failing.lock() = false;
    assert!(rp.poll_all().await);
    assert_eq!(h.up(), 1);
    assert!(gone_keys(&h.sink.take()).is_empty());
}

// ----------------------------------------------------------- Clusters Service

fn cs_cluster(id: &str, state: &str) -> Value {
    json!({
        "kind": "Cluster", "id": id, "href": format!("/api/aro_hcp/v1alpha1/clusters/{id}"),
        "name": format!("name-{id}"), "state": state,
        "status": {"state": state, "dns_ready": true},
        "creation_timestamp": "2026-06-10T22:50:00Z",
        "azure": {"subscription_id": SUB, "resource_group_name": "rg-1", "resource_name": format!("name-{id}")}
    })
}

/// One page of an OCM-style list envelope, honouring `page` and `size`.
fn ocm_page(req: &Request, kind: &str, matching: &[&Value]) -> (u16, String) {
    let page: usize = req.query["page"].parse().unwrap();
    let size: usize = req.query["size"].parse().unwrap();
    let items: Vec<&Value> = matching
        .iter()
        .skip((page - 1) * size)
        .take(size)
        .copied()
        .collect();
    let body = json!({"kind": kind, "page": page, "size": items.len(), "total": matching.len(), "items": items});
    (200, body.to_string())
}

/// Serve `clusters` as the CS list honouring page/size and the searches the
/// poller uses.
fn cs_list(req: &Request, clusters: &[Value]) -> (u16, String) {
    let search = req.query.get("search").cloned().unwrap_or_default();
    let settled = ["ready", "hibernating", "error"];
    let matching: Vec<&Value> = clusters
        .iter()
        .filter(|c| {
            let state = c["status"]["state"].as_str().unwrap();
            let id = c["id"].as_str().unwrap();
            if search.is_empty() {
                true
            } else if search.starts_with("state not in") {
                !settled.contains(&state)
            } else if search.starts_with("state in") {
                settled.contains(&state)
            } else if search.starts_with("id in") {
                search.contains(&format!("'{id}'"))
            } else if let Some(from) = search.strip_prefix("creation_timestamp >= ") {
                let from: jiff::Timestamp = from.trim_matches('\'').parse().unwrap();
                c["creation_timestamp"]
                    .as_str()
                    .is_some_and(|t| t.parse::<jiff::Timestamp>().unwrap() >= from)
            } else {
                panic!("unexpected search {search}")
            }
        })
        .collect();
    ocm_page(req, "ClusterList", &matching)
}

fn shard() -> String {
    json!({"kind": "ProvisionShard", "id": "shard-1",
        "azure_shard": {"aks_management_cluster_resource_id": "/subscriptions/x/resourceGroups/y/providers/Microsoft.ContainerService/managedClusters/mgmt-1"},
        "maestro_config": {"consumer_name": "consumer-1"}})
    .to_string()
}

fn cs_config(base: &Url) -> ClustersServiceConfig {
    let mut http = http_config(base);
    http.page_size = 2;
    ClustersServiceConfig {
        http,
        api: ClustersServiceApi::AroHcpV1alpha1,
        search_scope: None,
        node_pool_rotation: hcp_flow::config::defaults::node_pool_rotation(),
    }
}

#[tokio::test]
async fn cs_polls_page_and_search_as_documented() {
    let h = harness("clusters_service");
    let world = Arc::new(Mutex::new(vec![
        cs_cluster("c1", "ready"),
        cs_cluster("c2", "installing"),
        cs_cluster("c3", "installing"),
        cs_cluster("c4", "pending"),
        cs_cluster("c5", "error"),
    ]));
    let w = world.clone();
    let mock = Mock::start(move |req| {
        if req.path.ends_with("/provision_shard") {
            return (200, shard());
        }
        assert_eq!(req.path, "/api/aro_hcp/v1alpha1/clusters");
        cs_list(req, &w.lock())
    })
    .await;
    let mut cs = ClustersServiceSource::new(cs_config(&mock.base), h.ctx.clone()).unwrap();

    // Full: 5 clusters at 2 a page = 3 list requests (+ one shard read each).
    assert!(cs.poll(PollKind::Full).await);
    let reqs = mock.take();
    let lists: Vec<&Request> = reqs
        .iter()
        .filter(|r| !r.path.ends_with("provision_shard"))
        .collect();
    assert_eq!(lists.len(), 3);
    assert_eq!(
        lists
            .iter()
            .map(|r| r.query["page"].as_str())
            .collect::<Vec<_>>(),
        ["1", "2", "3"]
    );
    assert!(lists.iter().all(|r| !r.query.contains_key("search")));
    assert_eq!(reqs.len() - lists.len(), 5, "one shard read per cluster");
    let batches = h.sink.take();
    assert!(batches[0].initial);
    let obs = upserts(&batches);
    assert_eq!(obs.len(), 5);
    let Change::Upsert(v) = &obs[0].change else {
        unreachable!()
    };
    assert_eq!(v.identity().mgmt_cluster.as_deref(), Some("mgmt-1"));
    assert_eq!(
        v.identity().resource_id.as_deref(),
        Some(format!("/subscriptions/{}/resourcegroups/rg-1/providers/microsoft.redhatopenshift/hcpopenshiftclusters/name-c1", SUB.to_lowercase()).as_str())
    );
    let mut in_flight: Vec<&String> = cs.in_flight().iter().collect();
    in_flight.sort();
    assert_eq!(in_flight, ["c2", "c3", "c4"]);

    // c2 becomes ready, c3 is deleted; c4 unchanged.
    {
        let mut w = world.lock();
        w[1] = cs_cluster("c2", "ready");
        w.remove(2);
    }
    assert!(cs.poll(PollKind::Fast).await);
    let reqs = mock.take();
    assert_eq!(
        reqs.len(),
        3,
        "one page of in-flight clusters, one of the id query, one of those created since the previous poll; shards cached"
    );
    assert_eq!(
        reqs[0].query["search"],
        "state not in ('ready','hibernating','error')"
    );
    assert_eq!(reqs[1].query["search"], "id in ('c2','c3')");
    let batches = h.sink.take();
    assert!(!batches[0].initial);
    let changed = upserts(&batches);
    assert_eq!(changed.len(), 1, "c4 did not change and is not sent again");
    assert_eq!(changed[0].key, ClusterKey::Id("c2".into()));
    assert_eq!(phase_of(changed[0]), Phase::Ready);
    assert_eq!(
        gone_keys(&batches),
        vec![(
            ClusterKey::Id("c3".into()),
            Hop::ClustersService,
            String::new()
        )]
    );
    assert_eq!(cs.in_flight().len(), 1);

    assert!(cs.poll(PollKind::Slow).await);
    let reqs = mock.take();
    assert_eq!(reqs.len(), 2, "3 settled clusters at 2 a page");
    assert!(
        reqs.iter()
            .all(|r| r.query["search"] == "state in ('ready','hibernating','error')")
    );
    assert!(h.sink.take().is_empty(), "nothing changed");

    // Full relist catches a settled cluster that vanished.
    world.lock().retain(|c| c["id"] != "c5");
    assert!(cs.poll(PollKind::Full).await);
    let batches = h.sink.take();
    assert_eq!(
        gone_keys(&batches),
        vec![(
            ClusterKey::Id("c5".into()),
            Hop::ClustersService,
            String::new()
        )]
    );
    assert_eq!(upserts(&batches).len(), 3, "a relist sends everything");
    assert_eq!(h.up(), 1);
    // The last relist reads its missing cluster by id before calling it gone.
    assert_eq!(h.requests(), (3 + 5 + 3 + 2 + 3) as u64);
}

#[tokio::test]
async fn cs_malformed_json_is_a_counted_decode_error() {
    let h = harness("clusters_service");
    let mock = Mock::start(|_| (200, "{\"kind\":\"ClusterList\",\"items\":[{\"id\":".into())).await;
    let mut cs = ClustersServiceSource::new(cs_config(&mock.base), h.ctx.clone()).unwrap();
    assert!(!cs.poll(PollKind::Full).await);
    assert_eq!(h.errors(RequestErrorKind::decode), 1);
    assert_eq!(h.up(), 0);
    assert!(
        h.sink.take().is_empty(),
        "a failed first sync delivers nothing"
    );
}

#[tokio::test]
async fn cs_shard_failure_is_retried_later_not_every_poll() {
    let h = harness("clusters_service");
    let mock = Mock::start(|req| {
        if req.path.ends_with("/provision_shard") {
            (500, "{}".into())
        } else {
            cs_list(req, &[cs_cluster("c1", "installing")])
        }
    })
    .await;
    let mut cs = ClustersServiceSource::new(cs_config(&mock.base), h.ctx.clone()).unwrap();
    assert!(
        !cs.poll(PollKind::Full).await,
        "a failed request fails the sync"
    );
    assert_eq!(
        upserts(&h.sink.take()).len(),
        1,
        "the cluster is still observed"
    );
    mock.take();
    assert!(cs.poll(PollKind::Fast).await);
    assert!(
        mock.take()
            .iter()
            .all(|r| !r.path.ends_with("provision_shard"))
    );
}

// --------------------------------------------------------------------- Maestro

/// A Maestro source with the test defaults, reading `base`.
fn maestro_source(base: &Url, ctx: hcp_flow::sources::SourceContext) -> MaestroSource {
    maestro_source_with(http_config(base), ctx)
}

/// A Maestro source reading with these HTTP settings.
fn maestro_source_with(
    http: HttpSourceConfig,
    ctx: hcp_flow::sources::SourceContext,
) -> MaestroSource {
    MaestroSource::new(
        MaestroConfig {
            http,
            search_scope: None,
            grpc: None,
        },
        ctx,
    )
    .unwrap()
}

fn maestro_bundle(id: &str, cluster: &str, updated_at: &str, available: &str) -> Value {
    let conditions = json!([
        {"type": "Applied", "status": "True", "reason": "AppliedManifestWorkComplete", "message": "", "lastTransitionTime": "2026-06-10T22:51:00Z"},
        {"type": "Available", "status": available, "reason": "ResourcesAvailable", "message": "", "lastTransitionTime": "2026-06-10T22:52:00Z"}
    ]);
    let hc = json!({"conditions": [{"type": "Available", "status": available, "reason": "AsExpected", "message": "", "lastTransitionTime": "2026-06-10T23:00:00Z"}]});
    let work = json!({"conditions": conditions, "resourceStatus": {"manifests": [{
        "resourceMeta": {"kind": "HostedCluster", "name": cluster, "namespace": format!("ocm-env-{cluster}")},
        "statusFeedback": {"values": [{"name": "status", "fieldValue": {"type": "JsonRaw", "jsonRaw": hc.to_string()}}]}
    }]}});
    json!({
        "id": id, "kind": "ResourceBundle", "name": format!("{cluster}-work"), "consumer_name": "mgmt-1", "version": 1,
        "created_at": "2026-06-10T22:50:00Z", "updated_at": updated_at,
        "metadata": {"name": format!("{cluster}-work"), "labels": {"api.openshift.com/id": cluster}},
        "status": {"ObservedVersion": 1, "SequenceID": "1", "conditions": conditions, "resourceStatus": [{
            "resourceMeta": {"kind": "ManifestWork", "name": format!("{cluster}-work"), "namespace": "local-cluster"},
            "conditions": conditions,
            "statusFeedback": {"values": [{"name": "status", "fieldValue": {"type": "JsonRaw", "jsonRaw": work.to_string()}}]}
        }]}
    })
}

fn maestro_list(req: &Request, bundles: &[Value]) -> (u16, String) {
    let matching: Vec<&Value> = match req.query.get("search") {
        None => bundles.iter().collect(),
        // The relist's check by id of what it missed.
        Some(s) if s.starts_with("id in (") => bundles
            .iter()
            .filter(|b| s.contains(&format!("'{}'", b["id"].as_str().unwrap())))
            .collect(),
        Some(s) => {
            let since: jiff::Timestamp = s
                .strip_prefix("updated_at > '")
                .and_then(|r| r.strip_suffix('\''))
                .unwrap_or_else(|| panic!("unexpected search {s}"))
                .parse()
                .unwrap();
            bundles
                .iter()
                .filter(|b| {
                    b["updated_at"]
                        .as_str()
                        .unwrap()
                        .parse::<jiff::Timestamp>()
                        .unwrap()
                        > since
                })
                .collect()
        }
    };
    ocm_page(req, "ResourceBundleList", &matching)
}

/// What a cluster's one bundle showed, sorted as `gone_keys` sorts: its
/// bundle, its ManifestWork and its HostedCluster.
fn bundle_gone(cluster: &str) -> Vec<(ClusterKey, Hop, String)> {
    let key = ClusterKey::Id(cluster.into());
    let work = format!("{cluster}-work");
    vec![
        (key.clone(), Hop::MaestroBundle, work.clone()),
        (key.clone(), Hop::Manifestwork, work),
        (key, Hop::HostedCluster, String::new()),
    ]
}

/// A bundle that starts matching while a poll pages through the list lands
/// on a page already read (pages are offsets in creation order): that poll
/// misses it. It changed after the poll began, so the next incremental poll
/// must start no later than that, even when newer bundles were seen.
#[tokio::test]
async fn maestro_incremental_rereads_what_changed_during_the_previous_poll() {
    let mut h = harness("maestro");
    let clock = hcp_flow::clock::Clock::manual("2026-06-10T23:06:00Z".parse().unwrap());
    h.ctx.clock = clock.clone();
    let world = Arc::new(Mutex::new(vec![
        maestro_bundle("b1", "c1", "2026-06-10T23:00:00Z", "True"),
        maestro_bundle("b3", "c3", "2026-06-10T23:10:00Z", "True"),
    ]));
    let w = world.clone();
    let mock = Mock::start(move |req| maestro_list(req, &w.lock())).await;
    let mut m = maestro_source(&mock.base, h.ctx.clone());
    assert!(m.poll(maestro::PollKind::Full).await);
    mock.take();
    h.sink.take();
    // Reported at 23:07, after the poll began, on a page it had read.
    world.lock().insert(
        1,
        maestro_bundle("b2", "c2", "2026-06-10T23:07:00Z", "False"),
    );
    clock.advance(std::time::Duration::from_secs(1));
    assert!(m.poll(maestro::PollKind::Incremental).await);
    let reqs = mock.take();
    assert_eq!(
        reqs[0].query["search"], "updated_at > '2026-06-10T23:05:58Z'",
        "from the previous poll's start, not the newest update seen (23:10)"
    );
    let batches = h.sink.take();
    let changed = upserts(&batches);
    assert!(
        changed.iter().any(|o| o.key == ClusterKey::Id("c2".into())),
        "b2 read by the next poll: {changed:?}"
    );
}

/// When bundles change faster than Maestro lists them, each incremental
/// pass is longer than the last; one that delivered at its end would show
/// nothing new. Each page goes out as it is read.
#[tokio::test]
async fn maestro_incremental_pass_delivers_each_page_as_it_is_read() {
    let h = harness("maestro");
    let world = Arc::new(Mutex::new(vec![maestro_bundle(
        "b0",
        "c0",
        "2026-06-10T23:00:00Z",
        "True",
    )]));
    let w = world.clone();
    let mock = Mock::start(move |req| maestro_list(req, &w.lock())).await;
    let mut http = http_config(&mock.base);
    http.page_size = 2;
    let mut m = maestro_source_with(http, h.ctx.clone());
    assert!(m.poll(maestro::PollKind::Full).await);
    h.sink.take();
    mock.take();

    world.lock().extend((1..=4).map(|i| {
        maestro_bundle(
            &format!("b{i}"),
            &format!("c{i}"),
            "2026-06-10T23:30:00Z",
            "True",
        )
    }));
    assert!(m.poll(maestro::PollKind::Incremental).await);
    let pages = mock
        .take()
        .iter()
        .filter(|r| {
            r.query
                .get("search")
                .is_some_and(|s| s.starts_with("updated_at"))
        })
        .count();
    assert_eq!(
        pages, 3,
        "b0 again (the overlap), then b1 to b4, two a page"
    );
    let clusters_per_batch: Vec<Vec<ClusterKey>> = h
        .sink
        .take()
        .iter()
        .map(|b| {
            let mut keys: Vec<ClusterKey> = b.observations.iter().map(|o| o.key.clone()).collect();
            keys.dedup();
            keys
        })
        .collect();
    let id = |c: &str| ClusterKey::Id(c.into());
    assert_eq!(
        clusters_per_batch,
        vec![vec![id("c1")], vec![id("c2"), id("c3")], vec![id("c4")]],
        "one batch per page; b0 read again unchanged sends nothing"
    );
}

#[tokio::test]
async fn maestro_full_then_incremental_then_relist() {
    let h = harness("maestro");
    let world = Arc::new(Mutex::new(vec![
        maestro_bundle("b1", "c1", "2026-06-10T23:00:00Z", "True"),
        maestro_bundle("b2", "c2", "2026-06-10T23:05:00Z", "False"),
        maestro_bundle("b3", "c3", "2026-06-10T23:10:00Z", "True"),
    ]));
    let w = world.clone();
    let mock = Mock::start(move |req| {
        assert_eq!(req.path, maestro::BUNDLES_PATH);
        maestro_list(req, &w.lock())
    })
    .await;
    let mut http = http_config(&mock.base);
    http.page_size = 2;
    let mut m = maestro_source_with(http, h.ctx.clone());

    assert!(
        m.poll(maestro::PollKind::Incremental).await,
        "the first poll is a full one"
    );
    let reqs = mock.take();
    assert_eq!(reqs.len(), 2);
    assert!(reqs.iter().all(|r| !r.query.contains_key("search")));
    let batches = h.sink.take();
    assert!(batches.iter().all(|b| b.initial));
    let obs = upserts(&batches);
    assert_eq!(
        obs.len(),
        9,
        "bundle + manifestwork + hosted_cluster for each of 3"
    );
    // Each page is delivered as it is read, never the whole list at once.
    let per_batch: Vec<usize> = batches.iter().map(|b| b.observations.len()).collect();
    assert_eq!(per_batch[..2], [6, 3], "{per_batch:?}");
    assert_eq!(
        m.newest_updated_at(),
        Some("2026-06-10T23:10:00Z".parse().unwrap())
    );

    // c2's hosted cluster becomes available.
    world.lock()[1] = maestro_bundle("b2", "c2", "2026-06-10T23:15:00Z", "True");
    assert!(m.poll(maestro::PollKind::Incremental).await);
    let reqs = mock.take();
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        reqs[0].query["search"],
        "updated_at > '2026-06-10T23:09:58Z'"
    );
    let batches = h.sink.take();
    assert!(!batches[0].initial);
    let changed = upserts(&batches);
    assert_eq!(
        changed.len(),
        3,
        "b3 is re-read by the overlap but unchanged; b2's three views changed"
    );
    assert!(changed.iter().all(|o| o.key == ClusterKey::Id("c2".into())));
    assert!(changed.iter().all(|o| phase_of(o) == Phase::Ready));

    // b1 vanishes: only a full relist sees it.
    world.lock().remove(0);
    assert!(m.poll(maestro::PollKind::Incremental).await);
    assert!(gone_keys(&h.sink.take()).is_empty());
    assert!(m.poll(maestro::PollKind::Full).await);
    let mut gone = gone_keys(&h.sink.take());
    gone.sort();
    assert_eq!(gone, bundle_gone("c1"),);
}

/// A relist's list by offsets can skip live bundles; they are read by id
/// before they are called gone, in one request per query whatever the
/// list's page size: a query names at most 50 bundles, so one page holds
/// them (a small list page once cost a request per bundle and held every
/// bundle of the read back until its last page).
#[tokio::test]
async fn maestro_reads_by_id_in_one_page_whatever_the_list_page_size() {
    let h = harness("maestro");
    let bundles: Vec<Value> = (1..=4)
        .map(|i| {
            maestro_bundle(
                &format!("b{i}"),
                &format!("c{i}"),
                "2026-06-10T23:00:00Z",
                "True",
            )
        })
        .collect();
    let skip_in_lists = Arc::new(Mutex::new(false));
    let (all, skip) = (bundles.clone(), skip_in_lists.clone());
    let mock = Mock::start(move |req| {
        let searched = req.query.contains_key("search");
        if !searched && *skip.lock() {
            // The list shifted: b2..b4 fell past the pages it read.
            return maestro_list(req, &all[..1]);
        }
        maestro_list(req, &all)
    })
    .await;
    let mut http = http_config(&mock.base);
    http.page_size = 1;
    let mut m = maestro_source_with(http, h.ctx.clone());
    assert!(m.poll(maestro::PollKind::Full).await);
    h.sink.take();
    mock.take();

    *skip_in_lists.lock() = true;
    assert!(m.poll(maestro::PollKind::Full).await);
    let by_id: Vec<_> = mock
        .take()
        .into_iter()
        .filter(|r| {
            r.query
                .get("search")
                .is_some_and(|s| s.starts_with("id in ("))
        })
        .collect();
    assert_eq!(by_id.len(), 1, "one request for the three ids: {by_id:?}");
    assert_eq!(by_id[0].query["search"], "id in ('b2','b3','b4')");
    assert_eq!(by_id[0].query["size"], "3", "{by_id:?}");
    assert!(
        gone_keys(&h.sink.take()).is_empty(),
        "found by id: not gone"
    );
}

/// A bundle Maestro marks for deletion (`deleted_at`) and then removes is
/// gone at the next incremental poll, read by id, not at the next full
/// relist; one removed without the mark still waits for the relist, and a
/// failed read by id keeps the bundle until a read succeeds.
#[tokio::test]
async fn a_bundle_being_deleted_is_gone_at_the_next_incremental_poll() {
    let h = harness("maestro");
    let world = Arc::new(Mutex::new(vec![
        maestro_bundle("b1", "c1", "2026-06-10T23:00:00Z", "True"),
        maestro_bundle("b2", "c2", "2026-06-10T23:05:00Z", "True"),
    ]));
    let fail_by_id = Arc::new(Mutex::new(false));
    let (w, fail) = (world.clone(), fail_by_id.clone());
    let mock = Mock::start(move |req| {
        let by_id = req
            .query
            .get("search")
            .is_some_and(|s| s.starts_with("id in ("));
        if by_id && *fail.lock() {
            return (503, "{}".to_string());
        }
        maestro_list(req, &w.lock())
    })
    .await;
    let mut m = maestro_source(&mock.base, h.ctx.clone());
    assert!(m.poll(maestro::PollKind::Full).await);
    h.sink.take();

    // b1 is marked for deletion; the incremental poll reads the mark.
    let mut deleting = maestro_bundle("b1", "c1", "2026-06-10T23:20:00Z", "True");
    deleting["deleted_at"] = json!("2026-06-10T23:20:00Z");
    world.lock()[0] = deleting;
    assert!(m.poll(maestro::PollKind::Incremental).await);
    assert!(gone_keys(&h.sink.take()).is_empty());

    // Both go: b1 after its mark, b2 without one. A failed read by id
    // keeps b1 (absent from a failed read is not gone).
    world.lock().clear();
    *fail_by_id.lock() = true;
    assert!(m.poll(maestro::PollKind::Incremental).await);
    assert!(gone_keys(&h.sink.take()).is_empty());
    *fail_by_id.lock() = false;
    mock.take();
    assert!(m.poll(maestro::PollKind::Incremental).await);
    let reqs = mock.take();
    assert!(
        reqs.iter()
            .any(|r| r.query.get("search").map(String::as_str) == Some("id in ('b1')")),
        "b1 read by id: {reqs:?}"
    );
    let mut gone = gone_keys(&h.sink.take());
    gone.sort();
    assert_eq!(
        gone,
        bundle_gone("c1"),
        "b1 is gone; b2, never marked, waits for the relist"
    );
    assert!(m.poll(maestro::PollKind::Full).await);
    let gone = gone_keys(&h.sink.take());
    assert!(
        gone.iter()
            .all(|(k, _, _)| *k == ClusterKey::Id("c2".into()))
            && !gone.is_empty(),
        "{gone:?}"
    );
}

/// A full relist of a large fleet pages for minutes. A bundle an early page
/// listed alive, then marked for deletion and removed before the relist
/// ended, used to stay until the relist after, ten minutes later: nothing
/// saw the mark. The incremental pass that falls due between two pages
/// reads the mark, and the next one finds the bundle gone by id.
#[tokio::test]
async fn a_bundle_marked_and_removed_during_a_relist_is_gone_by_its_end() {
    let h = harness("maestro");
    let world = Arc::new(Mutex::new(vec![
        maestro_bundle("b1", "c1", "2026-06-10T23:00:00Z", "True"),
        maestro_bundle("b2", "c2", "2026-06-10T23:05:00Z", "True"),
        maestro_bundle("b3", "c3", "2026-06-10T23:10:00Z", "True"),
        maestro_bundle("b4", "c4", "2026-06-10T23:15:00Z", "True"),
    ]));
    let armed = Arc::new(Mutex::new(false));
    let (w, a) = (world.clone(), armed.clone());
    let mock = Mock::start(move |req| {
        let mut world = w.lock();
        let reply = maestro_list(req, &world);
        let relist_page = match req.query.get("search") {
            None => req.query.get("page").map(String::as_str),
            Some(_) => None,
        };
        if *a.lock() {
            match relist_page {
                // Page 1 showed b1 alive; Maestro marks it just after.
                Some("1") => {
                    world[0]["deleted_at"] = json!("2026-06-10T23:30:00Z");
                    world[0]["updated_at"] = json!("2026-06-10T23:30:00Z");
                }
                // And removes it once page 2 is read.
                Some("2") => {
                    world.retain(|b| b["id"] != "b1");
                }
                _ => {}
            }
        }
        reply
    })
    .await;
    let mut http = http_config(&mock.base);
    http.page_size = 2;
    // Every page boundary is a due pass.
    http.fast_poll_interval = Duration::ZERO;
    let mut m = maestro_source_with(http, h.ctx.clone());
    assert!(m.poll(maestro::PollKind::Full).await);
    let first: Vec<String> = mock
        .take()
        .iter()
        .map(|r| r.query.get("search").cloned().unwrap_or_default())
        .collect();
    assert_eq!(first, ["", ""], "a first sync does not interleave");
    h.sink.take();

    *armed.lock() = true;
    assert!(m.poll(maestro::PollKind::Full).await);
    let asked: Vec<String> = mock
        .take()
        .iter()
        .map(|r| match r.query.get("search") {
            None => format!("page {}", r.query["page"]),
            Some(s) => s.clone(),
        })
        .collect();
    assert_eq!(
        asked,
        [
            "page 1",
            "updated_at > '2026-06-10T23:14:58Z'",
            "page 2",
            "updated_at > '2026-06-10T23:29:58Z'",
            "id in ('b1')",
        ],
        "a pass between the pages, and after the last"
    );
    assert_eq!(h.up(), 1);
    let batches = h.sink.take();
    assert!(batches.iter().all(|b| !b.initial));
    let mut gone = gone_keys(&batches);
    gone.sort();
    assert_eq!(
        gone,
        bundle_gone("c1"),
        "b1 is gone within the relist; the others stay"
    );
}

/// The pages a full list asked for, leaving out the checks by id.
fn relist_pages(requests: &[Request]) -> Vec<String> {
    requests
        .iter()
        .filter(|r| !r.query.contains_key("search"))
        .map(|r| r.query["page"].clone())
        .collect()
}

#[tokio::test]
async fn a_relist_outlasts_a_5xx_burst_on_a_later_page_and_sees_deletions() {
    let h = harness("maestro");
    let world = Arc::new(Mutex::new(vec![
        maestro_bundle("b1", "c1", "2026-06-10T23:00:00Z", "True"),
        maestro_bundle("b2", "c2", "2026-06-10T23:05:00Z", "True"),
        maestro_bundle("b3", "c3", "2026-06-10T23:10:00Z", "True"),
        maestro_bundle("b4", "c4", "2026-06-10T23:15:00Z", "True"),
        maestro_bundle("b5", "c5", "2026-06-10T23:20:00Z", "True"),
    ]));
    // How many more requests for page 2 answer 503 before it is served.
    let page_two_failures = Arc::new(Mutex::new(0usize));
    let (w, f) = (world.clone(), page_two_failures.clone());
    let mock = Mock::start(move |req| {
        let mut left = f.lock();
        if req.query["page"] == "2" && *left > 0 {
            *left -= 1;
            return (503, r#"{"kind":"Error","reason":"busy"}"#.into());
        }
        maestro_list(req, &w.lock())
    })
    .await;
    let mut http = http_config(&mock.base);
    http.page_size = 2;
    let mut m = maestro_source_with(http, h.ctx.clone());
    assert!(m.poll(maestro::PollKind::Full).await);
    h.sink.take();
    mock.take();

    // c1 is deleted, and the relist's page 2 fails three times running:
    // the page is asked again, the relist completes and the deletion is seen.
    world.lock().remove(0);
    *page_two_failures.lock() = 3;
    assert!(m.poll(maestro::PollKind::Full).await);
    let pages = relist_pages(&mock.take());
    assert_eq!(pages, ["1", "2", "2", "2", "2"]);
    assert_eq!(
        h.errors(RequestErrorKind::status_5xx),
        3,
        "every attempt counted"
    );
    assert_eq!(h.up(), 1);
    let gone = gone_keys(&h.sink.take());
    assert_eq!(
        gone.len(),
        3,
        "c1's bundle, work and hosted cluster: {gone:?}"
    );
    assert!(
        gone.iter()
            .all(|(key, _, _)| *key == ClusterKey::Id("c1".into()))
    );

    // One failure more than the attempts outlast: the relist fails, having
    // asked four times, and deletes nothing.
    world.lock().remove(0);
    *page_two_failures.lock() = http::PAGE_ATTEMPTS as usize;
    assert!(!m.poll(maestro::PollKind::Full).await);
    let pages = relist_pages(&mock.take());
    assert_eq!(pages, ["1", "2", "2", "2", "2"]);
    assert_eq!(h.up(), 0);
    assert!(gone_keys(&h.sink.take()).is_empty());
}

#[tokio::test]
async fn a_first_page_is_not_retried_but_an_arm_next_link_page_is() {
    let h = harness("rp_frontend");
    let next_failures = Arc::new(Mutex::new(1usize));
    let first_fails = Arc::new(Mutex::new(false));
    let base_cell: Arc<Mutex<String>> = Arc::default();
    let (f, first, b) = (
        next_failures.clone(),
        first_fails.clone(),
        base_cell.clone(),
    );
    let mock = Mock::start(move |req| {
        if req.path == "/next-page" {
            let mut left = f.lock();
            if *left > 0 {
                *left -= 1;
                return (502, "bad gateway".into());
            }
            return (
                200,
                json!({"value": [arm_cluster("c", "Failed")]}).to_string(),
            );
        }
        if *first.lock() {
            return (503, "upstream overloaded".into());
        }
        let next = format!("{}next-page?api-version=2024-06-10-preview", b.lock());
        (
            200,
            json!({"value": [arm_cluster("a", "Succeeded")], "nextLink": next}).to_string(),
        )
    })
    .await;
    *base_cell.lock() = mock.base.to_string();
    let mut rp = RpFrontendSource::new(rp_config(&mock.base), h.ctx.clone()).unwrap();
    assert!(rp.poll_all().await, "the nextLink page is asked again");
    let paths: Vec<String> = mock.take().into_iter().map(|r| r.path).collect();
    assert_eq!(
        paths.iter().filter(|p| *p == "/next-page").count(),
        2,
        "{paths:?}"
    );
    assert_eq!(upserts(&h.sink.take()).len(), 2);

    *first_fails.lock() = true;
    assert!(!rp.poll_all().await);
    assert_eq!(
        mock.take().len(),
        1,
        "a failed first page is the poll's answer"
    );
    assert_eq!(h.up(), 0);
}

#[tokio::test]
async fn maestro_5xx_keeps_state_and_marks_down() {
    let h = harness("maestro");
    let mock = Mock::start(|_| (502, "bad gateway".into())).await;
    let mut m = maestro_source(&mock.base, h.ctx.clone());
    assert!(!m.poll(maestro::PollKind::Full).await);
    assert_eq!(h.up(), 0);
    assert_eq!(h.errors(RequestErrorKind::status_5xx), 1);
    assert!(h.sink.take().is_empty());
}

// ------------------------------------------------------------------ HTTP client

#[tokio::test]
async fn bearer_token_file_is_reread_after_change() {
    let h = harness("clusters_service");
    let mock = Mock::start(|req| cs_list(req, &[])).await;
    let dir = std::env::temp_dir().join(format!("hcp-flow-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token = dir.join("token");
    std::fs::write(&token, "first-token\n").unwrap();
    let mut cfg = cs_config(&mock.base);
    cfg.http.auth = Auth::BearerTokenFile(token.clone());
    let mut cs = ClustersServiceSource::new(cfg, h.ctx.clone()).unwrap();

    assert!(cs.poll(PollKind::Full).await);
    assert!(cs.poll(PollKind::Full).await);
    // Rotated in place; set the mtime explicitly so the test does not
    // depend on the file system's timestamp granularity.
    std::fs::write(&token, "second-token\n").unwrap();
    let file = std::fs::File::options().write(true).open(&token).unwrap();
    file.set_modified(SystemTime::now() + Duration::from_secs(60))
        .unwrap();
    assert!(cs.poll(PollKind::Full).await);
    let auth: Vec<String> = mock
        .take()
        .into_iter()
        .map(|r| r.authorization.unwrap())
        .collect();
    assert_eq!(
        auth,
        [
            "Bearer first-token",
            "Bearer first-token",
            "Bearer second-token"
        ]
    );

    std::fs::remove_file(&token).unwrap();
    assert!(!cs.poll(PollKind::Full).await);
    assert_eq!(h.errors(RequestErrorKind::credentials), 1);
    assert!(mock.take().is_empty(), "no request without credentials");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn oversized_body_is_counted() {
    let h = harness("maestro");
    let mock = Mock::start(|req| {
        maestro_list(
            req,
            &[maestro_bundle("b1", "c1", "2026-06-10T23:00:00Z", "True")],
        )
    })
    .await;
    let cfg = http_config(&mock.base);
    let client = HttpClient::new("maestro", &cfg, h.metrics.clone())
        .unwrap()
        .with_body_limit(256);
    let mut m = MaestroSource::with_client(
        MaestroConfig {
            http: cfg,
            search_scope: None,
            grpc: None,
        },
        h.ctx.clone(),
        client,
    );
    assert!(!m.poll(maestro::PollKind::Full).await);
    assert_eq!(h.errors(RequestErrorKind::body_too_large), 1);
}

#[tokio::test]
async fn connection_refused_is_its_own_error_kind() {
    let h = harness("maestro");
    // Bind and drop to get a port nobody listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let base = Url::parse(&format!("http://127.0.0.1:{port}")).unwrap();
    let mut m = maestro_source(&base, h.ctx.clone());
    assert!(!m.poll(maestro::PollKind::Full).await);
    assert_eq!(h.errors(RequestErrorKind::connect_refused), 1);
    assert_eq!(h.up(), 0);
}

// ------------------------------------------------------------------ run loops

/// A full relist delivers each page as it is read, so ten thousand
/// clusters' observations are never held at once; a relist that fails on a
/// later page has delivered what it read and declares nothing gone.
#[tokio::test]
async fn cs_relist_delivers_page_by_page_and_a_failed_page_removes_nothing() {
    let h = harness("clusters_service");
    let second_page_fails = Arc::new(Mutex::new(false));
    let fails = second_page_fails.clone();
    let mock = Mock::start(move |req| {
        if req.path.ends_with("/provision_shard") {
            return (200, shard());
        }
        if *fails.lock() && req.query.get("page").map(String::as_str) == Some("2") {
            return (503, "upstream overloaded".into());
        }
        let clusters: Vec<Value> = ["c1", "c2", "c3"]
            .iter()
            .map(|id| cs_cluster(id, "ready"))
            .collect();
        cs_list(req, &clusters)
    })
    .await;
    let mut cs = ClustersServiceSource::new(cs_config(&mock.base), h.ctx.clone()).unwrap();
    assert!(cs.poll(PollKind::Full).await);
    let batches = h.sink.take();
    assert_eq!(
        batches
            .iter()
            .map(|b| b.observations.len())
            .collect::<Vec<_>>(),
        vec![2, 1],
        "one batch per page of two"
    );
    assert!(batches.iter().all(|b| b.initial));

    *second_page_fails.lock() = true;
    assert!(!cs.poll(PollKind::Full).await);
    assert_eq!(h.up(), 0);
    let batches = h.sink.take();
    let read: Vec<ClusterKey> = upserts(&batches).iter().map(|o| o.key.clone()).collect();
    assert_eq!(
        read,
        vec![ClusterKey::Id("c1".into()), ClusterKey::Id("c2".into())],
        "the first page, as read"
    );
    assert!(batches.iter().all(|b| !b.initial));
    assert!(
        gone_keys(&batches).is_empty(),
        "c3 was not reached, not gone"
    );
}

/// The slow poll lists every settled cluster, nearly the fleet: page by
/// page, like a relist, sending only what changed.
#[tokio::test]
async fn cs_slow_poll_delivers_page_by_page() {
    let h = harness("clusters_service");
    let states = Arc::new(Mutex::new(["ready", "ready", "ready", "ready"]));
    let s = states.clone();
    let mock = Mock::start(move |req| {
        if req.path.ends_with("/provision_shard") {
            return (200, shard());
        }
        let clusters: Vec<Value> = s
            .lock()
            .iter()
            .enumerate()
            .map(|(i, state)| cs_cluster(&format!("c{i}"), state))
            .collect();
        cs_list(req, &clusters)
    })
    .await;
    let mut cs = ClustersServiceSource::new(cs_config(&mock.base), h.ctx.clone()).unwrap();
    assert!(cs.poll(PollKind::Full).await);
    h.sink.take();
    *states.lock() = ["error", "ready", "ready", "hibernating"];
    assert!(cs.poll(PollKind::Slow).await);
    let id = |c: &str| ClusterKey::Id(c.into());
    let per_batch: Vec<Vec<ClusterKey>> = h
        .sink
        .take()
        .iter()
        .map(|b| b.observations.iter().map(|o| o.key.clone()).collect())
        .collect();
    assert_eq!(
        per_batch,
        vec![vec![id("c0")], vec![id("c3")]],
        "one batch per page of two, each with what changed on it"
    );
}

/// Wait until `mock` has seen `n` requests (or fail after a few seconds).
async fn wait_for_requests(mock: &Mock, n: usize) -> Vec<Request> {
    for _ in 0..200 {
        let reqs = mock.requests();
        if reqs.len() >= n {
            return reqs;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("only {} requests seen", mock.requests().len());
}

fn fast(mut http: HttpSourceConfig) -> HttpSourceConfig {
    http.fast_poll_interval = Duration::from_millis(30);
    http.slow_poll_interval = Duration::from_secs(600);
    http.full_relist_interval = Duration::from_secs(600);
    http
}

/// A full relist pages through a list that changes while it is read: a
/// deletion on an earlier page shifts a live cluster past the page boundary
/// and it is missing from that relist. Missing is not gone until a read by
/// id agrees.
#[tokio::test]
async fn cs_relist_confirms_by_id_before_calling_a_cluster_gone() {
    let h = harness("clusters_service");
    let hide = Arc::new(Mutex::new(false));
    let gone = Arc::new(Mutex::new(false));
    let (hide2, gone2) = (hide.clone(), gone.clone());
    let mock = Mock::start(move |req| {
        if req.path.ends_with("/provision_shard") {
            return (200, shard());
        }
        let mut clusters = vec![cs_cluster("c1", "ready")];
        let listing = !req.query.contains_key("search");
        let hidden = *gone2.lock() || (listing && *hide2.lock());
        if !hidden {
            clusters.push(cs_cluster("c2", "ready"));
        }
        cs_list(req, &clusters)
    })
    .await;
    let mut cs = ClustersServiceSource::new(cs_config(&mock.base), h.ctx.clone()).unwrap();
    assert!(cs.poll(PollKind::Full).await);
    h.sink.take();
    *hide.lock() = true;
    assert!(cs.poll(PollKind::Full).await);
    let batches = h.sink.take();
    assert!(gone_keys(&batches).is_empty(), "c2 still exists by id");
    *gone.lock() = true;
    assert!(cs.poll(PollKind::Full).await);
    let batches = h.sink.take();
    assert_eq!(
        gone_keys(&batches),
        vec![(
            ClusterKey::Id("c2".into()),
            Hop::ClustersService,
            String::new()
        )]
    );
}

/// A cluster created and failed between two fast polls is never in flight
/// when a poll looks: the next fast poll still reads it, through the
/// clusters created since the previous poll began.
#[tokio::test]
async fn cs_fast_poll_reads_a_cluster_created_and_failed_in_between() {
    let mut h = harness("clusters_service");
    let clock = hcp_flow::clock::Clock::manual("2026-06-10T23:00:00Z".parse().unwrap());
    h.ctx.clock = clock.clone();
    let world = Arc::new(Mutex::new(vec![cs_cluster("c1", "installing")]));
    let w = world.clone();
    let mock = Mock::start(move |req| {
        if req.path.ends_with("/provision_shard") {
            (200, shard())
        } else {
            cs_list(req, &w.lock())
        }
    })
    .await;
    let mut cs = ClustersServiceSource::new(cs_config(&mock.base), h.ctx.clone()).unwrap();
    assert!(cs.poll(PollKind::Full).await);
    h.sink.take();
    let mut failed = cs_cluster("c2", "error");
    failed["creation_timestamp"] = json!("2026-06-10T23:00:10Z");
    world.lock().push(failed);
    clock.advance(Duration::from_secs(20));
    assert!(cs.poll(PollKind::Fast).await);
    let batches = h.sink.take();
    let seen = upserts(&batches);
    assert!(
        seen.iter().any(|o| o.key == ClusterKey::Id("c2".into())),
        "c2 read by the fast poll: {seen:?}"
    );
}

#[tokio::test]
async fn run_loops_start_with_a_full_sync_then_poll_fast() {
    let h = harness("clusters_service");
    let mock = Mock::start(|req| {
        if req.path.ends_with("/provision_shard") {
            (200, shard())
        } else {
            cs_list(req, &[cs_cluster("c1", "installing")])
        }
    })
    .await;
    let mut cfg = cs_config(&mock.base);
    cfg.http = fast(cfg.http);
    let task = tokio::spawn(
        ClustersServiceSource::new(cfg, h.ctx.clone())
            .unwrap()
            .run(),
    );
    let reqs = wait_for_requests(&mock, 4).await;
    task.abort();
    assert!(!reqs[0].query.contains_key("search"), "full sync first");
    assert!(reqs[1].path.ends_with("/provision_shard"));
    // Each fast poll: the clusters in flight, then those created since the
    // previous poll began (a cluster created and failed in between).
    assert_eq!(
        reqs[2].query["search"],
        "state not in ('ready','hibernating','error')"
    );
    assert!(
        reqs[3].query["search"].starts_with("creation_timestamp >= '"),
        "{:?}",
        reqs[3].query
    );
    let batches = h.sink.take();
    assert!(batches[0].initial);
    assert!(batches[1..].iter().all(|b| !b.initial));

    let h = harness("maestro");
    let mock = Mock::start(|req| {
        maestro_list(
            req,
            &[maestro_bundle("b1", "c1", "2026-06-10T23:00:00Z", "True")],
        )
    })
    .await;
    let task = tokio::spawn(
        MaestroSource::new(
            MaestroConfig {
                http: fast(http_config(&mock.base)),
                search_scope: None,
                grpc: None,
            },
            h.ctx.clone(),
        )
        .unwrap()
        .run(),
    );
    let reqs = wait_for_requests(&mock, 3).await;
    task.abort();
    assert!(!reqs[0].query.contains_key("search"));
    assert!(
        reqs[1..]
            .iter()
            .all(|r| r.query["search"].starts_with("updated_at > "))
    );

    // The RP polls a subscription with a cluster in flight at the fast interval.
    let h = harness("rp_frontend");
    let mock = Mock::start(|_| {
        (
            200,
            json!({"value": [arm_cluster("a", "Provisioning")]}).to_string(),
        )
    })
    .await;
    let mut cfg = rp_config(&mock.base);
    cfg.http = fast(cfg.http);
    let task = tokio::spawn(RpFrontendSource::new(cfg, h.ctx.clone()).unwrap().run());
    wait_for_requests(&mock, 3).await;
    task.abort();
    assert_eq!(h.up(), 1);
}

/// A shard's sink: follows only `followed` (docs/design/08-scopes-and-scale-out.md §8.3).
struct ShardSink {
    recorder: Arc<source::Recorder>,
    followed: &'static str,
}

impl hcp_flow::sources::ObservationSink for ShardSink {
    fn apply(&self, batch: Batch) {
        self.recorder.apply(batch);
    }

    fn follows(&self, cluster_id: &str) -> bool {
        cluster_id == self.followed
    }
}

#[tokio::test]
async fn a_shard_keeps_only_the_bundles_of_the_clusters_it_follows() {
    let h = harness("maestro");
    let mut ctx = h.ctx.clone();
    ctx.sink = Arc::new(ShardSink {
        recorder: h.sink.clone(),
        followed: "c1",
    });
    let world = Arc::new(Mutex::new(vec![
        maestro_bundle("b1", "c1", "2026-06-10T23:00:00Z", "True"),
        maestro_bundle("b2", "c2", "2026-06-10T23:05:00Z", "True"),
    ]));
    let w = world.clone();
    let mock = Mock::start(move |req| maestro_list(req, &w.lock())).await;
    let mut m = maestro_source(&mock.base, ctx);
    assert!(m.poll(maestro::PollKind::Full).await);
    let batches = h.sink.take();
    let clusters: std::collections::BTreeSet<ClusterKey> =
        upserts(&batches).iter().map(|o| o.key.clone()).collect();
    assert_eq!(clusters, [ClusterKey::Id("c1".into())].into());

    // c2's bundle was never remembered: when it goes, a relist neither
    // reads it by id nor reports it gone.
    world.lock().retain(|b| b["id"] != "b2");
    mock.take();
    assert!(m.poll(maestro::PollKind::Full).await);
    let reqs = mock.take();
    assert!(
        !reqs
            .iter()
            .any(|r| r.query.get("search").is_some_and(|s| s.contains("b2"))),
        "{reqs:?}"
    );
    assert!(gone_keys(&h.sink.take()).is_empty());
}

/// A shard knows another shard's bundle by its label and reads no further:
/// its status feedback never becomes views, so what the feedback holds
/// costs the shard nothing and is not even counted as unreadable
/// (docs/design/08-scopes-and-scale-out.md §8.3). Its `updated_at` still moves the next
/// incremental query's start.
#[tokio::test]
async fn a_shard_reads_another_shards_bundle_no_further_than_its_label() {
    use hcp_flow::metrics::exporter::UnknownValueLabels;
    let h = harness("maestro");
    let mut ctx = h.ctx.clone();
    ctx.sink = Arc::new(ShardSink {
        recorder: h.sink.clone(),
        followed: "c1",
    });
    // Both bundles' ManifestWork feedback is of a type hcp-flow cannot read.
    let unreadable = |id: &str, cluster: &str, updated: &str| {
        let mut b = maestro_bundle(id, cluster, updated, "True");
        b["status"]["resourceStatus"][0]["statusFeedback"]["values"][0]["fieldValue"]["type"] =
            json!("Bogus");
        b
    };
    let bundles = vec![
        unreadable("b1", "c1", "2026-06-10T23:00:00Z"),
        unreadable("b2", "c2", "2026-06-10T23:05:00Z"),
    ];
    let mock = Mock::start(move |req| maestro_list(req, &bundles)).await;
    let mut m = maestro_source(&mock.base, ctx);
    assert!(m.poll(maestro::PollKind::Full).await);
    let counted = h
        .metrics
        .unknown_values
        .get_or_create(&UnknownValueLabels {
            source: "maestro".into(),
            field: "statusFeedback.fieldValue.type".into(),
        })
        .get();
    assert_eq!(counted, 1, "only the followed bundle's feedback is read");
    // The newest update seen is c2's, though c2 is another shard's.
    assert_eq!(
        m.newest_updated_at().map(|t| t.to_string()),
        Some("2026-06-10T23:05:00Z".to_string())
    );
}
