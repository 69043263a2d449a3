//! Unit tests of upgrades as the service side reads them
//! (docs/design/15-operations.md §15.10): an upgrade starts when the RP began
//! updating, times the RP's and Clusters Service's updates as hops, and a
//! pool's upgrade fails where Clusters Service puts the pool in error.
//! HyperShift's own view of the same upgrades is in `upgrade_tests.rs`.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use super::operation_tests::operation_events;
use super::pool_service_tests::{cs_pool, hinted, rp_pool};
use super::testing::{Obs, batch, obs, rp};
use super::tests::{fleet, t};
use super::upgrade_tests::{hosted_cluster, keys, pool, ready_with_pool, rolled_out};
use super::*;

const RID: &str = "/subscriptions/s1/resourcegroups/rg/providers/microsoft.redhatopenshift/hcpopenshiftclusters/c1";

/// Clusters Service's cluster, joined to its ARM resource.
fn cs(state: &str, phase: Phase) -> Obs {
    obs("c1", Hop::ClustersService)
        .state(state, phase)
        .created(t(0))
        .resource_id(RID)
}

/// A cluster ready at the RP and Clusters Service too.
fn ready_at_the_service(f: &mut Fleet) {
    ready_with_pool(f);
    f.apply(
        batch(
            false,
            t(11),
            vec![
                cs("ready", Phase::Ready).since(t(9)),
                rp(RID).state("Succeeded", Phase::Ready).since(t(9)),
            ],
        ),
        t(11),
    );
}

fn upgrade(f: &Fleet) -> Option<&Operation> {
    f.get("c1")
        .unwrap()
        .day2_operation(OperationKind::Upgrade, Some("4.20.2"))
}

/// The upgrade `op` finds ended as `want` says when `r` was applied, and
/// is kept, no longer in flight, while the RP and Clusters Service settle.
fn ended_and_settling(
    f: &Fleet,
    r: &ApplyResult,
    want: &[&str],
    op: impl Fn(&Fleet) -> Option<&Operation>,
) {
    assert_eq!(operation_events(&r.events), want);
    assert!(keys(f).is_empty(), "no longer in flight");
    assert_eq!(
        op(f).unwrap().outcome,
        OperationOutcome::Succeeded,
        "kept while the RP and Clusters Service settle"
    );
}

#[test]
fn an_upgrade_starts_when_the_rp_began_updating_and_times_the_rp_and_clusters_service() {
    let mut f = fleet();
    ready_at_the_service(&mut f);

    // The ARM update (RP `Updating` since 20) reaches Clusters Service at
    // 22; neither names a version: no upgrade yet.
    f.apply(
        batch(
            false,
            t(22),
            vec![
                rp(RID).state("Updating", Phase::Progressing).since(t(20)),
                cs("updating", Phase::Progressing),
            ],
        ),
        t(22),
    );
    assert!(keys(&f).is_empty());

    // The HostedCluster names the target at 25: the upgrade began when the
    // RP began updating, and waits at the rollout.
    f.apply(
        batch(
            false,
            t(25),
            vec![hosted_cluster().upgrading("4.20.2", None)],
        ),
        t(25),
    );
    assert_eq!(keys(&f), ["c1/upgrade/4.20.2"]);
    let op = upgrade(&f).unwrap();
    assert_eq!(op.started_at, TimeMark::upstream(t(20)));
    let reached: Vec<Hop> = op.hops.iter().map(|h| h.hop).collect();
    assert_eq!(
        reached,
        [Hop::HostedCluster, Hop::RpFrontend, Hop::ClustersService]
    );
    assert_eq!(op.hop(Hop::RpFrontend).unwrap().started_at, t(20));
    assert_eq!(op.waiting_hop(), Hop::HostedCluster);

    // HyperShift's later `startedTime` does not move the earlier start; it
    // starts the HostedCluster's part.
    f.apply(
        batch(
            false,
            t(27),
            vec![hosted_cluster().upgrading("4.20.2", Some(t(26)))],
        ),
        t(27),
    );
    let op = upgrade(&f).unwrap();
    assert_eq!(op.started_at, TimeMark::upstream(t(20)));
    assert_eq!(op.hop(Hop::HostedCluster).unwrap().started_at, t(26));

    // Rolled out at 70: the upgrade ends there, 50 minutes from the RP's
    // start; the RP and Clusters Service still update.
    let r = f.apply(batch(false, t(71), vec![rolled_out(t(26), t(70))]), t(71));
    ended_and_settling(
        &f,
        &r,
        &[
            "upgrade hop hosted_cluster succeeded 2640s",
            "upgrade ended succeeded 3000s",
            "upgrade slo good",
        ],
        upgrade,
    );

    // Clusters Service is ready again at 72, the RP at 74: each part timed
    // from when it began, and the upgrade is let go.
    let r = f.apply(
        batch(false, t(73), vec![cs("ready", Phase::Ready).since(t(72))]),
        t(73),
    );
    assert_eq!(
        operation_events(&r.events),
        ["upgrade hop clusters_service succeeded 3120s"]
    );
    assert!(upgrade(&f).is_some());
    let r = f.apply(
        batch(
            false,
            t(75),
            vec![rp(RID).state("Succeeded", Phase::Ready).since(t(74))],
        ),
        t(75),
    );
    assert_eq!(
        operation_events(&r.events),
        ["upgrade hop rp_frontend succeeded 3240s"]
    );
    assert!(upgrade(&f).is_none());
}

