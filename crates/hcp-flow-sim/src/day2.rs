//! Day-2 operations (docs/design/11-simulated-world.md §11.10): after a healthy creation
//! completed, some clusters add a node pool, remove one, upgrade their
//! control plane and then their pools. Drawn from streams of their own
//! (salted per world), so every draw of the creation and the deletion is
//! what it was without them.
//!
//! Timeline (world seconds, divided by the speed): a pool is added 3–8 min
//! after the creation completed and is Ready 3–6 min later
//! (`ReachedIgnitionEndpoint`, `AllMachinesReady`, `AllNodesHealthy`, then
//! `Ready`); a pool is removed 3–10 min after the completion (or 1–5 min
//! after the added pool was ready) and is gone 2–5 min later; the control
//! plane's upgrade is asked for 5–12 min after the completion, HyperShift's
//! history entry for it starts 10–30 s later and completes 8–15 min after
//! that; each pool's upgrade starts 1–3 min after the control plane's
//! completed and takes 5–10 min.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::FaultKind;
use super::kube::objects::{
    KubeAddedPool, KubeExtras, KubePoolRemoval, KubePoolUpgrade, KubeUpgrade, MachinesPending,
};

/// Milliseconds since the Unix epoch (the plans' `Ms`).
type Ms = i64;

const MINUTE: f64 = 60.0;
/// Shares of healthy clusters that add a pool, remove one, upgrade.
const ADD_SHARE: f64 = 0.25;
const REMOVE_SHARE: f64 = 0.15;
const UPGRADE_SHARE: f64 = 0.25;
/// Of the clusters that add a pool, the share whose pool never gets nodes.
const POOL_FAULT_SHARE: f64 = 0.20;
/// Of the clusters that add a pool and draw no other fault, the share whose
/// pool Clusters Service fails (`Day2Draw::cs_node_pool_error`).
const CS_NODE_POOL_ERROR_SHARE: f64 = 0.15;
/// Of the clusters that upgrade, the shares whose control plane's upgrade
/// stays Partial, and whose first pool's upgrade never ends.
const UPGRADE_STUCK_SHARE: f64 = 0.15;
const POOL_UPGRADE_STUCK_SHARE: f64 = 0.15;
/// Of the clusters that upgrade and draw no other fault, the share whose
/// first pool's upgrade Clusters Service fails (`Day2Draw::cs_node_pool_error`).
const CS_POOL_UPGRADE_ERROR_SHARE: f64 = 0.15;

/// The release a cluster of `version` upgrades to (x.y.z; `None`: none
/// offered). 4.20.0 is the self-managed hub's release.
pub(crate) fn next_version(version: &str) -> Option<&'static str> {
    match version {
        "4.19.7" => Some("4.19.9"),
        "4.19.9" => Some("4.20.2"),
        "4.20.0" => Some("4.20.2"),
        "4.20.2" => Some("4.20.5"),
        _ => None,
    }
}

/// HyperShift's `UpdatingVersion` message for an upgrade to `to` (static:
/// the targets are the table's).
pub(crate) fn updating_message(to: &str) -> &'static str {
    match to {
        "4.19.9" => "Updating version in progress. Target version: 4.19.9",
        "4.20.2" => "Updating version in progress. Target version: 4.20.2",
        "4.20.5" => "Updating version in progress. Target version: 4.20.5",
        _ => "Updating version in progress.",
    }
}

/// A pool added after the creation: its NodePool's times (real ms; `None`:
/// never).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AddedPool {
    /// Its index among the cluster's pools (after the creation's).
    pub pool: usize,
    pub short: String,
    pub replicas: u32,
    /// The user's request: the ARM nodePool's `systemData.createdAt`, and
    /// Clusters Service's node pool, `validating`, from here ...
    pub requested: Ms,
    /// ... `pending` from here (then `installing` from its bundle's creation).
    pub cs_pending: Ms,
    /// The NodePool's creationTimestamp (ARO: its bundle's first report).
    pub created: Ms,
    pub ignition: Option<Ms>,
    pub machines: Option<Ms>,
    pub nodes: Option<Ms>,
    pub ready: Option<Ms>,
}

