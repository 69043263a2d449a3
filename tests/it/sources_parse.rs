//! The sources' pure parsing against real upstream examples (copied from the
//! reference into `tests/fixtures/`).

use std::time::Duration;

use hcp_flow::config::ClustersServiceApi;
use hcp_flow::model::{
    Batch, Change, ClusterKey, ConditionStatus, Fleet, Hop, HopBudgets, HopView, ModelConfig,
    Observation, Phase, Replicas, Via,
};
use hcp_flow::sources::clusters_service::{self, ProvisionShard};
use hcp_flow::sources::maestro::{self, ResourceBundle};
use hcp_flow::sources::rp_frontend::{self, ArmList, HcpOpenShiftCluster};
use jiff::Timestamp;
use serde_json::{Value, json};

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The response body of a generated ARM example.
fn example_body(name: &str) -> Value {
    fixture(name)["responses"]["200"]["body"].clone()
}

fn view(o: &Observation) -> &HopView {
    match &o.change {
        Change::Upsert(v) => v,
        Change::Gone => panic!("expected an upsert, got Gone for {:?}", o.key),
    }
}

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

#[test]
fn rp_get_examples_parse_in_both_api_versions() {
    for name in [
        "rp-2024-06-10-preview-get.json",
        "rp-2026-09-01-preview-get.json",
    ] {
        let cluster: HcpOpenShiftCluster = serde_json::from_value(example_body(name)).unwrap();
        let mut unknown = Vec::new();
        let parsed = rp_frontend::parse_cluster(&cluster, &mut unknown);
        assert!(unknown.is_empty(), "{name}: {unknown:?}");
        let id = "/subscriptions/fdea43ea-0230-4a7d-bdee-f3aff2183b1d/resourcegroups/resourcegroupname/providers/microsoft.redhatopenshift/resourcetype/resourcename";
        assert_eq!(
            parsed.observation.key,
            ClusterKey::ArmResourceId(id.to_string())
        );
        assert_eq!(parsed.observation.hop, Hop::RpFrontend);
        assert_eq!(parsed.observation.via, Via::Direct);
        assert_eq!(parsed.observation.object, "");
        let v = view(&parsed.observation);
        assert_eq!(v.state, "Succeeded");
        assert_eq!(v.phase, Phase::Ready);
        assert_eq!(v.created_at, Some(ts("2024-03-27T14:57:32.578Z").into()));
        assert_eq!(v.since, None, "no status.conditions in the example");
        assert_eq!(v.identity().name.as_deref(), Some("vuwzuwooutjavgdhoatz"));
        assert_eq!(v.identity().resource_id.as_deref(), Some(id));
        assert_eq!(
            v.identity().subscription_id.as_deref(),
            Some("fdea43ea-0230-4a7d-bdee-f3aff2183b1d")
        );
        assert_eq!(
            v.identity().resource_group.as_deref(),
            Some("resourceGroupName")
        );
        assert_eq!(v.identity().version.as_deref(), Some("4.12"));
    }
}

#[test]
fn rp_list_examples_parse_with_next_link() {
    for name in [
        "rp-2024-06-10-preview-list.json",
        "rp-2026-09-01-preview-list.json",
    ] {
        let list: ArmList = serde_json::from_value(example_body(name)).unwrap();
        assert_eq!(list.next_link.as_deref(), Some("https://microsoft.com/a"));
        let (clusters, unknown) = rp_frontend::parse_list(list);
        assert!(unknown.is_empty(), "{name}: {unknown:?}");
        assert_eq!(clusters.len(), 1);
        assert_eq!(view(&clusters[0].observation).phase, Phase::Ready);
    }
}

#[test]
fn rp_status_conditions_give_since() {
    // 2026-06-30-preview and newer carry properties.status.conditions; the
    // generated examples leave them out, so add them in the schema's shape.
    let mut body = example_body("rp-2026-09-01-preview-get.json");
    body["properties"]["provisioningState"] = json!("Provisioning");
    body["properties"]["status"] = json!({"conditions": [
        {"type": "Available", "status": "False", "reason": "Installing", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "Progressing", "status": "True", "reason": "Installing", "message": "installing", "lastTransitionTime": "2026-01-01T00:01:00Z"}
    ]});
    let cluster: HcpOpenShiftCluster = serde_json::from_value(body).unwrap();
    let parsed = rp_frontend::parse_cluster(&cluster, &mut Vec::new());
    let v = view(&parsed.observation);
    assert_eq!(v.phase, Phase::Progressing);
    assert_eq!(v.conditions.len(), 2);
    assert_eq!(v.conditions[1].status, ConditionStatus::True);
    assert_eq!(v.since, Some(ts("2026-01-01T00:01:00Z").into()));
}

