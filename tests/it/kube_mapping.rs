//! The kube mapping without a server: simulated objects and real fixtures
//! through the partial types and the mapper into the model.

use std::time::Duration;

use crate::common::kube::layout_of;
use hcp_flow::model::{
    Batch, Change, Fleet, Hop, HopBudgets, ModelConfig, Observation, Phase, Replicas,
};
use hcp_flow::sim::kube::{KubeClusterFaults, KubeClusterSpec, objects_at};
use hcp_flow::sources::kube::mapping::{Facts, Mapper, MapperConfig, ObjRef, ToFacts};
use hcp_flow::sources::kube::objects;
use hcp_flow::sources::kube::{KubeMode, KubeSourceConfig, WatchKind};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

fn t(minutes: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + minutes * 60).unwrap()
}

fn mapper_config(mode: KubeMode) -> MapperConfig {
    let mut cfg = KubeSourceConfig::new("mgmt-1", mode);
    cfg.environment = "prod".to_string();
    MapperConfig::from(&cfg)
}

fn facts_of(obj: &Value, cfg: &MapperConfig) -> (WatchKind, ObjRef, Facts) {
    fn parse<T: serde::de::DeserializeOwned + ToFacts>(obj: &Value, cfg: &MapperConfig) -> Facts {
        serde_json::from_value::<T>(obj.clone())
            .unwrap()
            .facts(cfg, &mut Vec::new())
    }
    let facts = match obj["kind"].as_str().unwrap() {
        "ManifestWork" => parse::<objects::ManifestWork>(obj, cfg),
        "HostedCluster" => parse::<objects::HostedCluster>(obj, cfg),
        "NodePool" => parse::<objects::NodePool>(obj, cfg),
        "HostedControlPlane" => parse::<objects::HostedControlPlane>(obj, cfg),
        "ManagedCluster" => parse::<objects::ManagedCluster>(obj, cfg),
        "Pod" => parse::<objects::ControlPlanePod>(obj, cfg),
        other => panic!("unexpected kind {other}"),
    };
    let meta: ObjectMeta = serde_json::from_value(obj["metadata"].clone()).unwrap();
    (facts.kind(), ObjRef::of(&meta), facts)
}

fn spec(id: &str, mode: KubeMode, faults: KubeClusterFaults) -> KubeClusterSpec {
    KubeClusterSpec {
        node_pools: vec![("workers".to_string(), 3, Some(t(14)))],
        faults,
        ..KubeClusterSpec::healthy(id, layout_of(mode), t(0))
    }
}

/// A HostedCluster Degraded and never Available fails after 10 minutes.
fn new_fleet() -> Fleet {
    let hop_budgets = HopBudgets {
        hosted_cluster: Duration::from_secs(10 * 60),
        ..HopBudgets::default()
    };
    Fleet::new(ModelConfig {
        targets: hcp_flow::model::OperationTargets::default().with(
            hcp_flow::model::OperationKind::Create,
            Duration::from_secs(1200),
        ),
        terminal_hops: vec![Hop::HostedCluster],
        shard: None,
        hop_budgets,
        ..ModelConfig::default()
    })
}

/// Feed everything `objects_at` draws at `now`, as one non-initial batch.
fn observe(
    mapper: &mut Mapper,
    fleet: &mut Fleet,
    objs: &[Value],
    now: Timestamp,
) -> Vec<Observation> {
    let cfg = mapper.config().clone();
    for obj in objs {
        let (_, at, facts) = facts_of(obj, &cfg);
        mapper.upsert(at, facts);
    }
    let observations = mapper.flush();
    fleet.apply(
        Batch {
            source: "kube/mgmt-1".to_string(),
            initial: false,
            observed_at: now,
            observations: observations.clone(),
        },
        now,
    );
    observations
}

const MGMT_HOPS: [Hop; 5] = [
    Hop::Manifestwork,
    Hop::HostedCluster,
    Hop::ControlPlane,
    Hop::ManagedCluster,
    Hop::NodePool,
];

