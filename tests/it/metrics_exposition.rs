//! Exposition: golden per-cluster text, the series budget, both formats'
//! types, and docs/metrics.md against a real scrape.

use crate::common::promtool;
use crate::common::store;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use hcp_flow::metrics::exposition::Format;
use hcp_flow::metrics::fleet::{RenderConfig, render_cluster};
use hcp_flow::model::testing::{Obs, batch, obs, rp};
use hcp_flow::model::{ConditionStatus, Fleet, Hop, ModelConfig, Phase, Via};
use hcp_flow::store::Store;
use jiff::Timestamp;

fn t(minutes: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + minutes * 60).unwrap()
}

fn model() -> ModelConfig {
    ModelConfig {
        targets: hcp_flow::model::OperationTargets::default().with(
            hcp_flow::model::OperationKind::Create,
            Duration::from_secs(1200),
        ),
        terminal_hops: vec![Hop::HostedCluster, Hop::RpFrontend],
        shard: None,
        hop_budgets: Default::default(),
        ..ModelConfig::default()
    }
}

const RID: &str = "/subscriptions/sub-1/resourcegroups/rg-1/providers/microsoft.redhatopenshift/hcpopenshiftclusters/alpha";

/// A creation seen on every service-side hop, completed.
fn completed_cluster() -> Vec<Obs> {
    vec![
        obs("c-done", Hop::ClustersService)
            .state("ready", Phase::Ready)
            .created(t(0))
            .resource_id(RID)
            .name("alpha")
            .platform("azure")
            .mgmt_cluster("mgmt-1"),
        rp(RID)
            .state("Succeeded", Phase::Ready)
            .created(t(0))
            .since(t(14)),
        obs("c-done", Hop::MaestroBundle)
            .object("bundle-1")
            .state("Available", Phase::Ready)
            .created(t(1))
            .updated(t(13))
            .since(t(2))
            .condition(
                "Applied",
                ConditionStatus::True,
                "AppliedManifestWorkComplete",
                t(2),
            )
            .condition(
                "Available",
                ConditionStatus::True,
                "ResourcesAvailable",
                t(2),
            ),
        obs("c-done", Hop::HostedCluster)
            .via(Via::Maestro)
            .state("Available", Phase::Ready)
            .since(t(12))
            .condition("Available", ConditionStatus::True, "AsExpected", t(12))
            .condition("Degraded", ConditionStatus::False, "AsExpected", t(3))
            .condition("SomethingNotAllowListed", ConditionStatus::True, "x", t(3)),
        obs("c-done", Hop::NodePool)
            .via(Via::Maestro)
            .object("np-1")
            .state("Ready", Phase::Ready)
            .since(t(13))
            .replicas(2, 2, 2)
            .condition("Ready", ConditionStatus::True, "WeirdFreeTextReason", t(13)),
    ]
}

/// A cluster being deleted: Clusters Service uninstalls, the HostedCluster
/// has its deletionTimestamp and HyperShift reports its cloud resources not
/// yet destroyed.
fn deleting_cluster() -> Vec<Obs> {
    vec![
        obs("c-del", Hop::ClustersService)
            .state("uninstalling", Phase::Deleting)
            .created(t(0))
            .since(t(50)),
        obs("c-del", Hop::HostedCluster)
            .state("deleting", Phase::Deleting)
            .since(t(51))
            .condition(
                "CloudResourcesDestroyed",
                ConditionStatus::False,
                "RemainingCloudResources",
                t(51),
            ),
    ]
}

