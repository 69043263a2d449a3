//! `hcp-flow demo --world self-managed` and `--world both`: the simulated
//! MCE hub read by the real exporter (kube watchers in `self_managed` mode
//! through the demo's kubeconfig), checked over HTTP against the world's
//! truth (docs/design/11-simulated-world.md §11.7).
//!
//! - What the hub serves: a MultiClusterEngine, HostedClusters of platforms
//!   KubeVirt, Agent and None in namespaces `clusters` and `hcp`, their
//!   control planes in `<namespace>-<name>`, ManagedClusters named like them,
//!   NodePools naming them, and Agents on the Agent platform.
//! - `/api/v1/clusters` shows every management-side hop of every cluster in
//!   the phase the truth gives, under the id the exporter must use, and each
//!   self-managed fault as the hop's phase, state and conditions show it.
//! - The public ground truth names every cluster the exporter shows, with
//!   the fault's expected alert and when it is due.
//! - `--world both` serves both worlds' clusters through one exporter.

use crate::common::exporter::{self, Served};
use crate::common::world::{self as testworld, TestWorld};
use hcp_flow::sim::WorldConfig;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use hcp_flow::demo::GROUND_TRUTH_PATH;
use hcp_flow::model::{Hop, Phase};
use hcp_flow::sim::hub::HUB_NAME;
use hcp_flow::sim::kube::ClusterLayout;
use hcp_flow::sim::{FaultKind, Truth, WorldKind};
use hcp_flow::sources::kube::KubeMode;
use serde_json::Value;

const SPEED: f64 = 120.0;
/// The hops a management cluster (or hub) shows of a creation.
const MANAGEMENT_HOPS: [Hop; 4] = [
    Hop::HostedCluster,
    Hop::ControlPlane,
    Hop::ManagedCluster,
    Hop::NodePool,
];

struct Run {
    demo: TestWorld,
    _exporter: Served,
    base: String,
    client: reqwest::Client,
}