#[test]
fn an_rp_update_that_fails_during_an_upgrade_fails_it_at_the_rp() {
    let mut f = fleet();
    ready_at_the_service(&mut f);
    f.apply(
        batch(
            false,
            t(25),
            vec![
                rp(RID).state("Updating", Phase::Progressing).since(t(20)),
                hosted_cluster().upgrading("4.20.2", Some(t(24))),
            ],
        ),
        t(25),
    );
    assert_eq!(upgrade(&f).unwrap().started_at, TimeMark::upstream(t(20)));

    let r = f.apply(
        batch(
            false,
            t(41),
            vec![
                rp(RID)
                    .state("Failed", Phase::Failed)
                    .since(t(40))
                    .error("InternalServerError", "the update failed"),
            ],
        ),
        t(41),
    );
    assert_eq!(
        operation_events(&r.events),
        [
            "upgrade hop rp_frontend failed 1200s",
            "upgrade ended failed 1200s",
            "upgrade slo failed",
        ]
    );
    let op = upgrade(&f).unwrap();
    assert_eq!(op.failed_hop, Some(Hop::RpFrontend));
}

#[test]
fn an_rp_that_stays_succeeded_leaves_the_upgrade_to_the_hosted_cluster() {
    // The RP of an older API version never says `Updating` (the world's
    // `rp_updating` off): the upgrade is the HostedCluster's alone.
    let mut f = fleet();
    ready_at_the_service(&mut f);
    f.apply(
        batch(
            false,
            t(25),
            vec![hosted_cluster().upgrading("4.20.2", Some(t(24)))],
        ),
        t(25),
    );
    let op = upgrade(&f).unwrap();
    assert_eq!(op.started_at, TimeMark::upstream(t(24)));
    assert_eq!(op.hops.len(), 1);
    let r = f.apply(batch(false, t(71), vec![rolled_out(t(24), t(70))]), t(71));
    assert_eq!(
        operation_events(&r.events),
        [
            "upgrade hop hosted_cluster succeeded 2760s",
            "upgrade ended succeeded 2760s",
            "upgrade slo good",
        ]
    );
    assert!(upgrade(&f).is_none(), "nothing left to settle");
}

