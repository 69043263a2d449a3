//! Unit tests of node pool operations as the service side reads them
//! (docs/design/15b-operations.md §15.11): the RP's ARM `nodePools` and
//! Clusters Service's node pools, joined to the NodePool by name; a pool's
//! creation from the request to the last hop ready, its failures named where
//! they happened, the hints each reading gives the other hop, and the
//! cluster's history (§15.12). HyperShift's own view is in `pool_tests.rs`.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use super::operation_tests::{operation_events, ready_cluster};
use super::pool_tests::{in_flight, pool, waiting};
use super::testing::{Obs, batch, obs, rp};
use super::tests::{fleet, t};
use super::*;

/// Pool `name` as the RP reads it (ARM `nodePools`), requested at `created`.
pub(super) fn rp_pool(name: &str, state: &str, phase: Phase, created: jiff::Timestamp) -> Obs {
    obs("c1", Hop::RpFrontend)
        .object(name)
        .state(state, phase)
        .created(created)
}

/// Pool `name` as Clusters Service reads it, in `state` since `since`.
pub(super) fn cs_pool(name: &str, state: &str, phase: Phase, since: jiff::Timestamp) -> Obs {
    obs("c1", Hop::ClustersService)
        .object(name)
        .state(state, phase)
        .since(since)
}

#[test]
fn a_pool_requested_at_the_rp_is_one_creation_from_the_request_to_the_last_hop_ready() {
    let mut f = fleet();
    ready_cluster(&mut f);
    let rp_phase = f.get("c1").unwrap().phase(Hop::RpFrontend);

    // The ARM request at 30; Clusters Service installing from 31.
    let r = f.apply(
        batch(
            false,
            t(32),
            vec![
                rp_pool("np2", "Provisioning", Phase::Progressing, t(30)),
                cs_pool("np2", "installing", Phase::Progressing, t(31)),
            ],
        ),
        t(32),
    );
    assert_eq!(operation_events(&r.events), Vec::<String>::new());
    assert_eq!(in_flight(&f), ["c1/node_pool_create/np2"]);
    let timeline = f.get("c1").unwrap();
    assert_eq!(
        timeline.phase(Hop::RpFrontend),
        rp_phase,
        "a pool never moves the cluster's own RP phase"
    );
    let op = timeline
        .day2_operation(OperationKind::NodePoolCreate, Some("np2"))
        .unwrap();
    assert_eq!(op.started_at, TimeMark::upstream(t(30)));
    let at = timeline.waiting_of(op);
    assert_eq!(
        (at.hop, at.phase, at.state.map(|s| s.as_str())),
        (Hop::ClustersService, Phase::Progressing, Some("installing")),
        "the deepest hop not done"
    );

    // HyperShift's NodePool `<cluster>-np2` appears at 34: the same pool,
    // one operation, waiting at the NodePool now, keyed by the NodePool's
    // name from now on (the name a management instance reads too).
    f.apply(
        batch(
            false,
            t(35),
            vec![waiting("hc1-np2", t(34)).since(t(34)).replicas(2, 0, 0)],
        ),
        t(35),
    );
    assert_eq!(in_flight(&f), ["c1/node_pool_create/hc1-np2"]);
    let timeline = f.get("c1").unwrap();
    let op = timeline.day2_in_flight().next().unwrap();
    assert_eq!(
        op.started_at,
        TimeMark::upstream(t(30)),
        "the request's time"
    );
    assert_eq!(timeline.waiting_of(op).hop, Hop::NodePool);

    // The NodePool ready at 40, Clusters Service at 41: the RP still
    // provisioning, so still in flight, waiting there.
    let r = f.apply(
        batch(
            false,
            t(41),
            vec![
                pool("hc1-np2")
                    .state("AsExpected", Phase::Ready)
                    .created(t(34))
                    .since(t(40))
                    .replicas(2, 2, 2),
                cs_pool("np2", "ready", Phase::Ready, t(41)),
            ],
        ),
        t(41),
    );
    assert_eq!(
        operation_events(&r.events),
        [
            "node_pool_create hop node_pool succeeded 360s",
            "node_pool_create hop clusters_service succeeded 600s",
        ]
    );
    let timeline = f.get("c1").unwrap();
    let op = timeline.day2_in_flight().next().unwrap();
    assert_eq!(timeline.waiting_of(op).hop, Hop::RpFrontend);

    // The RP says Succeeded at 42: done, 12 minutes from the request.
    let r = f.apply(
        batch(
            false,
            t(43),
            vec![rp_pool("np2", "Succeeded", Phase::Ready, t(30)).since(t(42))],
        ),
        t(43),
    );
    assert_eq!(
        operation_events(&r.events),
        [
            "node_pool_create hop rp_frontend succeeded 720s",
            "node_pool_create ended succeeded 720s",
            "node_pool_create slo good",
        ]
    );
    let timeline = f.get("c1").unwrap();
    assert_eq!(in_flight(&f), Vec::<String>::new());
    assert!(
        timeline.pool_readings.is_none(),
        "settled pools are not kept"
    );
}

