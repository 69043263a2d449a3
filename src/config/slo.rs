//! `slo`: the latency target and per-hop budgets of each operation kind
//! (docs/design/03-timeline-model.md §3.5, docs/design/15-operations.md), with
//! each kind's own defaults.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::{Hop, HopBudgets, OperationKind};

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
            target: crate::model::DEFAULT_DELETE_TARGET,
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

impl SloConfig {
    /// The latency target configured for `kind`: `creation_target` for a
    /// creation, `operations.<kind>.target` for the others.
    pub fn target(&self, kind: OperationKind) -> Duration {
        let operations = &self.operations;
        match kind {
            OperationKind::Create => self.creation_target,
            OperationKind::Delete => operations.delete.target,
            OperationKind::NodePoolCreate => operations.node_pool_create.target,
            OperationKind::NodePoolDelete => operations.node_pool_delete.target,
            OperationKind::Upgrade => operations.upgrade.target,
            OperationKind::NodePoolUpgrade => operations.node_pool_upgrade.target,
        }
    }
}

impl Default for SloConfig {
    fn default() -> Self {
        SloConfig {
            creation_target: crate::model::DEFAULT_CREATION_TARGET,
            terminal_hops: Vec::new(),
            hop_budgets: HopBudgets::default(),
            operations: OperationsSloConfig::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind's target comes from its own key, and a kind not configured
    /// keeps its flow's default (the model's table), not creation's.
    #[test]
    fn each_kind_reads_its_own_target_and_defaults_to_its_flows() {
        let defaults = SloConfig::default();
        for kind in OperationKind::ALL {
            assert_eq!(defaults.target(kind), kind.flow().default_target, "{kind}");
        }
        let configured: SloConfig = serde_json::from_value(serde_json::json!({
            "creation_target": "1m",
            "operations": {
                "delete": {"target": "2m"},
                "node_pool_create": {"target": "3m"},
                "node_pool_delete": {"target": "4m"},
                "upgrade": {"target": "5m"},
                "node_pool_upgrade": {"target": "6m"},
            }
        }))
        .expect("a valid slo section");
        let minutes: Vec<u64> = OperationKind::ALL
            .map(|kind| configured.target(kind).as_secs() / 60)
            .to_vec();
        assert_eq!(minutes, [1, 2, 3, 4, 5, 6]);
    }
}
