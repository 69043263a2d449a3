//! A cluster's resource bundles in its plan: the HostedCluster's and one per
//! pool (docs/design/11-simulated-world.md §11.3).

use super::*;

/// The cluster's bundles: the HostedCluster's (its times are the plan's
/// `bundle_*` and `mw_available`), then one per pool, created within a few
/// seconds of it and reporting on their own (docs/design/11-simulated-world.md §11.3).
pub(super) fn bundles(params: &FleetParams, p: &Plan, hc_bundle_id: String) -> Vec<BundlePlan> {
    let frozen = |applied: Option<Ms>| {
        applied.filter(|_| p.fault == Some(FaultKind::MaestroStatusNotUpdated))
    };
    let events = |bundle: [Option<Ms>; 3], nested: &[Option<Ms>]| {
        let mut events: Vec<Ms> = bundle.iter().chain(nested).flatten().copied().collect();
        events.sort_unstable();
        events.dedup();
        events
    };
    let mut out = vec![BundlePlan {
        id: hc_bundle_id,
        name: p.cluster_id.clone(),
        pool: None,
        created: p.bundle_created,
        applied: p.bundle_applied,
        available: p.bundle_available,
        mw_available: p.mw_available,
        frozen: frozen(p.bundle_applied),
        status_events: events(
            [p.bundle_applied, p.bundle_available, p.mw_available],
            &[
                p.hc_infra_ready,
                p.hc_etcd_available,
                p.hc_kas_available,
                p.hc_invalid_image,
                p.hc_available,
                p.hc_lost.map(|(lost, _)| lost),
                p.hc_lost.map(|(_, back)| back),
                p.hc_completed,
            ]
            .into_iter()
            .chain(p.day2.status_events(None).into_iter().map(Some))
            .collect::<Vec<_>>(),
        ),
        removed: None,
    }];
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed ^ POOL_BUNDLE_SALT);
    rng.set_stream(p.index);
    for (i, pool) in p.pools.iter().enumerate() {
        let id = uuid(&mut rng);
        let mut at = |base: Ms, lo: f64, hi: f64| base + params.ms(rng.random_range(lo..hi));
        let (created, applied) = match p.day2.added.as_ref().filter(|a| a.pool == i) {
            // Added after the creation: its NodePool exists from the
            // agent's first report on its bundle.
            Some(a) => (a.created - params.ms(2.0), a.created),
            None => {
                let created = at(p.bundle_created, 0.5, 4.0);
                (created, at(created, 2.0, 8.0))
            }
        };
        let available = at(applied, 2.0, 10.0);
        let mw_available = at(applied, 5.0, 50.0);
        // The agent reports nothing for the whole cluster, or (NodePool
        // bundle fault) for the first pool's bundle alone.
        let reports = p.bundle_applied.is_some()
            && !(i == 0 && p.fault == Some(FaultKind::NodePoolBundleNeverApplied));
        let applied = reports.then_some(applied);
        let available = reports.then_some(available);
        let mw_available = reports.then_some(mw_available);
        out.push(BundlePlan {
            id,
            name: format!("{}-{}", p.cluster_id, pool.short),
            pool: Some(i),
            created,
            applied,
            available,
            mw_available,
            frozen: frozen(applied),
            status_events: events(
                [applied, available, mw_available],
                &p.day2
                    .status_events(Some(i))
                    .into_iter()
                    .map(Some)
                    .chain([p.np_machines, p.np_ready])
                    .collect::<Vec<_>>(),
            ),
            removed: p
                .day2
                .removal
                .as_ref()
                .filter(|r| r.pool == i)
                .map(|r| (r.requested, r.bundle_gone)),
        });
    }
    out
}