#[test]
fn a_pool_clusters_service_fails_fails_its_creation_there_and_stays_shown_failed() {
    let mut f = fleet();
    ready_cluster(&mut f);
    f.apply(
        batch(
            false,
            t(31),
            vec![rp_pool("np3", "Accepted", Phase::Pending, t(30))],
        ),
        t(31),
    );
    let r = f.apply(
        batch(
            false,
            t(33),
            vec![
                cs_pool("np3", "error", Phase::Failed, t(32)),
                rp_pool("np3", "Failed", Phase::Failed, t(30)).since(t(33)),
            ],
        ),
        t(33),
    );
    assert_eq!(
        operation_events(&r.events),
        [
            "node_pool_create hop clusters_service failed 120s",
            "node_pool_create ended failed 120s",
            "node_pool_create slo failed",
        ]
    );
    let timeline = f.get("c1").unwrap();
    let op = timeline
        .day2_operation(OperationKind::NodePoolCreate, Some("np3"))
        .unwrap();
    assert_eq!(op.outcome, OperationOutcome::Failed);
    assert_eq!(op.failed_hop, Some(Hop::ClustersService));
    assert_eq!(timeline.outcome, CreationOutcome::Succeeded);
    assert_eq!(timeline.phase(Hop::ClustersService), Some(Phase::Ready));

    // Removed: gone from both hops, nothing of it is kept.
    f.apply(
        batch(
            false,
            t(40),
            vec![
                rp_pool("np3", "", Phase::Ready, t(30)).gone(),
                cs_pool("np3", "", Phase::Ready, t(30)).gone(),
            ],
        ),
        t(40),
    );
    assert!(f.get("c1").unwrap().day2_operations.is_none());
}

/// The RP mirrors Clusters Service: read first, its `Failed` waits while
/// Clusters Service still installs the pool, and Clusters Service's
/// `error` names the failure, the root cause (docs/design/15b-operations.md §15.11).
#[test]
fn a_pool_failed_at_both_hops_names_clusters_service_whichever_is_read_first() {
    let failed_hop = |f: &Fleet, pool: &str| {
        f.get("c1")
            .unwrap()
            .day2_operation(OperationKind::NodePoolCreate, Some(pool))
            .filter(|op| op.outcome == OperationOutcome::Failed)
            .map(|op| op.failed_hop)
    };
    // Clusters Service installing when the RP's `Failed` comes.
    let mut f = fleet();
    ready_cluster(&mut f);
    f.apply(
        batch(
            false,
            t(31),
            vec![
                rp_pool("np3", "Accepted", Phase::Pending, t(30)),
                cs_pool("np3", "installing", Phase::Progressing, t(31)),
            ],
        ),
        t(31),
    );
    f.apply(
        batch(
            false,
            t(33),
            vec![rp_pool("np3", "Failed", Phase::Failed, t(30)).since(t(33))],
        ),
        t(33),
    );
    assert_eq!(failed_hop(&f, "np3"), None, "waits for Clusters Service");
    f.apply(
        batch(
            false,
            t(34),
            vec![cs_pool("np3", "error", Phase::Failed, t(32))],
        ),
        t(34),
    );
    assert_eq!(failed_hop(&f, "np3"), Some(Some(Hop::ClustersService)));

    // Clusters Service not read yet: the RP fails it, Clusters Service's
    // `error` renames the hop.
    let mut f = fleet();
    ready_cluster(&mut f);
    f.apply(
        batch(
            false,
            t(33),
            vec![rp_pool("np4", "Failed", Phase::Failed, t(30)).since(t(33))],
        ),
        t(33),
    );
    assert_eq!(failed_hop(&f, "np4"), Some(Some(Hop::RpFrontend)));
    f.apply(
        batch(
            false,
            t(34),
            vec![cs_pool("np4", "error", Phase::Failed, t(32))],
        ),
        t(34),
    );
    assert_eq!(failed_hop(&f, "np4"), Some(Some(Hop::ClustersService)));
}

