//! The Helm chart, rendered offline by Helm's own engine (helm-python-sdk, see
//! tests/chart/render.py) with default values and with every optional part on:
//! it lints, its values schema refuses bad values, the manifests parse as the
//! Kubernetes objects they claim to be, the ClusterRole is read-only and the
//! one docs/rbac.md describes, the pod is hardened, the config it mounts is one
//! the exporter accepts, and the ACM bundle names only metrics the exporter
//! emits. Also: the chart's generated copies are fresh, and the Containerfile
//! keeps its shape.
//!
//! Needs `python3` with helm-python-sdk (`.ci/run` installs it); set
//! `HCPFLOW_HELM_PYTHON` to use another interpreter.

use crate::common::helm::{self, CHART};
use crate::common::promql::collect_names;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use hcp_flow::config::Config;
use hcp_flow::sources::kube::config::KubeSourceConfig;
use hcp_flow::sources::kube::rbac::rbac_rules;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolumeClaim, PodTemplateSpec, Service, ServiceAccount,
};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use serde_json::{Value, json};

use crate::common::ROOT;
const RELEASE: &str = "hcp-flow";
const NAMESPACE: &str = "monitoring";
const ACM_NAMESPACE: &str = "open-cluster-management-observability";
/// `stateStore.mountPath` by default.
const STATE_DIR: &str = "/var/lib/hcp-flow";

/// Values the schema must refuse, each with the reason.
const INVALID: [(&str, &str); 7] = [
    ("zero-shards", "sharding: {enabled: true, shards: 0}\n"),
    ("unknown-key", "replicaCount: 2\n"),
    ("listen-in-config", "config: {listen: 0.0.0.0:8080}\n"),
    (
        "credential-without-source",
        "credentials: [{name: token}]\n",
    ),
    (
        "bad-mode",
        "inCluster: {enabled: true, mgmtCluster: a, mode: hypershift}\n",
    ),
    (
        "misspelt-state-key",
        "stateStore: {enabled: true, mountPath: /s, persistance: {enabled: true}}\n",
    ),
    (
        "relative-state-path",
        "stateStore: {enabled: true, mountPath: state}\n",
    ),
];

struct Scenario {
    error: Option<String>,
    lint: Value,
    /// Template path → rendered text.
    manifests: BTreeMap<String, String>,
}

impl Scenario {
    /// Every object rendered, parsed from YAML, with the template it came from.
    fn objects(&self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for (path, text) in &self.manifests {
            if path.ends_with("NOTES.txt") {
                continue;
            }
            for doc in split_documents(text) {
                let value: Value = serde_saphyr::from_str(&doc)
                    .unwrap_or_else(|e| panic!("{path} does not parse as YAML: {e}\n{doc}"));
                if !value.is_null() {
                    out.push((path.clone(), value));
                }
            }
        }
        out
    }

    fn of_kind(&self, kind: &str) -> Vec<Value> {
        self.objects()
            .into_iter()
            .map(|(_, o)| o)
            .filter(|o| o["kind"] == kind)
            .collect()
    }

    fn one(&self, kind: &str) -> Value {
        let all = self.of_kind(kind);
        assert_eq!(all.len(), 1, "expected one {kind}, got {}", all.len());
        all.into_iter().next().unwrap()
    }

    fn config_map(&self, name: &str) -> Value {
        self.of_kind("ConfigMap")
            .into_iter()
            .find(|c| c["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no ConfigMap {name}"))
    }

    fn notes(&self) -> &str {
        self.manifests
            .iter()
            .find(|(p, _)| p.ends_with("NOTES.txt"))
            .map(|(_, t)| t.as_str())
            .unwrap_or("")
    }

    /// The exporter's workload (Deployment or StatefulSet) pod template.
    fn pod(&self) -> PodTemplateSpec {
        let objects = self.objects();
        let mut pods: Vec<PodTemplateSpec> = Vec::new();
        for (_, o) in objects {
            match o["kind"].as_str() {
                Some("Deployment") => pods.push(
                    serde_json::from_value::<Deployment>(o)
                        .unwrap()
                        .spec
                        .unwrap()
                        .template,
                ),
                Some("StatefulSet") => pods.push(
                    serde_json::from_value::<StatefulSet>(o)
                        .unwrap()
                        .spec
                        .unwrap()
                        .template,
                ),
                _ => {}
            }
        }
        assert_eq!(pods.len(), 1, "one exporter workload");
        pods.pop().unwrap()
    }

    /// The exporter's config file, as the chart's ConfigMap holds it.
    fn exporter_config(&self) -> Value {
        let cm = self.config_map(RELEASE);
        serde_saphyr::from_str(cm["data"]["config.yaml"].as_str().unwrap()).unwrap()
    }
}

/// YAML documents of one rendered template (Helm separates them with `---`).
fn split_documents(text: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in text.lines() {
        if line.trim_end() == "---" {
            docs.push(String::new());
        } else {
            let doc = docs.last_mut().unwrap();
            doc.push_str(line);
            doc.push('\n');
        }
    }
    docs.into_iter()
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        })
        .collect()
}

