//! What the model is told (targets, budgets, scope, ownership) and which
//! clusters an instance follows: the shard a cluster id falls in, and the
//! provisional ids of RP resources waiting for their join (docs/design/04-identities-and-joins.md
//! §4.4, §8).

use super::*;

/// What the model needs to know of the configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// How many ended operations each cluster keeps, and for how long
    /// (docs/design/15b-operations.md §15.12).
    pub history: crate::HistoryLimits,
    /// Each operation kind's latency target: a creation completing within
    /// its target is good (docs/design/06-slos-and-alerts.md §6.1), and so on
    /// for every kind (docs/design/15-operations.md).
    pub targets: OperationTargets,
    /// Hops whose readiness completes a creation; all must be ready.
    pub terminal_hops: Vec<Hop>,
    /// `(index, total)`: keep only clusters whose stable hash falls here.
    pub shard: Option<(u32, u32)>,
    /// How long each hop may stay not ready; time-driven phases use them.
    pub hop_budgets: HopBudgets,
    /// How long each hop of a deletion may stay deleting.
    pub delete_budgets: HopBudgets,
    /// How long an upgrade may wait at its hop (`hosted_cluster` for the
    /// control plane's, `node_pool` for a pool's).
    pub upgrade_budgets: HopBudgets,
    /// Which creations this instance counts (docs/design/08-scopes-and-scale-out.md §8.2).
    pub ownership: Ownership,
    /// The RP frontend is read: a Clusters Service cluster without an RP
    /// resource is then worth flagging (docs/design/04-identities-and-joins.md §4.4).
    pub rp_in_scope: bool,
    /// Management clusters that are self-managed MCE hubs: their creations
    /// are never joined by the RP, so it is no terminal hop of theirs.
    pub self_managed_hubs: Vec<String>,
}

impl ModelConfig {
    /// The latency target of an operation kind.
    pub fn target(&self, kind: OperationKind) -> Duration {
        self.targets.get(kind)
    }

    /// Every operation kind's hop budgets.
    pub fn budgets(&self) -> OperationBudgets {
        OperationBudgets {
            create: self.hop_budgets,
            delete: self.delete_budgets,
            upgrade: self.upgrade_budgets,
        }
    }
}

/// Each operation kind's latency target, keyed by the kind: a new kind is a
/// new entry of [`OperationKind::ALL`] and its flow's default, not a new
/// field (docs/design/15-operations.md §15.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OperationTargets([Duration; OperationKind::ALL.len()]);

impl OperationTargets {
    /// Each kind's target as `target` gives it.
    pub fn from_fn(target: impl Fn(OperationKind) -> Duration) -> OperationTargets {
        OperationTargets(OperationKind::ALL.map(target))
    }

    pub fn get(&self, kind: OperationKind) -> Duration {
        self.0[kind.index()]
    }

    /// These targets with `kind`'s set to `target`.
    pub fn with(mut self, kind: OperationKind, target: Duration) -> OperationTargets {
        self.0[kind.index()] = target;
        self
    }
}

impl Default for OperationTargets {
    /// Each kind's flow's default.
    fn default() -> Self {
        OperationTargets::from_fn(|kind| kind.flow().default_target)
    }
}

/// Which timelines feed this instance's SLO events and creation durations,
/// decided from its configuration alone so that instances never talk to each
/// other and sums over instances count each creation once (docs/design/08-scopes-and-scale-out.md §8.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ownership {
    /// RP resources tracked under a provisional id (only an instance that
    /// reads the RP has them).
    pub provisional: bool,
    /// Every other timeline (keyed by Clusters Service id or, self-managed,
    /// by the HostedCluster's id).
    pub joined: bool,
}

impl Ownership {
    pub const ALL: Ownership = Ownership {
        provisional: true,
        joined: true,
    };

    pub(super) fn owns(&self, cluster_id: &str) -> bool {
        if is_provisional(cluster_id) {
            self.provisional
        } else {
            self.joined
        }
    }
}

impl Default for Ownership {
    fn default() -> Self {
        Ownership::ALL
    }
}

/// The prefix of provisional cluster ids. Clusters Service ids are
/// lower-case alphanumerics and self-managed ids `<namespace>/<name>` (a
/// namespace has no `:`), so no real id starts with it.
pub const PROVISIONAL_PREFIX: &str = "arm:";

/// The `cluster_id` an ARM resource is tracked under until Clusters Service
/// shows its cluster: `arm:` + the lower-cased ARM resource id
/// (docs/design/04-identities-and-joins.md §4.4).
pub fn provisional_cluster_id(resource_id: &str) -> String {
    format!("{PROVISIONAL_PREFIX}{}", resource_id.to_ascii_lowercase())
}

/// Whether a cluster id is a provisional one (an RP resource not joined).
pub fn is_provisional(cluster_id: &str) -> bool {
    cluster_id.starts_with(PROVISIONAL_PREFIX)
}

/// How a cluster's RP resource and Clusters Service cluster relate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Join {
    /// Both seen and joined.
    Joined,
    /// An RP resource Clusters Service does not show (yet): provisional id.
    RpOnly,
    /// A Clusters Service cluster with no RP resource while the RP is read.
    CsWithoutRp,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            targets: OperationTargets::default(),
            terminal_hops: vec![Hop::HostedCluster],
            shard: None,
            hop_budgets: HopBudgets::default(),
            delete_budgets: HopBudgets::deletion_defaults(),
            upgrade_budgets: HopBudgets::upgrade_defaults(),
            ownership: Ownership::ALL,
            rp_in_scope: false,
            self_managed_hubs: Vec::new(),
            history: crate::HistoryLimits::default(),
        }
    }
}

/// Whether the shard `(index, total)` follows this cluster; no shard (or
/// one of one) follows every cluster.
pub fn follows(shard: Option<(u32, u32)>, cluster_id: &str) -> bool {
    match shard {
        Some((index, total)) if total > 1 => shard_of(cluster_id, total) == index,
        _ => true,
    }
}

/// The shard a cluster belongs to: the first 8 bytes of SHA-256 of its id,
/// modulo the shard count. Stable across versions, instances and restarts.
pub fn shard_of(cluster_id: &str, total: u32) -> u32 {
    let digest = Sha256::digest(cluster_id.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(first) % u64::from(total.max(1))) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_keyed_by_kind_with_each_flows_default() {
        let defaults = OperationTargets::default();
        for kind in OperationKind::ALL {
            assert_eq!(defaults.get(kind), kind.flow().default_target, "{kind}");
            assert_eq!(ModelConfig::default().target(kind), defaults.get(kind));
        }
        let seven = Duration::from_secs(7);
        let set = defaults.with(OperationKind::Upgrade, seven);
        for kind in OperationKind::ALL {
            let want = if kind == OperationKind::Upgrade {
                seven
            } else {
                defaults.get(kind)
            };
            assert_eq!(set.get(kind), want, "{kind}");
        }
    }
}
