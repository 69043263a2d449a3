//! What can go wrong in the world: transport faults a test injects
//! ([`Fault`]) and the per-cluster scenario faults the seed draws
//! ([`FaultKind`]), each with the operation it hits and the alert it should
//! raise (docs/design/11-simulated-world.md).

use super::Api;

/// Transport faults injected from tests ([`World::inject`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The next `for_requests` requests get a 5xx with the API's error body.
    ServerErrors { api: Api, for_requests: u32 },
    /// The next `for_requests` requests get 200, `application/json` and a
    /// truncated body.
    MalformedJson { api: Api, for_requests: u32 },
    /// The API stops listening (connection refused); a request already on an
    /// open connection gets 503.
    Down { api: Api },
    /// The API listens again on the same address.
    Up { api: Api },
    /// Maestro's gRPC server ends every open `Subscribe` stream
    /// (`Unavailable`); subscribing again works.
    StreamDrop,
    /// Maestro's gRPC stream sends `count` malformed status events (a
    /// payload that is not JSON, no resource id, an unknown type, ...).
    MalformedEvents { count: u32 },
}

/// Per-cluster scenario faults, chosen by the seed (≈ 5–10 % each for the
/// first five and the NodePool bundle, rarer for the unknown enum values;
/// [`FaultKind::NotHandedOver`] only when [`WorldConfig::not_handed_over`]
/// asks) and recorded in the truth with the alert each should raise
/// ([`FaultKind::expected_alert`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    /// CS `error` with `provision_error_code: "OCM4001"` (RP → Failed).
    ClustersServiceError,
    /// The bundle's status stays null: never Applied.
    BundleNeverApplied,
    /// The bundle's `updated_at` and status freeze at the first report while
    /// the work behind it progresses (CS and RP complete).
    MaestroStatusNotUpdated,
    /// HostedCluster never Available: ValidReleaseImage False, Degraded True
    /// (through Maestro; a management cluster, and the self-managed hub,
    /// show Degraded True alone, and the hop fails at its budget).
    HostedClusterDegraded,
    /// NodePools stay at 0 ready replicas.
    NodePoolStuck,
    /// CS reports `"frobnicating"` instead of `installing`.
    UnknownClustersServiceState,
    /// The RP reports `"Migrating"` instead of `Provisioning`.
    UnknownProvisioningState,
    /// The first NodePool's bundle is never applied: its status stays null,
    /// its ManifestWork on the management cluster gets no status and the
    /// NodePool never exists there. The HostedCluster's bundle and the other
    /// pools' go right, so the creation completes.
    NodePoolBundleNeverApplied,
    /// The creation completes, then the HostedCluster's Available turns
    /// False for 25–35 minutes and comes back (a regression, not a creation
    /// failure): the completed creation stays completed.
    HostedClusterUnavailable,
    /// The RP accepted the resource (`Accepted` for good) but Clusters
    /// Service never got it: no CS cluster, no bundle, nothing on a
    /// management cluster. The creation never completes.
    NotHandedOver,
    /// Self-managed, KubeVirt: the worker VMs cannot be scheduled, so every
    /// NodePool's machines stay pending (`AllMachinesReady` False, reason
    /// `Unschedulable`) at 0 ready nodes. The creation completes.
    KubeVirtMachinesPending,
    /// Self-managed, Agent: the inventory holds too few free Agents; the
    /// first NodePool's machines find none (`AllMachinesReady` False,
    /// reason `NoSuitableAgents`) and stay at 0 ready nodes. The creation
    /// completes.
    NoFreeAgent,
    /// Self-managed: the release image cannot be read, so the HostedCluster
    /// and its NodePools report `ValidReleaseImage` False (both hops failed)
    /// and the control plane never comes up.
    ReleaseImageInvalid,
    /// Self-managed: the ManagedCluster is accepted but its klusterlet never
    /// joins, although the HostedCluster is Available. (The ARO world draws
    /// the same fault on the management side alone, as
    /// `KubeClusterFaults::managed_cluster_never_joins`.)
    ManagedClusterNeverJoins,
    /// Deletion: HyperShift cannot destroy the cluster's cloud resources,
    /// so the HostedCluster's finalizer holds it (`CloudResourcesDestroyed`
    /// False) and everything outside it waits, until someone clears it
    /// hours later.
    HostedClusterFinalizerStuck,
    /// Deletion: the work agent is gone, so the ManifestWork is marked
    /// deleting and nothing acts on it; the bundle stays deleted-not-gone.
    ManifestWorkAgentGone,
    /// Deletion: Clusters Service's uninstall fails (`error` with a
    /// provision error code) and the RP says `Failed`; a retry hours later
    /// deletes the cluster.
    ClustersServiceUninstallError,
    /// Deletion: everything behind the RP is gone, but the RP's resource
    /// stays `Deleting` for hours.
    RpStuckDeleting,
    /// Day 2: a pool added after the creation never reaches the ignition
    /// endpoint (`ReachedIgnitionEndpoint` False, `ignitionNotReached`):
    /// `Ready` False, 0 ready nodes.
    NodePoolNeverReachesIgnition,
    /// Day 2: the control plane's upgrade never completes: the new
    /// `status.version.history[0]` stays `Partial` (the HostedCluster stays
    /// Available); no pool is upgraded.
    UpgradeStuckPartial,
    /// Day 2: the first pool's upgrade never ends: `UpdatingVersion` stays
    /// True and `status.version` stays the old release.
    NodePoolStuckUpdating,
    /// Day 2, self-managed, KubeVirt: a pool added after the creation gets
    /// no VM scheduled (`AllMachinesReady` False, `Unschedulable`), 0 ready.
    AddedPoolVmUnschedulable,
    /// Day 2, self-managed, Agent: no free Agent for a pool added after the
    /// creation (`AllMachinesReady` False, `NoSuitableAgents`), 0 ready.
    AddedPoolNoFreeAgent,
    /// Day 2, ARO: Clusters Service fails a pool added after the creation
    /// in its validation (`error`, a quota message), before it creates a
    /// bundle: the ARM nodePool reads `Failed`, no NodePool ever exists.
    /// Drawn only when [`Day2Config::cs_node_pool_error`] asks.
    CsNodePoolError,
    /// Day 2, ARO: the first pool's upgrade begins (Clusters Service
    /// `updating`, the RP `Updating`, the NodePool `UpdatingVersion` True),
    /// then Clusters Service puts the pool in `error` 10–60 s later (the RP
    /// `Failed`) and the NodePool never reports the target: the upgrade
    /// fails at `clusters_service`. Drawn with [`FaultKind::CsNodePoolError`]
    /// ([`Day2Config::cs_node_pool_error`]).
    CsNodePoolUpgradeError,
}

