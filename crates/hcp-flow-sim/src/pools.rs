//! A cluster's node pools as the RP frontend (ARM `nodePools`) and Clusters
//! Service (`node_pools`) serve them (docs/design/11-simulated-world.md §11.10): the same pools
//! the bundles and the management clusters carry, their states moving with
//! the NodePools, plus a pool Clusters Service failed before it made one
//! ([`FailedPool`](super::day2::FailedPool)).
//!
//! Shapes from the reference: ARM `NodePool` (a TrackedResource with
//! `NodePoolProperties`, `NodePools_Get_MaximumSet_Gen.json`) and Clusters
//! Service `NodePool` / `NodePoolStatus` / `NodePoolState` (aro_hcp
//! v1alpha1). The RP's state is Clusters Service's mapped as the ARO HCP
//! backend maps a node pool's.

use serde_json::{Value, json};

use super::plan::{Ms, Plan, REGION};
use super::state::reached;
use super::wire::{RpApiVersion, time};

/// The VM size every simulated pool runs on.
const VM_SIZE: &str = "Standard_D4s_v3";

/// Clusters Service's words when its validation fails a node pool (quota).
pub(crate) const CS_NODE_POOL_ERROR_MESSAGE: &str = "Failed to create node pool: insufficient regional vCPU quota for VM size 'Standard_D4s_v3' in region 'westus3' (requested 12 cores, 4 available); request a quota increase and retry";

/// Clusters Service's words when it fails a node pool's upgrade.
pub(crate) const CS_NODE_POOL_UPGRADE_ERROR_MESSAGE: &str = "Failed to update node pool: the machine image for the requested version is not available in region 'westus3'";

/// What Clusters Service says of pool `sp` in `error`: its creation failed
/// in validation, or its upgrade.
fn cs_error_message(sp: &ServicePool<'_>) -> &'static str {
    if sp.error.is_some() {
        CS_NODE_POOL_ERROR_MESSAGE
    } else {
        CS_NODE_POOL_UPGRADE_ERROR_MESSAGE
    }
}

/// One pool as the service side knows it: from the user's request on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServicePool<'a> {
    pub index: usize,
    /// The ARM nodePool name, which is Clusters Service's node pool id and
    /// `azure_node_pool.resource_name` (`np-<n>`).
    pub short: &'a str,
    pub replicas: i64,
    /// `systemData.createdAt`; Clusters Service's node pool exists from here
    /// (a pool of the creation: with the cluster).
    pub requested: Ms,
    /// Clusters Service failed it here (no NodePool ever).
    pub error: Option<Ms>,
}

