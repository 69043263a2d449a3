//! The world's management clusters: one simulated Kubernetes API server per
//! provision shard, named exactly as the Clusters Service reports the shard
//! (the last segment of its AKS management cluster id), holding the
//! ManifestWorks, HostedClusters, HostedControlPlanes, control-plane pods,
//! ManagedClusters and NodePools of the clusters placed on it.
//!
//! The objects are drawn by [`objects_at`] from a [`KubeClusterSpec`] whose
//! times come from the same [`Plan`] as the service-side APIs, so both views
//! of a creation agree. A background task keeps each server's objects equal
//! to the drawing at the clock's current time, applying only what changed and
//! deleting what vanished; while a server is stopped its store keeps moving,
//! so a restart serves what changed meanwhile (and watchers relist).
//!
//! A world with a self-managed hub (docs/design/11-simulated-world.md §11.7) has one more
//! server, [`HUB_NAME`], holding its MultiClusterEngine and the objects of
//! its clusters, drawn the same way in the self-managed mode.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use jiff::SignedDuration;
use parking_lot::Mutex;
use serde_json::Value;

use super::World;
use super::ground::MalformedObjectTruth;
use super::hub::HUB_NAME;
use super::kube::objects::multicluster_engine;
use super::kube::{
    KubeApiHandle, KubeApiServer, KubeClusterFaults, KubeClusterSpec, KubeExtras, objects_with,
};
use super::plan::{ENV, Ms, Plan, SHARDS};
use super::state::trunc_s;
use super::truth::ts;
use crate::kube::ClusterLayout;

/// How often the servers are brought up to date with the clock (real time).
pub const SYNC_EVERY: Duration = Duration::from_millis(200);
/// The `<env>` of the world's `ocm-<env>-<id>` namespaces.
pub const KUBE_ENVIRONMENT: &str = ENV;
/// Where the one malformed object lives (first management cluster, faults on).
pub const MALFORMED_NAMESPACE: &str = "ocm-sim-malformed";
/// The hub's MCE was installed this long before the world's start.
const HUB_AGE_MS: Ms = 24 * 3_600_000;
/// Degraded HostedClusters turn Degraded this long (world time) after their start.
const DEGRADED_AFTER_WORLD_S: f64 = 60.0;

/// One running management cluster of the world.
#[derive(Clone)]
pub struct MgmtCluster {
    /// The `mgmt_cluster` label value (and kubeconfig context name).
    pub name: String,
    pub url: String,
    /// Stop/restart it, or inspect its objects.
    pub api: KubeApiHandle,
    /// How the exporter reads it: an ARO management cluster, or the
    /// self-managed MCE hub.
    pub mode: ClusterLayout,
}

impl std::fmt::Debug for MgmtCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MgmtCluster")
            .field("name", &self.name)
            .field("url", &self.url)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// (kind, namespace, name) of one served object.
type Key = (String, String, String);

pub(crate) struct KubeWorld {
    /// The ARO management clusters first (one per shard), then the hub.
    clusters: Vec<MgmtCluster>,
    /// How many of `clusters` are ARO management clusters.
    aro: usize,
    /// Per cluster, what was last applied to its server.
    applied: Vec<Mutex<HashMap<Key, Value>>>,
    /// The object stored on purpose that no strict decoder reads, when the
    /// world has faults: what the ground truth names as the cause of the
    /// exporter's unknown-value count for its source.
    pub(crate) malformed: Option<MalformedObjectTruth>,
}

fn key_of(obj: &Value) -> Option<Key> {
    let field = |p: &str| obj.pointer(p).and_then(Value::as_str).map(str::to_string);
    Some((
        field("/kind")?,
        field("/metadata/namespace").unwrap_or_default(),
        field("/metadata/name")?,
    ))
}

