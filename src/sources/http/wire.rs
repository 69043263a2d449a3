//! The upstreams' JSON as the pollers read it: nulls, times, conditions,
//! and the quoting of search expressions.

use jiff::Timestamp;
use serde::{Deserialize, Deserializer};

use crate::model::{Condition, ConditionStatus};
use crate::sources::UnknownValue;

/// Deserialize `null` as the type's default (upstreams write `"items": null`
/// and `"conditions": null`).
pub fn null_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Parse an upstream RFC 3339 time; a malformed one is counted under
/// `field` and read as absent (the model falls back to its own clock).
pub fn parse_time(
    raw: Option<&str>,
    field: &'static str,
    unknown: &mut Vec<UnknownValue>,
) -> Option<Timestamp> {
    let raw = raw.filter(|s| !s.is_empty())?;
    match raw.parse::<Timestamp>() {
        Ok(t) => Some(t),
        Err(_) => {
            unknown.push(UnknownValue {
                field,
                value: raw.to_string(),
            });
            None
        }
    }
}

/// A Kubernetes/ARM condition as it appears on the wire.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireCondition {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub status: String,
    #[serde(default, deserialize_with = "null_default")]
    pub reason: String,
    #[serde(default, deserialize_with = "null_default")]
    pub message: String,
    #[serde(default)]
    pub last_transition_time: Option<String>,
}

/// Turn wire conditions into model conditions. Conditions without a type
/// carry nothing and are dropped.
pub fn conditions(wire: &[WireCondition], unknown: &mut Vec<UnknownValue>) -> Vec<Condition> {
    wire.iter()
        .filter(|c| !c.kind.is_empty())
        .map(|c| Condition {
            kind: c.kind.clone(),
            status: ConditionStatus::from_upstream(&c.status),
            reason: c.reason.clone(),
            message: c.message.clone(),
            last_transition: parse_time(
                c.last_transition_time.as_deref(),
                "conditions.lastTransitionTime",
                unknown,
            ),
        })
        .collect()
}

/// The last transition time of the first present condition of `kinds`.
pub fn transition_of(conditions: &[Condition], kinds: &[&str]) -> Option<Timestamp> {
    kinds.iter().find_map(|kind| {
        conditions
            .iter()
            .find(|c| c.kind == *kind)
            .and_then(|c| c.last_transition)
    })
}

/// Quote a value for an OCM/Maestro `search` expression.
pub fn sql_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn quoting_doubles_single_quotes() {
        assert_eq!(sql_quote("a'b"), "'a''b'");
    }
}