#[test]
fn rp_frontend_fixture_accepted_without_times() {
    let cluster: HcpOpenShiftCluster =
        serde_json::from_value(fixture("rp-frontend-get-accepted.json")).unwrap();
    let mut unknown = Vec::new();
    let parsed = rp_frontend::parse_cluster(&cluster, &mut unknown);
    assert!(unknown.is_empty());
    let v = view(&parsed.observation);
    assert_eq!(v.phase, Phase::Pending);
    assert_eq!(v.state, "Accepted");
    assert_eq!(v.created_at, None);
    assert_eq!(v.identity().version, None, "version.id is absent");
    assert_eq!(v.identity().name.as_deref(), Some("create-with-tags"));
}

#[test]
fn rp_unknown_provisioning_state_is_counted_not_fatal() {
    let mut body = fixture("rp-frontend-get-accepted.json");
    body["properties"]["provisioningState"] = json!("Migrating");
    let cluster: HcpOpenShiftCluster = serde_json::from_value(body).unwrap();
    let mut unknown = Vec::new();
    let parsed = rp_frontend::parse_cluster(&cluster, &mut unknown);
    assert_eq!(view(&parsed.observation).phase, Phase::Unknown);
    assert_eq!(view(&parsed.observation).state, "Migrating");
    assert_eq!(unknown.len(), 1);
    assert_eq!(unknown[0].field, "properties.provisioningState");
}

#[test]
fn cs_fixture_without_status_is_still_observed() {
    let parsed = clusters_service::parse_items(
        raws(vec![fixture("cs-cluster-creating.json")]),
        ClustersServiceApi::AroHcpV1alpha1,
        |_| Some("mgmt-cluster".to_string()),
    );
    assert_eq!(parsed.observations.len(), 1);
    let o = &parsed.observations[0];
    assert_eq!(
        o.key,
        ClusterKey::Id("cs-cluster-creating".into()),
        "id taken from href"
    );
    assert_eq!(o.hop, Hop::ClustersService);
    let v = view(o);
    assert_eq!(v.phase, Phase::Unknown);
    assert_eq!(parsed.unknown.len(), 1);
    assert_eq!(parsed.unknown[0].field, "status.state");
    assert_eq!(
        v.identity().resource_id.as_deref(),
        Some(
            "/subscriptions/0465bc32-c654-41b8-8d87-9815d7abe8f6/resourcegroups/some-resource-group/providers/microsoft.redhatopenshift/hcpopenshiftclusters/cluster-deleting"
        )
    );
    assert_eq!(v.identity().name.as_deref(), Some("cluster-deleting"));
    assert_eq!(v.identity().platform.as_deref(), Some("azure"));
    assert_eq!(
        v.identity().resource_group.as_deref(),
        Some("some-resource-group")
    );
    assert_eq!(v.identity().mgmt_cluster.as_deref(), Some("mgmt-cluster"));
    assert_eq!(v.identity().version, None, "empty version id");
    assert_eq!(v.error, None);
}

#[test]
fn cs_state_and_error_fields() {
    let mut item = fixture("cs-cluster-creating.json");
    item["id"] = json!("2qrppk0otds3rdmdcojqcqkqq8f0s591");
    item["state"] = json!("installing");
    item["creation_timestamp"] = json!("2026-02-02T10:21:43.084787Z");
    item["cloud_provider"] = json!({"id": "azure"});
    let parsed = clusters_service::parse_items(
        raws(vec![item.clone()]),
        ClustersServiceApi::ClustersMgmtV1,
        |_| None,
    );
    let v = view(&parsed.observations[0]);
    assert_eq!(
        (v.state.as_str(), v.phase),
        ("installing", Phase::Progressing),
        "top-level state"
    );
    assert_eq!(v.created_at, Some(ts("2026-02-02T10:21:43.084787Z").into()));
    assert_eq!(
        v.identity().platform.as_deref(),
        Some("azure"),
        "cloud_provider.id"
    );

    item["status"] = json!({"state": "error", "description": "Inflight checks failed",
        "provision_error_code": "OCM4001", "provision_error_message": "subnet has no NSG"});
    let parsed = clusters_service::parse_items(
        raws(vec![item.clone()]),
        ClustersServiceApi::AroHcpV1alpha1,
        |_| None,
    );
    let v = view(&parsed.observations[0]);
    assert_eq!(
        (v.state.as_str(), v.phase),
        ("error", Phase::Failed),
        "status.state wins"
    );
    let err = v.error.clone().unwrap();
    assert_eq!(
        (err.code.as_str(), err.message.as_str()),
        ("OCM4001", "subnet has no NSG")
    );

    item["status"] = json!({"state": "error", "description": "Inflight checks failed"});
    let parsed =
        clusters_service::parse_items(raws(vec![item]), ClustersServiceApi::AroHcpV1alpha1, |_| {
            None
        });
    let err = view(&parsed.observations[0]).error.clone().unwrap();
    assert_eq!(
        (err.code.as_str(), err.message.as_str()),
        ("", "Inflight checks failed")
    );
}

