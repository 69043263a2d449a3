#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use jiff::Timestamp;

use super::fleet::{self, ListQuery, QueryError, Sort};
use super::verdict::Status;
use super::*;
use crate::metrics::fleet::RenderConfig;
use crate::model::testing::{batch, obs};
use crate::model::{CreationOutcome, ModelConfig, Phase};
use crate::store::StoreConfig;

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn store() -> Arc<Store> {
    Store::new(StoreConfig {
        model: ModelConfig::default(),
        render: RenderConfig::default(),
        time_scale: 1.0,
        sources: vec![],
        // Judged five minutes after the creations below started.
        clock: crate::clock::Clock::manual(t("2026-01-01T00:05:00Z")),
    })
}

fn query(s: &str) -> Result<ListQuery, QueryError> {
    ListQuery::parse(url::form_urlencoded::parse(s.as_bytes()))
}

/// Three creations: one waiting for its HostedCluster, one whose Clusters
/// Service failed, one complete.
fn fleet_of_three() -> Arc<Store> {
    let store = store();
    let t0 = t("2026-01-01T00:00:00Z");
    store.apply_at(
        batch(
            false,
            t0,
            vec![
                obs("a", Hop::ClustersService)
                    .state("installing", Phase::Progressing)
                    .created(t("2026-01-01T00:00:00Z"))
                    .name("alpha"),
                obs("a", Hop::MaestroBundle)
                    .state("Applied", Phase::Ready)
                    .created(t("2026-01-01T00:01:00Z")),
                obs("a", Hop::HostedCluster)
                    .state("Progressing", Phase::Progressing)
                    .created(t("2026-01-01T00:02:00Z")),
                obs("a", Hop::NodePool).state("", Phase::Pending),
                obs("b", Hop::ClustersService)
                    .state("error", Phase::Failed)
                    .created(t("2026-01-01T00:03:00Z"))
                    .error("OCM4001", "quota exceeded")
                    .name("beta"),
                obs("c", Hop::ClustersService)
                    .state("ready", Phase::Ready)
                    .created(t("2025-12-31T23:00:00Z")),
                obs("c", Hop::HostedCluster)
                    .state("Available", Phase::Ready)
                    .created(t("2025-12-31T23:01:00Z")),
            ],
        ),
        t0,
    );
    store
}

#[test]
fn a_creation_stands_where_its_verdict_says() {
    let store = fleet_of_three();
    let rows = rows(&store);
    let by_id = |id: &str| rows.iter().find(|r| r.cluster_id == id).unwrap();
    // The deepest hop not ready (docs/design/03-timeline-model.md §3.9).
    assert_eq!(by_id("a").hop, Some(Hop::NodePool));
    assert_eq!(by_id("a").phase, Some(Phase::Pending));
    assert_eq!(by_id("a").verdict.hop, Some(Hop::NodePool));
    // Complete: the furthest hop seen.
    assert_eq!(by_id("c").hop, Some(Hop::HostedCluster));
    assert_eq!(by_id("c").status, Status::Ready);
    assert_eq!(by_id("a").status, Status::InProgress);
    assert_eq!(by_id("b").hop, Some(Hop::ClustersService));
    assert_eq!(by_id("b").phase, Some(Phase::Failed));
    assert_eq!(by_id("b").status, Status::Failed);
    assert_eq!(by_id("b").error.as_ref().unwrap().code, "OCM4001");
}

#[test]
fn the_summary_counts_in_flight_creations_once_at_their_hop() {
    let store = fleet_of_three();
    let rows = rows(&store);
    let summary = fleet::summary(
        &rows,
        &store.hop_budgets(),
        1200.0,
        vec![],
        t("2026-01-01T00:05:00Z"),
    );
    let in_flight = rows
        .iter()
        .filter(|r| r.outcome == CreationOutcome::InFlight)
        .count();
    let counted: usize = summary.funnel.values().flat_map(|m| m.values()).sum();
    assert_eq!(counted, in_flight);
    assert_eq!(summary.funnel["node_pool"]["pending"], 1);
    assert_eq!(summary.outcomes["failed"], 1);
    assert_eq!(summary.status.len(), super::verdict::STATUSES.len());
    assert_eq!(summary.hop_budgets_seconds["maestro_bundle"], 600.0);
    assert_eq!(summary.hops.len(), Hop::ALL.len());
}

