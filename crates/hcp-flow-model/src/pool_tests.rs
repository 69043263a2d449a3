//! Unit tests of node pool operations (docs/design/15-operations.md §15.9): each pool's
//! creation and removal is an operation of its own, keyed by the pool's
//! name, with upstream times, one SLO event, and no verdict on a cluster's
//! finished creation.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use super::operation_tests::{operation_events, ready_cluster};
use super::testing::{Obs, batch, obs};
use super::tests::{fleet, t};
use super::*;

pub(super) fn pool(name: &str) -> Obs {
    obs("c1", Hop::NodePool).object(name)
}

/// A pool waiting for its machines, created at `created`.
pub(super) fn waiting(name: &str, created: jiff::Timestamp) -> Obs {
    pool(name)
        .state("WaitingForAvailableMachines", Phase::Progressing)
        .created(created)
}

pub(super) fn in_flight(f: &Fleet) -> Vec<String> {
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
    let memory = super::restart_tests::memory_of(&f);

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
