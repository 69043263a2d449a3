//! A restarted exporter serves Maestro's last readings at once, says so, and
//! reconciles them with a paced list behind the stream (docs/design/03-timeline-model.md
//! §3.10), against the simulated world over real gRPC and HTTP.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use crate::common::exporter;
use crate::common::world as testworld;
use crate::maestro_stream::{mismatches, sample, until, world_config};
use hcp_flow::model::Hop;
use hcp_flow::sim::{Api, Fault, LatencyModel, WorldConfig};
use hcp_flow::state_store::{BUNDLE_IDS_FILE_NAME, READINGS_FILE_NAME};
use hcp_flow::store::Store;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hcp-flow-warm-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// The clusters that have a Maestro bundle in the store.
fn with_bundles(store: &Store) -> BTreeSet<String> {
    store.with_timelines(|timelines| {
        timelines
            .filter(|t| t.hop(Hop::MaestroBundle).is_some())
            .map(|t| t.cluster_id.clone())
            .collect()
    })
}

fn maestro_status(store: &Store) -> hcp_flow::store::SourceStatus {
    store
        .source_status()
        .into_iter()
        .find(|s| s.source == "maestro")
        .expect("the maestro source is declared")
}

/// The bundle ids a bundle-ids file names.
fn bundle_ids_in(path: &std::path::Path) -> BTreeSet<String> {
    let file = std::fs::File::open(path).expect("shutdown writes the bundle ids");
    let json: serde_json::Value =
        serde_json::from_reader(flate2::read::GzDecoder::new(file)).expect("gzip JSON");
    assert_eq!(json["format"], "hcp-flow/bundle-ids", "{}", json["format"]);
    assert_eq!(json["source"], "maestro");
    json["bundles"]
        .as_array()
        .expect("a list of bundles")
        .iter()
        .map(|b| {
            assert!(b["name"].is_string() && b["cluster"].is_string(), "{b}");
            b["id"].as_str().expect("an id").to_string()
        })
        .collect()
}

