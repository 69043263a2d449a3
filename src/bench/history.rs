//! A week of operation history for the bench's exporter to hold
//! (docs/design/15b-operations.md §15.12): written into its state directory before it
//! starts, so it restores every cluster's history through the same code a
//! restarted exporter runs, and the bench measures what holding it costs.
//!
//! The bench's world runs for minutes, not a week; what a week leaves is
//! written instead: per cluster, a busy week of every operation kind a
//! live cluster can have ended (its
//! creation, two node pools added and one removed, a control-plane
//! upgrade and three node pools' upgrades: eight operations), each with
//! every hop of its flow timed. That is more than the demo's mix gives a
//! typical cluster in a week, so the figure is an upper bound.

use std::path::Path;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};

use super::BenchError;
use crate::model::{ClusterMemory, EndedHop, EndedOperation, OperationKind, Outcome, SloOutcome};
use crate::state_store::{MemorySnapshot, StateStore, StateStoreMetrics};

/// What was written: how many clusters, operations and bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeededHistory {
    pub clusters: usize,
    pub operations: usize,
    pub file_bytes: u64,
}

/// The week one cluster leaves, ending at `now`: eight operations, each
/// hop of its flow passed one after the other.
pub fn busy_week(cluster_index: usize, now: Timestamp) -> Vec<EndedOperation> {
    let hour = SignedDuration::from_hours(1);
    let pool = |n: usize| format!("np-{cluster_index:05}-{n}");
    let version = "4.20.2";
    let week: [(OperationKind, Option<String>, i32, i64); 8] = [
        (OperationKind::Create, None, 150, 14 * 60),
        (OperationKind::NodePoolCreate, Some(pool(2)), 130, 6 * 60),
        (OperationKind::NodePoolCreate, Some(pool(3)), 110, 7 * 60),
        (OperationKind::NodePoolDelete, Some(pool(3)), 90, 3 * 60),
        (
            OperationKind::Upgrade,
            Some(version.to_string()),
            70,
            42 * 60,
        ),
        (
            OperationKind::NodePoolUpgrade,
            Some(format!("{} to {version}", pool(1))),
            50,
            19 * 60,
        ),
        (
            OperationKind::NodePoolUpgrade,
            Some(format!("{} to {version}", pool(2))),
            49,
            23 * 60,
        ),
        (
            OperationKind::NodePoolUpgrade,
            Some(format!("{} to {version}", pool(4))),
            24,
            17 * 60,
        ),
    ];
    week.into_iter()
        .enumerate()
        .filter_map(|(i, (operation, subject, hours_ago, seconds))| {
            // Spread over the fleet so no two clusters' times are alike.
            let jitter = SignedDuration::from_secs(((cluster_index * 37 + i * 11) % 3600) as i64);
            let started_at = now
                .checked_sub(hour * hours_ago)
                .ok()?
                .checked_add(jitter)
                .ok()?;
            let hops = operation.flow().hops;
            let each = seconds / hops.len().max(1) as i64;
            let hops = hops
                .iter()
                .enumerate()
                .filter_map(|(h, hop)| {
                    let start = started_at
                        .checked_add(SignedDuration::from_millis(h as i64 * each * 1000 + 317))
                        .ok()?;
                    Some(EndedHop {
                        hop: *hop,
                        started_at: start,
                        ended_at: start
                            .checked_add(SignedDuration::from_millis(each * 1000 - 211))
                            .ok(),
                    })
                })
                .collect();
            Some(EndedOperation {
                operation,
                subject: subject.map(Into::into),
                started_at,
                ended_at: started_at
                    .checked_add(SignedDuration::from_secs(seconds))
                    .ok()?,
                outcome: Outcome::Succeeded,
                slo: Some(SloOutcome::Good),
                hops,
            })
        })
        .collect()
}

