//! Unit tests of operations in the model (docs/design/15-operations.md §15): a
//! deletion followed hop by hop, its SLO, its end, restarts, and the RP
//! resource it keeps after Clusters Service lets the cluster go.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use super::restart_tests::memory_of;
use super::testing::{Obs, batch, obs, rp};
use super::tests::{fleet, t};
use super::*;

/// The operation kinds of the events of one apply, with what they say.
pub(super) fn operation_events(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            Event::HopEnded {
                operation,
                hop,
                outcome,
                started,
                ended,
                ..
            } => format!(
                "{operation} hop {hop} {} {}s",
                outcome.as_str(),
                (*ended - *started).get_seconds()
            ),
            Event::OperationEnded {
                operation,
                outcome,
                started,
                ended,
                ..
            } => format!(
                "{operation} ended {} {}s",
                outcome.as_str(),
                (*ended - *started).get_seconds()
            ),
            Event::Slo {
                operation, outcome, ..
            } => format!("{operation} slo {}", outcome.as_str()),
            Event::ClusterRemoved { .. } => "removed".to_string(),
        })
        .collect()
}

pub(super) fn ready_cluster(f: &mut Fleet) {
    f.apply(
        batch(
            false,
            t(0),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("ready", Phase::Ready)
                    .created(t(0))
                    .since(t(9)),
                obs("c1", Hop::MaestroBundle)
                    .state("Applied", Phase::Ready)
                    .since(t(2)),
                obs("c1", Hop::HostedCluster)
                    .state("Available", Phase::Ready)
                    .since(t(9)),
            ],
        ),
        t(9),
    );
}

#[test]
fn a_deletion_hop_by_hop_is_one_operation_with_upstream_start_and_one_slo_event() {
    let mut f = fleet();
    ready_cluster(&mut f);
    assert!(f.get("c1").unwrap().deletion.is_none());

    // Clusters Service uninstalls (its own time), then the HostedCluster
    // gets its deletionTimestamp.
    let r = f.apply(
        batch(
            false,
            t(11),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("uninstalling", Phase::Deleting)
                    .since(t(10)),
                obs("c1", Hop::HostedCluster)
                    .state("deleting", Phase::Deleting)
                    .since(t(11)),
            ],
        ),
        t(11),
    );
    assert_eq!(operation_events(&r.events), Vec::<String>::new());
    let timeline = f.get("c1").unwrap();
    let deletion = timeline.deletion.as_deref().unwrap();
    assert_eq!(deletion.started_at, TimeMark::upstream(t(10)));
    assert!(!deletion.started_at.observed);
    assert_eq!(timeline.operation_in_flight(), Some(OperationKind::Delete));
    assert_eq!(
        timeline.outcome,
        CreationOutcome::Succeeded,
        "the creation stays done"
    );

    let r = f.apply(
        batch(false, t(14), vec![obs("c1", Hop::HostedCluster).gone()]),
        t(14),
    );
    assert_eq!(
        operation_events(&r.events),
        ["delete hop hosted_cluster succeeded 180s"]
    );
    let r = f.apply(
        batch(false, t(15), vec![obs("c1", Hop::MaestroBundle).gone()]),
        t(15),
    );
    assert_eq!(
        operation_events(&r.events),
        ["delete hop maestro_bundle succeeded 300s"]
    );
    assert!(f.get("c1").is_some(), "kept until every hop is gone");
    let r = f.apply(
        batch(false, t(16), vec![obs("c1", Hop::ClustersService).gone()]),
        t(16),
    );
    assert_eq!(
        operation_events(&r.events),
        [
            "delete hop clusters_service succeeded 360s",
            "delete ended succeeded 360s",
            "delete slo good",
            "removed"
        ]
    );
    assert!(f.get("c1").is_none());
    assert!(r.removed.contains("c1"));
}

