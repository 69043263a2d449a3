//! Hop `hosted_cluster`: a HostedCluster's `.status`, read from a kube watch
//! or from the status feedback a Maestro bundle nests.

use serde::Deserialize;

use super::conditions::{self, WireCondition, find, first_false, is_true, transition_of};
use super::{UnknownValue, null_default, parse_time};
use crate::model::{ConditionStatus, FailsAfterBudget, HopView, Phase, Rollout};

/// Conditions whose `False` means "will not heal by itself".
pub const FATAL_CONDITIONS: [&str; 3] = [
    "ValidConfiguration",
    "ValidReleaseImage",
    "ValidReleaseInfo",
];

/// HyperShift's annotation once a HostedCluster was first Available.
pub const HAS_BEEN_AVAILABLE_ANNOTATION: &str = "hypershift.openshift.io/HasBeenAvailable";

/// A HostedCluster `.status`, the fields read.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct HostedClusterStatus {
    #[serde(default, deserialize_with = "null_default")]
    pub conditions: Vec<WireCondition>,
    #[serde(default)]
    pub version: Option<ClusterVersionStatus>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ClusterVersionStatus {
    /// The release being rolled out (ahead of `history[0]` until the
    /// cluster version operator starts on it).
    #[serde(default)]
    pub desired: Option<Release>,
    /// Newest first.
    #[serde(default, deserialize_with = "null_default")]
    pub history: Vec<VersionHistory>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Release {
    #[serde(default, deserialize_with = "null_default")]
    pub version: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionHistory {
    /// `Partial` or `Completed`.
    #[serde(default, deserialize_with = "null_default")]
    pub state: String,
    #[serde(default, deserialize_with = "null_default")]
    pub version: String,
    #[serde(default)]
    pub started_time: Option<String>,
    #[serde(default)]
    pub completion_time: Option<String>,
}

/// The rollout a HostedCluster's version status reports
/// (docs/design/15-operations.md §15.10): `history[0]`, an upgrade when an older entry
/// exists; or the `desired` version while the history has not started on
/// it (no upstream start yet). `None` without a version.
pub fn rollout(
    version: Option<&ClusterVersionStatus>,
    unknown: &mut Vec<UnknownValue>,
) -> Option<Rollout> {
    let version = version?;
    let history = version.history.as_slice();
    let desired = version
        .desired
        .as_ref()
        .map(|d| d.version.as_str())
        .filter(|v| !v.is_empty());
    let newest = history.first().filter(|h| !h.version.is_empty());
    match (newest, desired) {
        (Some(newest), Some(desired)) if desired != newest.version => Some(Rollout {
            target: desired.to_string(),
            started_at: None,
            completed: false,
            completed_at: None,
            upgrade: history.iter().any(|h| h.state == "Completed"),
        }),
        (Some(newest), _) => {
            let completed = newest.state == "Completed";
            Some(Rollout {
                target: newest.version.clone(),
                started_at: parse_time(
                    newest.started_time.as_deref(),
                    "status.version.history.startedTime",
                    unknown,
                ),
                completed,
                completed_at: if completed {
                    parse_time(
                        newest.completion_time.as_deref(),
                        "status.version.history.completionTime",
                        unknown,
                    )
                } else {
                    None
                },
                upgrade: history[1..].iter().any(|h| h.state == "Completed"),
            })
        }
        (None, Some(desired)) => Some(Rollout {
            target: desired.to_string(),
            started_at: None,
            completed: false,
            completed_at: None,
            upgrade: false,
        }),
        (None, None) => None,
    }
}

/// What one HostedCluster says, whichever way it was read.
#[derive(Clone, Debug, PartialEq)]
pub struct HostedClusterReading {
    /// Phase, state, since, every condition, failure and the time-driven
    /// failure (never Available, Degraded past the hop budget).
    pub view: HopView,
    /// The newest `Completed` version of the history.
    pub version: Option<String>,
    /// Available once: now Degraded is a regression, not a failed creation.
    pub has_been_available: bool,
    /// The upgrade its version status reports, if any (in progress or
    /// rolled out). Beside the view, not in it: whoever emits the view puts
    /// it in the view's identity patch, so a reading kept for later (the
    /// kube mapper's) costs a pointer, not a patch.
    pub rollout: Option<Box<Rollout>>,
}

/// Read a HostedCluster. `deleting`: its deletionTimestamp (or, through
/// Maestro, its work being deleted). `annotated_available`: the
/// HasBeenAvailable annotation, which only the object's metadata carries.
pub fn read(
    status: Option<&HostedClusterStatus>,
    deleting: bool,
    annotated_available: bool,
    unknown: &mut Vec<UnknownValue>,
) -> HostedClusterReading {
    let history = status
        .and_then(|s| s.version.as_ref())
        .map(|v| v.history.as_slice())
        .unwrap_or_default();
    let completed = history.iter().find(|h| h.state == "Completed");
    let has_been_available = annotated_available || completed.is_some();
    let conds = conditions::read(
        status.map(|s| s.conditions.as_slice()).unwrap_or_default(),
        unknown,
    );
    let fatal = first_false(&conds, &FATAL_CONDITIONS);
    let degraded = find(&conds, "Degraded").filter(|c| c.status == ConditionStatus::True);
    let phase = if deleting {
        Phase::Deleting
    } else if conds.is_empty() {
        Phase::Pending
    } else if fatal.is_some() {
        Phase::Failed
    } else if is_true(&conds, "Available") {
        Phase::Ready
    } else {
        Phase::Progressing
    };
    let state = match phase {
        Phase::Deleting => "deleting".to_string(),
        Phase::Pending => "no status yet".to_string(),
        Phase::Failed => fatal.map_or_else(String::new, |c| format!("{}=False", c.kind)),
        // `oc get hc`'s Progress column tells rolled-out from not yet.
        Phase::Ready => match history.first().map(|h| h.state.as_str()) {
            Some(progress) if !progress.is_empty() => format!("Available/{progress}"),
            _ => "Available".to_string(),
        },
        _ if degraded.is_some() => "Degraded".to_string(),
        // Installed once (its first release rolled out) and down now: a
        // regression, not an installation still under way, which a first
        // sync could not tell otherwise (docs/design/15-operations.md §15.7).
        _ if history.first().is_some_and(|h| h.state == "Completed") => {
            crate::model::INSTALLED_NOT_AVAILABLE.to_string()
        }
        _ => "NotAvailable".to_string(),
    };
    let since = match fatal {
        Some(c) if phase == Phase::Failed => c.last_transition,
        _ => transition_of(&conds, &["Available"]),
    };
    let error = match phase {
        Phase::Failed => fatal.map(conditions::failure),
        _ => None,
    };
    // Degraded and never Available: failed once it outlasts the hop budget,
    // which only the model's clock can tell.
    let fails_after_budget = match (phase, degraded) {
        (Phase::Progressing, Some(d)) if !has_been_available => {
            d.last_transition.map(|since| FailsAfterBudget {
                since: since.into(),
                error: conditions::failure(d),
            })
        }
        _ => None,
    };
    let view = HopView {
        since,
        error: error.map(Box::new),
        fails_after_budget: fails_after_budget.map(Box::new),
        conditions: conds,
        ..HopView::new(&state, phase)
    };
    // Only an upgrade's rollout: the installation's is the creation's.
    let rollout = rollout(status.and_then(|s| s.version.as_ref()), unknown)
        .filter(|r| r.upgrade)
        .map(Box::new);
    HostedClusterReading {
        view,
        version: completed
            .map(|h| h.version.clone())
            .filter(|v| !v.is_empty()),
        has_been_available,
        rollout,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cond(kind: &str, status: &str, at: Option<&str>) -> WireCondition {
        WireCondition {
            kind: kind.to_string(),
            status: status.to_string(),
            reason: format!("{kind}Reason"),
            message: String::new(),
            last_transition_time: at.map(str::to_string),
        }
    }

    fn status(conditions: Vec<WireCondition>, history: &[&str]) -> HostedClusterStatus {
        HostedClusterStatus {
            conditions,
            version: Some(ClusterVersionStatus {
                desired: None,
                history: history
                    .iter()
                    .map(|s| VersionHistory {
                        state: s.to_string(),
                        version: "4.20.0".to_string(),
                        started_time: None,
                        completion_time: None,
                    })
                    .collect(),
            }),
        }
    }

    #[test]
    fn phase_state_and_time_driven_failure_rows() {
        let at = Some("2026-01-01T00:00:00Z");
        let available = cond("Available", "True", at);
        let unavailable = cond("Available", "False", at);
        let degraded = cond("Degraded", "True", at);
        // (conditions, history, deleting, annotated, phase, state, fails later)
        type Row = (
            Vec<WireCondition>,
            Vec<&'static str>,
            bool,
            bool,
            Phase,
            &'static str,
            bool,
        );
        #[rustfmt::skip]
        let rows: Vec<Row> = vec![
            (vec![], vec![], false, false, Phase::Pending, "no status yet", false),
            (vec![available.clone()], vec![], true, false, Phase::Deleting, "deleting", false),
            (vec![available.clone()], vec!["Completed"], false, false, Phase::Ready, "Available/Completed", false),
            (vec![available.clone()], vec!["Partial"], false, false, Phase::Ready, "Available/Partial", false),
            (vec![available.clone()], vec![], false, false, Phase::Ready, "Available", false),
            (vec![unavailable.clone()], vec![], false, false, Phase::Progressing, "NotAvailable", false),
            (vec![unavailable.clone()], vec!["Completed"], false, false, Phase::Progressing, "NotAvailable/Completed", false),
            (vec![unavailable.clone(), cond("ValidConfiguration", "False", at)], vec![], false, false, Phase::Failed, "ValidConfiguration=False", false),
            (vec![unavailable.clone(), cond("ValidReleaseImage", "False", at)], vec![], false, false, Phase::Failed, "ValidReleaseImage=False", false),
            (vec![unavailable.clone(), cond("ValidReleaseInfo", "False", at)], vec![], false, false, Phase::Failed, "ValidReleaseInfo=False", false),
            // Fatal even after having been available: it will not heal.
            (vec![available.clone(), cond("ValidReleaseImage", "False", at)], vec!["Completed"], false, false, Phase::Failed, "ValidReleaseImage=False", false),
            (vec![unavailable.clone(), degraded.clone()], vec![], false, false, Phase::Progressing, "Degraded", true),
            // Was available once: a regression, never a failed creation.
            (vec![unavailable.clone(), degraded.clone()], vec!["Completed"], false, false, Phase::Progressing, "Degraded", false),
            (vec![unavailable.clone(), degraded.clone()], vec![], false, true, Phase::Progressing, "Degraded", false),
            (vec![available.clone(), degraded.clone()], vec![], false, false, Phase::Ready, "Available", false),
            // Degraded without a transition time: the budget cannot be judged.
            (vec![unavailable.clone(), cond("Degraded", "True", None)], vec![], false, false, Phase::Progressing, "Degraded", false),
        ];
        for (conditions, history, deleting, annotated, phase, state, fails) in rows {
            let s = status(conditions.clone(), &history);
            let r = read(Some(&s), deleting, annotated, &mut Vec::new());
            let what =
                format!("{conditions:?} {history:?} deleting={deleting} annotated={annotated}");
            assert_eq!(r.view.phase, phase, "{what}");
            assert_eq!(r.view.state, state, "{what}");
            assert_eq!(r.view.fails_after_budget.is_some(), fails, "{what}");
        }
    }

    #[test]
    fn a_fatal_condition_names_its_reason_and_time() {
        let s = status(
            vec![
                cond("Available", "False", Some("2026-01-01T00:00:00Z")),
                cond("ValidReleaseImage", "False", Some("2026-01-01T00:03:00Z")),
            ],
            &[],
        );
        let r = read(Some(&s), false, false, &mut Vec::new());
        let error = r.view.error.unwrap();
        assert_eq!(error.code, "ValidReleaseImageReason");
        assert_eq!(r.view.since, Some("2026-01-01T00:03:00Z".parse().unwrap()));
    }

    #[test]
    fn degraded_failure_starts_at_the_degraded_transition() {
        let s = status(
            vec![
                cond("Available", "False", Some("2026-01-01T00:00:00Z")),
                cond("Degraded", "True", Some("2026-01-01T00:05:00Z")),
            ],
            &["Partial"],
        );
        let r = read(Some(&s), false, false, &mut Vec::new());
        let later = r.view.fails_after_budget.unwrap();
        assert_eq!(later.since, "2026-01-01T00:05:00Z".parse().unwrap());
        assert_eq!(later.error.code, "DegradedReason");
        assert_eq!(r.version, None, "no Completed entry yet");
    }

    fn entry(state: &str, version: &str, started: &str, completed: Option<&str>) -> VersionHistory {
        VersionHistory {
            state: state.to_string(),
            version: version.to_string(),
            started_time: Some(started.to_string()),
            completion_time: completed.map(str::to_string),
        }
    }

    #[test]
    fn the_version_status_says_which_upgrade_is_rolling_out() {
        let t0 = "2026-11-27T09:00:00Z";
        let t1 = "2026-11-27T10:00:00Z";
        let t2 = "2026-11-27T10:40:00Z";
        let installed = entry("Completed", "4.19.9", t0, Some(t0));
        // (desired, history, want: target, completed, upgrade, started, completed_at)
        type Want<'a> = Option<(&'a str, bool, bool, Option<&'a str>, Option<&'a str>)>;
        let rows: Vec<(Option<&str>, Vec<VersionHistory>, Want<'_>)> = vec![
            // The installation: one entry, not an upgrade.
            (
                None,
                vec![entry("Partial", "4.19.9", t0, None)],
                Some(("4.19.9", false, false, Some(t0), None)),
            ),
            (
                Some("4.19.9"),
                vec![installed.clone()],
                Some(("4.19.9", true, false, Some(t0), Some(t0))),
            ),
            // Asked for, not started by the version operator yet: no upstream start.
            (
                Some("4.20.2"),
                vec![installed.clone()],
                Some(("4.20.2", false, true, None, None)),
            ),
            // Rolling out, then rolled out: HyperShift's own times.
            (
                Some("4.20.2"),
                vec![entry("Partial", "4.20.2", t1, None), installed.clone()],
                Some(("4.20.2", false, true, Some(t1), None)),
            ),
            (
                Some("4.20.2"),
                vec![
                    entry("Completed", "4.20.2", t1, Some(t2)),
                    installed.clone(),
                ],
                Some(("4.20.2", true, true, Some(t1), Some(t2))),
            ),
            (None, vec![], None),
        ];
        for (desired, history, want) in rows {
            let version = ClusterVersionStatus {
                desired: desired.map(|v| Release {
                    version: v.to_string(),
                }),
                history,
            };
            let mut unknown = Vec::new();
            let got = rollout(Some(&version), &mut unknown).map(|r| {
                (
                    r.target,
                    r.completed,
                    r.upgrade,
                    r.started_at.map(|s| s.to_string()),
                    r.completed_at.map(|s| s.to_string()),
                )
            });
            let want = want.map(|(t, c, u, s, e)| {
                (
                    t.to_string(),
                    c,
                    u,
                    s.map(str::to_string),
                    e.map(str::to_string),
                )
            });
            assert_eq!(got, want, "{desired:?} {:?}", version.history);
            assert!(unknown.is_empty());
            // The reading carries an upgrade's rollout only.
            let status = HostedClusterStatus {
                conditions: vec![],
                version: Some(version),
            };
            let reading = read(Some(&status), false, false, &mut unknown);
            assert_eq!(
                reading.rollout.map(|r| r.target),
                got.filter(|g| g.2).map(|g| g.0)
            );
        }
    }
}
