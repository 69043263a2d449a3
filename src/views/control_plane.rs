//! Hop `control_plane`: a HostedControlPlane and the pods of its namespace,
//! read from kube watches only (no Maestro feedback carries them).

use std::sync::Arc;

use serde::Deserialize;

use super::conditions::{self, WireCondition, transition_of};
use super::{UnknownValue, null_default};
use crate::model::{Condition, HopView, Phase, PodCounts, Stamp};

/// A HostedControlPlane `.status`, the fields read.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct HostedControlPlaneStatus {
    #[serde(default)]
    pub ready: bool,
    #[serde(default, deserialize_with = "null_default")]
    pub conditions: Vec<WireCondition>,
}

/// What the hop needs of one HostedControlPlane.
#[derive(Clone, Debug, PartialEq)]
pub struct HostedControlPlaneReading {
    pub created_at: Option<Stamp>,
    /// Its deletionTimestamp: the control plane is going from then on.
    pub deleting: Option<Stamp>,
    pub ready: bool,
    /// Shared with every view read from it.
    pub conditions: Arc<[Condition]>,
}

pub fn read_hosted_control_plane(
    status: Option<&HostedControlPlaneStatus>,
    deleting: Option<Stamp>,
    created_at: Option<Stamp>,
    unknown: &mut Vec<UnknownValue>,
) -> HostedControlPlaneReading {
    HostedControlPlaneReading {
        created_at,
        deleting,
        ready: status.is_some_and(|s| s.ready),
        conditions: conditions::read(
            status.map(|s| s.conditions.as_slice()).unwrap_or_default(),
            unknown,
        ),
    }
}

/// The phase table. It has no failed phase: a control plane that does not
/// come up is `progressing` until the hop budget alert fires. The namespace
/// goes when its HostedControlPlane is being deleted, so that deletion is
/// the namespace terminating (watching namespaces for this alone is not
/// worth the RBAC).
pub fn phase(hcp: Option<&HostedControlPlaneReading>, pods: PodCounts) -> Phase {
    match hcp {
        Some(h) if h.deleting.is_some() => Phase::Deleting,
        None => Phase::Pending,
        Some(h) if h.ready && pods.not_ready == 0 => Phase::Ready,
        Some(_) => Phase::Progressing,
    }
}

/// The hop facts of one control-plane namespace.
pub fn read(hcp: Option<&HostedControlPlaneReading>, pods: PodCounts) -> HopView {
    let phase = phase(hcp, pods);
    let state = match (phase, hcp) {
        (Phase::Deleting, _) => "deleting",
        (_, None) => "no HostedControlPlane",
        (Phase::Ready, _) => "ready",
        (_, Some(h)) if !h.ready => "not ready",
        _ => "pods not ready",
    };
    let mut view = HopView::new(state, phase);
    view.pods = Some(pods);
    if let Some(h) = hcp {
        view.created_at = h.created_at;
        // Deleting since its deletionTimestamp (docs/design/15-operations.md §15.3).
        view.since = match phase {
            Phase::Deleting => h.deleting,
            _ => transition_of(&h.conditions, &["Available"]),
        };
        view.conditions = h.conditions.clone();
    }
    view
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hcp(ready: bool, deleting: bool) -> HostedControlPlaneReading {
        HostedControlPlaneReading {
            created_at: None,
            deleting: deleting.then(|| Stamp::from(jiff::Timestamp::UNIX_EPOCH)),
            ready,
            conditions: Arc::default(),
        }
    }

    #[test]
    fn a_deleting_control_plane_is_dated_by_its_deletion_timestamp() {
        let at = Stamp::from(jiff::Timestamp::from_second(1_800_000_000).unwrap_or_default());
        let mut h = hcp(true, false);
        h.deleting = Some(at);
        let view = read(
            Some(&h),
            PodCounts {
                ready: 3,
                not_ready: 0,
            },
        );
        assert_eq!(view.phase, Phase::Deleting);
        assert_eq!(view.since, Some(at));
    }

    #[test]
    fn phase_rows() {
        let pods = |ready, not_ready| PodCounts { ready, not_ready };
        let rows = [
            (None, pods(0, 0), Phase::Pending),
            (None, pods(2, 1), Phase::Pending),
            (Some(hcp(true, true)), pods(3, 0), Phase::Deleting),
            (Some(hcp(false, false)), pods(3, 0), Phase::Progressing),
            (Some(hcp(true, false)), pods(3, 1), Phase::Progressing),
            (Some(hcp(true, false)), pods(3, 0), Phase::Ready),
        ];
        for (h, p, want) in rows {
            assert_eq!(phase(h.as_ref(), p), want, "{h:?} {p:?}");
        }
        assert_eq!(
            read(Some(&hcp(true, false)), pods(3, 1)).state,
            "pods not ready"
        );
    }
}
