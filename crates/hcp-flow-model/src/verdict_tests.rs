//! The tests of `verdict.rs`, apart so each file stays one a reviewer can hold.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::time::Duration;

use super::*;
use crate::testing::{Obs, batch, obs};
use crate::{Fleet, ModelConfig};

fn t(minutes: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + minutes * 60).unwrap()
}

/// The verdict on c1 at `now` after `observations` (all seen at t(0)),
/// with the default budgets (bundle 10m, HostedCluster 15m, ManagedCluster
/// 20m, RP and CS 30m).
fn judge(observations: Vec<Obs>, p95: HopP95, now: Timestamp) -> Verdict {
    let mut fleet = Fleet::new(ModelConfig {
        targets: crate::OperationTargets::default()
            .with(crate::OperationKind::Create, Duration::from_secs(20 * 60)),
        terminal_hops: vec![Hop::HostedCluster],
        ..ModelConfig::default()
    });
    fleet.apply(batch(false, t(0), observations), t(0));
    let timeline = fleet.get("c1").unwrap();
    verdict(timeline, &OperationBudgets::default(), &p95, now)
}

fn cs() -> Obs {
    obs("c1", Hop::ClustersService)
        .state("installing", Phase::Progressing)
        .created(t(0))
        .since(t(0))
}

fn bundle_pending() -> Obs {
    obs("c1", Hop::MaestroBundle)
        .state("NotApplied", Phase::Pending)
        .since(t(0))
        .condition("Applied", ConditionStatus::False, "ApplyFailed", t(0))
}

fn p95(hop: Hop, seconds: f64) -> HopP95 {
    let mut p = HopP95::default();
    p.set(hop, Some(seconds));
    p
}

#[test]
fn each_status_on_both_sides_of_its_threshold() {
    struct Case {
        name: &'static str,
        observations: Vec<Obs>,
        p95: HopP95,
        now: Timestamp,
        want: Status,
        hop: Option<Hop>,
        reason: &'static str,
    }
    let cases = [
        Case {
            name: "within the p95 and the budget",
            observations: vec![cs(), bundle_pending()],
            p95: p95(Hop::MaestroBundle, 300.0),
            now: t(4),
            want: Status::InProgress,
            hop: Some(Hop::MaestroBundle),
            reason: "in progress at maestro_bundle for 4m (budget 10m): Applied=False, reason ApplyFailed",
        },
        Case {
            name: "at the p95",
            observations: vec![cs(), bundle_pending()],
            p95: p95(Hop::MaestroBundle, 300.0),
            now: t(5),
            want: Status::AtRisk,
            hop: Some(Hop::MaestroBundle),
            reason: "at risk at maestro_bundle: 5m there, past the fleet's p95 of 5m (budget 10m): Applied=False, reason ApplyFailed",
        },
        Case {
            name: "no p95 (too few durations): never at risk",
            observations: vec![cs(), bundle_pending()],
            p95: HopP95::default(),
            now: t(9),
            want: Status::InProgress,
            hop: Some(Hop::MaestroBundle),
            reason: "in progress at maestro_bundle for 9m (budget 10m): Applied=False, reason ApplyFailed",
        },
        Case {
            name: "one second before the budget",
            observations: vec![cs(), bundle_pending()],
            p95: p95(Hop::MaestroBundle, 300.0),
            now: t(10)
                .checked_sub(jiff::SignedDuration::from_secs(1))
                .unwrap(),
            want: Status::AtRisk,
            hop: Some(Hop::MaestroBundle),
            reason: "at risk at maestro_bundle: 9m59s there, past the fleet's p95 of 5m (budget 10m): Applied=False, reason ApplyFailed",
        },
        Case {
            name: "at the budget: stuck, naming the bundle, not the CS above it",
            observations: vec![cs(), bundle_pending()],
            p95: HopP95::default(),
            now: t(40),
            want: Status::Stuck,
            hop: Some(Hop::MaestroBundle),
            reason: "stuck at maestro_bundle for 40m (budget 10m): Applied=False, reason ApplyFailed",
        },
        Case {
            name: "a failed hop wins over a stuck one",
            observations: vec![
                cs(),
                bundle_pending(),
                obs("c1", Hop::HostedCluster)
                    .state("ValidReleaseImage", Phase::Failed)
                    .since(t(0))
                    .error("InvalidImage", "release image not found"),
            ],
            p95: HopP95::default(),
            now: t(40),
            want: Status::Failed,
            hop: Some(Hop::HostedCluster),
            reason: "failed at hosted_cluster 40m ago: InvalidImage: release image not found",
        },
        Case {
            name: "completed",
            observations: vec![
                cs(),
                obs("c1", Hop::HostedCluster)
                    .state("Available", Phase::Ready)
                    .since(t(12)),
            ],
            p95: HopP95::default(),
            now: t(13),
            want: Status::Ready,
            hop: None,
            reason: "completed in 12m",
        },
        Case {
            name: "completed, then a hop not ready past its budget: degraded, not stuck",
            observations: vec![
                obs("c1", Hop::HostedCluster)
                    .state("Available", Phase::Ready)
                    .created(t(0))
                    .since(t(0)),
                obs("c1", Hop::ManagedCluster)
                    .state("NotJoined", Phase::Pending)
                    .since(t(0))
                    .condition("ManagedClusterJoined", ConditionStatus::False, "", t(0)),
            ],
            p95: HopP95::default(),
            now: t(20),
            want: Status::Degraded,
            hop: Some(Hop::ManagedCluster),
            reason: "degraded: managed_cluster not ready for 20m (budget 20m), after the creation completed: ManagedClusterJoined=False",
        },
        Case {
            name: "the same, one step before the budget: ready",
            observations: vec![
                obs("c1", Hop::HostedCluster)
                    .state("Available", Phase::Ready)
                    .created(t(0))
                    .since(t(0)),
                obs("c1", Hop::ManagedCluster)
                    .state("NotJoined", Phase::Pending)
                    .since(t(0))
                    .condition("ManagedClusterJoined", ConditionStatus::False, "", t(0)),
            ],
            p95: HopP95::default(),
            now: t(19),
            want: Status::Ready,
            hop: None,
            reason: "completed in 0s",
        },
    ];
    for case in cases {
        let v = judge(case.observations, case.p95, case.now);
        assert_eq!(v.status, case.want, "{}: {v:?}", case.name);
        assert_eq!(v.hop, case.hop, "{}", case.name);
        assert_eq!(v.reason, case.reason, "{}", case.name);
    }
}

