//! The simulated world's scenario and ground truth, driven by a manual clock.

use std::collections::BTreeMap;
use std::time::Duration;

use hcp_flow::model::{Hop, Phase};
use hcp_flow::sim::{FaultKind, LatencyModel, SimClock, Truth, World, WorldConfig};
use jiff::Timestamp;

fn t0() -> Timestamp {
    "2026-03-01T12:00:00Z".parse().unwrap()
}

fn cfg(clusters: usize, seed: u64, faults: bool, churn: bool) -> WorldConfig {
    WorldConfig {
        clusters,
        speed: 1.0,
        seed,
        faults,
        churn,
        latency: LatencyModel::none(),
        subscriptions: 3,
        not_handed_over: 0.0,
        failure_burst: None,
        kind: hcp_flow::sim::WorldKind::Aro,
    }
}

fn phase(truth: &Truth, id: &str, hop: Hop) -> Option<Phase> {
    truth
        .cluster(id)
        .and_then(|c| c.hops.get(&hop))
        .map(|h| h.phase)
}

#[test]
fn same_seed_same_world_other_seed_other_world() {
    let a = World::new(cfg(40, 9, true, true), SimClock::manual(t0()));
    let b = World::new(cfg(40, 9, true, true), SimClock::manual(t0()));
    let c = World::new(cfg(40, 10, true, true), SimClock::manual(t0()));
    assert_eq!(a.truth(), b.truth());
    assert_eq!(a.subscriptions(), b.subscriptions());
    assert_ne!(a.truth(), c.truth());
    for w in [&a, &b] {
        w.clock().advance(Duration::from_secs(3600));
    }
    assert_eq!(a.truth(), b.truth());
}

#[test]
fn at_start_some_are_done_and_many_in_flight() {
    let w = World::new(cfg(200, 1, false, false), SimClock::manual(t0()));
    let truth = w.truth();
    assert_eq!(truth.clusters.len(), 200);
    assert_eq!(truth.at, t0());
    let done = truth
        .clusters
        .iter()
        .filter(|c| c.completed_at.is_some())
        .count();
    assert!((80..=170).contains(&done), "{done} of 200 done at t0");
    for c in &truth.clusters {
        assert!(c.created_at <= t0() && c.created_at >= t0() - jiff::SignedDuration::from_mins(40));
        assert_eq!(
            c.hops[&Hop::RpFrontend].phase == Phase::Ready,
            c.hops[&Hop::RpFrontend].state == "Succeeded"
        );
        assert!(
            c.resource_id.contains("/resourceGroups/rg-HCP-Team"),
            "{}",
            c.resource_id
        );
        assert!(w.subscriptions().contains(&c.subscription_id));
        // Every cluster that is 30 s old has its CS cluster and its bundle.
        if c.created_at <= t0() - jiff::SignedDuration::from_secs(30) {
            assert!(
                c.hops.contains_key(&Hop::ClustersService)
                    && c.hops.contains_key(&Hop::MaestroBundle)
            );
        }
    }
    assert!(w.subscriptions().len() == 3);
}