#[test]
fn cs_item_without_id_is_skipped_and_counted() {
    let parsed = clusters_service::parse_items(
        raws(vec![
            json!({"kind": "Cluster", "name": "x"}),
            json!("garbage"),
        ]),
        ClustersServiceApi::AroHcpV1alpha1,
        |_| None,
    );
    assert!(parsed.observations.is_empty());
    assert_eq!(parsed.unknown.len(), 2);
}

#[test]
fn provision_shard_names_the_management_cluster() {
    let shard: ProvisionShard = serde_json::from_value(fixture("cs-provision-shard.json")).unwrap();
    assert_eq!(
        clusters_service::mgmt_cluster_of(&shard).as_deref(),
        Some("mgmt-cluster")
    );
    let mut no_aks = shard.clone();
    no_aks.azure_shard = None;
    assert_eq!(
        clusters_service::mgmt_cluster_of(&no_aks).as_deref(),
        Some("hcp-underlay-usw3gobe-mgmt-1")
    );
    no_aks.maestro_config = None;
    assert_eq!(
        clusters_service::mgmt_cluster_of(&no_aks).as_deref(),
        Some("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")
    );
}

#[test]
fn cs_search_expressions() {
    assert_eq!(
        clusters_service::in_flight_search(),
        "state not in ('ready','hibernating','error')"
    );
    assert_eq!(
        clusters_service::settled_search(),
        "state in ('ready','hibernating','error')"
    );
    assert_eq!(
        clusters_service::ids_search(["a", "b"].into_iter()),
        "id in ('a','b')"
    );
}

/// A feedback value carrying a JSON document.
fn json_raw(name: &str, doc: &Value) -> Value {
    json!({"name": name, "fieldValue": {"type": "JsonRaw", "jsonRaw": doc.to_string()}})
}

fn bundle(cluster_id: Option<&str>, status: Value) -> Value {
    let labels = match cluster_id {
        Some(id) => json!({"api.openshift.com/id": id, "api.openshift.com/name": "my-cluster"}),
        None => json!({}),
    };
    json!({
        "id": "b7f1c9a2-0000-4000-8000-000000000001",
        "kind": "ResourceBundle",
        "href": "/api/maestro/v1/resource-bundles/b7f1c9a2-0000-4000-8000-000000000001",
        "name": "cluster-work",
        "consumer_name": "hcp-underlay-usw3gobe-mgmt-1",
        "version": 1,
        "created_at": "2026-06-10T22:50:00Z",
        "updated_at": "2026-06-10T23:20:00.123456Z",
        "metadata": {"name": "cluster-work", "labels": labels},
        "manifests": [],
        "status": status,
    })
}

fn applied_available() -> Value {
    json!([
        {"type": "Applied", "status": "True", "reason": "AppliedManifestWorkComplete", "message": "", "lastTransitionTime": "2026-06-10T22:51:00Z"},
        {"type": "Available", "status": "True", "reason": "ResourcesAvailable", "message": "", "lastTransitionTime": "2026-06-10T22:52:00Z"}
    ])
}

/// The bundle status whose ManifestWork manifest feeds back `work_status`.
fn bundle_status(work_status: &Value) -> Value {
    json!({
        "ObservedVersion": 1,
        "SequenceID": "1800000000000000000",
        "conditions": applied_available(),
        "resourceStatus": [{
            "resourceMeta": {"ordinal": 0, "group": "work.open-cluster-management.io", "version": "v1",
                "kind": "ManifestWork", "resource": "manifestworks", "name": "cluster-work", "namespace": "local-cluster"},
            "conditions": applied_available(),
            "statusFeedback": {"values": [json_raw("status", work_status)]}
        }]
    })
}