/// A cluster with the HostedCluster's bundle and one NodePool's, both
/// applied; the NodePool bundle's feedback cannot be read and nothing of
/// its work or pool was ever seen: the exporter shows them `unknown`.
fn two_bundles() -> Vec<Obs> {
    let bundle = |object: &str| {
        obs("c-two", Hop::MaestroBundle)
            .object(object)
            .state("Available", Phase::Ready)
            .created(t(0))
            .since(t(3))
            .condition(
                "Applied",
                ConditionStatus::True,
                "AppliedManifestWorkComplete",
                t(2),
            )
            .condition(
                "Available",
                ConditionStatus::True,
                "ResourcesAvailable",
                t(3),
            )
    };
    vec![
        bundle("c-two").updated(t(5)),
        bundle("c-two-np-1").updated(t(4)).error(
            "feedback_unreadable",
            "bundle c-two-np-1 has unreadable status feedback",
        ),
        obs("c-two", Hop::Manifestwork)
            .via(Via::Maestro)
            .object("c-two")
            .state("Applied", Phase::Progressing)
            .since(t(2))
            .condition(
                "Applied",
                ConditionStatus::True,
                "AppliedManifestWorkComplete",
                t(2),
            ),
        obs("c-two", Hop::Manifestwork)
            .via(Via::Maestro)
            .object("c-two-np-1")
            .state("feedback_unreadable", Phase::Unknown)
            .since(t(1)),
        obs("c-two", Hop::HostedCluster)
            .via(Via::Maestro)
            .state("Partial", Phase::Progressing)
            .since(t(3))
            .condition(
                "Available",
                ConditionStatus::False,
                "WaitingForAvailable",
                t(3),
            ),
        obs("c-two", Hop::NodePool)
            .via(Via::Maestro)
            .object("pool-1")
            .state("feedback_unreadable", Phase::Unknown)
            .since(t(1)),
    ]
}

fn failed_cluster() -> Vec<Obs> {
    vec![
        obs("c-fail", Hop::ClustersService)
            .state("error", Phase::Failed)
            .created(t(0))
            .since(t(4))
            .error("OCM4001", "inflight checks failed"),
    ]
}

