//! The instants of a cluster's plan drawn from its own stream: each hop of
//! its creation, its deletion, its day 2.

use super::*;

/// A creation's planned instants, each hop's delay drawn in world seconds
/// (docs/design/11-simulated-world.md §11.3), and the instants a creation
/// fault would use instead.
#[derive(Clone, Copy)]
pub(super) struct CreationTimes {
    pub(super) cs_created: Ms,
    pub(super) cs_pending: Ms,
    pub(super) cs_installing: Ms,
    pub(super) rp_provisioning: Ms,
    pub(super) bundle_created: Ms,
    pub(super) bundle_applied: Ms,
    pub(super) bundle_available: Ms,
    pub(super) mw_available: Ms,
    pub(super) hc_infra_ready: Ms,
    pub(super) hc_etcd_available: Ms,
    pub(super) hc_kas_available: Ms,
    pub(super) hc_available: Ms,
    pub(super) hc_completed: Ms,
    pub(super) np_machines: Ms,
    pub(super) np_ready: Ms,
    pub(super) cs_ready: Ms,
    pub(super) rp_succeeded: Ms,
    pub(super) cs_error: Ms,
    pub(super) rp_failed: Ms,
    pub(super) hc_invalid_image: Ms,
}

impl CreationTimes {
    /// Drawn from the cluster's own stream in a fixed order: a seed's
    /// plans must not move (`plan_tests.rs`).
    pub(super) fn draw(params: &FleetParams, rng: &mut ChaCha8Rng, created: Ms) -> CreationTimes {
        let mut at = |base: Ms, lo: f64, hi: f64| base + params.ms(rng.random_range(lo..hi));
        let cs_created = at(created, 2.0, 8.0);
        let cs_pending = at(cs_created, 8.0, 25.0);
        let cs_installing = at(cs_created, 30.0, 60.0);
        let rp_provisioning = at(cs_installing, 2.0, 15.0);
        let bundle_created = at(cs_created, 10.0, 22.0);
        let bundle_applied = at(bundle_created, 2.0, 8.0);
        let bundle_available = at(bundle_applied, 2.0, 10.0);
        let mw_available = at(bundle_applied, 5.0, 50.0);
        let hc_infra_ready = at(bundle_applied, 30.0, 90.0);
        let hc_etcd_available = at(hc_infra_ready, 60.0, 150.0);
        let hc_kas_available = at(hc_etcd_available, 30.0, 120.0);
        let hc_available = at(bundle_applied, 360.0, 720.0).max(hc_kas_available + 1000);
        let hc_completed = at(hc_available, 60.0, 240.0);
        let np_machines = at(hc_available, 30.0, 120.0);
        let np_ready = at(np_machines, 60.0, 180.0);
        let cs_ready = at(hc_available, 10.0, 60.0);
        let rp_succeeded = at(cs_ready, 5.0, 30.0);
        let cs_error = at(cs_installing, 30.0, 300.0);
        let rp_failed = at(cs_error, 5.0, 30.0);
        let hc_invalid_image = at(bundle_applied, 10.0, 60.0);
        CreationTimes {
            cs_created,
            cs_pending,
            cs_installing,
            rp_provisioning,
            bundle_created,
            bundle_applied,
            bundle_available,
            mw_available,
            hc_infra_ready,
            hc_etcd_available,
            hc_kas_available,
            hc_available,
            hc_completed,
            np_machines,
            np_ready,
            cs_ready,
            rp_succeeded,
            cs_error,
            rp_failed,
            hc_invalid_image,
        }
    }
}

/// When a cluster's deletion is requested, `lifetime` (world seconds) after
/// its creation, and when Clusters Service begins uninstalling, the bundle
/// is marked deleted and goes, Clusters Service lets the cluster go and the
/// RP its resource, in that order.
pub(super) fn draw_deletion(
    params: &FleetParams,
    rng: &mut ChaCha8Rng,
    created: Ms,
    lifetime: (f64, f64),
) -> [Ms; 6] {
    let mut at = |base: Ms, lo: f64, hi: f64| base + params.ms(rng.random_range(lo..hi));
    let delete_requested = at(created, lifetime.0, lifetime.1);
    let cs_uninstalling = at(delete_requested, 2.0, 10.0);
    let bundle_deleted = at(cs_uninstalling, 30.0, 120.0);
    let bundle_gone = at(bundle_deleted, 10.0, 60.0);
    let cs_gone = at(bundle_gone, 10.0, 60.0);
    let rp_gone = at(cs_gone, 2.0, 15.0);
    [
        delete_requested,
        cs_uninstalling,
        bundle_deleted,
        bundle_gone,
        cs_gone,
        rp_gone,
    ]
}

/// A healthy cluster's day 2 from `done` (its creation's end), with the
/// fault it draws, if any.
pub(super) fn draw_day2(
    params: &FleetParams,
    index: u64,
    done: Ms,
    pools: usize,
    version: &'static str,
) -> (Day2, Option<FaultKind>) {
    day2::draw(&Day2Draw {
        seed: params.seed,
        speed: params.speed,
        salt: DAY2_SALT,
        index,
        done,
        pools,
        pool_prefix: "np-",
        version,
        may_fault: params.faults,
        rp_updating: params.rp_updating,
        pool_fault: Some(FaultKind::NodePoolNeverReachesIgnition),
        cs_node_pool_error: params.cs_node_pool_error,
    })
}
