//! Hop `rp_frontend`: the ARM resource's `properties.provisioningState`.

use crate::model::Phase;

/// The phase of a provisioning state; `None` for a value the exporter does
/// not know (the caller maps it to `unknown` and counts it). ARM enums are
/// case-sensitive.
pub fn phase(provisioning_state: &str) -> Option<Phase> {
    Some(match provisioning_state {
        "Accepted" => Phase::Pending,
        "Provisioning" | "Updating" => Phase::Progressing,
        "Succeeded" => Phase::Ready,
        "Failed" | "Canceled" => Phase::Failed,
        "Deleting" => Phase::Deleting,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_all_seven_states() {
        let rows = [
            ("Accepted", Phase::Pending),
            ("Provisioning", Phase::Progressing),
            ("Updating", Phase::Progressing),
            ("Succeeded", Phase::Ready),
            ("Failed", Phase::Failed),
            ("Canceled", Phase::Failed),
            ("Deleting", Phase::Deleting),
        ];
        for (state, want) in rows {
            assert_eq!(phase(state), Some(want), "{state}");
        }
        assert_eq!(phase("Migrating"), None);
        assert_eq!(phase("succeeded"), None, "ARM enums are case-sensitive");
    }
}
