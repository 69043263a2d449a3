//! The model at the edges an on-call engineer depends on, at start-up: the
//! first load reads the same whichever source lists first, and a restart
//! keeps what only the exporter observed (times, verdicts, completions).

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use super::edge_tests::{RID, config, cs, slo, t};
use super::testing::{Obs, batch, obs, rp};
use super::*;

// ---- the first load ----------------------------------------------------

/// The batches of one start: RP, CS, and the management side, each a
/// source's first sync.
fn first_syncs() -> Vec<Batch> {
    let now = t(53);
    vec![
        batch(
            true,
            now,
            vec![
                rp(RID).state("Succeeded", Phase::Ready).created(t(0)).since(t(5)),
                rp("/subscriptions/s-1/resourcegroups/rg/providers/microsoft.redhatopenshift/hcpopenshiftclusters/beta")
                    .state("Accepted", Phase::Pending)
                    .created(t(40)),
            ],
        ),
        batch(true, now, vec![cs("cs-1").state("ready", Phase::Ready).created(t(0)), cs_beta()]),
        batch(
            true,
            now,
            vec![
                obs("cs-1", Hop::HostedCluster).state("Available", Phase::Ready).since(t(5)),
                // No creation time of its own: its start is the creation's,
                // which the RP moves earlier whenever it lists.
                obs("cs-2", Hop::HostedCluster).state("Partial", Phase::Progressing),
            ],
        ),
        batch(
            true,
            now,
            vec![obs("cs-1", Hop::NodePool).object("np1").state("Ready", Phase::Ready).since(t(6))],
        ),
    ]
}

fn cs_beta() -> Obs {
    obs("cs-2", Hop::ClustersService)
        .state("installing", Phase::Progressing)
        .created(t(41))
        .resource_id("/subscriptions/s-1/resourcegroups/rg/providers/microsoft.redhatopenshift/hcpopenshiftclusters/beta")
}

/// What a load ends with: each timeline's verdict, outcome and times.
fn summary(f: &Fleet) -> Vec<String> {
    f.iter()
        .map(|tl| {
            format!(
                "{} slo={:?} outcome={:?} created={} completed={:?} hops={:?}",
                tl.cluster_id,
                tl.slo,
                tl.outcome,
                tl.created_at.at,
                tl.completed_at,
                tl.hops
                    .iter()
                    .map(|(h, s)| (*h, s.phase, s.since, s.ready_at, s.started_at))
                    .collect::<Vec<_>>()
            )
        })
        .collect()
}

fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for rest in permutations(n - 1) {
        for i in 0..=rest.len() {
            let mut p = rest.clone();
            p.insert(i, n - 1);
            out.push(p);
        }
    }
    out
}

#[test]
fn the_first_load_reads_the_same_whichever_source_lists_first() {
    let mut outcomes = Vec::new();
    for order in permutations(first_syncs().len()) {
        let mut f = Fleet::new(config());
        f.begin_load(t(50));
        let syncs = first_syncs();
        // The sources list one after another over three minutes.
        let mut events = Vec::new();
        for (step, i) in order.iter().enumerate() {
            let now = t(50 + step as i64);
            events.extend(f.apply(syncs[*i].clone(), now).events);
            events.extend(f.tick(now).events);
        }
        events.extend(f.finish_load(t(54)).events);
        events.extend(f.tick(t(70)).events);
        outcomes.push((order, summary(&f), slo(&events)));
    }
    let (first_order, want, want_events) = outcomes[0].clone();
    for (order, got, got_events) in &outcomes {
        assert_eq!(got, &want, "order {order:?} against {first_order:?}");
        assert_eq!(got_events, &want_events, "order {order:?}");
    }
    // cs-1 was created at 0 and completed at 5: good, whatever came first.
    assert!(want[0].starts_with("cs-1 slo=Some(Good)"), "{want:?}");
    // cs-2 (created 40, started before this instance) is late at 60 (the RP created it at 40), during
    // the run: counted once.
    assert_eq!(want_events, vec![(SloOutcome::Late, true)]);
}

