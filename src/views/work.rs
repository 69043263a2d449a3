//! Hops `maestro_bundle` and `manifestwork`: a ManifestWork's status, which is
//! also what a Maestro resource bundle carries, and the manifest list whose
//! status feedback nests the HostedCluster's and NodePools' own status.

use serde::Deserialize;

use super::conditions::{self, WireCondition, find, is_true, transition_of, true_condition};
use super::null_default;
use crate::model::{Condition, ConditionStatus, HopView, Phase};

/// Reasons the work agent uses when applying a manifest failed.
pub const APPLY_FAILURE_REASONS: [&str; 3] = [
    "AppliedManifestWorkFailed",
    "AppliedManifestFailed",
    "Failed",
];

/// A ManifestWork `.status`, the fields read: its conditions and, per
/// manifest, the conditions and status feedback.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkStatus {
    #[serde(default, deserialize_with = "null_default")]
    pub conditions: Vec<WireCondition>,
    #[serde(default)]
    pub resource_status: Option<WorkResourceStatus>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct WorkResourceStatus {
    #[serde(default, deserialize_with = "null_default")]
    pub manifests: Vec<ManifestCondition>,
}

/// One manifest's status inside a work (or a bundle's flat list).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestCondition {
    #[serde(default)]
    pub resource_meta: Option<ResourceMeta>,
    #[serde(default, deserialize_with = "null_default")]
    pub conditions: Vec<WireCondition>,
    /// JSON key `statusFeedback`, singular.
    #[serde(default)]
    pub status_feedback: Option<StatusFeedback>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ResourceMeta {
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct StatusFeedback {
    #[serde(default, deserialize_with = "null_default")]
    pub values: Vec<FeedbackValue>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackValue {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub field_value: Option<FieldValue>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldValue {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub integer: Option<i64>,
    #[serde(default)]
    pub json_raw: Option<String>,
}

impl ManifestCondition {
    pub fn kind(&self) -> &str {
        self.resource_meta
            .as_ref()
            .and_then(|r| r.kind.as_deref())
            .unwrap_or("")
    }

    /// The feedback value `name`.
    pub fn feedback(&self, name: &str) -> Option<&FieldValue> {
        self.status_feedback
            .as_ref()?
            .values
            .iter()
            .find(|v| v.name == name)?
            .field_value
            .as_ref()
    }
}

/// `Degraded` True, or `Applied`/`Progressing` carrying an apply failure
/// reason while not succeeded.
pub fn apply_failed(conditions: &[Condition]) -> bool {
    failing_condition(conditions).is_some()
}

fn failing_condition(conditions: &[Condition]) -> Option<&Condition> {
    true_condition(conditions, "Degraded").or_else(|| {
        conditions.iter().find(|c| {
            let failing_type = (c.kind == "Applied" && c.status != ConditionStatus::True)
                || c.kind == "Progressing";
            failing_type && APPLY_FAILURE_REASONS.contains(&c.reason.as_str())
        })
    })
}

/// The phase table of a work: deleting first; no conditions at all means
/// the agent has not reported yet.
pub fn phase(conditions: &[Condition], deleting: bool) -> Phase {
    if deleting {
        return Phase::Deleting;
    }
    if conditions.is_empty() {
        return Phase::Pending;
    }
    if apply_failed(conditions) {
        return Phase::Failed;
    }
    if is_true(conditions, "Applied") && is_true(conditions, "Available") {
        return Phase::Ready;
    }
    Phase::Progressing
}

/// A short, bounded raw state for the work hops, which have no state enum of
/// their own: it names the condition that decides the phase.
pub fn state(conditions: &[Condition], deleting: bool) -> &'static str {
    if deleting {
        return "deleting";
    }
    if conditions.is_empty() {
        return "no status yet";
    }
    if is_true(conditions, "Degraded") {
        return "Degraded";
    }
    if apply_failed(conditions) {
        return "ApplyFailed";
    }
    match (
        is_true(conditions, "Applied"),
        is_true(conditions, "Available"),
    ) {
        (true, true) => "Available",
        (true, false) => "Applied",
        (false, _) => "NotApplied",
    }
}

/// The hop facts of one work (a ManifestWork, or a bundle's own status).
/// `since` is the transition of the condition that explains the phase.
pub fn read(conditions: Vec<Condition>, deleting: bool) -> HopView {
    let phase = phase(&conditions, deleting);
    let state = state(&conditions, deleting);
    let error = match phase {
        Phase::Failed => failing_condition(&conditions).map(conditions::failure),
        _ => None,
    };
    let explaining: &[&str] = match phase {
        Phase::Ready => &["Available"],
        Phase::Failed => &["Degraded", "Applied", "Progressing"],
        _ => &["Applied", "Available"],
    };
    HopView {
        since: transition_of(&conditions, explaining),
        error,
        conditions,
        ..HopView::new(state, phase)
    }
}

/// The `Deleting` condition a work agent sets while removing a work.
pub fn deleting_condition(conditions: &[Condition]) -> bool {
    find(conditions, "Deleting").is_some_and(|c| c.status == ConditionStatus::True)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(kind: &str, status: &str) -> Condition {
        conditions::test_condition(kind, status, "")
    }

    fn cond_reason(kind: &str, status: &str, reason: &str) -> Condition {
        conditions::test_condition(kind, status, reason)
    }

    #[test]
    fn work_rows() {
        let applied = cond("Applied", "True");
        let available = cond("Available", "True");
        let rows: Vec<(Vec<Condition>, bool, Phase, &str)> = vec![
            (vec![], false, Phase::Pending, "no status yet"),
            (
                vec![applied.clone(), available.clone()],
                true,
                Phase::Deleting,
                "deleting",
            ),
            (vec![], true, Phase::Deleting, "deleting"),
            (
                vec![applied.clone(), available.clone()],
                false,
                Phase::Ready,
                "Available",
            ),
            (
                vec![applied.clone(), cond("Available", "False")],
                false,
                Phase::Progressing,
                "Applied",
            ),
            (vec![applied.clone()], false, Phase::Progressing, "Applied"),
            (
                vec![cond("Applied", "False"), available.clone()],
                false,
                Phase::Progressing,
                "NotApplied",
            ),
            (
                vec![applied.clone(), available.clone(), cond("Degraded", "True")],
                false,
                Phase::Failed,
                "Degraded",
            ),
            (
                vec![
                    applied.clone(),
                    available.clone(),
                    cond("Degraded", "False"),
                ],
                false,
                Phase::Ready,
                "Available",
            ),
            (
                vec![cond_reason("Applied", "False", "AppliedManifestWorkFailed")],
                false,
                Phase::Failed,
                "ApplyFailed",
            ),
            (
                vec![
                    cond("Applied", "Unknown"),
                    cond_reason("Progressing", "True", "Failed"),
                ],
                false,
                Phase::Failed,
                "ApplyFailed",
            ),
            (
                vec![
                    cond("Applied", "False"),
                    cond_reason("Progressing", "True", "Applying"),
                ],
                false,
                Phase::Progressing,
                "NotApplied",
            ),
        ];
        for (conditions, deleting, want_phase, want_state) in rows {
            assert_eq!(
                phase(&conditions, deleting),
                want_phase,
                "{conditions:?} deleting={deleting}"
            );
            assert_eq!(state(&conditions, deleting), want_state, "{conditions:?}");
        }
    }
}
