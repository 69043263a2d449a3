//! JSON as the real upstreams serve it (shapes from the reference examples:
//! RP `HcpOpenShiftClusters_Get_MaximumSet_Gen.json`, the Clusters Service
//! cluster and provision shard fixtures, Maestro's ResourceBundle per its
//! OpenAPI and server presenters).

use serde_json::{Value, json};

use super::plan::{BundlePlan, ENV, Ms, Plan, REGION, Shard};
use super::state::{Cond, NodePoolView};

/// Formats a time the way the upstream does: `digits` fractional digits
/// (ARM: milliseconds, Go services: microseconds), none for Kubernetes.
pub(crate) fn time(ms: Ms, digits: usize) -> String {
    let t = super::truth::ts(ms);
    match digits {
        0 => format!("{:.0}", t),
        d => format!("{:.*}", d, t),
    }
}

fn k8s_conditions(conds: &[Cond], generation: bool) -> Value {
    Value::Array(
        conds
            .iter()
            .map(|c| {
                let mut v = json!({
                    "type": c.kind,
                    "status": c.status,
                    "lastTransitionTime": time(c.since, 0),
                    "reason": c.reason,
                    "message": c.message,
                });
                if generation {
                    v["observedGeneration"] = json!(1);
                }
                v
            })
            .collect(),
    )
}

/// The RP api-versions the world serves, by the shape they have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum RpApiVersion {
    V2024_06_10,
    V2025_12_23,
    V2026_06_30,
    V2026_09_01,
}

impl RpApiVersion {
    pub const SUPPORTED: &'static str =
        "2024-06-10-preview, 2025-12-23-preview, 2026-06-30-preview, 2026-09-01-preview";

    pub fn parse(s: &str) -> Option<RpApiVersion> {
        match s {
            "2024-06-10-preview" => Some(RpApiVersion::V2024_06_10),
            "2025-12-23-preview" => Some(RpApiVersion::V2025_12_23),
            "2026-06-30-preview" => Some(RpApiVersion::V2026_06_30),
            "2026-09-01-preview" => Some(RpApiVersion::V2026_09_01),
            _ => None,
        }
    }
}

fn base_domain(p: &Plan) -> String {
    format!("{}.{REGION}.aroapp-hcp.io", &p.cluster_id[..8])
}