impl FaultKind {
    /// The faults of an operation after the creation (day 2).
    pub fn is_day2(self) -> bool {
        matches!(
            self,
            FaultKind::NodePoolNeverReachesIgnition
                | FaultKind::UpgradeStuckPartial
                | FaultKind::NodePoolStuckUpdating
                | FaultKind::AddedPoolVmUnschedulable
                | FaultKind::AddedPoolNoFreeAgent
                | FaultKind::CsNodePoolError
                | FaultKind::CsNodePoolUpgradeError
        )
    }

    /// The operation the fault hits (docs/design/15-operations.md §15): `create`,
    /// `delete`, `node_pool_create`, `upgrade` or `node_pool_upgrade`;
    /// `None` for a regression after the creation, which no operation owns.
    pub fn operation(self) -> Option<&'static str> {
        match self {
            FaultKind::HostedClusterUnavailable => None,
            FaultKind::NodePoolNeverReachesIgnition
            | FaultKind::AddedPoolVmUnschedulable
            | FaultKind::AddedPoolNoFreeAgent
            | FaultKind::CsNodePoolError => Some("node_pool_create"),
            FaultKind::UpgradeStuckPartial => Some("upgrade"),
            FaultKind::NodePoolStuckUpdating | FaultKind::CsNodePoolUpgradeError => {
                Some("node_pool_upgrade")
            }
            f if f.is_deletion() => Some("delete"),
            _ => Some("create"),
        }
    }

    /// The faults of a deletion (the others are a creation's).
    pub fn is_deletion(self) -> bool {
        matches!(
            self,
            FaultKind::HostedClusterFinalizerStuck
                | FaultKind::ManifestWorkAgentGone
                | FaultKind::ClustersServiceUninstallError
                | FaultKind::RpStuckDeleting
        )
    }
}