#[test]
fn one_creation_walks_through_the_phase_table() {
    let clock = SimClock::manual(t0());
    let w = World::new(cfg(30, 4, false, false), clock.clone());
    // The youngest cluster was created moments before t0.
    let youngest = w
        .truth()
        .clusters
        .into_iter()
        .max_by_key(|c| c.created_at)
        .unwrap();
    clock.set(youngest.created_at);
    let id = youngest.cluster_id.clone();
    let mut seen: BTreeMap<Hop, Vec<Phase>> = BTreeMap::new();
    for _ in 0..(40 * 60) {
        let truth = w.truth();
        let c = truth.cluster(&id).unwrap();
        for (hop, h) in &c.hops {
            let v = seen.entry(*hop).or_default();
            if v.last() != Some(&h.phase) {
                v.push(h.phase);
            }
            assert_eq!(h.phase == Phase::Ready, h.ready_at.is_some(), "{hop} {h:?}");
        }
        clock.advance(Duration::from_secs(1));
    }
    use Phase::*;
    assert_eq!(seen[&Hop::RpFrontend], vec![Pending, Progressing, Ready]);
    assert_eq!(
        seen[&Hop::ClustersService],
        vec![Pending, Progressing, Ready]
    );
    assert_eq!(seen[&Hop::MaestroBundle], vec![Pending, Progressing, Ready]);
    assert_eq!(seen[&Hop::Manifestwork].last(), Some(&Ready));
    // Until a bundle's first status report its nested objects cannot be
    // read: the exporter shows them unknown (`no_status`) so they age.
    assert_eq!(seen[&Hop::HostedCluster], vec![Unknown, Progressing, Ready]);
    assert_eq!(seen[&Hop::NodePool], vec![Unknown, Progressing, Ready]);
    let c = w.truth().cluster(&id).cloned().unwrap();
    let completed = c.completed_at.unwrap();
    let took = completed.duration_since(c.created_at).as_secs();
    assert!((7 * 60..=16 * 60).contains(&took), "creation took {took}s");
    assert_eq!(
        completed,
        c.hops[&Hop::RpFrontend]
            .ready_at
            .unwrap()
            .max(c.hops[&Hop::HostedCluster].ready_at.unwrap())
    );
    assert!(!c.failed);
}

#[test]
fn speed_compresses_world_time() {
    let clock = SimClock::manual(t0());
    let mut fast = cfg(50, 2, false, false);
    fast.speed = 60.0;
    let w = World::new(fast, clock.clone());
    // Created within the last 40 world-minutes = 40 real seconds.
    assert!(
        w.truth()
            .clusters
            .iter()
            .all(|c| c.created_at >= t0() - jiff::SignedDuration::from_secs(40))
    );
    clock.advance(Duration::from_secs(30));
    let truth = w.truth();
    assert!(
        truth.clusters.iter().all(|c| c.completed_at.is_some()),
        "all done after 30 real s at 60x"
    );
}