/// An `hcpOpenShiftClusters` resource (`None` when it does not exist at `t`).
pub(crate) fn rp_resource(p: &Plan, t: Ms, v: RpApiVersion) -> Option<Value> {
    let state = p.rp_state(t)?;
    let sub = &p.subscription_id;
    let rg = &p.resource_group;
    let installing = p.cs_installing <= t;
    let ready = p.rp_succeeded.is_some_and(|s| s <= t);
    let dns_prefix = &p.name;
    let mut dns = json!({ "baseDomainPrefix": dns_prefix });
    let mut api = json!({ "visibility": "Public", "authorizedCidrs": ["0.0.0.0/0"] });
    let mut console = json!({});
    if installing {
        // Read-only values the RP learns from the Clusters Service.
        dns["baseDomain"] = json!(base_domain(p));
        api["url"] = json!(format!("https://api.{}.{}:443", dns_prefix, base_domain(p)));
    }
    if ready {
        console["url"] = json!(format!(
            "https://console-openshift-console.apps.{}.{}",
            dns_prefix,
            base_domain(p)
        ));
    }
    let mi = |name: &str| {
        format!(
            "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/{name}"
        )
    };
    let smi = mi(&format!("{}-service", p.name));
    let subnet = format!(
        "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/virtualNetworks/{}-vnet/subnets/default",
        p.name
    );
    let mut platform = json!({
        "managedResourceGroup": format!("{}-managed", p.name),
        "subnetId": subnet,
        "outboundType": "LoadBalancer",
        "networkSecurityGroupId": format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/networkSecurityGroups/{}-nsg", p.name),
        "operatorsAuthentication": {
            "userAssignedIdentities": {
                "controlPlaneOperators": {},
                "dataPlaneOperators": {},
                "serviceManagedIdentity": smi,
            }
        },
        "issuerUrl": format!("https://oidc.{REGION}.aroapp-hcp.io/{}", p.cluster_id),
    });
    let kms = if v >= RpApiVersion::V2025_12_23 {
        platform["vnetIntegrationSubnetId"] = json!(format!(
            "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/virtualNetworks/{}-vnet/subnets/integration",
            p.name
        ));
        json!({ "vaultName": format!("{}-kv", p.name), "visibility": "Public", "activeKey": { "name": "etcd-key", "version": "1" } })
    } else {
        json!({ "activeKey": { "vaultName": format!("{}-kv", p.name), "name": "etcd-key", "version": "1" } })
    };
    let desired = p.desired_version(t);
    let short = desired.rsplit_once('.').map_or(desired, |(xy, _)| xy);
    let mut properties = json!({
        "provisioningState": state,
        "version": { "id": short, "channelGroup": "stable" },
        "dns": dns,
        "network": {
            "networkType": "OVNKubernetes",
            "podCidr": "10.128.0.0/14",
            "serviceCidr": "172.30.0.0/16",
            "machineCidr": "10.0.0.0/16",
            "hostPrefix": 23
        },
        "api": api,
        "console": console,
        "platform": platform,
        "autoscaling": {
            "maxNodesTotal": 0,
            "maxPodGracePeriodSeconds": 600,
            "maxNodeProvisionTimeSeconds": 900,
            "podPriorityThreshold": -10
        },
        "etcd": {
            "dataEncryption": {
                "keyManagementMode": "CustomerManaged",
                "customerManaged": { "encryptionType": "KMS", "kms": kms }
            }
        },
        "nodeDrainTimeoutMinutes": 0,
        "clusterImageRegistry": { "state": "Enabled" },
    });
    if v >= RpApiVersion::V2025_12_23 {
        properties["imageDigestMirrors"] = json!([{
            "source": "release.example.com/ocp-release",
            "mirrors": ["mirror.example.com/ocp-release"]
        }]);
    }
    if v >= RpApiVersion::V2026_06_30 {
        properties["ingress"] = json!({ "type": "Public" });
        properties["cryptoRestrictions"] = json!("None");
        properties["status"] = json!({ "conditions": k8s_conditions(&p.rp_conditions(t), false) });
    }
    let modified = p.delete_requested.filter(|d| *d <= t).unwrap_or(p.created);
    Some(json!({
        "id": p.resource_id(),
        "name": p.name,
        "type": "Microsoft.RedHatOpenShift/hcpOpenShiftClusters",
        "location": REGION,
        "tags": { "environment": ENV },
        "identity": {
            "principalId": "00000000-0000-0000-0000-000000000000",
            "tenantId": "00000000-0000-0000-0000-000000000001",
            "type": "UserAssigned",
            "userAssignedIdentities": {
                smi.clone(): {
                    "principalId": "00000000-0000-0000-0000-000000000002",
                    "clientId": "00000000-0000-0000-0000-000000000003"
                }
            }
        },
        "systemData": {
            "createdBy": "sre@example.com",
            "createdByType": "User",
            "createdAt": time(p.created, 3),
            "lastModifiedBy": "sre@example.com",
            "lastModifiedByType": "User",
            "lastModifiedAt": time(modified, 3),
        },
        "properties": properties,
    }))
}

const OCM4001_MESSAGE: &str =
    "Inflight checks failed: the cluster's subnet is not reachable from the management cluster";

fn cs_status_fields(state: &str) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("state".into(), json!(state));
    let description = match state {
        "error" => "Cluster installation failed: inflight checks failed",
        "ready" => "",
        "uninstalling" => "Cluster is being uninstalled",
        _ => "Cluster installation is in progress",
    };
    if !description.is_empty() {
        m.insert("description".into(), json!(description));
    }
    m.insert(
        "dns_ready".into(),
        json!(state != "validating" && state != "pending"),
    );
    m.insert("oidc_ready".into(), json!(state != "validating"));
    if state == "error" {
        m.insert("provision_error_code".into(), json!("OCM4001"));
        m.insert("provision_error_message".into(), json!(OCM4001_MESSAGE));
    }
    m.insert("configuration_mode".into(), json!("full"));
    m.insert("limited_support_reason_count".into(), json!(0));
    m
}

