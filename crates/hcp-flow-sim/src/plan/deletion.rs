//! A cluster's deletion in its plan: when each upstream lets its object go,
//! and the deletion faults (docs/design/11-simulated-world.md §11.9).

use super::*;

/// The deletion on the management cluster and the deletion's faults, from
/// their own stream (docs/design/11-simulated-world.md §11.9). The agent deletes the
/// HostedCluster seconds after its bundle is marked deleted; HyperShift
/// takes one to four minutes to destroy the cloud resources and clear the
/// finalizer; the ManifestWorks go seconds later, and only then does Maestro
/// let the bundle go, Clusters Service the cluster and the RP its resource.
pub(super) fn deletion(params: &FleetParams, p: &mut Plan) {
    let (Some(requested), Some(uninstalling), Some(bundle_deleted)) =
        (p.delete_requested, p.cs_uninstalling, p.bundle_deleted)
    else {
        return;
    };
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed ^ DELETION_SALT);
    rng.set_stream(p.index);
    let draw = rng.random_range(0.0..1.0);
    let stuck = params.ms(rng.random_range(STUCK_DELETION_S.0..STUCK_DELETION_S.1));
    let mut at = |base: Ms, lo: f64, hi: f64| base + params.ms(rng.random_range(lo..hi));
    let error_after = at(uninstalling, 30.0, 120.0);
    let failed_after = at(error_after, 5.0, 30.0);
    let hc_deleting = at(bundle_deleted, 1.0, 5.0);
    let hc_gone = at(hc_deleting, 60.0, 240.0);
    let dependents_gone = hc_deleting + (hc_gone - hc_deleting) / 2;
    let mw_gone = at(hc_gone, 2.0, 10.0);
    let bundle_gone = at(mw_gone, 2.0, 10.0);
    // A cluster whose creation failed, or that never reached a management
    // cluster, is deleted as before; only a healthy one draws a fault.
    if params.faults && p.fault.is_none() && p.cs_created.is_some() && p.cs_error.is_none() {
        let kinds = [
            FaultKind::HostedClusterFinalizerStuck,
            FaultKind::ManifestWorkAgentGone,
            FaultKind::ClustersServiceUninstallError,
            FaultKind::RpStuckDeleting,
        ];
        let slot = (draw / (DELETION_FAULT_SHARE / kinds.len() as f64)) as usize;
        p.fault = kinds.get(slot).copied();
    }
    let _ = requested;
    // The later steps keep their spacing after whatever delayed them.
    let shift = |p: &mut Plan, new_bundle_gone: Ms| {
        let delta = new_bundle_gone - p.bundle_gone.unwrap_or(new_bundle_gone);
        p.bundle_gone = Some(new_bundle_gone);
        p.cs_gone = p.cs_gone.map(|t| t + delta.max(0));
        p.rp_gone = p.rp_gone.map(|t| t + delta.max(0));
    };
    match p.fault {
        Some(FaultKind::HostedClusterFinalizerStuck) => {
            let hc_gone = hc_gone + stuck;
            let mw_gone = mw_gone + stuck;
            p.hc_deleting = Some(hc_deleting);
            p.hc_dependents_gone = Some(dependents_gone);
            p.hc_gone = Some(hc_gone);
            p.mw_gone = Some(mw_gone);
            shift(p, bundle_gone + stuck);
        }
        Some(FaultKind::ManifestWorkAgentGone) => {
            // Nothing on the management cluster moves until the agent is
            // back; then everything goes at once.
            let back = bundle_deleted + stuck;
            p.hc_deleting = Some(back);
            p.hc_dependents_gone = Some(back);
            p.hc_gone = Some(back);
            p.mw_gone = Some(back);
            shift(p, back + (bundle_gone - mw_gone));
        }
        Some(FaultKind::ClustersServiceUninstallError) => {
            // The retry deletes the bundles; every later step moves with it.
            let retry = error_after + stuck;
            let delta = retry - bundle_deleted;
            p.cs_uninstall_error = Some(error_after);
            p.rp_delete_failed = Some(failed_after);
            p.bundle_deleted = Some(retry);
            p.hc_deleting = Some(hc_deleting + delta);
            p.hc_dependents_gone = Some(dependents_gone + delta);
            p.hc_gone = Some(hc_gone + delta);
            p.mw_gone = Some(mw_gone + delta);
            shift(p, bundle_gone + delta);
        }
        Some(FaultKind::RpStuckDeleting) => {
            p.hc_deleting = Some(hc_deleting);
            p.hc_dependents_gone = Some(dependents_gone);
            p.hc_gone = Some(hc_gone);
            p.mw_gone = Some(mw_gone);
            shift(p, bundle_gone);
            p.rp_gone = p.rp_gone.map(|t| t + stuck);
        }
        _ => {
            p.hc_deleting = Some(hc_deleting);
            p.hc_dependents_gone = Some(dependents_gone);
            p.hc_gone = Some(hc_gone);
            p.mw_gone = Some(mw_gone);
            shift(p, bundle_gone.max(p.bundle_gone.unwrap_or(bundle_gone)));
        }
    }
}
