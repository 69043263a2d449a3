//! Families only the kube watches feed: the MultiClusterEngine phase and agent
//! counts of self-managed hubs (sparse like `hcpflow_hop_phase`: only the
//! current phase has a series), and watch restarts by reason.

use std::collections::BTreeMap;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::mapping::AgentFacts;

/// `status.phase` values of a MultiClusterEngine (docs/design/10-upstream-facts.md §10.9).
pub const MCE_PHASES: &[&str] = &[
    "Progressing",
    "Paused",
    "Available",
    "Uninstalling",
    "Error",
    "Unimplemented",
    "Updating",
];

/// Agent `status.progress.currentStage` values (assisted-service HostStage).
pub const AGENT_STAGES: &[&str] = &[
    "Starting installation",
    "Waiting for control plane",
    "Waiting for bootkube",
    "Waiting for controller",
    "Installing",
    "Writing image to disk",
    "Rebooting",
    "Waiting for ignition",
    "Configuring",
    "Joined",
    "Done",
    "Failed",
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MceLabels {
    pub mgmt_cluster: String,
    pub phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct AgentLabels {
    pub mgmt_cluster: String,
    pub approved: String,
    pub stage: String,
}

/// Bounded label value of an MCE phase: known, `none` when not reported
/// yet, else `other` (and the caller counts the unknown value).
pub fn mce_phase_label(phase: Option<&str>) -> (&str, bool) {
    match phase {
        None | Some("") => ("none", true),
        Some(p) => match MCE_PHASES.iter().find(|k| **k == p) {
            Some(k) => (k, true),
            None => ("other", false),
        },
    }
}

/// Bounded label value of an agent stage, as for [`mce_phase_label`].
pub fn agent_stage_label(stage: &str) -> (&str, bool) {
    if stage.is_empty() {
        return ("none", true);
    }
    match AGENT_STAGES.iter().find(|k| **k == stage) {
        Some(k) => (k, true),
        None => ("other", false),
    }
}

/// Why a kind's watch was restarted with a fresh relist.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum RestartReason {
    /// Nothing arrived, not even a bookmark, within `idle_timeout`.
    idle,
    /// A list or watch failed (connection, status, decode).
    error,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RestartLabels {
    pub source: String,
    pub reason: RestartReason,
}

#[derive(Clone, Debug, Default)]
pub struct KubeMetrics {
    pub mce_phase: Family<MceLabels, Gauge>,
    pub agents: Family<AgentLabels, Gauge>,
    /// Bounded: one series per source and reason.
    pub watch_restarts: Family<RestartLabels, Counter>,
}

impl KubeMetrics {
    pub fn register(registry: &mut Registry) -> KubeMetrics {
        let metrics = KubeMetrics::default();
        registry.register(
            "hcpflow_mce_phase",
            "Current status.phase of the management cluster's MultiClusterEngine (value 1; other for an unknown phase, none before the first report). Cached state refreshed in the background",
            crate::metrics::exporter::AlwaysDescribed(metrics.mce_phase.clone()),
        );
        registry.register(
            "hcpflow_agents",
            "Agents (agent-install.openshift.io) on the management cluster by approval and installation stage (other for an unknown stage). Cached state refreshed in the background",
            crate::metrics::exporter::AlwaysDescribed(metrics.agents.clone()),
        );
        registry.register(
            "hcpflow_watch_restarts",
            "Kubernetes watches restarted with a fresh relist, by reason: idle (nothing, not even a bookmark, within idle_timeout) or error (a failed list or watch)",
            crate::metrics::exporter::AlwaysDescribed(metrics.watch_restarts.clone()),
        );
        metrics
    }

    pub fn restarted(&self, source: &str, reason: RestartReason) {
        self.watch_restarts
            .get_or_create(&RestartLabels {
                source: source.to_string(),
                reason,
            })
            .inc();
    }

    /// Show this phase (or none, when the MCE is gone) for `mgmt_cluster`.
    pub fn set_mce_phase(&self, mgmt_cluster: &str, phase: Option<&str>) {
        let keep = phase.map(|p| MceLabels {
            mgmt_cluster: mgmt_cluster.to_string(),
            phase: p.to_string(),
        });
        let stale: Vec<MceLabels> = ["none", "other"]
            .iter()
            .chain(MCE_PHASES)
            .map(|p| MceLabels {
                mgmt_cluster: mgmt_cluster.to_string(),
                phase: p.to_string(),
            })
            .filter(|l| Some(l) != keep.as_ref())
            .collect();
        for labels in stale {
            self.mce_phase.remove(&labels);
        }
        if let Some(labels) = keep {
            self.mce_phase.get_or_create(&labels).set(1);
        }
    }

    /// Replace `mgmt_cluster`'s agent counts; returns the stages that were
    /// not recognised (for `hcpflow_unknown_values_total`).
    pub fn set_agents<'a>(
        &self,
        mgmt_cluster: &str,
        agents: impl Iterator<Item = &'a AgentFacts>,
    ) -> Vec<String> {
        let mut counts: BTreeMap<AgentLabels, i64> = BTreeMap::new();
        let mut unknown = Vec::new();
        for agent in agents {
            let (stage, known) = agent_stage_label(&agent.stage);
            if !known {
                unknown.push(agent.stage.clone());
            }
            *counts
                .entry(AgentLabels {
                    mgmt_cluster: mgmt_cluster.to_string(),
                    approved: agent.approved.to_string(),
                    stage: stage.to_string(),
                })
                .or_default() += 1;
        }
        for approved in ["true", "false"] {
            for stage in AGENT_STAGES.iter().chain(&["none", "other"]) {
                let labels = AgentLabels {
                    mgmt_cluster: mgmt_cluster.to_string(),
                    approved: approved.to_string(),
                    stage: stage.to_string(),
                };
                if !counts.contains_key(&labels) {
                    self.agents.remove(&labels);
                }
            }
        }
        for (labels, n) in counts {
            self.agents.get_or_create(&labels).set(n);
        }
        unknown
    }
}