#[test]
fn a_deletion_past_its_target_is_late_at_once_and_counted_once() {
    let mut f = fleet();
    ready_cluster(&mut f);
    f.apply(
        batch(
            false,
            t(10),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("uninstalling", Phase::Deleting)
                    .since(t(10)),
            ],
        ),
        t(10),
    );
    // The default deletion target is 30m: one step before, nothing.
    assert_eq!(
        operation_events(&f.tick(t(39)).events),
        Vec::<String>::new()
    );
    assert_eq!(operation_events(&f.tick(t(40)).events), ["delete slo late"]);
    let r = f.apply(
        batch(
            false,
            t(50),
            vec![
                obs("c1", Hop::HostedCluster).gone(),
                obs("c1", Hop::MaestroBundle).gone(),
                obs("c1", Hop::ClustersService).gone(),
            ],
        ),
        t(50),
    );
    assert_eq!(
        operation_events(&r.events),
        [
            "delete hop hosted_cluster succeeded 2400s",
            "delete hop maestro_bundle succeeded 2400s",
            "delete hop clusters_service succeeded 2400s",
            "delete ended succeeded 2400s",
            "removed"
        ]
    );
}

#[test]
fn a_creation_deleted_in_flight_ends_deleted_and_its_deletion_counts_alone() {
    let mut f = fleet();
    f.apply(
        batch(
            false,
            t(0),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("installing", Phase::Progressing)
                    .created(t(0))
                    .since(t(0)),
            ],
        ),
        t(0),
    );
    let r = f.apply(
        batch(
            false,
            t(5),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("uninstalling", Phase::Deleting)
                    .since(t(5)),
            ],
        ),
        t(5),
    );
    assert_eq!(operation_events(&r.events), Vec::<String>::new());
    let timeline = f.get("c1").unwrap();
    assert_eq!(timeline.outcome, CreationOutcome::Deleted);
    assert_eq!(timeline.operation_in_flight(), Some(OperationKind::Delete));
    // Past the creation's target (20m): the deleted creation is not late.
    assert_eq!(
        operation_events(&f.tick(t(21)).events),
        Vec::<String>::new()
    );
    let r = f.apply(
        batch(false, t(22), vec![obs("c1", Hop::ClustersService).gone()]),
        t(22),
    );
    assert_eq!(
        operation_events(&r.events),
        [
            "delete hop clusters_service succeeded 1020s",
            "delete ended succeeded 1020s",
            "delete slo good",
            "removed"
        ]
    );
}

#[test]
fn an_rp_failed_during_deletion_fails_the_deletion_not_the_creation() {
    let mut f = fleet();
    ready_cluster(&mut f);
    f.apply(
        batch(
            false,
            t(10),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("uninstalling", Phase::Deleting)
                    .since(t(10)),
            ],
        ),
        t(10),
    );
    let r = f.apply(
        batch(
            false,
            t(12),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("error", Phase::Failed)
                    .since(t(12))
                    .error("OCM3999", "uninstall failed"),
            ],
        ),
        t(12),
    );
    assert_eq!(
        operation_events(&r.events),
        ["delete ended failed 120s", "delete slo failed"]
    );
    let timeline = f.get("c1").unwrap();
    assert_eq!(timeline.outcome, CreationOutcome::Succeeded);
    assert_eq!(timeline.operation_in_flight(), None);
}

#[test]
fn a_deletion_seen_first_in_a_first_sync_starts_silently_and_still_ends_counted() {
    let mut f = fleet();
    let r = f.apply(
        batch(
            true,
            t(10),
            vec![
                obs("c1", Hop::ClustersService)
                    .state("uninstalling", Phase::Deleting)
                    .created(t(0))
                    .since(t(8)),
            ],
        ),
        t(10),
    );
    assert!(r.events.is_empty());
    assert_eq!(
        f.get("c1").unwrap().deletion.as_deref().unwrap().started_at,
        TimeMark::upstream(t(8))
    );
    let r = f.apply(
        batch(false, t(12), vec![obs("c1", Hop::ClustersService).gone()]),
        t(12),
    );
    assert_eq!(
        operation_events(&r.events),
        [
            "delete hop clusters_service succeeded 240s",
            "delete ended succeeded 240s",
            "delete slo good",
            "removed"
        ]
    );
}

