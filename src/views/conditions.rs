//! Conditions as every upstream sends them (metav1.Condition and the
//! ManagedCluster, ManifestWork and ARM variants share these fields), and the
//! few questions the phase tables ask of them.

use std::sync::Arc;

use serde::Deserialize;

use super::{UnknownValue, null_default, parse_time};
use crate::model::{Condition, ConditionStatus, HopError, Stamp};

/// A condition on the wire. Times stay strings until [`read`]: one odd
/// timestamp must not reject the whole object.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WireCondition {
    #[serde(rename = "type", default, deserialize_with = "null_default")]
    pub kind: String,
    #[serde(default, deserialize_with = "null_default")]
    pub status: String,
    #[serde(default, deserialize_with = "null_default")]
    pub reason: String,
    #[serde(default, deserialize_with = "null_default")]
    pub message: String,
    #[serde(default)]
    pub last_transition_time: Option<String>,
}

/// Every condition, in upstream order. A condition without a type carries
/// nothing and is dropped; an unreadable transition time is counted and
/// reads as absent. Nothing is allow-listed here: the JSON API shows every
/// condition, and only the metrics keep an allow-list. In one exact-size
/// shared allocation: the view and what a source keeps of it hold the
/// same copy (docs/performance.md).
pub fn read(wire: &[WireCondition], unknown: &mut Vec<UnknownValue>) -> Arc<[Condition]> {
    let read: Vec<Condition> = wire
        .iter()
        .filter(|c| !c.kind.is_empty())
        .map(|c| {
            Condition::new(
                c.kind.as_str(),
                ConditionStatus::from_upstream(&c.status),
                c.reason.as_str(),
                c.message.as_str(),
                parse_time(
                    c.last_transition_time.as_deref(),
                    "conditions.lastTransitionTime",
                    unknown,
                ),
            )
        })
        .collect();
    crate::model::shared_conditions(read)
}

/// The condition of this type, if present (the first one: upstream lists each
/// type once).
pub fn find<'a>(conditions: &'a [Condition], kind: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.kind == kind)
}

/// Status of the condition of this type; absent reads as `Unknown`.
pub fn status_of(conditions: &[Condition], kind: &str) -> ConditionStatus {
    find(conditions, kind).map_or(ConditionStatus::Unknown, |c| c.status)
}

pub fn is_true(conditions: &[Condition], kind: &str) -> bool {
    status_of(conditions, kind) == ConditionStatus::True
}

/// The condition of this type when it is `True`.
pub fn true_condition<'a>(conditions: &'a [Condition], kind: &str) -> Option<&'a Condition> {
    find(conditions, kind).filter(|c| c.status == ConditionStatus::True)
}

/// The first of `kinds` whose condition is explicitly `False`.
pub fn first_false<'a>(conditions: &'a [Condition], kinds: &[&str]) -> Option<&'a Condition> {
    kinds
        .iter()
        .find_map(|k| find(conditions, k).filter(|c| c.status == ConditionStatus::False))
}

/// The last transition time of the first present condition of `kinds`.
pub fn transition_of(conditions: &[Condition], kinds: &[&str]) -> Option<Stamp> {
    kinds
        .iter()
        .find_map(|kind| find(conditions, kind).and_then(|c| c.last_transition))
}

/// The latest transition among these condition types.
pub fn latest_transition(conditions: &[Condition], kinds: &[&str]) -> Option<Stamp> {
    conditions
        .iter()
        .filter(|c| kinds.contains(&c.kind.as_str()))
        .filter_map(|c| c.last_transition)
        .max()
}

/// Why a hop failed, from the condition that says so: its reason when it has
/// one (a short identifier such as `InvalidImage`), else the condition type.
pub fn failure(c: &Condition) -> HopError {
    HopError {
        code: if c.reason.is_empty() {
            c.kind.to_string()
        } else {
            c.reason.to_string()
        },
        message: c.message.to_string(),
    }
}

/// A condition for table tests: `kind` at `status`, with `reason`.
#[cfg(test)]
pub(crate) fn test_condition(kind: &str, status: &str, reason: &str) -> Condition {
    Condition::new(
        kind,
        ConditionStatus::from_upstream(status),
        reason,
        "",
        None,
    )
}
