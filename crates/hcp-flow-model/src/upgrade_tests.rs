//! Unit tests of upgrades (docs/design/15-operations.md §15.10): a control plane's and
//! each node pool's upgrade is an operation keyed by its target version,
//! dated by HyperShift's own times, with one SLO event.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use super::operation_tests::{operation_events, ready_cluster};
use super::pool_service_tests::hinted;
use super::testing::{Obs, batch, obs};
use super::tests::{fleet, t};
use super::*;

pub(super) fn hosted_cluster() -> Obs {
    obs("c1", Hop::HostedCluster).state("Available/Partial", Phase::Ready)
}

/// The HostedCluster with the upgrade to 4.20.2 `Completed`.
pub(super) fn rolled_out(started: jiff::Timestamp, completed: jiff::Timestamp) -> Obs {
    hosted_cluster()
        .state("Available/Completed", Phase::Ready)
        .upgraded("4.20.2", started, completed)
}

pub(super) fn pool(name: &str) -> Obs {
    obs("c1", Hop::NodePool)
        .object(name)
        .state("Ready", Phase::Ready)
        .created(t(0))
        .since(t(9))
        .replicas(2, 2, 2)
}

pub(super) fn keys(f: &Fleet) -> Vec<String> {
    f.get("c1")
        .unwrap()
        .day2_in_flight()
        .map(|op| op.key("c1"))
        .collect()
}

/// A cluster created and ready, with one ready pool.
pub(super) fn ready_with_pool(f: &mut Fleet) {
    ready_cluster(f);
    f.apply(batch(false, t(10), vec![pool("np-1")]), t(10));
}

#[test]
fn a_control_plane_upgrade_runs_from_startedtime_to_completiontime() {
    let mut f = fleet();
    ready_with_pool(&mut f);

    // Asked for at 30 (desired ahead of the history: no upstream start).
    f.apply(
        batch(
            false,
            t(30),
            vec![hosted_cluster().upgrading("4.20.2", None)],
        ),
        t(30),
    );
    assert_eq!(keys(&f), ["c1/upgrade/4.20.2"]);
    let op = f
        .get("c1")
        .unwrap()
        .day2_operation(OperationKind::Upgrade, Some("4.20.2"))
        .unwrap();
    assert!(op.started_at.observed);

    // The version operator starts it at 31 (history[0] Partial): the
    // upstream start replaces the observed one.
    f.apply(
        batch(
            false,
            t(32),
            vec![hosted_cluster().upgrading("4.20.2", Some(t(31)))],
        ),
        t(32),
    );
    let op = f
        .get("c1")
        .unwrap()
        .day2_operation(OperationKind::Upgrade, Some("4.20.2"))
        .unwrap();
    assert_eq!(op.started_at, TimeMark::upstream(t(31)));
    assert_eq!(
        f.get("c1").unwrap().outcome,
        CreationOutcome::Succeeded,
        "the creation stays done"
    );

    // Completed at 71 (seen at 72): 40 minutes, within the hour.
    let r = f.apply(batch(false, t(72), vec![rolled_out(t(31), t(71))]), t(72));
    assert_eq!(
        operation_events(&r.events),
        [
            "upgrade hop hosted_cluster succeeded 2400s",
            "upgrade ended succeeded 2400s",
            "upgrade slo good",
        ]
    );
    for e in &r.events {
        if let Event::HopEnded {
            subject, version, ..
        }
        | Event::OperationEnded {
            subject, version, ..
        } = e
        {
            assert_eq!(subject.as_deref(), Some("4.20.2"));
            assert_eq!(version, "4.20.2", "histograms keep the target's version");
        }
    }
    assert!(keys(&f).is_empty());

    // Read again, rolled out: nothing starts again.
    let r = f.apply(
        batch(
            false,
            t(80),
            vec![
                hosted_cluster()
                    .state("Available/Completed", Phase::Ready)
                    .since(t(1))
                    .upgraded("4.20.2", t(31), t(71)),
            ],
        ),
        t(80),
    );
    assert_eq!(operation_events(&r.events), Vec::<String>::new());
    assert!(keys(&f).is_empty());
}