async fn metrics(url: &str) -> String {
    reqwest::get(format!("{url}/metrics"))
        .await
        .expect("/metrics answers")
        .text()
        .await
        .expect("/metrics is text")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_exporter_serves_maestros_last_readings_at_once_and_reconciles_them() {
    // Its assertions are latencies (a change shows within the read window
    // while the list pages), of a world, an exporter over real gRPC and
    // HTTP, and a list paced page by page: the machine nearly alone, as a
    // bench. With half of it (heavy), clean-clone CI runs beside other
    // worlds twice kept a new pool's read by id past the window.
    let _machine = crate::common::load::hog();
    // Pages that take Maestro some time, as at scale: a paced list pauses
    // a share of what a page took, so without latency it would end before
    // anything could be watched between its pages.
    let mut w = testworld::start_streaming(WorldConfig {
        latency: LatencyModel {
            base: Duration::from_millis(100),
            per_item: Duration::from_millis(1),
        },
        ..world_config()
    })
    .await;
    let dir = scratch("readings");
    w.config.state_dir = Some(dir.clone());
    // Only Maestro shows the hops it carries: no management cluster watch.
    w.config.sources.kube.clear();
    let maestro = w
        .config
        .sources
        .maestro
        .as_mut()
        .expect("maestro configured");
    maestro.http.full_relist_interval = Duration::from_secs(3600);
    // Small pages: the reconciling list after the restart runs for many
    // pages, paced, long enough to watch events applied between them.
    maestro.http.page_size = 3;

    let first = exporter::of_world(&w).serve_stoppable().await;
    until(
        "the first run's first sync",
        Duration::from_secs(60),
        || first.store.ready() && maestro_status(&first.store).up,
    )
    .await;
    let before = with_bundles(&first.store);
    assert!(
        before.len() > 50,
        "too few clusters with bundles: {before:?}"
    );
    first.stop().await;
    assert!(
        dir.join(READINGS_FILE_NAME).exists(),
        "shutdown writes the readings"
    );
    // And what the stream knew of each bundle, by id: read here as the
    // file's envelope says, not by the exporter's loader.
    let known_before = bundle_ids_in(&dir.join(BUNDLE_IDS_FILE_NAME));
    assert!(
        known_before.len() >= before.len(),
        "{} bundle ids for {} clusters",
        known_before.len(),
        before.len()
    );
    let read_by_id_before = w.world.maestro_bundles_read_by_id();

    // Maestro's REST API is down: only the readings can show its bundles.
    w.world.inject(Fault::Down { api: Api::Maestro });
    let second = exporter::of_world(&w).serve_stoppable().await;
    // At once: restored before any source ran.
    let restored = with_bundles(&second.store);
    let missing: Vec<_> = before.difference(&restored).collect();
    assert!(missing.is_empty(), "not restored: {missing:?}");
    // Its kinds (or the placeholder `*` before its task named them) show
    // `restored` until a list is tried; with the REST API down that fails
    // at once, and the kind says so (`failing`): never `pending`, never `ok`.
    let body = metrics(&second.url).await;
    let kinds: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with(r#"hcpflow_source_kind_info{source="maestro""#))
        .collect();
    assert!(!kinds.is_empty(), "{body}");
    for line in &kinds {
        assert!(
            line.contains(r#"state="restored""#) || line.contains(r#"state="failing""#),
            "{kinds:#?}"
        );
    }
    assert_eq!(
        sample(&body, "hcpflow_source_up", &[r#"source="maestro""#]),
        0.0,
        "nothing confirmed since the restart: down"
    );
    assert!(
        body.contains(r#"hcpflow_hop_phase{cluster_id=""#)
            && body.contains(r#"hop="maestro_bundle""#),
        "the bundles' phases are served"
    );
    // Ready (it serves state), marked restored; the load stays open.
    until(
        "/readyz with the others synced",
        Duration::from_secs(30),
        || second.store.ready(),
    )
    .await;
    let readyz: serde_json::Value = reqwest::get(format!("{}/readyz", second.url))
        .await
        .expect("/readyz answers")
        .json()
        .await
        .expect("/readyz is JSON");
    let maestro_json = readyz["sources"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["source"] == "maestro"))
        .unwrap_or_else(|| panic!("no maestro in {readyz}"));
    assert_eq!(maestro_json["restored"], true, "{readyz}");
    assert_eq!(maestro_json["up"], false, "{readyz}");
    assert!(second.store.loading(), "no verdict on unconfirmed readings");

    // Maestro is back: the reconciling list runs, paced, behind the stream,
    // and what changes meanwhile shows within a second.
    // The window opens once the list has shown a page: the source is
    // subscribed again then (its reconnects back off while Maestro is
    // down), and what changes from then on is heard.
    let unconfirmed_at_up = second.store.unconfirmed().len();
    w.world.inject(Fault::Up { api: Api::Maestro });
    until(
        "the reconciling list's first page",
        Duration::from_secs(60),
        || second.store.unconfirmed().len() < unconfirmed_at_up,
    )
    .await;
    let window = Duration::from_secs(4);
    // Only what changed in the window: what changed while the exporter was
    // down is the list's to bring, page by page.
    let (compared, changed, wrong) = mismatches(&w.world, &second.store, window, true).await;
    assert!(
        !maestro_status(&second.store).up,
        "the list should still page: make the pages smaller"
    );
    // A hop of several objects (a cluster's node pools, its bundles) that
    // still holds a restored reading of another object shows that reading
    // until the list reaches it: only those may differ.
    let unconfirmed = second.store.unconfirmed();
    let wrong: Vec<String> = wrong
        .into_iter()
        .filter(|line| {
            !unconfirmed
                .iter()
                .any(|(cluster, hop)| line.starts_with(&format!("{cluster} {hop}:")))
        })
        .collect();
    assert!(changed >= 3, "too few hops changed ({changed})");
    // The stream knew the restored bundles again: their events applied at
    // once, and none was read by id while the list paged.
    let read_since: BTreeSet<String> = w
        .world
        .maestro_bundles_read_by_id()
        .difference(&read_by_id_before)
        .cloned()
        .collect();
    let known_read: Vec<&String> = read_since.intersection(&known_before).collect();
    assert!(
        known_read.is_empty(),
        "restored bundles read by id: {known_read:?}"
    );
    assert!(
        wrong.is_empty(),
        "while the list pages, {} of {compared} differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    until(
        "the reconciling list to end",
        Duration::from_secs(120),
        || maestro_status(&second.store).up,
    )
    .await;
    let status = maestro_status(&second.store);
    assert!(!status.restored, "{status:?}");
    let body = metrics(&second.url).await;
    assert_eq!(
        sample(
            &body,
            "hcpflow_source_kind_info",
            &[r#"source="maestro""#, r#"state="restored""#]
        ),
        0.0,
        "{body}"
    );
    // The load ends at the model's next step (a delivery or its clock's
    // tick) once every source has listed.
    until(
        "the load to end once Maestro listed",
        Duration::from_secs(10),
        || !second.store.loading(),
    )
    .await;
    let (_, _, wrong) = mismatches(&w.world, &second.store, window, false).await;
    assert!(wrong.is_empty(), "after the list: {}", wrong.join("\n"));
    second.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------
// In process: what the readings file keeps, and how the store reconciles it.

use hcp_flow::model::testing::obs;
use hcp_flow::model::{Batch, ConditionStatus, HopView, ModelConfig, Phase, Via};
use hcp_flow::state_store::{ReadingsOf, StateStore, StateStoreMetrics};
use std::sync::Arc;

fn t(minutes: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_800_000_000 + minutes * 60).expect("a time")
}

fn maestro_store() -> Arc<Store> {
    crate::common::store::builder()
        .model(ModelConfig::default())
        .sources(&["maestro", "kube/mgmt-1"])
        .build()
}

fn from(source: &str, observations: Vec<hcp_flow::model::testing::Obs>) -> Batch {
    Batch {
        source: source.to_string(),
        initial: false,
        observed_at: t(10),
        observations: observations
            .into_iter()
            .map(hcp_flow::model::testing::Obs::build)
            .collect(),
    }
}

/// Two clusters as Maestro shows them (a bundle, and through it a
/// HostedCluster with a failure and a NodePool with replicas), and one
/// HostedCluster a management cluster watch shows.
fn fleet_batches() -> (Batch, Batch) {
    let maestro = from(
        "maestro",
        vec![
            obs("c1", Hop::MaestroBundle)
                .object("bundle-c1")
                .state("Applied", Phase::Ready)
                .created(t(1))
                .updated(t(3))
                .condition("Available", ConditionStatus::True, "Applied", t(2))
                .name("cluster-one")
                .platform("azure"),
            obs("c1", Hop::HostedCluster)
                .via(Via::Maestro)
                .state("Degraded", Phase::Progressing)
                .condition("Degraded", ConditionStatus::True, "ValidReleaseImage", t(4))
                .fails_after_budget(t(4), "ValidReleaseImage"),
            obs("c1", Hop::NodePool)
                .via(Via::Maestro)
                .object("np-1")
                .state("Progressing", Phase::Progressing)
                .replicas(3, 2, 1),
            obs("c2", Hop::MaestroBundle)
                .object("bundle-c2")
                .state("Applied", Phase::Ready)
                .created(t(1))
                .error("no_status", "the agent has not reported"),
        ],
    );
    let kube = from(
        "kube/mgmt-1",
        vec![
            obs("c1", Hop::HostedCluster)
                .state("Available", Phase::Ready)
                .since(t(5)),
        ],
    );
    (maestro, kube)
}

/// Every object Maestro delivers, by (cluster, hop, via, object).
fn maestro_objects(store: &Store) -> BTreeSet<(String, Hop, Via, String, String)> {
    store.with_timelines(|timelines| {
        timelines
            .flat_map(|t| {
                t.hops.iter().flat_map(move |(hop, h)| {
                    h.objects
                        .iter()
                        .filter(|((via, _), _)| ReadingsOf::Maestro.delivers(*hop, *via))
                        .map(move |((via, object), state)| {
                            (
                                t.cluster_id.clone(),
                                *hop,
                                *via,
                                object.clone(),
                                format!("{:?}", comparable(&state.view)),
                            )
                        })
                })
            })
            .collect()
    })
}

/// A view as a reading says it (the model keeps identities on the timeline).
fn comparable(view: &HopView) -> HopView {
    let mut view = view.clone();
    view.identity = None;
    view
}

fn scratch_store(name: &str) -> StateStore {
    StateStore::open(
        &scratch(name),
        StateStoreMetrics::register(&mut prometheus_client::registry::Registry::default()),
    )
    .expect("a state directory")
}

#[test]
fn the_readings_file_keeps_every_object_maestro_delivered_and_nothing_else() {
    let first = maestro_store();
    let (maestro, kube) = fleet_batches();
    first.apply_at(maestro, t(10));
    first.apply_at(kube, t(10));
    first.keep_readings("maestro", ReadingsOf::Maestro);
    assert!(!first.readings_dirty(), "nothing delivered since kept");
    first.apply_at(
        from(
            "maestro",
            vec![
                obs("c2", Hop::MaestroBundle)
                    .object("bundle-c2")
                    .state("Applied", Phase::Ready)
                    .created(t(1))
                    .error("no_status", "the agent has not reported"),
            ],
        ),
        t(11),
    );
    assert!(first.readings_dirty(), "a delivery makes them dirty");
    let state = scratch_store("roundtrip");
    let (source, of, timelines) = first.readings_snapshot().expect("kept");
    state
        .save_readings(&source, of, &timelines, t(12))
        .expect("written");
    assert!(!first.readings_dirty(), "a snapshot takes the change");

    let second = maestro_store();
    let mut chunks = 0;
    let restored = state
        .load_readings("maestro", &mut |chunk, written_at| {
            chunks += 1;
            assert_eq!(written_at, t(12));
            second.restore_readings("maestro", chunk, written_at);
        })
        .expect("readings restored");
    assert_eq!((restored.objects, chunks), (4, 1), "{restored:?}");
    assert_eq!(maestro_objects(&second), maestro_objects(&first));
    // The kube watch's HostedCluster is not Maestro's: not kept.
    let direct = second.with_timeline("c1", |t| {
        t.hop(Hop::HostedCluster)
            .map(|h| h.objects.iter().any(|((via, _), _)| *via == Via::Direct))
    });
    assert_eq!(direct, Some(Some(false)));
    // The identity comes back with the cluster.
    let name = second.with_timeline("c1", |t| {
        (t.identity.name.clone(), t.identity.platform.to_string())
    });
    assert_eq!(name, Some(("cluster-one".to_string(), "azure".to_string())));
    // Restored: ready for /readyz, not synced, not up.
    let status = maestro_status(&second);
    assert!(
        status.restored && !status.synced && !status.up,
        "{status:?}"
    );

    // Another source's file is not read as this one's: set aside.
    assert!(state.load_readings("other", &mut |_, _| {}).is_none());
    assert!(
        state.load_readings("maestro", &mut |_, _| {}).is_none(),
        "moved aside"
    );
}

#[test]
fn a_damaged_readings_file_is_set_aside_and_the_exporter_starts_without_it() {
    let state = scratch_store("damaged");
    let dir = scratch("damaged-probe");
    drop(dir);
    for (name, body) in [
        ("not gzip", b"{\"format\":".to_vec()),
        ("not json", {
            use std::io::Write;
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(b"{\"format\": \"hcp-flow/readings\", \"version\": 1, \"written_at\": ")
                .expect("written");
            gz.finish().expect("finished")
        }),
    ] {
        let path = state.path().with_file_name(READINGS_FILE_NAME);
        std::fs::write(&path, &body).expect("planted");
        let mut delivered = 0;
        assert!(
            state
                .load_readings("maestro", &mut |_, _| delivered += 1)
                .is_none(),
            "{name}"
        );
        assert_eq!(delivered, 0, "{name}");
        assert!(!path.exists(), "{name}: moved aside");
        assert!(
            path.with_file_name(hcp_flow::state_store::READINGS_IGNORED_FILE_NAME)
                .exists(),
            "{name}: kept to inspect"
        );
    }
}

#[test]
fn once_the_source_listed_what_it_did_not_deliver_again_is_gone_silently() {
    let first = maestro_store();
    let (maestro, _) = fleet_batches();
    first.apply_at(maestro, t(10));
    first.keep_readings("maestro", ReadingsOf::Maestro);
    let state = scratch_store("reconcile");
    let (source, of, timelines) = first.readings_snapshot().expect("kept");
    state
        .save_readings(&source, of, &timelines, t(12))
        .expect("written");

    let second = maestro_store();
    second.begin_load(Duration::from_secs(3600));
    state.load_readings("maestro", &mut |chunk, at| {
        second.restore_readings("maestro", chunk, at)
    });
    let health = second.health();
    health.declare("maestro", &["resource-bundles"]);
    assert_eq!(
        health.kind_state("maestro", "resource-bundles"),
        Some(hcp_flow::sources::health::KindState::restored)
    );
    // The list shows c1's bundle and HostedCluster again, c1's pool and c2
    // no more; what it asks for by name is what it has not shown yet.
    // (A first list's pages are silent, as the source sends them.)
    let mut page = from(
        "maestro",
        vec![
            obs("c1", Hop::MaestroBundle)
                .object("bundle-c1")
                .state("Applied", Phase::Ready),
            obs("c1", Hop::HostedCluster)
                .via(Via::Maestro)
                .state("Available", Phase::Ready),
        ],
    );
    page.initial = true;
    second.apply_at(page, t(13));
    use hcp_flow::sources::ObservationSink;
    let restored = second.restored("maestro", Hop::MaestroBundle);
    assert_eq!(
        restored.as_ref().map(|r| r.objects.clone()),
        Some(vec!["bundle-c2".to_string()])
    );
    assert_eq!(restored.map(|r| r.written_at), Some(t(12)));
    assert!(
        second.with_timeline("c2", |_| ()).is_some(),
        "kept until listed"
    );
    health.listed("maestro", "resource-bundles");
    health.listed("kube/mgmt-1", "*");
    second.tick_at(t(14));
    assert!(
        second.with_timeline("c2", |_| ()).is_none(),
        "gone after the list"
    );
    let pool = second.with_timeline("c1", |t| t.hop(Hop::NodePool).is_some());
    assert_eq!(pool, Some(false), "c1's pool is gone, its cluster stays");
    assert!(!maestro_status(&second).restored);
    assert_eq!(second.restored("maestro", Hop::MaestroBundle), None);
    // Silently: no operation ended, no SLO event counted.
    let body = second.scrape(hcp_flow::metrics::exposition::Format::Text);
    assert!(
        !body
            .lines()
            .any(|l| l.starts_with("hcpflow_operation_slo_events_total{") && !l.ends_with(" 0")),
        "{body}"
    );
}
