//! Scale-out by `shard.index`/`shard.total` (docs/design/08-scopes-and-scale-out.md §8.3): N
//! exporters over one world, each with its own shard, cover every cluster
//! exactly once — the union is what one unsharded exporter tracks, and no
//! cluster is tracked twice.

use crate::common::exporter;
use crate::common::world as testworld;
use std::collections::BTreeSet;
use std::time::Duration;

use hcp_flow::app::Exporter;
use hcp_flow::config::ShardConfig;
use hcp_flow::sim::WorldConfig;

fn tracked(exporter: &Exporter) -> BTreeSet<String> {
    exporter
        .store
        .with_timelines(|t| t.map(|t| t.cluster_id.clone()).collect())
}

fn synced(exporter: &Exporter) -> bool {
    exporter.store.source_status().iter().all(|s| s.synced)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_shards_cover_every_cluster_exactly_once() {
    // No churn: the fleet holds still while four exporters read it.
    let demo = testworld::start(WorldConfig {
        churn: false,
        not_handed_over: 0.05,
        ..testworld::demo(60, 23)
    })
    .await;
    let total = 3;
    let mut shards = Vec::new();
    for index in 0..total {
        let mut config = demo.config.clone();
        config.shard = ShardConfig { index, total };
        shards.push(
            exporter::with_config(&config)
                .time_scale(demo.speed())
                .start(),
        );
    }
    let whole = exporter::of_world(&demo).start();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !(synced(&whole) && shards.iter().all(synced)) {
        assert!(tokio::time::Instant::now() < deadline, "not synced in 60 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Two consecutive equal readings of everything: nothing in flight
    // between the exporters' polls.
    let mut previous = None;
    let reading = loop {
        let now = (
            tracked(&whole),
            shards.iter().map(tracked).collect::<Vec<_>>(),
        );
        if previous.as_ref() == Some(&now) {
            break now;
        }
        previous = Some(now);
        assert!(
            tokio::time::Instant::now() < deadline,
            "the fleet never held still"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let (all, parts) = reading;
    assert!(all.len() >= demo.world.config().clusters, "{}", all.len());
    let mut union = BTreeSet::new();
    for (index, part) in parts.iter().enumerate() {
        assert!(!part.is_empty(), "shard {index} tracks nothing");
        for id in part {
            assert!(union.insert(id.clone()), "{id} is tracked by two shards");
            assert_eq!(
                hcp_flow::model::shard_of(id, total),
                index as u32,
                "{id} tracked by shard {index}"
            );
        }
    }
    assert_eq!(
        union, all,
        "the shards together track what one exporter does"
    );
    eprintln!(
        "shards: {:?} of {} clusters",
        parts.iter().map(BTreeSet::len).collect::<Vec<_>>(),
        all.len()
    );
}