#[test]
fn a_first_sync_that_dates_an_upgrade_back_past_its_target_judges_it_late_silently() {
    // The exporter starts while an upgrade runs: the RP has been updating
    // for it since 100 (past the hour's target at 200), HyperShift began at
    // 190. Nobody here watched it begin: late without a word, not counted.
    let mut f = fleet();
    f.apply(
        batch(
            true,
            t(200),
            vec![
                cs("updating", Phase::Progressing).since(t(100)),
                rp(RID).state("Updating", Phase::Progressing).since(t(100)),
                obs("c1", Hop::MaestroBundle)
                    .state("Applied", Phase::Ready)
                    .since(t(2)),
                hosted_cluster().upgrading("4.20.2", Some(t(190))),
            ],
        ),
        t(200),
    );
    let op = upgrade(&f).unwrap();
    assert_eq!(op.started_at, TimeMark::upstream(t(100)));
    assert_eq!(op.slo, Some(SloOutcome::Late));
    assert!(op.uncounted);
    let r = f.tick(t(300));
    assert!(
        r.events.iter().all(|e| !matches!(
            e,
            Event::Slo {
                operation: OperationKind::Upgrade,
                ..
            }
        )),
        "{:?}",
        operation_events(&r.events)
    );
}

/// Pool np-1 updating to 4.20.2 at its NodePool, from `started`.
fn pool_updating(started: jiff::Timestamp) -> Obs {
    pool("np-1")
        .condition(
            "UpdatingVersion",
            ConditionStatus::True,
            "AsExpected",
            started,
        )
        .upgrading("4.20.2", Some(started))
}

fn pool_upgrade(f: &Fleet) -> Option<&Operation> {
    f.get("c1")
        .unwrap()
        .day2_operation(OperationKind::NodePoolUpgrade, Some("np-1/4.20.2"))
}

#[test]
fn a_pool_upgrade_dates_from_clusters_service_and_times_the_pools_updates_as_hops() {
    let mut f = fleet();
    ready_at_the_service(&mut f);

    // The ARM PATCH of the pool reaches Clusters Service at 21 (its
    // `last_updated_timestamp`); the RP is seen `Updating` at 22. Neither
    // names a version, and the NodePool has not begun: no upgrade yet, but
    // the readings are kept for one.
    f.apply(
        batch(
            false,
            t(22),
            vec![
                rp_pool("np-1", "Updating", Phase::Progressing, t(0)),
                cs_pool("np-1", "updating", Phase::Progressing, t(21)),
            ],
        ),
        t(22),
    );
    assert!(keys(&f).is_empty());

    // The NodePool begins the rollout at 24: the upgrade began when Clusters
    // Service began updating the pool (an upstream time; the RP's, seen at
    // 22, dates nothing and starts with the operation), and waits at the
    // NodePool.
    let r = f.apply(batch(false, t(25), vec![pool_updating(t(24))]), t(25));
    assert_eq!(keys(&f), ["c1/node_pool_upgrade/np-1/4.20.2"]);
    assert_eq!(
        hinted(&r),
        Some((true, true)),
        "both read the pool when its upgrade begins"
    );
    let op = pool_upgrade(&f).unwrap();
    assert_eq!(op.started_at, TimeMark::upstream(t(21)));
    let mut reached: Vec<Hop> = op.hops.iter().map(|h| h.hop).collect();
    reached.sort();
    assert_eq!(
        reached,
        [Hop::RpFrontend, Hop::ClustersService, Hop::NodePool]
    );
    assert_eq!(op.hop(Hop::ClustersService).unwrap().started_at, t(21));
    assert_eq!(
        op.hop(Hop::RpFrontend).unwrap().started_at,
        t(21),
        "seen at 22, it starts with the operation"
    );
    assert_eq!(op.waiting_hop(), Hop::NodePool);

    // Every replica ready at 62: the upgrade ends there, 41 minutes from
    // Clusters Service's start; the RP and Clusters Service still update.
    let r = f.apply(batch(false, t(63), vec![pool("np-1").since(t(62))]), t(63));
    ended_and_settling(
        &f,
        &r,
        &[
            "node_pool_upgrade hop node_pool succeeded 2280s",
            "node_pool_upgrade ended succeeded 2460s",
            "node_pool_upgrade slo good",
        ],
        pool_upgrade,
    );
    assert_eq!(
        hinted(&r),
        Some((true, true)),
        "both read the pool when its rollout ends"
    );

    // Clusters Service reads the pool ready at 64, the RP is seen
    // `Succeeded` at 67: each part timed from when it began, and the
    // upgrade and its readings go.
    let r = f.apply(
        batch(
            false,
            t(65),
            vec![cs_pool("np-1", "ready", Phase::Ready, t(64))],
        ),
        t(65),
    );
    assert_eq!(
        operation_events(&r.events),
        ["node_pool_upgrade hop clusters_service succeeded 2580s"]
    );
    assert!(pool_upgrade(&f).is_some());
    let r = f.apply(
        batch(
            false,
            t(67),
            vec![rp_pool("np-1", "Succeeded", Phase::Ready, t(0))],
        ),
        t(67),
    );
    assert_eq!(
        operation_events(&r.events),
        ["node_pool_upgrade hop rp_frontend succeeded 2760s"]
    );
    assert!(pool_upgrade(&f).is_none());
    assert!(
        f.get("c1").unwrap().pool_readings.is_none(),
        "a settled pool costs nothing"
    );
}

