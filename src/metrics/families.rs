//! The per-cluster families: one declaration each (name, type, help, the
//! labels after `cluster_id`, their count in the type), and the one list
//! exposition and the docs check read (docs/design/05-metrics.md §5).

/// The type a family is declared with in its `# TYPE` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FamilyKind {
    Gauge,
}

impl FamilyKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FamilyKind::Gauge => "gauge",
        }
    }
}

/// Which per-cluster family, by its place in exposition order. Only the
/// declarations below make one, so every id names a family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FamilyId(pub(super) u8);

impl FamilyId {
    pub(super) fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// A per-cluster family with `N` labels after `cluster_id`: every line of
/// every per-cluster family starts with `cluster_id`, which the layout of
/// [`RenderedCluster`] relies on, so it is not declared again. A sample is
/// written with exactly `N` label values, so a line whose labels disagree
/// with the declaration does not compile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Family<const N: usize> {
    pub(super) id: FamilyId,
    pub name: &'static str,
    pub kind: FamilyKind,
    pub help: &'static str,
    /// The labels after `cluster_id`, in the order every line writes them.
    pub labels: &'static [&'static str; N],
}

impl<const N: usize> Family<N> {
    const fn gauge(
        id: u8,
        name: &'static str,
        help: &'static str,
        labels: &'static [&'static str; N],
    ) -> Self {
        Family {
            id: FamilyId(id),
            name,
            kind: FamilyKind::Gauge,
            help,
            labels,
        }
    }

    pub const fn def(&self) -> FamilyDef {
        FamilyDef {
            id: self.id,
            name: self.name,
            kind: self.kind,
            help: self.help,
            labels: self.labels,
        }
    }
}

/// A family with its label count forgotten: what a scrape and the
/// documentation check iterate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FamilyDef {
    pub id: FamilyId,
    pub name: &'static str,
    pub kind: FamilyKind,
    pub help: &'static str,
    /// The labels after `cluster_id`.
    pub labels: &'static [&'static str],
}

impl FamilyDef {
    /// Every label name a line of the family can carry, `cluster_id` first.
    pub fn label_names(&self) -> impl Iterator<Item = &'static str> + use<> {
        std::iter::once("cluster_id").chain(self.labels.iter().copied())
    }
}

pub const CLUSTER_INFO: Family<8> = Family::gauge(
    0,
    "hcpflow_cluster_info",
    "Identities of one cluster (value 1). Cached state refreshed in the background",
    &[
        "name",
        "resource_id",
        "subscription_id",
        "resource_group",
        "mgmt_cluster",
        "namespace",
        "platform",
        "version",
    ],
);
pub const HOP_PHASE: Family<4> = Family::gauge(
    1,
    "hcpflow_hop_phase",
    "Current phase and raw upstream state of each hop of a cluster (value 1; a transition replaces the series). Cached state refreshed in the background",
    &["hop", "phase", "state", "via"],
);
/// `object` only on hops that hold several objects, `node_pool` only on the
/// node-pool hop: the one family whose lines leave labels out.
pub const HOP_CONDITION: Family<6> = Family::gauge(
    2,
    "hcpflow_hop_condition",
    "Current status of each allow-listed condition of a hop's object (value 1); reason allow-listed, else other; object (maestro_bundle, manifestwork) or node_pool names the object on hops that hold several. Cached state refreshed in the background",
    &[
        "hop",
        "condition",
        "status",
        "reason",
        "object",
        "node_pool",
    ],
);
pub const HOP_PHASE_SINCE: Family<1> = Family::gauge(
    3,
    "hcpflow_hop_phase_since_timestamp_seconds",
    "Unix time the hop's current phase was entered (upstream time when known). Cached state refreshed in the background",
    &["hop"],
);
pub const HOP_STATUS_UPDATED: Family<1> = Family::gauge(
    4,
    "hcpflow_hop_status_updated_timestamp_seconds",
    "Unix time upstream last updated the hop's status (Maestro bundle updated_at): of a cluster's bundles, the oldest update among those not ready, else the newest. Cached state refreshed in the background",
    &["hop"],
);
pub const HOP_FAILURE_INFO: Family<2> = Family::gauge(
    5,
    "hcpflow_hop_failure_info",
    "Why a hop is failed (value 1, only while failed): provision error code or condition reason. Cached state refreshed in the background",
    &["hop", "code"],
);
pub const CLUSTER_CREATED: Family<0> = Family::gauge(
    6,
    "hcpflow_cluster_created_timestamp_seconds",
    "Unix time the cluster's creation started (earliest upstream creation time). Cached state refreshed in the background",
    &[],
);
pub const CREATION_COMPLETED: Family<0> = Family::gauge(
    7,
    "hcpflow_cluster_creation_completed_timestamp_seconds",
    "Unix time the cluster's creation completed (absent while in flight or failed). Cached state refreshed in the background",
    &[],
);
pub const NODE_POOL_REPLICAS: Family<2> = Family::gauge(
    8,
    "hcpflow_node_pool_replicas",
    "Node counts of each node pool by kind (desired, current, ready). Cached state refreshed in the background",
    &["node_pool", "kind"],
);
pub const CONTROL_PLANE_PODS: Family<1> = Family::gauge(
    9,
    "hcpflow_control_plane_pods",
    "Control-plane pods of the cluster by readiness. Cached state refreshed in the background",
    &["state"],
);
pub const HOP_FEEDBACK_ERROR: Family<3> = Family::gauge(
    10,
    "hcpflow_hop_feedback_error_info",
    "A Maestro bundle whose status feedback is absent (code no_status) or unreadable (code feedback_unreadable), value 1, while it is. Cached state refreshed in the background",
    &["hop", "object", "code"],
);

