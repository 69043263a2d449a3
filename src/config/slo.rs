//! `slo`: the latency target and per-hop budgets of each operation kind
//! (docs/design/03-timeline-model.md §3.5, docs/design/15-operations.md), with
//! each kind's own defaults.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::{Hop, HopBudgets};

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SloConfig {
    /// A creation is good when it completes within this (docs/design/06-slos-and-alerts.md §6.1).
    #[serde(with = "humantime_serde")]
    pub creation_target: Duration,
    /// Hops whose readiness completes a creation. Empty: derived from the
    /// sources in scope (hosted_cluster when visible, plus rp_frontend when
    /// the RP is in scope; clusters_service when neither is).
    pub terminal_hops: Vec<Hop>,
    /// How long each hop may stay not ready (docs/design/03-timeline-model.md §3.5); a
    /// never-Available HostedCluster Degraded past its budget is failed.
    pub hop_budgets: HopBudgets,
    /// Targets and budgets of the operations after creation (creation's are
    /// the two keys above): `slo.operations.delete` (docs/design/15-operations.md §15.4).
    pub operations: OperationsSloConfig,
}

/// `slo.operations`: one section per operation kind other than creation.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct OperationsSloConfig {
    pub delete: OperationSloConfig,
    /// A node pool's creation; its NodePool's budget is `hop_budgets.node_pool`.
    pub node_pool_create: PoolOperationSloConfig,
    /// A node pool's removal; its budget is `delete.hop_budgets.node_pool`.
    pub node_pool_delete: PoolOperationSloConfig,
    /// A control-plane upgrade (docs/design/15-operations.md §15.10); its hop is
    /// `hosted_cluster`.
    pub upgrade: UpgradeSloConfig,
    /// A node pool's upgrade; its budget is `upgrade.hop_budgets.node_pool`.
    pub node_pool_upgrade: PoolOperationSloConfig,
}

/// A node pool operation's latency target. Its one hop, the NodePool, is
/// judged by the cluster's own budget for that hop (docs/design/15-operations.md §15.9).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PoolOperationSloConfig {
    #[serde(with = "humantime_serde")]
    pub target: Duration,
}

impl PoolOperationSloConfig {
    fn create() -> PoolOperationSloConfig {
        PoolOperationSloConfig {
            target: crate::model::DEFAULT_NODE_POOL_CREATE_TARGET,
        }
    }

    fn delete() -> PoolOperationSloConfig {
        PoolOperationSloConfig {
            target: crate::model::DEFAULT_NODE_POOL_DELETE_TARGET,
        }
    }

    fn upgrade() -> PoolOperationSloConfig {
        PoolOperationSloConfig {
            target: crate::model::DEFAULT_NODE_POOL_UPGRADE_TARGET,
        }
    }
}

impl Default for OperationsSloConfig {
    fn default() -> Self {
        OperationsSloConfig {
            delete: OperationSloConfig::default(),
            node_pool_create: PoolOperationSloConfig::create(),
            node_pool_delete: PoolOperationSloConfig::delete(),
            upgrade: UpgradeSloConfig::default(),
            node_pool_upgrade: PoolOperationSloConfig::upgrade(),
        }
    }
}

/// One operation kind's latency target and per-hop budgets. Budgets not
/// given keep the kind's own defaults (not creation's).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct OperationSloConfig {
    #[serde(with = "humantime_serde")]
    pub target: Duration,
    pub hop_budgets: std::collections::BTreeMap<Hop, humantime_serde::Serde<Duration>>,
}

impl Default for OperationSloConfig {
    fn default() -> Self {
        OperationSloConfig {
            target: Duration::from_secs(1800),
            hop_budgets: Default::default(),
        }
    }
}

impl OperationSloConfig {
    /// The deletion's budgets: its defaults with what is configured over them.
    pub fn delete_budgets(&self) -> HopBudgets {
        over(&self.hop_budgets, HopBudgets::deletion_defaults())
    }
}

/// A control-plane upgrade's latency target and budgets, as
/// [`OperationSloConfig`] with the upgrade's own defaults (an hour; 75m at
/// `hosted_cluster`, 60m at `node_pool` for its pools' upgrades).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct UpgradeSloConfig {
    #[serde(with = "humantime_serde")]
    pub target: Duration,
    pub hop_budgets: std::collections::BTreeMap<Hop, humantime_serde::Serde<Duration>>,
}

impl Default for UpgradeSloConfig {
    fn default() -> Self {
        UpgradeSloConfig {
            target: crate::model::DEFAULT_UPGRADE_TARGET,
            hop_budgets: Default::default(),
        }
    }
}

impl UpgradeSloConfig {
    /// The upgrade's budgets: its defaults with what is configured over them.
    pub fn upgrade_budgets(&self) -> HopBudgets {
        over(&self.hop_budgets, HopBudgets::upgrade_defaults())
    }
}

fn over(
    configured: &std::collections::BTreeMap<Hop, humantime_serde::Serde<Duration>>,
    mut budgets: HopBudgets,
) -> HopBudgets {
    for (hop, budget) in configured {
        budgets.set(*hop, **budget);
    }
    budgets
}

impl Default for SloConfig {
    fn default() -> Self {
        SloConfig {
            creation_target: Duration::from_secs(1200),
            terminal_hops: Vec::new(),
            hop_budgets: HopBudgets::default(),
            operations: OperationsSloConfig::default(),
        }
    }
}
