//! The one place the UI learns a creation's verdict (ready, in progress, at
//! risk, stuck, failed, deleted) and why.
//!
//! The verdict is the model's to give (docs/design.md §3.5): the UI never
//! judges a creation itself, so the fleet page, the list endpoint and the
//! alert rules can never disagree. Until the model gives one, a row carries
//! no verdict and its status is only what its outcome says.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::model::{CreationOutcome, Timeline};

/// Where a creation stands, as the fleet page marks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ready,
    InProgress,
    AtRisk,
    Stuck,
    Failed,
    Deleted,
}

impl Status {
    pub const ALL: [Status; 6] = [
        Status::Ready,
        Status::InProgress,
        Status::AtRisk,
        Status::Stuck,
        Status::Failed,
        Status::Deleted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ready => "ready",
            Status::InProgress => "in_progress",
            Status::AtRisk => "at_risk",
            Status::Stuck => "stuck",
            Status::Failed => "failed",
            Status::Deleted => "deleted",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// What the outcome alone says, for a creation without a verdict.
    pub fn of_outcome(outcome: CreationOutcome) -> Status {
        match outcome {
            CreationOutcome::InFlight => Status::InProgress,
            CreationOutcome::Succeeded => Status::Ready,
            CreationOutcome::Failed => Status::Failed,
            CreationOutcome::Deleted => Status::Deleted,
        }
    }
}

/// The verdict as the timeline JSON carries it (`verdict` in
/// `/api/v1/clusters`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub status: Status,
    pub hop: Option<String>,
    pub since: Option<Timestamp>,
    pub elapsed_seconds: Option<f64>,
    pub budget_seconds: Option<f64>,
    pub p95_seconds: Option<f64>,
    pub reason: String,
}

/// The model's verdict on `timeline`; `None` while the model gives none.
pub fn verdict_of(_timeline: &Timeline) -> Option<Verdict> {
    None
}

/// The status a row shows: the verdict's, else the outcome's.
pub fn status_of(outcome: CreationOutcome, verdict: Option<&Verdict>) -> Status {
    verdict.map_or_else(|| Status::of_outcome(outcome), |v| v.status)
}
