//! Hop `clusters_service`: the cluster's `status.state`.

use crate::model::Phase;

/// The phase of a Clusters Service state; `None` for a value the exporter
/// does not know (mapped to `unknown` and counted by the caller). The upstream
/// value `unknown` is a known value that maps to `unknown` (not counted).
pub fn phase(state: &str) -> Option<Phase> {
    Some(match state {
        "waiting" | "validating" | "pending" => Phase::Pending,
        "installing" | "updating" | "powering_down" | "resuming" => Phase::Progressing,
        "ready" | "hibernating" => Phase::Ready,
        "error" => Phase::Failed,
        "uninstalling" => Phase::Deleting,
        "unknown" => Phase::Unknown,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_all_twelve_states() {
        let rows = [
            ("waiting", Phase::Pending),
            ("validating", Phase::Pending),
            ("pending", Phase::Pending),
            ("installing", Phase::Progressing),
            ("updating", Phase::Progressing),
            ("powering_down", Phase::Progressing),
            ("resuming", Phase::Progressing),
            ("ready", Phase::Ready),
            ("hibernating", Phase::Ready),
            ("error", Phase::Failed),
            ("uninstalling", Phase::Deleting),
            ("unknown", Phase::Unknown),
        ];
        for (state, want) in rows {
            assert_eq!(phase(state), Some(want), "{state}");
        }
        assert_eq!(phase("frobnicating"), None);
        assert_eq!(phase(""), None);
    }
}