#[test]
fn faults_follow_their_script() {
    let clock = SimClock::manual(t0());
    let w = World::new(cfg(600, 11, true, false), clock.clone());
    clock.advance(Duration::from_secs(3600));
    let truth = w.truth();
    // A healthy cluster may be in a day-2 operation: its hops wait there.
    let busy: std::collections::BTreeSet<String> = w
        .day2_operations()
        .into_iter()
        .filter(|o| o.ended.is_none())
        .map(|o| o.cluster_id)
        .collect();
    let mut counts: BTreeMap<FaultKind, usize> = BTreeMap::new();
    for c in &truth.clusters {
        let p = |hop| phase(&truth, &c.cluster_id, hop);
        match c.fault {
            None => {
                assert!(c.completed_at.is_some() && !c.failed);
                if !busy.contains(&c.cluster_id) {
                    assert!(c.hops.values().all(|h| h.phase == Phase::Ready), "{c:?}");
                }
            }
            Some(kind) => {
                *counts.entry(kind).or_default() += 1;
                match kind {
                    FaultKind::ClustersServiceError => {
                        assert_eq!(p(Hop::ClustersService), Some(Phase::Failed));
                        assert_eq!(c.hops[&Hop::ClustersService].state, "error");
                        assert_eq!(p(Hop::RpFrontend), Some(Phase::Failed));
                        assert!(c.failed && c.completed_at.is_none());
                    }
                    FaultKind::BundleNeverApplied => {
                        assert_eq!(p(Hop::MaestroBundle), Some(Phase::Pending));
                        // Never read, never known: unknown, and aging.
                        for hop in [Hop::Manifestwork, Hop::HostedCluster, Hop::NodePool] {
                            assert_eq!(p(hop), Some(Phase::Unknown), "{hop}");
                            assert_eq!(c.hops[&hop].state, "no_status");
                        }
                        assert_eq!(p(Hop::ClustersService), Some(Phase::Progressing));
                        assert!(!c.failed && c.completed_at.is_none());
                    }
                    FaultKind::NodePoolBundleNeverApplied => {
                        // The HostedCluster's bundle is ready, the first
                        // pool's has no status: the hop is neither.
                        assert_eq!(p(Hop::MaestroBundle), Some(Phase::Progressing));
                        assert_eq!(p(Hop::Manifestwork), Some(Phase::Unknown));
                        assert_eq!(p(Hop::NodePool), Some(Phase::Unknown));
                        assert_eq!(p(Hop::HostedCluster), Some(Phase::Ready));
                        assert!(c.completed_at.is_some() && !c.failed);
                    }
                    FaultKind::NotHandedOver => {
                        panic!("not_handed_over is off unless the config asks: {c:?}")
                    }
                    FaultKind::CsNodePoolError => {
                        // An added pool failed: the cluster's own creation
                        // is done, its hops ready.
                        assert!(c.completed_at.is_some() && !c.failed, "{c:?}");
                        assert_eq!(p(Hop::ClustersService), Some(Phase::Ready));
                    }
                    FaultKind::HostedClusterFinalizerStuck
                    | FaultKind::ManifestWorkAgentGone
                    | FaultKind::ClustersServiceUninstallError
                    | FaultKind::RpStuckDeleting => {
                        panic!("a deletion's fault in a world without deletions: {c:?}")
                    }
                    // Day 2: the creation completed; the operation after
                    // it waits at its hop.
                    FaultKind::NodePoolNeverReachesIgnition => {
                        assert!(c.completed_at.is_some() && !c.failed);
                        assert_eq!(p(Hop::NodePool), Some(Phase::Progressing));
                    }
                    FaultKind::UpgradeStuckPartial => {
                        assert!(c.completed_at.is_some() && !c.failed);
                        assert_eq!(p(Hop::HostedCluster), Some(Phase::Ready));
                        assert_eq!(c.hops[&Hop::HostedCluster].state, "Partial");
                        assert_eq!(c.hops[&Hop::ClustersService].state, "updating");
                        // The RP says Updating, as the world serves it by
                        // default.
                        assert_eq!(c.hops[&Hop::RpFrontend].state, "Updating");
                    }
                    FaultKind::NodePoolStuckUpdating => {
                        assert!(c.completed_at.is_some() && !c.failed);
                        assert_eq!(p(Hop::NodePool), Some(Phase::Ready));
                    }
                    FaultKind::CsNodePoolUpgradeError => {
                        // A pool's upgrade failed at Clusters Service: the
                        // cluster's own creation is done, its hops ready.
                        assert!(c.completed_at.is_some() && !c.failed, "{c:?}");
                        assert_eq!(p(Hop::ClustersService), Some(Phase::Ready));
                    }
                    FaultKind::KubeVirtMachinesPending
                    | FaultKind::NoFreeAgent
                    | FaultKind::ReleaseImageInvalid
                    | FaultKind::ManagedClusterNeverJoins
                    | FaultKind::AddedPoolVmUnschedulable
                    | FaultKind::AddedPoolNoFreeAgent => {
                        panic!("a fault of the self-managed hub in the ARO world: {c:?}")
                    }
                    FaultKind::MaestroStatusNotUpdated => {
                        assert_eq!(p(Hop::MaestroBundle), Some(Phase::Progressing));
                        assert_eq!(p(Hop::HostedCluster), Some(Phase::Progressing));
                        assert_eq!(p(Hop::ClustersService), Some(Phase::Ready));
                        assert_eq!(p(Hop::RpFrontend), Some(Phase::Ready));
                        assert!(c.completed_at.is_none());
                    }
                    FaultKind::HostedClusterDegraded => {
                        assert_eq!(p(Hop::HostedCluster), Some(Phase::Failed));
                        assert_eq!(p(Hop::RpFrontend), Some(Phase::Progressing));
                        assert!(c.failed);
                    }
                    FaultKind::NodePoolStuck => {
                        assert_eq!(p(Hop::NodePool), Some(Phase::Progressing));
                        assert_eq!(p(Hop::HostedCluster), Some(Phase::Ready));
                        assert!(c.completed_at.is_some());
                    }
                    FaultKind::HostedClusterUnavailable => {
                        // Completed first; the outage does not undo that.
                        assert!(c.completed_at.is_some() && !c.failed, "{c:?}");
                        assert!(matches!(
                            p(Hop::HostedCluster),
                            Some(Phase::Ready | Phase::Progressing)
                        ));
                    }
                    FaultKind::UnknownClustersServiceState
                    | FaultKind::UnknownProvisioningState => {
                        assert!(
                            c.completed_at.is_some(),
                            "unknown values do not stop the creation"
                        );
                    }
                }
            }
        }
    }
    for kind in [
        FaultKind::ClustersServiceError,
        FaultKind::BundleNeverApplied,
        FaultKind::MaestroStatusNotUpdated,
        FaultKind::HostedClusterDegraded,
        FaultKind::NodePoolStuck,
        FaultKind::NodePoolBundleNeverApplied,
    ] {
        let n = counts.get(&kind).copied().unwrap_or(0);
        assert!((18..=80).contains(&n), "{kind:?}: {n} of 600");
    }
    // Drawn from the fault-free share: about 3 % of the fleet.
    let lost = counts
        .get(&FaultKind::HostedClusterUnavailable)
        .copied()
        .unwrap_or(0);
    assert!(
        (6..=40).contains(&lost),
        "HostedClusterUnavailable: {lost} of 600"
    );
    assert!(
        counts
            .get(&FaultKind::UnknownClustersServiceState)
            .copied()
            .unwrap_or(0)
            > 0
    );
    assert!(
        counts
            .get(&FaultKind::UnknownProvisioningState)
            .copied()
            .unwrap_or(0)
            > 0
    );
}