/// A cluster deleted hop by hop: the deletion is judged along its flow,
/// by the deletion's budgets (HostedCluster 30m), at the first hop of
/// the flow still deleting.
#[test]
fn a_deletion_is_judged_at_the_first_hop_of_its_flow_still_deleting() {
    let deleting = |hop: Hop, state: &str| obs("c1", hop).state(state, Phase::Deleting).since(t(0));
    let at = |now: Timestamp| {
        judge(
            vec![
                deleting(Hop::ClustersService, "uninstalling"),
                deleting(Hop::MaestroBundle, "Deleting"),
                deleting(Hop::HostedCluster, "deleting").condition(
                    "CloudResourcesDestroyed",
                    ConditionStatus::False,
                    "RemainingCloudResources",
                    t(0),
                ),
            ],
            HopP95::default(),
            now,
        )
    };
    let before = at(t(29));
    assert_eq!(before.status, Status::InProgress, "{before:?}");
    assert_eq!(before.operation, Some(OperationKind::Delete));
    assert_eq!(before.hop, Some(Hop::HostedCluster));
    let past = at(t(30));
    assert_eq!(past.status, Status::Stuck, "{past:?}");
    assert_eq!(past.hop, Some(Hop::HostedCluster));
    assert_eq!(past.budget_seconds, Some(1800.0));
    assert_eq!(
        past.reason,
        "deletion stuck at hosted_cluster for 30m (budget 30m): CloudResourcesDestroyed=False, reason RemainingCloudResources"
    );
}

#[test]
fn a_clusters_service_error_during_deletion_fails_the_deletion() {
    let mut fleet = Fleet::new(ModelConfig::default());
    let cs = |state: &str, phase: Phase, at: i64| {
        obs("c1", Hop::ClustersService)
            .state(state, phase)
            .since(t(at))
    };
    fleet.apply(batch(false, t(0), vec![cs("ready", Phase::Ready, 0)]), t(0));
    fleet.apply(
        batch(false, t(1), vec![cs("uninstalling", Phase::Deleting, 1)]),
        t(1),
    );
    fleet.apply(
        batch(
            false,
            t(5),
            vec![cs("error", Phase::Failed, 5).error("OCM3999", "uninstall failed")],
        ),
        t(5),
    );
    let v = verdict(
        fleet.get("c1").unwrap(),
        &OperationBudgets::default(),
        &HopP95::default(),
        t(6),
    );
    assert_eq!(v.status, Status::Failed, "{v:?}");
    assert_eq!(v.operation, Some(OperationKind::Delete));
    assert_eq!(v.hop, Some(Hop::ClustersService));
    assert_eq!(
        v.reason,
        "deletion failed at clusters_service 1m ago: OCM3999: uninstall failed"
    );
}

