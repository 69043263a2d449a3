//! Unit tests of node pool operations (docs/design/15-operations.md §15.9): each pool's
//! creation and removal is an operation of its own, keyed by the pool's
//! name, with upstream times, one SLO event, and no verdict on a cluster's
//! finished creation.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use super::operation_tests::{operation_events, ready_cluster};
use super::testing::{Obs, batch, obs, rp};
use super::tests::{fleet, t};
use super::*;

fn pool(name: &str) -> Obs {
    obs("c1", Hop::NodePool).object(name)
}

/// A pool waiting for its machines, created at `created`.
fn waiting(name: &str, created: jiff::Timestamp) -> Obs {
    pool(name)
        .state("WaitingForAvailableMachines", Phase::Progressing)
        .created(created)
}

fn in_flight(f: &Fleet) -> Vec<String> {
    f.get("c1")
        .unwrap()
        .day2_operations()
        .map(|op| op.key("c1"))
        .collect()
}

#[test]
fn a_day_two_pool_is_one_creation_from_its_creation_time_to_ready() {
    let mut f = fleet();
    ready_cluster(&mut f);
    assert_eq!(f.get("c1").unwrap().outcome, CreationOutcome::Succeeded);

    // Added at 30, seen at 31, its machines not ready yet.
    let r = f.apply(
        batch(
            false,
            t(31),
            vec![waiting("np-2", t(30)).since(t(30)).replicas(2, 0, 0)],
        ),
        t(31),
    );
    assert_eq!(operation_events(&r.events), Vec::<String>::new());
    assert_eq!(in_flight(&f), ["c1/node_pool_create/np-2"]);
    let op = f
        .get("c1")
        .unwrap()
        .day2_operation(OperationKind::NodePoolCreate, Some("np-2"))
        .unwrap();
    assert_eq!(op.started_at, TimeMark::upstream(t(30)));
    assert_eq!(
        f.get("c1").unwrap().outcome,
        CreationOutcome::Succeeded,
        "the cluster's creation stays done"
    );

    // Ready at 38: done there, 8 minutes, within the 20-minute target.
    let r = f.apply(
        batch(
            false,
            t(39),
            vec![
                pool("np-2")
                    .state("AsExpected", Phase::Ready)
                    .created(t(30))
                    .since(t(38))
                    .replicas(2, 2, 2),
            ],
        ),
        t(39),
    );
    assert_eq!(
        operation_events(&r.events),
        [
            "node_pool_create hop node_pool succeeded 480s",
            "node_pool_create ended succeeded 480s",
            "node_pool_create slo good",
        ]
    );
    assert!(r.events.iter().all(|e| match e {
        Event::HopEnded { subject, .. }
        | Event::OperationEnded { subject, .. }
        | Event::Slo { subject, .. } => subject.as_deref() == Some("np-2"),
        Event::ClusterRemoved { .. } => false,
    }));
    assert!(
        f.get("c1").unwrap().day2_operations.is_none(),
        "an ended operation is not kept"
    );
}

#[test]
fn a_pool_that_never_gets_nodes_is_late_at_its_target_and_stuck_alone() {
    let mut f = fleet();
    ready_cluster(&mut f);
    f.apply(
        batch(
            false,
            t(31),
            vec![
                pool("np-2")
                    .state("ignition_not_reached", Phase::Progressing)
                    .created(t(30))
                    .since(t(30)),
            ],
        ),
        t(31),
    );
    // One minute before the target: nothing; at it: late, once.
    assert!(f.tick(t(49)).events.is_empty());
    let r = f.tick(t(50));
    assert_eq!(operation_events(&r.events), ["node_pool_create slo late"]);
    assert!(f.tick(t(80)).events.is_empty());
    assert_eq!(in_flight(&f), ["c1/node_pool_create/np-2"]);
    // Its NodePool fails: the operation fails, already counted late.
    let r = f.apply(
        batch(
            false,
            t(81),
            vec![
                pool("np-2")
                    .state("ValidPlatformImage", Phase::Failed)
                    .created(t(30))
                    .since(t(81)),
            ],
        ),
        t(81),
    );
    assert_eq!(
        operation_events(&r.events),
        [
            "node_pool_create hop node_pool failed 3060s",
            "node_pool_create ended failed 3060s",
        ]
    );
}

#[test]
fn a_pool_removal_runs_from_its_deletion_timestamp_until_it_is_gone() {
    let mut f = fleet();
    ready_cluster(&mut f);
    // np-1 was there, ready, before anything was watched: no creation.
    f.apply(
        batch(
            true,
            t(20),
            vec![
                pool("np-1")
                    .state("AsExpected", Phase::Ready)
                    .created(t(1))
                    .since(t(8)),
            ],
        ),
        t(20),
    );
    assert!(f.get("c1").unwrap().day2_operations.is_none());
    let r = f.apply(
        batch(
            false,
            t(41),
            vec![
                pool("np-1")
                    .state("deleting", Phase::Deleting)
                    .created(t(1))
                    .since(t(40)),
            ],
        ),
        t(41),
    );
    assert_eq!(operation_events(&r.events), Vec::<String>::new());
    assert_eq!(in_flight(&f), ["c1/node_pool_delete/np-1"]);
    // Another object of the hop keeps the hop, this one goes at 45.
    let r = f.apply(batch(false, t(45), vec![pool("np-1").gone()]), t(45));
    assert_eq!(
        operation_events(&r.events),
        [
            "node_pool_delete hop node_pool succeeded 300s",
            "node_pool_delete ended succeeded 300s",
            "node_pool_delete slo good",
        ]
    );
    assert!(in_flight(&f).is_empty());
    assert!(f.get("c1").is_some(), "the cluster stays");
}