#[test]
fn a_healthy_aro_creation_reaches_every_management_hop_with_identity() {
    let s = spec("abc123", KubeMode::Aro, KubeClusterFaults::default());
    let mut mapper = Mapper::new(mapper_config(KubeMode::Aro));
    let mut fleet = new_fleet();
    observe(&mut mapper, &mut fleet, &objects_at(&s, t(3)), t(3));
    let tl = fleet.get("abc123").unwrap();
    assert_eq!(tl.phase(Hop::Manifestwork), Some(Phase::Ready));
    assert_eq!(tl.phase(Hop::HostedCluster), Some(Phase::Progressing));
    assert_eq!(tl.phase(Hop::ControlPlane), Some(Phase::Progressing));
    assert_eq!(
        tl.hop(Hop::ControlPlane)
            .unwrap()
            .pods()
            .map(|p| (p.ready, p.not_ready)),
        Some((1, 3))
    );
    assert_eq!(tl.phase(Hop::ManagedCluster), Some(Phase::Progressing));
    assert_eq!(tl.phase(Hop::NodePool), Some(Phase::Progressing));

    observe(&mut mapper, &mut fleet, &objects_at(&s, t(15)), t(15));
    let tl = fleet.get("abc123").unwrap();
    for hop in MGMT_HOPS {
        assert_eq!(tl.phase(hop), Some(Phase::Ready), "{hop}");
    }
    assert_eq!(tl.identity.mgmt_cluster, "mgmt-1");
    assert_eq!(tl.identity.namespace, "ocm-prod-abc123");
    assert_eq!(tl.identity.platform, "azure");
    assert_eq!(tl.identity.version, "4.20.0");
    assert_eq!(tl.identity.name, "name-abc123");
    let replicas: Vec<(String, Replicas)> = tl
        .hop(Hop::NodePool)
        .unwrap()
        .replicas()
        .map(|(n, r)| (n.to_string(), r))
        .collect();
    assert_eq!(
        replicas,
        vec![(
            "name-abc123-workers".to_string(),
            Replicas {
                desired: 3,
                current: 3,
                ready: 3
            }
        )]
    );
    assert_eq!(
        tl.hop(Hop::HostedCluster).unwrap().ready_at,
        Some(t(8).into())
    );
    assert!(
        !tl.in_flight(),
        "hosted_cluster Available completes the creation"
    );
}

#[test]
fn unchanged_objects_emit_nothing() {
    let s = spec("abc123", KubeMode::Aro, KubeClusterFaults::default());
    let mut mapper = Mapper::new(mapper_config(KubeMode::Aro));
    let mut fleet = new_fleet();
    assert!(!observe(&mut mapper, &mut fleet, &objects_at(&s, t(15)), t(15)).is_empty());
    assert!(observe(&mut mapper, &mut fleet, &objects_at(&s, t(15)), t(16)).is_empty());
}

#[test]
fn each_management_side_fault_shows_in_its_hop() {
    let at = t(40);
    let faults = |f: fn(&mut KubeClusterFaults)| {
        let mut faults = KubeClusterFaults::default();
        f(&mut faults);
        faults
    };

    // Never applied: the work is pending and nothing reached the management cluster.
    let s = spec(
        "never",
        KubeMode::Aro,
        faults(|f| f.manifestwork_never_applied = true),
    );
    let (mut mapper, mut fleet) = (Mapper::new(mapper_config(KubeMode::Aro)), new_fleet());
    observe(&mut mapper, &mut fleet, &objects_at(&s, at), at);
    let tl = fleet.get("never").unwrap();
    assert_eq!(tl.phase(Hop::Manifestwork), Some(Phase::Pending));
    assert_eq!(tl.hop(Hop::Manifestwork).unwrap().state, "no status yet");
    assert_eq!(tl.phase(Hop::HostedCluster), None);

    // Degraded: progressing within the budget, failed past it.
    let s = spec(
        "degraded",
        KubeMode::Aro,
        faults(|f| f.hosted_cluster_degraded = true),
    );
    let (mut mapper, mut fleet) = (Mapper::new(mapper_config(KubeMode::Aro)), new_fleet());
    observe(&mut mapper, &mut fleet, &objects_at(&s, t(5)), t(5));
    assert_eq!(
        fleet.get("degraded").unwrap().phase(Hop::HostedCluster),
        Some(Phase::Progressing)
    );
    assert_eq!(
        fleet
            .get("degraded")
            .unwrap()
            .hop(Hop::HostedCluster)
            .unwrap()
            .state,
        "Degraded"
    );
    // Nothing changes upstream; only time passes (degraded at t(2), budget 10 min).
    observe(&mut mapper, &mut fleet, &[], t(12));
    let tl = fleet.get("degraded").unwrap();
    assert_eq!(tl.phase(Hop::HostedCluster), Some(Phase::Failed));
    assert_eq!(
        tl.hop(Hop::HostedCluster).unwrap().error().unwrap().code,
        "ComponentsNotAvailable"
    );

    // Never joins: accepted, progressing forever.
    let s = spec(
        "nojoin",
        KubeMode::Aro,
        faults(|f| f.managed_cluster_never_joins = true),
    );
    let (mut mapper, mut fleet) = (Mapper::new(mapper_config(KubeMode::Aro)), new_fleet());
    observe(&mut mapper, &mut fleet, &objects_at(&s, at), at);
    let tl = fleet.get("nojoin").unwrap();
    assert_eq!(tl.phase(Hop::ManagedCluster), Some(Phase::Progressing));
    assert_eq!(tl.hop(Hop::ManagedCluster).unwrap().state, "Accepted");
    assert_eq!(tl.phase(Hop::HostedCluster), Some(Phase::Ready));

    // Stuck at zero nodes.
    let s = spec(
        "stuck",
        KubeMode::Aro,
        faults(|f| f.node_pool_stuck_at_zero = true),
    );
    let (mut mapper, mut fleet) = (Mapper::new(mapper_config(KubeMode::Aro)), new_fleet());
    observe(&mut mapper, &mut fleet, &objects_at(&s, at), at);
    let tl = fleet.get("stuck").unwrap();
    assert_eq!(tl.phase(Hop::NodePool), Some(Phase::Progressing));
    let r: Vec<Replicas> = tl
        .hop(Hop::NodePool)
        .unwrap()
        .replicas()
        .map(|(_, r)| r)
        .collect();
    assert_eq!(
        r,
        vec![Replicas {
            desired: 3,
            current: 0,
            ready: 0
        }]
    );
}