#[test]
fn a_lost_control_plane_comes_back_and_the_creation_stays_completed() {
    let clock = SimClock::manual(t0());
    let w = World::new(cfg(600, 11, true, false), clock.clone());
    let id = w
        .truth()
        .clusters
        .iter()
        .filter(|c| c.fault == Some(FaultKind::HostedClusterUnavailable))
        // The youngest: its outage is still ahead.
        .max_by_key(|c| c.created_at)
        .map(|c| c.cluster_id.clone())
        .expect("a HostedClusterUnavailable cluster among 600");
    let mut phases: Vec<Phase> = Vec::new();
    let mut completed = None;
    for _ in 0..(3 * 60) {
        let truth = w.truth();
        let Some(c) = truth.cluster(&id) else { break };
        let hc = c.hops[&Hop::HostedCluster].phase;
        if phases.last() != Some(&hc) {
            phases.push(hc);
        }
        if let Some(at) = c.completed_at {
            assert_eq!(*completed.get_or_insert(at), at, "completion moved");
        }
        clock.advance(Duration::from_secs(60));
    }
    let tail: Vec<Phase> = phases
        .iter()
        .copied()
        .skip_while(|p| *p != Phase::Ready)
        .collect();
    assert!(
        tail.starts_with(&[Phase::Ready, Phase::Progressing, Phase::Ready]),
        "{phases:?}"
    );
    assert!(completed.is_some());
}

#[test]
fn unknown_enum_values_show_as_unknown_while_they_last() {
    let clock = SimClock::manual(t0());
    let w = World::new(cfg(600, 11, true, false), clock.clone());
    let mut seen = (false, false);
    for _ in 0..60 {
        let truth = w.truth();
        for c in &truth.clusters {
            match c.fault {
                Some(FaultKind::UnknownClustersServiceState) => {
                    let h = &c.hops[&Hop::ClustersService];
                    if h.state == "frobnicating" {
                        assert_eq!(h.phase, Phase::Unknown);
                        seen.0 = true;
                    }
                }
                Some(FaultKind::UnknownProvisioningState) => {
                    let h = &c.hops[&Hop::RpFrontend];
                    if h.state == "Migrating" {
                        assert_eq!(h.phase, Phase::Unknown);
                        seen.1 = true;
                    }
                }
                _ => {}
            }
        }
        clock.advance(Duration::from_secs(30));
    }
    assert_eq!(seen, (true, true));
}

/// Faulty clusters linger four times as long as healthy ones (about 40 % of
/// creations have a fault): churn replaces each cluster when it is gone, so
/// the population stays at the fleet's size instead of growing for hours
/// (the soak reads the exporter's memory against it).
#[test]
fn churn_with_faults_holds_the_population_at_the_fleet_size() {
    let clock = SimClock::manual(t0());
    let w = World::new(cfg(300, 11, true, true), clock.clone());
    let mut counts = Vec::new();
    for _ in 0..(5 * 60 / 2) {
        clock.advance(Duration::from_secs(120));
        counts.push(w.truth().clusters.len());
    }
    let (low, high) = (*counts.iter().min().unwrap(), *counts.iter().max().unwrap());
    assert!(
        low >= 297 && high <= 303,
        "population over five hours from {low} to {high}, not about 300: {counts:?}"
    );
}

