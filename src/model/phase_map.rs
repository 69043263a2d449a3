//! The phase tables of DESIGN section 1: one pure function per hop, from the
//! raw upstream state to a [`Phase`].
//!
//! Functions over string enums return `None` for a value they do not know, so
//! the caller maps it to [`Phase::Unknown`] *and* counts it
//! (`hcpflow_unknown_values_total`). Functions over conditions always answer:
//! an unexpected condition simply does not match any rule.
//!
//! These tables are shared by the HTTP sources and the kube watches, so a hop
//! read directly and the same hop read through Maestro feedback agree.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::hop::{ConditionStatus, Phase};
use super::observation::{Condition, PodCounts};

/// How long a HostedCluster may stay `Degraded` without ever having been
/// `Available` before the hop counts as failed, when the caller has no budget
/// of its own. Matches the default creation SLO target: past it the creation
/// is lost anyway, and an SRE wants to see `failed`, not `progressing`.
pub const DEFAULT_DEGRADED_BUDGET: Duration = Duration::from_secs(20 * 60);

/// HostedCluster conditions whose `False` means "will not heal by itself".
pub const HOSTED_CLUSTER_FATAL_CONDITIONS: [&str; 3] = [
    "ValidConfiguration",
    "ValidReleaseImage",
    "ValidReleaseInfo",
];

/// NodePool conditions whose `False` means "will not heal by itself".
pub const NODE_POOL_FATAL_CONDITIONS: [&str; 3] = [
    "ValidReleaseImage",
    "ValidPlatformImage",
    "ValidMachineConfig",
];

/// Reasons the work agent uses when applying a manifest failed.
pub const WORK_APPLY_FAILURE_REASONS: [&str; 3] = [
    "AppliedManifestWorkFailed",
    "AppliedManifestFailed",
    "Failed",
];

/// The condition of this type, if present (the first one: upstream lists each
/// type once).
pub fn find<'a>(conditions: &'a [Condition], kind: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.kind == kind)
}

/// Status of the condition of this type; absent reads as `Unknown`.
pub fn status_of(conditions: &[Condition], kind: &str) -> ConditionStatus {
    find(conditions, kind).map_or(ConditionStatus::Unknown, |c| c.status)
}

fn is_true(conditions: &[Condition], kind: &str) -> bool {
    status_of(conditions, kind) == ConditionStatus::True
}

/// The first of `kinds` whose condition is explicitly `False`.
pub fn first_false<'a>(conditions: &'a [Condition], kinds: &[&str]) -> Option<&'a Condition> {
    kinds
        .iter()
        .find_map(|k| find(conditions, k).filter(|c| c.status == ConditionStatus::False))
}

/// Hop `rp_frontend`: ARM `properties.provisioningState`.
pub fn rp_frontend(provisioning_state: &str) -> Option<Phase> {
    Some(match provisioning_state {
        "Accepted" => Phase::Pending,
        "Provisioning" | "Updating" => Phase::Progressing,
        "Succeeded" => Phase::Ready,
        "Failed" | "Canceled" => Phase::Failed,
        "Deleting" => Phase::Deleting,
        _ => return None,
    })
}

