//! Hop `managed_cluster`: a ManagedCluster's conditions on the hub.

use serde::Deserialize;

use super::conditions::{self, WireCondition, find, is_true, latest_transition};
use super::{UnknownValue, null_default};
use crate::model::{Condition, HopView, Phase};

/// The conditions that decide the phase and its `since`.
pub const PHASE_CONDITIONS: &[&str] = &[
    "HubAcceptedManagedCluster",
    "HubDeniedManagedCluster",
    "ManagedClusterJoined",
    "ManagedClusterConditionAvailable",
    "ManagedClusterImportSucceeded",
    "Deleting",
];

/// A ManagedCluster `.status` (conditions only are read).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ManagedClusterStatus {
    #[serde(default, deserialize_with = "null_default")]
    pub conditions: Vec<WireCondition>,
}

/// The phase table. `deleting` is the deletionTimestamp; the `Deleting`
/// condition is only ever set while the cluster is being removed, whatever
/// its status, so its presence alone means deleting.
pub fn phase(conditions: &[Condition], deleting: bool) -> Phase {
    if deleting || find(conditions, "Deleting").is_some() {
        return Phase::Deleting;
    }
    if is_true(conditions, "HubDeniedManagedCluster") {
        return Phase::Failed;
    }
    if !is_true(conditions, "HubAcceptedManagedCluster") {
        return Phase::Pending;
    }
    if is_true(conditions, "ManagedClusterJoined")
        && is_true(conditions, "ManagedClusterConditionAvailable")
    {
        return Phase::Ready;
    }
    Phase::Progressing
}

pub fn read(
    status: Option<&ManagedClusterStatus>,
    deleting: bool,
    unknown: &mut Vec<UnknownValue>,
) -> HopView {
    let conds = conditions::read(
        status.map(|s| s.conditions.as_slice()).unwrap_or_default(),
        unknown,
    );
    let phase = phase(&conds, deleting);
    let state = match phase {
        Phase::Deleting => "deleting",
        Phase::Failed => "HubDenied",
        Phase::Ready => "Available",
        _ if is_true(&conds, "ManagedClusterJoined") => "Joined",
        _ if is_true(&conds, "HubAcceptedManagedCluster") => "Accepted",
        _ => "NotAccepted",
    };
    let error = match phase {
        Phase::Failed => find(&conds, "HubDeniedManagedCluster").map(conditions::failure),
        _ => None,
    };
    HopView {
        since: latest_transition(&conds, PHASE_CONDITIONS),
        error: error.map(Box::new),
        conditions: conds,
        ..HopView::new(state, phase)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `Deleting` condition always carries a reason upstream.
    fn cond(kind: &str, status: &str) -> Condition {
        let reason = if kind == "Deleting" {
            "ResourceRemaining"
        } else {
            ""
        };
        conditions::test_condition(kind, status, reason)
    }

    #[test]
    fn phase_rows() {
        let accepted = cond("HubAcceptedManagedCluster", "True");
        let joined = cond("ManagedClusterJoined", "True");
        let available = cond("ManagedClusterConditionAvailable", "True");
        let rows: Vec<(Vec<Condition>, bool, Phase)> = vec![
            (vec![], false, Phase::Pending),
            (
                vec![cond("HubAcceptedManagedCluster", "False")],
                false,
                Phase::Pending,
            ),
            (vec![accepted.clone()], false, Phase::Progressing),
            (
                vec![accepted.clone(), joined.clone()],
                false,
                Phase::Progressing,
            ),
            (
                vec![
                    accepted.clone(),
                    joined.clone(),
                    cond("ManagedClusterConditionAvailable", "Unknown"),
                ],
                false,
                Phase::Progressing,
            ),
            (
                vec![accepted.clone(), joined.clone(), available.clone()],
                false,
                Phase::Ready,
            ),
            (
                vec![cond("HubDeniedManagedCluster", "True")],
                false,
                Phase::Failed,
            ),
            (
                vec![accepted.clone(), cond("HubDeniedManagedCluster", "False")],
                false,
                Phase::Progressing,
            ),
            (
                vec![accepted.clone(), joined.clone(), available.clone()],
                true,
                Phase::Deleting,
            ),
            (
                vec![
                    accepted.clone(),
                    joined.clone(),
                    available.clone(),
                    cond("Deleting", "False"),
                ],
                false,
                Phase::Deleting,
            ),
        ];
        for (conditions, deleting, want) in rows {
            assert_eq!(
                phase(&conditions, deleting),
                want,
                "{conditions:?} deleting={deleting}"
            );
        }
    }
}