#[test]
fn a_pool_clusters_service_puts_in_error_during_its_upgrade_fails_the_upgrade_there() {
    let mut f = fleet();
    ready_at_the_service(&mut f);
    f.apply(batch(false, t(25), vec![pool_updating(t(24))]), t(25));
    f.apply(
        batch(
            false,
            t(27),
            vec![cs_pool("np-1", "updating", Phase::Progressing, t(26))],
        ),
        t(27),
    );
    assert_eq!(
        pool_upgrade(&f).unwrap().started_at,
        TimeMark::upstream(t(24)),
        "a later update does not move the start"
    );

    let r = f.apply(
        batch(
            false,
            t(41),
            vec![
                cs_pool("np-1", "error", Phase::Failed, t(40))
                    .error("CLUSTERS-MGMT-500", "the node pool update failed"),
            ],
        ),
        t(41),
    );
    assert_eq!(
        operation_events(&r.events),
        [
            "node_pool_upgrade hop clusters_service failed 840s",
            "node_pool_upgrade ended failed 960s",
            "node_pool_upgrade slo failed",
        ]
    );
    let timeline = f.get("c1").unwrap();
    assert_eq!(
        pool_upgrade(&f).unwrap().failed_hop,
        Some(Hop::ClustersService)
    );
    assert!(
        timeline
            .day2_operations()
            .all(|op| op.kind != OperationKind::NodePoolCreate),
        "the pool's failure is its upgrade's, not a creation's"
    );
}

/// Clusters Service can fail a pool's upgrade within a poll of its start:
/// read in `error`, dated after the upgrade began, never read `updating`,
/// it still fails the upgrade there (docs/design/15-operations.md §15.10); the RP's
/// `Failed` read beside it names no hop while Clusters Service says it.
#[test]
fn a_pool_upgrade_clusters_service_fails_before_any_poll_saw_it_updating_fails_there() {
    let mut f = fleet();
    ready_at_the_service(&mut f);
    f.apply(batch(false, t(25), vec![pool_updating(t(24))]), t(25));
    let r = f.apply(
        batch(
            false,
            t(27),
            vec![
                rp_pool("np-1", "Failed", Phase::Failed, t(0)).since(t(26)),
                cs_pool("np-1", "error", Phase::Failed, t(26))
                    .error("CLUSTERS-MGMT-500", "the node pool update failed"),
            ],
        ),
        t(27),
    );
    assert!(
        operation_events(&r.events).contains(&"node_pool_upgrade ended failed 120s".to_string()),
        "{:?}",
        operation_events(&r.events)
    );
    assert_eq!(
        pool_upgrade(&f).unwrap().failed_hop,
        Some(Hop::ClustersService)
    );
    assert!(
        f.get("c1")
            .unwrap()
            .day2_operations()
            .all(|op| op.kind != OperationKind::NodePoolCreate),
        "the pool's failure is its upgrade's, not a creation's"
    );

    // The RP's `Failed` read a poll before Clusters Service's `error`: the
    // upgrade fails at the RP, then names Clusters Service.
    let mut f = fleet();
    ready_at_the_service(&mut f);
    f.apply(batch(false, t(25), vec![pool_updating(t(24))]), t(25));
    f.apply(
        batch(
            false,
            t(27),
            vec![rp_pool("np-1", "Failed", Phase::Failed, t(0)).since(t(26))],
        ),
        t(27),
    );
    assert_eq!(pool_upgrade(&f).unwrap().failed_hop, Some(Hop::RpFrontend));
    f.apply(
        batch(
            false,
            t(28),
            vec![cs_pool("np-1", "error", Phase::Failed, t(26))],
        ),
        t(28),
    );
    assert_eq!(
        pool_upgrade(&f).unwrap().failed_hop,
        Some(Hop::ClustersService)
    );
}