impl World {
    /// Start one simulated Kubernetes API server per management cluster and
    /// the task that keeps them in step with the fleet. Calling it again
    /// returns the same clusters.
    pub async fn serve_kube(&self) -> std::io::Result<Vec<MgmtCluster>> {
        if let Some(k) = self.inner.kube.lock().as_ref() {
            return Ok(k.clusters.clone());
        }
        let mut clusters = Vec::new();
        let kind = self.inner.cfg.kind;
        for shard in SHARDS.iter().filter(|_| kind.aro()) {
            let (api, url) = KubeApiServer::start().await?;
            clusters.push(MgmtCluster {
                name: shard.mgmt_cluster.to_string(),
                url,
                api,
                mode: ClusterLayout::Aro,
            });
        }
        let aro = clusters.len();
        if kind.hub() {
            let (api, url) = KubeApiServer::start().await?;
            // The hub's own MCE: installed, Available, for good.
            if let Err(e) = api.apply(multicluster_engine(ts(self.inner.params.t0 - HUB_AGE_MS))) {
                tracing::warn!(error = %e, "could not store the MultiClusterEngine");
            }
            clusters.push(MgmtCluster {
                name: HUB_NAME.to_string(),
                url,
                api,
                mode: ClusterLayout::SelfManaged,
            });
        }
        let mut malformed = None;
        if self.inner.cfg.faults
            && kind.aro()
            && let Some(first) = clusters.first()
        {
            // Valid JSON and metadata, a status that matches no schema: the
            // watcher must count and skip it, never stall on it.
            match first.api.insert_raw_malformed(
                "HostedCluster",
                Some(MALFORMED_NAMESPACE),
                "malformed",
            ) {
                Ok(_) => {
                    malformed = Some(MalformedObjectTruth {
                        source: format!("kube/{}", first.name),
                        field: "object",
                        kind: "HostedCluster",
                        namespace: MALFORMED_NAMESPACE,
                        name: "malformed",
                        expected_alert: "HCPUnknownUpstreamValues",
                        since: ts(self.now_ms()),
                    })
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not store the malformed HostedCluster")
                }
            }
        }
        let world = Arc::new(KubeWorld {
            applied: clusters
                .iter()
                .map(|_| Mutex::new(HashMap::new()))
                .collect(),
            clusters: clusters.clone(),
            aro,
            malformed,
        });
        {
            let mut slot = self.inner.kube.lock();
            if let Some(k) = slot.as_ref() {
                return Ok(k.clusters.clone());
            }
            *slot = Some(world);
        }
        self.sync_kube();
        let this = self.clone();
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(SYNC_EVERY);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                this.sync_kube();
            }
        });
        Ok(clusters)
    }

    /// The management clusters, once [`World::serve_kube`] started them.
    pub fn mgmt_clusters(&self) -> Vec<MgmtCluster> {
        self.inner
            .kube
            .lock()
            .as_ref()
            .map(|k| k.clusters.clone())
            .unwrap_or_default()
    }

    /// The API server of one management cluster (to stop and restart it).
    pub fn kube_api(&self, mgmt_cluster: &str) -> Option<KubeApiHandle> {
        self.mgmt_clusters()
            .into_iter()
            .find(|c| c.name == mgmt_cluster)
            .map(|c| c.api)
    }

    /// The hop budgets the truth assumes for the exporter (the defaults,
    /// divided by the speed like every world delay); configure the exporter
    /// with them.
    pub fn hop_budgets(&self) -> hcp_flow_model::HopBudgets {
        hcp_flow_model::HopBudgets::default().scaled(self.inner.cfg.speed)
    }

    /// The deletion's hop budgets the truth assumes, scaled alike.
    pub fn delete_budgets(&self) -> hcp_flow_model::HopBudgets {
        hcp_flow_model::HopBudgets::deletion_defaults().scaled(self.inner.cfg.speed)
    }

    /// How long a never-Available HostedCluster may stay Degraded before the
    /// exporter calls it failed: its hop budget.
    pub fn kube_degraded_budget(&self) -> Duration {
        self.hop_budgets().hosted_cluster
    }

    pub(crate) fn kube_served(&self) -> bool {
        self.inner.kube.lock().is_some()
    }

    /// The management-side view of one plan, `None` once its ManifestWorks
    /// are gone (the deletion takes everything with it, docs/design/11-simulated-world.md
    /// §11.9).
    pub(crate) fn kube_spec(&self, p: &Plan, t: Ms) -> Option<(KubeClusterSpec, KubeExtras)> {
        // Nothing reaches a management cluster the RP never handed over;
        // a deleted cluster's objects are gone with its ManifestWorks.
        let gone = p.mw_gone.or(p.bundle_deleted);
        if gone.is_some_and(|d| d <= t) || p.cs_created.is_none() {
            return None;
        }
        let degraded_after =
            SignedDuration::from_millis(self.inner.params.ms(DEGRADED_AFTER_WORLD_S));
        Some((kube_spec(p, degraded_after), kube_extras(p)))
    }

    /// The management-side faults of a plan, also once its objects are gone
    /// (the ground truth keeps naming the fault of a cluster being deleted);
    /// `None` when no management cluster is served or nothing reached one.
    pub(crate) fn kube_faults_of(&self, p: &Plan) -> Option<KubeClusterFaults> {
        if !self.kube_served() || p.cs_created.is_none() {
            return None;
        }
        let degraded_after =
            SignedDuration::from_millis(self.inner.params.ms(DEGRADED_AFTER_WORLD_S));
        Some(kube_faults(p, degraded_after))
    }

    /// Bring every management cluster's objects to the clock's current time.
    pub fn sync_kube(&self) {
        let Some(world) = self.inner.kube.lock().clone() else {
            return;
        };
        let t = self.now_ms();
        let now = ts(t);
        let n = world.aro.max(1);
        let mut desired: Vec<BTreeMap<Key, Value>> = vec![BTreeMap::new(); world.clusters.len()];
        let mut draw = |slot: usize, spec: &KubeClusterSpec, extras: &KubeExtras| {
            let Some(slot) = desired.get_mut(slot) else {
                return;
            };
            for obj in objects_with(spec, extras, now) {
                if let Some(key) = key_of(&obj) {
                    slot.insert(key, obj);
                }
            }
        };
        if world.aro > 0 {
            for p in self.plans(t).iter() {
                if let Some((spec, extras)) = self.kube_spec(p, t) {
                    draw(p.shard % n, &spec, &extras);
                }
            }
        }
        // The hub, after the ARO management clusters.
        if world.clusters.len() > world.aro {
            for p in self.hub_plans(t).iter() {
                if t >= p.created && p.gone_at().is_none_or(|g| t < g) {
                    draw(world.aro, &p.spec(), &p.extras());
                }
            }
        }
        for ((cluster, applied), want) in world.clusters.iter().zip(&world.applied).zip(desired) {
            let mut applied = applied.lock();
            let gone: Vec<Key> = applied
                .keys()
                .filter(|k| !want.contains_key(*k))
                .cloned()
                .collect();
            for key in gone {
                let (kind, ns, name) = &key;
                let ns = (!ns.is_empty()).then_some(ns.as_str());
                cluster.api.delete(kind, ns, name);
                applied.remove(&key);
            }
            for (key, obj) in want {
                if applied.get(&key) == Some(&obj) {
                    continue;
                }
                match cluster.api.apply(obj.clone()) {
                    Ok(_) => {
                        applied.insert(key, obj);
                    }
                    Err(e) => {
                        tracing::warn!(mgmt_cluster = %cluster.name, error = %e, "simulated object not stored")
                    }
                }
            }
        }
    }
}

