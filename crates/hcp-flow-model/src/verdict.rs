//! Where a creation stands, in one word and one sentence: the verdict that
//! the JSON, the web UI and `diagnose` share (docs/design/03-timeline-model.md §3.9).
//!
//! Pure: the timeline, the budgets, the fleet's p95 per hop and `now` in, a
//! [`Verdict`] out, so the three readers can never disagree.

use jiff::Timestamp;
use serde::Serialize;

use super::budget::{HopBudgets, OperationBudgets};
use super::hop::{ConditionStatus, Hop, Phase};
use super::operation::{DELETE, OperationKind, OperationOutcome};
use super::quantile::HopP95;
use super::stamp::Stamp;
use super::timeline::{CreationOutcome, HopTimeline, Timeline};

/// The verdict's one word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The creation completed and no hop has been not ready past its budget since.
    Ready,
    /// Every not-ready hop is within its fleet p95 (or the fleet has too few
    /// durations for one) and its budget.
    InProgress,
    /// A not-ready hop has taken longer than the fleet's p95 for it, but not
    /// yet its budget.
    AtRisk,
    /// The operation in flight has waited at a hop for at least its budget
    /// (a creation: pending, progressing or unknown; a deletion: deleting).
    Stuck,
    /// A hop no open operation holds regressed (at once) or never became
    /// ready past its creation budget. A health state, not a verdict on a
    /// finished operation (docs/design/15-operations.md §15.7).
    Degraded,
    /// A hop failed.
    Failed,
    /// Deleted before it completed.
    Deleted,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ready => "ready",
            Status::InProgress => "in_progress",
            Status::AtRisk => "at_risk",
            Status::Stuck => "stuck",
            Status::Degraded => "degraded",
            Status::Failed => "failed",
            Status::Deleted => "deleted",
        }
    }

    /// Every status, best first.
    pub const ALL: [Status; 7] = [
        Status::Ready,
        Status::InProgress,
        Status::AtRisk,
        Status::Stuck,
        Status::Degraded,
        Status::Failed,
        Status::Deleted,
    ];

    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// The verdict on one cluster: on its operation in flight, else on the
/// last one and the cluster's health since.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    pub status: Status,
    /// The operation judged: the one in flight, else the one that ended
    /// last; none for a `degraded` cluster, whose operations all ended.
    pub operation: Option<OperationKind>,
    /// The hop the verdict is about: the failed one, the stuck or at-risk one,
    /// or where an in-flight creation is now. None when ready or deleted.
    pub hop: Option<Hop>,
    /// When that hop entered its current phase.
    pub since: Option<Timestamp>,
    pub elapsed_seconds: Option<f64>,
    pub budget_seconds: Option<f64>,
    /// The fleet's p95 for that hop, when there are enough durations.
    pub p95_seconds: Option<f64>,
    /// One sentence for a person: "stuck at maestro_bundle for 14m (budget
    /// 10m): Applied=False, reason …".
    pub reason: String,
}

fn not_ready(phase: Phase) -> bool {
    matches!(phase, Phase::Pending | Phase::Progressing | Phase::Unknown)
}

fn seconds(from: impl Into<Timestamp>, to: impl Into<Timestamp>) -> f64 {
    let (from, to) = (from.into(), to.into());
    ((to.as_millisecond() - from.as_millisecond()).max(0)) as f64 / 1000.0
}

/// Since when a not-ready hop has been waiting: its phase's start, or
/// earlier when upstream last reported before that (a bundle whose status
/// froze: `HCPMaestroStatusNotUpdated` counts from the last update).
fn waiting_since(h: &HopTimeline) -> Stamp {
    match h.status_updated_at() {
        Some(updated) if updated < h.since.at => updated,
        _ => h.since.at,
    }
}

/// "14m", "2h5m", "40s": how long, for a person.
pub fn human(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 if s.is_multiple_of(60) => format!("{}m", s / 60),
        60..3600 => format!("{}m{}s", s / 60, s % 60),
        _ if s % 3600 / 60 == 0 => format!("{}h", s / 3600),
        _ => format!("{}h{}m", s / 3600, s % 3600 / 60),
    }
}

