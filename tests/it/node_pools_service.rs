//! A node pool at the RP and Clusters Service (docs/design/15b-operations.md §15.11), read
//! the way ARO HCP serves it: stand-ins written from the ARM `nodePools`
//! example and Clusters Service's `NodePoolList` / `NodePoolStatus` schema,
//! holding only what the test puts in them, read by the real RP and
//! Clusters Service sources into the real store.
//!
//! - a pool requested at ARM is one `node_pool_create` from its
//!   `systemData.createdAt`, waiting at Clusters Service while it installs,
//!   done once every hop that read it is ready, with one SLO event;
//! - its removal is one `node_pool_delete`, done once the pool is gone
//!   from both;
//! - a pool Clusters Service puts in `error` fails its creation there;
//! - the pollers read a cluster's pools only when due: one request per
//!   source and cluster on a poll, none without the store's hints;
//! - a pool's upgrade, which its NodePool opens (read here from a
//!   Kubernetes stand-in serving HyperShift's fixture), times the RP's and
//!   Clusters Service's updates of the pool as its hops, dated by Clusters
//!   Service's `last_updated_timestamp`.

use std::sync::Arc;

use crate::common::hypershift::{self, entry, second};
use crate::common::kube::{eventually, harness_waiting_for};
use crate::common::standin::{Behaviour, StandIn};
use hcp_flow::config::{
    ClustersServiceApi, ClustersServiceConfig, HttpSourceConfig, RpFrontendConfig,
};
use hcp_flow::metrics::exposition::Format;
use hcp_flow::model::{Hop, Phase};
use hcp_flow::sim::kube::KubeApiServer;
use hcp_flow::sources::clusters_service::ClustersServiceSource;
use hcp_flow::sources::kube::KubeMode;
use hcp_flow::sources::poll::PollKind;
use hcp_flow::sources::rp_frontend::RpFrontendSource;
use hcp_flow::store::Store;
use jiff::{SignedDuration, Timestamp};
use parking_lot::Mutex;
use serde_json::{Value, json};
use url::Url;

const SUB: &str = "fdea43ea-0230-4a7d-bdee-f3aff2183b1d";
const CLUSTER_ID: &str = "2qrppk0otds3rdmdcojqcqkqq8f0s591";
const CLUSTER: &str = "hcp-cluster-1";

/// What the stand-ins serve of the cluster's pools.
#[derive(Default)]
struct Pools {
    arm: Vec<Value>,
    cs: Vec<Value>,
}

fn arm_cluster() -> Value {
    json!({
        "id": format!("/subscriptions/{SUB}/resourceGroups/rg-1/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters/{CLUSTER}"),
        "name": CLUSTER,
        "type": "Microsoft.RedHatOpenShift/hcpOpenShiftClusters",
        "location": "westus3",
        "systemData": {"createdAt": "2026-06-10T22:50:00Z"},
        "properties": {"provisioningState": "Succeeded", "version": {"id": "4.20", "channelGroup": "stable"}}
    })
}

/// An ARM nodePools resource as the reference example shapes it.
fn arm_pool(name: &str, state: &str, created: &str) -> Value {
    json!({
        "id": format!("/subscriptions/{SUB}/resourceGroups/rg-1/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters/{CLUSTER}/nodePools/{name}"),
        "name": name,
        "type": "Microsoft.RedHatOpenShift/hcpOpenShiftClusters/nodePools",
        "location": "westus3",
        "systemData": {"createdBy": "sre", "createdByType": "User", "createdAt": created, "lastModifiedAt": created},
        "properties": {
            "provisioningState": state,
            "version": {"channelGroup": "stable", "id": "4.20"},
            "platform": {"vmSize": "Standard_D2s_v3"},
            "replicas": 2,
        }
    })
}

fn cs_cluster() -> Value {
    json!({
        "kind": "Cluster", "id": CLUSTER_ID, "href": format!("/api/aro_hcp/v1alpha1/clusters/{CLUSTER_ID}"),
        "name": CLUSTER, "state": "ready",
        "status": {"state": "ready", "dns_ready": true},
        "creation_timestamp": "2026-06-10T22:50:00Z",
        "azure": {"subscription_id": SUB, "resource_group_name": "rg-1", "resource_name": CLUSTER}
    })
}