#[test]
fn churn_keeps_the_population_and_deletes_through_every_hop() {
    let clock = SimClock::manual(t0());
    let w = World::new(cfg(200, 5, false, true), clock.clone());
    let first: Vec<String> = w
        .truth()
        .clusters
        .iter()
        .map(|c| c.cluster_id.clone())
        .collect();
    let mut saw_deleting = [false; 3];
    for _ in 0..(180 / 2) {
        clock.advance(Duration::from_secs(120));
        let truth = w.truth();
        let n = truth.clusters.len();
        assert!((150..=280).contains(&n), "population {n}");
        for c in &truth.clusters {
            for (i, hop) in [Hop::RpFrontend, Hop::ClustersService, Hop::MaestroBundle]
                .into_iter()
                .enumerate()
            {
                if c.hops.get(&hop).is_some_and(|h| h.phase == Phase::Deleting) {
                    saw_deleting[i] = true;
                }
            }
        }
    }
    assert_eq!(saw_deleting, [true; 3]);
    // Three hours later every initial cluster is gone and new ones exist.
    let truth = w.truth();
    assert!(first.iter().all(|id| truth.cluster(id).is_none()));
    assert!(truth.clusters.len() >= 150);
}

/// With churn, healthy clusters are deleted hop by hop within minutes, and
/// each deletion fault holds the hop its name says (docs/design/11-simulated-world.md §11.8).
#[test]
fn deletion_faults_follow_their_script() {
    let clock = SimClock::manual(t0());
    let w = World::new(cfg(300, 11, true, true), clock.clone());
    // fault name → (cluster id, fault_at) of the first seen.
    let mut seen: BTreeMap<String, (String, Timestamp)> = BTreeMap::new();
    let mut checked: BTreeMap<&str, usize> = BTreeMap::new();
    for _ in 0..36 {
        clock.advance(Duration::from_secs(300));
        let truth = w.truth();
        let ground = w.ground_truth();
        let now = ground.at;
        for item in &ground.items {
            let (Some(fault), Some(at)) = (item.fault, item.fault_at) else {
                continue;
            };
            seen.entry(fault.to_string())
                .or_insert((item.cluster_id.clone(), at));
            // Judge each once it has held for 10 world-minutes.
            if now < at + jiff::SignedDuration::from_mins(10) {
                continue;
            }
            let p = |hop| phase(&truth, &item.cluster_id, hop);
            let ok = match fault {
                "hosted_cluster_finalizer_stuck" | "manifestwork_agent_gone" => {
                    p(Hop::MaestroBundle) == Some(Phase::Deleting)
                        && p(Hop::ClustersService) == Some(Phase::Deleting)
                        && p(Hop::RpFrontend) == Some(Phase::Deleting)
                }
                "clusters_service_uninstall_error" => {
                    p(Hop::ClustersService) == Some(Phase::Failed)
                        && p(Hop::RpFrontend) == Some(Phase::Failed)
                        && p(Hop::MaestroBundle).is_some_and(|ph| ph != Phase::Deleting)
                }
                "rp_stuck_deleting" => {
                    p(Hop::RpFrontend) == Some(Phase::Deleting)
                        && p(Hop::ClustersService).is_none()
                        && p(Hop::MaestroBundle).is_none()
                }
                _ => continue,
            };
            assert!(
                ok,
                "{fault} on {} at {now}: {:?}",
                item.cluster_id,
                truth.cluster(&item.cluster_id)
            );
            *checked.entry(fault).or_default() += 1;
        }
    }
    for fault in [
        "hosted_cluster_finalizer_stuck",
        "manifestwork_agent_gone",
        "clusters_service_uninstall_error",
        "rp_stuck_deleting",
    ] {
        assert!(
            checked.get(fault).copied().unwrap_or(0) > 0,
            "{fault} never judged; seen {seen:?}"
        );
    }
}
