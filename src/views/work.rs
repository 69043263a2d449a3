//! Hops `maestro_bundle` and `manifestwork`: a ManifestWork's status, which is
//! also what a Maestro resource bundle carries, and the manifest list whose
//! status feedback nests the HostedCluster's and NodePools' own status.

use serde::Deserialize;

use super::conditions::{self, WireCondition, find, is_true, transition_of, true_condition};
use super::null_default;
use crate::model::{Condition, ConditionStatus, HopError, HopView, Phase, Stamp};

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
pub fn read(conditions: std::sync::Arc<[Condition]>, deleting: bool) -> HopView {
    let phase = phase(&conditions, deleting);
    let state = state(&conditions, deleting);
    let error = match phase {
        Phase::Failed => failing_condition(&conditions).map(conditions::failure),
        _ => None,
    };
    // A deleting work is dated by the agent's Deleting condition when it
    // has one, never by when it was applied (the caller dates it by the
    // deletionTimestamp or the bundle's deleted_at otherwise).
    let explaining: &[&str] = match phase {
        Phase::Ready => &["Available"],
        Phase::Failed => &["Degraded", "Applied", "Progressing"],
        Phase::Deleting => &["Deleting"],
        _ => &["Applied", "Available"],
    };
    HopView {
        since: transition_of(&conditions, explaining),
        error: error.map(Box::new),
        conditions,
        ..HopView::new(state, phase)
    }
}

/// Why the status feedback a bundle should carry could not fill the hops
/// nested in it (docs/design/02-hops-and-phases.md §2.6). A closed set: its code is the
/// bundle's `HopError.code` in the JSON and the `code` label of
/// `hcpflow_hop_feedback_error_info`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FeedbackError {
    /// No status where one should be: the bundle's `status` is null, or
    /// its ManifestWork (or a HostedCluster / NodePool inside it) has no
    /// `status` feedback value, or does not show a manifest the bundle
    /// carries.
    NoStatus,
    /// A feedback value is there but cannot be read: a `jsonRaw` that does
    /// not parse as the status it should be, or a value of another type.
    Unreadable,
}

impl FeedbackError {
    pub const ALL: [FeedbackError; 2] = [FeedbackError::NoStatus, FeedbackError::Unreadable];

    pub fn code(self) -> &'static str {
        match self {
            FeedbackError::NoStatus => "no_status",
            FeedbackError::Unreadable => "feedback_unreadable",
        }
    }

    /// The variant whose [`code`](Self::code) this is.
    pub fn from_code(code: &str) -> Option<FeedbackError> {
        FeedbackError::ALL.into_iter().find(|e| e.code() == code)
    }

    /// Of two problems in one bundle, the one to report: unreadable data is
    /// a fault somewhere, a missing status may only be early.
    pub fn worst(self, other: FeedbackError) -> FeedbackError {
        self.max(other)
    }

    /// The bundle's error; `detail` says where (bounded by the caller).
    pub fn error(self, detail: &str) -> HopError {
        HopError {
            code: self.code().to_string(),
            message: detail.to_string(),
        }
    }

    /// The facts of an object a bundle carries whose status its feedback
    /// could not give and of which no good reading was ever seen: phase
    /// `unknown`, the code as `state`, since `since` (the bundle's
    /// creation: the object has been unknown at least that long). It exists
    /// so the hop exists and ages, and the stuck-hop alert can fire for it.
    pub fn unread_object(self, since: Option<Stamp>) -> HopView {
        HopView {
            since,
            ..HopView::new(self.code(), Phase::Unknown)
        }
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

    #[test]
    fn feedback_error_codes_are_a_closed_set() {
        for e in FeedbackError::ALL {
            assert_eq!(FeedbackError::from_code(e.code()), Some(e));
            let view = e.unread_object(None);
            assert_eq!(
                (view.phase, view.state.as_str()),
                (Phase::Unknown, e.code())
            );
        }
        assert_eq!(FeedbackError::from_code("OCM4001"), None);
        assert_eq!(
            FeedbackError::NoStatus.worst(FeedbackError::Unreadable),
            FeedbackError::Unreadable
        );
    }
}