impl Plan {
    /// Every pool the RP and Clusters Service know of, in order: the
    /// creation's, the one added later (or the one Clusters Service failed).
    pub fn service_pools(&self) -> Vec<ServicePool<'_>> {
        let mut out: Vec<ServicePool<'_>> = self
            .pools
            .iter()
            .enumerate()
            .map(|(i, pool)| ServicePool {
                index: i,
                short: &pool.short,
                replicas: pool.replicas,
                requested: match self.day2.added.as_ref().filter(|a| a.pool == i) {
                    Some(a) => a.requested,
                    None => self.created,
                },
                error: None,
            })
            .collect();
        if let Some(f) = &self.day2.failed {
            out.push(ServicePool {
                index: f.pool,
                short: &f.short,
                replicas: i64::from(f.replicas),
                requested: f.requested,
                error: Some(f.error),
            });
        }
        out
    }

    /// The NodePool's `metadata.name` pool `i` has, or would have had.
    pub fn pool_name(&self, i: usize) -> Option<String> {
        self.pools.get(i).map(|p| p.name.clone()).or_else(|| {
            self.day2
                .failed
                .as_ref()
                .filter(|f| f.pool == i)
                .map(|f| format!("{}-{}", self.hc_name, f.short))
        })
    }

    /// When pool `sp` is gone on its own (removed after the creation): with
    /// its NodePool.
    fn pool_gone(&self, sp: &ServicePool<'_>) -> Option<Ms> {
        self.day2
            .removal
            .as_ref()
            .filter(|r| r.pool == sp.index)
            .map(|r| r.gone)
    }

    /// Its removal asked for (the bundle's `deleted_at`).
    fn pool_removing(&self, sp: &ServicePool<'_>) -> Option<Ms> {
        self.day2
            .removal
            .as_ref()
            .filter(|r| r.pool == sp.index)
            .map(|r| r.requested)
    }

    /// When the NodePool reached its replicas, Ready (`None`: never, or no
    /// NodePool): the same instants the bundles' feedback and the
    /// management clusters serve.
    fn pool_ready(&self, sp: &ServicePool<'_>) -> Option<Ms> {
        if sp.error.is_some() {
            return None;
        }
        let applied = self
            .bundles
            .iter()
            .find(|b| b.pool == Some(sp.index))
            .and_then(|b| b.applied)?;
        let ready = match self.day2.added.as_ref().filter(|a| a.pool == sp.index) {
            Some(a) => a.ready,
            None => self.np_ready,
        };
        ready.map(|r| r.max(applied))
    }

    /// Clusters Service's node pool `state.value` and when it was entered;
    /// `None` while it does not exist.
    pub fn cs_pool_state(&self, sp: &ServicePool<'_>, t: Ms) -> Option<(&'static str, Ms)> {
        let cs_created = self.cs_created?;
        let exists = self.cs_exists(t)
            && sp.requested.max(cs_created) <= t
            && !reached(self.pool_gone(sp), t);
        if !exists {
            return None;
        }
        let uninstalling = [self.pool_removing(sp), self.cs_uninstalling]
            .into_iter()
            .flatten()
            .filter(|at| *at <= t)
            .min();
        if let Some(at) = uninstalling {
            return Some(("uninstalling", at));
        }
        if let Some(e) = sp.error {
            return Some(if e <= t {
                ("error", e)
            } else {
                ("validating", sp.requested)
            });
        }
        if let Some(u) = self.day2.pool_upgrade(sp.index) {
            if let Some(e) = u.cs_error.filter(|e| *e <= t) {
                return Some(("error", e));
            }
            match u.done {
                Some(done) if done <= t => return Some(("ready", done)),
                _ if u.started <= t => return Some(("updating", u.started)),
                _ => {}
            }
        }
        if let Some(r) = self.pool_ready(sp).filter(|r| *r <= t) {
            return Some(("ready", r));
        }
        let added = self.day2.added.as_ref().filter(|a| a.pool == sp.index);
        let (pending, installing) = match added {
            // Installing once it has handed its bundle to Maestro.
            Some(a) => {
                let bundle = self
                    .bundles
                    .iter()
                    .find(|b| b.pool == Some(sp.index))
                    .map_or(a.created, |b| b.created);
                (a.cs_pending, bundle)
            }
            None => (self.cs_pending, self.cs_installing),
        };
        Some(if installing <= t {
            ("installing", installing)
        } else if pending <= t {
            ("pending", pending)
        } else {
            ("validating", sp.requested.max(cs_created))
        })
    }

    /// The ARM nodePool's `provisioningState`, `None` while it does not
    /// exist: Clusters Service's state mapped as the ARO HCP backend maps a
    /// node pool's; `Deleting` from the user's DELETE (the pool's or the
    /// cluster's), `Accepted` while Clusters Service has no node pool.
    pub fn rp_pool_state(&self, sp: &ServicePool<'_>, t: Ms) -> Option<&'static str> {
        let exists = self.rp_exists(t) && sp.requested <= t && !reached(self.pool_gone(sp), t);
        if !exists {
            return None;
        }
        if reached(self.delete_requested, t) || reached(self.pool_removing(sp), t) {
            return Some("Deleting");
        }
        Some(match self.cs_pool_state(sp, t).map(|(s, _)| s) {
            None | Some("validating" | "pending") => "Accepted",
            Some("installing") => "Provisioning",
            Some("ready") => "Succeeded",
            Some("updating") => "Updating",
            Some("uninstalling") => "Deleting",
            Some(_) => "Failed",
        })
    }

    /// The last user request on the ARM nodePool (`lastModifiedAt`).
    fn rp_pool_modified(&self, sp: &ServicePool<'_>, t: Ms) -> Ms {
        [
            Some(sp.requested),
            self.day2.pool_upgrade(sp.index).map(|u| u.started),
            self.pool_removing(sp),
            self.delete_requested,
        ]
        .into_iter()
        .flatten()
        .filter(|at| *at <= t)
        .max()
        .unwrap_or(sp.requested)
    }

    /// The release the pool's spec asks for, and the one it runs.
    fn pool_versions(&self, sp: &ServicePool<'_>, t: Ms) -> (&'static str, &'static str) {
        (
            self.day2.pool_target(sp.index, self.version, t),
            self.day2.pool_version(sp.index, self.version, t),
        )
    }

    fn subnet_id(&self) -> String {
        format!(
            "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/virtualNetworks/{}-vnet/subnets/default",
            self.subscription_id, self.resource_group, self.name
        )
    }

    /// The NodePool's `status.replicas` (0 without a NodePool).
    fn pool_current_replicas(&self, sp: &ServicePool<'_>, t: Ms) -> i64 {
        let exists = sp.error.is_none()
            && self
                .bundles
                .iter()
                .any(|b| b.pool == Some(sp.index) && reached(b.applied, t));
        if exists {
            self.np_view(sp.index, t).current
        } else {
            0
        }
    }
}

