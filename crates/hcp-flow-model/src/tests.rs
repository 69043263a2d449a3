//! Unit tests of the timeline model, driven by an explicit clock.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::*;

pub(super) fn t(minutes: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + minutes * 60).unwrap()
}

use super::testing::{Obs, batch, obs, rp};

pub(super) fn fleet() -> Fleet {
    Fleet::new(ModelConfig {
        creation_target: Duration::from_secs(20 * 60),
        terminal_hops: vec![Hop::HostedCluster],
        shard: None,
        hop_budgets: Default::default(),
        ..ModelConfig::default()
    })
}

fn slo_events(events: &[Event]) -> Vec<SloOutcome> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Slo { outcome, .. } => Some(*outcome),
            _ => None,
        })
        .collect()
}

fn creation_ended(events: &[Event]) -> Vec<(Outcome, i64)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::OperationEnded {
                outcome,
                started,
                ended,
                ..
            } => Some((*outcome, (*ended - *started).get_seconds())),
            _ => None,
        })
        .collect()
}

#[test]
fn completes_good_within_target_with_upstream_times() {
    let mut f = fleet();
    let r = f.apply(
        batch(
            false,
            t(1),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("installing", Phase::Progressing)
                    .created(t(0)),
            ],
        ),
        t(1),
    );
    assert!(r.events.is_empty());
    let r = f.apply(
        batch(
            false,
            t(13),
            vec![
                obs("c1", Hop::HostedCluster)
                    .via(Via::Maestro)
                    .state("Available", Phase::Ready)
                    .since(t(12)),
            ],
        ),
        t(13),
    );
    assert_eq!(slo_events(&r.events), vec![SloOutcome::Good]);
    // Duration from upstream creation to upstream readiness, not observation.
    assert_eq!(
        creation_ended(&r.events),
        vec![(Outcome::Succeeded, 12 * 60)]
    );
    let tl = f.get("c1").unwrap();
    assert_eq!(tl.outcome, CreationOutcome::Succeeded);
    assert_eq!(tl.completed_at, Some(t(12).into()));
    assert_eq!(tl.hop(Hop::HostedCluster).unwrap().via, Via::Maestro);
}

#[test]
fn late_is_counted_the_moment_the_target_passes_and_never_again() {
    let mut f = fleet();
    f.apply(
        batch(
            false,
            t(0),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("installing", Phase::Progressing)
                    .created(t(0)),
            ],
        ),
        t(0),
    );
    // One second before the target: nothing.
    let before = t(20).checked_sub(SignedDuration::from_secs(1)).unwrap();
    assert!(f.tick(before).events.is_empty());
    // At the target: late, once.
    assert_eq!(slo_events(&f.tick(t(20)).events), vec![SloOutcome::Late]);
    assert!(f.tick(t(21)).events.is_empty());
    // Completing later records the duration but no second SLO event.
    let r = f.apply(
        batch(
            false,
            t(30),
            vec![
                obs("c1", Hop::HostedCluster)
                    .state("Available", Phase::Ready)
                    .since(t(29)),
            ],
        ),
        t(30),
    );
    assert!(slo_events(&r.events).is_empty());
    assert_eq!(
        creation_ended(&r.events),
        vec![(Outcome::Succeeded, 29 * 60)]
    );
}

#[test]
fn failure_before_target_counts_failed_once() {
    let mut f = fleet();
    f.apply(
        batch(
            false,
            t(0),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("installing", Phase::Progressing)
                    .created(t(0)),
            ],
        ),
        t(0),
    );
    let r = f.apply(
        batch(
            false,
            t(5),
            vec![obs("c1", Hop::ClustersService).state("error", Phase::Failed)],
        ),
        t(5),
    );
    assert_eq!(slo_events(&r.events), vec![SloOutcome::Failed]);
    assert_eq!(creation_ended(&r.events), vec![(Outcome::Failed, 5 * 60)]);
    let hop_failed = r.events.iter().any(|e| {
        matches!(
            e,
            Event::HopEnded {
                hop: Hop::ClustersService,
                outcome: Outcome::Failed,
                ..
            }
        )
    });
    assert!(hop_failed);
    // Passing the target afterwards does not make it late too.
    assert!(slo_events(&f.tick(t(25)).events).is_empty());
    assert_eq!(f.get("c1").unwrap().outcome, CreationOutcome::Failed);
}

