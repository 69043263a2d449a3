//! Hop `node_pool`, one pool: a NodePool's `.status` (from a kube watch or
//! from Maestro feedback) and its desired replica count.

use serde::Deserialize;

use super::conditions::{self, WireCondition, first_false, is_true, transition_of};
use super::{UnknownValue, null_default};
use crate::model::{Condition, HopView, Phase, Replicas};

/// Conditions whose `False` means "will not heal by itself".
pub const FATAL_CONDITIONS: [&str; 3] = [
    "ValidReleaseImage",
    "ValidPlatformImage",
    "ValidMachineConfig",
];

/// A NodePool `.status`, the fields read.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    #[serde(default, deserialize_with = "null_default")]
    pub conditions: Vec<WireCondition>,
    #[serde(default)]
    pub replicas: Option<i64>,
    #[serde(default)]
    pub nodes_info: Option<NodesInfo>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodesInfo {
    #[serde(default, deserialize_with = "null_default")]
    pub node_versions: Vec<NodeVersion>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeVersion {
    #[serde(default)]
    pub ready_node_count: Option<i64>,
}

/// A replica count from upstream; a negative or oversized one is counted
/// and reads as absent.
pub fn count(
    value: Option<i64>,
    field: &'static str,
    unknown: &mut Vec<UnknownValue>,
) -> Option<u32> {
    let v = value?;
    match u32::try_from(v) {
        Ok(n) => Some(n),
        Err(_) => {
            unknown.push(UnknownValue {
                field,
                value: v.to_string(),
            });
            None
        }
    }
}

/// The phase table of one pool. `desired` is `spec.replicas` (None when the
/// pool autoscales without a minimum or the spec is not visible: then `Ready`
/// alone decides); zero desired replicas is ready.
pub fn phase(conditions: &[Condition], deleting: bool, desired: Option<u32>, ready: u32) -> Phase {
    if deleting {
        return Phase::Deleting;
    }
    if first_false(conditions, &FATAL_CONDITIONS).is_some() {
        return Phase::Failed;
    }
    if desired == Some(0) {
        return Phase::Ready;
    }
    if conditions.is_empty() {
        return Phase::Pending;
    }
    if is_true(conditions, "Ready") && desired.is_none_or(|d| ready >= d) {
        return Phase::Ready;
    }
    Phase::Progressing
}

/// Read one pool.
pub fn read(
    status: Option<&NodePoolStatus>,
    deleting: bool,
    desired: Option<u32>,
    unknown: &mut Vec<UnknownValue>,
) -> HopView {
    let conds = conditions::read(
        status.map(|s| s.conditions.as_slice()).unwrap_or_default(),
        unknown,
    );
    let current = status
        .and_then(|s| count(s.replicas, "status.replicas", unknown))
        .unwrap_or(0);
    let ready_true = is_true(&conds, "Ready");
    // nodesInfo counts ready nodes when HyperShift reports it; otherwise a
    // Ready pool has all its current nodes ready.
    let counted = status
        .and_then(|s| s.nodes_info.as_ref())
        .filter(|info| !info.node_versions.is_empty())
        .map(|info| {
            info.node_versions
                .iter()
                .filter_map(|v| {
                    count(
                        v.ready_node_count,
                        "status.nodesInfo.readyNodeCount",
                        unknown,
                    )
                })
                .fold(0u32, u32::saturating_add)
        });
    let ready = counted.unwrap_or(if ready_true { current } else { 0 });
    let phase = phase(&conds, deleting, desired, ready);
    let fatal = first_false(&conds, &FATAL_CONDITIONS);
    let state = if deleting {
        "deleting".to_string()
    } else if let Some(c) = fatal {
        format!("{}=False", c.kind)
    } else if conds.is_empty() {
        "no status yet".to_string()
    } else if ready_true {
        "Ready".to_string()
    } else {
        "NotReady".to_string()
    };
    let (since, error) = match (phase, fatal) {
        (Phase::Failed, Some(c)) => (c.last_transition, Some(conditions::failure(c))),
        _ => (transition_of(&conds, &["Ready"]), None),
    };
    HopView {
        since,
        error: error.map(Box::new),
        conditions: conds,
        // Without spec.replicas (autoscaling, or feedback not configured)
        // the observed count is the best statement of "desired".
        replicas: Some(Replicas {
            desired: desired.unwrap_or(current),
            current,
            ready,
        }),
        ..HopView::new(&state, phase)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(kind: &str, status: &str) -> Condition {
        conditions::test_condition(kind, status, "")
    }

    #[test]
    fn phase_rows() {
        let ready = cond("Ready", "True");
        type Row = (Vec<Condition>, bool, Option<u32>, u32, Phase);
        let rows: Vec<Row> = vec![
            (vec![], false, Some(3), 0, Phase::Pending),
            (vec![ready.clone()], true, Some(3), 3, Phase::Deleting),
            (vec![ready.clone()], false, Some(3), 3, Phase::Ready),
            (vec![ready.clone()], false, Some(3), 2, Phase::Progressing),
            (
                vec![cond("Ready", "False")],
                false,
                Some(3),
                3,
                Phase::Progressing,
            ),
            (vec![ready.clone()], false, None, 0, Phase::Ready),
            (
                vec![cond("Ready", "False")],
                false,
                Some(0),
                0,
                Phase::Ready,
            ),
            (vec![], false, Some(0), 0, Phase::Ready),
            (
                vec![cond("ValidReleaseImage", "False")],
                false,
                Some(3),
                0,
                Phase::Failed,
            ),
            (
                vec![cond("ValidPlatformImage", "False")],
                false,
                Some(3),
                0,
                Phase::Failed,
            ),
            (
                vec![cond("ValidMachineConfig", "False")],
                false,
                Some(3),
                0,
                Phase::Failed,
            ),
            (
                vec![ready.clone(), cond("ValidMachineConfig", "True")],
                false,
                Some(3),
                3,
                Phase::Ready,
            ),
            (
                vec![cond("ValidTuningConfig", "False")],
                false,
                Some(3),
                0,
                Phase::Progressing,
            ),
        ];
        for (conditions, deleting, desired, ready_nodes, want) in rows {
            assert_eq!(
                phase(&conditions, deleting, desired, ready_nodes),
                want,
                "{conditions:?} deleting={deleting} desired={desired:?} ready={ready_nodes}"
            );
        }
    }

    #[test]
    fn odd_counts_are_counted_not_trusted() {
        let status = NodePoolStatus {
            conditions: vec![],
            replicas: Some(-1),
            nodes_info: None,
        };
        let mut unknown = Vec::new();
        let view = read(Some(&status), false, Some(2), &mut unknown);
        assert_eq!(view.replicas.map(|r| r.current), Some(0));
        assert_eq!(unknown.len(), 1);
    }
}