/// `x.y` of `x.y.z`, as the RP names versions.
fn minor(v: &str) -> &str {
    v.rsplit_once('.').map_or(v, |(xy, _)| xy)
}

/// The ARM nodePool `sp` of `p` (`None` when it does not exist at `t`).
pub(crate) fn rp_node_pool(
    p: &Plan,
    sp: &ServicePool<'_>,
    t: Ms,
    v: RpApiVersion,
) -> Option<Value> {
    let state = p.rp_pool_state(sp, t)?;
    let (target, _) = p.pool_versions(sp, t);
    let mut os_disk = json!({ "sizeGiB": 64, "diskStorageAccountType": "Premium_LRS" });
    if v >= RpApiVersion::V2025_12_23 {
        os_disk["diskType"] = json!("Managed");
    }
    let mut properties = json!({
        "provisioningState": state,
        "version": { "id": minor(target), "channelGroup": "stable" },
        "platform": {
            "subnetId": p.subnet_id(),
            "vmSize": VM_SIZE,
            "enableEncryptionAtHost": false,
            "osDisk": os_disk,
        },
        "replicas": sp.replicas,
        "autoRepair": true,
        "nodeDrainTimeoutMinutes": 0,
    });
    if v >= RpApiVersion::V2026_06_30 {
        properties["status"] = json!({ "conditions": rp_pool_conditions(p, sp, t, state) });
    }
    Some(json!({
        "id": format!("{}/nodePools/{}", p.resource_id(), sp.short),
        "name": sp.short,
        "type": "Microsoft.RedHatOpenShift/hcpOpenShiftClusters/nodePools",
        "location": REGION,
        "tags": { "environment": super::plan::ENV },
        "systemData": {
            "createdBy": "sre@example.com",
            "createdByType": "User",
            "createdAt": time(sp.requested, 3),
            "lastModifiedBy": "sre@example.com",
            "lastModifiedByType": "User",
            "lastModifiedAt": time(p.rp_pool_modified(sp, t), 3),
        },
        "properties": properties,
    }))
}

/// `properties.status.conditions` (2026-06-30-preview and newer), from the
/// state and when Clusters Service entered it.
fn rp_pool_conditions(p: &Plan, sp: &ServicePool<'_>, t: Ms, state: &str) -> Value {
    let since = p.cs_pool_state(sp, t).map_or(sp.requested, |(_, at)| at);
    let since = time(super::state::trunc_s(since), 0);
    let cond = |kind: &str, ok: bool, reason: &str, message: &str| json!({ "type": kind, "status": if ok { "True" } else { "False" }, "lastTransitionTime": since, "reason": reason, "message": message });
    let available = matches!(state, "Succeeded" | "Updating");
    let progressing = matches!(state, "Accepted" | "Provisioning" | "Updating" | "Deleting");
    let failed = state == "Failed";
    json!([
        cond(
            "Available",
            available,
            if available { "AsExpected" } else { state },
            if available {
                "Node pool is available"
            } else {
                "Node pool is not available"
            }
        ),
        cond(
            "Degraded",
            failed,
            if failed {
                "ProvisioningFailed"
            } else {
                "AsExpected"
            },
            if failed {
                cs_error_message(sp)
            } else {
                "Node pool is not degraded"
            }
        ),
        cond(
            "Progressing",
            progressing,
            if progressing { state } else { "AsExpected" },
            if progressing {
                "Node pool is changing"
            } else {
                "Node pool is not progressing"
            }
        ),
    ])
}