/// What explains a hop's state: its error, else its first condition in a bad
/// state, else its raw state.
pub fn explain(hop: &HopTimeline) -> String {
    if let Some(error) = hop.error() {
        return if error.message.is_empty() {
            error.code.clone()
        } else {
            format!("{}: {}", error.code, error.message)
        };
    }
    let bad = hop
        .conditions()
        .find(|(_, c)| c.meaning() != super::condition::Meaning::Good);
    if let Some((object, c)) = bad {
        let status = match c.status {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        };
        let mut out = format!("{}={status}", c.kind);
        if !object.is_empty() {
            out = format!("{object}: {out}");
        }
        if !c.reason.is_empty() {
            out.push_str(&format!(", reason {}", c.reason));
        }
        if !c.message.is_empty() {
            out.push_str(&format!(": {}", c.message));
        }
        return out;
    }
    if hop.state.is_empty() {
        "no state reported".to_string()
    } else {
        format!("state {}", hop.state)
    }
}

/// The hop that broke a failed creation (docs/design/03-timeline-model.md §3.9), for the
/// verdict and the creation's trace alike. The RP and Clusters Service fail
/// because something after them did: the first of the other failed hops to
/// fail (a HostedCluster whose release image is invalid fails before its
/// NodePools, which report the same image), else the deeper of those two.
pub fn failed_hop(timeline: &Timeline) -> Option<(Hop, &HopTimeline)> {
    let umbrella = |hop: &Hop| matches!(hop, Hop::RpFrontend | Hop::ClustersService);
    timeline
        .hops
        .iter()
        .filter(|(hop, h)| h.phase == Phase::Failed && !umbrella(hop))
        .min_by_key(|(hop, h)| (h.since.at, **hop))
        .or_else(|| {
            timeline
                .hops
                .iter()
                .rev()
                .find(|(_, h)| h.phase == Phase::Failed)
        })
        .map(|(hop, h)| (*hop, h))
}

/// The verdict on `timeline` at `now` (docs/design/03-timeline-model.md §3.9, §15.7): a
/// deletion in flight alone, else the worst of the cluster's open
/// operations and of the hops none of them holds. The creation, while open:
/// - a deletion in flight: `failed` when the RP or Clusters Service failed
///   it; `stuck` at the first hop on the deletion's flow that has been
///   deleting for at least its deletion budget (everything after it waits
///   on it); else `in_progress` at the first hop still deleting;
/// - deleted before completion: `deleted`;
/// - a creation that failed: `failed`, naming the first hop after Clusters
///   Service to fail, else Clusters Service, else the RP;
/// - a creation in flight with a hop not ready for at least its budget:
///   `stuck`, naming the deepest such hop on the path — the RP and Clusters
///   Service stay not ready for as long as anything after them is, so the
///   deepest stuck hop is the cause;
/// - in flight with a not-ready hop past the fleet's p95 for it: `at_risk`,
///   the deepest such hop;
/// - in flight otherwise: `in_progress`, at the deepest not-ready hop;
/// - each day-2 operation in flight by [`operation_verdict`], one that
///   failed and is still shown `failed`;
/// - a hop no open operation holds: `degraded` at once when it regressed or
///   failed, past its creation budget when it never became ready;
/// - nothing open, nothing regressed: `ready`.
pub fn verdict(
    timeline: &Timeline,
    budgets: &OperationBudgets,
    p95: &HopP95,
    now: Timestamp,
) -> Verdict {
    if let Some(deletion) = timeline.deletion.as_deref()
        && matches!(
            deletion.outcome,
            OperationOutcome::InFlight | OperationOutcome::Failed
        )
    {
        return deletion_verdict(timeline, &budgets.delete, now);
    }
    if timeline.outcome == CreationOutcome::Deleted {
        return creation_verdict(timeline, &budgets.create, p95, now);
    }
    // Every operation open on the cluster, each by its own flow and budgets;
    // then the hops none of them holds, by what they read now.
    let mut judged: Vec<Verdict> = Vec::new();
    // A creation that failed stays open while a hop still reads failed; one
    // whose hops recovered since is judged by its health, like one that
    // completed.
    let creation_open = timeline.in_flight()
        || (timeline.outcome == CreationOutcome::Failed && failed_hop(timeline).is_some());
    if creation_open {
        judged.push(creation_verdict(timeline, &budgets.create, p95, now));
    }
    for op in timeline.day2_operations() {
        if op.in_flight() {
            judged.push(operation_verdict(timeline, op, budgets, now));
        } else if op.outcome == OperationOutcome::Failed {
            judged.push(failed_operation_verdict(timeline, op, budgets, now));
        }
    }
    let held = held_hops(timeline, creation_open);
    judged.extend(degraded_hops(timeline, &held, &budgets.create, now));
    // The worst wins (failed, degraded, stuck, at risk, in progress); of
    // equals, the first: the creation, then the operations oldest first.
    let mut worst: Option<Verdict> = None;
    for v in judged {
        if worst.as_ref().is_none_or(|w| v.status > w.status) {
            worst = Some(v);
        }
    }
    worst.unwrap_or_else(|| ready(timeline))
}