/// The status fields of `p` at `t`: an uninstall that failed says so, with
/// no provision error code (that names a provisioning failure).
fn cs_status_fields_of(p: &Plan, t: Ms, state: &str) -> serde_json::Map<String, Value> {
    let mut m = cs_status_fields(state);
    if state == "error" && p.uninstall_failed(t) {
        m.remove("provision_error_code");
        m.remove("provision_error_message");
        m.insert(
            "description".into(),
            json!("Cluster uninstall failed: cloud resources could not be deleted"),
        );
    }
    m
}

/// `.../clusters/{id}/status`.
pub(crate) fn cs_status(p: &Plan, t: Ms, prefix: &str) -> Option<Value> {
    let state = p.cs_state(t)?;
    let mut m = cs_status_fields_of(p, t, state);
    m.insert("kind".into(), json!("ClusterStatus"));
    m.insert("id".into(), json!(p.cluster_id));
    m.insert(
        "href".into(),
        json!(format!("{prefix}/clusters/{}/status", p.cluster_id)),
    );
    Some(Value::Object(m))
}

/// A Clusters Service cluster (`None` when it does not exist at `t`).
pub(crate) fn cs_cluster(p: &Plan, t: Ms, prefix: &str) -> Option<Value> {
    let state = p.cs_state(t)?;
    let created = p.cs_created?;
    let sub = &p.subscription_id;
    let rg = &p.resource_group;
    let mut api = json!({ "listening": "external" });
    if p.cs_installing <= t {
        api["url"] = json!(format!("https://api.{}.{}:443", p.name, base_domain(p)));
    }
    Some(json!({
        "kind": "Cluster",
        "id": p.cluster_id,
        "href": format!("{prefix}/clusters/{}", p.cluster_id),
        "name": p.name,
        "state": state,
        "status": Value::Object(cs_status_fields_of(p, t, state)),
        "creation_timestamp": time(created, 6),
        "api": api,
        "autoscaler": {
            "kind": "ClusterAutoscaler",
            "max_node_provision_time": "15m",
            "max_pod_grace_period": 600,
            "pod_priority_threshold": -10,
            "resource_limits": { "max_nodes_total": 0 }
        },
        "azure": {
            "etcd_encryption": {
                "data_encryption": {
                    "customer_managed": {
                        "encryption_type": "kms",
                        "kms": {
                            "active_key": {
                                "key_name": "etcd-key",
                                "key_vault_name": format!("{}-kv", p.name),
                                "key_version": "1"
                            }
                        }
                    },
                    "key_management_mode": "customer_managed"
                }
            },
            "managed_resource_group_name": format!("{}-managed", p.name),
            "network_security_group_resource_id": format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/networkSecurityGroups/{}-nsg", p.name),
            "nodes_outbound_connectivity": { "outbound_type": "load_balancer" },
            "operators_authentication": {
                "managed_identities": {
                    "control_plane_operators_managed_identities": {},
                    "data_plane_operators_managed_identities": {},
                    "managed_identities_data_plane_identity_url": "",
                    "service_managed_identity": {
                        "client_id": "00000000-0000-0000-0000-000000000003",
                        "principal_id": "00000000-0000-0000-0000-000000000002",
                        "resource_id": format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/{}-service", p.name)
                    }
                }
            },
            "resource_group_name": rg,
            "resource_name": p.name,
            "subnet_resource_id": format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/virtualNetworks/{}-vnet/subnets/default", p.name),
            "subscription_id": sub,
            "tenant_id": "00000000-0000-0000-0000-000000000001"
        },
        "ccs": { "enabled": true, "kind": "CCS" },
        "cloud_provider": { "id": "azure", "kind": "CloudProvider" },
        "hypershift": { "enabled": true },
        "image_registry": { "state": "enabled" },
        "network": {
            "host_prefix": 23,
            "machine_cidr": "10.0.0.0/16",
            "pod_cidr": "10.128.0.0/14",
            "service_cidr": "172.30.0.0/16",
            "type": "OVNKubernetes"
        },
        "node_drain_grace_period": { "unit": "minutes", "value": 0 },
        "product": { "id": "aro", "kind": "Product" },
        "region": { "id": REGION, "kind": "CloudRegion" },
        "version": { "channel_group": "stable", "id": format!("openshift-v{}", p.current_version(t)), "kind": "Version" }
    }))
}