#[test]
fn an_update_of_a_pool_that_no_upgrade_follows_is_kept_only_until_it_settles() {
    // A scale-up: the RP and Clusters Service update the pool, its
    // NodePool never reports a new version.
    let mut f = fleet();
    ready_at_the_service(&mut f);
    let r = f.apply(
        batch(
            false,
            t(22),
            vec![
                rp_pool("np-1", "Updating", Phase::Progressing, t(0)),
                cs_pool("np-1", "updating", Phase::Progressing, t(21)),
            ],
        ),
        t(22),
    );
    assert_eq!(operation_events(&r.events), Vec::<String>::new());
    assert_eq!(
        f.get("c1").unwrap().pool_readings.as_ref().unwrap().len(),
        2
    );
    f.apply(
        batch(
            false,
            t(30),
            vec![
                rp_pool("np-1", "Succeeded", Phase::Ready, t(0)),
                cs_pool("np-1", "ready", Phase::Ready, t(28)),
            ],
        ),
        t(30),
    );
    let timeline = f.get("c1").unwrap();
    assert!(timeline.pool_readings.is_none());
    assert_eq!(timeline.day2_operations().count(), 0);
}

/// An operation ends once (docs/design/02-hops-and-phases.md §2a): Maestro's feedback of a
/// NodePool the watch reads too lags behind it, and still reports the
/// rollout (and then its end) after the direct view ended the upgrade.
/// The lagging view starts no second upgrade of the same key, and ends
/// none again: its duration and its trace would count twice.
#[test]
fn a_lagging_maestro_view_of_a_pool_upgrade_the_watch_ended_starts_and_ends_nothing() {
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
    // Both views see the rollout begin; the watch first.
    f.apply(batch(false, t(51), vec![updating()]), t(51));
    f.apply(
        batch(false, t(52), vec![updating().via(Via::Maestro)]),
        t(52),
    );
    assert_eq!(keys(&f), ["c1/node_pool_upgrade/np-1/4.20.2"]);
    // The watch sees it rolled out: ended, once.
    let r = f.apply(batch(false, t(63), vec![pool("np-1").since(t(62))]), t(63));
    assert_eq!(
        operation_events(&r.events),
        [
            "node_pool_upgrade hop node_pool succeeded 720s",
            "node_pool_upgrade ended succeeded 720s",
            "node_pool_upgrade slo good",
        ]
    );
    // Maestro's feedback, a status push behind, still reports the rollout
    // (a condition's time moved: the view changed), then its end.
    let lagging = pool("np-1")
        .condition(
            "UpdatingVersion",
            ConditionStatus::True,
            "AsExpected",
            t(61),
        )
        .upgrading("4.20.2", Some(t(50)))
        .via(Via::Maestro);
    let r = f.apply(batch(false, t(64), vec![lagging]), t(64));
    assert_eq!(operation_events(&r.events), Vec::<String>::new());
    assert!(keys(&f).is_empty(), "no second upgrade: {:?}", keys(&f));
    let r = f.apply(
        batch(
            false,
            t(66),
            vec![pool("np-1").since(t(62)).via(Via::Maestro)],
        ),
        t(66),
    );
    assert_eq!(
        operation_events(&r.events),
        Vec::<String>::new(),
        "ended twice"
    );
}