#[test]
fn first_sync_is_silent_and_a_restart_counts_nothing_old() {
    let mut f = fleet();
    // A restart finds one creation done, one late in flight, one young in flight.
    let r = f.apply(
        batch(
            true,
            t(60),
            vec![
                obs("done", Hop::ClustersService)
                    .state("ready", Phase::Ready)
                    .created(t(0)),
                obs("done", Hop::HostedCluster)
                    .state("Available", Phase::Ready)
                    .since(t(10)),
                obs("late", Hop::ClustersService)
                    .state("installing", Phase::Progressing)
                    .created(t(30)),
                obs("young", Hop::ClustersService)
                    .state("installing", Phase::Progressing)
                    .created(t(55)),
            ],
        ),
        t(60),
    );
    assert!(
        r.events.is_empty(),
        "first sync moved something: {:?}",
        r.events
    );
    assert_eq!(f.get("done").unwrap().outcome, CreationOutcome::Succeeded);
    assert_eq!(f.get("late").unwrap().slo, Some(SloOutcome::Late));
    // The late one completing is not counted again; its duration is recorded.
    let r = f.apply(
        batch(
            false,
            t(61),
            vec![
                obs("late", Hop::HostedCluster)
                    .state("Available", Phase::Ready)
                    .since(t(61)),
            ],
        ),
        t(61),
    );
    assert!(slo_events(&r.events).is_empty());
    assert_eq!(creation_ended(&r.events).len(), 1);
    // The young one is this instance's to count.
    assert_eq!(slo_events(&f.tick(t(75)).events), vec![SloOutcome::Late]);
}

#[test]
fn out_of_order_observations_keep_earliest_creation_and_upstream_since() {
    let mut f = fleet();
    // The bundle is seen before the Clusters Service cluster.
    f.apply(
        batch(
            false,
            t(3),
            vec![
                obs("c1", Hop::MaestroBundle)
                    .object("b1")
                    .state("Applied", Phase::Progressing)
                    .created(t(2)),
            ],
        ),
        t(3),
    );
    assert_eq!(f.get("c1").unwrap().created_at, TimeMark::upstream(t(2)));
    f.apply(
        batch(
            false,
            t(4),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("installing", Phase::Progressing)
                    .created(t(0)),
            ],
        ),
        t(4),
    );
    let tl = f.get("c1").unwrap();
    assert_eq!(tl.created_at, TimeMark::upstream(t(0)));
    // No upstream since: the observation time, marked as such.
    assert_eq!(
        tl.hop(Hop::ClustersService).unwrap().since,
        TimeMark::observed(t(4))
    );
    // Missing hops are simply absent.
    assert!(tl.hop(Hop::HostedCluster).is_none());
    assert!(tl.hop(Hop::RpFrontend).is_none());
}

#[test]
fn unknown_phase_is_kept_not_dropped() {
    let mut f = fleet();
    f.apply(
        batch(
            false,
            t(1),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("frobnicating", Phase::Unknown)
                    .created(t(0)),
            ],
        ),
        t(1),
    );
    let hop = f
        .get("c1")
        .unwrap()
        .hop(Hop::ClustersService)
        .unwrap()
        .clone();
    assert_eq!(hop.phase, Phase::Unknown);
    assert_eq!(hop.state, "frobnicating");
}

#[test]
fn rp_observation_moves_under_the_clusters_service_id_at_the_join() {
    let mut f = fleet();
    let rid = "/subscriptions/s/resourcegroups/rg/providers/microsoft.redhatopenshift/hcpopenshiftclusters/a";
    f.apply(batch(false, t(1), vec![rp(rid).created(t(0))]), t(1));
    // Tracked at once, under its provisional id.
    assert_eq!(f.len(), 1);
    assert!(f.get(&provisional_cluster_id(rid)).is_some());
    assert_eq!(f.unjoined_len(), 1);
    f.apply(
        batch(
            false,
            t(2),
            vec![
                obs("cs-1", Hop::ClustersService)
                    .state("validating", Phase::Pending)
                    .resource_id(rid)
                    .name("a"),
            ],
        ),
        t(2),
    );
    assert_eq!(f.unjoined_len(), 0);
    assert_eq!(
        f.len(),
        1,
        "the provisional timeline merged, none left over"
    );
    assert!(f.get(&provisional_cluster_id(rid)).is_none());
    let tl = f.get("cs-1").unwrap();
    assert_eq!(tl.phase(Hop::RpFrontend), Some(Phase::Pending));
    assert_eq!(tl.identity.name, "a");
    assert_eq!(tl.created_at, TimeMark::upstream(t(0)));
    // Later RP observations resolve directly.
    f.apply(
        batch(
            false,
            t(3),
            vec![rp(rid).state("Provisioning", Phase::Progressing)],
        ),
        t(3),
    );
    assert_eq!(
        f.get("cs-1").unwrap().phase(Hop::RpFrontend),
        Some(Phase::Progressing)
    );
}

