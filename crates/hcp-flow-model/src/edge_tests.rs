//! The model at the edges an on-call engineer depends on: RP resources
//! before the Clusters Service join, and ownership. The first load and
//! restarts are in `restart_tests.rs`.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::time::Duration;

use jiff::Timestamp;

use super::testing::{Obs, batch, obs, rp};
use super::*;

pub(super) fn t(minutes: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + minutes * 60).unwrap()
}

pub(super) const RID: &str = "/subscriptions/S-1/resourceGroups/RG/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters/Alpha";

pub(super) fn config() -> ModelConfig {
    ModelConfig {
        targets: crate::OperationTargets::default()
            .with(crate::OperationKind::Create, Duration::from_secs(20 * 60)),
        terminal_hops: vec![Hop::HostedCluster, Hop::RpFrontend],
        rp_in_scope: true,
        ..ModelConfig::default()
    }
}

pub(super) fn slo(events: &[Event]) -> Vec<(SloOutcome, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Slo {
                outcome, counted, ..
            } => Some((*outcome, *counted)),
            _ => None,
        })
        .collect()
}

pub(super) fn cs(id: &str) -> Obs {
    obs(id, Hop::ClustersService)
        .state("installing", Phase::Progressing)
        .resource_id(&RID.to_ascii_lowercase())
        .name("alpha")
}

// ---- RP-first identity -------------------------------------------------

#[test]
fn provisional_id_is_the_lower_cased_arm_id_and_never_a_real_id() {
    let id = provisional_cluster_id(RID);
    assert_eq!(id, format!("arm:{}", RID.to_ascii_lowercase()));
    assert!(is_provisional(&id));
    // A Clusters Service id and a self-managed `<ns>/<name>` are never provisional.
    assert!(!is_provisional("2lq6ri0p5nmq7eu4k0s3lk2j8f1cfv1g"));
    assert!(!is_provisional("clusters/alpha"));
}

#[test]
fn an_rp_resource_cs_never_got_is_visible_and_goes_late_once() {
    let mut f = Fleet::new(config());
    let r = f.apply(
        batch(
            false,
            t(1),
            vec![
                rp(RID)
                    .state("Accepted", Phase::Pending)
                    .created(t(0))
                    .name("alpha"),
            ],
        ),
        t(1),
    );
    let id = provisional_cluster_id(RID);
    assert!(r.changed.contains(&id));
    let tl = f.get(&id).unwrap();
    assert_eq!(tl.identity.name, "alpha");
    assert_eq!(tl.created_at, TimeMark::upstream(t(0)));
    assert_eq!(f.join_of(tl), Some(Join::RpOnly));

    let r = f.tick(t(20));
    assert_eq!(slo(&r.events), vec![(SloOutcome::Late, true)]);

    // CS gets it after all: merged under the CS id, the verdict kept, not
    // counted again, no provisional series left over.
    let r = f.apply(batch(false, t(25), vec![cs("cs-1")]), t(25));
    assert!(r.removed.contains(&id));
    assert!(!r.changed.contains(&id));
    assert!(slo(&r.events).is_empty(), "{:?}", r.events);
    assert_eq!(f.len(), 1);
    let tl = f.get("cs-1").unwrap();
    assert_eq!(tl.slo, Some(SloOutcome::Late));
    assert_eq!(tl.created_at, TimeMark::upstream(t(0)));
    assert_eq!(tl.phase(Hop::RpFrontend), Some(Phase::Pending));
    assert_eq!(f.join_of(tl), Some(Join::Joined));
    assert!(slo(&f.tick(t(60)).events).is_empty());
}

#[test]
fn a_merge_before_the_target_counts_the_creation_once_when_it_completes() {
    let mut f = Fleet::new(config());
    f.apply(
        batch(
            false,
            t(1),
            vec![rp(RID).state("Accepted", Phase::Pending).created(t(0))],
        ),
        t(1),
    );
    f.apply(batch(false, t(2), vec![cs("cs-1").created(t(1))]), t(2));
    let r = f.apply(
        batch(
            false,
            t(12),
            vec![
                obs("cs-1", Hop::HostedCluster)
                    .state("Available", Phase::Ready)
                    .since(t(11)),
                rp(RID).state("Succeeded", Phase::Ready).since(t(12)),
            ],
        ),
        t(12),
    );
    assert_eq!(slo(&r.events), vec![(SloOutcome::Good, true)]);
    let ended: Vec<i64> = r
        .events
        .iter()
        .filter_map(|e| match e {
            Event::OperationEnded { started, ended, .. } => Some((*ended - *started).get_seconds()),
            _ => None,
        })
        .collect();
    assert_eq!(ended, vec![12 * 60], "from the RP's creation time");
}