/// Valid scenarios: the defaults and every `ci/*-values.yaml`.
fn valid_scenarios() -> Vec<(String, String)> {
    let mut out = vec![("default".to_string(), String::new())];
    let mut files: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join(CHART).join("ci"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with("-values.yaml"))
        .collect();
    files.sort();
    for file in files {
        let name = file
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches("-values.yaml")
            .to_string();
        out.push((name, std::fs::read_to_string(&file).unwrap()));
    }
    out
}

/// Renders every scenario once (Helm's engine is the slow part) and shares it.
fn rendered() -> &'static BTreeMap<String, Scenario> {
    static RENDERED: OnceLock<BTreeMap<String, Scenario>> = OnceLock::new();
    RENDERED.get_or_init(|| {
        let mut scenarios: Vec<Value> = valid_scenarios()
            .into_iter()
            .map(|(name, values)| json!({"name": name, "values_yaml": values}))
            .collect();
        scenarios.extend(
            INVALID
                .iter()
                .map(|(name, values)| json!({"name": name, "values_yaml": values})),
        );
        scenarios
            .push(json!({"name": "no-source", "values_yaml": "inCluster: {enabled: false}\n"}));
        scenarios.push(json!({"name": "no-state", "values_yaml": "stateStore: {enabled: false, mountPath: /x}\n"}));
        scenarios.push(json!({"name": "runbook-base", "values_yaml": format!("{ALL_ON_RULES}runbookBaseUrl: {OWN_RUNBOOKS}\n")}));
        let result = helm::render(RELEASE, NAMESPACE, scenarios);
        eprintln!("rendered with Helm SDK {}", result["helm_sdk"]);
        result["scenarios"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(name, s)| {
                let manifests = s["manifests"]
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                            .collect()
                    })
                    .unwrap_or_default();
                let scenario = Scenario {
                    error: s["error"].as_str().map(str::to_string),
                    lint: s["lint"].clone(),
                    manifests,
                };
                (name.clone(), scenario)
            })
            .collect()
    })
}

fn scenario(name: &str) -> &'static Scenario {
    let s = rendered()
        .get(name)
        .unwrap_or_else(|| panic!("no scenario {name}"));
    assert!(s.error.is_none(), "{name} failed: {:?}", s.error);
    s
}