/// A Clusters Service node pool as its openapi schema names the fields.
fn cs_pool(id: &str, state: &str, since: &str, message: &str) -> Value {
    json!({
        "kind": "NodePool", "id": id,
        "href": format!("/api/aro_hcp/v1alpha1/clusters/{CLUSTER_ID}/node_pools/{id}"),
        "replicas": 2,
        "version": {"kind": "VersionLink", "id": "openshift-v4.20.2"},
        "azure_node_pool": {"resource_name": id, "vm_size": "Standard_D2s_v3"},
        "status": {
            "kind": "NodePoolStatus", "current_replicas": 0, "message": message,
            "state": {"kind": "NodePoolState", "value": state, "last_updated_timestamp": since}
        }
    })
}

fn answer(body: Value) -> Behaviour {
    Behaviour::Answer(200, body.to_string())
}

fn not_found() -> Behaviour {
    Behaviour::Answer(
        404,
        json!({"error": {"code": "ResourceNotFound", "message": "not found"}}).to_string(),
    )
}

struct Setup {
    store: Arc<Store>,
    rp: RpFrontendSource,
    cs: ClustersServiceSource,
    pools: Arc<Mutex<Pools>>,
    rp_standin: StandIn,
    cs_standin: StandIn,
}

fn http(base: &Url) -> HttpSourceConfig {
    let mut http = HttpSourceConfig::new(base.clone());
    // A turn of the pool rotation every poll of the test.
    http.fast_poll_interval = std::time::Duration::from_millis(1);
    http
}

async fn setup(with_hints: bool) -> Setup {
    setup_on(crate::common::store::default_store(), with_hints).await
}

/// The stand-ins and both pollers, reading into `store`.
async fn setup_on(store: Arc<Store>, with_hints: bool) -> Setup {
    crate::common::init();
    let pools: Arc<Mutex<Pools>> = Arc::default();
    let p = pools.clone();
    let rp_standin = StandIn::start(move |seen| {
        let path = seen.path().to_ascii_lowercase();
        if path.ends_with("/providers/microsoft.redhatopenshift/hcpopenshiftclusters") {
            answer(json!({"value": [arm_cluster()]}))
        } else if path.ends_with(&format!("/hcpopenshiftclusters/{CLUSTER}/nodepools")) {
            answer(json!({"value": p.lock().arm}))
        } else {
            not_found()
        }
    })
    .await;
    let p = pools.clone();
    let cs_standin = StandIn::start(move |seen| {
        let path = seen.path();
        let clusters = "/api/aro_hcp/v1alpha1/clusters";
        if path == clusters {
            answer(json!({"kind": "ClusterList", "page": 1, "size": 1, "total": 1, "items": [cs_cluster()]}))
        } else if path == format!("{clusters}/{CLUSTER_ID}/node_pools") {
            let items = p.lock().cs.clone();
            answer(json!({"kind": "NodePoolList", "page": 1, "size": items.len(), "total": items.len(), "items": items}))
        } else {
            Behaviour::Answer(
                404,
                json!({"kind": "Error", "id": "404", "href": "/api/aro_hcp/v1alpha1/errors/404", "code": "CLUSTERS-MGMT-404", "reason": "not found"}).to_string(),
            )
        }
    })
    .await;
    let ctx = |name: &str| store.source_context(name);
    let mut rp = RpFrontendSource::new(
        RpFrontendConfig {
            http: http(&rp_standin.base),
            api_version: "2024-06-10-preview".into(),
            subscriptions: vec![SUB.into()],
            resource_ids: vec![],
            // One poll's rotation: every poll reads the one cluster's pools
            // (nothing here moves a NodePool to hint them).
            node_pool_rotation: std::time::Duration::from_millis(1),
        },
        ctx("rp_frontend"),
    )
    .unwrap();
    let mut cs = ClustersServiceSource::new(
        ClustersServiceConfig {
            http: http(&cs_standin.base),
            api: ClustersServiceApi::AroHcpV1alpha1,
            search_scope: None,
            // One poll's rotation: every poll reads the one cluster's pools
            // (nothing here moves a NodePool to hint them).
            node_pool_rotation: std::time::Duration::from_millis(1),
        },
        ctx("clusters_service"),
    )
    .unwrap();
    if with_hints {
        rp = rp.with_pool_hints(store.pool_hints());
        cs = cs.with_pool_hints(store.pool_hints());
    }
    let mut setup = Setup {
        store,
        rp,
        cs,
        pools,
        rp_standin,
        cs_standin,
    };
    // The first sync: the cluster, no pool yet.
    setup.poll(PollKind::Full).await;
    setup
}