#[test]
fn an_upgrade_stuck_partial_is_late_at_its_target_and_fails_with_its_release_image() {
    let mut f = fleet();
    ready_with_pool(&mut f);
    f.apply(
        batch(
            false,
            t(31),
            vec![hosted_cluster().upgrading("4.20.2", Some(t(30)))],
        ),
        t(31),
    );
    // Late at the hour, once.
    assert!(f.tick(t(89)).events.is_empty());
    assert_eq!(
        operation_events(&f.tick(t(90)).events),
        ["upgrade slo late"]
    );
    assert!(f.tick(t(120)).events.is_empty());
    assert_eq!(keys(&f), ["c1/upgrade/4.20.2"]);

    // ValidReleaseImage False fails the HostedCluster: the upgrade fails.
    let r = f.apply(
        batch(
            false,
            t(121),
            vec![
                hosted_cluster()
                    .state("ValidReleaseImage=False", Phase::Failed)
                    .since(t(120))
                    .upgrading("4.20.2", Some(t(30))),
            ],
        ),
        t(121),
    );
    assert_eq!(
        operation_events(&r.events),
        [
            "upgrade hop hosted_cluster failed 5400s",
            "upgrade ended failed 5400s"
        ],
        "its verdict was given already"
    );
    assert!(keys(&f).is_empty());
    // The same rollout read again is not a new upgrade.
    let r = f.apply(
        batch(
            false,
            t(125),
            vec![
                hosted_cluster()
                    .state("ValidReleaseImage=False", Phase::Failed)
                    .since(t(120))
                    .upgrading("4.20.2", Some(t(30)))
                    .condition("Degraded", ConditionStatus::True, "x", t(124)),
            ],
        ),
        t(125),
    );
    assert_eq!(operation_events(&r.events), Vec::<String>::new());
    assert!(keys(&f).is_empty());
}

#[test]
fn a_new_target_supersedes_the_old_one_without_a_verdict() {
    let mut f = fleet();
    ready_with_pool(&mut f);
    f.apply(
        batch(
            false,
            t(31),
            vec![hosted_cluster().upgrading("4.20.2", Some(t(30)))],
        ),
        t(31),
    );
    let r = f.apply(
        batch(
            false,
            t(41),
            vec![hosted_cluster().upgrading("4.20.5", Some(t(40)))],
        ),
        t(41),
    );
    assert_eq!(operation_events(&r.events), Vec::<String>::new());
    assert_eq!(keys(&f), ["c1/upgrade/4.20.5"]);
    // The old one's deadline passes quietly.
    assert!(f.tick(t(95)).events.is_empty());
    assert_eq!(
        operation_events(&f.tick(t(100)).events),
        ["upgrade slo late"]
    );
}

#[test]
fn a_pool_upgrade_ends_when_no_update_is_in_progress_and_every_replica_is_ready() {
    let mut f = fleet();
    ready_with_pool(&mut f);
    f.apply(
        batch(
            false,
            t(51),
            vec![
                pool("np-1")
                    .condition(
                        "UpdatingVersion",
                        ConditionStatus::True,
                        "AsExpected",
                        t(50),
                    )
                    .upgrading("4.20.2", Some(t(50))),
            ],
        ),
        t(51),
    );
    assert_eq!(keys(&f), ["c1/node_pool_upgrade/np-1/4.20.2"]);
    let op = f
        .get("c1")
        .unwrap()
        .day2_operation(OperationKind::NodePoolUpgrade, Some("np-1/4.20.2"))
        .unwrap();
    assert_eq!(op.node_pool(), Some("np-1"));
    assert_eq!(op.target_version(), Some("4.20.2"));
    assert_eq!(op.started_at, TimeMark::upstream(t(50)));

    // Rolled out, one machine still joining: not done.
    let r = f.apply(
        batch(
            false,
            t(60),
            vec![
                pool("np-1")
                    .state("NotReady", Phase::Progressing)
                    .since(t(59))
                    .replicas(2, 2, 1),
            ],
        ),
        t(60),
    );
    assert_eq!(operation_events(&r.events), Vec::<String>::new());
    assert_eq!(keys(&f).len(), 1);
    assert_eq!(hinted(&r), None, "the upgrade goes on: nothing to read");
    // Every replica ready at 62 (UpdatingVersion removed, as HyperShift does).
    let r = f.apply(batch(false, t(63), vec![pool("np-1").since(t(62))]), t(63));
    assert_eq!(
        operation_events(&r.events),
        [
            "node_pool_upgrade hop node_pool succeeded 720s",
            "node_pool_upgrade ended succeeded 720s",
            "node_pool_upgrade slo good",
        ]
    );
    assert!(keys(&f).is_empty());
}