fn kinds(s: &Scenario) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (_, o) in s.objects() {
        *out.entry(o["kind"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    out
}

#[test]
fn chart_lints_and_renders_with_defaults_and_every_option() {
    for (name, _) in valid_scenarios() {
        let s = scenario(&name);
        assert_eq!(s.lint["errors"], json!([]), "{name}: lint errors");
        for message in s.lint["messages"].as_array().unwrap() {
            // 1 = info ("icon is recommended"); warnings and errors fail.
            assert!(
                message["severity"].as_i64().unwrap() <= 1,
                "{name}: lint: {message}"
            );
        }
        assert!(!s.objects().is_empty(), "{name} renders nothing");
    }
    assert!(valid_scenarios().iter().any(|(n, _)| n == "all-on"));
}

#[test]
fn schema_refuses_invalid_values() {
    for (name, values) in INVALID {
        let s = rendered().get(name).unwrap();
        let error = s
            .error
            .as_deref()
            .unwrap_or_else(|| panic!("values accepted but should not be:\n{values}"));
        assert!(error.contains("HelmValuesError"), "{name}: {error}");
    }
}

#[test]
fn manifests_parse_as_kubernetes_objects_of_the_expected_kinds() {
    let expected = |pairs: &[(&str, usize)]| -> BTreeMap<String, usize> {
        pairs.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    };
    let base = [
        ("ServiceAccount", 1),
        ("ClusterRole", 1),
        ("ClusterRoleBinding", 1),
        ("Service", 1),
    ];
    let mut default = base.to_vec();
    default.extend([("Deployment", 1), ("ConfigMap", 1)]);
    assert_eq!(kinds(scenario("default")), expected(&default));

    let dashboards = std::fs::read_dir(Path::new(ROOT).join("dashboards"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "json")
        })
        .count();
    // config + Grafana dashboards + ACM allowlist + Thanos rules + ACM dashboards.
    let config_maps = 1 + dashboards + 2 + dashboards;
    assert_eq!(
        kinds(scenario("all-on")),
        expected(&[
            ("ServiceAccount", 1),
            ("ClusterRole", 1),
            ("ClusterRoleBinding", 1),
            ("Service", 2),
            ("StatefulSet", 1),
            ("ConfigMap", config_maps),
            ("ServiceMonitor", 1),
            ("PrometheusRule", 1),
            ("NetworkPolicy", 1),
        ])
    );
    assert_eq!(
        kinds(scenario("acm-hub")),
        expected(&[("ConfigMap", 2 + dashboards)])
    );
    assert_eq!(
        kinds(scenario("service-scope")),
        expected(&[
            ("ServiceAccount", 1),
            ("Service", 1),
            ("Deployment", 1),
            ("ConfigMap", 1),
            ("ServiceMonitor", 1),
            ("PersistentVolumeClaim", 1),
        ])
    );

    for (name, _) in valid_scenarios() {
        let mut seen = BTreeSet::new();
        for (path, o) in scenario(&name).objects() {
            let kind = o["kind"].as_str().unwrap().to_string();
            let what = format!("{name}: {path}: {kind}");
            // The typed parse checks apiVersion, kind and every field's shape.
            let typed = match kind.as_str() {
                "Deployment" => serde_json::from_value::<Deployment>(o.clone()).map(drop),
                "StatefulSet" => serde_json::from_value::<StatefulSet>(o.clone()).map(drop),
                "Service" => serde_json::from_value::<Service>(o.clone()).map(drop),
                "ServiceAccount" => serde_json::from_value::<ServiceAccount>(o.clone()).map(drop),
                "ConfigMap" => serde_json::from_value::<ConfigMap>(o.clone()).map(drop),
                "ClusterRole" => serde_json::from_value::<ClusterRole>(o.clone()).map(drop),
                "ClusterRoleBinding" => {
                    serde_json::from_value::<ClusterRoleBinding>(o.clone()).map(drop)
                }
                "NetworkPolicy" => serde_json::from_value::<NetworkPolicy>(o.clone()).map(drop),
                "PersistentVolumeClaim" => {
                    serde_json::from_value::<PersistentVolumeClaim>(o.clone()).map(drop)
                }
                "ServiceMonitor" | "PrometheusRule" => {
                    assert_eq!(o["apiVersion"], "monitoring.coreos.com/v1", "{what}");
                    assert!(o["spec"].is_object(), "{what}: no spec");
                    Ok(())
                }
                other => panic!("{what}: unexpected kind {other}"),
            };
            typed.unwrap_or_else(|e| panic!("{what}: not a valid object: {e}"));
            let meta = &o["metadata"];
            let obj_name = meta["name"].as_str().unwrap();
            assert!(
                obj_name.len() <= 63 && !obj_name.is_empty(),
                "{what}: name {obj_name}"
            );
            let cluster_scoped = kind.starts_with("ClusterRole");
            assert_eq!(meta["namespace"].is_string(), !cluster_scoped, "{what}");
            assert!(
                seen.insert((
                    kind.clone(),
                    meta["namespace"].to_string(),
                    obj_name.to_string()
                )),
                "{what}: {obj_name} rendered twice"
            );
        }
    }
}

#[test]
fn cluster_role_is_read_only_and_generated_from_the_rbac_rules() {
    for name in ["default", "all-on"] {
        let role: ClusterRole = serde_json::from_value(scenario(name).one("ClusterRole")).unwrap();
        let rules = role.rules.unwrap();
        let allowed = ["get", "list", "watch"];
        let mut got = Vec::new();
        for rule in &rules {
            for verb in &rule.verbs {
                assert!(allowed.contains(&verb.as_str()), "{name}: verb {verb}");
            }
            assert!(rule.non_resource_urls.is_none() && rule.resource_names.is_none());
            for group in rule.api_groups.as_deref().unwrap_or_default() {
                for resource in rule.resources.as_deref().unwrap_or_default() {
                    assert_ne!(resource, "secrets", "no secret is ever read from the API");
                    got.push((group.clone(), resource.clone(), rule.verbs.clone()));
                }
            }
        }
        let want: Vec<_> = rbac_rules()
            .into_iter()
            .map(|(g, r, v)| {
                (
                    g.to_string(),
                    r.to_string(),
                    v.into_iter().map(str::to_string).collect::<Vec<_>>(),
                )
            })
            .collect();
        assert_eq!(got, want, "{name}: regenerate with gen-chart-files");

        let binding: ClusterRoleBinding =
            serde_json::from_value(scenario(name).one("ClusterRoleBinding")).unwrap();
        assert_eq!(binding.role_ref.name, role.metadata.name.unwrap());
        let sa = scenario(name).one("ServiceAccount");
        let subject = &binding.subjects.unwrap()[0];
        assert_eq!(subject.kind, "ServiceAccount");
        assert_eq!(json!(subject.name), sa["metadata"]["name"]);
        assert_eq!(subject.namespace.as_deref(), Some(NAMESPACE));
    }
}

#[test]
fn pod_is_non_root_read_only_and_drops_every_capability() {
    for (name, _) in valid_scenarios() {
        if name == "acm-hub" {
            continue;
        }
        let pod = scenario(&name).pod();
        let spec = pod.spec.unwrap();
        let psc = spec.security_context.unwrap();
        assert_eq!(psc.run_as_non_root, Some(true), "{name}");
        assert_ne!(psc.run_as_user, Some(0), "{name}");
        assert_eq!(
            psc.seccomp_profile.unwrap().type_,
            "RuntimeDefault",
            "{name}"
        );
        assert!(spec.host_network != Some(true) && spec.host_pid != Some(true));
        assert!(spec.termination_grace_period_seconds.unwrap() > 0);
        assert_eq!(spec.containers.len(), 1);
        let c = &spec.containers[0];
        let sc = c.security_context.clone().unwrap();
        assert_eq!(sc.run_as_non_root, Some(true), "{name}");
        assert_eq!(sc.read_only_root_filesystem, Some(true), "{name}");
        assert_eq!(sc.allow_privilege_escalation, Some(false), "{name}");
        assert_ne!(sc.privileged, Some(true), "{name}");
        let caps = sc.capabilities.unwrap();
        assert_eq!(caps.drop, Some(vec!["ALL".to_string()]), "{name}");
        assert!(caps.add.unwrap_or_default().is_empty(), "{name}");
        assert_eq!(sc.seccomp_profile.unwrap().type_, "RuntimeDefault");

        let probe_path = |p: &Option<k8s_openapi::api::core::v1::Probe>| {
            p.as_ref().unwrap().http_get.as_ref().unwrap().path.clone()
        };
        assert_eq!(probe_path(&c.liveness_probe).as_deref(), Some("/healthz"));
        assert_eq!(probe_path(&c.readiness_probe).as_deref(), Some("/readyz"));
        let resources = c.resources.clone().unwrap();
        assert!(resources.requests.is_some() && resources.limits.is_some());
        assert_eq!(
            c.args.clone().unwrap(),
            [
                "serve",
                "--config",
                "/etc/hcp-flow/config.yaml",
                "--state-dir",
                STATE_DIR
            ],
            "{name}"
        );
        let port = c.ports.clone().unwrap()[0].container_port;
        let listen = scenario(&name).exporter_config()["listen"].clone();
        assert_eq!(listen, json!(format!("0.0.0.0:{port}")), "{name}");
        // Writable: /tmp and the state directory only.
        for mount in c.volume_mounts.clone().unwrap_or_default() {
            if mount.mount_path != "/tmp" && mount.mount_path != STATE_DIR {
                assert_eq!(mount.read_only, Some(true), "{name}: {}", mount.mount_path);
            }
        }
    }
}

/// Every file path the config names (token, CA, kubeconfig) lies under a
/// read-only mount of the pod.
fn assert_paths_are_mounted(name: &str, config: &Value, pod: &PodTemplateSpec) {
    let mounts: Vec<String> = pod.spec.as_ref().unwrap().containers[0]
        .volume_mounts
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|m| m.mount_path)
        .collect();
    let mut paths = Vec::new();
    for (_, source) in config["sources"].as_object().unwrap() {
        for entry in source
            .as_array()
            .cloned()
            .unwrap_or_else(|| vec![source.clone()])
        {
            for path in [
                &entry["auth"]["bearer_token_file"],
                &entry["ca_file"],
                &entry["kubeconfig"],
            ] {
                if let Some(p) = path.as_str() {
                    paths.push(p.to_string());
                }
            }
        }
    }
    for path in paths {
        assert!(
            mounts.iter().any(|m| path.starts_with(&format!("{m}/"))),
            "{name}: {path} is not under any mount {mounts:?}"
        );
    }
}