/// Killed mid-deletion and started again: the deletion goes on with its
/// observed start and its late verdict, the hops already gone are not
/// counted again, and it ends once, with no second SLO event.
#[test]
fn a_restart_mid_deletion_neither_counts_it_twice_nor_loses_it() {
    let mut before = fleet();
    ready_cluster(&mut before);
    // Clusters Service gives no time for `uninstalling`: the start is the
    // exporter's own observation, which only the memory keeps.
    before.apply(
        batch(
            false,
            t(10),
            vec![
                obs("c1", Hop::ClustersService).state("uninstalling", Phase::Deleting),
                obs("c1", Hop::MaestroBundle)
                    .state("Deleting", Phase::Deleting)
                    .since(t(11)),
            ],
        ),
        t(10),
    );
    before.apply(
        batch(false, t(12), vec![obs("c1", Hop::HostedCluster).gone()]),
        t(12),
    );
    assert_eq!(
        operation_events(&before.tick(t(40)).events),
        ["delete slo late"]
    );
    let memory: Memory =
        serde_json::from_str(&serde_json::to_string(&memory_of(&before)).unwrap()).unwrap();
    assert!(memory.clusters["c1"].deletion.is_some());

    let mut after = fleet();
    after.restore(memory);
    after.begin_load(t(45));
    after.apply(
        batch(
            true,
            t(45),
            vec![
                obs("c1", Hop::ClustersService).state("uninstalling", Phase::Deleting),
                obs("c1", Hop::MaestroBundle)
                    .state("Deleting", Phase::Deleting)
                    .since(t(11)),
            ],
        ),
        t(45),
    );
    let r = after.finish_load(t(45));
    assert!(r.events.is_empty(), "{:?}", r.events);
    let timeline = after.get("c1").unwrap();
    let deletion = timeline.deletion.as_deref().unwrap();
    assert_eq!(deletion.started_at, TimeMark::observed(t(10)));
    assert_eq!(deletion.slo, Some(SloOutcome::Late));
    assert_eq!(timeline.operation_in_flight(), Some(OperationKind::Delete));
    assert!(deletion.hop(Hop::HostedCluster).unwrap().done_at.is_some());

    let r = after.apply(
        batch(
            false,
            t(50),
            vec![
                obs("c1", Hop::MaestroBundle).gone(),
                obs("c1", Hop::ClustersService).gone(),
            ],
        ),
        t(50),
    );
    assert_eq!(
        operation_events(&r.events),
        [
            "delete hop maestro_bundle succeeded 2340s",
            "delete hop clusters_service succeeded 2400s",
            "delete ended succeeded 2400s",
            "removed"
        ]
    );
}

/// Clusters Service lets a deleted cluster go before the RP answers 404:
/// the deletion waits for the RP on the same timeline and ends there.
#[test]
fn a_deletion_ends_when_the_rp_resource_goes_after_clusters_service() {
    let rid = "/subscriptions/s/resourcegroups/g/providers/microsoft.redhatopenshift/hcpopenshiftclusters/a";
    let mut f = fleet();
    let cs = || obs("c1", Hop::ClustersService).resource_id(rid);
    f.apply(
        batch(
            false,
            t(0),
            vec![
                rp(rid).state("Succeeded", Phase::Ready).created(t(0)),
                cs().state("ready", Phase::Ready).created(t(0)),
            ],
        ),
        t(0),
    );
    f.apply(
        batch(
            false,
            t(10),
            vec![
                rp(rid).state("Deleting", Phase::Deleting).since(t(10)),
                cs().state("uninstalling", Phase::Deleting).since(t(10)),
            ],
        ),
        t(10),
    );
    let r = f.apply(batch(false, t(14), vec![cs().gone()]), t(14));
    assert_eq!(
        operation_events(&r.events),
        ["delete hop clusters_service succeeded 240s"]
    );
    assert!(
        f.get(&provisional_cluster_id(rid)).is_none(),
        "no provisional timeline for a resource being deleted"
    );
    let r = f.apply(batch(false, t(15), vec![rp(rid).gone()]), t(15));
    assert_eq!(
        operation_events(&r.events),
        [
            "delete hop rp_frontend succeeded 300s",
            "delete ended succeeded 300s",
            "delete slo good",
            "removed"
        ]
    );
    assert!(f.get("c1").is_none());
    assert!(f.resolve(rid).is_none(), "the join went with the cluster");
}