/// kube-state-metrics style: `{input, want text}` per case.
#[test]
fn per_cluster_lines_are_golden() {
    struct Case {
        name: &'static str,
        input: Vec<Obs>,
        cluster_id: &'static str,
        want: &'static str,
    }
    let cases = vec![
        Case {
            name: "completed creation across the service hops",
            input: completed_cluster(),
            cluster_id: "c-done",
            want: r#"hcpflow_cluster_created_timestamp_seconds{cluster_id="c-done"} 1800000000
hcpflow_cluster_creation_completed_timestamp_seconds{cluster_id="c-done"} 1800000840
hcpflow_cluster_info{cluster_id="c-done",name="alpha",resource_id="/subscriptions/sub-1/resourcegroups/rg-1/providers/microsoft.redhatopenshift/hcpopenshiftclusters/alpha",subscription_id="",resource_group="",mgmt_cluster="mgmt-1",namespace="",platform="azure",version=""} 1
hcpflow_hop_condition{cluster_id="c-done",hop="hosted_cluster",condition="Available",status="true",reason="AsExpected"} 1
hcpflow_hop_condition{cluster_id="c-done",hop="hosted_cluster",condition="Degraded",status="false",reason="AsExpected"} 1
hcpflow_hop_condition{cluster_id="c-done",hop="maestro_bundle",condition="Applied",status="true",reason="AppliedManifestWorkComplete",object="bundle-1"} 1
hcpflow_hop_condition{cluster_id="c-done",hop="maestro_bundle",condition="Available",status="true",reason="ResourcesAvailable",object="bundle-1"} 1
hcpflow_hop_condition{cluster_id="c-done",hop="node_pool",condition="Ready",status="true",reason="other",node_pool="np-1"} 1
hcpflow_hop_phase_since_timestamp_seconds{cluster_id="c-done",hop="clusters_service"} 1800000060
hcpflow_hop_phase_since_timestamp_seconds{cluster_id="c-done",hop="hosted_cluster"} 1800000720
hcpflow_hop_phase_since_timestamp_seconds{cluster_id="c-done",hop="maestro_bundle"} 1800000120
hcpflow_hop_phase_since_timestamp_seconds{cluster_id="c-done",hop="node_pool"} 1800000780
hcpflow_hop_phase_since_timestamp_seconds{cluster_id="c-done",hop="rp_frontend"} 1800000840
hcpflow_hop_phase{cluster_id="c-done",hop="clusters_service",phase="ready",state="ready",via="direct"} 1
hcpflow_hop_phase{cluster_id="c-done",hop="hosted_cluster",phase="ready",state="Available",via="maestro"} 1
hcpflow_hop_phase{cluster_id="c-done",hop="maestro_bundle",phase="ready",state="Available",via="direct"} 1
hcpflow_hop_phase{cluster_id="c-done",hop="node_pool",phase="ready",state="Ready",via="maestro"} 1
hcpflow_hop_phase{cluster_id="c-done",hop="rp_frontend",phase="ready",state="Succeeded",via="direct"} 1
hcpflow_hop_status_updated_timestamp_seconds{cluster_id="c-done",hop="maestro_bundle"} 1800000780
hcpflow_node_pool_replicas{cluster_id="c-done",node_pool="np-1",kind="current"} 2
hcpflow_node_pool_replicas{cluster_id="c-done",node_pool="np-1",kind="desired"} 2
hcpflow_node_pool_replicas{cluster_id="c-done",node_pool="np-1",kind="ready"} 2
"#,
        },
        Case {
            name: "two bundles, one of them without readable feedback",
            input: two_bundles(),
            cluster_id: "c-two",
            want: r#"hcpflow_cluster_created_timestamp_seconds{cluster_id="c-two"} 1800000000
hcpflow_cluster_info{cluster_id="c-two",name="",resource_id="",subscription_id="",resource_group="",mgmt_cluster="",namespace="",platform="",version=""} 1
hcpflow_hop_condition{cluster_id="c-two",hop="hosted_cluster",condition="Available",status="false",reason="WaitingForAvailable"} 1
hcpflow_hop_condition{cluster_id="c-two",hop="maestro_bundle",condition="Applied",status="true",reason="AppliedManifestWorkComplete",object="c-two"} 1
hcpflow_hop_condition{cluster_id="c-two",hop="maestro_bundle",condition="Applied",status="true",reason="AppliedManifestWorkComplete",object="c-two-np-1"} 1
hcpflow_hop_condition{cluster_id="c-two",hop="maestro_bundle",condition="Available",status="true",reason="ResourcesAvailable",object="c-two"} 1
hcpflow_hop_condition{cluster_id="c-two",hop="maestro_bundle",condition="Available",status="true",reason="ResourcesAvailable",object="c-two-np-1"} 1
hcpflow_hop_condition{cluster_id="c-two",hop="manifestwork",condition="Applied",status="true",reason="AppliedManifestWorkComplete",object="c-two"} 1
hcpflow_hop_feedback_error_info{cluster_id="c-two",hop="maestro_bundle",object="c-two-np-1",code="feedback_unreadable"} 1
hcpflow_hop_phase_since_timestamp_seconds{cluster_id="c-two",hop="hosted_cluster"} 1800000180
hcpflow_hop_phase_since_timestamp_seconds{cluster_id="c-two",hop="maestro_bundle"} 1800000180
hcpflow_hop_phase_since_timestamp_seconds{cluster_id="c-two",hop="manifestwork"} 1800000060
hcpflow_hop_phase_since_timestamp_seconds{cluster_id="c-two",hop="node_pool"} 1800000060
hcpflow_hop_phase{cluster_id="c-two",hop="hosted_cluster",phase="progressing",state="Partial",via="maestro"} 1
hcpflow_hop_phase{cluster_id="c-two",hop="maestro_bundle",phase="ready",state="Available",via="direct"} 1
hcpflow_hop_phase{cluster_id="c-two",hop="manifestwork",phase="unknown",state="feedback_unreadable",via="maestro"} 1
hcpflow_hop_phase{cluster_id="c-two",hop="node_pool",phase="unknown",state="feedback_unreadable",via="maestro"} 1
hcpflow_hop_status_updated_timestamp_seconds{cluster_id="c-two",hop="maestro_bundle"} 1800000300
hcpflow_operation_in_flight{cluster_id="c-two",operation="create",node_pool="",target_version=""} 1
hcpflow_operation_in_flight{cluster_id="c-two",operation="node_pool_create",node_pool="pool-1",target_version=""} 1
hcpflow_operation_started_timestamp_seconds{cluster_id="c-two",operation="create",node_pool=""} 1800000000
hcpflow_operation_started_timestamp_seconds{cluster_id="c-two",operation="node_pool_create",node_pool="pool-1"} 1800000060
hcpflow_operation_waiting_since_timestamp_seconds{cluster_id="c-two",operation="node_pool_create",node_pool="pool-1",hop="node_pool",phase="unknown",state="feedback_unreadable",via="maestro"} 1800000060
"#,
        },
        Case {
            name: "a deletion held by the HostedCluster's finalizer while cloud resources go",
            input: deleting_cluster(),
            cluster_id: "c-del",
            want: r#"hcpflow_cluster_created_timestamp_seconds{cluster_id="c-del"} 1800000000
hcpflow_cluster_info{cluster_id="c-del",name="",resource_id="",subscription_id="",resource_group="",mgmt_cluster="",namespace="",platform="",version=""} 1
hcpflow_hop_condition{cluster_id="c-del",hop="hosted_cluster",condition="CloudResourcesDestroyed",status="false",reason="other"} 1
hcpflow_hop_phase_since_timestamp_seconds{cluster_id="c-del",hop="clusters_service"} 1800003000
hcpflow_hop_phase_since_timestamp_seconds{cluster_id="c-del",hop="hosted_cluster"} 1800003060
hcpflow_hop_phase{cluster_id="c-del",hop="clusters_service",phase="deleting",state="uninstalling",via="direct"} 1
hcpflow_hop_phase{cluster_id="c-del",hop="hosted_cluster",phase="deleting",state="deleting",via="direct"} 1
hcpflow_operation_in_flight{cluster_id="c-del",operation="delete",node_pool="",target_version=""} 1
hcpflow_operation_started_timestamp_seconds{cluster_id="c-del",operation="delete",node_pool=""} 1800003000
"#,
        },
        Case {
            name: "failed at Clusters Service with a provision error code",
            input: failed_cluster(),
            cluster_id: "c-fail",
            want: r#"hcpflow_cluster_created_timestamp_seconds{cluster_id="c-fail"} 1800000000
hcpflow_cluster_info{cluster_id="c-fail",name="",resource_id="",subscription_id="",resource_group="",mgmt_cluster="",namespace="",platform="",version=""} 1
hcpflow_hop_failure_info{cluster_id="c-fail",hop="clusters_service",code="OCM4001"} 1
hcpflow_hop_phase_since_timestamp_seconds{cluster_id="c-fail",hop="clusters_service"} 1800000240
hcpflow_hop_phase{cluster_id="c-fail",hop="clusters_service",phase="failed",state="error",via="direct"} 1
"#,
        },
    ];
    for case in cases {
        let mut fleet = Fleet::new(model());
        fleet.apply(batch(false, t(1), case.input), t(20));
        let timeline = fleet.get(case.cluster_id).expect(case.name);
        let rendered = render_cluster(timeline, &RenderConfig::default());
        let text = rendered.text();
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort_unstable();
        let got = lines.join("\n") + "\n";
        pretty_assertions::assert_eq!(got, case.want, "case: {}", case.name);
    }
}