fn parse_one(b: Value) -> (Vec<Observation>, Vec<&'static str>) {
    let parsed = maestro::parse_items(raws(vec![b]));
    (
        parsed.observations,
        parsed.unknown.iter().map(|u| u.field).collect(),
    )
}

fn by_hop(obs: &[Observation], hop: Hop) -> Vec<&Observation> {
    obs.iter().filter(|o| o.hop == hop).collect()
}

#[test]
fn maestro_watched_manifestwork_status_as_inner_work() {
    let watched = fixture("maestro-manifestwork-watched.json");
    let (obs, unknown) = parse_one(bundle(Some("cs-1"), bundle_status(&watched["status"])));
    assert!(unknown.is_empty(), "{unknown:?}");
    let b = by_hop(&obs, Hop::MaestroBundle);
    assert_eq!(b.len(), 1);
    // Keyed by name (the ManifestWork's), not by the opaque id.
    assert_eq!(b[0].object, "cluster-work");
    assert_eq!(b[0].key, ClusterKey::Id("cs-1".into()));
    let bv = view(b[0]);
    assert_eq!((bv.phase, bv.state.as_str()), (Phase::Ready, "Available"));
    assert_eq!(bv.created_at, Some(ts("2026-06-10T22:50:00Z").into()));
    assert_eq!(
        bv.updated_at,
        Some(ts("2026-06-10T23:20:00.123456Z").into())
    );
    assert_eq!(bv.since, Some(ts("2026-06-10T22:52:00Z").into()));

    let w = by_hop(&obs, Hop::Manifestwork);
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].via, Via::Maestro);
    assert_eq!(w[0].object, "cluster-work", "the nested work by its name");
    let wv = view(w[0]);
    assert_eq!(wv.phase, Phase::Ready);
    assert_eq!(wv.conditions.len(), 2);
    assert_eq!(wv.conditions[0].reason, "AppliedManifestWorkComplete");
    assert_eq!(
        wv.updated_at, bv.updated_at,
        "nested views carry the bundle's updated_at"
    );
    // The watched work holds a Deployment: no HostedCluster or NodePool hop.
    assert!(by_hop(&obs, Hop::HostedCluster).is_empty());
    assert!(by_hop(&obs, Hop::NodePool).is_empty());
}

fn hc_manifest(status: &Value) -> Value {
    json!({
        "resourceMeta": {"kind": "HostedCluster", "name": "my-cluster", "namespace": "ocm-arohcpci01-cs-1", "group": "hypershift.openshift.io", "version": "v1beta1", "resource": "hostedclusters"},
        "conditions": [],
        "statusFeedback": {"values": [json_raw("status", status)]}
    })
}

fn np_manifest(name: &str, status: &Value, desired: Option<i64>) -> Value {
    let mut values = vec![json_raw("status", status)];
    if let Some(d) = desired {
        values.push(json!({"name": "replicas", "fieldValue": {"type": "Integer", "integer": d}}));
    }
    json!({
        "resourceMeta": {"kind": "NodePool", "name": name, "namespace": "ocm-arohcpci01-cs-1", "group": "hypershift.openshift.io", "version": "v1beta1", "resource": "nodepools"},
        "conditions": [],
        "statusFeedback": {"values": values}
    })
}

fn real_nodepool_status() -> Value {
    fixture("nodepool-real-with-status.json")["properties"]["status"]["kubeContent"]["status"]
        .clone()
}