#[test]
fn direct_view_wins_over_maestro_feedback() {
    let mut f = fleet();
    f.apply(
        batch(
            false,
            t(1),
            vec![
                obs("c1", Hop::HostedCluster)
                    .via(Via::Maestro)
                    .state("Available", Phase::Ready),
                obs("c1", Hop::HostedCluster)
                    .via(Via::Direct)
                    .state("NotAvailable", Phase::Progressing),
            ],
        ),
        t(1),
    );
    let hop = f
        .get("c1")
        .unwrap()
        .hop(Hop::HostedCluster)
        .unwrap()
        .clone();
    assert_eq!((hop.via, hop.phase), (Via::Direct, Phase::Progressing));
}

#[test]
fn node_pools_aggregate_and_deletion_removes_the_cluster() {
    let mut f = fleet();
    f.apply(
        batch(
            false,
            t(1),
            vec![
                obs("c1", Hop::NodePool)
                    .object("np-a")
                    .state("Ready", Phase::Ready),
                obs("c1", Hop::NodePool)
                    .object("np-b")
                    .state("NotReady", Phase::Progressing),
            ],
        ),
        t(1),
    );
    assert_eq!(
        f.get("c1").unwrap().phase(Hop::NodePool),
        Some(Phase::Progressing)
    );
    f.apply(
        batch(
            false,
            t(2),
            vec![
                obs("c1", Hop::NodePool)
                    .object("np-b")
                    .state("ValidReleaseImage", Phase::Failed),
            ],
        ),
        t(2),
    );
    assert_eq!(
        f.get("c1").unwrap().phase(Hop::NodePool),
        Some(Phase::Failed)
    );
    let r = f.apply(
        batch(
            false,
            t(3),
            vec![
                obs("c1", Hop::NodePool).object("np-a").gone(),
                obs("c1", Hop::NodePool).object("np-b").gone(),
            ],
        ),
        t(3),
    );
    assert!(f.get("c1").is_none());
    assert!(r.removed.contains("c1"));
    assert!(r.events.iter().any(|e| matches!(
        e,
        Event::ClusterRemoved { cluster_id, in_flight: false, last }
            if cluster_id == "c1" && last.hops.is_empty()
    )));
}

#[test]
fn deleting_in_flight_cancels_without_slo_verdict() {
    let mut f = fleet();
    f.apply(
        batch(
            false,
            t(0),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("installing", Phase::Progressing)
                    .created(t(0)),
            ],
        ),
        t(0),
    );
    let r = f.apply(
        batch(
            false,
            t(5),
            vec![obs("c1", Hop::ClustersService).state("uninstalling", Phase::Deleting)],
        ),
        t(5),
    );
    assert!(slo_events(&r.events).is_empty());
    assert_eq!(f.get("c1").unwrap().outcome, CreationOutcome::Deleted);
    assert!(slo_events(&f.tick(t(30)).events).is_empty());
}

#[test]
fn hop_duration_runs_from_object_creation_to_ready() {
    let mut f = fleet();
    let r = f.apply(
        batch(
            false,
            t(9),
            vec![
                obs("c1", Hop::MaestroBundle)
                    .object("b")
                    .created(t(1))
                    .state("Available", Phase::Ready)
                    .since(t(3)),
            ],
        ),
        t(9),
    );
    let ended: Vec<_> = r
        .events
        .iter()
        .filter_map(|e| match e {
            Event::HopEnded {
                hop,
                started,
                ended,
                ..
            } => Some((*hop, (*ended - *started).get_seconds())),
            _ => None,
        })
        .collect();
    assert_eq!(ended, vec![(Hop::MaestroBundle, 120)]);
    // Recorded once: a repeat observation records nothing.
    let r = f.apply(
        batch(
            false,
            t(10),
            vec![
                obs("c1", Hop::MaestroBundle)
                    .object("b")
                    .created(t(1))
                    .state("Available", Phase::Ready)
                    .since(t(3)),
            ],
        ),
        t(10),
    );
    assert!(r.events.is_empty());
    assert!(r.changed.is_empty());
}