/// docs/design/05-metrics.md §5.4: at most 40 series per cluster with the default
/// allow-lists, for a cluster seen on all eight hops with one node pool, as
/// ARO HCP places it: the HostedCluster's bundle and ManifestWork, and the
/// pool's, each its own object.
#[test]
fn series_budget_per_cluster_is_at_most_40() {
    let now = t(30);
    let mut all_hops = completed_cluster();
    let work = |object: &str| {
        obs("c-done", Hop::Manifestwork)
            .object(object)
            .state("Available", Phase::Ready)
            .condition(
                "Applied",
                ConditionStatus::True,
                "AppliedManifestWorkComplete",
                now,
            )
            .condition(
                "Available",
                ConditionStatus::True,
                "ResourcesAvailable",
                now,
            )
            .condition("Progressing", ConditionStatus::False, "Completed", now)
    };
    all_hops.extend([
        obs("c-done", Hop::MaestroBundle)
            .object("bundle-np-1")
            .state("Available", Phase::Ready)
            .created(t(1))
            .updated(t(13))
            .since(t(2))
            .condition(
                "Applied",
                ConditionStatus::True,
                "AppliedManifestWorkComplete",
                t(2),
            )
            .condition(
                "Available",
                ConditionStatus::True,
                "ResourcesAvailable",
                t(2),
            ),
        work("c-done"),
        work("c-done-np-1"),
        obs("c-done", Hop::RpFrontend)
            .state("Succeeded", Phase::Ready)
            .condition("Available", ConditionStatus::True, "AsExpected", now)
            .condition("Degraded", ConditionStatus::False, "AsExpected", now),
        obs("c-done", Hop::HostedCluster)
            .state("Available", Phase::Ready)
            .condition("Available", ConditionStatus::True, "AsExpected", now)
            .condition("Progressing", ConditionStatus::False, "AsExpected", now)
            .condition("Degraded", ConditionStatus::False, "AsExpected", now)
            .condition(
                "EtcdAvailable",
                ConditionStatus::True,
                "QuorumAvailable",
                now,
            ),
        obs("c-done", Hop::ControlPlane)
            .state("Ready", Phase::Ready)
            .pods(30, 0)
            .condition("Available", ConditionStatus::True, "AsExpected", now),
        obs("c-done", Hop::ManagedCluster)
            .state("Available", Phase::Ready)
            .condition(
                "HubAcceptedManagedCluster",
                ConditionStatus::True,
                "HubClusterAdminAccepted",
                now,
            )
            .condition(
                "ManagedClusterJoined",
                ConditionStatus::True,
                "ManagedClusterJoined",
                now,
            )
            .condition(
                "ManagedClusterConditionAvailable",
                ConditionStatus::True,
                "ManagedClusterAvailable",
                now,
            ),
        obs("c-done", Hop::NodePool)
            .object("np-1")
            .state("Ready", Phase::Ready)
            .replicas(2, 2, 2)
            .condition("Ready", ConditionStatus::True, "AsExpected", now)
            .condition("AllMachinesReady", ConditionStatus::True, "AsExpected", now)
            .condition("AllNodesHealthy", ConditionStatus::True, "AsExpected", now),
    ]);
    let mut fleet = Fleet::new(model());
    fleet.apply(batch(false, now, all_hops), now);
    let timeline = fleet.get("c-done").unwrap();
    assert_eq!(timeline.hops.len(), 8, "every hop present");
    let rendered = render_cluster(timeline, &RenderConfig::default());
    let series = rendered.series();
    assert!(
        series <= 40,
        "a cluster costs {series} series, budget is 40:\n{}",
        rendered.text()
    );
    assert!(
        series >= 30,
        "suspiciously few series ({series}): is a family missing?"
    );
    // docs/design/05-metrics.md §5.5: the family name and the cluster id start every
    // line and are kept once; what is held is a fraction of what is written.
    let text = rendered.text();
    assert_eq!(rendered.len(), text.len());
    assert_eq!(text.lines().count(), series);
    assert!(
        text.lines()
            .all(|l| l.starts_with("hcpflow_") && l.contains("{cluster_id=\"c-done\"")),
        "{text}"
    );
    assert!(
        rendered.held_bytes() * 10 < rendered.len() * 7,
        "{} bytes held for {} written",
        rendered.held_bytes(),
        rendered.len()
    );
}