#[test]
fn a_degraded_condition_is_bad_when_true() {
    let v = judge(
        vec![
            cs(),
            obs("c1", Hop::HostedCluster)
                .state("Partial", Phase::Progressing)
                .since(t(0))
                .condition("Available", ConditionStatus::True, "", t(0))
                .condition("Degraded", ConditionStatus::True, "EtcdQuorumLost", t(0)),
        ],
        HopP95::default(),
        t(16),
    );
    assert_eq!(v.status, Status::Stuck);
    assert_eq!(
        v.reason,
        "stuck at hosted_cluster for 16m (budget 15m): Degraded=True, reason EtcdQuorumLost"
    );
    assert_eq!(v.budget_seconds, Some(900.0));
    assert_eq!(v.elapsed_seconds, Some(960.0));
}

#[test]
fn durations_read_like_a_person_writes_them() {
    assert_eq!(human(0.4), "0s");
    assert_eq!(human(59.0), "59s");
    assert_eq!(human(60.0), "1m");
    assert_eq!(human(599.0), "9m59s");
    assert_eq!(human(3600.0), "1h");
    assert_eq!(human(7500.0), "2h5m");
}

/// One verdict rule across operations (docs/design/15-operations.md §15.7): every
/// operation in flight × what the hops read. The cluster reads as its
/// worst operation, each judged by its own flow and budgets; a hop an
/// operation holds is judged only by it; a hop none holds that regressed
/// is `degraded` at once.
#[test]
fn the_worst_operation_in_flight_or_a_regression_outside_them_decides() {
    use crate::OperationKind::{self, *};
    // A cluster created at 0 and complete at 9: CS ready, the bundle
    // applied, the HostedCluster available, one pool ready.
    let ready = || {
        vec![
            obs("c1", Hop::ClustersService)
                .state("ready", Phase::Ready)
                .created(t(0))
                .since(t(9)),
            obs("c1", Hop::MaestroBundle)
                .state("Applied", Phase::Ready)
                .since(t(2)),
            obs("c1", Hop::HostedCluster)
                .state("Available/Completed", Phase::Ready)
                .since(t(9)),
            obs("c1", Hop::NodePool)
                .object("np-1")
                .state("Ready", Phase::Ready)
                .created(t(0))
                .since(t(9))
                .replicas(2, 2, 2),
        ]
    };
    let hc = || obs("c1", Hop::HostedCluster).state("Available/Partial", Phase::Ready);
    // What happens at 20 (each case one operation, or none).
    let operations: [(&str, Vec<Obs>, Option<OperationKind>); 4] = [
        ("none", vec![], None),
        (
            "a pool added",
            vec![
                obs("c1", Hop::NodePool)
                    .object("np-2")
                    .state("WaitingForAvailableMachines", Phase::Progressing)
                    .created(t(20))
                    .since(t(20)),
            ],
            Some(NodePoolCreate),
        ),
        (
            "a control-plane upgrade",
            vec![
                hc().upgrading("4.20.2", Some(t(20))),
                obs("c1", Hop::ClustersService)
                    .state("updating", Phase::Progressing)
                    .since(t(20)),
            ],
            Some(Upgrade),
        ),
        (
            "a pool upgrade",
            vec![
                obs("c1", Hop::NodePool)
                    .object("np-1")
                    .state("Ready", Phase::Ready)
                    .created(t(0))
                    .since(t(9))
                    .replicas(2, 2, 2)
                    .condition(
                        "UpdatingVersion",
                        ConditionStatus::True,
                        "AsExpected",
                        t(20),
                    )
                    .upgrading("4.20.2", Some(t(20))),
            ],
            Some(NodePoolUpgrade),
        ),
    ];
    // What a hop reads at 21: nothing new, or the HostedCluster's API
    // server down (it was available: a regression).
    let unavailable = || {
        obs("c1", Hop::HostedCluster)
            .state("KubeAPIServerUnavailable", Phase::Progressing)
            .since(t(21))
            .condition(
                "Available",
                ConditionStatus::False,
                "KubeAPIServerUnavailable",
                t(21),
            )
    };
    let states: [(&str, Vec<Obs>); 2] = [
        ("every hop ready", vec![]),
        ("API server down", vec![unavailable()]),
    ];
    // Two instants: within every default budget, and a day later, past
    // all of them.
    for (minutes, late) in [(22, false), (24 * 60, true)] {
        for (op_name, op_obs, op_kind) in &operations {
            for (state_name, state_obs) in &states {
                let mut fleet = Fleet::new(ModelConfig {
                    targets: crate::OperationTargets::default()
                        .with(crate::OperationKind::Create, Duration::from_secs(20 * 60)),
                    terminal_hops: vec![Hop::HostedCluster],
                    ..ModelConfig::default()
                });
                fleet.apply(batch(false, t(9), ready()), t(9));
                fleet.apply(batch(false, t(20), op_obs.clone()), t(20));
                fleet.apply(batch(false, t(21), state_obs.clone()), t(21));
                let now = t(minutes);
                let timeline = fleet.get("c1").unwrap();
                let v = verdict(
                    timeline,
                    &OperationBudgets::default(),
                    &HopP95::default(),
                    now,
                );
                let case = format!("{op_name} × {state_name} at {minutes}m: {v:?}");
                let api_down = !state_obs.is_empty();
                // The HostedCluster is the control-plane upgrade's own
                // hop: judged by it alone; otherwise its regression is
                // degraded at once, worse than any operation waiting.
                let upgrade_holds_it = *op_kind == Some(Upgrade);
                let (status, operation, hop) = match (op_kind, api_down && !upgrade_holds_it) {
                    (_, true) => (Status::Degraded, None, Some(Hop::HostedCluster)),
                    (None, false) => (Status::Ready, Some(Create), None),
                    (Some(kind), false) => {
                        // The deepest hop not done: an upgrade waits for
                        // its rollout at the HostedCluster.
                        let hop = match kind {
                            Upgrade => Hop::HostedCluster,
                            _ => Hop::NodePool,
                        };
                        let status = if late {
                            Status::Stuck
                        } else {
                            Status::InProgress
                        };
                        (status, Some(*kind), Some(hop))
                    }
                };
                assert_eq!(v.status, status, "{case}");
                assert_eq!(v.operation, operation, "{case}");
                assert_eq!(v.hop, hop, "{case}");
                if status == Status::Degraded {
                    assert!(
                        v.reason
                            .starts_with("degraded: hosted_cluster not ready again for"),
                        "{case}"
                    );
                }
            }
        }
    }
}