#[test]
fn a_verdict_due_before_the_load_began_is_settled_silently() {
    let mut f = Fleet::new(config());
    f.begin_load(t(50));
    f.apply(
        batch(
            true,
            t(50),
            vec![
                obs("c1", Hop::HostedCluster)
                    .state("Partial", Phase::Progressing)
                    .created(t(0)),
            ],
        ),
        t(50),
    );
    let r = f.finish_load(t(51));
    assert!(slo(&r.events).is_empty());
    assert_eq!(f.get("c1").unwrap().slo, Some(SloOutcome::Late));
}

// ---- restarts ----------------------------------------------------------

/// A run that observes times only the exporter knows: CS state changes
/// (no upstream time for them) and a HostedCluster that regressed after
/// completing.
fn first_run() -> Fleet {
    let mut f = Fleet::new(config());
    f.apply(
        batch(
            true,
            t(1),
            vec![cs("cs-1").state("validating", Phase::Pending).created(t(0))],
        ),
        t(1),
    );
    f.apply(batch(false, t(3), vec![cs("cs-1")]), t(3));
    f.apply(
        batch(
            false,
            t(9),
            vec![
                obs("cs-1", Hop::HostedCluster)
                    .state("Available", Phase::Ready)
                    .since(t(8)),
                rp(RID).state("Succeeded", Phase::Ready).created(t(0)),
            ],
        ),
        t(9),
    );
    f.apply(
        batch(
            false,
            t(30),
            vec![
                obs("cs-1", Hop::HostedCluster)
                    .state("Degraded", Phase::Progressing)
                    .since(t(29)),
            ],
        ),
        t(30),
    );
    f
}

fn second_run(memory: Memory, hc_state: (&str, Phase)) -> Fleet {
    let mut f = Fleet::new(config());
    f.restore(memory);
    f.begin_load(t(100));
    f.apply(
        batch(
            true,
            t(100),
            vec![
                rp(RID).state("Succeeded", Phase::Ready).created(t(0)),
                cs("cs-1").created(t(0)),
                obs("cs-1", Hop::HostedCluster)
                    .state(hc_state.0, hc_state.1)
                    .since(t(29)),
            ],
        ),
        t(100),
    );
    f.finish_load(t(100));
    f
}

/// Every cluster's memory, as the state store would keep it.
pub(super) fn memory_of(f: &Fleet) -> Memory {
    Memory {
        clusters: f
            .iter()
            .map(|tl| (tl.cluster_id.clone(), f.memory_of(&tl.cluster_id).unwrap()))
            .collect(),
    }
}

#[test]
fn a_restart_keeps_observed_times_verdicts_and_completion() {
    let before = first_run();
    let want = before.get("cs-1").unwrap().clone();
    assert_eq!(want.outcome, CreationOutcome::Succeeded);
    assert!(want.hop(Hop::ClustersService).unwrap().since.observed);
    // Survives serialisation, as the state store keeps it.
    let memory: Memory =
        serde_json::from_str(&serde_json::to_string(&memory_of(&before)).unwrap()).unwrap();

    let after = second_run(memory, ("Degraded", Phase::Progressing));
    let got = after.get("cs-1").unwrap();
    let cs_hop = |tl: &Timeline| tl.hop(Hop::ClustersService).unwrap().since;
    assert_eq!(cs_hop(got), cs_hop(&want), "observed CS since kept");
    assert_eq!(
        got.hop(Hop::RpFrontend).unwrap().since,
        want.hop(Hop::RpFrontend).unwrap().since
    );
    assert_eq!(
        got.completed_at, want.completed_at,
        "completion survives the regression"
    );
    assert_eq!(got.outcome, CreationOutcome::Succeeded);
    assert_eq!(got.slo, Some(SloOutcome::Good));
    assert_eq!(
        got.hop(Hop::HostedCluster).unwrap().ready_at,
        Some(t(8).into())
    );
    assert_eq!(after.unclaimed_memory(), 1, "kept until the cluster goes");
}