/// A provision shard, shaped like the reference fixture.
pub(crate) fn provision_shard(s: &Shard, prefix: &str, created: Ms) -> Value {
    json!({
        "kind": "ProvisionShard",
        "id": s.id,
        "href": format!("{prefix}/provision_shards/{}", s.id),
        "creation_timestamp": time(created, 6),
        "status": "active",
        "topology": "shared",
        "region": { "href": format!("/api/clusters_mgmt/v1/cloud_providers/azure/regions/{REGION}"), "id": REGION, "kind": "CloudRegion" },
        "cloud_provider": { "href": "/api/clusters_mgmt/v1/cloud_providers/azure", "id": "azure", "kind": "CloudProvider" },
        "azure_shard": {
            "aks_management_cluster_resource_id": format!(
                "/subscriptions/1d3378d3-5a3f-4712-85a1-2485495dfc4b/resourceGroups/{0}/providers/Microsoft.ContainerService/managedClusters/{0}",
                s.mgmt_cluster
            ),
            "cx_managed_identities_key_vault_url": format!("https://{}-mi.vault.azure.net/", s.mgmt_cluster),
            "cx_secrets_key_vault_managed_identity_client_id": "c2bde1aa-d904-48cd-a728-9de33e3ddca9",
            "cx_secrets_key_vault_url": format!("https://{}-cx.vault.azure.net/", s.mgmt_cluster),
            "public_dns_zone_resource_id": format!("/subscriptions/1d3378d3-5a3f-4712-85a1-2485495dfc4b/resourceGroups/global/providers/Microsoft.Network/dnszones/{REGION}.aroapp-hcp.io")
        },
        "maestro_config": {
            "consumer_name": s.consumer_name,
            "grpc_api_config": { "url": "maestro-grpc.maestro.svc.cluster.local:8090" },
            "rest_api_config": { "url": "http://maestro.maestro.svc.cluster.local:8000" }
        }
    })
}

/// The labels of every object of the cluster, its bundles' included (what a
/// Maestro JSONB label search reads).
pub fn bundle_labels(p: &Plan) -> Value {
    labels(p)
}

fn labels(p: &Plan) -> Value {
    json!({
        "api.openshift.com/id": p.cluster_id,
        "api.openshift.com/name": p.name,
        "api.openshift.com/environment": ENV,
    })
}

fn release_image(version: &str) -> String {
    format!("release.example.com/ocp-release:{version}-multi")
}

const SSA: &str = "maestro-agent";