impl Setup {
    async fn poll(&mut self, kind: PollKind) {
        assert!(self.cs.poll(kind).await, "Clusters Service poll");
        assert!(self.rp.poll_all().await, "RP poll");
    }

    fn metrics(&self) -> String {
        self.store.scrape(Format::Text)
    }

    /// Requests made for node pools since the last call, per stand-in.
    fn pool_requests(&self) -> (usize, usize) {
        let count = |s: &StandIn, needle: &str| {
            s.take()
                .iter()
                .filter(|r| r.path().to_ascii_lowercase().ends_with(needle))
                .count()
        };
        (
            count(&self.rp_standin, "/nodepools"),
            count(&self.cs_standin, "/node_pools"),
        )
    }
}

/// The sum over every series of `family` carrying `labels`.
fn sum(text: &str, family: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn value(text: &str, family: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .find(|l| labels.iter().all(|want| l.contains(want)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn a_pool_requested_at_arm_is_one_creation_from_the_request_and_one_removal() {
    let mut s = setup(true).await;
    assert_eq!(
        s.pool_requests(),
        (1, 1),
        "the first sync reads the cluster's pools once"
    );

    // Requested at ARM at 23:00; Clusters Service installing since 23:01.
    {
        let mut pools = s.pools.lock();
        pools.arm = vec![arm_pool("np2", "Provisioning", "2026-06-10T23:00:00Z")];
        pools.cs = vec![cs_pool("np2", "installing", "2026-06-10T23:01:00Z", "")];
    }
    s.poll(PollKind::Fast).await;
    let text = s.metrics();
    let in_flight = ["operation=\"node_pool_create\"", "node_pool=\"np2\""];
    assert_eq!(
        value(&text, "hcpflow_operation_in_flight", &in_flight),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            "hcpflow_operation_started_timestamp_seconds",
            &in_flight
        ),
        Some(1_781_132_400.0),
        "from ARM's systemData.createdAt: {text}"
    );
    let waiting = [
        "operation=\"node_pool_create\"",
        "hop=\"clusters_service\"",
        "state=\"installing\"",
    ];
    assert_eq!(
        value(
            &text,
            "hcpflow_operation_waiting_since_timestamp_seconds",
            &waiting
        ),
        Some(1_781_132_460.0),
        "waiting at Clusters Service since its state's last_updated_timestamp: {text}"
    );
    assert_eq!(
        value(
            &text,
            "hcpflow_hop_phase",
            &["hop=\"rp_frontend\"", "phase=\"ready\""]
        ),
        Some(1.0),
        "a pool never moves the cluster's own RP phase"
    );

    // Ready at both.
    {
        let mut pools = s.pools.lock();
        pools.arm = vec![arm_pool("np2", "Succeeded", "2026-06-10T23:00:00Z")];
        pools.cs = vec![cs_pool("np2", "ready", "2026-06-10T23:09:00Z", "")];
    }
    s.poll(PollKind::Fast).await;
    let text = s.metrics();
    assert_eq!(
        value(&text, "hcpflow_operation_in_flight", &in_flight),
        None,
        "{text}"
    );
    let ended = ["operation=\"node_pool_create\"", "outcome=\"succeeded\""];
    assert_eq!(
        value(&text, "hcpflow_operation_duration_seconds_count", &ended),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sum(
            &text,
            "hcpflow_operation_slo_events_total",
            &["operation=\"node_pool_create\""]
        ),
        1.0,
        "one SLO event: {text}"
    );

    // Removed: Deleting at ARM, uninstalling at Clusters Service, then gone.
    {
        let mut pools = s.pools.lock();
        pools.arm = vec![arm_pool("np2", "Deleting", "2026-06-10T23:00:00Z")];
        pools.cs = vec![cs_pool("np2", "uninstalling", "2026-06-11T01:00:00Z", "")];
    }
    s.poll(PollKind::Fast).await;
    let removal = ["operation=\"node_pool_delete\"", "node_pool=\"np2\""];
    assert_eq!(
        value(&s.metrics(), "hcpflow_operation_in_flight", &removal),
        Some(1.0)
    );
    {
        let mut pools = s.pools.lock();
        pools.cs.clear();
    }
    s.poll(PollKind::Fast).await;
    assert_eq!(
        value(&s.metrics(), "hcpflow_operation_in_flight", &removal),
        Some(1.0),
        "the RP still shows it"
    );
    s.pools.lock().arm.clear();
    s.poll(PollKind::Fast).await;
    let text = s.metrics();
    assert_eq!(
        value(&text, "hcpflow_operation_in_flight", &removal),
        None,
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            "hcpflow_operation_duration_seconds_count",
            &["operation=\"node_pool_delete\"", "outcome=\"succeeded\""]
        ),
        Some(1.0),
        "{text}"
    );
}

#[tokio::test]
async fn a_pool_clusters_service_puts_in_error_fails_its_creation_there() {
    let mut s = setup(true).await;
    {
        let mut pools = s.pools.lock();
        pools.arm = vec![arm_pool("np3", "Accepted", "2026-06-10T23:00:00Z")];
        pools.cs = vec![cs_pool("np3", "validating", "2026-06-10T23:00:30Z", "")];
    }
    s.poll(PollKind::Fast).await;
    {
        let mut pools = s.pools.lock();
        pools.arm = vec![arm_pool("np3", "Failed", "2026-06-10T23:00:00Z")];
        pools.cs = vec![cs_pool(
            "np3",
            "error",
            "2026-06-10T23:02:00Z",
            "The subnet has no free address for the node pool",
        )];
    }
    s.poll(PollKind::Fast).await;
    let text = s.metrics();
    assert_eq!(
        value(
            &text,
            "hcpflow_operation_in_flight",
            &["operation=\"node_pool_create\""]
        ),
        None,
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            "hcpflow_operation_duration_seconds_count",
            &["operation=\"node_pool_create\"", "outcome=\"failed\""]
        ),
        Some(1.0),
        "one end, failed, though both hops report it: {text}"
    );
    assert_eq!(
        value(
            &text,
            "hcpflow_hop_duration_seconds_count",
            &[
                "operation=\"node_pool_create\"",
                "hop=\"clusters_service\"",
                "outcome=\"failed\""
            ]
        ),
        Some(1.0),
        "failed at clusters_service: {text}"
    );
}

#[tokio::test]
async fn without_the_stores_hints_the_pollers_read_no_node_pool() {
    let mut s = setup(false).await;
    s.pools.lock().arm = vec![arm_pool("np2", "Provisioning", "2026-06-10T23:00:00Z")];
    s.poll(PollKind::Fast).await;
    assert_eq!(s.pool_requests(), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_upgrade_times_the_rp_and_clusters_service_updating_the_pool() {
    const NAMESPACE: &str = "clusters";
    let now = second(Timestamp::now());
    let minutes_ago = |m: i64| now - SignedDuration::from_mins(m);
    let rfc3339 = |t: Timestamp| t.to_string();
    // A hub serving the cluster's HostedCluster (installed 4.20.2) and its
    // pool np1, ready; its `spec.clusterID` is Clusters Service's id.
    let (server, url) = KubeApiServer::start().await.expect("the stand-in serves");
    let created = minutes_ago(120);
    let pool_ready = minutes_ago(100);
    server
        .apply(hypershift::hosted_cluster(
            CLUSTER_ID,
            NAMESPACE,
            created,
            "4.20.2",
            vec![entry(
                "Completed",
                "4.20.2",
                created,
                Some(minutes_ago(105)),
            )],
        ))
        .expect("applied");
    server
        .apply(hypershift::node_pool(
            NAMESPACE, created, pool_ready, "4.20.2", None,
        ))
        .expect("applied");
    let mut h = harness_waiting_for("pool-upgrade-service", &["kube/hub"]);
    h.start(&[("hub", &url, KubeMode::SelfManaged)], |_| {})
        .await;
    eventually("the pool read", || {
        h.phase(CLUSTER_ID, Hop::NodePool) == Some(Phase::Ready)
    })
    .await;
    let mut s = setup_on(h.store.clone(), true).await;
    {
        let mut pools = s.pools.lock();
        pools.arm = vec![arm_pool("np1", "Succeeded", "2026-06-10T23:00:00Z")];
        pools.cs = vec![cs_pool("np1", "ready", &rfc3339(pool_ready), "")];
    }
    s.poll(PollKind::Fast).await;

    // The ARM PATCH of the pool: Clusters Service updating it since 21
    // minutes ago, the RP `Updating`. Neither names a version: no upgrade.
    let cs_began = minutes_ago(21);
    {
        let mut pools = s.pools.lock();
        pools.arm = vec![arm_pool("np1", "Updating", "2026-06-10T23:00:00Z")];
        pools.cs = vec![cs_pool("np1", "updating", &rfc3339(cs_began), "")];
    }
    s.poll(PollKind::Fast).await;
    let upgrade = [
        "operation=\"node_pool_upgrade\"",
        "node_pool=\"np1\"",
        "target_version=\"4.20.5\"",
    ];
    assert_eq!(
        value(&s.metrics(), "hcpflow_operation_in_flight", &upgrade),
        None
    );

    // HyperShift begins rolling the pool out to 4.20.5 20 minutes ago: one
    // upgrade, from Clusters Service's earlier upstream time, waiting at
    // the NodePool.
    server
        .apply(hypershift::node_pool(
            NAMESPACE,
            created,
            pool_ready,
            "4.20.2",
            Some(("4.20.5", minutes_ago(20))),
        ))
        .expect("applied");
    eventually("the pool's upgrade in flight", || {
        value(&s.metrics(), "hcpflow_operation_in_flight", &upgrade) == Some(1.0)
    })
    .await;
    let text = s.metrics();
    assert_eq!(
        value(
            &text,
            "hcpflow_operation_started_timestamp_seconds",
            &upgrade[..2]
        ),
        Some(cs_began.as_second() as f64),
        "from Clusters Service's last_updated_timestamp: {text}"
    );
    assert_eq!(
        value(
            &text,
            "hcpflow_operation_waiting_since_timestamp_seconds",
            &["operation=\"node_pool_upgrade\"", "hop=\"node_pool\""]
        ),
        Some(minutes_ago(20).as_second() as f64),
        "waiting at the NodePool since its UpdatingVersion: {text}"
    );

    // Rolled out two minutes ago: the upgrade ends; the RP and Clusters
    // Service still update the pool.
    server
        .apply(hypershift::node_pool(
            NAMESPACE,
            created,
            minutes_ago(2),
            "4.20.5",
            None,
        ))
        .expect("applied");
    let ended = ["operation=\"node_pool_upgrade\"", "outcome=\"succeeded\""];
    eventually("the pool's upgrade ended", || {
        value(
            &s.metrics(),
            "hcpflow_operation_duration_seconds_count",
            &ended,
        ) == Some(1.0)
    })
    .await;
    let service_hop = |text: &str, hop: &str| {
        value(
            text,
            "hcpflow_hop_duration_seconds_count",
            &[
                "operation=\"node_pool_upgrade\"",
                &format!("hop=\"{hop}\""),
                "outcome=\"succeeded\"",
            ],
        )
    };
    let text = s.metrics();
    assert_eq!(service_hop(&text, "node_pool"), Some(1.0), "{text}");
    assert_eq!(service_hop(&text, "clusters_service"), None, "{text}");

    // Both read the pool ready again a minute ago: each part is timed, once.
    {
        let mut pools = s.pools.lock();
        pools.arm = vec![arm_pool("np1", "Succeeded", "2026-06-10T23:00:00Z")];
        pools.cs = vec![cs_pool("np1", "ready", &rfc3339(minutes_ago(1)), "")];
    }
    s.poll(PollKind::Fast).await;
    let text = s.metrics();
    assert_eq!(service_hop(&text, "clusters_service"), Some(1.0), "{text}");
    assert_eq!(service_hop(&text, "rp_frontend"), Some(1.0), "{text}");
    assert_eq!(
        sum(
            &text,
            "hcpflow_operation_slo_events_total",
            &["operation=\"node_pool_upgrade\""]
        ),
        1.0,
        "one SLO event: {text}"
    );
    assert_eq!(
        sum(
            &text,
            "hcpflow_operation_duration_seconds_count",
            &["operation=\"node_pool_create\""]
        ),
        0.0,
        "the pool's update is no creation: {text}"
    );
    drop(server);
}