#[test]
fn a_pool_removed_is_done_once_gone_from_every_hop_that_showed_it() {
    let mut f = fleet();
    ready_cluster(&mut f);
    f.apply(
        batch(
            true,
            t(20),
            vec![
                pool("hc1-np4")
                    .state("AsExpected", Phase::Ready)
                    .created(t(1))
                    .since(t(5))
                    .replicas(1, 1, 1),
            ],
        ),
        t(20),
    );
    // ARM's delete at 30 (the RP Deleting), Clusters Service uninstalling.
    f.apply(
        batch(
            false,
            t(31),
            vec![
                rp_pool("np4", "Deleting", Phase::Deleting, t(1)).since(t(30)),
                cs_pool("np4", "uninstalling", Phase::Deleting, t(30)),
            ],
        ),
        t(31),
    );
    assert_eq!(in_flight(&f), ["c1/node_pool_delete/hc1-np4"]);
    // The NodePool goes at 36, Clusters Service's at 37: the RP still shows it.
    let r = f.apply(
        batch(
            false,
            t(37),
            vec![
                pool("hc1-np4").gone(),
                cs_pool("np4", "", Phase::Deleting, t(30)).gone(),
            ],
        ),
        t(37),
    );
    assert_eq!(
        operation_events(&r.events),
        [
            "node_pool_delete hop node_pool succeeded 420s",
            "node_pool_delete hop clusters_service succeeded 420s",
        ]
    );
    assert_eq!(in_flight(&f), ["c1/node_pool_delete/hc1-np4"]);
    // The RP's 404 at 40: removed, 10 minutes.
    let r = f.apply(
        batch(
            false,
            t(40),
            vec![rp_pool("np4", "", Phase::Deleting, t(1)).gone()],
        ),
        t(40),
    );
    assert_eq!(
        operation_events(&r.events),
        [
            "node_pool_delete hop rp_frontend succeeded 600s",
            "node_pool_delete ended succeeded 600s",
            "node_pool_delete slo good",
        ]
    );
}

/// The hints `apply` gave for cluster `c1`, as (rp, clusters_service).
pub(super) fn hinted(r: &ApplyResult) -> Option<(bool, bool)> {
    r.pool_hints.get("c1").map(|h| (h.rp, h.clusters_service))
}