#[test]
fn shards_split_the_fleet_stably() {
    let ids: Vec<String> = (0..200).map(|i| format!("cluster-{i}")).collect();
    let counts = ids.iter().fold([0u32; 4], |mut acc, id| {
        acc[shard_of(id, 4) as usize] += 1;
        acc
    });
    assert!(
        counts.iter().all(|&c| c > 20),
        "unbalanced shards: {counts:?}"
    );
    assert_eq!(shard_of("cluster-1", 4), shard_of("cluster-1", 4));
    let mut f = Fleet::new(ModelConfig {
        shard: Some((shard_of("cluster-1", 4), 4)),
        hop_budgets: Default::default(),
        ..ModelConfig::default()
    });
    let obs: Vec<Obs> = ids
        .iter()
        .map(|id| obs(id, Hop::ClustersService).state("ready", Phase::Ready))
        .collect();
    f.apply(batch(false, t(0), obs), t(0));
    assert!(f.get("cluster-1").is_some());
    assert!(f.len() < 200 && f.len() > 20);
}

/// A HostedCluster Degraded since t(2) and never Available, hop budget 15m.
fn degraded(id: &str) -> Obs {
    obs(id, Hop::HostedCluster)
        .state("Degraded", Phase::Progressing)
        .created(t(0))
        .fails_after_budget(t(2), "ComponentsNotAvailable")
}

fn hop_phase(f: &Fleet, id: &str, hop: Hop) -> Option<Phase> {
    f.get(id).and_then(|tl| tl.phase(hop))
}

#[test]
fn a_budget_failure_is_decided_by_the_clock_one_step_late_never_early() {
    let mut f = fleet();
    f.apply(batch(false, t(3), vec![degraded("c1")]), t(3));
    assert_eq!(
        hop_phase(&f, "c1", Hop::HostedCluster),
        Some(Phase::Progressing)
    );
    let just_before = t(17).checked_sub(SignedDuration::from_secs(1)).unwrap();
    assert!(f.tick(just_before).events.is_empty());
    assert_eq!(
        hop_phase(&f, "c1", Hop::HostedCluster),
        Some(Phase::Progressing)
    );

    let r = f.tick(t(17));
    assert_eq!(hop_phase(&f, "c1", Hop::HostedCluster), Some(Phase::Failed));
    assert!(r.changed.contains("c1"));
    let hop = f.get("c1").unwrap().hop(Hop::HostedCluster).unwrap();
    assert_eq!(hop.error().unwrap().code, "ComponentsNotAvailable");
    assert_eq!(hop.since.at, t(2), "failed from the Degraded transition");
    assert!(!hop.since.observed);
    // Failed before the 20m target: a failed creation, counted once.
    assert_eq!(creation_ended(&r.events), vec![(Outcome::Failed, 120)]);
    assert_eq!(slo_events(&r.events), vec![SloOutcome::Failed]);
    assert!(f.tick(t(30)).events.is_empty());

    // The same reading again is the same decided state: nothing moves.
    let again = f.apply(batch(false, t(31), vec![degraded("c1")]), t(31));
    assert!(
        again.changed.is_empty() && again.events.is_empty(),
        "{again:?}"
    );
}

#[test]
fn a_budget_deadline_whose_object_recovered_is_dropped() {
    let mut f = fleet();
    f.apply(batch(false, t(3), vec![degraded("c1")]), t(3));
    let available = obs("c1", Hop::HostedCluster)
        .state("Available", Phase::Ready)
        .since(t(10));
    f.apply(batch(false, t(10), vec![available]), t(10));
    let r = f.tick(t(40));
    assert_eq!(hop_phase(&f, "c1", Hop::HostedCluster), Some(Phase::Ready));
    assert!(
        r.events.iter().all(|e| !matches!(
            e,
            Event::HopEnded {
                outcome: Outcome::Failed,
                ..
            }
        )),
        "{:?}",
        r.events
    );
    assert_eq!(
        f.pending_deadlines(),
        0,
        "every deadline settled or dropped"
    );
}