impl Run {
    async fn start(world: WorldKind, clusters: usize, seed: u64) -> Run {
        let demo = testworld::start(WorldConfig {
            speed: SPEED,
            kind: world,
            ..testworld::demo(clusters, seed)
        })
        .await;
        let exporter = exporter::of_world(&demo)
            .routes(demo.routes())
            .serve()
            .await;
        let run = Run {
            demo,
            base: exporter.url.clone(),
            _exporter: exporter,
            client: reqwest::Client::new(),
        };
        let started = Instant::now();
        loop {
            let ready = run
                .client
                .get(format!("{}/readyz", run.base))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ready {
                break;
            }
            // A bound, not a window: the exporter lists both worlds,
            // beside the other tests of the run on two cores.
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "exporter not ready"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        run
    }

    async fn get(&self, path: &str) -> Value {
        self.client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// `/api/v1/clusters`, by cluster id.
    async fn clusters(&self) -> BTreeMap<String, Value> {
        self.get("/api/v1/clusters").await["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["cluster_id"].as_str().unwrap().to_string(), t.clone()))
            .collect()
    }

    /// Each source's `hcpflow_source_last_success_timestamp_seconds`.
    async fn last_successes(&self) -> Vec<(String, f64)> {
        let Ok(response) = self
            .client
            .get(format!("{}/metrics", self.base))
            .send()
            .await
        else {
            return Vec::new();
        };
        let body = response.text().await.unwrap_or_default();
        body.lines()
            .filter_map(|l| l.strip_prefix("hcpflow_source_last_success_timestamp_seconds{"))
            .filter_map(|rest| {
                let source = rest.split("source=\"").nth(1)?.split('"').next()?;
                let value = rest.rsplit(' ').next()?.parse().ok()?;
                Some((source.to_string(), value))
            })
            .collect()
    }

    fn hub(&self) -> &hcp_flow::sim::mgmt::MgmtCluster {
        self.demo
            .mgmt_clusters
            .iter()
            .find(|c| c.mode == ClusterLayout::SelfManaged)
            .expect("the world has a hub")
    }
}

/// An RFC 4122 UUID as HyperShift writes `spec.clusterID`.
fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.chars().all(|c| c.is_ascii_hexdigit()))
}

fn phase_of(timeline: &Value, hop: Hop) -> Option<Phase> {
    serde_json::from_value(timeline["hops"][hop.as_str()]["phase"].clone()).ok()
}

/// (cluster, hop) pairs where the exporter's JSON does not show the phase
/// the truth expects. Hops the truth does not have are not compared.
fn mismatches(
    exported: &BTreeMap<String, Value>,
    truth: &Truth,
    hops: &[Hop],
) -> (BTreeMap<(String, Hop), String>, usize) {
    let mut out = BTreeMap::new();
    let mut compared = 0;
    for c in &truth.clusters {
        for hop in hops {
            let Some(want) = c.expected(*hop) else {
                continue;
            };
            compared += 1;
            let got = exported.get(&c.cluster_id).and_then(|t| phase_of(t, *hop));
            if got != Some(want.phase) {
                out.insert(
                    (c.cluster_id.clone(), *hop),
                    format!(
                        "{} {hop}: truth {:?} ({}), exporter {got:?}, fault {:?}",
                        c.cluster_id, want.phase, want.state, c.fault
                    ),
                );
            }
        }
    }
    (out, compared)
}

/// Compare for at least `window`, and until each source of the exporter has
/// succeeded twice since the comparison began (a poll, or a watch's event or
/// bookmark; the exporter's own `hcpflow_source_last_success_timestamp_seconds`): a pair
/// wrong in every round is wrong. A lag of one watch event resolves within a
/// round or two; a poller held up by a loaded machine is waited for, not
/// taken for a wrong reading, up to [`POLLS_AT_MOST`].
async fn persistent_mismatches(run: &Run, window: Duration, hops: &[Hop]) -> (Vec<String>, usize) {
    let started = Instant::now();
    let began = crate::common::procs::now_secs();
    // Every source the exporter reports: the HTTP pollers, and the watches
    // (whose last success is their last event or bookmark).
    let sources: BTreeSet<String> = run
        .last_successes()
        .await
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    let mut polls: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    let mut always: Option<BTreeMap<(String, Hop), String>> = None;
    let compared = loop {
        let truth = run.demo.world.truth();
        let exported = run.clusters().await;
        let (now, compared) = mismatches(&exported, &truth, hops);
        always = Some(match always {
            None => now,
            Some(before) => now
                .into_iter()
                .filter(|(k, _)| before.contains_key(k))
                .collect(),
        });
        if always.as_ref().is_some_and(BTreeMap::is_empty) {
            break compared;
        }
        for (source, at) in run.last_successes().await {
            if at > began {
                polls.entry(source).or_default().insert(at.to_bits());
            }
        }
        let polled_twice = sources
            .iter()
            .all(|s| polls.get(s).is_some_and(|p| p.len() >= 2));
        if (started.elapsed() >= window && polled_twice) || started.elapsed() >= POLLS_AT_MOST {
            break compared;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    (always.unwrap_or_default().into_values().collect(), compared)
}

/// How long [`persistent_mismatches`] waits at most for the pollers.
const POLLS_AT_MOST: Duration = Duration::from_secs(60);

fn condition<'a>(timeline: &'a Value, hop: Hop, kind: &str) -> Option<&'a Value> {
    timeline["hops"][hop.as_str()]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// The condition's (status, reason), status lower-cased.
fn status_reason(timeline: &Value, hop: Hop, kind: &str) -> Option<(String, String)> {
    let c = condition(timeline, hop, kind)?;
    Some((
        c["status"].as_str()?.to_ascii_lowercase(),
        c["reason"].as_str()?.to_string(),
    ))
}

/// Whether the exporter shows `fault` the way the hub serves it: which hop,
/// in which phase and state, with which condition.
fn shows_fault(fault: FaultKind, t: &Value) -> Result<(), String> {
    let phase = |hop| phase_of(t, hop);
    let state = |hop: Hop| {
        t["hops"][hop.as_str()]["state"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    let expect = |ok: bool, what: &str| {
        if ok {
            Ok(())
        } else {
            Err(format!("{what}: {}", t["hops"]))
        }
    };
    match fault {
        FaultKind::KubeVirtMachinesPending | FaultKind::NoFreeAgent => {
            let reason = if fault == FaultKind::KubeVirtMachinesPending {
                "Unschedulable"
            } else {
                "NoSuitableAgents"
            };
            expect(
                phase(Hop::NodePool) == Some(Phase::Progressing),
                "node_pool progressing",
            )?;
            expect(
                status_reason(t, Hop::NodePool, "AllMachinesReady")
                    == Some(("false".into(), reason.into())),
                &format!("AllMachinesReady False, reason {reason}"),
            )?;
            expect(
                status_reason(t, Hop::NodePool, "Ready")
                    == Some(("false".into(), "WaitingForAvailableMachines".into())),
                "Ready False, WaitingForAvailableMachines",
            )
        }
        FaultKind::ReleaseImageInvalid => {
            expect(
                phase(Hop::HostedCluster) == Some(Phase::Failed)
                    && state(Hop::HostedCluster) == "ValidReleaseImage=False",
                "hosted_cluster failed, ValidReleaseImage=False",
            )?;
            expect(
                status_reason(t, Hop::HostedCluster, "ValidReleaseImage")
                    == Some(("false".into(), "InvalidImage".into())),
                "ValidReleaseImage False, InvalidImage",
            )?;
            expect(
                t["hops"]["hosted_cluster"]["error"]["code"] == "InvalidImage",
                "failure code InvalidImage",
            )?;
            expect(
                phase(Hop::NodePool) == Some(Phase::Failed),
                "node_pool failed (it shares the release)",
            )
        }
        FaultKind::HostedClusterDegraded => {
            expect(
                matches!(
                    phase(Hop::HostedCluster),
                    Some(Phase::Progressing | Phase::Failed)
                ),
                "hosted_cluster not ready",
            )?;
            expect(
                status_reason(t, Hop::HostedCluster, "Degraded").map(|(s, _)| s)
                    == Some("true".into()),
                "Degraded True",
            )
        }
        FaultKind::ManagedClusterNeverJoins => {
            expect(
                phase(Hop::HostedCluster) == Some(Phase::Ready),
                "hosted_cluster ready",
            )?;
            expect(
                phase(Hop::ManagedCluster) == Some(Phase::Progressing)
                    && state(Hop::ManagedCluster) == "Accepted",
                "managed_cluster progressing, Accepted",
            )?;
            expect(
                status_reason(t, Hop::ManagedCluster, "ManagedClusterJoined")
                    .is_none_or(|(s, _)| s != "true"),
                "not joined",
            )
        }
        other => Err(format!("{other:?} is not a fault of the hub")),
    }
}

/// The hub's own faults, each of which must be seen.
const HUB_FAULTS: [FaultKind; 5] = [
    FaultKind::KubeVirtMachinesPending,
    FaultKind::NoFreeAgent,
    FaultKind::ReleaseImageInvalid,
    FaultKind::HostedClusterDegraded,
    FaultKind::ManagedClusterNeverJoins,
];

/// A fault is "showing" once the truth says its hop is in the state that
/// shows it (a degraded HostedCluster from its Degraded transition on).
fn fault_showing(c: &hcp_flow::sim::TruthCluster) -> bool {
    let phase = |hop| c.management.get(&hop).map(|h| h.phase);
    match c.fault {
        Some(FaultKind::KubeVirtMachinesPending | FaultKind::NoFreeAgent) => {
            phase(Hop::NodePool) == Some(Phase::Progressing)
        }
        Some(FaultKind::ReleaseImageInvalid) => phase(Hop::HostedCluster) == Some(Phase::Failed),
        Some(FaultKind::HostedClusterDegraded) => phase(Hop::HostedCluster) == Some(Phase::Failed),
        Some(FaultKind::ManagedClusterNeverJoins) => {
            phase(Hop::HostedCluster) == Some(Phase::Ready)
                && phase(Hop::ManagedCluster) == Some(Phase::Progressing)
        }
        _ => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_self_managed_hub_is_read_hop_by_hop_with_its_faults() {
    let run = Run::start(WorldKind::SelfManaged, 60, 3).await;
    let world = run.demo.world.clone();

    // A hub and nothing of ARO: one kube source in self_managed mode.
    assert!(run.demo.endpoints.is_none(), "no ARO services");
    assert_eq!(run.demo.mgmt_clusters.len(), 1);
    let kube = &run.demo.config.sources.kube;
    assert_eq!(kube.len(), 1);
    assert_eq!(kube[0].mode, KubeMode::SelfManaged);
    assert_eq!(kube[0].mgmt_cluster, HUB_NAME);
    assert!(run.demo.config.sources.rp_frontend.is_none());
    assert!(run.demo.config.sources.clusters_service.is_none());
    assert!(run.demo.config.sources.maestro.is_none());

    // Wait until every hub fault shows in the truth.
    let started = Instant::now();
    loop {
        let truth = world.truth();
        let showing: BTreeSet<FaultKind> = truth
            .clusters
            .iter()
            .filter(|c| fault_showing(c))
            .filter_map(|c| c.fault)
            .collect();
        if HUB_FAULTS.iter().all(|f| showing.contains(f)) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "faults never showing in the truth: {:?}",
            HUB_FAULTS
                .iter()
                .filter(|f| !showing.contains(f))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    // Every management-side hop of every cluster, as the truth says.
    let (wrong, compared) =
        persistent_mismatches(&run, Duration::from_secs(8), &MANAGEMENT_HOPS).await;
    assert!(
        compared > 150,
        "only {compared} (cluster, hop) pairs compared"
    );
    assert!(
        wrong.is_empty(),
        "exporter disagrees with the truth:\n{}",
        wrong.join("\n")
    );

    // Each fault, as the exporter shows it. The truth is read after the
    // exporter so a cluster deleted meanwhile is simply skipped.
    let mut shown: BTreeMap<FaultKind, usize> = BTreeMap::new();
    let mut problems = Vec::new();
    for _round in 0..20 {
        let exported = run.clusters().await;
        let truth = world.truth();
        for c in truth.clusters.iter().filter(|c| fault_showing(c)) {
            let (Some(fault), Some(t)) = (c.fault, exported.get(&c.cluster_id)) else {
                continue;
            };
            match shows_fault(fault, t) {
                Ok(()) => *shown.entry(fault).or_default() += 1,
                Err(e) => problems.push(format!("{} {fault:?}: {e}", c.cluster_id)),
            }
        }
        if HUB_FAULTS.iter().all(|f| shown.contains_key(f)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(
        HUB_FAULTS.iter().all(|f| shown.contains_key(f)),
        "faults not shown by the exporter: shown {shown:?}\n{}",
        problems.join("\n")
    );

    // Identities: the three platforms, the two user namespaces, both forms
    // of id, and the hub as the management cluster.
    let exported = run.clusters().await;
    let platforms: BTreeSet<&str> = exported
        .values()
        .filter_map(|t| t["platform"].as_str())
        .collect();
    assert_eq!(
        platforms,
        BTreeSet::from(["agent", "kubevirt", "none"]),
        "platforms"
    );
    let namespaces: BTreeSet<&str> = exported
        .values()
        .filter_map(|t| t["namespace"].as_str())
        .collect();
    assert_eq!(namespaces, BTreeSet::from(["clusters", "hcp"]));
    assert!(exported.values().all(|t| t["mgmt_cluster"] == HUB_NAME));
    for (id, t) in &exported {
        let ns = t["namespace"].as_str().unwrap();
        let name = t["name"].as_str().unwrap();
        assert!(
            id == &format!("{ns}/{name}") || is_uuid(id),
            "{id} is neither <namespace>/<name> nor a spec.clusterID"
        );
        assert!(t["hops"].get("rp_frontend").is_none(), "{id}: no RP here");
    }
    assert!(
        exported.keys().any(|id| id.contains('/')),
        "an id from ns/name"
    );
    assert!(
        exported.keys().any(|id| !id.contains('/')),
        "an id from spec.clusterID"
    );

    // What the hub serves, read from its API server.
    let api = &run.hub().api;
    let mce = api.objects("MultiClusterEngine");
    assert_eq!(mce.len(), 1);
    assert_eq!(mce[0]["status"]["phase"], "Available");
    let hosted = api.objects("HostedCluster");
    let by_ns_name: BTreeSet<(String, String)> = hosted
        .iter()
        .map(|h| {
            (
                h["metadata"]["namespace"].as_str().unwrap().to_string(),
                h["metadata"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let hosted_platforms: BTreeSet<&str> = hosted
        .iter()
        .filter_map(|h| h["spec"]["platform"]["type"].as_str())
        .collect();
    assert_eq!(
        hosted_platforms,
        BTreeSet::from(["Agent", "KubeVirt", "None"]),
        "spec.platform.type as HyperShift spells it"
    );
    for (ns, _) in &by_ns_name {
        assert!(ns == "clusters" || ns == "hcp", "{ns}");
    }
    for hcp in api.objects("HostedControlPlane") {
        let ns = hcp["metadata"]["namespace"].as_str().unwrap();
        let name = hcp["metadata"]["name"].as_str().unwrap();
        assert!(
            by_ns_name.contains(&(
                ns.trim_end_matches(&format!("-{name}")).to_string(),
                name.to_string()
            )),
            "control plane {ns}/{name} is not in <namespace>-<name> of a HostedCluster"
        );
    }
    let names: BTreeSet<&str> = by_ns_name.iter().map(|(_, n)| n.as_str()).collect();
    let managed = api.objects("ManagedCluster");
    for mc in &managed {
        assert!(names.contains(mc["metadata"]["name"].as_str().unwrap()));
    }
    for np in api.objects("NodePool") {
        let ns = np["metadata"]["namespace"].as_str().unwrap().to_string();
        let cluster = np["spec"]["clusterName"].as_str().unwrap().to_string();
        assert!(by_ns_name.contains(&(ns, cluster)), "{np}");
    }
    let agents = api.objects("Agent");
    assert!(!agents.is_empty());
    for a in &agents {
        assert_eq!(a["apiVersion"], "agent-install.openshift.io/v1beta1");
        assert_eq!(a["spec"]["approved"], true);
        let bound = a["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Bound")
            .unwrap();
        assert_eq!(
            bound["status"] == "True",
            a["spec"].get("clusterDeploymentName").is_some(),
            "Bound True exactly when clusterDeploymentName is set: {a}"
        );
    }

    // The public ground truth names every cluster the exporter shows (the
    // same id), and each fault with its alert and due time. Read as a pair,
    // the exporter first: the world deletes clusters as it goes, and one the
    // exporter still shows may be gone from the world by the time the truth
    // is read, until the exporter's next watch event. So the pair is read
    // again until no more than two differ that way (a deletion or two in
    // flight), not compared with an `exported` read many assertions ago.
    let mut missing = Vec::new();
    let mut truth = Value::Null;
    // Up to a minute: a bound, not a window (the loop ends once they agree).
    for _attempt in 0..240 {
        let exported = run.clusters().await;
        truth = run.get(GROUND_TRUTH_PATH).await;
        let in_truth: BTreeSet<&str> = truth["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|i| i["cluster_id"].as_str())
            .collect();
        missing = exported
            .keys()
            .filter(|id| !in_truth.contains(id.as_str()))
            .cloned()
            .collect();
        if missing.len() <= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(missing.len() <= 2, "not in the ground truth: {missing:?}");
    let items: BTreeMap<&str, &Value> = truth["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["cluster_id"].as_str().unwrap(), i))
        .collect();
    let mut alerts = BTreeMap::new();
    for item in items.values().filter(|i| !i["fault"].is_null()) {
        assert!(item["fault_at"].is_string() || item["fault"] == "managed_cluster_never_joins");
        alerts.insert(
            item["fault"].as_str().unwrap().to_string(),
            item["expected_alert"].as_str().unwrap().to_string(),
        );
    }
    for (fault, alert) in [
        ("kubevirt_machines_pending", "HCPNodePoolBelowDesired"),
        ("no_free_agent", "HCPNodePoolBelowDesired"),
        ("release_image_invalid", "HCPHopFailed"),
        ("hosted_cluster_degraded", "HCPHostedClusterDegraded"),
        ("managed_cluster_never_joins", "HCPManagedClusterNotJoined"),
    ] {
        assert_eq!(
            alerts.get(fault).map(String::as_str),
            Some(alert),
            "{fault}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_worlds_are_served_through_one_exporter() {
    let run = Run::start(WorldKind::Both, 20, 7).await;
    let world = run.demo.world.clone();
    assert!(run.demo.endpoints.is_some(), "the ARO services run");
    let modes: Vec<KubeMode> = run
        .demo
        .config
        .sources
        .kube
        .iter()
        .map(|k| k.mode)
        .collect();
    assert_eq!(modes, [KubeMode::Aro, KubeMode::Aro, KubeMode::SelfManaged]);

    // Every hop of every cluster of both worlds, through the one exporter.
    let (wrong, compared) = persistent_mismatches(&run, Duration::from_secs(8), &Hop::ALL).await;
    assert!(
        wrong.is_empty(),
        "exporter disagrees with the truth:\n{}",
        wrong.join("\n")
    );
    assert!(compared > 100, "only {compared} pairs compared");

    let truth = world.truth();
    let exported = run.clusters().await;
    let hub: Vec<&hcp_flow::sim::TruthCluster> = truth
        .clusters
        .iter()
        .filter(|c| c.mgmt_cluster == HUB_NAME)
        .collect();
    let aro: Vec<&hcp_flow::sim::TruthCluster> = truth
        .clusters
        .iter()
        .filter(|c| c.mgmt_cluster != HUB_NAME)
        .collect();
    assert!(
        hub.len() >= 15 && aro.len() >= 15,
        "{} hub, {} ARO",
        hub.len(),
        aro.len()
    );
    // A cluster created in the last moments may not have reached the
    // exporter's watch yet.
    let settled = |c: &&&hcp_flow::sim::TruthCluster| {
        c.created_at < truth.at - jiff::SignedDuration::from_secs(3)
    };
    for c in hub.iter().filter(settled) {
        let t = exported
            .get(&c.cluster_id)
            .unwrap_or_else(|| panic!("{} not exported", c.cluster_id));
        assert_eq!(t["mgmt_cluster"], HUB_NAME);
        assert!(t["hops"].get("rp_frontend").is_none());
    }
    // ARO clusters carry their RP hop once Clusters Service joined them:
    // waited for (both pollers, on a machine shared with the run's other
    // tests), each round against the world as it is then.
    let rp_joined = |truth: &hcp_flow::sim::Truth, exported: &BTreeMap<String, Value>| {
        let settled: Vec<&hcp_flow::sim::TruthCluster> = truth
            .clusters
            .iter()
            .filter(|c| c.mgmt_cluster != HUB_NAME)
            .filter(|c| c.created_at < truth.at - jiff::SignedDuration::from_secs(3))
            .collect();
        let with_rp = settled
            .iter()
            .filter(|c| {
                exported
                    .get(&c.cluster_id)
                    .is_some_and(|t| t["hops"].get("rp_frontend").is_some())
            })
            .count();
        (with_rp, settled.len())
    };
    let waited = Instant::now();
    let (mut with_rp, mut settled_aro) = rp_joined(&truth, &exported);
    while with_rp + 1 < settled_aro && waited.elapsed() < POLLS_AT_MOST {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let truth = world.truth();
        (with_rp, settled_aro) = rp_joined(&truth, &run.clusters().await);
    }
    assert!(
        with_rp + 1 >= settled_aro,
        "{with_rp} of {settled_aro} ARO clusters exported with their RP hop"
    );

    // A hub creation completes on its HostedCluster although the RP is a
    // terminal hop of this configuration: the RP completes only what
    // Clusters Service shows (docs/design/04-identities-and-joins.md §4.4).
    let hub_completed = hub
        .iter()
        .filter(|c| {
            exported
                .get(&c.cluster_id)
                .is_some_and(|t| t["outcome"] == "succeeded")
        })
        .count();
    assert!(hub_completed > 0, "no hub creation completed beside ARO");

    // The ground truth covers both.
    let ground = run.get(GROUND_TRUTH_PATH).await;
    let ids: BTreeSet<&str> = ground["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["cluster_id"].as_str())
        .collect();
    // (One may have gone since the truth was read.)
    let missing: Vec<&str> = hub
        .iter()
        .map(|c| c.cluster_id.as_str())
        .filter(|id| !ids.contains(id))
        .collect();
    assert!(
        missing.len() <= 1,
        "hub clusters not in the ground truth: {missing:?}"
    );
    assert!(ids.iter().any(|id| aro.iter().any(|c| c.cluster_id == *id)));
}