/// Clusters Service's `NodePoolStatus` of `sp` (`None`: no node pool).
pub(crate) fn cs_node_pool_status(
    p: &Plan,
    sp: &ServicePool<'_>,
    t: Ms,
    prefix: &str,
) -> Option<Value> {
    let (state, since) = p.cs_pool_state(sp, t)?;
    let current = p.pool_current_replicas(sp, t);
    let message = match state {
        "error" => cs_error_message(sp).to_string(),
        "ready" | "updating" => String::new(),
        "uninstalling" => "Node pool is being deleted".to_string(),
        _ => format!(
            "Waiting for nodes: {current} of {} replicas available",
            sp.replicas
        ),
    };
    Some(json!({
        "kind": "NodePoolStatus",
        "id": sp.short,
        "href": format!("{prefix}/clusters/{}/node_pools/{}/status", p.cluster_id, sp.short),
        "current_replicas": current,
        "message": message,
        "state": {
            "kind": "NodePoolState",
            "value": state,
            "last_updated_timestamp": time(since, 6),
        },
    }))
}

/// Clusters Service's `NodePool` `sp` (`None`: no node pool at `t`).
pub(crate) fn cs_node_pool(p: &Plan, sp: &ServicePool<'_>, t: Ms, prefix: &str) -> Option<Value> {
    let status = cs_node_pool_status(p, sp, t, prefix)?;
    let (_, running) = p.pool_versions(sp, t);
    Some(json!({
        "kind": "NodePool",
        "id": sp.short,
        "href": format!("{prefix}/clusters/{}/node_pools/{}", p.cluster_id, sp.short),
        "replicas": sp.replicas,
        "auto_repair": true,
        "subnet": p.subnet_id(),
        "azure_node_pool": {
            "resource_name": sp.short,
            "vm_size": VM_SIZE,
            "encryption_at_host": { "state": "disabled" },
            "os_disk": {
                "size_gibibytes": 64,
                "storage_account_type": "Premium_LRS",
                "persistence": "persistent",
            },
        },
        "management_upgrade": {
            "kind": "NodePoolManagementUpgrade",
            "type": "Replace",
            "max_surge": "1",
            "max_unavailable": "0",
        },
        "node_drain_grace_period": { "unit": "minutes", "value": 0 },
        "version": {
            "kind": "Version",
            "id": format!("openshift-v{running}"),
            "raw_id": running,
            "channel_group": "stable",
        },
        "status": status,
    }))
}

/// How the RP's and Clusters Service's node pools moved in a window of world
/// time, as the bench compares the exporter's pool reads with them
/// (docs/design/15b-operations.md §15.11): reads are worth their cost only where a pool
/// changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolChanges {
    /// Clusters with at least one pool whose ARM `provisioningState` changed
    /// (or that appeared or went).
    pub rp_clusters: u64,
    /// The same at Clusters Service (`state.value`).
    pub cs_clusters: u64,
    /// Pool state changes at the RP, every pool's counted.
    pub rp_changes: u64,
    /// The same at Clusters Service.
    pub cs_changes: u64,
    /// Pools not settled (Clusters Service neither `ready` nor gone) at the
    /// window's end: the pool operations in flight.
    pub in_flight: u64,
}

/// The world's pool changes between `from` and `to` (world ms) of the
/// clusters `followed` keeps, sampled every `step` ms: a state that lasts
/// less than a step between two samples is not counted, as a poller would
/// not see it either.
pub(crate) fn pool_changes(
    plans: &[std::sync::Arc<Plan>],
    from: Ms,
    to: Ms,
    step: Ms,
    followed: impl Fn(&str) -> bool,
) -> PoolChanges {
    let mut out = PoolChanges::default();
    let step = step.max(1);
    for plan in plans.iter().filter(|p| followed(&p.cluster_id)) {
        let (mut rp_moved, mut cs_moved) = (false, false);
        for sp in plan.service_pools() {
            let mut rp = plan.rp_pool_state(&sp, from);
            let mut cs = plan.cs_pool_state(&sp, from).map(|(s, _)| s);
            let mut t = from;
            while t < to {
                t = (t + step).min(to);
                let (rp_now, cs_now) = (
                    plan.rp_pool_state(&sp, t),
                    plan.cs_pool_state(&sp, t).map(|(s, _)| s),
                );
                if rp_now != rp {
                    out.rp_changes += 1;
                    rp_moved = true;
                    rp = rp_now;
                }
                if cs_now != cs {
                    out.cs_changes += 1;
                    cs_moved = true;
                    cs = cs_now;
                }
            }
            if cs.is_some_and(|s| !matches!(s, "ready" | "error")) {
                out.in_flight += 1;
            }
        }
        out.rp_clusters += u64::from(rp_moved);
        out.cs_clusters += u64::from(cs_moved);
    }
    out
}