#[test]
fn a_restart_gives_state_that_changed_meanwhile_a_new_time() {
    let before = first_run();
    let mut memory = memory_of(&before);
    // The CS cluster changed state while the exporter was down: its
    // remembered time belongs to another reading.
    let m = memory.clusters.get_mut("cs-1").unwrap();
    for hop in &mut m.hops {
        for o in &mut hop.objects {
            o.state = "validating".to_string();
        }
        if hop.hop == Hop::ClustersService {
            hop.phase = Phase::Pending;
        }
    }
    let after = second_run(memory, ("Degraded", Phase::Progressing));
    let since = after
        .get("cs-1")
        .unwrap()
        .hop(Hop::ClustersService)
        .unwrap()
        .since;
    assert_eq!(since, TimeMark::observed(t(100)));
}

#[test]
fn memory_of_clusters_no_source_shows_again_is_dropped_after_the_load() {
    let before = first_run();
    let mut memory = memory_of(&before);
    memory
        .clusters
        .insert("gone-1".to_string(), ClusterMemory::default());
    let after = second_run(memory, ("Degraded", Phase::Progressing));
    assert_eq!(after.unclaimed_memory(), 1);
    assert!(after.memory_of("gone-1").is_none());
}

#[test]
fn a_hop_of_several_objects_is_ready_since_the_last_became_ready() {
    let mut f = Fleet::new(config());
    f.apply(
        batch(
            false,
            t(9),
            vec![
                obs("c1", Hop::NodePool)
                    .object("np-b")
                    .state("Ready", Phase::Ready)
                    .since(t(7)),
                obs("c1", Hop::NodePool)
                    .object("np-a")
                    .state("Ready", Phase::Ready)
                    .since(t(3)),
            ],
        ),
        t(9),
    );
    let hop = f.get("c1").unwrap().hop(Hop::NodePool).unwrap().clone();
    assert_eq!(hop.since, TimeMark::upstream(t(7)));
    assert_eq!(hop.ready_at, Some(t(7).into()));
}

#[test]
fn a_restart_keeps_a_multi_object_hops_time_when_its_objects_come_back_one_by_one() {
    // Two bundles: one ready (upstream time), one with no status yet (its
    // time observed). The hop is progressing since the second appeared.
    let bundle = |name: &str| obs("c1", Hop::MaestroBundle).object(name);
    let mut before = Fleet::new(config());
    before.apply(
        batch(
            false,
            t(5),
            vec![
                bundle("c1")
                    .state("Applied", Phase::Ready)
                    .since(t(2))
                    .created(t(1)),
                bundle("c1-np-1").state("no status yet", Phase::Pending),
            ],
        ),
        t(5),
    );
    let want = before
        .get("c1")
        .unwrap()
        .hop(Hop::MaestroBundle)
        .unwrap()
        .since;
    assert_eq!(want, TimeMark::observed(t(5)));

    let mut after = Fleet::new(config());
    after.restore(memory_of(&before));
    after.begin_load(t(50));
    // The ready one lists first: for a moment the hop reads ready.
    after.apply(
        batch(
            true,
            t(50),
            vec![
                bundle("c1")
                    .state("Applied", Phase::Ready)
                    .since(t(2))
                    .created(t(1)),
            ],
        ),
        t(50),
    );
    after.apply(
        batch(
            true,
            t(51),
            vec![bundle("c1-np-1").state("no status yet", Phase::Pending)],
        ),
        t(51),
    );
    after.finish_load(t(52));
    let got = after
        .get("c1")
        .unwrap()
        .hop(Hop::MaestroBundle)
        .unwrap()
        .since;
    assert_eq!(got, want);
    // After the load a new transition into that phase gets a new time.
    after.apply(
        batch(
            false,
            t(60),
            vec![
                bundle("c1-np-1")
                    .state("Applied", Phase::Ready)
                    .since(t(60)),
            ],
        ),
        t(60),
    );
    after.apply(
        batch(
            false,
            t(61),
            vec![bundle("c1-np-1").state("no status yet", Phase::Pending)],
        ),
        t(61),
    );
    let later = after
        .get("c1")
        .unwrap()
        .hop(Hop::MaestroBundle)
        .unwrap()
        .since;
    assert_eq!(later, TimeMark::observed(t(61)));
}