/// A pool added after the creation that Clusters Service fails before it
/// creates anything (its validation: quota, subnet): no bundle, no
/// NodePool; only the RP and Clusters Service show it (ARO only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FailedPool {
    /// Its index among the cluster's pools (after the creation's; it is
    /// not one of `Plan::pools`, which hold what reaches a management
    /// cluster).
    pub pool: usize,
    pub short: String,
    pub replicas: u32,
    /// The user's request: the ARM nodePool's `systemData.createdAt` and
    /// Clusters Service's node pool `validating` ...
    pub requested: Ms,
    /// ... `error` from here (the RP `Failed`).
    pub error: Ms,
}

/// A pool removed after the creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PoolRemoval {
    pub pool: usize,
    /// ARO: its bundle's `deleted_at` (Clusters Service deletes the pool),
    /// its ManifestWork's deletionTimestamp.
    pub requested: Ms,
    /// The NodePool's deletionTimestamp.
    pub deleting: Ms,
    /// The NodePool is gone.
    pub gone: Ms,
    /// ARO: its ManifestWork, then its bundle, go.
    pub work_gone: Ms,
    pub bundle_gone: Ms,
}

/// The control plane's upgrade.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Upgrade {
    pub from: &'static str,
    pub to: &'static str,
    /// `status.version.desired` names the target from here; the RP says
    /// `Updating`.
    pub requested: Ms,
    /// Clusters Service says `updating` from here ...
    pub cs_updating: Ms,
    /// ... the new history entry's `startedTime` ...
    pub started: Ms,
    /// ... its `completionTime` (`None`: stuck Partial) ...
    pub completed: Option<Ms>,
    /// ... and Clusters Service is `ready` again, the RP `Succeeded`.
    pub cs_ready: Option<Ms>,
    pub rp_succeeded: Option<Ms>,
    /// The RP's `provisioningState` is `Updating` until `rp_succeeded`
    /// (else it stays `Succeeded`: `Day2Config::rp_updating`).
    pub rp_reports_updating: bool,
}

/// One pool's upgrade, after the control plane's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PoolUpgrade {
    pub pool: usize,
    pub to: &'static str,
    /// `spec.release.image` names the target; `UpdatingVersion` True.
    pub started: Ms,
    /// `status.version` is the target, `UpdatingVersion` removed (`None`:
    /// never).
    pub done: Option<Ms>,
    /// Clusters Service put the pool in `error` here, during the upgrade
    /// ([`FaultKind::CsNodePoolUpgradeError`]); the RP says `Failed`.
    pub cs_error: Option<Ms>,
}

/// What a cluster does after its creation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Day2 {
    pub added: Option<AddedPool>,
    /// The pool added instead of `added` when Clusters Service fails it.
    pub failed: Option<FailedPool>,
    pub removal: Option<PoolRemoval>,
    pub upgrade: Option<Upgrade>,
    pub pool_upgrades: Vec<PoolUpgrade>,
}

impl Day2 {
    /// The pool's upgrade, if it has one.
    pub fn pool_upgrade(&self, pool: usize) -> Option<&PoolUpgrade> {
        self.pool_upgrades.iter().find(|u| u.pool == pool)
    }

