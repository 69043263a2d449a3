//! A cluster's ended operations, kept for "what happened to this cluster
//! this week" (docs/design.md §15.12): each operation that succeeded or
//! failed, with its hops' times, bounded by a retention and a count, and
//! kept across restarts in the state store.

use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::hop::{Hop, Outcome, SloOutcome};
use super::operation::OperationKind;

/// ARM keeps operation records for seven days; so does the history.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
/// A week of a busy cluster's operations (a creation, a few pools, an
/// upgrade and its pools') fits many times over.
pub const DEFAULT_MAX_PER_CLUSTER: usize = 20;

/// How much history each cluster keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistoryLimits {
    pub retention: Duration,
    pub max_per_cluster: usize,
}

impl Default for HistoryLimits {
    fn default() -> Self {
        HistoryLimits {
            retention: DEFAULT_RETENTION,
            max_per_cluster: DEFAULT_MAX_PER_CLUSTER,
        }
    }
}

/// One ended operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EndedOperation {
    pub operation: OperationKind,
    /// What its key names after the kind: the pool, the target version, or
    /// both (docs/design.md §15.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Box<str>>,
    pub started_at: Timestamp,
    pub ended_at: Timestamp,
    pub outcome: Outcome,
    /// Its one SLO verdict, when this instance gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloOutcome>,
    /// Each hop it passed: from the hop's start to its end there (none when
    /// the operation ended before the hop did).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hops: Vec<EndedHop>,
}

/// One hop of an ended operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndedHop {
    pub hop: Hop,
    pub started_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
}

/// Add `ended` to `history`, oldest first, and drop what the limits no
/// longer keep at `now`: entries that ended before the retention, then the
/// oldest past the count. The timeline's field, boxed to stay one pointer
/// wide on the many timelines without history.
#[allow(clippy::box_collection)]
pub fn keep(
    history: &mut Option<Box<Vec<EndedOperation>>>,
    ended: EndedOperation,
    limits: HistoryLimits,
    now: Timestamp,
) {
    if limits.max_per_cluster == 0 {
        return;
    }
    let entries = history.get_or_insert_with(Default::default);
    entries.push(ended);
    prune(entries, limits, now);
}

/// Drop what `limits` no longer keep at `now`.
pub fn prune(entries: &mut Vec<EndedOperation>, limits: HistoryLimits, now: Timestamp) {
    let cutoff = jiff::SignedDuration::try_from(limits.retention)
        .ok()
        .and_then(|r| now.checked_sub(r).ok());
    if let Some(cutoff) = cutoff {
        entries.retain(|e| e.ended_at >= cutoff);
    }
    entries.sort_by_key(|e| e.ended_at);
    let excess = entries.len().saturating_sub(limits.max_per_cluster);
    entries.drain(..excess);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests: a panic is the failure report

    use super::*;

    fn t(hours: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + hours * 3600).unwrap()
    }

    fn ended(at: Timestamp) -> EndedOperation {
        EndedOperation {
            operation: OperationKind::NodePoolCreate,
            subject: Some("np-1".into()),
            started_at: at,
            ended_at: at,
            outcome: Outcome::Succeeded,
            slo: Some(SloOutcome::Good),
            hops: Vec::new(),
        }
    }

    #[test]
    fn it_keeps_a_week_and_at_most_the_count_oldest_first() {
        let limits = HistoryLimits {
            retention: Duration::from_secs(7 * 24 * 3600),
            max_per_cluster: 3,
        };
        let mut history = None;
        for h in [0, 10, 20] {
            keep(&mut history, ended(t(h)), limits, t(h));
        }
        assert_eq!(history.as_ref().unwrap().len(), 3);
        // A fourth: the oldest goes.
        keep(&mut history, ended(t(30)), limits, t(30));
        let at: Vec<Timestamp> = history
            .as_ref()
            .unwrap()
            .iter()
            .map(|e| e.ended_at)
            .collect();
        assert_eq!(at, vec![t(10), t(20), t(30)]);
        // Eight days later: only what ended within the week stays.
        keep(&mut history, ended(t(30 + 24 * 7)), limits, t(30 + 24 * 7));
        let at: Vec<Timestamp> = history
            .as_ref()
            .unwrap()
            .iter()
            .map(|e| e.ended_at)
            .collect();
        assert_eq!(at, vec![t(30), t(30 + 24 * 7)]);
    }

    #[test]
    fn a_count_of_zero_keeps_nothing() {
        let limits = HistoryLimits {
            max_per_cluster: 0,
            ..HistoryLimits::default()
        };
        let mut history = None;
        keep(&mut history, ended(t(0)), limits, t(0));
        assert!(history.is_none());
    }
}