#[test]
fn mounted_config_is_one_the_exporter_accepts() {
    for (name, _) in valid_scenarios() {
        if name == "acm-hub" {
            continue;
        }
        let s = scenario(&name);
        let mut config = s.exporter_config();
        assert_paths_are_mounted(&name, &config, &s.pod());
        // Kube watchers are checked against their own config type (the main
        // config file gains `sources.kube` from it); the rest against Config.
        let kube = config["sources"]
            .as_object_mut()
            .and_then(|sources| sources.remove("kube"));
        for entry in kube.and_then(|k| k.as_array().cloned()).unwrap_or_default() {
            serde_json::from_value::<KubeSourceConfig>(entry.clone())
                .unwrap_or_else(|e| panic!("{name}: sources.kube entry {entry}: {e}"));
        }
        let parsed = Config::from_yaml_str(&config.to_string(), &name)
            .unwrap_or_else(|e| panic!("{name}: config does not parse: {e:?}"));
        if name == "service-scope" {
            assert_eq!(parsed.validate(), vec![], "{name}");
        }
    }
    let default = scenario("default").exporter_config();
    assert_eq!(default["sources"]["kube"][0]["in_cluster"], json!(true));
    assert!(!scenario("default").notes().contains("WARNING"));
    let no_source = rendered().get("no-source").unwrap();
    assert!(
        no_source
            .notes()
            .contains("WARNING: no source is configured"),
        "NOTES must say the exporter will not start"
    );
    // Only an in-cluster watcher needs the service-account token.
    let token = |n: &str| {
        scenario(n)
            .pod()
            .spec
            .unwrap()
            .automount_service_account_token
    };
    assert_eq!(token("default"), Some(true));
    assert_eq!(token("service-scope"), Some(false));
}

#[test]
fn sharded_statefulset_takes_its_shard_from_the_pod_ordinal() {
    let s = scenario("all-on");
    let set: StatefulSet = serde_json::from_value(s.one("StatefulSet")).unwrap();
    let spec = set.spec.unwrap();
    let replicas = spec.replicas.unwrap();
    let env = spec.template.spec.unwrap().containers[0]
        .env
        .clone()
        .unwrap();
    let var = |n: &str| env.iter().find(|e| e.name == n).cloned().unwrap();
    assert_eq!(
        var("HCPFLOW_SHARD")
            .value_from
            .unwrap()
            .field_ref
            .unwrap()
            .field_path,
        "metadata.labels['apps.kubernetes.io/pod-index']"
    );
    assert_eq!(
        var("HCPFLOW_TOTAL_SHARDS").value,
        Some(replicas.to_string())
    );
    let headless: Vec<Service> = s
        .of_kind("Service")
        .into_iter()
        .map(|o| serde_json::from_value(o).unwrap())
        .filter(|svc: &Service| svc.metadata.name == spec.service_name)
        .collect();
    assert_eq!(headless.len(), 1, "the StatefulSet's governing service");
    assert_eq!(
        headless[0].spec.as_ref().unwrap().cluster_ip.as_deref(),
        Some("None")
    );
    assert!(var("OTEL_EXPORTER_OTLP_ENDPOINT").value.is_some());
    assert!(var("OTEL_EXPORTER_OTLP_HEADERS").value_from.is_some());
}