/// A store of the test model with no source to wait for and nothing in it.
fn empty_store() -> std::sync::Arc<Store> {
    store::builder().model(model()).build()
}

fn populated_store() -> std::sync::Arc<Store> {
    // The registry the exporter really uses, so the doc check sees every family.
    let (registry, parts) = hcp_flow::app::exporter_registry();
    let store = store::builder()
        .model(model())
        .sources(&["test"])
        .build_with_registry(registry);
    drop(parts);
    store.apply_at(batch(true, t(0), vec![]), t(0));
    let mut observations = completed_cluster();
    observations.extend(failed_cluster());
    observations.push(
        obs("c-cp", Hop::ControlPlane)
            .state("NotReady", Phase::Progressing)
            .created(t(0))
            .pods(3, 1),
    );
    store.apply_at(batch(false, t(15), observations), t(15));
    let metrics = store.exporter_metrics();
    metrics.request_done("test", 0.2);
    metrics.request_failed(
        "test",
        hcp_flow::metrics::exporter::RequestErrorKind::timeout,
    );
    metrics.unknown_value("test", "status.state");
    metrics.watch_event("test", "Applied");
    metrics.sync_succeeded("test", t(15));
    store.tick_at(t(30));
    store
}

/// Family name → type, from `# TYPE` lines.
fn types(body: &str) -> BTreeMap<String, String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect()
}