#[test]
fn the_list_filters_sorts_and_pages_on_the_server() {
    let store = fleet_of_three();
    let all = fleet::list(&rows(&store), &ListQuery::default());
    assert_eq!(all.total, 3);
    // Oldest first.
    assert_eq!(all.items[0].cluster_id, "c");

    let failed = fleet::list(&rows(&store), &query("outcome=failed").unwrap());
    assert_eq!(failed.total, 1);
    assert_eq!(failed.items[0].cluster_id, "b");

    let page = fleet::list(&rows(&store), &query("limit=1&offset=1&sort=-age").unwrap());
    assert_eq!((page.total, page.items.len()), (3, 1));
    assert_eq!(page.items[0].cluster_id, "a");

    let found = fleet::list(&rows(&store), &query("q=ALPHA&in_flight=true").unwrap());
    assert_eq!(found.total, 1);
    let at = fleet::list(
        &rows(&store),
        &query("hop=node_pool&phase=pending").unwrap(),
    );
    assert_eq!(at.items.len(), 1);
    assert_eq!(at.items[0].cluster_id, "a");
}

#[test]
fn a_bad_parameter_says_what_it_takes() {
    assert_eq!(query("hop=&q=").unwrap(), ListQuery::default());
    assert_eq!(query("sort=at_hop").unwrap().sort, Sort::AtHop);
    assert!(matches!(query("colour=red"), Err(QueryError::Unknown(k)) if k == "colour"));
    let err = query("hop=nowhere").unwrap_err().to_string();
    assert!(err.contains("node_pool"), "{err}");
    assert!(query("limit=0").is_err());
    assert!(query("limit=100000").is_err());
    assert!(query("in_flight=maybe").is_err());
    assert!(query("status=stuck").is_ok());
}

#[test]
fn links_fill_the_trace_id_and_keep_grafanas_sub_path() {
    assert_eq!(
        trace_url(Some("https://jaeger.example/trace/{trace_id}"), "abc").as_deref(),
        Some("https://jaeger.example/trace/abc")
    );
    assert_eq!(trace_url(None, "abc"), None);
    let base = url::Url::parse("https://grafana.example/monitoring/").unwrap();
    assert_eq!(
        grafana_cluster_url(Some(&base), "ns/name:1").as_deref(),
        Some("https://grafana.example/monitoring/d/hcp-flow-cluster?var-cluster_id=ns%2Fname%3A1")
    );
}

#[test]
fn the_dashboard_uid_is_the_cluster_dashboards() {
    let dashboard: serde_json::Value =
        serde_json::from_str(include_str!("../../dashboards/hcp-flow-cluster.json")).unwrap();
    assert_eq!(dashboard["uid"], GRAFANA_CLUSTER_DASHBOARD_UID);
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    let name = GRAFANA_CLUSTER_VARIABLE.trim_start_matches("var-");
    assert!(variables.iter().any(|v| v["name"] == name));
}