#[test]
fn a_pool_stuck_updating_is_late_and_its_removal_ends_the_upgrade_quietly() {
    let mut f = fleet();
    ready_with_pool(&mut f);
    let updating = || {
        pool("np-1")
            .condition(
                "UpdatingVersion",
                ConditionStatus::True,
                "AsExpected",
                t(50),
            )
            .upgrading("4.20.2", Some(t(50)))
    };
    f.apply(batch(false, t(51), vec![updating()]), t(51));
    // Still updating at 95, the same reading: late at the 45-minute target.
    f.apply(batch(false, t(70), vec![updating()]), t(70));
    assert!(f.tick(t(94)).events.is_empty());
    assert_eq!(
        operation_events(&f.tick(t(95)).events),
        ["node_pool_upgrade slo late"]
    );
    // The pool is removed: the upgrade ends, neither late again nor failed.
    let r = f.apply(batch(false, t(100), vec![pool("np-1").gone()]), t(100));
    assert!(
        operation_events(&r.events)
            .iter()
            .all(|e| !e.starts_with("node_pool_upgrade")),
        "{:?}",
        operation_events(&r.events)
    );
    assert!(keys(&f).is_empty());
}

#[test]
fn a_first_sync_follows_upgrades_and_counts_none_it_could_not_have_watched() {
    let mut f = fleet();
    // Loaded at 100: one upgrade began at 95, the pool's at 20 (past its
    // target: followed, late without a word, its end not counted).
    f.apply(
        batch(
            true,
            t(100),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("ready", Phase::Ready)
                    .created(t(0))
                    .since(t(9)),
                hosted_cluster()
                    .since(t(9))
                    .upgrading("4.20.2", Some(t(95))),
                pool("np-1")
                    .condition(
                        "UpdatingVersion",
                        ConditionStatus::True,
                        "AsExpected",
                        t(20),
                    )
                    .upgrading("4.20.2", Some(t(20))),
            ],
        ),
        t(100),
    );
    assert_eq!(
        keys(&f),
        ["c1/upgrade/4.20.2", "c1/node_pool_upgrade/np-1/4.20.2"]
    );
    let pool_upgrade = f
        .get("c1")
        .unwrap()
        .day2_operation(OperationKind::NodePoolUpgrade, Some("np-1/4.20.2"))
        .unwrap()
        .clone();
    assert!(pool_upgrade.uncounted);
    assert_eq!(pool_upgrade.slo, Some(SloOutcome::Late));
    // Only the one it could have watched is late, at its target, once.
    assert_eq!(
        operation_events(&f.tick(t(160)).events),
        ["upgrade slo late"]
    );
}

#[test]
fn a_restart_goes_on_with_an_upgrade_in_flight() {
    let mut f = fleet();
    ready_with_pool(&mut f);
    f.apply(
        batch(
            false,
            t(31),
            vec![hosted_cluster().upgrading("4.20.2", Some(t(30)))],
        ),
        t(31),
    );
    let memory = super::restart_tests::memory_of(&f);
    let mut g = fleet();
    g.restore(memory);
    // The first sync after the restart reads it still rolling out.
    g.apply(
        batch(
            true,
            t(40),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("ready", Phase::Ready)
                    .created(t(0))
                    .since(t(9)),
                hosted_cluster()
                    .since(t(9))
                    .upgrading("4.20.2", Some(t(30))),
            ],
        ),
        t(40),
    );
    assert_eq!(keys(&g), ["c1/upgrade/4.20.2"]);
    let r = g.apply(batch(false, t(61), vec![rolled_out(t(30), t(60))]), t(61));
    assert_eq!(
        operation_events(&r.events),
        [
            "upgrade hop hosted_cluster succeeded 1800s",
            "upgrade ended succeeded 1800s",
            "upgrade slo good",
        ],
        "one end, one verdict, from the upstream start"
    );
}

#[test]
fn the_clusters_deletion_takes_its_upgrades_along() {
    let mut f = fleet();
    ready_with_pool(&mut f);
    f.apply(
        batch(
            false,
            t(31),
            vec![hosted_cluster().upgrading("4.20.2", Some(t(30)))],
        ),
        t(31),
    );
    let r = f.apply(
        batch(
            false,
            t(41),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("uninstalling", Phase::Deleting)
                    .created(t(0))
                    .since(t(40)),
            ],
        ),
        t(41),
    );
    assert!(
        operation_events(&r.events)
            .iter()
            .all(|e| !e.starts_with("upgrade"))
    );
    assert!(keys(&f).is_empty());
    assert!(f.tick(t(95)).events.iter().all(|e| !matches!(
        e,
        Event::Slo {
            operation: OperationKind::Upgrade,
            ..
        }
    )));
}