/// Hop `clusters_service`: the cluster's `status.state`. The upstream value
/// `unknown` is a known value that maps to [`Phase::Unknown`] (not counted).
pub fn clusters_service(state: &str) -> Option<Phase> {
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

/// Hops `maestro_bundle` and `manifestwork`: work-level conditions plus a
/// deleting flag (bundle `deleted_at`, ManifestWork `deletionTimestamp`).
/// No conditions at all means the agent has not reported yet.
pub fn work(conditions: &[Condition], deleting: bool) -> Phase {
    if deleting {
        return Phase::Deleting;
    }
    if conditions.is_empty() {
        return Phase::Pending;
    }
    if work_apply_failed(conditions) {
        return Phase::Failed;
    }
    if is_true(conditions, "Applied") && is_true(conditions, "Available") {
        return Phase::Ready;
    }
    Phase::Progressing
}

/// `Degraded` True, or `Applied`/`Progressing` carrying an apply failure
/// reason while not succeeded.
pub fn work_apply_failed(conditions: &[Condition]) -> bool {
    if is_true(conditions, "Degraded") {
        return true;
    }
    conditions.iter().any(|c| {
        let failing_type =
            (c.kind == "Applied" && c.status != ConditionStatus::True) || c.kind == "Progressing";
        failing_type && WORK_APPLY_FAILURE_REASONS.contains(&c.reason.as_str())
    })
}

/// A short, bounded raw state for the work hops, which have no state enum of
/// their own: it names the condition that decides the phase.
pub fn work_state(conditions: &[Condition], deleting: bool) -> &'static str {
    if deleting {
        return "deleting";
    }
    if conditions.is_empty() {
        return "no status yet";
    }
    if is_true(conditions, "Degraded") {
        return "Degraded";
    }
    if work_apply_failed(conditions) {
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

/// Hop `hosted_cluster`. `has_been_available` is what upstream says about the
/// past (annotation `hypershift.openshift.io/HasBeenAvailable`, or a
/// `Completed` version history entry): a cluster that was once Available and
/// is now Degraded is regressing, not failing to be created.
pub fn hosted_cluster(
    conditions: &[Condition],
    deleting: bool,
    has_been_available: bool,
    now: Timestamp,
    degraded_budget: Duration,
) -> Phase {
    if deleting {
        return Phase::Deleting;
    }
    if conditions.is_empty() {
        return Phase::Pending;
    }
    if first_false(conditions, &HOSTED_CLUSTER_FATAL_CONDITIONS).is_some() {
        return Phase::Failed;
    }
    if is_true(conditions, "Available") {
        return Phase::Ready;
    }
    if !has_been_available && degraded_past_budget(conditions, now, degraded_budget) {
        return Phase::Failed;
    }
    Phase::Progressing
}

/// When a Degraded-but-not-yet-failed HostedCluster will cross its budget:
/// the phase changes with time alone, so a poller that only re-reads changed
/// objects must look again then.
pub fn hosted_cluster_degraded_deadline(
    conditions: &[Condition],
    has_been_available: bool,
    degraded_budget: Duration,
) -> Option<Timestamp> {
    if has_been_available || is_true(conditions, "Available") {
        return None;
    }
    let degraded = find(conditions, "Degraded").filter(|c| c.status == ConditionStatus::True)?;
    let since = degraded.last_transition?;
    let budget = SignedDuration::try_from(degraded_budget).ok()?;
    since.checked_add(budget).ok()
}

fn degraded_past_budget(conditions: &[Condition], now: Timestamp, budget: Duration) -> bool {
    hosted_cluster_degraded_deadline(conditions, false, budget)
        .is_some_and(|deadline| now >= deadline)
}

/// What is known of a control plane; the hop reads a HostedControlPlane plus
/// the pods of its namespace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ControlPlaneFacts {
    /// A HostedControlPlane object exists.
    pub exists: bool,
    /// Its `status.ready`.
    pub ready: bool,
    pub pods: PodCounts,
    /// The control-plane namespace is terminating.
    pub namespace_terminating: bool,
}

/// Hop `control_plane`. It has no failed phase: a control plane that does not
/// come up is `progressing` until the hop budget alert fires.
pub fn control_plane(facts: ControlPlaneFacts) -> Phase {
    if facts.namespace_terminating {
        return Phase::Deleting;
    }
    if !facts.exists {
        return Phase::Pending;
    }
    if facts.ready && facts.pods.not_ready == 0 {
        return Phase::Ready;
    }
    Phase::Progressing
}

/// Hop `managed_cluster`. `deleting` is the deletionTimestamp; the `Deleting`
/// condition is only ever set while the cluster is being removed, whatever its
/// status, so its presence alone means deleting.
pub fn managed_cluster(conditions: &[Condition], deleting: bool) -> Phase {
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

/// Hop `node_pool`, one pool. `desired` is `spec.replicas` (None when the
/// pool autoscales or the spec is not visible: then `Ready` alone decides),
/// `ready` the ready node count. Zero desired replicas is ready.
pub fn node_pool(
    conditions: &[Condition],
    deleting: bool,
    desired: Option<u32>,
    ready: u32,
) -> Phase {
    if deleting {
        return Phase::Deleting;
    }
    if first_false(conditions, &NODE_POOL_FATAL_CONDITIONS).is_some() {
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

/// The `node_pool` hop's phase over all pools of a cluster: pending with no
/// pool, failed when one failed, ready when all are ready.
pub fn node_pools(pools: &[Phase]) -> Phase {
    if pools.is_empty() {
        return Phase::Pending;
    }
    for decisive in [Phase::Failed, Phase::Deleting] {
        if pools.contains(&decisive) {
            return decisive;
        }
    }
    if pools.iter().all(|p| *p == Phase::Ready) {
        return Phase::Ready;
    }
    if pools.contains(&Phase::Unknown) {
        return Phase::Unknown;
    }
    if pools.iter().all(|p| *p == Phase::Pending) {
        return Phase::Pending;
    }
    Phase::Progressing
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cond(kind: &str, status: &str) -> Condition {
        Condition {
            kind: kind.to_string(),
            status: ConditionStatus::from_upstream(status),
            reason: String::new(),
            message: String::new(),
            last_transition: None,
        }
    }

    fn cond_at(kind: &str, status: &str, at: &str) -> Condition {
        Condition {
            last_transition: Some(at.parse().unwrap()),
            ..cond(kind, status)
        }
    }

    fn cond_reason(kind: &str, status: &str, reason: &str) -> Condition {
        Condition {
            reason: reason.to_string(),
            ..cond(kind, status)
        }
    }

    #[test]
    fn rp_frontend_maps_all_seven_states() {
        let rows = [
            ("Accepted", Phase::Pending),
            ("Provisioning", Phase::Progressing),
            ("Updating", Phase::Progressing),
            ("Succeeded", Phase::Ready),
            ("Failed", Phase::Failed),
            ("Canceled", Phase::Failed),
            ("Deleting", Phase::Deleting),
        ];
        for (state, phase) in rows {
            assert_eq!(rp_frontend(state), Some(phase), "{state}");
        }
        assert_eq!(rp_frontend("Migrating"), None);
        assert_eq!(
            rp_frontend("succeeded"),
            None,
            "ARM enums are case-sensitive"
        );
    }

    #[test]
    fn clusters_service_maps_all_twelve_states() {
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
        for (state, phase) in rows {
            assert_eq!(clusters_service(state), Some(phase), "{state}");
        }
        assert_eq!(clusters_service("frobnicating"), None);
        assert_eq!(clusters_service(""), None);
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
        for (conditions, deleting, phase, state) in rows {
            assert_eq!(
                work(&conditions, deleting),
                phase,
                "{conditions:?} deleting={deleting}"
            );
            assert_eq!(work_state(&conditions, deleting), state, "{conditions:?}");
        }
    }

    #[test]
    fn hosted_cluster_rows() {
        let now: Timestamp = "2026-01-01T01:00:00Z".parse().unwrap();
        let budget = Duration::from_secs(30 * 60);
        let available = cond("Available", "True");
        let unavailable = cond("Available", "False");
        let degraded_long = cond_at("Degraded", "True", "2026-01-01T00:00:00Z");
        let degraded_short = cond_at("Degraded", "True", "2026-01-01T00:45:00Z");
        let rows: Vec<(Vec<Condition>, bool, bool, Phase)> = vec![
            (vec![], false, false, Phase::Pending),
            (vec![available.clone()], true, false, Phase::Deleting),
            (vec![available.clone()], false, false, Phase::Ready),
            (vec![unavailable.clone()], false, false, Phase::Progressing),
            (
                vec![cond("Progressing", "True")],
                false,
                false,
                Phase::Progressing,
            ),
            (
                vec![unavailable.clone(), cond("ValidConfiguration", "False")],
                false,
                false,
                Phase::Failed,
            ),
            (
                vec![unavailable.clone(), cond("ValidReleaseImage", "False")],
                false,
                false,
                Phase::Failed,
            ),
            (
                vec![unavailable.clone(), cond("ValidReleaseInfo", "False")],
                false,
                false,
                Phase::Failed,
            ),
            // Fatal even after having been available: it will not heal.
            (
                vec![available.clone(), cond("ValidReleaseImage", "False")],
                false,
                true,
                Phase::Failed,
            ),
            (
                vec![unavailable.clone(), cond("ValidReleaseImage", "True")],
                false,
                false,
                Phase::Progressing,
            ),
            (
                vec![unavailable.clone(), degraded_long.clone()],
                false,
                false,
                Phase::Failed,
            ),
            (
                vec![unavailable.clone(), degraded_short.clone()],
                false,
                false,
                Phase::Progressing,
            ),
            // Was available once: a regression, not a failed creation.
            (
                vec![unavailable.clone(), degraded_long.clone()],
                false,
                true,
                Phase::Progressing,
            ),
            (
                vec![available.clone(), degraded_long.clone()],
                false,
                false,
                Phase::Ready,
            ),
            // Degraded without a transition time: the budget cannot be judged.
            (
                vec![unavailable.clone(), cond("Degraded", "True")],
                false,
                false,
                Phase::Progressing,
            ),
        ];
        for (conditions, deleting, was_available, phase) in rows {
            assert_eq!(
                hosted_cluster(&conditions, deleting, was_available, now, budget),
                phase,
                "{conditions:?} deleting={deleting} was_available={was_available}"
            );
        }
    }

    #[test]
    fn hosted_cluster_degraded_deadline_is_transition_plus_budget() {
        let budget = Duration::from_secs(600);
        let conditions = vec![
            cond("Available", "False"),
            cond_at("Degraded", "True", "2026-01-01T00:00:00Z"),
        ];
        let deadline = hosted_cluster_degraded_deadline(&conditions, false, budget);
        assert_eq!(deadline, Some("2026-01-01T00:10:00Z".parse().unwrap()));
        assert_eq!(
            hosted_cluster_degraded_deadline(&conditions, true, budget),
            None
        );
        let just_before: Timestamp = "2026-01-01T00:09:59Z".parse().unwrap();
        let at: Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
        assert_eq!(
            hosted_cluster(&conditions, false, false, just_before, budget),
            Phase::Progressing
        );
        assert_eq!(
            hosted_cluster(&conditions, false, false, at, budget),
            Phase::Failed
        );
    }

    #[test]
    fn control_plane_rows() {
        let pods = |ready, not_ready| PodCounts { ready, not_ready };
        let rows = [
            (ControlPlaneFacts::default(), Phase::Pending),
            (
                ControlPlaneFacts {
                    exists: true,
                    ready: true,
                    pods: pods(3, 0),
                    namespace_terminating: true,
                },
                Phase::Deleting,
            ),
            (
                ControlPlaneFacts {
                    exists: true,
                    ready: false,
                    pods: pods(3, 0),
                    ..Default::default()
                },
                Phase::Progressing,
            ),
            (
                ControlPlaneFacts {
                    exists: true,
                    ready: true,
                    pods: pods(3, 1),
                    ..Default::default()
                },
                Phase::Progressing,
            ),
            (
                ControlPlaneFacts {
                    exists: true,
                    ready: true,
                    pods: pods(3, 0),
                    ..Default::default()
                },
                Phase::Ready,
            ),
        ];
        for (facts, phase) in rows {
            assert_eq!(control_plane(facts), phase, "{facts:?}");
        }
    }

    #[test]
    fn managed_cluster_rows() {
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
                    cond_reason("Deleting", "False", "ResourceRemaining"),
                ],
                false,
                Phase::Deleting,
            ),
        ];
        for (conditions, deleting, phase) in rows {
            assert_eq!(
                managed_cluster(&conditions, deleting),
                phase,
                "{conditions:?} deleting={deleting}"
            );
        }
    }

    #[test]
    fn node_pool_rows() {
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
        for (conditions, deleting, desired, ready_nodes, phase) in rows {
            assert_eq!(
                node_pool(&conditions, deleting, desired, ready_nodes),
                phase,
                "{conditions:?} deleting={deleting} desired={desired:?} ready={ready_nodes}"
            );
        }
    }

    #[test]
    fn node_pools_aggregate() {
        use Phase::*;
        let rows: Vec<(Vec<Phase>, Phase)> = vec![
            (vec![], Pending),
            (vec![Ready, Ready], Ready),
            (vec![Ready, Progressing], Progressing),
            (vec![Ready, Pending], Progressing),
            (vec![Pending, Pending], Pending),
            (vec![Ready, Failed, Progressing], Failed),
            (vec![Ready, Deleting], Deleting),
            (vec![Ready, Unknown], Unknown),
        ];
        for (pools, phase) in rows {
            assert_eq!(node_pools(&pools), phase, "{pools:?}");
        }
    }
}