#[test]
fn self_managed_objects_before_their_hosted_cluster_wait_and_then_land() {
    let cfg = mapper_config(KubeMode::SelfManaged);
    let s = spec(
        "11111111-2222-4333-8444-555555555555",
        KubeMode::SelfManaged,
        KubeClusterFaults::default(),
    );
    let objs = objects_at(&s, t(15));
    let (hc, others): (Vec<Value>, Vec<Value>) =
        objs.into_iter().partition(|o| o["kind"] == "HostedCluster");
    let mut mapper = Mapper::new(cfg.clone());
    let mut fleet = new_fleet();
    // Pods, HostedControlPlane, ManagedCluster, NodePool first: no cluster to land on yet.
    assert!(observe(&mut mapper, &mut fleet, &others, t(15)).is_empty());
    observe(&mut mapper, &mut fleet, &hc, t(15));
    let tl = fleet.get(&s.cluster_id).unwrap();
    for hop in [
        Hop::HostedCluster,
        Hop::ControlPlane,
        Hop::ManagedCluster,
        Hop::NodePool,
    ] {
        assert_eq!(tl.phase(hop), Some(Phase::Ready), "{hop}");
    }
    assert_eq!(tl.phase(Hop::Manifestwork), None);
    assert_eq!(tl.identity.name, s.name);
    assert_eq!(tl.identity.namespace, "clusters");
    assert_eq!(tl.identity.platform, "agent");

    // The HostedCluster goes: everything resolved through it is withdrawn.
    let (_, at, _) = facts_of(&hc[0], &cfg);
    mapper.delete(WatchKind::HostedCluster, &at);
    let out = mapper.flush();
    let gone: Vec<Hop> = out
        .iter()
        .filter(|o| matches!(o.change, Change::Gone))
        .map(|o| o.hop)
        .collect();
    assert_eq!(gone.len(), 4, "{gone:?}");
}

#[test]
fn self_managed_without_cluster_id_uses_namespace_slash_name() {
    let s = spec(
        "unused",
        KubeMode::SelfManaged,
        KubeClusterFaults::default(),
    );
    let mut objs = objects_at(&s, t(15));
    for o in &mut objs {
        if o["kind"] == "HostedCluster" {
            o["spec"].as_object_mut().unwrap().remove("clusterID");
        }
    }
    let mut mapper = Mapper::new(mapper_config(KubeMode::SelfManaged));
    let mut fleet = new_fleet();
    observe(&mut mapper, &mut fleet, &objs, t(15));
    let tl = fleet.get("clusters/name-unused").unwrap();
    assert_eq!(tl.phase(Hop::ManagedCluster), Some(Phase::Ready));
    assert_eq!(tl.phase(Hop::ControlPlane), Some(Phase::Ready));
}

