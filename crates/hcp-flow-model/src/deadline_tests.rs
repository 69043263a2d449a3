//! Unit tests of the timeline model's clock: a hop's budget is decided one
//! step late, never early, and dropped when its object recovered; a tick
//! settles only what is due; what the model keeps between ticks (views,
//! deadlines, fingerprints) is shared and given back.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::time::Duration;

use jiff::SignedDuration;

use super::testing::{Obs, batch, obs};
use super::tests::{creation_ended, fleet, slo_events, t};
use super::*;

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
        targets: crate::OperationTargets::default()
            .with(crate::OperationKind::Create, Duration::from_secs(20 * 60)),
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