#[test]
fn maestro_nested_hosted_cluster_and_real_nodepool() {
    let hc_status = json!({
        "conditions": [
            {"type": "Available", "status": "True", "reason": "AsExpected", "message": "The hosted control plane is available", "lastTransitionTime": "2026-06-10T23:00:00Z"},
            {"type": "Degraded", "status": "False", "reason": "AsExpected", "message": "", "lastTransitionTime": "2026-06-10T22:55:00Z"},
            {"type": "ValidReleaseImage", "status": "True", "reason": "AsExpected", "message": "", "lastTransitionTime": "2026-06-10T22:51:00Z"}
        ],
        "version": {"desired": {"version": "4.20.24"}, "history": [
            {"state": "Completed", "version": "4.20.24", "startedTime": "2026-06-10T22:51:00Z", "completionTime": "2026-06-10T23:10:00Z"}
        ]}
    });
    let work_status = json!({
        "conditions": applied_available(),
        "resourceStatus": {"manifests": [
            hc_manifest(&hc_status),
            np_manifest("np-1", &real_nodepool_status(), Some(3)),
            np_manifest("np-2", &real_nodepool_status(), None),
        ]}
    });
    let (obs, unknown) = parse_one(bundle(Some("cs-1"), bundle_status(&work_status)));
    assert!(unknown.is_empty(), "{unknown:?}");

    let hc = by_hop(&obs, Hop::HostedCluster);
    assert_eq!(hc.len(), 1);
    assert_eq!((hc[0].via, hc[0].object.as_str()), (Via::Maestro, ""));
    let hv = view(hc[0]);
    // One reading per kind: the state a kube watch gives the same object.
    assert_eq!(
        (hv.phase, hv.state.as_str()),
        (Phase::Ready, "Available/Completed")
    );
    assert_eq!(hv.since, Some(ts("2026-06-10T23:00:00Z").into()));
    assert_eq!(
        hv.identity().namespace.as_deref(),
        Some("ocm-arohcpci01-cs-1")
    );

    let np = by_hop(&obs, Hop::NodePool);
    assert_eq!(np.len(), 2);
    assert_eq!(np[0].object, "np-1");
    let nv = view(np[0]);
    assert_eq!((nv.phase, nv.state.as_str()), (Phase::Ready, "Ready"));
    assert_eq!(
        nv.replicas,
        Some(Replicas {
            desired: 3,
            current: 3,
            ready: 3
        })
    );
    assert_eq!(nv.conditions.len(), 18);
    assert_eq!(nv.since, Some(ts("2026-06-10T23:15:12Z").into()));
    let nv2 = view(np[1]);
    assert_eq!(
        nv2.replicas,
        Some(Replicas {
            desired: 3,
            current: 3,
            ready: 3
        }),
        "desired falls back to current"
    );
    assert_eq!(nv2.phase, Phase::Ready);
}

#[test]
fn maestro_nodepool_below_desired_and_failed_hosted_cluster() {
    let mut np_status = real_nodepool_status();
    np_status["nodesInfo"]["nodeVersions"][0]["readyNodeCount"] = json!(1);
    let hc_status = json!({"conditions": [
        {"type": "Available", "status": "False", "reason": "WaitingForAvailable", "message": "", "lastTransitionTime": "2026-06-10T22:51:00Z"},
        {"type": "ValidReleaseImage", "status": "False", "reason": "InvalidImage", "message": "image not found", "lastTransitionTime": "2026-06-10T22:52:00Z"}
    ]});
    let work_status = json!({
        "conditions": applied_available(),
        "resourceStatus": {"manifests": [hc_manifest(&hc_status), np_manifest("np-1", &np_status, Some(3))]}
    });
    let (obs, _) = parse_one(bundle(Some("cs-1"), bundle_status(&work_status)));
    let hv = view(by_hop(&obs, Hop::HostedCluster)[0]);
    // The same state a kube watch of this HostedCluster reports.
    assert_eq!(
        (hv.phase, hv.state.as_str()),
        (Phase::Failed, "ValidReleaseImage=False")
    );
    let err = hv.error.clone().unwrap();
    assert_eq!(
        (err.code.as_str(), err.message.as_str()),
        ("InvalidImage", "image not found")
    );
    assert_eq!(hv.since, Some(ts("2026-06-10T22:52:00Z").into()));
    let nv = view(by_hop(&obs, Hop::NodePool)[0]);
    assert_eq!(nv.phase, Phase::Progressing);
    assert_eq!(
        nv.replicas,
        Some(Replicas {
            desired: 3,
            current: 3,
            ready: 1
        })
    );
}