/// A deletion held by a finalizer names it once, however many objects
/// and views carry it.
#[test]
fn a_deletion_names_each_finalizer_once() {
    let held = |o: Obs| {
        o.state("deleting", Phase::Deleting)
            .since(t(10))
            .condition(
                crate::Condition::FINALIZER,
                ConditionStatus::True,
                "hypershift.openshift.io/finalizer",
                t(10),
            )
            .condition(
                crate::Condition::FINALIZER,
                ConditionStatus::True,
                "hypershift.io/destroy-cloud-resources",
                t(10),
            )
    };
    let mut fleet = Fleet::new(ModelConfig::default());
    fleet.apply(
        batch(
            false,
            t(10),
            vec![
                held(obs("c1", Hop::HostedCluster).object("hc").created(t(0))),
                held(obs("c1", Hop::HostedCluster).object("hc-2")),
                held(
                    obs("c1", Hop::HostedCluster)
                        .object("hc")
                        .via(crate::Via::Maestro),
                ),
            ],
        ),
        t(10),
    );
    let timeline = fleet.get("c1").unwrap();
    let v = verdict(
        timeline,
        &OperationBudgets::default(),
        &HopP95::default(),
        t(11),
    );
    assert_eq!(v.operation, Some(OperationKind::Delete), "{v:?}");
    assert_eq!(
        v.reason
            .matches("hypershift.openshift.io/finalizer")
            .count(),
        1,
        "{}",
        v.reason
    );
    assert!(
        v.reason.ends_with(
            "finalizers hypershift.openshift.io/finalizer, hypershift.io/destroy-cloud-resources"
        ),
        "{}",
        v.reason
    );
}