/// The state directory (docs/design/03-timeline-model.md §3.8): an emptyDir by default, a
/// PersistentVolumeClaim as an option (one per pod when sharded), always
/// mounted writable where `--state-dir` points; none when turned off.
#[test]
fn state_dir_is_an_empty_dir_by_default_and_a_claim_when_persistent() {
    let state_volume = |name: &str| {
        let pod = scenario(name).pod();
        let spec = pod.spec.unwrap();
        let mount = spec.containers[0]
            .volume_mounts
            .clone()
            .unwrap_or_default()
            .into_iter()
            .find(|m| m.name == "state")
            .unwrap_or_else(|| panic!("{name}: no state mount"));
        assert_eq!(mount.mount_path, STATE_DIR, "{name}");
        assert_ne!(
            mount.read_only,
            Some(true),
            "{name}: the state dir is written"
        );
        spec.volumes
            .unwrap_or_default()
            .into_iter()
            .find(|v| v.name == "state")
    };

    // Default: an emptyDir, bounded; no claim anywhere.
    let volume = state_volume("default").expect("default: a state volume");
    let empty_dir = volume.empty_dir.expect("default: an emptyDir");
    assert_eq!(empty_dir.size_limit.map(|q| q.0), Some("64Mi".to_string()));
    assert_eq!(
        kinds(scenario("default")).get("PersistentVolumeClaim"),
        None
    );

    // One instance with persistence: its own claim, mounted by name.
    let s = scenario("service-scope");
    let claim: PersistentVolumeClaim =
        serde_json::from_value(s.one("PersistentVolumeClaim")).unwrap();
    let volume = state_volume("service-scope").expect("service-scope: a state volume");
    assert_eq!(
        volume.persistent_volume_claim.map(|c| c.claim_name),
        claim.metadata.name.clone()
    );
    let spec = claim.spec.unwrap();
    assert_eq!(spec.access_modes, Some(vec!["ReadWriteOnce".to_string()]));
    assert_eq!(spec.storage_class_name.as_deref(), Some("managed-csi"));
    assert_eq!(
        spec.resources.unwrap().requests.unwrap()["storage"].0,
        "256Mi"
    );

    // Sharded with persistence: a claim per pod from the StatefulSet's
    // template, never one shared claim.
    let s = scenario("all-on");
    assert_eq!(kinds(s).get("PersistentVolumeClaim"), None);
    assert!(
        state_volume("all-on").is_none(),
        "the claim template provides the volume"
    );
    let set: StatefulSet = serde_json::from_value(s.one("StatefulSet")).unwrap();
    let templates = set.spec.unwrap().volume_claim_templates.unwrap();
    assert_eq!(templates.len(), 1);
    assert_eq!(templates[0].metadata.name.as_deref(), Some("state"));
    let spec = templates[0].spec.clone().unwrap();
    assert_eq!(spec.access_modes, Some(vec!["ReadWriteOnce".to_string()]));
    assert_eq!(spec.storage_class_name, None, "the cluster's default class");
    assert_eq!(
        spec.resources.unwrap().requests.unwrap()["storage"].0,
        "1Gi"
    );

    // Turned off: no flag, no volume.
    let off = rendered().get("no-state").unwrap();
    assert!(off.error.is_none(), "{:?}", off.error);
    let pod = off.pod();
    let spec = pod.spec.unwrap();
    assert_eq!(
        spec.containers[0].args.clone().unwrap(),
        ["serve", "--config", "/etc/hcp-flow/config.yaml"]
    );
    assert!(
        spec.volumes
            .unwrap_or_default()
            .iter()
            .all(|v| v.name != "state")
    );
}

#[test]
fn service_monitor_and_network_policy_point_at_the_metrics_port() {
    let s = scenario("all-on");
    let sm = s.one("ServiceMonitor");
    assert_eq!(sm["spec"]["endpoints"][0]["port"], "metrics");
    assert_eq!(sm["spec"]["endpoints"][0]["path"], "/metrics");
    let svc_labels = &s
        .of_kind("Service")
        .into_iter()
        .find(|svc| svc["metadata"]["name"] == RELEASE)
        .unwrap()["metadata"]["labels"];
    for (k, v) in sm["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(&svc_labels[k], v, "ServiceMonitor selects the Service");
    }
    let np: NetworkPolicy = serde_json::from_value(s.one("NetworkPolicy")).unwrap();
    let ingress = np.spec.unwrap().ingress.unwrap();
    assert_eq!(
        ingress[0].ports.as_ref().unwrap()[0].port,
        Some(
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(
                "metrics".to_string()
            )
        )
    );
}