#[test]
fn an_object_read_again_unchanged_queues_no_second_deadline() {
    let mut f = fleet();
    f.apply(batch(false, t(3), vec![degraded("c1")]), t(3));
    assert_eq!(
        f.pending_deadlines(),
        2,
        "late at the target, failed at the budget"
    );
    // Every full relist reads it again, unchanged, until its budget runs out.
    for minute in 4..10 {
        f.apply(batch(false, t(minute), vec![degraded("c1")]), t(minute));
    }
    assert_eq!(
        f.pending_deadlines(),
        2,
        "one entry per thing that can come due"
    );
    // A new budget clock (Degraded again since later) is a new deadline.
    let later = obs("c1", Hop::HostedCluster)
        .state("Degraded", Phase::Progressing)
        .created(t(0))
        .fails_after_budget(t(5), "ComponentsNotAvailable");
    f.apply(batch(false, t(10), vec![later]), t(10));
    assert_eq!(f.pending_deadlines(), 3);
    // The first budget's entry is dropped when due (the object reads
    // otherwise), the second fails it at its own time.
    assert!(f.tick(t(17)).events.is_empty());
    assert_eq!(
        hop_phase(&f, "c1", Hop::HostedCluster),
        Some(Phase::Progressing)
    );
    f.tick(t(20));
    assert_eq!(hop_phase(&f, "c1", Hop::HostedCluster), Some(Phase::Failed));
}

#[test]
fn a_first_sync_past_the_budget_loads_failed_silently() {
    let mut f = fleet();
    let r = f.apply(batch(true, t(30), vec![degraded("c1")]), t(30));
    assert_eq!(hop_phase(&f, "c1", Hop::HostedCluster), Some(Phase::Failed));
    assert!(r.events.is_empty(), "{:?}", r.events);
    assert!(f.tick(t(60)).events.is_empty());
}

#[test]
fn a_tick_settles_only_what_is_due() {
    let mut f = fleet();
    let many: Vec<Obs> = (0..1000)
        .map(|i| {
            obs(&format!("c{i}"), Hop::ClustersService)
                .state("installing", Phase::Progressing)
                .created(t(i64::from(i % 100)))
        })
        .collect();
    f.apply(batch(false, t(0), many), t(0));
    assert_eq!(
        f.pending_deadlines(),
        1000,
        "one late deadline per creation"
    );
    assert_eq!(f.next_deadline(), Some(t(20)));
    // At t(29) the creations started at t(0)..=t(9) are late: 10 per minute.
    let r = f.tick(t(29));
    assert_eq!(slo_events(&r.events).len(), 100);
    assert_eq!(f.pending_deadlines(), 900);
    assert_eq!(f.next_deadline(), Some(t(30)));
}

#[test]
fn a_stored_view_shares_its_conditions_with_the_view_sent() {
    let mut f = fleet();
    let sent = obs("c1", Hop::HostedCluster)
        .state("Available", Phase::Ready)
        .condition("Available", ConditionStatus::True, "AsExpected", t(1));
    let Change::Upsert(view) = &sent.observation.change else {
        panic!("an upsert");
    };
    let kept_by_the_source = view.conditions.clone();
    f.apply(batch(false, t(2), vec![sent]), t(2));
    let hop = f.get("c1").and_then(|c| c.hop(Hop::HostedCluster));
    let stored = hop
        .and_then(|h| h.effective_objects().next())
        .map(|(_, o)| &o.view.conditions);
    assert!(stored.is_some_and(|c| std::sync::Arc::ptr_eq(c, &kept_by_the_source)));
    assert!(
        std::sync::Arc::ptr_eq(
            &crate::shared_conditions(Vec::new()),
            &crate::shared_conditions(Vec::new())
        ),
        "none is the one static empty slice"
    );
}