/// The hops an operation open on the cluster holds, judged by it alone
/// (docs/design/15-operations.md §15.7): every hop while the creation is open; a
/// deletion's are judged before this; a pool's operation holds the
/// cluster's `node_pool` hop and the bundle and ManifestWork that carry the
/// pool (at the RP and Clusters Service a pool is a resource of its own);
/// an upgrade the RP, Clusters Service, the
/// HostedCluster and the control plane it rolls out. An upgrade settling
/// (rolled out, the RP or Clusters Service still updating) holds its hops
/// until they settle.
fn held_hops(timeline: &Timeline, creation_open: bool) -> Vec<Hop> {
    if creation_open {
        return Hop::ALL.to_vec();
    }
    let mut held = Vec::new();
    for op in timeline
        .day2_operations()
        .filter(|op| op.in_flight() || op.settling() || op.outcome == OperationOutcome::Failed)
    {
        let hops: &[Hop] = match op.kind {
            // The pool's bundle and ManifestWork carry its NodePool: they
            // are its operation's to judge while it runs (a bundle never
            // applied is that pool's creation stuck), at the price of not
            // telling the cluster's own bundle regressing meanwhile.
            OperationKind::NodePoolCreate
            | OperationKind::NodePoolDelete
            | OperationKind::NodePoolUpgrade => {
                &[Hop::MaestroBundle, Hop::Manifestwork, Hop::NodePool]
            }
            OperationKind::Upgrade => &[
                Hop::RpFrontend,
                Hop::ClustersService,
                Hop::HostedCluster,
                Hop::ControlPlane,
            ],
            OperationKind::Create | OperationKind::Delete => &Hop::ALL,
        };
        held.extend_from_slice(hops);
    }
    held
}

/// The hops no open operation holds that are not ready now: a hop that was
/// ready and regressed (or failed) is `degraded` at once, with how long
/// (docs/design/15-operations.md §15.7; the alerts keep their own thresholds); one never
/// ready since the creation completed (a service still catching up with the
/// HostedCluster) only past its creation budget. The deepest first, so the
/// cause leads: the RP and Clusters Service read not ready for as long as
/// what is beneath them is. Hops Maestro carries, unknown because their
/// bundle has no status, inherit its silence and are not named.
fn degraded_hops(
    timeline: &Timeline,
    held: &[Hop],
    budgets: &HopBudgets,
    now: Timestamp,
) -> Option<Verdict> {
    let bundle_waits = timeline
        .hop(Hop::MaestroBundle)
        .is_some_and(|h| not_ready(h.phase) && !held.contains(&Hop::MaestroBundle));
    let (hop, h) = timeline
        .hops
        .iter()
        .filter(|(hop, _)| !held.contains(hop))
        .filter(|(_, h)| h.phase == Phase::Failed || not_ready(h.phase))
        .filter(|(hop, h)| {
            h.phase == Phase::Failed
                || h.ready_at.is_some()
                || seconds(waiting_since(h), now) >= budgets.get(**hop).as_secs_f64()
        })
        .filter(|(_, h)| {
            !(bundle_waits && h.via == super::hop::Via::Maestro && h.phase == Phase::Unknown)
        })
        .max_by_key(|(hop, h)| (h.phase == Phase::Failed, hop.index()))?;
    let since = if h.phase == Phase::Failed {
        h.since.at
    } else {
        waiting_since(h)
    };
    let elapsed = seconds(since, now);
    let reason = if h.phase == Phase::Failed {
        format!(
            "degraded: {hop} failed {} ago: {}",
            human(elapsed),
            explain(h)
        )
    } else if h.ready_at.is_some() {
        format!(
            "degraded: {hop} not ready again for {}, no operation in flight there: {}",
            human(elapsed),
            explain(h)
        )
    } else {
        format!(
            "degraded: {hop} not ready for {} (budget {}), after the creation completed: {}",
            human(elapsed),
            human(budgets.get(*hop).as_secs_f64()),
            explain(h)
        )
    };
    Some(Verdict {
        status: Status::Degraded,
        operation: None,
        hop: Some(*hop),
        since: Some(since.into()),
        elapsed_seconds: Some(elapsed),
        budget_seconds: None,
        p95_seconds: None,
        reason,
    })
}