#[test]
fn a_sharded_merge_takes_the_verdict_the_other_shard_gave() {
    let provisional = provisional_cluster_id(RID);
    // Find a CS id that lands in another shard than the provisional id.
    let total = 2;
    let cs_id = (0..100)
        .map(|i| format!("cs{i}"))
        .find(|id| shard_of(id, total) != shard_of(&provisional, total))
        .unwrap();
    let mut f = Fleet::new(ModelConfig {
        shard: Some((shard_of(&cs_id, total), total)),
        ..config()
    });
    f.apply(
        batch(
            false,
            t(1),
            vec![rp(RID).state("Accepted", Phase::Pending).created(t(0))],
        ),
        t(1),
    );
    assert!(
        f.is_empty(),
        "the provisional timeline is the other shard's"
    );
    assert_eq!(f.unjoined_len(), 1);
    let r = f.apply(batch(false, t(30), vec![cs(&cs_id)]), t(30));
    assert!(slo(&r.events).is_empty(), "counted by the other shard");
    assert_eq!(f.get(&cs_id).unwrap().slo, Some(SloOutcome::Late));
    assert!(slo(&f.tick(t(40)).events).is_empty());
}

/// The deletion's last hop is the RP: Clusters Service letting the
/// cluster go first does not hand the RP resource to a provisional id (a
/// second timeline, a second deletion); the deletion waits for the RP's 404
/// on its own timeline (docs/design/15-operations.md §15.3). Without a deletion in
/// flight, a CS cluster gone hands its live RP resource back (the fleet
/// module's tests).
#[test]
fn a_deleted_cs_cluster_keeps_its_deleting_rp_resource_until_it_goes() {
    let mut f = Fleet::new(config());
    f.apply(
        batch(
            false,
            t(1),
            vec![
                rp(RID).state("Deleting", Phase::Deleting).created(t(0)),
                cs("cs-1"),
            ],
        ),
        t(1),
    );
    assert!(f.get("cs-1").unwrap().deletion_in_flight().is_some());
    let r = f.apply(batch(false, t(2), vec![cs("cs-1").gone()]), t(2));
    assert!(!r.removed.contains("cs-1"));
    assert_eq!(
        f.get("cs-1").unwrap().phase(Hop::RpFrontend),
        Some(Phase::Deleting)
    );
    assert!(f.get(&provisional_cluster_id(RID)).is_none());
    let r = f.apply(batch(false, t(3), vec![rp(RID).gone()]), t(3));
    assert!(r.removed.contains("cs-1"));
    assert!(f.is_empty());
}

/// The same in shards: the shard of the provisional id, which does not
/// follow the cluster, keeps the join too while the RP resource deletes,
/// so no shard follows it again under its provisional id and its deletion
/// is counted once, by the cluster's shard (docs/design/08-scopes-and-scale-out.md §8.3).
#[test]
fn a_deleting_rp_resource_is_not_handed_to_another_shard_when_clusters_service_lets_go() {
    let provisional = provisional_cluster_id(RID);
    let total = 2;
    let cs_id = (0..100)
        .map(|i| format!("cs{i}"))
        .find(|id| shard_of(id, total) != shard_of(&provisional, total))
        .unwrap();
    let mut shards: Vec<Fleet> = (0..total)
        .map(|index| {
            Fleet::new(ModelConfig {
                shard: Some((index, total)),
                ..config()
            })
        })
        .collect();
    let mut apply = |at: i64, observations: fn(&str) -> Vec<Obs>| {
        shards
            .iter_mut()
            .flat_map(|f| {
                f.apply(batch(false, t(at), observations(&cs_id)), t(at))
                    .events
            })
            .collect::<Vec<Event>>()
    };
    apply(1, |id| {
        vec![
            rp(RID)
                .state("Succeeded", Phase::Ready)
                .created(t(0))
                .since(t(1)),
            cs(id).state("ready", Phase::Ready).since(t(1)),
        ]
    });
    apply(10, |id| {
        vec![
            rp(RID).state("Deleting", Phase::Deleting).since(t(10)),
            cs(id).state("uninstalling", Phase::Deleting).since(t(10)),
        ]
    });
    apply(12, |id| vec![cs(id).gone()]);
    let events = apply(13, |_| vec![rp(RID).gone()]);
    let deletions: Vec<bool> = events
        .iter()
        .filter_map(|e| match e {
            Event::OperationEnded {
                operation: OperationKind::Delete,
                counted,
                ..
            } => Some(*counted),
            _ => None,
        })
        .collect();
    assert_eq!(deletions, vec![true], "one deletion, counted once");
    for (index, f) in shards.iter().enumerate() {
        assert!(f.is_empty(), "shard {index} still follows something");
    }
}