/// Management-side faults of a plan: the service-side fault that reaches the
/// management cluster, or the management-only ManagedCluster fault.
pub(crate) fn kube_faults(p: &Plan, degraded_after: SignedDuration) -> KubeClusterFaults {
    use super::FaultKind;
    KubeClusterFaults {
        manifestwork_never_applied: p.fault == Some(FaultKind::BundleNeverApplied),
        hosted_cluster_degraded: p.fault == Some(FaultKind::HostedClusterDegraded),
        managed_cluster_never_joins: p.managed_cluster_never_joins,
        node_pool_stuck_at_zero: p.fault == Some(FaultKind::NodePoolStuck),
        node_pool_work_never_applied: p.fault == Some(FaultKind::NodePoolBundleNeverApplied),
        hosted_cluster_lost: p
            .hc_lost
            .map(|(lost, back)| (ts(trunc_s(lost)), ts(trunc_s(back)))),
        degraded_after: Some(degraded_after),
        // Faults of the self-managed hub only.
        release_image_invalid_at: None,
        machines_pending: None,
    }
}

/// What the management cluster shows of a plan beyond its
/// [`KubeClusterSpec`]: the HostedCluster's internal name, which names its
/// NodePools as the Maestro bundles do (`<HostedCluster name>-<pool>`, as in
/// ARO HCP), so both views of a pool agree.
pub(crate) fn kube_extras(p: &Plan) -> KubeExtras {
    let pending = None;
    let name = |i: usize| {
        p.pools
            .get(i)
            .map(|pool| pool.short.clone())
            .unwrap_or_default()
    };
    let mut x = super::day2::kube_extras(
        &p.day2,
        Some(p.hc_name.clone()),
        Some(p.version),
        pending,
        name,
    );
    // The removed pool's ManifestWork goes with its bundle's deletion, at
    // the bundle's instants (shown in whole seconds, `KubeExtras::as_served`).
    if let (Some(removal), Some(r)) = (x.removal.as_mut(), p.day2.removal.as_ref()) {
        removal.work_deleting = Some(ts(r.requested));
        removal.work_gone = Some(ts(r.work_gone));
    }
    x
}