/// Nothing open and nothing regressed: the creation's end says the rest.
fn ready(timeline: &Timeline) -> Verdict {
    let reason = match timeline.completed_at {
        Some(done) => format!(
            "completed in {}",
            human(seconds(timeline.created_at.at, done))
        ),
        None => "completed".to_string(),
    };
    Verdict {
        status: Status::Ready,
        operation: Some(OperationKind::Create),
        hop: None,
        since: timeline.completed_at.map(Into::into),
        elapsed_seconds: None,
        budget_seconds: None,
        p95_seconds: None,
        reason,
    }
}

/// A day-2 operation that failed and is still shown (a pool's, while a hop
/// shows the pool; an upgrade's, while its object reports the target).
fn failed_operation_verdict(
    timeline: &Timeline,
    op: &super::operation::Operation,
    budgets: &OperationBudgets,
    now: Timestamp,
) -> Verdict {
    let mut v = operation_verdict(timeline, op, budgets, now);
    let hop = op.failed_hop.unwrap_or_else(|| op.waiting_hop());
    let at = op.ended_at.unwrap_or(op.started_at.at);
    let mut what = op.kind.as_str().to_string();
    if let Some(pool) = op.node_pool() {
        what.push_str(&format!(" of node pool {pool}"));
    }
    if let Some(version) = op.target_version() {
        what.push_str(&format!(" to {version}"));
    }
    let detail = match op
        .node_pool()
        .filter(|_| matches!(hop, Hop::RpFrontend | Hop::ClustersService))
    {
        Some(pool) => timeline
            .pool_reading_of(hop, pool)
            .map(|r| format!("the pool reads \"{}\" there", r.state.view.state))
            .unwrap_or_default(),
        None => timeline.hop(hop).map(explain).unwrap_or_default(),
    };
    v.status = Status::Failed;
    v.hop = Some(hop);
    v.since = Some(at.into());
    v.elapsed_seconds = Some(seconds(at, now));
    v.budget_seconds = Some(budgets.of(op.kind).get(hop).as_secs_f64());
    v.reason = format!(
        "{what} failed at {hop} {} ago: {detail}",
        human(seconds(at, now))
    );
    v
}

/// What a verdict about one hop is measured against: the operation's
/// budgets, the fleet's p95 for the hop, and now.
struct Against<'a> {
    budget: &'a HopBudgets,
    p95: Option<f64>,
    now: Timestamp,
}

fn about(
    operation: Option<OperationKind>,
    status: Status,
    hop: Hop,
    h: &HopTimeline,
    against: Against<'_>,
    reason: String,
) -> Verdict {
    let Against { budget, p95, now } = against;
    let since = if matches!(status, Status::Failed) || h.phase == Phase::Failed {
        h.since.at
    } else {
        waiting_since(h)
    };
    Verdict {
        status,
        operation,
        hop: Some(hop),
        since: Some(since.into()),
        elapsed_seconds: Some(seconds(since, now)),
        budget_seconds: Some(budget.get(hop).as_secs_f64()),
        p95_seconds: p95,
        reason,
    }
}