/// Every series name the exporter emits, from docs/metrics.md's table (which
/// tests/it/metrics_exposition.rs keeps equal to a real scrape).
fn emitted_series() -> BTreeSet<String> {
    let doc = std::fs::read_to_string(Path::new(ROOT).join("docs/metrics.md")).unwrap();
    let mut out = BTreeSet::new();
    for line in doc.lines().filter(|l| l.starts_with("| `hcpflow_")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let name = cells[1].trim_matches('`');
        match cells[2] {
            "histogram" => {
                for suffix in ["_bucket", "_count", "_sum"] {
                    out.insert(format!("{name}{suffix}"));
                }
            }
            _ => {
                out.insert(name.to_string());
            }
        }
    }
    assert!(out.len() > 20, "docs/metrics.md table not found");
    out
}

fn promql_names(expr: &str) -> BTreeSet<String> {
    let expr = expr
        .replace("${__rate_interval}", "5m")
        .replace("$__rate_interval", "5m")
        .replace("$__range", "1h");
    // Grafana variables in label matchers become plain strings.
    let expr = regex_lite_vars(&expr);
    let ast =
        promql_parser::parser::parse(&expr).unwrap_or_else(|e| panic!("not PromQL: {expr}: {e}"));
    let mut out = BTreeSet::new();
    collect_names(&ast, &mut out);
    out
}

/// `$var` / `${var}` (Grafana template variables) → `x`.
fn regex_lite_vars(expr: &str) -> String {
    let mut out = String::new();
    let mut chars = expr.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'{') {
            for c in chars.by_ref() {
                if c == '}' {
                    break;
                }
            }
        } else {
            while chars
                .peek()
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
            {
                chars.next();
            }
        }
        out.push('x');
    }
    out
}

fn dashboard_exprs(dashboard: &Value, out: &mut Vec<String>) {
    match dashboard {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr", Value::String(e)) if !e.is_empty() => out.push(e.clone()),
                    ("query", Value::Object(q)) => {
                        if let Some(Value::String(e)) = q.get("query") {
                            out.extend(variable_query_expr(e));
                        }
                    }
                    _ => dashboard_exprs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| dashboard_exprs(v, out)),
        _ => {}
    }
}

/// The PromQL inside a Grafana variable query (`label_values(EXPR, label)`,
/// `query_result(EXPR)`); none for `label_values(label)`.
fn variable_query_expr(query: &str) -> Option<String> {
    let query = query.trim();
    if let Some(inner) = query
        .strip_prefix("label_values(")
        .and_then(|q| q.strip_suffix(')'))
    {
        return inner
            .rsplit_once(',')
            .map(|(expr, _)| expr.trim().to_string());
    }
    if let Some(inner) = query
        .strip_prefix("query_result(")
        .and_then(|q| q.strip_suffix(')'))
    {
        return Some(inner.to_string());
    }
    Some(query.to_string())
}

/// Rule groups of alerts/*.yaml, in file-name order.
fn source_rule_groups() -> Vec<Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join("alerts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut groups = Vec::new();
    for file in files {
        let doc: Value = serde_saphyr::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        groups.extend(doc["groups"].as_array().unwrap().iter().cloned());
    }
    groups
}

fn source_dashboards() -> BTreeMap<String, Value> {
    std::fs::read_dir(Path::new(ROOT).join("dashboards"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().to_string(),
                serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap(),
            )
        })
        .collect()
}

/// Rules on, in-cluster and ACM, for the runbook-base scenario.
const ALL_ON_RULES: &str = "prometheusRule: {enabled: true}\nacm: {enabled: true}\n";
const OWN_RUNBOOKS: &str = "https://wiki.example.test/sre/hcp-flow-runbooks";

fn runbook_urls(groups: &Value) -> Vec<String> {
    groups
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().iter())
        .filter_map(|r| r["annotations"]["runbook_url"].as_str())
        .map(str::to_string)
        .collect()
}

#[test]
fn runbook_urls_follow_the_configured_base() {
    let source = runbook_urls(&json!(source_rule_groups()));
    assert!(source.len() > 10, "alerts/ has runbook urls: {source:?}");
    let s = scenario("runbook-base");
    let rule = s.one("PrometheusRule");
    let want: Vec<String> = source
        .iter()
        .map(|u| format!("{OWN_RUNBOOKS}#{}", u.split_once('#').unwrap().1))
        .collect();
    assert_eq!(runbook_urls(&rule["spec"]["groups"]), want);
    let acm = s.config_map("thanos-ruler-custom-rules");
    let custom: Value =
        serde_saphyr::from_str(acm["data"]["custom_rules.yaml"].as_str().unwrap()).unwrap();
    assert_eq!(runbook_urls(&custom["groups"]), want);
    // The default base is the repository's own runbooks: unchanged.
    let default = scenario("all-on").one("PrometheusRule");
    assert_eq!(runbook_urls(&default["spec"]["groups"]), source);
}

#[test]
fn prometheus_rule_carries_every_rule_of_alerts() {
    let rule = scenario("all-on").one("PrometheusRule");
    assert_eq!(rule["spec"]["groups"], json!(source_rule_groups()));
}

