//! Per-hop budgets: the longest a hop may stay in one not-ready phase while
//! its creation is in flight (docs/design/03-timeline-model.md §3.5).
//!
//! One table serves the model (a never-Available HostedCluster Degraded past
//! its hop budget is `failed`), the published `hcpflow_hop_budget_seconds`,
//! the alert rules, `diagnose` and the UI, so they can never disagree.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::hop::Hop;
use super::operation::OperationKind;

/// A budget per hop. Defaults and why:
/// - 30m for `rp_frontend` and `clusters_service`: they stay
///   Provisioning/installing for the whole creation, and the SLO already
///   counts the creation late at 20m;
/// - 10m for `maestro_bundle` and `manifestwork`: delivery takes seconds when
///   the agent is healthy;
/// - 15m for `hosted_cluster`, `control_plane` and `managed_cluster`:
///   HyperShift reaches Available in about 5 minutes;
/// - 30m for `node_pool`: VMs must boot and join.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HopBudgets {
    #[serde(with = "humantime_serde")]
    pub rp_frontend: Duration,
    #[serde(with = "humantime_serde")]
    pub clusters_service: Duration,
    #[serde(with = "humantime_serde")]
    pub maestro_bundle: Duration,
    #[serde(with = "humantime_serde")]
    pub manifestwork: Duration,
    #[serde(with = "humantime_serde")]
    pub hosted_cluster: Duration,
    #[serde(with = "humantime_serde")]
    pub control_plane: Duration,
    #[serde(with = "humantime_serde")]
    pub managed_cluster: Duration,
    #[serde(with = "humantime_serde")]
    pub node_pool: Duration,
}

impl Default for HopBudgets {
    fn default() -> Self {
        const MIN: u64 = 60;
        HopBudgets {
            rp_frontend: Duration::from_secs(30 * MIN),
            clusters_service: Duration::from_secs(30 * MIN),
            maestro_bundle: Duration::from_secs(10 * MIN),
            manifestwork: Duration::from_secs(10 * MIN),
            hosted_cluster: Duration::from_secs(15 * MIN),
            control_plane: Duration::from_secs(15 * MIN),
            // The ManagedCluster waits from the same start as the
            // HostedCluster and joins only once it is Available (the
            // klusterlet needs the hosted API server): the HostedCluster's
            // 15m and five minutes to join, or every HostedCluster slow
            // within its own budget would be stuck here.
            managed_cluster: Duration::from_secs(20 * MIN),
            node_pool: Duration::from_secs(30 * MIN),
        }
    }
}

impl HopBudgets {
    /// A deletion's budgets, each measured from the hop's own start of
    /// deleting (docs/design/15-operations.md §15.4):
    /// - 20m for `node_pool`: machines drain and their VMs go;
    /// - 20m for `control_plane`: HyperShift destroys the cloud resources
    ///   (load balancers, DNS, disks) before it deletes the namespace;
    /// - 30m for `hosted_cluster`: its finalizer waits for both of those;
    /// - 15m for `managed_cluster`: detaching takes a few reconciles;
    /// - 45m for `manifestwork` and `maestro_bundle`: the agent lets them go
    ///   only once the HostedCluster is gone, so they carry its 30m;
    /// - 60m for `clusters_service` and `rp_frontend`: they wait for all of
    ///   it, and the SLO already counts the deletion late at 30m.
    ///
    /// The outer hops' budgets exceed the inner ones' so a deletion stuck
    /// inside is named there first, as a creation's is.
    pub fn deletion_defaults() -> HopBudgets {
        const MIN: u64 = 60;
        HopBudgets {
            rp_frontend: Duration::from_secs(60 * MIN),
            clusters_service: Duration::from_secs(60 * MIN),
            maestro_bundle: Duration::from_secs(45 * MIN),
            manifestwork: Duration::from_secs(45 * MIN),
            hosted_cluster: Duration::from_secs(30 * MIN),
            control_plane: Duration::from_secs(20 * MIN),
            managed_cluster: Duration::from_secs(15 * MIN),
            node_pool: Duration::from_secs(20 * MIN),
        }
    }