/// Write a state directory at `dir` in which each of `cluster_ids` holds
/// `operations` ended operations, through the state store's own writer:
/// its [`busy_week`], and more of the same within the week (at most
/// twenty, `history.max_per_cluster`'s default).
pub fn seed(
    dir: &Path,
    cluster_ids: impl IntoIterator<Item = String>,
    operations: usize,
    now: Timestamp,
) -> Result<SeededHistory, BenchError> {
    let io = |cause: std::io::Error| BenchError::Config {
        path: dir.display().to_string(),
        cause,
    };
    let store_error = |cause| BenchError::StateStore {
        path: dir.display().to_string(),
        cause,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let store = StateStore::open(dir, StateStoreMetrics::default()).map_err(store_error)?;
    let mut total = 0;
    let clusters: Vec<(String, Arc<ClusterMemory>)> = cluster_ids
        .into_iter()
        .enumerate()
        .map(|(i, id)| {
            let mut history = Vec::with_capacity(operations);
            let mut week_ends = now;
            while history.len() < operations {
                let week = busy_week(i, week_ends);
                let wanted = (operations - history.len()).min(week.len());
                // The newest of the week first, so a count short of a week
                // keeps the latest.
                history.splice(0..0, week[week.len() - wanted..].iter().cloned());
                // The next eight two hours earlier: all within the week.
                week_ends = week_ends
                    .checked_sub(SignedDuration::from_hours(2))
                    .unwrap_or(week_ends);
            }
            total += history.len();
            (
                id,
                Arc::new(ClusterMemory {
                    history: crate::model::History::encode(&history),
                    ..ClusterMemory::default()
                }),
            )
        })
        .collect();
    let snapshot = MemorySnapshot {
        generation: 1,
        clusters,
    };
    let written = store.save(&snapshot, now).map_err(store_error)?;
    let file_bytes = std::fs::metadata(dir.join(crate::state_store::FILE_NAME))
        .map(|m| m.len())
        .unwrap_or_default();
    Ok(SeededHistory {
        clusters: written,
        operations: total,
        file_bytes,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests: a panic is the failure report

    use super::*;

    #[test]
    fn a_busy_week_holds_every_operation_kind_with_every_hop_of_its_flow() {
        let now: Timestamp = "2026-03-08T12:00:00Z".parse().unwrap();
        let week = busy_week(3, now);
        // A live cluster's history holds no deletion: a deleted cluster's
        // history goes with it (docs/design/15b-operations.md §15.12).
        for kind in OperationKind::ALL
            .into_iter()
            .filter(|k| *k != OperationKind::Delete)
        {
            assert!(
                week.iter().any(|e| e.operation == kind),
                "{kind:?} missing from the week"
            );
        }
        for e in &week {
            let hops: Vec<_> = e.hops.iter().map(|h| h.hop).collect();
            assert_eq!(hops, e.operation.flow().hops, "{:?}", e.operation);
            assert!(e.started_at < e.ended_at && e.ended_at <= now);
            assert!(now.duration_since(e.started_at) < SignedDuration::from_hours(7 * 24));
        }
    }

    #[test]
    fn a_seeded_state_directory_restores_each_clusters_week() {
        let dir = std::env::temp_dir().join(format!(
            "hcp-flow-history-seed-{}-{}",
            std::process::id(),
            line!()
        ));
        let now = Timestamp::now();
        let seeded = seed(&dir, ["c1".to_string(), "c2".to_string()], 8, now).unwrap();
        assert_eq!(seeded.clusters, 2);
        assert_eq!(seeded.operations, 16);
        let store = StateStore::open(&dir, StateStoreMetrics::default()).unwrap();
        let (memory, _) = store.load();
        // Twenty: all within the week the history keeps.
        let twenty = seed(&dir, ["c1".to_string()], 20, now).unwrap();
        assert_eq!(twenty.operations, 20);
        let (twenty, _) = store.load();
        let _ = std::fs::remove_dir_all(&dir);
        let mut kept = twenty.clusters["c1"].history.entries();
        let all = kept.len();
        crate::model::history_prune(&mut kept, crate::model::HistoryLimits::default(), now);
        assert_eq!((all, kept.len()), (20, 20));
        assert_eq!(
            memory.clusters["c2"].history,
            crate::model::History::encode(&busy_week(1, now))
        );
    }
}