/// The ManifestWork bundle `b` carries: the HostedCluster, or one NodePool
/// (ARO HCP places each in a work of its own), with feedback rules asking
/// for its `.status` (and, for a NodePool, `.spec.replicas` as an Integer,
/// because desired replicas live in the spec).
fn manifestwork(p: &Plan, b: &BundlePlan, t: Ms) -> Value {
    let ns = p.hc_namespace();
    let update = json!({ "type": "ServerSideApply", "serverSideApply": { "force": true, "fieldManager": SSA } });
    let (manifest, config) = match b.pool.and_then(|i| p.pools.get(i)) {
        None => (
            json!({
                "apiVersion": "hypershift.openshift.io/v1beta1",
                "kind": "HostedCluster",
                "metadata": { "name": p.hc_name, "namespace": ns, "labels": labels(p) },
                "spec": {
                    "clusterID": p.cluster_id,
                    "release": { "image": release_image(p.desired_version(t)) },
                    "platform": { "type": "Azure" }
                }
            }),
            json!({
                "resourceIdentifier": { "group": "hypershift.openshift.io", "resource": "hostedclusters", "name": p.hc_name, "namespace": ns },
                "feedbackRules": [{ "type": "JSONPaths", "jsonPaths": [{ "name": "status", "path": ".status" }] }],
                "updateStrategy": update
            }),
        ),
        Some(pool) => (
            {
                let i = b.pool.unwrap_or_default();
                let target = p.day2.pool_target(i, p.version, t);
                json!({
                "apiVersion": "hypershift.openshift.io/v1beta1",
                "kind": "NodePool",
                "metadata": { "name": pool.name, "namespace": ns, "labels": labels(p) },
                "spec": {
                    "clusterName": p.hc_name,
                    "replicas": pool.replicas,
                    "release": { "image": release_image(target) },
                    "management": { "autoRepair": true, "upgradeType": "Replace" },
                    "platform": { "type": "Azure" }
                }
                })
            },
            json!({
                "resourceIdentifier": { "group": "hypershift.openshift.io", "resource": "nodepools", "name": pool.name, "namespace": ns },
                "feedbackRules": [{ "type": "JSONPaths", "jsonPaths": [
                    { "name": "status", "path": ".status" },
                    { "name": "replicas", "path": ".spec.replicas" }
                ] }],
                "updateStrategy": update
            }),
        ),
    };
    json!({
        "apiVersion": "work.open-cluster-management.io/v1",
        "kind": "ManifestWork",
        "metadata": { "name": b.name, "namespace": "local-cluster", "labels": labels(p) },
        "spec": { "workload": { "manifests": [manifest] }, "manifestConfigs": [config] }
    })
}

fn raw(v: &Value) -> Value {
    json!({ "type": "JsonRaw", "jsonRaw": v.to_string() })
}

fn manifest_conditions(s: Ms, available: Option<Ms>, st: Ms) -> Value {
    let avail = available.filter(|a| *a <= st);
    let mut conds = vec![
        json!({ "type": "Applied", "status": "True", "lastTransitionTime": time(s, 0), "reason": "AppliedManifestComplete", "message": "Apply manifest complete" }),
        match avail {
            Some(a) => {
                json!({ "type": "Available", "status": "True", "lastTransitionTime": time(a, 0), "reason": "ResourceAvailable", "message": "Resource is available" })
            }
            None => {
                json!({ "type": "Available", "status": "False", "lastTransitionTime": time(s, 0), "reason": "ResourceNotAvailable", "message": "Resource is not available" })
            }
        },
    ];
    conds.push(json!({ "type": "StatusFeedbackSynced", "status": "True", "lastTransitionTime": time(s, 0), "reason": "StatusFeedbackSynced", "message": "" }));
    Value::Array(conds)
}

fn hc_status(p: &Plan, st: Ms) -> Value {
    let desired = p.desired_version(st);
    let history: Vec<Value> = p
        .hc_history(st)
        .iter()
        .map(|h| {
            json!({
                "state": h.state,
                "startedTime": time(h.started, 0),
                "completionTime": h.completed.map(|c| time(c, 0)),
                "version": h.version,
                "image": release_image(h.version),
                "verified": false
            })
        })
        .collect();
    json!({
        "conditions": k8s_conditions(&p.hc_conditions(st), true),
        "version": {
            "desired": { "image": release_image(desired), "version": desired },
            "history": history,
            "observedGeneration": 1
        }
    })
}

fn np_status(v: &NodePoolView) -> Value {
    let mut s = json!({
        "conditions": k8s_conditions(&v.conditions, true),
        "replicas": v.current,
    });
    if let Some(version) = v.version {
        s["version"] = json!(version);
    }
    if v.current > 0 {
        s["nodesInfo"] = json!({ "nodeVersions": [{
            "kubeletVersion": "v1.32.5",
            "ocpVersion": v.version.unwrap_or(""),
            "readyNodeCount": v.ready,
            "unreadyNodeCount": v.current - v.ready
        }] });
    }
    s
}

