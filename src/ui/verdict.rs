//! The one place the UI learns a cluster's verdict (ready, in progress, at
//! risk, stuck, degraded, failed, deleted) and why.
//!
//! The verdict is the model's (docs/design/03-timeline-model.md §3.9): the UI never judges a
//! creation itself, so the pages, the JSON, `diagnose` and the alert rules
//! cannot disagree.

use crate::api::Judge;
use crate::model::Timeline;
pub use crate::model::{Status, Verdict};

/// Every status, in the order the fleet page counts them.
pub const STATUSES: [Status; 7] = Status::ALL;

/// The model's verdict on `timeline`, judged as the JSON judges it.
pub fn verdict_of(timeline: &Timeline, judge: &Judge) -> Verdict {
    judge.verdict(timeline)
}