#[test]
fn a_drained_deadline_queue_gives_its_room_back() {
    let mut f = fleet();
    let many: Vec<Obs> = (0..2000)
        .map(|i| {
            obs(&format!("c{i}"), Hop::ClustersService)
                .state("installing", Phase::Progressing)
                .created(t(0))
        })
        .collect();
    f.apply(batch(false, t(0), many), t(0));
    assert!(f.deadline_room() >= 2000);
    f.tick(t(30));
    assert_eq!(f.pending_deadlines(), 0);
    assert!(f.deadline_room() < 2000, "room {}", f.deadline_room());
    // Little room is kept as it is.
    f.apply(
        batch(false, t(31), vec![obs("d", Hop::ClustersService)]),
        t(31),
    );
    let room = f.deadline_room();
    f.tick(t(32));
    assert_eq!(f.deadline_room(), room);
}

/// With the RP and Clusters Service read, `rp_frontend` is a terminal hop;
/// a HostedCluster of a self-managed hub read by the same exporter completes
/// on its own terminal hops, while an ARO creation still waits for the RP,
/// even one whose management hops are read before its RP and CS ones.
#[test]
fn a_creation_neither_the_rp_nor_cs_shows_completes_without_the_rp() {
    let mut f = Fleet::new(ModelConfig {
        creation_target: Duration::from_secs(20 * 60),
        terminal_hops: vec![Hop::RpFrontend, Hop::HostedCluster],
        self_managed_hubs: vec!["hub".to_string()],
        ..ModelConfig::default()
    });
    f.apply(
        batch(
            false,
            t(10),
            vec![
                obs("clusters/hub-1", Hop::HostedCluster)
                    .state("Available", Phase::Ready)
                    .mgmt_cluster("hub")
                    .created(t(0))
                    .since(t(9)),
                obs("aro1", Hop::ClustersService)
                    .state("installing", Phase::Progressing)
                    .created(t(0)),
                obs("aro1", Hop::HostedCluster)
                    .state("Available", Phase::Ready)
                    .mgmt_cluster("mc-1")
                    .created(t(0))
                    .since(t(9)),
                // Read before Clusters Service shows it (a restart's first
                // sync): still an ARO creation, still waits for the RP.
                obs("aro2", Hop::HostedCluster)
                    .state("Available", Phase::Ready)
                    .mgmt_cluster("mc-1")
                    .created(t(0))
                    .since(t(9)),
            ],
        ),
        t(10),
    );
    let hub = f.get("clusters/hub-1").unwrap();
    assert_eq!(hub.outcome, CreationOutcome::Succeeded);
    assert_eq!(hub.completed_at, Some(t(9).into()));
    assert_eq!(f.get("aro1").unwrap().outcome, CreationOutcome::InFlight);
    assert_eq!(f.get("aro2").unwrap().outcome, CreationOutcome::InFlight);
}

#[test]
fn a_views_fingerprint_sees_every_change() {
    let base = HopView::new("installing", Phase::Progressing);
    let mut other = base.clone();
    other.identity_mut().mgmt_cluster = Some("mgmt-1".into());
    assert_ne!(base.fingerprint(), other.fingerprint());
    assert_eq!(base.fingerprint(), base.clone().fingerprint());
    let mut condition = base.clone();
    condition.conditions = std::sync::Arc::new([Condition::new(
        "Available",
        ConditionStatus::False,
        "WaitingForNodes",
        "",
        None,
    )]);
    assert_ne!(base.fingerprint(), condition.fingerprint());
}

/// A first sync in the middle of an outage: the HostedCluster's release
/// rolled out (`Completed` in its history) and it is not Available now. Its
/// creation is done there, and the outage is a regression, not a creation
/// stuck at hosted_cluster (docs/design/15-operations.md §15.7).
#[test]
fn a_hosted_cluster_installed_then_down_at_a_first_sync_is_a_done_creation() {
    let mut f = fleet();
    f.apply(
        batch(
            true,
            t(30),
            vec![
                obs("c1", Hop::HostedCluster)
                    .state(crate::INSTALLED_NOT_AVAILABLE, Phase::Progressing)
                    .since(t(29)),
            ],
        ),
        t(30),
    );
    let c = f.get("c1").unwrap();
    assert_eq!(c.outcome, CreationOutcome::Succeeded);
    assert!(!c.in_flight());

    // One that never rolled out is still being created.
    f.apply(
        batch(
            true,
            t(30),
            vec![
                obs("c2", Hop::HostedCluster)
                    .state("NotAvailable", Phase::Progressing)
                    .since(t(29)),
            ],
        ),
        t(30),
    );
    assert!(f.get("c2").unwrap().in_flight());
}