#[test]
fn maestro_degraded_hosted_cluster_fails_after_budget_in_the_model() {
    let hc_status = json!({"conditions": [
        {"type": "Available", "status": "False", "reason": "WaitingForAvailable", "message": "", "lastTransitionTime": "2026-06-10T22:51:00Z"},
        {"type": "Degraded", "status": "True", "reason": "ComponentsNotAvailable", "message": "etcd", "lastTransitionTime": "2026-06-10T23:00:00Z"}
    ]});
    let work_status = json!({"conditions": applied_available(), "resourceStatus": {"manifests": [hc_manifest(&hc_status)]}});
    let b: ResourceBundle =
        serde_json::from_value(bundle(Some("cs-1"), bundle_status(&work_status))).unwrap();
    // The source states the time-driven failure; it never decides it.
    let parsed = maestro::parse_bundle(&b, &mut Vec::new());
    let hc = parsed
        .observations
        .iter()
        .find(|o| o.hop == Hop::HostedCluster)
        .unwrap();
    assert_eq!(view(hc).phase, Phase::Progressing);
    let later = view(hc).fails_after_budget.clone().unwrap();
    assert_eq!(later.since, ts("2026-06-10T23:00:00Z"));

    // The model decides it from its own clock: one step before the budget
    // runs out it is progressing, at it failed, with no new upstream read.
    let hop_budgets = HopBudgets {
        hosted_cluster: Duration::from_secs(20 * 60),
        ..HopBudgets::default()
    };
    let mut fleet = Fleet::new(ModelConfig {
        hop_budgets,
        ..ModelConfig::default()
    });
    let batch = Batch {
        source: "maestro".into(),
        initial: false,
        observed_at: ts("2026-06-10T23:10:00Z"),
        observations: parsed.observations,
    };
    fleet.apply(batch, ts("2026-06-10T23:10:00Z"));
    fleet.tick(ts("2026-06-10T23:19:59Z"));
    let phase = |f: &Fleet| f.get("cs-1").unwrap().phase(Hop::HostedCluster);
    assert_eq!(phase(&fleet), Some(Phase::Progressing));
    fleet.tick(ts("2026-06-10T23:20:00Z"));
    assert_eq!(phase(&fleet), Some(Phase::Failed));
    let tl = fleet.get("cs-1").unwrap();
    let hop = tl.hop(Hop::HostedCluster).unwrap();
    assert_eq!(hop.error().unwrap().code, "ComponentsNotAvailable");
    assert_eq!(hop.since.at, ts("2026-06-10T23:00:00Z"));
}

#[test]
fn maestro_bundle_without_status_is_pending() {
    let (obs, unknown) = parse_one(bundle(Some("cs-1"), Value::Null));
    assert!(unknown.is_empty());
    assert_eq!(obs.len(), 1);
    let v = view(&obs[0]);
    assert_eq!(
        (v.phase, v.state.as_str()),
        (Phase::Pending, "no status yet")
    );
    assert_eq!(v.since, None);
}

#[test]
fn maestro_deleted_bundle_is_deleting() {
    let mut b = bundle(
        Some("cs-1"),
        bundle_status(&json!({"conditions": applied_available()})),
    );
    b["deleted_at"] = json!("2026-06-10T23:25:00Z");
    let (obs, _) = parse_one(b);
    assert!(
        obs.iter().all(|o| view(o).phase == Phase::Deleting),
        "{obs:?}"
    );
}

#[test]
fn maestro_bundle_without_cluster_label_is_skipped_and_counted() {
    let (obs, unknown) = parse_one(bundle(None, Value::Null));
    assert!(obs.is_empty());
    assert_eq!(unknown, vec!["metadata.labels.api.openshift.com/id"]);
}

#[test]
fn maestro_unparsable_json_raw_keeps_the_bundle() {
    let mut status = bundle_status(&json!({}));
    status["resourceStatus"][0]["statusFeedback"]["values"][0]["fieldValue"]["jsonRaw"] =
        json!("{\"conditions\": [");
    let b: ResourceBundle = serde_json::from_value(bundle(Some("cs-1"), status)).unwrap();
    let mut unknown = Vec::new();
    let parsed = maestro::parse_bundle(&b, &mut unknown);
    assert_eq!(parsed.observations.len(), 1);
    assert_eq!(parsed.observations[0].hop, Hop::MaestroBundle);
    assert!(parsed.feedback_error.is_some());
    assert_eq!(unknown.len(), 1);
    assert_eq!(unknown[0].field, "statusFeedback.jsonRaw");
}

#[test]
fn maestro_incremental_search_overlaps_the_newest_update() {
    assert_eq!(
        maestro::updated_since_search(ts("2026-06-10T23:20:00.5Z")),
        "updated_at > '2026-06-10T23:19:58.5Z'"
    );
}

/// List items as the sources receive them: raw JSON text.
fn raws(items: Vec<Value>) -> Vec<hcp_flow::sources::http::RawItem> {
    items
        .iter()
        .map(|v| serde_json::value::to_raw_value(v).unwrap())
        .collect()
}
