//! What a restart would otherwise lose: the times only the exporter observed
//! and the verdicts it already gave (docs/design/03-timeline-model.md §3.8).
//!
//! Upstream times need no memory — they read the same after a restart. What
//! the exporter saw itself (a phase entered with no upstream time behind it,
//! a hop's first readiness, a creation's verdict) is kept here, persisted by
//! the state store and handed back to the model at start. Restoring only
//! ever re-uses a remembered time for state that reads the same as when it
//! was remembered; anything that changed is new and gets a new time.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::hop::{Hop, Phase, SloOutcome, Via};
use super::operation::OperationKind;

/// The remembered part of every cluster the model tracks, by cluster id.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub clusters: BTreeMap<String, ClusterMemory>,
}

impl Memory {
    pub fn len(&self) -> usize {
        self.clusters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty()
    }
}

/// One cluster's remembered times and verdicts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterMemory {
    /// The creation start, kept only while it is the exporter's own
    /// observation (an upstream creation time reads the same after a restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<Timestamp>,
    /// The SLO verdict once given: never given twice, never changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloOutcome>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hops: Vec<HopMemory>,
    /// The deletion once it began: its start (upstream or observed), its
    /// verdict and each hop's times, so a restart mid-deletion neither loses
    /// it nor counts it twice (docs/design/15-operations.md §15.8). Absent in files of
    /// version 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion: Option<DeletionMemory>,
    /// Its day-2 operations in flight (node pools' creations and removals,
    /// upgrades): a restart neither starts them again nor gives a verdict
    /// twice (docs/design/15-operations.md §15.9, §15.10). Still version 2: a file
    /// without it reads as none, an older exporter skips it, and the name
    /// it had when it held node pools only still reads.
    #[serde(
        default,
        alias = "pool_operations",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub day2_operations: Vec<Day2OperationMemory>,
    /// Its ended operations (docs/design/15b-operations.md §15.12), so a restart keeps
    /// "what happened to this cluster this week". Still version 2: absent
    /// reads as none. Shared with the timeline, not copied.
    #[serde(default, skip_serializing_if = "super::history::History::is_empty")]
    pub history: super::history::History,
}

/// A day-2 operation as a restart must find it again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Day2OperationMemory {
    pub operation: OperationKind,
    /// What its key names after the kind: the pool, the target version, or
    /// `<pool>/<version>` (docs/design/15-operations.md §15.2).
    #[serde(alias = "node_pool")]
    pub subject: String,
    pub started_at: Timestamp,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub started_observed: bool,
    /// Given already when it passed its target in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloOutcome>,
    /// Followed from a first sync past its target: its end is not counted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub uncounted: bool,
}

/// A deletion as a restart must find it again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeletionMemory {
    pub started_at: Timestamp,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub started_observed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloOutcome>,
    /// Hops the deletion reached: when each began and, once gone, when.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hops: Vec<DeletionHopMemory>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeletionHopMemory {
    pub hop: Hop,
    pub started_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done_at: Option<Timestamp>,
}

/// One hop's remembered aggregate and the objects whose phase time was observed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HopMemory {
    pub hop: Hop,
    pub phase: Phase,
    /// When the aggregate phase was entered.
    pub since: Timestamp,
    /// True when `since` was the exporter's observation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub since_observed: bool,
    /// The first time the hop became ready (kept when it regressed since).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_at: Option<Timestamp>,
    /// The hop's duration was recorded already.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ended: bool,
    /// Its end through Maestro's feedback was reported already.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ended_via_maestro: bool,
    /// Objects whose phase time only the exporter observed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<ObjectMemory>,
}

/// An object whose phase time was observed by the exporter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObjectMemory {
    pub via: Via,
    pub object: String,
    pub phase: Phase,
    /// The raw state, so a state change within one phase is not mistaken
    /// for the same reading.
    pub state: String,
    pub since: Timestamp,
}