/// The plan's times as the management cluster shows them: the ManifestWork
/// appears with the bundle and is Applied at the agent's first report; the
/// control plane is ready when its kube-apiserver is; the ManagedCluster joins
/// soon after the HostedCluster is Available (the klusterlet needs the hosted
/// API server; a quarter of the way to the rollout's completion, at most a
/// world-minute); pools are ready with the plan's nodes.
pub(crate) fn kube_spec(p: &Plan, degraded_after: SignedDuration) -> KubeClusterSpec {
    let at = |ms: Option<Ms>| ms.map(ts);
    KubeClusterSpec {
        cluster_id: p.cluster_id.clone(),
        // The Clusters Service name: the `api.openshift.com/name` label must
        // agree with what the RP and CS report for the same cluster.
        name: p.name.clone(),
        env: KUBE_ENVIRONMENT.to_string(),
        mode: ClusterLayout::Aro,
        created_at: ts(p.bundle_created),
        manifestwork_applied_at: at(p.bundle_applied),
        hosted_cluster_available_at: at(p.hc_available),
        control_plane_ready_at: at(p.hc_kas_available),
        managed_cluster_joined_at: at(p
            .hc_available
            .zip(p.hc_completed)
            .map(|(available, completed)| available + (completed - available) / 4)),
        // A pool added later is the extras' (`kube_extras`).
        node_pools: p
            .creation_pools()
            .iter()
            .map(|pool| {
                (
                    pool.short.clone(),
                    u32::try_from(pool.replicas).unwrap_or(0),
                    at(p.np_ready),
                )
            })
            .collect(),
        faults: kube_faults(p, degraded_after),
        hub: Default::default(),
        deletion: super::kube::KubeDeletion {
            work_deleting_at: at(p.bundle_deleted),
            objects_deleting_at: at(p.hc_deleting),
            dependents_gone_at: at(p.hc_dependents_gone),
            objects_gone_at: at(p.hc_gone),
            cloud_resources_stuck: p.fault == Some(super::FaultKind::HostedClusterFinalizerStuck),
        },
    }
}
