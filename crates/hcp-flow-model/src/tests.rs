//! Unit tests of the timeline model, driven by an explicit clock. Budgets
//! decided by the clock, and what the model keeps between ticks, are in
//! `deadline_tests.rs`.

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
        targets: crate::OperationTargets::default()
            .with(crate::OperationKind::Create, Duration::from_secs(20 * 60)),
        terminal_hops: vec![Hop::HostedCluster],
        shard: None,
        hop_budgets: Default::default(),
        ..ModelConfig::default()
    })
}

pub(super) fn slo_events(events: &[Event]) -> Vec<SloOutcome> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Slo { outcome, .. } => Some(*outcome),
            _ => None,
        })
        .collect()
}

pub(super) fn creation_ended(events: &[Event]) -> Vec<(Outcome, i64)> {
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
