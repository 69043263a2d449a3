//! Hop `node_pool`, one pool: a NodePool's `.status` (from a kube watch or
//! from Maestro feedback) and its desired replica count.

use serde::Deserialize;

use super::conditions::{self, WireCondition, first_false, is_true, transition_of};
use super::{UnknownValue, null_default, parse_time};
use crate::model::{Condition, HopView, Phase, Replicas, Rollout};

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
    /// The version rolled out to the pool; empty until its first rollout.
    #[serde(default, deserialize_with = "null_default")]
    pub version: String,
}

/// What HyperShift's `UpdatingVersion` message says before the target
/// version (`Updating version in progress. Target version: 4.20.5`, an
/// in-place upgrade adding `. Total Nodes: …`).
const TARGET_VERSION_PREFIX: &str = "Target version: ";

/// The version an `UpdatingVersion` message names, if it names one.
fn target_version(message: &str) -> Option<&str> {
    let (_, rest) = message.split_once(TARGET_VERSION_PREFIX)?;
    let rest = rest.trim_start_matches('"');
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_')))
        .unwrap_or(rest.len());
    // A version ends at its last alphanumeric: "4.20.5." is "4.20.5".
    let version = rest[..end].trim_end_matches(['.', '-', '+', '_']);
    (!version.is_empty()).then_some(version)
}

/// The upgrade a NodePool reports in progress (docs/design/15-operations.md §15.10):
/// `UpdatingVersion` True while the pool already runs a version, to the
/// version the condition's message names, from the condition's transition.
/// `None` otherwise: before its first rollout the version is its creation's,
/// and a rolled-out pool says so by having no update in progress (HyperShift
/// removes the condition, or sets it False), which the model reads from the
/// stored conditions. Only the transient state is carried, so a fleet of
/// pools at rest costs nothing.
pub fn rollout(
    status: Option<&NodePoolStatus>,
    unknown: &mut Vec<UnknownValue>,
) -> Option<Rollout> {
    let status = status?;
    if status.version.is_empty() {
        return None;
    }
    let updating = status
        .conditions
        .iter()
        .find(|c| c.kind == "UpdatingVersion" && c.status == "True")?;
    let target = target_version(&updating.message).filter(|t| *t != status.version)?;
    Some(Rollout {
        target: target.to_string(),
        started_at: parse_time(
            updating.last_transition_time.as_deref(),
            "status.conditions.lastTransitionTime",
            unknown,
        ),
        completed: false,
        completed_at: None,
        upgrade: true,
    })
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
    let mut view = HopView {
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
    };
    if let Some(rollout) = rollout(status, unknown) {
        view.identity_mut().rollout = Some(rollout);
    }
    view
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
            version: String::new(),
        };
        let mut unknown = Vec::new();
        let view = read(Some(&status), false, Some(2), &mut unknown);
        assert_eq!(view.replicas.map(|r| r.current), Some(0));
        assert_eq!(unknown.len(), 1);
    }

    fn updating(status: &str, message: &str) -> WireCondition {
        WireCondition {
            kind: "UpdatingVersion".to_string(),
            status: status.to_string(),
            reason: "AsExpected".to_string(),
            message: message.to_string(),
            last_transition_time: Some("2026-11-27T10:00:00Z".to_string()),
        }
    }

    #[test]
    fn an_upgrade_in_progress_names_hypershifts_target_version() {
        // (status.version, UpdatingVersion, want the target)
        let rows: Vec<(&str, Option<WireCondition>, Option<&str>)> = vec![
            // HyperShift's own message, replace and in-place upgrades.
            (
                "4.19.9",
                Some(updating(
                    "True",
                    "Updating version in progress. Target version: 4.20.2",
                )),
                Some("4.20.2"),
            ),
            (
                "4.19.9",
                Some(updating(
                    "True",
                    "Updating version in progress. Target version: 4.20.2. Total Nodes: 3. Upgraded: 1",
                )),
                Some("4.20.2"),
            ),
            // A pool's first rollout is its creation's, not an upgrade.
            (
                "",
                Some(updating(
                    "True",
                    "Updating version in progress. Target version: 4.20.2",
                )),
                None,
            ),
            // Rolled out: condition False, or removed (current HyperShift).
            ("4.20.2", Some(updating("False", "")), None),
            ("4.20.2", None, None),
            // A message that names no version starts nothing.
            ("4.19.9", Some(updating("True", "something else")), None),
            ("4.19.9", Some(updating("True", "Target version: ")), None),
        ];
        for (version, condition, want) in rows {
            let status = NodePoolStatus {
                conditions: condition.clone().into_iter().collect(),
                version: version.to_string(),
                ..NodePoolStatus::default()
            };
            let mut unknown = Vec::new();
            let got = rollout(Some(&status), &mut unknown);
            assert_eq!(
                got.as_ref().map(|r| r.target.as_str()),
                want,
                "{version} {condition:?}"
            );
            if let Some(r) = got {
                assert!(!r.completed && r.upgrade);
                assert_eq!(
                    r.started_at.map(|s| s.to_string()),
                    Some("2026-11-27T10:00:00Z".to_string())
                );
            }
            let view = read(Some(&status), false, Some(2), &mut unknown);
            assert_eq!(
                view.identity().rollout.as_ref().map(|r| r.target.as_str()),
                want
            );
        }
    }
}