#[test]
fn text_format_declares_every_sample_with_its_type() {
    let body = populated_store().scrape(Format::Text);
    assert!(!body.contains("# EOF"));
    assert!(
        !body.contains(" # {"),
        "exemplars leak into the text format"
    );
    let declared = types(&body);
    assert_eq!(
        declared
            .get("hcpflow_operation_slo_events_total")
            .map(String::as_str),
        Some("counter")
    );
    assert_eq!(
        declared
            .get("hcpflow_source_requests_total")
            .map(String::as_str),
        Some("counter")
    );
    for line in body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let name = line.split(['{', ' ']).next().unwrap();
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| declared.get(*f).map(String::as_str) == Some("histogram"))
            })
            .unwrap_or(name);
        assert!(
            declared.contains_key(family),
            "sample {name} has no TYPE line"
        );
    }
    // The bucket at the SLO target, written as users query it.
    assert!(body.contains(r#"hcpflow_operation_duration_seconds_bucket{le="1200",operation="create",platform="azure",version="unknown",outcome="succeeded"} 1"#));
}

#[test]
fn openmetrics_format_ends_with_eof_and_carries_trace_exemplars() {
    let body = populated_store().scrape(Format::OpenMetrics);
    assert!(body.ends_with("# EOF\n"));
    assert_eq!(body.matches("# EOF").count(), 1);
    let trace_id = hcp_flow::traces::trace_id_hex("c-done");
    let exemplar = format!("# {{trace_id=\"{trace_id}\"}} 840");
    assert!(
        body.lines().any(
            |l| l.starts_with("hcpflow_operation_duration_seconds_bucket") && l.contains(&exemplar)
        ),
        "no creation exemplar with the trace id in:\n{body}"
    );
    // Counters are declared without the suffix in OpenMetrics.
    assert_eq!(
        types(&body)
            .get("hcpflow_operation_slo_events")
            .map(String::as_str),
        Some("counter")
    );
}

/// `promtool check metrics` reads the 0.0.4 format the way Prometheus does.
#[test]
fn promtool_accepts_the_text_format() {
    promtool::check_metrics(&populated_store().scrape(Format::Text));
}

/// docs/metrics.md lists exactly the families a scrape shows, with their types
/// and every label that appears.
#[test]
fn docs_metrics_md_matches_a_real_scrape() {
    let body = populated_store().scrape(Format::Text);
    let scraped = types(&body);
    let mut scraped_labels: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let Some((name, rest)) = line.split_once('{') else {
            continue;
        };
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| scraped.get(*f).map(String::as_str) == Some("histogram"))
            })
            .unwrap_or(name);
        let labels = rest
            .split("\",")
            .filter_map(|kv| kv.split_once("=\""))
            .map(|(k, _)| k.to_string());
        scraped_labels
            .entry(family.to_string())
            .or_default()
            .extend(labels);
    }

    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/metrics.md")).unwrap();
    let mut documented: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
    for row in doc.lines().filter(|l| l.starts_with("| `hcpflow_")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let name = cells[1].trim_matches('`').to_string();
        let kind = cells[2].to_string();
        let labels = cells[3]
            .split(',')
            .map(|l| l.trim().trim_matches('`').to_string())
            .filter(|l| !l.is_empty() && l != "–")
            .collect();
        documented.insert(name, (kind, labels));
    }
    // The per-cluster families as declared, with every label a line can
    // carry, whether or not this scrape shows it.
    for family in hcp_flow::metrics::fleet::all_families() {
        let (kind, labels) = documented
            .get(family.name)
            .unwrap_or_else(|| panic!("{} is not in docs/metrics.md", family.name));
        assert_eq!(kind, family.kind.as_str(), "type of {}", family.name);
        let declared: BTreeSet<String> = family.label_names().map(str::to_string).collect();
        assert_eq!(labels, &declared, "labels of {}", family.name);
    }
    let scraped_names: BTreeSet<&String> = scraped.keys().collect();
    let documented_names: BTreeSet<&String> = documented.keys().collect();
    assert_eq!(
        scraped_names, documented_names,
        "docs/metrics.md and the registry disagree"
    );
    for (name, (kind, labels)) in &documented {
        assert_eq!(&scraped[name], kind, "type of {name}");
        if let Some(seen) = scraped_labels.get(name) {
            let mut seen = seen.clone();
            seen.remove("le");
            assert!(
                seen.is_subset(labels),
                "{name}: scraped labels {seen:?} not all documented in {labels:?}"
            );
        }
    }
}

/// docs/design/04-identities-and-joins.md §4.5: ACM's collector rewrites series carrying `_id` (and drops
/// the batch when the id is unknown), and `cluster` is the multi-cluster
/// target label. Neither may appear.
#[test]
fn no_label_is_named_cluster_or_underscore_id() {
    let body = populated_store().scrape(Format::OpenMetrics);
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let Some((_, labels)) = line.split_once('{') else {
            continue;
        };
        let labels = labels.split('}').next().unwrap_or_default();
        for pair in labels.split("\",") {
            let name = pair
                .split('=')
                .next()
                .unwrap_or_default()
                .trim_start_matches(',');
            assert!(
                name != "cluster" && name != "_id",
                "forbidden label {name} in {line}"
            );
        }
    }
}