#[test]
fn a_pools_reading_hints_the_other_hop_only_with_news_for_it() {
    let mut f = fleet();
    ready_cluster(&mut f);

    // A NodePool appears: both the RP and Clusters Service are told.
    let r = f.apply(
        batch(false, t(31), vec![waiting("hc1-np2", t(30)).since(t(30))]),
        t(31),
    );
    assert_eq!(hinted(&r), Some((true, true)));

    // The RP reads it for the first time because of that hint: nothing new
    // for Clusters Service, told by the same NodePool already.
    let r = f.apply(
        batch(
            false,
            t(32),
            vec![rp_pool("np2", "Provisioning", Phase::Progressing, t(29))],
        ),
        t(32),
    );
    assert_eq!(hinted(&r), None);

    // Clusters Service reads it in the same phase: nothing new for the RP.
    let r = f.apply(
        batch(
            false,
            t(33),
            vec![cs_pool("np2", "installing", Phase::Progressing, t(29))],
        ),
        t(33),
    );
    assert_eq!(hinted(&r), None);

    // A pool no hop showed, taken by the RP before Clusters Service made a
    // bundle for it: news for Clusters Service.
    let r = f.apply(
        batch(
            false,
            t(34),
            vec![rp_pool("np3", "Accepted", Phase::Pending, t(34))],
        ),
        t(34),
    );
    assert_eq!(hinted(&r), Some((false, true)));

    // Clusters Service reads np3 installing while the RP still says
    // Accepted: news for the RP.
    let r = f.apply(
        batch(
            false,
            t(35),
            vec![cs_pool("np3", "installing", Phase::Progressing, t(35))],
        ),
        t(35),
    );
    assert_eq!(hinted(&r), Some((true, false)));

    // A pool settled at one hop tells the other nothing.
    let r = f.apply(
        batch(
            false,
            t(36),
            vec![cs_pool("np2", "ready", Phase::Ready, t(36))],
        ),
        t(36),
    );
    assert_eq!(hinted(&r), None);
}

#[test]
fn pools_in_flight_before_the_rp_id_is_known_are_hinted_to_the_rp_when_it_arrives() {
    let mut f = fleet();
    // Maestro's feedback shows the NodePool before any source named the
    // cluster's ARM resource: the hint for the RP has nowhere to go.
    let r = f.apply(
        batch(true, t(2), vec![waiting("hc1-np1", t(1)).since(t(1))]),
        t(2),
    );
    assert_eq!(hinted(&r), Some((true, true)));
    assert!(f.get("c1").unwrap().identity.resource_id.is_empty());
    // Clusters Service names the ARM resource: the RP is told now.
    let rid = "/subscriptions/s/resourcegroups/rg/providers/microsoft.redhatopenshift/hcpopenshiftclusters/hc1";
    let r = f.apply(
        batch(
            true,
            t(3),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("installing", Phase::Progressing)
                    .resource_id(rid),
            ],
        ),
        t(3),
    );
    assert_eq!(hinted(&r), Some((true, false)));
    // Named again: nothing new.
    let r = f.apply(
        batch(
            false,
            t(4),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("ready", Phase::Ready)
                    .resource_id(rid),
            ],
        ),
        t(4),
    );
    assert_eq!(hinted(&r), None);
}

#[test]
fn a_pool_the_rp_read_before_its_node_pool_appeared_starts_at_the_rps_time() {
    let mut f = fleet();
    ready_cluster(&mut f);
    // The RP reads the request at 31 (requested at 29) before any NodePool.
    f.apply(
        batch(
            false,
            t(31),
            vec![rp_pool("np2", "Provisioning", Phase::Progressing, t(29))],
        ),
        t(31),
    );
    // The NodePool appears at 33, created at 32.
    f.apply(
        batch(false, t(33), vec![waiting("hc1-np2", t(32)).since(t(32))]),
        t(33),
    );
    let timeline = f.get("c1").unwrap();
    let op = timeline
        .day2_operations()
        .find(|op| op.kind == OperationKind::NodePoolCreate)
        .unwrap();
    assert_eq!(op.started_at.at, t(29));
    assert_eq!(
        op.hop(Hop::NodePool).map(|h| h.started_at),
        Some(Stamp::from(t(32)))
    );
}

const RID: &str = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters/hc1";

/// Pool `name` as the RP reads it under the cluster's ARM id, before any
/// source has said which cluster that is.
fn rp_pool_by_rid(name: &str, created: jiff::Timestamp) -> Obs {
    rp(RID)
        .object(name)
        .state("Provisioning", Phase::Progressing)
        .created(created)
}