/// A fleet under `config` whose first sync, at 60, reads a cluster the RP
/// shows `Updating` since 55 and Clusters Service in `cs_state` since 55,
/// its HostedCluster available since 12.
fn first_sync_mid_update(config: ModelConfig, cs_state: &str) -> Fleet {
    let mut f = Fleet::new(config);
    f.apply(
        batch(
            true,
            t(60),
            vec![
                cs("cs-1")
                    .state(cs_state, Phase::Progressing)
                    .created(t(0))
                    .since(t(55)),
                obs("cs-1", Hop::HostedCluster)
                    .state("Available/Partial", Phase::Ready)
                    .since(t(12)),
                rp(RID)
                    .state("Updating", Phase::Progressing)
                    .created(t(0))
                    .since(t(55)),
            ],
        ),
        t(60),
    );
    f
}

/// An exporter started while a completed cluster upgrades reads the RP
/// `Updating` and Clusters Service `updating` (or the update validating or
/// pending there): the resource was provisioned before (ARM updates only
/// what succeeded), so its creation is done and is never counted when the
/// RP says `Succeeded` again.
#[test]
fn a_first_sync_during_an_update_takes_the_creation_for_done() {
    // Where Clusters Service completes a creation (read without the RP,
    // or named in `slo.terminal_hops`), its update validating or pending
    // says the same.
    let cs_terminal = ModelConfig {
        terminal_hops: vec![Hop::HostedCluster, Hop::ClustersService],
        ..config()
    };
    for cs_state in ["updating", "validating_update", "pending_update"] {
        let f = first_sync_mid_update(cs_terminal.clone(), cs_state);
        let timeline = f.get("cs-1").unwrap();
        assert_eq!(timeline.outcome, CreationOutcome::Succeeded, "{cs_state}");
        assert_eq!(
            timeline.completed_at,
            Some(Stamp::from(t(55))),
            "{cs_state}"
        );
    }
    let mut f = first_sync_mid_update(config(), "updating");
    let timeline = f.get("cs-1").unwrap();
    assert_eq!(timeline.outcome, CreationOutcome::Succeeded);
    assert_eq!(timeline.operation_in_flight(), None);
    let r = f.apply(
        batch(
            false,
            t(70),
            vec![
                rp(RID).state("Succeeded", Phase::Ready).since(t(70)),
                cs("cs-1").state("ready", Phase::Ready).since(t(70)),
            ],
        ),
        t(70),
    );
    assert!(
        r.events
            .iter()
            .all(|e| !matches!(e, Event::OperationEnded { .. } | Event::Slo { .. })),
        "{:?}",
        r.events
    );
    // A creation watched from its start still ends at Succeeded, not at an
    // RP still Provisioning.
    let mut g = Fleet::new(config());
    g.apply(
        batch(
            false,
            t(1),
            vec![
                cs("cs-2").created(t(0)),
                rp(RID)
                    .state("Provisioning", Phase::Progressing)
                    .created(t(0)),
                obs("cs-2", Hop::HostedCluster)
                    .state("Available", Phase::Ready)
                    .since(t(1)),
            ],
        ),
        t(1),
    );
    assert_eq!(g.get("cs-2").unwrap().outcome, CreationOutcome::InFlight);
}