#[test]
fn hop_budgets_are_published_as_configured() {
    let mut config = model();
    config.hop_budgets.hosted_cluster = Duration::from_secs(300);
    let store = store::builder().model(config).time_scale(60.0).build();
    let body = store.scrape(Format::Text);
    let budget = |hop: &str| -> f64 {
        let prefix = format!("hcpflow_hop_budget_seconds{{operation=\"create\",hop=\"{hop}\"}} ");
        body.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no budget for {hop} in:\n{body}"))
            .parse()
            .unwrap()
    };
    assert_eq!(budget("hosted_cluster"), 300.0);
    assert_eq!(budget("maestro_bundle"), 600.0, "the default");
    let published = body
        .lines()
        .filter(|l| l.starts_with("hcpflow_hop_budget_seconds{"))
        .count();
    assert_eq!(
        published,
        2 * Hop::ALL.len() + 12,
        "one series per hop of each operation kind's flow (a node pool's creation, removal and upgrade: its RP resource, Clusters Service node pool and NodePool; an upgrade's: the RP, Clusters Service and HostedCluster)"
    );
    for (operation, hop, seconds) in [
        ("upgrade", "rp_frontend", "5400.0"),
        ("upgrade", "clusters_service", "5400.0"),
        ("upgrade", "hosted_cluster", "4500.0"),
        ("node_pool_upgrade", "node_pool", "3600.0"),
        ("node_pool_upgrade", "rp_frontend", "5400.0"),
        ("node_pool_upgrade", "clusters_service", "5400.0"),
    ] {
        let line = format!(r#"hcpflow_hop_budget_seconds{{operation="{operation}",hop="{hop}"}} "#);
        let got = body.lines().find_map(|l| l.strip_prefix(&line));
        assert_eq!(got, Some(seconds), "the upgrade's own default at {hop}");
    }
    let delete = body
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                r#"hcpflow_hop_budget_seconds{operation="delete",hop="hosted_cluster"} "#,
            )
        })
        .expect("the deletion's budget");
    assert_eq!(
        delete, "1800.0",
        "the deletion's own default, not creation's"
    );
}

#[test]
fn tracked_clusters_follow_changes_by_scope_without_a_walk() {
    let store = empty_store();
    let tracked = |store: &Store, scope: &str| -> f64 {
        let prefix = format!("hcpflow_tracked_clusters{{scope=\"{scope}\"}} ");
        let body = store.scrape(Format::Text);
        body.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .map_or(0.0, |v| v.parse().unwrap())
    };
    let service = |id: &str| obs(id, Hop::ClustersService).state("installing", Phase::Progressing);
    let direct = |id: &str| obs(id, Hop::HostedCluster).state("NotAvailable", Phase::Progressing);
    let nested = |id: &str| direct(id).via(Via::Maestro);
    store.apply_at(
        batch(
            false,
            t(1),
            vec![
                service("a"),
                service("b"),
                direct("b"),
                direct("c"),
                nested("d"),
            ],
        ),
        t(1),
    );
    store.tick_at(t(1));
    assert_eq!(
        tracked(&store, "service"),
        3.0,
        "a, b, and d through Maestro"
    );
    assert_eq!(tracked(&store, "management"), 2.0, "b and c");
    store.apply_at(
        batch(
            false,
            t(2),
            vec![direct("b").gone(), service("c"), service("a").gone()],
        ),
        t(2),
    );
    store.tick_at(t(2));
    assert_eq!(tracked(&store, "service"), 3.0, "b, c and d");
    assert_eq!(tracked(&store, "management"), 1.0, "c");
}

/// What a scraper that asks for gzip (Prometheus does) receives: the same
/// exposition, compressed, labelled so, and much smaller; without the ask,
/// plain text.
#[tokio::test]
async fn metrics_are_gzipped_when_the_scraper_asks() {
    use std::io::Read;
    crate::common::init();
    let store = populated_store();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(hcp_flow::server::serve(
        listener,
        store.clone(),
        std::future::pending(),
    ));
    let client = reqwest::Client::new();
    let url = format!("http://{addr}/metrics");
    let plain = client.get(&url).send().await.unwrap();
    assert!(plain.headers().get("content-encoding").is_none());
    let plain = plain.bytes().await.unwrap();
    let zipped = client
        .get(&url)
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(zipped.headers()["content-encoding"], "gzip");
    assert_eq!(zipped.headers()["vary"], "accept-encoding");
    let zipped = zipped.bytes().await.unwrap();
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(&zipped[..])
        .read_to_end(&mut text)
        .unwrap();
    // The store is at rest: the two scrapes render the same text.
    assert_eq!(
        String::from_utf8(text).unwrap(),
        String::from_utf8(plain.to_vec()).unwrap()
    );
    assert!(
        zipped.len() * 3 < plain.len(),
        "{} vs {}",
        zipped.len(),
        plain.len()
    );
}