#[test]
fn a_pool_the_rp_read_before_clusters_service_joined_its_cluster_is_applied_at_the_join() {
    let mut f = fleet();
    // A restart: the RP's first list comes in before Clusters Service's,
    // with a pool requested at 15 and still provisioning.
    f.apply(
        batch(
            true,
            t(20),
            vec![
                rp(RID).state("Succeeded", Phase::Ready).created(t(0)),
                rp_pool_by_rid("np2", t(15)),
            ],
        ),
        t(20),
    );
    assert_eq!(f.held_pool_readings_len(), 1, "held until the join");
    // Clusters Service names the ARM resource; HyperShift's NodePool was
    // created at 16. The RP does not send the unchanged pool again.
    f.apply(
        batch(
            true,
            t(21),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("ready", Phase::Ready)
                    .created(t(0))
                    .since(t(9))
                    .resource_id(RID),
                obs("c1", Hop::HostedCluster)
                    .state("Available", Phase::Ready)
                    .since(t(9)),
                waiting("hc1-np2", t(16)).since(t(16)),
            ],
        ),
        t(21),
    );
    assert_eq!(f.held_pool_readings_len(), 0);
    assert_eq!(in_flight(&f), ["c1/node_pool_create/hc1-np2"]);
    let timeline = f.get("c1").unwrap();
    let op = timeline.day2_in_flight().next().unwrap();
    assert_eq!(op.started_at.at, t(15), "from the RP's request");
    assert_eq!(
        op.hop(Hop::RpFrontend).map(|h| h.started_at),
        Some(Stamp::from(t(15))),
        "the RP's hop of the pool"
    );
}

#[test]
fn a_pool_held_for_a_join_goes_with_its_rp_resource() {
    let mut f = fleet();
    f.apply(
        batch(false, t(20), vec![rp_pool_by_rid("np2", t(15))]),
        t(20),
    );
    // Read again: still one reading held, the newest.
    f.apply(
        batch(
            false,
            t(25),
            vec![rp_pool_by_rid("np2", t(15)).since(t(24))],
        ),
        t(25),
    );
    assert_eq!(f.held_pool_readings_len(), 1);
    let mut gone = rp(RID);
    gone.observation.change = Change::Gone;
    f.apply(batch(false, t(30), vec![gone]), t(30));
    assert_eq!(f.held_pool_readings_len(), 0);
}

/// A cluster's history (docs/design/15b-operations.md §15.12): its creation and the pool
/// added on day 2, each with its outcome, SLO verdict and hop times, kept
/// across a restart through the state store's memory.
#[test]
fn ended_operations_are_kept_in_the_history_and_survive_a_restart() {
    let mut f = fleet();
    ready_cluster(&mut f);
    f.apply(batch(false, t(21), vec![waiting("np-2", t(20))]), t(21));
    let ready = pool("np-2")
        .state("AsExpected", Phase::Ready)
        .created(t(20))
        .since(t(26))
        .replicas(2, 2, 2);
    f.apply(batch(false, t(27), vec![ready.clone()]), t(27));
    let history = |f: &Fleet| -> Vec<String> {
        f.get("c1")
            .unwrap()
            .history
            .entries()
            .into_iter()
            .map(|e| {
                let hops: Vec<String> = e
                    .hops
                    .iter()
                    .map(|h| {
                        let took = h.ended_at.map(|end| (end - h.started_at).get_seconds());
                        format!("{}:{took:?}", h.hop)
                    })
                    .collect();
                format!(
                    "{} {} {} {:?} {}s [{}]",
                    e.operation,
                    e.subject.as_deref().unwrap_or("-"),
                    e.outcome.as_str(),
                    e.slo,
                    (e.ended_at - e.started_at).get_seconds(),
                    hops.join(" ")
                )
            })
            .collect()
    };
    let want = vec![
        "create - succeeded Some(Good) 540s [clusters_service:Some(540) maestro_bundle:Some(0) hosted_cluster:Some(420)]"
            .to_string(),
        "node_pool_create np-2 succeeded Some(Good) 360s [node_pool:Some(360)]".to_string(),
    ];
    assert_eq!(history(&f), want);

    // A restart: the next run reads the cluster again and finds its
    // history where it was.
    let memory = super::restart_tests::memory_of(&f);
    let mut after = fleet();
    after.restore(memory);
    ready_cluster(&mut after);
    assert_eq!(history(&after), want);
}
