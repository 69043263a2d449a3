//! The closed vocabularies of the timeline: hops, phases, views, outcomes.
//!
//! Every one of these becomes a label value, so they are enums: the type bounds
//! cardinality (docs/design/05-metrics.md §5.3).

use serde::{Deserialize, Serialize};

/// One step on the path of a creation (docs/design/01-overview.md §1.1), in path order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hop {
    RpFrontend,
    ClustersService,
    MaestroBundle,
    Manifestwork,
    HostedCluster,
    ControlPlane,
    ManagedCluster,
    NodePool,
}

impl Hop {
    pub const ALL: [Hop; 8] = [
        Hop::RpFrontend,
        Hop::ClustersService,
        Hop::MaestroBundle,
        Hop::Manifestwork,
        Hop::HostedCluster,
        Hop::ControlPlane,
        Hop::ManagedCluster,
        Hop::NodePool,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Hop::RpFrontend => "rp_frontend",
            Hop::ClustersService => "clusters_service",
            Hop::MaestroBundle => "maestro_bundle",
            Hop::Manifestwork => "manifestwork",
            Hop::HostedCluster => "hosted_cluster",
            Hop::ControlPlane => "control_plane",
            Hop::ManagedCluster => "managed_cluster",
            Hop::NodePool => "node_pool",
        }
    }

    pub fn parse(s: &str) -> Option<Hop> {
        Hop::ALL.into_iter().find(|h| h.as_str() == s)
    }

    /// Position on the path; used to find "the previous hop" when a hop's own
    /// object has no creation time.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for Hop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The normalized state of a hop. Upstream values the exporter does not know
/// map to `Unknown` and are counted, never dropped.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Default, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Pending,
    Progressing,
    Ready,
    Failed,
    Deleting,
    /// Also the default: a view nobody has classified yet.
    #[default]
    Unknown,
}

impl Phase {
    pub const ALL: [Phase; 6] = [
        Phase::Pending,
        Phase::Progressing,
        Phase::Ready,
        Phase::Failed,
        Phase::Deleting,
        Phase::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "pending",
            Phase::Progressing => "progressing",
            Phase::Ready => "ready",
            Phase::Failed => "failed",
            Phase::Deleting => "deleting",
            Phase::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a hop's state was read: from its own API, or from the status feedback
/// a Maestro bundle carries (docs/design/02-hops-and-phases.md §2.6). The direct view wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    Direct,
    Maestro,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Direct => "direct",
            Via::Maestro => "maestro",
        }
    }
}

/// A Kubernetes-style condition status, lower-cased for labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    /// Upstream spells it `True`/`False`/`Unknown`; anything else is `Unknown`.
    pub fn from_upstream(s: &str) -> ConditionStatus {
        match s {
            "True" | "true" => ConditionStatus::True,
            "False" | "false" => ConditionStatus::False,
            _ => ConditionStatus::Unknown,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "true",
            ConditionStatus::False => "false",
            ConditionStatus::Unknown => "unknown",
        }
    }
}

/// How a creation, or one hop of it, ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Succeeded,
    Failed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
        }
    }
}

/// The latency/success SLO verdict of one creation, counted exactly once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SloOutcome {
    Good,
    Late,
    Failed,
}

impl SloOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            SloOutcome::Good => "good",
            SloOutcome::Late => "late",
            SloOutcome::Failed => "failed",
        }
    }
}