#[test]
fn grafana_dashboards_are_the_dashboards_with_label_and_folder() {
    let s = scenario("all-on");
    let mut got = BTreeMap::new();
    for cm in s.of_kind("ConfigMap") {
        if cm["metadata"]["labels"]["grafana_dashboard"] != "1" {
            continue;
        }
        assert_eq!(cm["metadata"]["namespace"], "grafana");
        assert_eq!(cm["metadata"]["annotations"]["grafana_folder"], "hcp-flow");
        for (key, text) in cm["data"].as_object().unwrap() {
            got.insert(
                key.clone(),
                serde_json::from_str::<Value>(text.as_str().unwrap()).unwrap(),
            );
        }
    }
    assert_eq!(got, source_dashboards());
}

#[test]
fn acm_bundle_names_only_emitted_metrics_and_every_dashboard_metric() {
    let emitted = emitted_series();
    for scenario_name in ["all-on", "acm-hub"] {
        let s = scenario(scenario_name);
        for cm in s.of_kind("ConfigMap") {
            let labels = &cm["metadata"]["labels"];
            if cm["metadata"]["name"] == RELEASE || labels["grafana_dashboard"] == "1" {
                continue;
            }
            assert_eq!(cm["metadata"]["namespace"], ACM_NAMESPACE);
        }

        // The allowlist: embedded YAML with `names`, each an emitted series.
        let allow = s.config_map("observability-metrics-custom-allowlist");
        let keys: Vec<&String> = allow["data"].as_object().unwrap().keys().collect();
        let want_keys = if scenario_name == "all-on" {
            vec!["metrics_list.yaml", "uwl_metrics_list.yaml"]
        } else {
            vec!["metrics_list.yaml"]
        };
        assert_eq!(keys, want_keys, "{scenario_name}");
        for key in keys {
            let list: Value = serde_saphyr::from_str(allow["data"][key].as_str().unwrap())
                .unwrap_or_else(|e| panic!("{key} is not YAML: {e}"));
            let names: BTreeSet<String> = list["names"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_str().unwrap().to_string())
                .collect();
            let unknown: Vec<_> = names.difference(&emitted).collect();
            assert!(
                unknown.is_empty(),
                "{key} names series nobody emits: {unknown:?}"
            );
            assert_eq!(names, emitted, "{key} lists every series hcp-flow emits");
            let mut used = BTreeSet::new();
            for dashboard in source_dashboards().values() {
                let mut exprs = Vec::new();
                dashboard_exprs(dashboard, &mut exprs);
                for expr in exprs {
                    used.extend(promql_names(&expr));
                }
            }
            used.retain(|n| n.starts_with("hcpflow_"));
            assert!(!used.is_empty());
            let missing: Vec<_> = used.difference(&names).collect();
            assert!(
                missing.is_empty(),
                "dashboards use {missing:?}, not in {key}"
            );
        }

        // Thanos ruler rules: alerts/ verbatim, only emitted or recorded series.
        let rules = s.config_map("thanos-ruler-custom-rules");
        let doc: Value =
            serde_saphyr::from_str(rules["data"]["custom_rules.yaml"].as_str().unwrap()).unwrap();
        let groups = doc["groups"].as_array().unwrap();
        assert_eq!(groups, &source_rule_groups());
        let recorded: BTreeSet<String> = groups
            .iter()
            .flat_map(|g| g["rules"].as_array().unwrap())
            .filter_map(|r| r["record"].as_str().map(str::to_string))
            .collect();
        for rule in groups.iter().flat_map(|g| g["rules"].as_array().unwrap()) {
            for name in promql_names(rule["expr"].as_str().unwrap()) {
                // `up` is the scrape's own series, collected by ACM by default.
                assert!(
                    emitted.contains(&name) || recorded.contains(&name) || name == "up",
                    "rule {} uses {name}, which nothing emits",
                    rule["alert"].as_str().or(rule["record"].as_str()).unwrap()
                );
            }
            for forbidden in ["_id", "cluster"] {
                assert!(
                    rule["labels"].get(forbidden).is_none(),
                    "a rule must not set label {forbidden}: ACM owns it"
                );
            }
        }

        // ACM Grafana dashboards: label, folder, the dashboards verbatim.
        let mut got = BTreeMap::new();
        for cm in s.of_kind("ConfigMap") {
            if cm["metadata"]["labels"]["grafana-custom-dashboard"] != "true" {
                continue;
            }
            assert_eq!(cm["metadata"]["namespace"], ACM_NAMESPACE);
            let folder = &cm["metadata"]["annotations"]["observability.open-cluster-management.io/dashboard-folder"];
            assert!(folder.is_string(), "folder annotation");
            for (key, text) in cm["data"].as_object().unwrap() {
                got.insert(
                    key.clone(),
                    serde_json::from_str::<Value>(text.as_str().unwrap()).unwrap(),
                );
            }
        }
        assert_eq!(got, source_dashboards(), "{scenario_name}");
    }
}

#[test]
fn no_metric_label_is_named_id_or_cluster() {
    let doc = std::fs::read_to_string(Path::new(ROOT).join("docs/metrics.md")).unwrap();
    let rows: Vec<&str> = doc
        .lines()
        .filter(|l| l.starts_with("| `hcpflow_"))
        .collect();
    assert!(rows.len() > 20);
    for row in rows {
        let labels = row.split('|').nth(3).unwrap();
        for label in labels.split(',').map(|l| l.trim().trim_matches('`')) {
            assert!(
                label != "_id" && label != "cluster",
                "ACM's collector owns `{label}`: {row}"
            );
        }
    }
}