/// What one role of a split deployment reads of one cluster: a management
/// instance owns nothing and reads the management hops directly; the
/// service side owns the cluster and sees the same objects through
/// Maestro's feedback.
fn split_role(via: Via) -> Fleet {
    let ownership = match via {
        Via::Direct => Ownership {
            provisional: false,
            joined: false,
        },
        Via::Maestro => Ownership::ALL,
    };
    Fleet::new(ModelConfig {
        ownership,
        ..ModelConfig::default()
    })
}

/// `(operation, hop, counted)` of a hop's end.
type HopCount = (OperationKind, Hop, bool);

/// `(operation, hop, counted)` of every hop end, and `(operation, counted)`
/// of every operation end and verdict, of one apply.
fn who_counts(events: &[Event]) -> (Vec<HopCount>, Vec<(OperationKind, bool)>) {
    let mut hops = Vec::new();
    let mut ends = Vec::new();
    for e in events {
        match e {
            Event::HopEnded {
                operation,
                hop,
                counted,
                ..
            } => hops.push((*operation, *hop, *counted)),
            Event::OperationEnded {
                operation, counted, ..
            }
            | Event::Slo {
                operation, counted, ..
            } => ends.push((*operation, *counted)),
            Event::ClusterRemoved { .. } => {}
        }
    }
    (hops, ends)
}

/// One rule for every operation (docs/design/08-scopes-and-scale-out.md §8.2): the instance that
/// reads a hop directly times it, whoever owns the cluster; the owner
/// counts the operation's end and verdict; Maestro's view times nothing.
/// Each step is applied to both roles of a split; the table says what
/// each operation's hop end must be.
#[test]
fn every_operation_is_timed_where_read_and_counted_by_its_owner() {
    use OperationKind::*;
    let np = |name: &str| obs("c1", Hop::NodePool).object(name).created(t(0));
    let hc = || obs("c1", Hop::HostedCluster).state("Available/Partial", Phase::Ready);
    // (what the step is, its observations, the operation and hop whose end it is)
    type Step = (&'static str, Vec<Obs>, Vec<(OperationKind, Hop)>);
    let steps = |via: Via| -> Vec<Step> {
        let on = |o: Obs| o.via(via);
        vec![
            (
                "a pool waits for machines",
                vec![on(np("np-2")
                    .state("WaitingForAvailableMachines", Phase::Progressing)
                    .created(t(20)))],
                vec![],
            ),
            (
                "the pool is ready",
                vec![on(np("np-2")
                    .state("Ready", Phase::Ready)
                    .since(t(25))
                    .replicas(2, 2, 2))],
                vec![(NodePoolCreate, Hop::NodePool)],
            ),
            (
                "the control plane upgrade begins",
                vec![on(hc().upgrading("4.20.2", Some(t(30))))],
                vec![],
            ),
            (
                "the control plane upgrade completes",
                vec![on(hc()
                    .state("Available/Completed", Phase::Ready)
                    .upgraded("4.20.2", t(30), t(34)))],
                vec![(Upgrade, Hop::HostedCluster)],
            ),
            (
                "the pool upgrade begins",
                vec![on(np("np-2")
                    .state("Ready", Phase::Ready)
                    .since(t(25))
                    .replicas(2, 2, 2)
                    .condition(
                        "UpdatingVersion",
                        ConditionStatus::True,
                        "AsExpected",
                        t(40),
                    )
                    .upgrading("4.20.2", Some(t(40))))],
                vec![],
            ),
            (
                "the pool upgrade completes",
                vec![on(np("np-2")
                    .state("Ready", Phase::Ready)
                    .since(t(25))
                    .replicas(2, 2, 2)
                    .condition(
                        "UpdatingVersion",
                        ConditionStatus::False,
                        "AsExpected",
                        t(44),
                    ))],
                vec![(NodePoolUpgrade, Hop::NodePool)],
            ),
            (
                "the pool is removed",
                vec![on(np("np-2")
                    .state("deleting", Phase::Deleting)
                    .since(t(50)))],
                vec![],
            ),
            (
                "the pool is gone",
                vec![on(np("np-2").gone())],
                vec![(NodePoolDelete, Hop::NodePool)],
            ),
            (
                "the cluster's deletion begins",
                vec![on(hc().state("deleting", Phase::Deleting).since(t(60)))],
                vec![],
            ),
            (
                "the HostedCluster and the last pool are gone",
                vec![on(hc().gone()), on(np("np-1").gone())],
                vec![(Delete, Hop::HostedCluster), (Delete, Hop::NodePool)],
            ),
        ]
    };
    for via in [Via::Direct, Via::Maestro] {
        let mut f = split_role(via);
        f.apply(
            batch(
                false,
                t(9),
                vec![
                    obs("c1", Hop::HostedCluster)
                        .via(via)
                        .state("Available", Phase::Ready)
                        .created(t(0))
                        .since(t(9)),
                    np("np-1")
                        .via(via)
                        .state("Ready", Phase::Ready)
                        .since(t(9))
                        .replicas(2, 2, 2),
                ],
            ),
            t(9),
        );
        for (minute, (what, observations, ends)) in (21..).step_by(10).zip(steps(via)) {
            let r = f.apply(batch(false, t(minute), observations), t(minute));
            let (hops, operations) = who_counts(&r.events);
            let want_hops: Vec<_> = ends
                .iter()
                .map(|(op, hop)| (*op, *hop, via == Via::Direct))
                .collect();
            assert_eq!(hops, want_hops, "{via:?}: {what}: the hop ends");
            // The owner (the service side here) counts every end and
            // verdict; the management instance none.
            assert!(
                operations
                    .iter()
                    .all(|(_, counted)| *counted == (via == Via::Maestro)),
                "{via:?}: {what}: {operations:?}"
            );
            for (op, _) in ends {
                assert!(
                    operations.iter().any(|(kind, _)| *kind == op),
                    "{via:?}: {what}: {op} ended: {operations:?}"
                );
            }
        }
    }
}

/// The direct end of one creation hop, as (via, counted) per event.
fn creation_hop_ends(events: &[Event], want: Hop) -> Vec<(Via, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::HopEnded {
                operation: OperationKind::Create,
                hop,
                via,
                counted,
                ..
            } if *hop == want => Some((*via, *counted)),
            _ => None,
        })
        .collect()
}