#[test]
fn rp_only_creations_complete_when_the_rp_says_succeeded() {
    let mut f = Fleet::new(ModelConfig {
        terminal_hops: vec![Hop::ClustersService],
        ..config()
    });
    f.apply(
        batch(
            false,
            t(1),
            vec![
                rp(RID)
                    .state("Provisioning", Phase::Progressing)
                    .created(t(0)),
            ],
        ),
        t(1),
    );
    let r = f.apply(
        batch(
            false,
            t(9),
            vec![rp(RID).state("Succeeded", Phase::Ready).since(t(9))],
        ),
        t(9),
    );
    assert_eq!(slo(&r.events), vec![(SloOutcome::Good, true)]);
    let tl = f.get(&provisional_cluster_id(RID)).unwrap();
    assert_eq!(tl.completed_at, Some(t(9).into()));
}

#[test]
fn a_cs_cluster_without_an_rp_resource_is_flagged_when_the_rp_is_read() {
    let mut f = Fleet::new(config());
    f.apply(
        batch(
            false,
            t(1),
            vec![obs("cs-9", Hop::ClustersService).state("ready", Phase::Ready)],
        ),
        t(1),
    );
    let tl = f.get("cs-9").unwrap();
    assert_eq!(f.join_of(tl), Some(Join::CsWithoutRp));
    let f2 = Fleet::new(ModelConfig {
        rp_in_scope: false,
        ..config()
    });
    assert_eq!(
        f2.join_of(tl),
        None,
        "without the RP in scope nothing is missing"
    );
}

// ---- ownership ---------------------------------------------------------

#[test]
fn an_instance_that_does_not_own_a_creation_marks_its_events_uncounted() {
    let mut f = Fleet::new(ModelConfig {
        ownership: Ownership {
            provisional: true,
            joined: false,
        },
        terminal_hops: vec![Hop::HostedCluster],
        ..config()
    });
    f.apply(
        batch(
            false,
            t(1),
            vec![
                obs("c1", Hop::HostedCluster)
                    .state("Partial", Phase::Progressing)
                    .created(t(0)),
            ],
        ),
        t(1),
    );
    let r = f.apply(
        batch(
            false,
            t(5),
            vec![
                obs("c1", Hop::HostedCluster)
                    .state("Available", Phase::Ready)
                    .since(t(5)),
            ],
        ),
        t(5),
    );
    assert_eq!(slo(&r.events), vec![(SloOutcome::Good, false)]);
    assert!(
        r.events
            .iter()
            .any(|e| matches!(e, Event::OperationEnded { counted: false, .. }))
    );
    // Hop durations: direct readings count, Maestro feedback never does.
    assert!(r.events.iter().any(|e| matches!(
        e,
        Event::HopEnded {
            counted: true,
            via: Via::Direct,
            ..
        }
    )));
    let r = f.apply(
        batch(
            false,
            t(6),
            vec![
                obs("c2", Hop::HostedCluster)
                    .via(Via::Maestro)
                    .state("Available", Phase::Ready)
                    .created(t(0)),
            ],
        ),
        t(6),
    );
    assert!(r.events.iter().any(|e| matches!(
        e,
        Event::HopEnded {
            counted: false,
            via: Via::Maestro,
            ..
        }
    )));
}