/// A deletion in flight or failed: judged along its flow.
fn deletion_verdict(timeline: &Timeline, budgets: &HopBudgets, now: Timestamp) -> Verdict {
    let op = Some(OperationKind::Delete);
    let failed = timeline
        .deletion
        .as_deref()
        .is_some_and(|d| d.outcome == OperationOutcome::Failed);
    if failed
        && let Some((hop, h)) = [Hop::ClustersService, Hop::RpFrontend]
            .into_iter()
            .find_map(|hop| {
                timeline
                    .hop(hop)
                    .filter(|h| h.phase == Phase::Failed)
                    .map(|h| (hop, h))
            })
    {
        let reason = format!(
            "deletion failed at {hop} {} ago: {}",
            human(seconds(h.since.at, now)),
            explain(h)
        );
        return about(
            op,
            Status::Failed,
            hop,
            h,
            Against {
                budget: budgets,
                p95: None,
                now,
            },
            reason,
        );
    }
    // What a deleted bundle carries reads deleting through its feedback,
    // inheriting the bundle's deletion: the bundle is where the service side
    // waits (the management side reads those objects directly).
    let bundle = timeline.hop(Hop::MaestroBundle).is_some();
    let deleting: Vec<(Hop, &HopTimeline)> = DELETE
        .hops
        .iter()
        .filter_map(|hop| timeline.hop(*hop).map(|h| (*hop, h)))
        .filter(|(_, h)| DELETE.waits_in(h.phase))
        .filter(|(_, h)| !(bundle && h.via == super::hop::Via::Maestro))
        .collect();
    let waited = |h: &HopTimeline| seconds(h.since.at, now);
    if let Some(&(hop, h)) = deleting
        .iter()
        .find(|(hop, h)| waited(h) >= budgets.get(*hop).as_secs_f64())
    {
        let reason = format!(
            "deletion stuck at {hop} for {} (budget {}): {}",
            human(waited(h)),
            human(budgets.get(hop).as_secs_f64()),
            explain_deletion(h)
        );
        return about(
            op,
            Status::Stuck,
            hop,
            h,
            Against {
                budget: budgets,
                p95: None,
                now,
            },
            reason,
        );
    }
    // Not deleting yet, but still there: the first such hop on the flow.
    let present = || {
        DELETE
            .hops
            .iter()
            .find_map(|hop| timeline.hop(*hop).map(|h| (*hop, h)))
    };
    match deleting.first().copied().or_else(present) {
        Some((hop, h)) => {
            let reason = format!(
                "deletion in progress at {hop} for {} (budget {}): {}",
                human(waited(h)),
                human(budgets.get(hop).as_secs_f64()),
                explain_deletion(h)
            );
            let against = Against {
                budget: budgets,
                p95: None,
                now,
            };
            let mut v = about(op, Status::InProgress, hop, h, against, reason);
            v.since = Some(h.since.at.into());
            v.elapsed_seconds = Some(waited(h));
            v
        }
        None => Verdict {
            status: Status::InProgress,
            operation: op,
            hop: None,
            since: None,
            elapsed_seconds: None,
            budget_seconds: None,
            p95_seconds: None,
            reason: "deletion in progress".to_string(),
        },
    }
}

/// What holds a hop's deletion: HyperShift's finalizers and deletion
/// conditions when the view carries them, else the hop's own explanation.
fn explain_deletion(h: &HopTimeline) -> String {
    // Each once: the HostedCluster read directly and through Maestro, and
    // each of a hop's objects, name the same finalizers.
    let mut finalizers: Vec<&str> = Vec::new();
    for c in h
        .effective_objects()
        .flat_map(|(_, o)| o.view.conditions.iter())
        .filter(|c| c.is_finalizer())
    {
        if !finalizers.contains(&&*c.reason) {
            finalizers.push(&c.reason);
        }
    }
    let mut out = explain(h);
    if !finalizers.is_empty() {
        out.push_str(&format!("; finalizers {}", finalizers.join(", ")));
    }
    out
}