    /// An upgrade's budgets (docs/design/15-operations.md §15.10), each from when the
    /// hop began its part:
    /// - 75m for `hosted_cluster`: HyperShift rolls the control plane out in
    ///   minutes, but the history entry completes only when the cluster
    ///   version operator has applied the whole payload, some 30–60 minutes;
    /// - 60m for `node_pool`: a replace upgrade rolls every machine, one or
    ///   a few at a time, each booted, ignited and drained;
    /// - 90m for `rp_frontend` and `clusters_service`: they update from the
    ///   request until after the rollout, the HostedCluster's 75m and a
    ///   quarter of an hour for the backend to see it done.
    ///
    /// The other hops are on no upgrade's flow (their budgets are the
    /// creation's and are not published for upgrades).
    pub fn upgrade_defaults() -> HopBudgets {
        const MIN: u64 = 60;
        HopBudgets {
            rp_frontend: Duration::from_secs(90 * MIN),
            clusters_service: Duration::from_secs(90 * MIN),
            hosted_cluster: Duration::from_secs(75 * MIN),
            node_pool: Duration::from_secs(60 * MIN),
            ..HopBudgets::default()
        }
    }

    pub fn get(&self, hop: Hop) -> Duration {
        match hop {
            Hop::RpFrontend => self.rp_frontend,
            Hop::ClustersService => self.clusters_service,
            Hop::MaestroBundle => self.maestro_bundle,
            Hop::Manifestwork => self.manifestwork,
            Hop::HostedCluster => self.hosted_cluster,
            Hop::ControlPlane => self.control_plane,
            Hop::ManagedCluster => self.managed_cluster,
            Hop::NodePool => self.node_pool,
        }
    }

    pub fn set(&mut self, hop: Hop, budget: Duration) {
        let slot = match hop {
            Hop::RpFrontend => &mut self.rp_frontend,
            Hop::ClustersService => &mut self.clusters_service,
            Hop::MaestroBundle => &mut self.maestro_bundle,
            Hop::Manifestwork => &mut self.manifestwork,
            Hop::HostedCluster => &mut self.hosted_cluster,
            Hop::ControlPlane => &mut self.control_plane,
            Hop::ManagedCluster => &mut self.managed_cluster,
            Hop::NodePool => &mut self.node_pool,
        };
        *slot = budget;
    }

    /// Every budget divided by `speed` (the demo compresses time), never
    /// below a second so a budget stays longer than one poll.
    pub fn scaled(&self, speed: f64) -> HopBudgets {
        let mut out = *self;
        if speed > 0.0 {
            for hop in Hop::ALL {
                out.set(
                    hop,
                    self.get(hop).div_f64(speed).max(Duration::from_secs(1)),
                );
            }
        }
        out
    }

    pub fn iter(&self) -> impl Iterator<Item = (Hop, Duration)> + '_ {
        Hop::ALL.into_iter().map(|hop| (hop, self.get(hop)))
    }
}

/// The hop budgets of every operation kind: what the verdict, the UI and
/// `diagnose` judge an operation's hops by (docs/design/15-operations.md §15.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OperationBudgets {
    pub create: HopBudgets,
    pub delete: HopBudgets,
    pub upgrade: HopBudgets,
}

impl Default for OperationBudgets {
    fn default() -> Self {
        OperationBudgets {
            create: HopBudgets::default(),
            delete: HopBudgets::deletion_defaults(),
            upgrade: HopBudgets::upgrade_defaults(),
        }
    }
}

impl OperationBudgets {
    pub fn of(&self, kind: OperationKind) -> &HopBudgets {
        // A node pool's operations are judged at its NodePool by the
        // cluster's own budget for that hop and kind of change
        // (docs/design/15-operations.md §15.9).
        match kind {
            OperationKind::Create | OperationKind::NodePoolCreate => &self.create,
            OperationKind::Delete | OperationKind::NodePoolDelete => &self.delete,
            OperationKind::Upgrade | OperationKind::NodePoolUpgrade => &self.upgrade,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_documented_table_and_scale_with_a_floor() {
        let b = HopBudgets::default();
        assert_eq!(b.get(Hop::HostedCluster), Duration::from_secs(900));
        assert_eq!(b.get(Hop::MaestroBundle), Duration::from_secs(600));
        assert_eq!(b.get(Hop::NodePool), Duration::from_secs(1800));
        let fast = b.scaled(60.0);
        assert_eq!(fast.get(Hop::HostedCluster), Duration::from_secs(15));
        assert_eq!(
            b.scaled(100_000.0).get(Hop::Manifestwork),
            Duration::from_secs(1)
        );
        assert_eq!(b.scaled(0.0), b);
    }
}