/// One instance reads the RP, Clusters Service, Maestro and the watches:
/// Clusters Service may report the deletion before the watch delivers the
/// ManifestWork's readiness. A readiness that came before the deletion began
/// still times the creation's hop (as a management-only instance, which sees
/// no deletion at Clusters Service, does); one that came after does not.
#[test]
fn a_creation_hop_ready_before_the_deletion_is_timed_whichever_source_is_read_first() {
    for (ready_since, timed) in [(t(4), true), (t(12), false)] {
        let mut f = fleet();
        f.apply(
            batch(
                false,
                t(3),
                vec![
                    obs("c1", Hop::ClustersService)
                        .state("installing", Phase::Progressing)
                        .created(t(0)),
                    obs("c1", Hop::Manifestwork)
                        .via(Via::Maestro)
                        .state("Available", Phase::Ready)
                        .since(t(3)),
                ],
            ),
            t(3),
        );
        f.apply(
            batch(
                false,
                t(11),
                vec![
                    obs("c1", Hop::ClustersService)
                        .state("uninstalling", Phase::Deleting)
                        .since(t(10)),
                ],
            ),
            t(11),
        );
        assert!(f.get("c1").unwrap().deletion.is_some());
        let r = f.apply(
            batch(
                false,
                t(13),
                vec![
                    obs("c1", Hop::Manifestwork)
                        .state("Available", Phase::Ready)
                        .since(ready_since),
                ],
            ),
            t(13),
        );
        let want: &[(Via, bool)] = if timed { &[(Via::Direct, true)] } else { &[] };
        assert_eq!(
            creation_hop_ends(&r.events, Hop::Manifestwork),
            want,
            "ready since {ready_since}"
        );
    }
}