/// The `.status` of the ManifestWork bundle `b` carries (shape in
/// docs/design/10-upstream-facts.md §10.5) at status time `st`: its HostedCluster's or its
/// NodePool's status feedback.
pub(crate) fn mw_status(p: &Plan, b: &BundlePlan, st: Ms) -> Value {
    let s = b.applied.unwrap_or(b.created);
    let ns = p.hc_namespace();
    let manifest = match b.pool.and_then(|i| p.pools.get(i).map(|pool| (i, pool))) {
        None => json!({
            "resourceMeta": { "ordinal": 0, "group": "hypershift.openshift.io", "version": "v1beta1", "kind": "HostedCluster", "resource": "hostedclusters", "name": p.hc_name, "namespace": ns },
            "statusFeedback": { "values": [{ "name": "status", "fieldValue": raw(&hc_status(p, st)) }] },
            "conditions": manifest_conditions(s, Some(s), st),
        }),
        Some((i, pool)) => json!({
            "resourceMeta": { "ordinal": 0, "group": "hypershift.openshift.io", "version": "v1beta1", "kind": "NodePool", "resource": "nodepools", "name": pool.name, "namespace": ns },
            "statusFeedback": { "values": [
                { "name": "status", "fieldValue": raw(&np_status(&p.np_view(i, st))) },
                // Desired replicas are spec, not status: a second JSONPaths
                // rule (`.spec.replicas`) feeds them back as an Integer.
                { "name": "replicas", "fieldValue": { "type": "Integer", "integer": pool.replicas } }
            ] },
            "conditions": manifest_conditions(s, Some(s), st),
        }),
    };
    json!({
        "conditions": k8s_conditions(&p.mw_conditions(b, st), true),
        "resourceStatus": { "manifests": [manifest] },
    })
}

/// Maestro ResourceBundle `b` of plan `p` (`None` when it does not exist at `t`).
pub(crate) fn bundle(p: &Plan, b: &BundlePlan, t: Ms) -> Option<Value> {
    if !p.bundle_exists(b, t) {
        return None;
    }
    let updated = p.updated_at(b, t);
    let status = match p.status_time(b, t) {
        None => Value::Null,
        Some(st) => {
            let s = b.applied.unwrap_or(b.created);
            json!({
                "ObservedVersion": 1,
                // Maestro's sequence ids are snowflake-like decimal strings.
                "SequenceID": ((updated as u64) << 16 | (p.index & 0xffff)).to_string(),
                "conditions": k8s_conditions(&p.bundle_conditions(b, st), true),
                "resourceStatus": [{
                    "resourceMeta": { "ordinal": 0, "group": "work.open-cluster-management.io", "version": "v1", "kind": "ManifestWork", "resource": "manifestworks", "name": b.name, "namespace": "local-cluster" },
                    "conditions": manifest_conditions(s, b.available, st),
                    "statusFeedback": { "values": [{ "name": "status", "fieldValue": raw(&mw_status(p, b, st)) }] }
                }]
            })
        }
    };
    let mut out = json!({
        "id": b.id,
        "kind": "ResourceBundle",
        "href": format!("/api/maestro/v1/resource-bundles/{}", b.id),
        "name": b.name,
        "consumer_name": p.shard().consumer_name,
        "version": 1,
        "created_at": time(b.created, 6),
        "updated_at": time(updated, 6),
        "metadata": { "name": b.name, "labels": labels(p), "creationTimestamp": time(b.created, 0) },
        "manifests": [manifestwork(p, b, t)],
        "manifest_configs": [{
            "resourceIdentifier": { "group": "work.open-cluster-management.io", "resource": "manifestworks", "name": b.name, "namespace": "local-cluster" },
            "feedbackRules": [{ "type": "JSONPaths", "jsonPaths": [{ "name": "status", "path": ".status" }] }],
            "updateStrategy": { "type": "ServerSideApply", "serverSideApply": { "force": true, "fieldManager": SSA } }
        }],
        "delete_option": { "propagationPolicy": "Foreground" },
        "status": status,
    });
    if let Some(d) = p.bundle_deleted_at(b, t) {
        out["deleted_at"] = json!(time(d, 6));
    }
    Some(out)
}