/// A fleet's body is streamed in chunks as it is assembled, not built whole
/// first: it arrives chunked, equal to the store's own rendering, both
/// plain and gzipped, and a scraper that leaves halfway costs the next
/// scrape nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_body_is_streamed_whole_in_both_encodings() {
    use std::io::Read;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    crate::common::init();
    let store = hcp_flow::bench::synthetic_store(2_000);
    let want = store.scrape(Format::OpenMetrics);
    assert!(
        want.len() > 4 * 1024 * 1024,
        "{} bytes: too small to stream",
        want.len()
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(hcp_flow::server::serve(
        listener,
        store.clone(),
        std::future::pending(),
    ));
    let url = format!("http://{addr}/metrics");
    let client = reqwest::Client::new();
    let openmetrics = "application/openmetrics-text;version=1.0.0";

    // A scraper that reads the headers and a little of the body, then leaves.
    let mut early = tokio::net::TcpStream::connect(addr).await.unwrap();
    early
        .write_all(
            format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAccept: {openmetrics}\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    let mut start = [0u8; 4096];
    let n = early.read(&mut start).await.unwrap();
    assert!(String::from_utf8_lossy(&start[..n]).starts_with("HTTP/1.1 200"));
    drop(early);

    let plain = client
        .get(&url)
        .header("accept", openmetrics)
        .send()
        .await
        .unwrap();
    assert!(
        plain.content_length().is_none(),
        "a streamed body has no length up front"
    );
    assert_eq!(plain.headers()["transfer-encoding"], "chunked");
    let plain = plain.text().await.unwrap();
    assert_eq!(plain.len(), want.len());
    assert!(
        plain == want,
        "the streamed body differs from the store's rendering"
    );

    let zipped = client
        .get(&url)
        .header("accept", openmetrics)
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(zipped.headers()["content-encoding"], "gzip");
    let zipped = zipped.bytes().await.unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(&zipped[..])
        .read_to_string(&mut text)
        .unwrap();
    assert!(
        text == want,
        "the gzipped body differs from the store's rendering"
    );
    assert!(text.ends_with("# EOF\n"));
}

/// docs/design/05-metrics.md §5.5: the JSON API takes the timelines as reference
/// counts under the lock and reads them without it. What it took is a
/// snapshot: a change applied while it serialises does not tear it, and the
/// next request sees the change.
#[test]
fn timelines_taken_for_the_api_are_a_snapshot_later_changes_do_not_touch() {
    let store = empty_store();
    let installing =
        |id: &str| obs(id, Hop::ClustersService).state("installing", Phase::Progressing);
    store.apply_at(
        batch(false, t(0), vec![installing("c1"), installing("c2")]),
        t(0),
    );
    let taken = store.timelines();
    let held = store.resolve_shared("c1").unwrap();

    store.apply_at(
        batch(
            false,
            t(5),
            vec![obs("c1", Hop::ClustersService).state("ready", Phase::Ready)],
        ),
        t(5),
    );
    let state_of = |timelines: &[std::sync::Arc<hcp_flow::model::Timeline>], id: &str| {
        let t = timelines.iter().find(|t| t.cluster_id == id).unwrap();
        t.hops.get(&Hop::ClustersService).unwrap().state.clone()
    };
    assert_eq!(state_of(&taken, "c1"), "installing");
    assert_eq!(state_of(std::slice::from_ref(&held), "c1"), "installing");
    let now = store.timelines();
    assert_eq!(state_of(&now, "c1"), "ready");
    assert_eq!(state_of(&now, "c2"), "installing");
    // The unchanged timeline is shared, not copied.
    let c2 = |timelines: &[std::sync::Arc<hcp_flow::model::Timeline>]| {
        timelines
            .iter()
            .find(|t| t.cluster_id == "c2")
            .unwrap()
            .clone()
    };
    assert!(std::sync::Arc::ptr_eq(&c2(&taken), &c2(&now)));
}
