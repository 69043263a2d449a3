//! The exporter against the simulated world on one manual clock, end to end:
//! the world serves its real HTTP APIs, the real RP frontend, Clusters Service
//! and Maestro sources read them, and the store's model decides from the same
//! clock. No sleeps: the test moves the clock one poll step, polls each source
//! once, ticks the model, and then every hop of every cluster must equal the
//! world's ground truth at that instant, and every in-flight creation past its
//! target must be late — exactly, with no tolerance beyond the poll step.

use crate::common::store;
use crate::common::world as testworld;
use std::time::Duration;

use hcp_flow::demo::{self};
use hcp_flow::model::{Hop, ModelConfig, Phase, SloOutcome};
use hcp_flow::sim::{FaultKind, SimClock, World, WorldConfig};
use hcp_flow::sources::clusters_service::{self, ClustersServiceSource};
use hcp_flow::sources::http::HttpClient;
use hcp_flow::sources::maestro::{self, MaestroSource};
use hcp_flow::sources::rp_frontend::RpFrontendSource;
use jiff::Timestamp;

const CLUSTERS: usize = 40;
const STEP: Duration = Duration::from_secs(20);
const STEPS: usize = 120;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hop_equals_the_truth_at_every_step_of_a_manual_clock() {
    let _machine = crate::common::load::share();
    crate::common::init();
    let t0: Timestamp = "2026-03-01T12:00:00Z".parse().unwrap();
    let clock = SimClock::manual(t0);
    let world = World::new(
        WorldConfig {
            speed: 1.0,
            churn: false,
            ..testworld::demo(CLUSTERS, 7)
        },
        clock.clone(),
    );
    let endpoints = world.serve().await.unwrap();
    let config = demo::demo_config(&testworld::settings(world.config()), &world, &endpoints);
    let target = config.slo.creation_target;
    let store = store::builder()
        .model(ModelConfig {
            targets: hcp_flow::model::OperationTargets::default()
                .with(hcp_flow::model::OperationKind::Create, target),
            terminal_hops: config.terminal_hops(),
            hop_budgets: config.slo.hop_budgets,
            ..ModelConfig::default()
        })
        .sources(&["rp_frontend", "clusters_service", "maestro"])
        .clock(clock.clone())
        .build();
    let ctx = |name: &str| store.source_context(name);
    let client = |name: &str, http| HttpClient::new(name, http, store.exporter_metrics()).unwrap();
    let rp_cfg = config.sources.rp_frontend.clone().unwrap();
    let cs_cfg = config.sources.clusters_service.clone().unwrap();
    let maestro_cfg = config.sources.maestro.clone().unwrap();
    let mut rp = RpFrontendSource::with_client(
        rp_cfg.clone(),
        ctx("rp_frontend"),
        client("rp_frontend", &rp_cfg.http),
    );
    let mut cs = ClustersServiceSource::with_client(
        cs_cfg.clone(),
        ctx("clusters_service"),
        client("clusters_service", &cs_cfg.http),
    );
    let mut bundles = MaestroSource::with_client(
        maestro_cfg.clone(),
        ctx("maestro"),
        client("maestro", &maestro_cfg.http),
    );

    let mut compared = 0usize;
    let mut late_checked = 0usize;
    let mut failed_seen = std::collections::BTreeSet::new();
    for step in 0..STEPS {
        if step > 0 {
            clock.advance(STEP);
        }
        let now = clock.now();
        // The world answers a rare burst of at most three 5xx (counted by
        // request, not by time): a source retries at the same instant.
        let mut attempts = 0;
        while !cs.poll(clusters_service::PollKind::Full).await {
            attempts += 1;
        }
        while !rp.poll_all().await {
            attempts += 1;
        }
        while !bundles.poll(maestro::PollKind::Full).await {
            attempts += 1;
        }
        assert!(attempts <= 9, "step {step}: {attempts} failed polls");
        store.tick_at(now);
        assert!(store.ready());

        let truth = world.truth();
        let mut mismatches = Vec::new();
        for cluster in &truth.clusters {
            let id = &cluster.cluster_id;
            let seen = store.with_timeline(id, |t| {
                let hops: Vec<(Hop, Phase)> = t.hops.iter().map(|(h, s)| (*h, s.phase)).collect();
                (hops, t.slo, t.in_flight(), t.created_at.at)
            });
            let Some((hops, slo, in_flight, created_at)) = seen else {
                mismatches.push(format!("{id}: in truth, not in the exporter"));
                continue;
            };
            for (hop, want) in &cluster.hops {
                compared += 1;
                let got = hops.iter().find(|(h, _)| h == hop).map(|(_, p)| *p);
                if got != Some(want.phase) {
                    mismatches.push(format!(
                        "{id} {hop}: truth {:?} ({}), exporter {got:?}, fault {:?}",
                        want.phase, want.state, cluster.fault
                    ));
                }
                if want.phase == Phase::Failed
                    && let Some(fault) = cluster.fault
                {
                    failed_seen.insert(format!("{fault:?}"));
                }
            }
            // Late the moment an in-flight creation passes its target.
            assert_eq!(created_at, cluster.created_at, "{id}: upstream start time");
            if in_flight {
                let elapsed = Duration::try_from(now.duration_since(created_at.timestamp()))
                    .unwrap_or_default();
                let want = (elapsed >= target).then_some(SloOutcome::Late);
                assert_eq!(slo, want, "{id} at step {step}: {elapsed:?} of {target:?}");
                late_checked += usize::from(want.is_some());
            }
        }
        assert!(
            mismatches.is_empty(),
            "step {step} at {now}:\n{}",
            mismatches.join("\n")
        );
    }
    assert!(compared > CLUSTERS * STEPS * 3, "compared only {compared}");
    assert!(late_checked > 0, "no creation was late while in flight");
    for fault in [
        FaultKind::ClustersServiceError,
        FaultKind::HostedClusterDegraded,
    ] {
        assert!(
            failed_seen.contains(&format!("{fault:?}")),
            "{fault:?} never showed a failed hop: {failed_seen:?}"
        );
    }
}