#[test]
fn the_clusters_deletion_ends_its_pools_operations_without_a_verdict() {
    let mut f = fleet();
    ready_cluster(&mut f);
    f.apply(batch(false, t(31), vec![waiting("np-2", t(30))]), t(31));
    let r = f.apply(
        batch(
            false,
            t(33),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("uninstalling", Phase::Deleting)
                    .since(t(32)),
            ],
        ),
        t(33),
    );
    assert_eq!(operation_events(&r.events), Vec::<String>::new());
    assert!(
        f.get("c1").unwrap().day2_operations.is_none(),
        "ended by the cluster's deletion"
    );
    // Its target passes: no late event for an operation the deletion ended.
    assert!(f.tick(t(60)).events.iter().all(|e| !matches!(
        e,
        Event::Slo {
            operation: OperationKind::NodePoolCreate,
            ..
        }
    )));
    // A pool turning deleting with its cluster is the cluster's deletion.
    f.apply(
        batch(
            false,
            t(61),
            vec![pool("np-2").state("deleting", Phase::Deleting).since(t(61))],
        ),
        t(61),
    );
    assert!(in_flight(&f).is_empty());
}

#[test]
fn a_first_sync_follows_every_pool_in_flight_and_counts_no_end_it_could_not_have_watched() {
    let mut f = fleet();
    ready_cluster(&mut f);
    f.apply(
        batch(
            true,
            t(100),
            vec![waiting("young", t(95)), waiting("old", t(10))],
        ),
        t(100),
    );
    // Both are named (one stuck for an SRE to see), ...
    assert_eq!(
        in_flight(&f),
        ["c1/node_pool_create/young", "c1/node_pool_create/old"]
    );
    let old = f
        .get("c1")
        .unwrap()
        .day2_operation(OperationKind::NodePoolCreate, Some("old"))
        .unwrap()
        .clone();
    assert_eq!(old.slo, Some(SloOutcome::Late), "late, without a word");
    assert!(old.uncounted);
    // ... the old one's verdict is not counted, the young one's is, at its
    // target.
    assert_eq!(
        operation_events(&f.tick(t(115)).events),
        ["node_pool_create slo late"]
    );
    let ready = |name: &str, created| {
        pool(name)
            .state("AsExpected", Phase::Ready)
            .created(created)
            .since(t(120))
    };
    let r = f.apply(batch(false, t(121), vec![ready("old", t(10))]), t(121));
    assert_eq!(
        operation_events(&r.events),
        [
            "node_pool_create hop node_pool succeeded 6600s",
            "node_pool_create ended succeeded 6600s",
        ]
    );
    // Its hop was read directly and ended after the first sync: timed, as
    // every hop read directly is (docs/design/08-scopes-and-scale-out.md §8.2); its end is not
    // counted, for nobody here watched it begin.
    assert!(
        r.events.iter().all(|e| match e {
            Event::HopEnded { counted, .. } => *counted,
            Event::OperationEnded { counted, .. } => !counted,
            _ => false,
        }),
        "hop timed, operation ended and traced but not counted: {:?}",
        r.events
    );
    let r = f.apply(batch(false, t(122), vec![ready("young", t(95))]), t(122));
    assert!(
        r.events
            .iter()
            .any(|e| matches!(e, Event::OperationEnded { counted: true, .. }))
    );
}

#[test]
fn a_restart_goes_on_with_a_pools_creation_and_ends_it_once() {
    let mut f = fleet();
    ready_cluster(&mut f);
    let progressing = || waiting("np-2", t(30)).since(t(30));
    f.apply(batch(false, t(31), vec![progressing()]), t(31));
    // Late before the restart: counted once, then.
    assert_eq!(
        operation_events(&f.tick(t(50)).events),
        ["node_pool_create slo late"]
    );
    let memory = super::edge_tests::memory_of(&f);

    let mut again = fleet();
    again.restore(memory);
    again.begin_load(t(55));
    ready_cluster(&mut again);
    again.apply(batch(true, t(55), vec![progressing()]), t(55));
    let r = again.finish_load(t(56));
    assert!(r.events.is_empty(), "{:?}", r.events);
    let op = again
        .get("c1")
        .unwrap()
        .day2_operation(OperationKind::NodePoolCreate, Some("np-2"))
        .unwrap();
    assert_eq!(op.started_at, TimeMark::upstream(t(30)));
    assert_eq!(op.slo, Some(SloOutcome::Late));
    let r = again.apply(
        batch(
            false,
            t(60),
            vec![
                pool("np-2")
                    .state("AsExpected", Phase::Ready)
                    .created(t(30))
                    .since(t(59)),
            ],
        ),
        t(60),
    );
    assert_eq!(
        operation_events(&r.events),
        [
            "node_pool_create hop node_pool succeeded 1740s",
            "node_pool_create ended succeeded 1740s",
        ],
        "its end once, its verdict not again"
    );
    assert!(again.get("c1").unwrap().day2_operations.is_none());
}

// ---- the RP's and Clusters Service's pools (docs/design/15b-operations.md §15.11) -----

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
    let memory = super::edge_tests::memory_of(&f);
    let mut after = fleet();
    after.restore(memory);
    ready_cluster(&mut after);
    assert_eq!(history(&after), want);
}