    /// The version pool `pool` runs at `t` (its upgrade done), else `base`.
    pub fn pool_version(&self, pool: usize, base: &'static str, t: Ms) -> &'static str {
        match self.pool_upgrade(pool) {
            Some(u) if u.done.is_some_and(|d| d <= t) => u.to,
            _ => base,
        }
    }

    /// The version pool `pool`'s spec asks for at `t`.
    pub fn pool_target(&self, pool: usize, base: &'static str, t: Ms) -> &'static str {
        match self.pool_upgrade(pool) {
            Some(u) if u.started <= t => u.to,
            _ => base,
        }
    }

    /// Every instant something of the cluster's day 2 changes what pool
    /// `pool`'s status (`Some`) or the HostedCluster's (`None`) shows.
    pub fn status_events(&self, pool: Option<usize>) -> Vec<Ms> {
        match pool {
            None => self
                .upgrade
                .iter()
                .flat_map(|u| [Some(u.requested), Some(u.started), u.completed])
                .flatten()
                .collect(),
            Some(i) => {
                let mut out: Vec<Ms> = self
                    .added
                    .iter()
                    .filter(|a| a.pool == i)
                    .flat_map(|a| [Some(a.created), a.ignition, a.machines, a.nodes, a.ready])
                    .flatten()
                    .collect();
                out.extend(
                    self.pool_upgrades
                        .iter()
                        .filter(|u| u.pool == i)
                        .flat_map(|u| [Some(u.started), u.done])
                        .flatten(),
                );
                out
            }
        }
    }

    /// Drop what would begin at or after the cluster's deletion began: the
    /// user does not change a cluster they deleted.
    pub fn before(mut self, deletion: Option<Ms>) -> Day2 {
        let Some(d) = deletion else {
            return self;
        };
        // Judged by the NodePool's creation, as before the pool had a
        // request time, so every world keeps its operations.
        if self.added.as_ref().is_some_and(|a| a.created >= d) {
            self.added = None;
        }
        if self.failed.as_ref().is_some_and(|f| f.requested >= d) {
            self.failed = None;
        }
        if self.removal.as_ref().is_some_and(|r| r.requested >= d) {
            self.removal = None;
        }
        if self.upgrade.as_ref().is_some_and(|u| u.requested >= d) {
            self.upgrade = None;
            self.pool_upgrades.clear();
        }
        self.pool_upgrades.retain(|u| u.started < d);
        self
    }
}

/// What decides a cluster's day 2.
pub(crate) struct Day2Draw<'a> {
    /// The stream: the world's seed, salted, and the cluster's index.
    pub seed: u64,
    pub salt: u64,
    /// World seconds per real second: every delay is divided by it.
    pub speed: f64,
    pub index: u64,
    /// When the creation completed (everything ready).
    pub done: Ms,
    /// The creation's pools.
    pub pools: usize,
    /// How an added pool is named: `<prefix><n>`.
    pub pool_prefix: &'a str,
    pub version: &'static str,
    /// Whether a day-2 fault may be drawn (faults on, the cluster healthy
    /// and without any other fault).
    pub may_fault: bool,
    /// The fault of a pool added that never gets nodes (`None`: none on
    /// this platform).
    pub pool_fault: Option<FaultKind>,
    /// The RP says `Updating` during the control plane's upgrade.
    pub rp_updating: bool,
    /// [`FaultKind::CsNodePoolError`] may be drawn (ARO, when
    /// `Day2Config::cs_node_pool_error` asks).
    pub cs_node_pool_error: bool,
}

/// The day-2 operations of one cluster, and its day-2 fault.
pub(crate) fn draw(d: &Day2Draw<'_>) -> (Day2, Option<FaultKind>) {
    let mut rng = ChaCha8Rng::seed_from_u64(d.seed ^ d.salt);
    rng.set_stream(d.index);
    let mut u = || rng.random_range(0.0..1.0f64);
    // World seconds → real milliseconds, as the plans count them.
    let ms = |world_s: f64| (world_s * 1000.0 / d.speed).round() as Ms;
    // Every value is drawn whatever is used, so each keeps its place.
    let (r_add, r_remove, r_upgrade, r_pool_fault, r_upgrade_fault, r_which) =
        (u(), u(), u(), u(), u(), u());
    let added_replicas: u32 = if u() < 0.5 { 2 } else { 3 };
    let mut at = |base: Ms, lo: f64, hi: f64| base + ms(lo + (hi - lo) * u());
    let added_created = at(d.done, 3.0 * MINUTE, 8.0 * MINUTE);
    let ready_after = at(0, 3.0 * MINUTE, 6.0 * MINUTE);
    let ignition = added_created + (ready_after as f64 * 0.5) as Ms;
    let machines = added_created + (ready_after as f64 * 0.8) as Ms;
    let nodes = added_created + (ready_after as f64 * 0.95) as Ms;
    let ready = added_created + ready_after;
    let remove_existing = at(d.done, 3.0 * MINUTE, 10.0 * MINUTE);
    let remove_added = at(ready, 1.0 * MINUTE, 5.0 * MINUTE);
    let deleting_after = at(0, 1.0, 5.0);
    let gone_after = at(deleting_after, 100.0, 280.0);
    let work_gone_after = at(gone_after, 2.0, 10.0);
    let bundle_gone_after = at(work_gone_after, 2.0, 10.0);
    let requested = at(d.done, 5.0 * MINUTE, 12.0 * MINUTE);
    let cs_updating = at(requested, 2.0, 10.0);
    let started = at(requested, 10.0, 30.0);
    let completed = at(started, 8.0 * MINUTE, 15.0 * MINUTE);
    let cs_ready = at(completed, 10.0, 60.0);
    let rp_succeeded = at(cs_ready, 5.0, 30.0);
    let pool_starts: Vec<(Ms, Ms)> = (0..4)
        .map(|_| {
            let start = at(completed, 1.0 * MINUTE, 3.0 * MINUTE);
            (start, at(start, 5.0 * MINUTE, 10.0 * MINUTE))
        })
        .collect();
    // Drawn last, so every draw above keeps its value: the added pool's
    // request leads its NodePool by the time Clusters Service validates
    // it and Maestro delivers its bundle.
    let request_lead = at(0, 15.0, 45.0);
    let pending_after = at(0, 3.0, 10.0);
    let error_after = at(0, 10.0, 60.0);

    let target = next_version(d.version);
    let adds = r_add < ADD_SHARE;
    let upgrades = r_upgrade < UPGRADE_SHARE && target.is_some();
    let fault = day2_fault(d, (adds, upgrades), (r_pool_fault, r_upgrade_fault));

    let mut out = Day2::default();
    let cs_failed = fault == Some(FaultKind::CsNodePoolError);
    let pool_stuck = adds && fault.is_some() && (fault == d.pool_fault || cs_failed);
    let pool_requested = added_created - request_lead;
    if adds && cs_failed {
        out.failed = Some(FailedPool {
            pool: d.pools,
            short: format!("{}{}", d.pool_prefix, d.pools + 1),
            replicas: added_replicas,
            requested: pool_requested,
            error: pool_requested + error_after,
        });
    } else if adds {
        out.added = Some(AddedPool {
            pool: d.pools,
            short: format!("{}{}", d.pool_prefix, d.pools + 1),
            replicas: added_replicas,
            requested: pool_requested,
            cs_pending: pool_requested + pending_after,
            created: added_created,
            ignition: (!pool_stuck).then_some(ignition),
            machines: (!pool_stuck).then_some(machines),
            nodes: (!pool_stuck).then_some(nodes),
            ready: (!pool_stuck).then_some(ready),
        });
    }
    // An existing pool goes only where another stays; the added one once
    // it was ready.
    let removed = if r_remove >= REMOVE_SHARE {
        None
    } else if adds && !pool_stuck && (r_which < 0.5 || d.pools < 2) {
        Some((d.pools, remove_added))
    } else if d.pools >= 2 {
        Some((d.pools - 1, remove_existing))
    } else {
        None
    };
    out.removal = removed.map(|(pool, requested)| {
        let deleting = requested + deleting_after;
        PoolRemoval {
            pool,
            requested,
            deleting,
            gone: requested + gone_after,
            work_gone: requested + work_gone_after,
            bundle_gone: requested + bundle_gone_after,
        }
    });
    if let (true, Some(to)) = (upgrades, target) {
        let stuck = fault == Some(FaultKind::UpgradeStuckPartial);
        out.upgrade = Some(Upgrade {
            from: d.version,
            to,
            requested,
            cs_updating,
            started,
            completed: (!stuck).then_some(completed),
            cs_ready: (!stuck).then_some(cs_ready),
            rp_succeeded: (!stuck).then_some(rp_succeeded),
            rp_reports_updating: d.rp_updating,
        });
        if !stuck {
            // Every pool there then, but one being removed; the added one
            // when it was ready before its turn.
            let total = d.pools + usize::from(out.added.is_some());
            for (pool, (start, done)) in (0..total).zip(pool_starts) {
                let is_removed = out.removal.as_ref().is_some_and(|r| r.pool == pool);
                let ready_before = out
                    .added
                    .as_ref()
                    .filter(|a| a.pool == pool)
                    .is_none_or(|a| a.ready.is_some_and(|r| r < start));
                if is_removed || !ready_before {
                    continue;
                }
                // Clusters Service fails the first pool's upgrade 10–60 s
                // in; its NodePool never reports the target either.
                let cs_error = (pool == 0 && fault == Some(FaultKind::CsNodePoolUpgradeError))
                    .then_some(start + error_after);
                let stuck = pool == 0 && fault == Some(FaultKind::NodePoolStuckUpdating)
                    || cs_error.is_some();
                out.pool_upgrades.push(PoolUpgrade {
                    pool,
                    to,
                    started: start,
                    done: (!stuck).then_some(done),
                    cs_error,
                });
            }
        }
    }
    (out, fault)
}

/// The day-2 fault a cluster gets, from the draws every cluster makes (so
/// each keeps its place in the stream): a stuck added pool, a stuck
/// upgrade or pool upgrade, and, where asked, Clusters Service failing an
/// added pool or a pool's upgrade in place of no fault.
fn day2_fault(
    d: &Day2Draw<'_>,
    (adds, upgrades): (bool, bool),
    (r_pool_fault, r_upgrade_fault): (f64, f64),
) -> Option<FaultKind> {
    let mut fault = None;
    if d.may_fault {
        if adds && r_pool_fault < POOL_FAULT_SHARE {
            fault = d.pool_fault;
        }
        if fault.is_none() && upgrades {
            if r_upgrade_fault < UPGRADE_STUCK_SHARE {
                fault = Some(FaultKind::UpgradeStuckPartial);
            } else if r_upgrade_fault < UPGRADE_STUCK_SHARE + POOL_UPGRADE_STUCK_SHARE {
                fault = Some(FaultKind::NodePoolStuckUpdating);
            }
        }
        // Only where no other fault was drawn, from the pool fault's value
        // past its share: with the flag off every cluster keeps its draw.
        if fault.is_none()
            && d.cs_node_pool_error
            && adds
            && (POOL_FAULT_SHARE..POOL_FAULT_SHARE + CS_NODE_POOL_ERROR_SHARE)
                .contains(&r_pool_fault)
        {
            fault = Some(FaultKind::CsNodePoolError);
        }
        // Likewise from the upgrade fault's value past its shares.
        let pool_upgrade_faults = UPGRADE_STUCK_SHARE + POOL_UPGRADE_STUCK_SHARE;
        if fault.is_none()
            && d.cs_node_pool_error
            && upgrades
            && (pool_upgrade_faults..pool_upgrade_faults + CS_POOL_UPGRADE_ERROR_SHARE)
                .contains(&r_upgrade_fault)
        {
            fault = Some(FaultKind::CsNodePoolUpgradeError);
        }
    }
    fault
}

/// A cluster's day-2 operations as a management cluster shows them (both
/// worlds): pools by their short names, times the instants the world
/// changes at (the same as the Maestro view and the ground truth); the
/// objects show them in whole seconds once reached
/// ([`KubeExtras::as_served`], docs/design/11-simulated-world.md §11.10).
pub(crate) fn kube_extras(
    d: &Day2,
    hosted_cluster_name: Option<String>,
    version: Option<&'static str>,
    pending: Option<MachinesPending>,
    name: impl Fn(usize) -> String,
) -> KubeExtras {
    let at = |ms: Ms| jiff::Timestamp::from_millisecond(ms).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let opt = |ms: Option<Ms>| ms.map(at);
    KubeExtras {
        hosted_cluster_name,
        version: version.map(str::to_string),
        upgrade: d.upgrade.as_ref().map(|u| KubeUpgrade {
            to: u.to.to_string(),
            requested: at(u.requested),
            started: at(u.started),
            completed: opt(u.completed),
        }),
        added_pool: d.added.as_ref().map(|a| KubeAddedPool {
            pool: a.short.clone(),
            replicas: a.replicas,
            created: at(a.created),
            ignition: opt(a.ignition),
            machines: opt(a.machines),
            nodes: opt(a.nodes),
            ready: opt(a.ready),
            pending,
        }),
        removal: d.removal.as_ref().map(|r| KubePoolRemoval {
            pool: name(r.pool),
            deleting: at(r.deleting),
            gone: at(r.gone),
            work_deleting: None,
            work_gone: None,
        }),
        pool_upgrades: d
            .pool_upgrades
            .iter()
            .map(|u| KubePoolUpgrade {
                pool: name(u.pool),
                to: u.to.to_string(),
                started: at(u.started),
                done: opt(u.done),
            })
            .collect(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;

    fn draw_of(seed: u64, index: u64, pools: usize) -> (Day2, Option<FaultKind>) {
        draw(&Day2Draw {
            seed,
            salt: 1,
            speed: 1.0,
            index,
            done: 0,
            pools,
            pool_prefix: "np-",
            version: "4.19.9",
            may_fault: true,
            pool_fault: Some(FaultKind::NodePoolNeverReachesIgnition),
            rp_updating: false,
            cs_node_pool_error: false,
        })
    }

    #[test]
    fn the_clusters_service_pool_error_takes_only_healthy_adders_when_asked() {
        let mut taken = 0;
        for i in 0..2000 {
            let (off, off_fault) = draw_of(5, i, 2);
            let (on, on_fault) = draw(&Day2Draw {
                seed: 5,
                salt: 1,
                speed: 1.0,
                index: i,
                done: 0,
                pools: 2,
                pool_prefix: "np-",
                version: "4.19.9",
                may_fault: true,
                pool_fault: Some(FaultKind::NodePoolNeverReachesIgnition),
                rp_updating: false,
                cs_node_pool_error: true,
            });
            assert!(off.failed.is_none());
            if on_fault == Some(FaultKind::CsNodePoolUpgradeError) {
                assert_eq!(off_fault, None, "a healthy cluster's");
                continue;
            }
            if on_fault != Some(FaultKind::CsNodePoolError) {
                assert_eq!((&on, on_fault), (&off, off_fault));
                continue;
            }
            taken += 1;
            assert_eq!(off_fault, None, "a healthy cluster's");
            let f = on.failed.as_ref().unwrap();
            let a = off.added.as_ref().unwrap();
            // The pool it would have added, failed 10–60 s after its request.
            assert_eq!(
                (f.pool, &f.short, f.requested),
                (a.pool, &a.short, a.requested)
            );
            assert!((10_000..=60_000).contains(&(f.error - f.requested)));
            assert!(on.added.is_none());
            assert!(on.removal.as_ref().is_none_or(|r| r.pool < f.pool));
            assert!(on.pool_upgrades.iter().all(|u| u.pool < f.pool));
        }
        assert!((20..200).contains(&taken), "{taken}");
    }

    #[test]
    fn an_added_pool_is_asked_for_before_its_node_pool_exists() {
        for i in 0..500 {
            if let Some(a) = draw_of(6, i, 1).0.added {
                let lead = a.created - a.requested;
                assert!((15_000..=45_000).contains(&lead), "{lead}");
                assert!(a.requested < a.cs_pending && a.cs_pending < a.created - 2_000);
            }
        }
    }

    /// The management cluster's objects of a cluster upgrading (control
    /// plane and pool) and adding a pool, every change half a second into
    /// its second, drawn at `t` (ms).
    fn drawn_at(t: Ms) -> Vec<serde_json::Value> {
        let (spec, x) = half_second_day2();
        super::super::kube::objects_with(&spec, &x, jiff::Timestamp::from_millisecond(t).unwrap())
    }

    /// The day 2 [`drawn_at`] draws: created at 0, completed at 20 min.
    pub(crate) fn half_second_day2() -> (super::super::kube::KubeClusterSpec, KubeExtras) {
        let spec = super::super::kube::KubeClusterSpec::healthy(
            "c1",
            crate::kube::ClusterLayout::Aro,
            jiff::Timestamp::UNIX_EPOCH,
        );
        let s = |sec: i64| sec * 1000 + 500;
        let d = Day2 {
            added: Some(AddedPool {
                pool: 1,
                short: "np-2".to_string(),
                replicas: 2,
                requested: s(1300),
                cs_pending: s(1305),
                created: s(1330),
                ignition: Some(s(1400)),
                machines: Some(s(1450)),
                nodes: Some(s(1480)),
                ready: Some(s(1500)),
            }),
            upgrade: Some(Upgrade {
                from: "4.19.7",
                to: "4.19.9",
                requested: s(1600),
                cs_updating: s(1605),
                started: s(1620),
                completed: Some(s(2200)),
                cs_ready: Some(s(2230)),
                rp_succeeded: Some(s(2250)),
                rp_reports_updating: true,
            }),
            pool_upgrades: vec![PoolUpgrade {
                pool: 0,
                to: "4.19.9",
                started: s(2300),
                done: Some(s(2700)),
                cs_error: None,
            }],
            ..Day2::default()
        };
        let x = kube_extras(&d, None, Some("4.19.7"), None, |_| "workers".to_string());
        (spec, x)
    }

    fn of_kind<'a>(
        objects: &'a [serde_json::Value],
        kind: &str,
        name: &str,
    ) -> &'a serde_json::Value {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    }

    #[test]
    fn the_management_cluster_shows_each_day2_change_at_its_instant_in_whole_seconds() {
        let hc = |t: Ms| of_kind(&drawn_at(t), "HostedCluster", "name-c1").clone();
        let desired = |t: Ms| hc(t)["status"]["version"]["desired"]["version"].clone();
        let newest = |t: Ms| hc(t)["status"]["version"]["history"][0].clone();
        // The request: not before its instant, though its second began.
        assert_eq!(desired(1_600_499), "4.19.7");
        assert_eq!(desired(1_600_500), "4.19.9");
        // The history entry: started at its instant, dated in whole seconds.
        assert_eq!(newest(1_620_499)["version"], "4.19.7");
        assert_eq!(newest(1_620_500)["state"], "Partial");
        assert_eq!(newest(1_620_500)["startedTime"], "1970-01-01T00:27:00Z");
        // Completed at its instant, not half a second before (what the
        // Maestro view and the ground truth say).
        assert_eq!(newest(2_200_499)["state"], "Partial");
        assert_eq!(newest(2_200_500)["state"], "Completed");
        assert_eq!(newest(2_200_500)["completionTime"], "1970-01-01T00:36:40Z");
        // The pool's upgrade and the added pool likewise.
        let pool = |t: Ms, name: &str| of_kind(&drawn_at(t), "NodePool", name).clone();
        let updating = |t: Ms| {
            pool(t, "name-c1-workers")["status"]["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["type"] == "UpdatingVersion")
        };
        assert!(!updating(2_300_499));
        assert!(updating(2_300_500));
        assert!(updating(2_700_499));
        assert!(!updating(2_700_500));
        assert!(
            !drawn_at(1_330_499)
                .iter()
                .any(|o| o["metadata"]["name"] == "name-c1-np-2")
        );
        let added = pool(1_330_500, "name-c1-np-2");
        assert_eq!(
            added["metadata"]["creationTimestamp"],
            "1970-01-01T00:22:10Z"
        );
        let ready = |t: Ms| {
            pool(t, "name-c1-np-2")["status"]["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["type"] == "Ready")
                .cloned()
                .unwrap()
        };
        assert_eq!(ready(1_500_499)["status"], "False");
        assert_eq!(ready(1_500_500)["status"], "True");
        assert_eq!(
            ready(1_500_500)["lastTransitionTime"],
            "1970-01-01T00:25:00Z"
        );
    }

    #[test]
    fn the_version_table_moves_forward() {
        assert_eq!(next_version("4.19.7"), Some("4.19.9"));
        assert_eq!(next_version("4.19.9"), Some("4.20.2"));
        assert_eq!(next_version("4.20.2"), Some("4.20.5"));
        assert_eq!(next_version("4.20.0"), Some("4.20.2"));
        assert_eq!(next_version("4.20.5"), None);
    }

    #[test]
    fn shares_and_healthy_durations_stay_inside_the_targets() {
        let (mut adds, mut removes, mut upgrades) = (0, 0, 0);
        let min = |ms: Ms| ms as f64 / 60_000.0;
        for i in 0..2000 {
            let (d, fault) = draw_of(3, i, 2);
            if let Some(a) = &d.added {
                adds += 1;
                if let Some(r) = a.ready {
                    assert!((3.0..=8.0).contains(&min(a.created)));
                    assert!((3.0..=6.0).contains(&min(r - a.created)));
                    assert!(min(r - a.created) < 20.0);
                    let order = [a.ignition, a.machines, a.nodes, a.ready];
                    assert!(order.windows(2).all(|w| w[0] < w[1]), "{a:?}");
                }
            }
            if let Some(r) = &d.removal {
                removes += 1;
                assert!(min(r.bundle_gone - r.requested) < 15.0);
                assert!(r.deleting < r.gone && r.gone < r.work_gone);
            }
            if let Some(u) = &d.upgrade {
                upgrades += 1;
                if let Some(c) = u.completed {
                    assert!(min(c - u.requested) < 60.0);
                    assert!(u.started > u.requested);
                }
                for p in &d.pool_upgrades {
                    assert!(p.started > u.completed.unwrap());
                    if let Some(done) = p.done {
                        assert!(min(done - p.started) < 45.0);
                    } else {
                        assert_eq!(fault, Some(FaultKind::NodePoolStuckUpdating));
                    }
                }
            }
        }
        let share = |n: i32| n as f64 / 2000.0;
        assert!((0.2..0.3).contains(&share(adds)), "{adds}");
        assert!((0.1..0.2).contains(&share(removes)), "{removes}");
        assert!((0.2..0.3).contains(&share(upgrades)), "{upgrades}");
    }

    #[test]
    fn one_pool_alone_is_never_removed_and_faults_hit_what_they_name() {
        for i in 0..2000 {
            let (d, fault) = draw_of(4, i, 1);
            if let Some(r) = &d.removal {
                let added = d.added.as_ref().unwrap();
                assert_eq!(r.pool, added.pool);
                assert!(r.requested > added.ready.unwrap());
            }
            match fault {
                Some(FaultKind::NodePoolNeverReachesIgnition) => {
                    assert_eq!(d.added.as_ref().unwrap().ready, None)
                }
                Some(FaultKind::UpgradeStuckPartial) => {
                    assert_eq!(d.upgrade.as_ref().unwrap().completed, None);
                    assert!(d.pool_upgrades.is_empty());
                }
                Some(FaultKind::NodePoolStuckUpdating) => {
                    assert_eq!(d.pool_upgrade(0).unwrap().done, None)
                }
                None => {}
                other => panic!("{other:?}"),
            }
        }
    }
}