#[test]
fn generated_chart_files_are_fresh() {
    let out = Command::new(env!("CARGO_BIN_EXE_gen-chart-files"))
        .arg("--check")
        .arg("--root")
        .arg(ROOT)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn containerfile_is_multi_stage_non_root_with_the_documented_entrypoint() {
    let text = std::fs::read_to_string(Path::new(ROOT).join("Containerfile")).unwrap();
    let instructions: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let froms: Vec<&&str> = instructions
        .iter()
        .filter(|l| l.starts_with("FROM "))
        .collect();
    assert!(froms.len() >= 2, "multi-stage: a builder and a runtime");
    assert!(froms[0].contains(" AS "), "the builder stage is named");
    let last_stage = instructions
        .iter()
        .rposition(|l| l.starts_with("FROM "))
        .unwrap();
    let runtime = &instructions[last_stage..];
    assert!(
        runtime.iter().any(|l| l.starts_with("COPY --from=")),
        "the runtime copies the binary from the builder"
    );
    let user = runtime
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("the runtime stage sets USER");
    let uid: u32 = user
        .split(':')
        .next()
        .unwrap()
        .parse()
        .expect("numeric USER, so runAsNonRoot can verify it");
    assert_ne!(uid, 0);
    assert!(runtime.contains(&r#"ENTRYPOINT ["hcp-flow"]"#));
    assert!(runtime.contains(&r#"CMD ["serve", "--config", "/etc/hcp-flow/config.yaml"]"#));
    assert!(runtime.iter().any(|l| l.starts_with("EXPOSE 9464")));
    // The shipped binary is built without the simulated world, `demo` and
    // `bench` (the `sim` feature, on by default for the README's commands).
    let build = text
        .replace("\\\n", " ")
        .lines()
        .find(|l| l.contains("cargo build"))
        .map(str::to_string)
        .expect("the builder stage runs cargo build");
    assert!(
        build.contains("--no-default-features") && !build.contains("--features"),
        "the image's binary is built without the sim feature: {build}"
    );
    // The bench measures the exporter with the image's allocator settings.
    for (name, value) in hcp_flow::bench::SHIPPED_ALLOCATOR_ENV {
        let line = format!("ENV {name}={value}");
        assert!(
            runtime.contains(&line.as_str()),
            "{line} in the runtime stage"
        );
    }
    let ignore = std::fs::read_to_string(Path::new(ROOT).join(".dockerignore")).unwrap();
    assert!(
        ignore
            .lines()
            .any(|l| l.trim() == "target" || l.trim() == "/target")
    );
    // The builder copies every crate of the workspace the binary is built
    // from, and the context does not ignore them.
    let manifest = std::fs::read_to_string(Path::new(ROOT).join("Cargo.toml")).unwrap();
    let members = manifest
        .split("members = [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .expect("a [workspace] members list");
    for member in members
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty() && *m != ".")
    {
        let top = member.split('/').next().unwrap_or(member);
        assert!(
            text.lines().any(|l| l.starts_with(&format!("COPY {top} "))
                || l.starts_with(&format!("COPY {member} "))),
            "the builder stage copies {member}"
        );
        assert!(!ignore.lines().any(|l| l.trim() == top), "{top} ignored");
    }
}

/// The image's strip step, run as the Containerfile spells it on the binary
/// this test suite built: the stripped binary still runs, is smaller, and
/// names its split debug info.
#[test]
fn the_image_strips_the_binary_and_keeps_its_debug_info_apart() {
    let text = std::fs::read_to_string(Path::new(ROOT).join("Containerfile")).unwrap();
    let joined = text.replace("\\\n", " ");
    let run = joined
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("RUN objcopy"))
        .expect("a RUN objcopy step");
    let dir = std::env::temp_dir().join(format!("hcp-flow-strip-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let binary = dir.join("hcp-flow");
    std::fs::copy(env!("CARGO_BIN_EXE_hcp-flow"), &binary).unwrap();
    let before = std::fs::metadata(&binary).unwrap().len();
    let script = run
        .trim_start_matches("RUN ")
        .replace("/out/", &format!("{}/", dir.display()));
    let status = std::process::Command::new("sh")
        .args(["-c", &script])
        .status()
        .unwrap();
    assert!(status.success(), "{script}");
    let after = std::fs::metadata(&binary).unwrap().len();
    let debug = std::fs::metadata(dir.join("hcp-flow.debug")).unwrap().len();
    // How much stripping saves depends on the profile's debug info (the
    // test profile keeps line tables only); what matters is that the debug
    // sections left the binary for the side file.
    assert!(after < before, "stripped {after} of {before} bytes");
    assert!(debug > 0);
    let version = std::process::Command::new(&binary)
        .arg("--version")
        .output()
        .unwrap();
    assert!(version.status.success());
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("hcp-flow "));
    let sections = std::process::Command::new("objdump")
        .args(["-h"])
        .arg(&binary)
        .output()
        .unwrap();
    let sections = String::from_utf8_lossy(&sections.stdout);
    assert!(sections.contains(".gnu_debuglink"));
    for debug_section in [".debug_info", ".debug_line"] {
        assert!(!sections.contains(debug_section), "{sections}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