#[test]
fn settings_cannot_close_their_script_element() {
    let json = script_json(r#"{"cluster_id":"</script><script>alert(1)</script>"}"#);
    assert!(!json.contains("</script"), "{json}");
    let back: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(back["cluster_id"], "</script><script>alert(1)</script>");
}

#[test]
fn pages_carry_their_settings_and_every_asset_they_load_is_served() {
    for page in [FLEET_HTML, CLUSTER_HTML] {
        assert!(page.contains(SETTINGS_MARK));
        for asset in ["style.css", "common.js"] {
            assert!(page.contains(&format!("/ui/assets/{asset}")), "{asset}");
        }
        assert!(!page.contains("http://") && !page.contains("https://"));
    }
}

/// A completed cluster being deleted stands in the delete funnel at the
/// first hop of the deletion's flow still deleting, and the list filters
/// by operation in flight.
#[test]
fn deletions_have_their_own_funnel_and_filter() {
    let store = fleet_of_three();
    store.apply_at(
        batch(
            false,
            t("2026-01-01T00:04:00Z"),
            vec![
                obs("c", Hop::ClustersService)
                    .state("uninstalling", Phase::Deleting)
                    .since(t("2026-01-01T00:04:00Z")),
                obs("c", Hop::HostedCluster)
                    .state("deleting", Phase::Deleting)
                    .since(t("2026-01-01T00:04:00Z")),
            ],
        ),
        t("2026-01-01T00:04:00Z"),
    );
    let rows = rows(&store);
    let c = rows.iter().find(|r| r.cluster_id == "c").unwrap();
    assert_eq!(c.operation, Some(crate::model::OperationKind::Delete));
    assert_eq!(c.hop, Some(Hop::HostedCluster));
    assert_eq!(
        c.verdict.operation,
        Some(crate::model::OperationKind::Delete)
    );
    assert_eq!(c.budget_seconds, Some(1800.0), "the deletion's budget");
    let summary = fleet::summary(
        &rows,
        &store.hop_budgets(),
        1200.0,
        vec![],
        t("2026-01-01T00:05:00Z"),
    );
    assert_eq!(summary.in_flight["delete"], 1);
    assert_eq!(summary.in_flight["create"], 1);
    assert_eq!(summary.funnels["delete"]["hosted_cluster"]["deleting"], 1);
    assert_eq!(summary.funnels["create"], summary.funnel);
    let deleting = fleet::list(&rows, &query("operation=delete").unwrap());
    assert_eq!(deleting.total, 1);
    assert_eq!(deleting.items[0].cluster_id, "c");
    assert!(matches!(
        query("operation=reboot"),
        Err(QueryError::Value {
            param: "operation",
            ..
        })
    ));
}

/// A completed cluster whose day-2 pool never gets its nodes: the cluster
/// reads as its own operations say, the pool's creation is stuck on its
/// own, counted under its kind, in its funnel, and listed as it stands.
#[test]
fn a_day_two_pools_creation_is_judged_counted_and_listed_on_its_own() {
    let store = fleet_of_three();
    store.apply_at(
        batch(
            false,
            t("2025-12-31T23:30:00Z"),
            vec![
                obs("c", Hop::NodePool)
                    .object("np-2")
                    .state("ignitionNotReached", Phase::Progressing)
                    .created(t("2025-12-31T23:30:00Z"))
                    .since(t("2025-12-31T23:30:00Z"))
                    .replicas(2, 0, 0),
            ],
        ),
        t("2025-12-31T23:30:00Z"),
    );
    let rows = rows(&store);
    let c = rows.iter().find(|r| r.cluster_id == "c").unwrap();
    assert_eq!(c.operation, None, "no cluster operation in flight");
    assert_eq!(c.day2.len(), 1, "{:#?}", c.day2);
    let pool = &c.day2[0];
    assert_eq!(pool.operation, crate::model::OperationKind::NodePoolCreate);
    assert_eq!(pool.node_pool.as_deref(), Some("np-2"));
    // 35 minutes at its NodePool, past the 30-minute budget.
    assert_eq!(pool.verdict.status, Status::Stuck);
    assert_eq!(pool.verdict.hop, Some(Hop::NodePool));
    assert_eq!(pool.verdict.budget_seconds, Some(1800.0));
    assert!(
        pool.verdict
            .reason
            .starts_with("node_pool_create of node pool np-2 stuck at node_pool for 35m"),
        "{}",
        pool.verdict.reason
    );
    let summary = fleet::summary(
        &rows,
        &store.hop_budgets(),
        1200.0,
        vec![],
        t("2026-01-01T00:05:00Z"),
    );
    // Cluster a's pool, coming with its creation, is one too, not stuck.
    assert_eq!(summary.in_flight["node_pool_create"], 2);
    assert_eq!(summary.stuck_operations["node_pool_create"], 1);
    assert_eq!(summary.stuck_operations["upgrade"], 0);
    assert_eq!(
        summary.funnels["node_pool_create"]["node_pool"]["progressing"],
        1
    );
    let listed = fleet::list(&rows, &query("operation=node_pool_create").unwrap());
    assert_eq!(listed.total, 2);
    let stuck = fleet::list(
        &rows,
        &query("operation=node_pool_create&status=stuck").unwrap(),
    );
    assert_eq!(stuck.total, 1);
    assert_eq!(stuck.items[0].cluster_id, "c");
    assert_eq!(stuck.items[0].hop, Some(Hop::NodePool));
    assert_eq!(stuck.items[0].budget_seconds, Some(1800.0));
    assert_eq!(
        fleet::list(&rows, &query("operation=upgrade").unwrap()).total,
        0
    );
    // The cluster reads as its worst operation in flight, the pool's
    // stuck creation, named as that operation (docs/design/15-operations.md §15.7).
    assert_eq!(c.status, Status::Stuck);
    assert_eq!(
        c.verdict.operation,
        Some(crate::model::OperationKind::NodePoolCreate)
    );
}

/// A NodePool that moves tells the RP's and Clusters Service's pool reads
/// which cluster to read (docs/design/15b-operations.md §15.11); a first sync's ready
/// pools do not.
#[test]
fn a_node_pool_that_moves_hints_its_clusters_pools_to_the_rp_and_clusters_service() {
    let store = store();
    let t0 = t("2026-01-01T00:00:00Z");
    store.apply_at(
        batch(
            true,
            t0,
            vec![
                obs("a", Hop::ClustersService)
                    .state("ready", Phase::Ready)
                    .resource_id("/subscriptions/s/resourcegroups/rg/providers/microsoft.redhatopenshift/hcpopenshiftclusters/a"),
                obs("a", Hop::NodePool).object("a-np1").state("Ready", Phase::Ready),
            ],
        ),
        t0,
    );
    let hints = store.pool_hints();
    assert!(
        hints.take_cs().is_empty(),
        "a settled first sync hints nothing"
    );
    store.apply_at(
        batch(
            false,
            t0,
            vec![
                obs("a", Hop::NodePool)
                    .object("a-np2")
                    .state("WaitingForAvailableMachines", Phase::Progressing),
            ],
        ),
        t0,
    );
    assert_eq!(hints.take_cs(), ["a"]);
    assert_eq!(
        hints.take_rp(),
        [
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.redhatopenshift/hcpopenshiftclusters/a"
        ]
    );
}