fn creation_verdict(
    timeline: &Timeline,
    budgets: &HopBudgets,
    p95: &HopP95,
    now: Timestamp,
) -> Verdict {
    let op = Some(OperationKind::Create);
    let about = |status: Status, hop: Hop, h: &HopTimeline, reason: String| {
        let operation = op;
        let against = Against {
            budget: budgets,
            p95: p95.get(hop),
            now,
        };
        about(operation, status, hop, h, against, reason)
    };
    if timeline.outcome == CreationOutcome::Deleted {
        return Verdict {
            status: Status::Deleted,
            operation: op,
            hop: None,
            since: None,
            elapsed_seconds: None,
            budget_seconds: None,
            p95_seconds: None,
            reason: "deleted before it completed".to_string(),
        };
    }
    if let Some((hop, h)) = failed_hop(timeline) {
        let reason = format!(
            "failed at {hop} {} ago: {}",
            human(seconds(h.since.at, now)),
            explain(h)
        );
        return about(Status::Failed, hop, h, reason);
    }
    // Hops Maestro carries, unknown because their bundle has no status yet:
    // the bundle is the cause, they only inherit its silence.
    let bundle_waits = timeline
        .hop(Hop::MaestroBundle)
        .is_some_and(|h| not_ready(h.phase));
    let inherited = |h: &HopTimeline| {
        bundle_waits && h.via == super::hop::Via::Maestro && h.phase == Phase::Unknown
    };
    let mut waiting: Vec<(Hop, &HopTimeline)> = timeline
        .hops
        .iter()
        .filter(|(_, h)| not_ready(h.phase) && !inherited(h))
        .map(|(hop, h)| (*hop, h))
        .collect();
    if waiting.is_empty() {
        waiting = timeline
            .hops
            .iter()
            .filter(|(_, h)| not_ready(h.phase))
            .map(|(hop, h)| (*hop, h))
            .collect();
    }
    let elapsed = |h: &HopTimeline| seconds(waiting_since(h), now);
    if let Some(&(hop, h)) = waiting
        .iter()
        .rev()
        .find(|(hop, h)| elapsed(h) >= budgets.get(*hop).as_secs_f64())
    {
        let reason = format!(
            "stuck at {hop} for {} (budget {}): {}",
            human(elapsed(h)),
            human(budgets.get(hop).as_secs_f64()),
            explain(h)
        );
        return about(Status::Stuck, hop, h, reason);
    }
    if !timeline.in_flight() {
        return ready(timeline);
    }
    if let Some(&(hop, h)) = waiting
        .iter()
        .rev()
        .find(|(hop, h)| p95.get(*hop).is_some_and(|p| elapsed(h) >= p))
    {
        let reason = format!(
            "at risk at {hop}: {} there, past the fleet's p95 of {} (budget {}): {}",
            human(elapsed(h)),
            human(p95.get(hop).unwrap_or_default()),
            human(budgets.get(hop).as_secs_f64()),
            explain(h)
        );
        return about(Status::AtRisk, hop, h, reason);
    }
    match waiting.last() {
        Some(&(hop, h)) => {
            let reason = format!(
                "in progress at {hop} for {} (budget {}): {}",
                human(elapsed(h)),
                human(budgets.get(hop).as_secs_f64()),
                explain(h)
            );
            about(Status::InProgress, hop, h, reason)
        }
        None => Verdict {
            status: Status::InProgress,
            operation: op,
            hop: None,
            since: Some(timeline.created_at.at.into()),
            elapsed_seconds: Some(seconds(timeline.created_at.at, now)),
            budget_seconds: None,
            p95_seconds: None,
            reason: "in progress: every hop seen so far is ready".to_string(),
        },
    }
}

/// The verdict on one day-2 operation in flight (a node pool's creation,
/// removal or upgrade, a control-plane upgrade; docs/design/15-operations.md §15.10): it
/// waits at its one hop from its start there, `stuck` once that hop's
/// budget for its kind has run out, else `in_progress`. The cluster's
/// verdict is the worst of these and its creation's (§15.7).
pub fn operation_verdict(
    timeline: &Timeline,
    op: &super::operation::Operation,
    budgets: &OperationBudgets,
    now: Timestamp,
) -> Verdict {
    let hop = op.waiting_hop();
    let since = op.hop(hop).map_or(op.started_at.at, |h| h.started_at);
    let budget = budgets.of(op.kind).get(hop).as_secs_f64();
    let elapsed = seconds(since, now);
    let mut what = op.kind.as_str().to_string();
    if let Some(pool) = op.node_pool() {
        what.push_str(&format!(" of node pool {pool}"));
    }
    if let Some(version) = op.target_version() {
        what.push_str(&format!(" to {version}"));
    }
    // At the RP or Clusters Service a pool is its own resource there, not
    // the cluster's (docs/design/15b-operations.md §15.11).
    let pool_detail = op
        .node_pool()
        .filter(|_| matches!(hop, Hop::RpFrontend | Hop::ClustersService))
        .map(|pool| match timeline.pool_reading_of(hop, pool) {
            Some(r) => format!("the pool reads \"{}\" there", r.state.view.state),
            None => "the pool is not read there yet".to_string(),
        });
    let detail = pool_detail
        .or_else(|| timeline.hop(hop).map(explain))
        .unwrap_or_default();
    let (status, reason) = if elapsed >= budget {
        (
            Status::Stuck,
            format!(
                "{what} stuck at {hop} for {} (budget {}): {detail}",
                human(elapsed),
                human(budget)
            ),
        )
    } else {
        (
            Status::InProgress,
            format!("{what} at {hop} for {}: {detail}", human(elapsed)),
        )
    };
    Verdict {
        status,
        operation: Some(op.kind),
        hop: Some(hop),
        since: Some(since.into()),
        elapsed_seconds: Some(elapsed),
        budget_seconds: Some(budget),
        p95_seconds: None,
        reason,
    }
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