#[test]
fn aro_control_plane_and_managed_cluster_resolve_without_their_hosted_cluster() {
    let s = spec("early", KubeMode::Aro, KubeClusterFaults::default());
    let objs: Vec<Value> = objects_at(&s, t(15))
        .into_iter()
        .filter(|o| {
            matches!(
                o["kind"].as_str(),
                Some("Pod" | "HostedControlPlane" | "ManagedCluster")
            )
        })
        .collect();
    let mut mapper = Mapper::new(mapper_config(KubeMode::Aro));
    let mut fleet = new_fleet();
    observe(&mut mapper, &mut fleet, &objs, t(15));
    let tl = fleet.get("early").unwrap();
    assert_eq!(tl.phase(Hop::ControlPlane), Some(Phase::Ready));
    assert_eq!(tl.phase(Hop::ManagedCluster), Some(Phase::Ready));
}

#[test]
fn the_hub_registration_is_not_a_cluster() {
    let obj = serde_json::json!({
        "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": {"name": "local-cluster"},
        "status": {"conditions": []}
    });
    let mut mapper = Mapper::new(mapper_config(KubeMode::Aro));
    let (_, at, facts) = facts_of(&obj, mapper.config());
    mapper.upsert(at, facts);
    assert!(mapper.flush().is_empty());
}

#[test]
fn a_real_node_pool_with_status_parses_to_ready_replicas() {
    let raw = std::fs::read_to_string("tests/fixtures/kube/nodepool-real.json").unwrap();
    let np: objects::NodePool = serde_json::from_str(&raw).unwrap();
    let mut mapper = Mapper::new(mapper_config(KubeMode::Aro));
    let facts = np.facts(mapper.config(), &mut Vec::new());
    let Facts::NodePool(f) = &facts else {
        panic!("{facts:?}")
    };
    assert_eq!(
        f.view.replicas,
        Some(Replicas {
            desired: 3,
            current: 3,
            ready: 3
        })
    );
    assert_eq!(
        f.view.phase,
        Phase::Deleting,
        "the fixture was captured while deleting"
    );
    assert_eq!(
        f.label_id.as_deref(),
        Some("2qrppk0otds3rdmdcojqcqkqq8f0s591")
    );
    mapper.upsert(ObjRef::of(&np.metadata), facts);
    let out = mapper.flush();
    assert_eq!(out.len(), 1);
    let Change::Upsert(view) = &out[0].change else {
        panic!()
    };
    assert_eq!(view.phase, Phase::Deleting);
    assert_eq!(
        view.replicas,
        Some(Replicas {
            desired: 3,
            current: 3,
            ready: 3
        })
    );
    assert_eq!(out[0].object, np.metadata.name.clone().unwrap());
}

#[test]
fn the_example_agent_parses() {
    let raw = std::fs::read_to_string("tests/fixtures/kube/agent-example.yaml").unwrap();
    let agent: objects::Agent = serde_saphyr::from_str(&raw).unwrap();
    let facts = agent.facts(&mapper_config(KubeMode::SelfManaged), &mut Vec::new());
    let Facts::Agent(a) = facts else { panic!() };
    assert!(a.approved);
    assert_eq!(a.stage, "Done");
    assert_eq!(a.bound_to.as_deref(), Some("demo/test-multinode"));
}

#[test]
fn degraded_budget_is_measured_from_the_degraded_transition() {
    // Guard against a clock mix-up: the degraded transition is start + 60 s.
    let s = spec(
        "budget",
        KubeMode::Aro,
        KubeClusterFaults {
            hosted_cluster_degraded: true,
            ..Default::default()
        },
    );
    let degraded_at = t(1).checked_add(SignedDuration::from_secs(60)).unwrap();
    let mut mapper = Mapper::new(mapper_config(KubeMode::Aro));
    let mut fleet = new_fleet();
    let just_before = degraded_at
        .checked_add(SignedDuration::from_secs(599))
        .unwrap();
    observe(
        &mut mapper,
        &mut fleet,
        &objects_at(&s, just_before),
        just_before,
    );
    assert_eq!(
        fleet.get("budget").unwrap().phase(Hop::HostedCluster),
        Some(Phase::Progressing)
    );
    let at = degraded_at
        .checked_add(SignedDuration::from_secs(600))
        .unwrap();
    observe(&mut mapper, &mut fleet, &[], at);
    assert_eq!(
        fleet.get("budget").unwrap().phase(Hop::HostedCluster),
        Some(Phase::Failed)
    );
}