/// `node_pool` and `target_version` stay empty for cluster operations
/// (node pools and upgrades fill them, docs/design/15-operations.md §15.5).
pub const OPERATION_IN_FLIGHT: Family<3> = Family::gauge(
    11,
    "hcpflow_operation_in_flight",
    "One series per operation in flight on the cluster (value 1): create, delete, upgrade (target_version), and per node pool node_pool_create, node_pool_delete, node_pool_upgrade (target_version). Cached state refreshed in the background",
    &["operation", "node_pool", "target_version"],
);
pub const OPERATION_STARTED: Family<2> = Family::gauge(
    12,
    "hcpflow_operation_started_timestamp_seconds",
    "Unix time each operation in flight started (upstream time when known). Cached state refreshed in the background",
    &["operation", "node_pool"],
);

/// Where each day-2 operation in flight waits (docs/design/15b-operations.md §15.11): a
/// pool's own reading at the hop (its ARM resource, its Clusters Service
/// node pool, its NodePool), which the cluster's hop series do not show.
pub const OPERATION_WAITING: Family<6> = Family::gauge(
    13,
    "hcpflow_operation_waiting_since_timestamp_seconds",
    "Unix time each day-2 operation in flight (node_pool_create, node_pool_delete, node_pool_upgrade, upgrade) began waiting at the hop it waits at, with what that hop reads of the pool (phase, raw state, view). Cached state refreshed in the background",
    &["operation", "node_pool", "hop", "phase", "state", "via"],
);

/// When a day-2 operation failed, while the model keeps it: a pool's while
/// some hop still shows the pool, an upgrade's while its object still
/// reports the target (docs/design/15b-operations.md §15.11). Where it failed and why
/// (the pool's own error code, else the hop's raw state).
pub const OPERATION_FAILED: Family<5> = Family::gauge(
    14,
    "hcpflow_operation_failed_timestamp_seconds",
    "Unix time a day-2 operation (node_pool_create, node_pool_delete, node_pool_upgrade, upgrade) failed, while what it followed is still shown: the hop that failed it and its code. Cached state refreshed in the background",
    &["operation", "node_pool", "target_version", "hop", "code"],
);

pub(super) const FAMILY_COUNT: usize = 15;

/// Every per-cluster family in exposition order: the single source of the
/// names, types, helps and label sets (docs/metrics.md is checked against it).
pub(super) const FAMILIES: [FamilyDef; FAMILY_COUNT] = [
    CLUSTER_INFO.def(),
    HOP_PHASE.def(),
    HOP_CONDITION.def(),
    HOP_PHASE_SINCE.def(),
    HOP_STATUS_UPDATED.def(),
    HOP_FAILURE_INFO.def(),
    CLUSTER_CREATED.def(),
    CREATION_COMPLETED.def(),
    NODE_POOL_REPLICAS.def(),
    CONTROL_PLANE_PODS.def(),
    HOP_FEEDBACK_ERROR.def(),
    OPERATION_IN_FLIGHT.def(),
    OPERATION_STARTED.def(),
    OPERATION_WAITING.def(),
    OPERATION_FAILED.def(),
];

// Each family's id is its place in the list: the per-cluster layout is
// indexed by it.
const _: () = {
    let mut at = 0;
    while at < FAMILY_COUNT {
        assert!(FAMILIES[at].id.0 as usize == at);
        at += 1;
    }
};

/// Every per-cluster family, in exposition order.
pub fn all_families() -> &'static [FamilyDef] {
    &FAMILIES
}
