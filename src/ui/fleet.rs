//! The fleet as the UI reads it: one compact row per creation, the summary
//! (`/api/v1/fleet`) and the filtered, sorted, paged list
//! (`/api/v1/clusters?…`), so a browser never downloads 10,000 timelines.
//!
//! Rows are copied out of the store under its lock (a few strings per
//! cluster); counting, filtering and sorting happen after it is released.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::Serialize;

use super::verdict::{STATUSES, Status, Verdict, verdict_of};
use crate::api::Judge;
use crate::model::{
    CreationOutcome, Hop, HopBudgets, HopError, OperationKind, Phase, SloOutcome, Stamp, Timeline,
    operation_verdict,
};
use crate::store::SourceStatus;

/// One creation, as much as a list line and the fleet counts need.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub cluster_id: String,
    pub name: String,
    pub mgmt_cluster: String,
    #[serde(skip)]
    pub resource_id: String,
    pub outcome: CreationOutcome,
    /// The operation in flight (`create`, `delete`), if any.
    pub operation: Option<OperationKind>,
    pub status: Status,
    pub slo: Option<SloOutcome>,
    pub created_at: Stamp,
    pub completed_at: Option<Stamp>,
    pub failed_at: Option<Stamp>,
    /// Seconds since the creation started.
    pub age_seconds: f64,
    /// Where the creation stands ([`position`]).
    pub hop: Option<Hop>,
    pub phase: Option<Phase>,
    /// Since when the creation has waited at that hop.
    pub hop_since: Option<Stamp>,
    /// Seconds in that phase.
    pub at_hop_seconds: Option<f64>,
    /// The hop's budget (docs/design/03-timeline-model.md §3.5).
    pub budget_seconds: Option<f64>,
    /// The failed hop's error, when a hop failed.
    pub error: Option<HopError>,
    pub verdict: Verdict,
    /// Its day-2 operations in flight (node pools', upgrades), each with
    /// its own verdict (docs/design/15-operations.md §15.10). Empty for most clusters.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub day2: Vec<Day2Row>,
}

/// One day-2 operation in flight, as a list line and the funnels need it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Day2Row {
    pub operation: OperationKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_pool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_version: Option<String>,
    /// Its hop's phase now.
    pub phase: Option<Phase>,
    pub verdict: Verdict,
}

impl Row {
    /// The row as a list of `operation` shows it: a day-2 operation's own
    /// status, hop, time there and budget in place of the cluster's.
    fn as_operation(&self, operation: OperationKind) -> Option<Row> {
        let d = self.day2.iter().find(|d| d.operation == operation)?;
        Some(Row {
            operation: Some(operation),
            status: d.verdict.status,
            hop: d.verdict.hop,
            phase: d.phase,
            hop_since: d.verdict.since.map(Into::into),
            at_hop_seconds: d.verdict.elapsed_seconds,
            budget_seconds: d.verdict.budget_seconds,
            verdict: d.verdict.clone(),
            ..self.clone()
        })
    }
}

fn seconds_between(from: impl Into<Timestamp>, to: impl Into<Timestamp>) -> f64 {
    let (from, to) = (from.into(), to.into());
    (to.as_millisecond() - from.as_millisecond()) as f64 / 1000.0
}

/// The hop a creation stands at: the verdict's (the failed, stuck or at-risk
/// hop, or the deepest one not ready: docs/design/03-timeline-model.md §3.9); without one
/// (ready, deleted, every hop seen so far ready) the furthest hop seen.
pub fn position(timeline: &Timeline, verdict: &Verdict) -> Option<Hop> {
    verdict
        .hop
        .filter(|h| timeline.hops.contains_key(h))
        .or_else(|| timeline.hops.keys().next_back().copied())
}

/// The row of one timeline, judged by `judge` (its `now` is the row's).
pub fn row_of(timeline: &Timeline, judge: &Judge) -> Row {
    let now = judge.now;
    let verdict = verdict_of(timeline, judge);
    let hop = position(timeline, &verdict);
    let at = hop.and_then(|h| timeline.hop(h));
    // The verdict's clock for its hop (a frozen bundle waits since its last
    // status update, not since its phase began), else the phase's start.
    let hop_since = verdict
        .since
        .map(Stamp::from)
        .filter(|_| verdict.hop.is_some() && verdict.hop == hop)
        .or(at.map(|h| h.since.at));
    // The failed hop's error, else any failed hop's: one without a code
    // (an RP `Failed`) must not hide the code another hop gives.
    let error = at
        .filter(|h| h.phase == Phase::Failed)
        .and_then(|h| h.error())
        .or_else(|| {
            timeline
                .hops
                .values()
                .filter(|h| h.phase == Phase::Failed)
                .find_map(|h| h.error())
        })
        .cloned();
    Row {
        cluster_id: timeline.cluster_id.clone(),
        name: timeline.identity.name.clone(),
        mgmt_cluster: timeline.identity.mgmt_cluster.to_string(),
        resource_id: timeline.identity.resource_id.clone(),
        outcome: timeline.outcome,
        operation: timeline.operation_in_flight(),
        status: verdict.status,
        slo: timeline.slo,
        created_at: timeline.created_at.at,
        completed_at: timeline.completed_at,
        failed_at: timeline.failed_at,
        age_seconds: seconds_between(timeline.created_at.at, now),
        hop,
        phase: at.map(|h| h.phase),
        hop_since,
        at_hop_seconds: hop_since.map(|since| seconds_between(since, now)),
        budget_seconds: hop.map(|h| {
            let kind = verdict
                .operation
                .unwrap_or(crate::model::OperationKind::Create);
            judge.budgets.of(kind).get(h).as_secs_f64()
        }),
        error,
        verdict,
        day2: timeline
            .day2_in_flight()
            .map(|op| {
                let verdict = operation_verdict(timeline, op, &judge.budgets, now);
                Day2Row {
                    operation: op.kind,
                    node_pool: op.node_pool().map(str::to_string),
                    target_version: op.target_version().map(str::to_string),
                    phase: verdict.hop.and_then(|h| timeline.hop(h)).map(|h| h.phase),
                    verdict,
                }
            })
            .collect(),
    }
}

/// `/api/v1/fleet`.
#[derive(Debug, Serialize)]
pub struct Summary {
    pub at: Timestamp,
    pub clusters: usize,
    /// Hops in path order and the phases, so the page draws the funnel's
    /// rows and columns without knowing them.
    pub hops: Vec<&'static str>,
    pub phases: Vec<&'static str>,
    /// In-flight creations counted at the hop they stand at, by its phase.
    pub funnel: BTreeMap<&'static str, BTreeMap<&'static str, usize>>,
    /// The same per operation kind (`create` is `funnel`): each cluster
    /// counted at the hop its operation in flight stands at.
    pub funnels: BTreeMap<&'static str, BTreeMap<&'static str, BTreeMap<&'static str, usize>>>,
    /// Operations in flight per kind: a cluster's creation or deletion,
    /// and each of its day-2 operations.
    pub in_flight: BTreeMap<&'static str, usize>,
    /// Day-2 operations in flight stuck at their hop, per kind (a cluster
    /// whose pool or upgrade is stuck may itself read ready or degraded).
    pub stuck_operations: BTreeMap<&'static str, usize>,
    pub outcomes: BTreeMap<&'static str, usize>,
    /// Creations per status (every status present, zero or not).
    pub status: BTreeMap<&'static str, usize>,
    pub slo: SloSummary,
    pub hop_budgets_seconds: BTreeMap<&'static str, f64>,
    pub ready: bool,
    pub sources: Vec<SourceStatus>,
}

/// The SLO verdicts of the creations tracked now (the counters in
/// `/metrics` count since the process started).
#[derive(Debug, Serialize, PartialEq)]
pub struct SloSummary {
    pub target_seconds: f64,
    pub good: usize,
    pub late: usize,
    pub failed: usize,
    /// In flight and not yet late: no verdict yet.
    pub pending: usize,
}

pub fn summary(
    rows: &[Row],
    budgets: &HopBudgets,
    target_seconds: f64,
    sources: Vec<SourceStatus>,
    now: Timestamp,
) -> Summary {
    let empty_funnel = || -> BTreeMap<&'static str, BTreeMap<&'static str, usize>> {
        Hop::ALL
            .iter()
            .map(|h| {
                (
                    h.as_str(),
                    Phase::ALL.iter().map(|p| (p.as_str(), 0)).collect(),
                )
            })
            .collect()
    };
    let mut funnels: BTreeMap<&'static str, _> = OperationKind::ALL
        .iter()
        .map(|k| (k.as_str(), empty_funnel()))
        .collect();
    let mut in_flight: BTreeMap<&'static str, usize> =
        OperationKind::ALL.iter().map(|k| (k.as_str(), 0)).collect();
    let mut stuck_operations: BTreeMap<&'static str, usize> = OperationKind::ALL
        .iter()
        .filter(|k| k.day2())
        .map(|k| (k.as_str(), 0))
        .collect();
    let mut outcomes: BTreeMap<&'static str, usize> = [
        CreationOutcome::InFlight,
        CreationOutcome::Succeeded,
        CreationOutcome::Failed,
        CreationOutcome::Deleted,
    ]
    .iter()
    .map(|o| (outcome_str(*o), 0))
    .collect();
    let mut status: BTreeMap<&'static str, usize> =
        STATUSES.iter().map(|s| (s.as_str(), 0)).collect();
    let mut slo = SloSummary {
        target_seconds,
        good: 0,
        late: 0,
        failed: 0,
        pending: 0,
    };
    for row in rows {
        *outcomes.entry(outcome_str(row.outcome)).or_default() += 1;
        *status.entry(row.status.as_str()).or_default() += 1;
        match row.slo {
            Some(SloOutcome::Good) => slo.good += 1,
            Some(SloOutcome::Late) => slo.late += 1,
            Some(SloOutcome::Failed) => slo.failed += 1,
            None if row.outcome == CreationOutcome::InFlight => slo.pending += 1,
            None => {}
        }
        // Each day-2 operation in flight is counted under its kind, at its
        // hop, beside the cluster's own operation.
        for d in &row.day2 {
            *in_flight.entry(d.operation.as_str()).or_default() += 1;
            if d.verdict.status == Status::Stuck {
                *stuck_operations.entry(d.operation.as_str()).or_default() += 1;
            }
            if let (Some(hop), Some(phase)) = (d.verdict.hop, d.phase) {
                *funnels
                    .entry(d.operation.as_str())
                    .or_default()
                    .entry(hop.as_str())
                    .or_default()
                    .entry(phase.as_str())
                    .or_default() += 1;
            }
        }
        if let Some(operation) = row.operation {
            *in_flight.entry(operation.as_str()).or_default() += 1;
            if let (Some(hop), Some(phase)) = (row.hop, row.phase) {
                *funnels
                    .entry(operation.as_str())
                    .or_default()
                    .entry(hop.as_str())
                    .or_default()
                    .entry(phase.as_str())
                    .or_default() += 1;
            }
        }
    }
    let funnel = funnels
        .get(OperationKind::Create.as_str())
        .cloned()
        .unwrap_or_else(empty_funnel);
    let ready = sources.iter().all(|s| s.synced || s.restored);
    Summary {
        at: now,
        clusters: rows.len(),
        hops: Hop::ALL.iter().map(|h| h.as_str()).collect(),
        phases: Phase::ALL.iter().map(|p| p.as_str()).collect(),
        funnel,
        funnels,
        in_flight,
        stuck_operations,
        outcomes,
        status,
        slo,
        hop_budgets_seconds: budgets
            .iter()
            .map(|(hop, d)| (hop.as_str(), d.as_secs_f64()))
            .collect(),
        ready,
        sources,
    }
}

pub fn outcome_str(outcome: CreationOutcome) -> &'static str {
    outcome.as_str()
}

/// A query parameter the list does not understand, named with what it
/// takes, so a hand-written URL is fixed in one go.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum QueryError {
    #[error(
        "unknown query parameter `{0}`; the list takes hop, phase, status, outcome, operation, q, in_flight, limit, offset, sort"
    )]
    Unknown(String),
    #[error("`{param}={value}` is not one of {expected}")]
    Value {
        param: &'static str,
        value: String,
        expected: String,
    },
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sort {
    /// Oldest creation first: what has waited longest.
    #[default]
    Age,
    /// Newest first.
    NewestFirst,
    /// Longest at its current hop first.
    AtHop,
    ClusterId,
}

/// The list's parameters, read from the query string.
#[derive(Clone, Debug, PartialEq)]
pub struct ListQuery {
    pub hop: Option<Hop>,
    pub phase: Option<Phase>,
    pub status: Option<Status>,
    pub outcome: Option<CreationOutcome>,
    /// Only clusters with this operation in flight.
    pub operation: Option<OperationKind>,
    /// Case-insensitive substring of the cluster id, name, ARM resource id
    /// or management cluster.
    pub q: Option<String>,
    pub in_flight: Option<bool>,
    pub limit: usize,
    pub offset: usize,
    pub sort: Sort,
}

pub const DEFAULT_LIMIT: usize = 50;
/// A page larger than this is not for reading in a browser.
pub const MAX_LIMIT: usize = 1000;

impl Default for ListQuery {
    fn default() -> Self {
        ListQuery {
            hop: None,
            phase: None,
            status: None,
            outcome: None,
            operation: None,
            q: None,
            in_flight: None,
            limit: DEFAULT_LIMIT,
            offset: 0,
            sort: Sort::Age,
        }
    }
}

impl ListQuery {
    pub fn parse<'a>(
        pairs: impl IntoIterator<Item = (std::borrow::Cow<'a, str>, std::borrow::Cow<'a, str>)>,
    ) -> Result<ListQuery, QueryError> {
        let mut q = ListQuery::default();
        for (key, value) in pairs {
            let value = value.trim();
            // An empty value is the parameter left out: a form submits its
            // empty fields.
            if value.is_empty() {
                continue;
            }
            let bad = |param: &'static str, expected: String| QueryError::Value {
                param,
                value: value.to_string(),
                expected,
            };
            match key.as_ref() {
                "hop" => {
                    q.hop = Some(
                        Hop::parse(value)
                            .ok_or_else(|| bad("hop", Hop::ALL.map(Hop::as_str).join(", ")))?,
                    )
                }
                "phase" => {
                    q.phase = Some(
                        Phase::ALL
                            .into_iter()
                            .find(|p| p.as_str() == value)
                            .ok_or_else(|| {
                                bad("phase", Phase::ALL.map(Phase::as_str).join(", "))
                            })?,
                    )
                }
                "status" => {
                    q.status =
                        Some(Status::parse(value).ok_or_else(|| {
                            bad("status", STATUSES.map(Status::as_str).join(", "))
                        })?)
                }
                "outcome" => {
                    let all = [
                        CreationOutcome::InFlight,
                        CreationOutcome::Succeeded,
                        CreationOutcome::Failed,
                        CreationOutcome::Deleted,
                    ];
                    q.outcome = Some(
                        all.into_iter()
                            .find(|o| outcome_str(*o) == value)
                            .ok_or_else(|| bad("outcome", all.map(outcome_str).join(", ")))?,
                    )
                }
                "operation" => {
                    q.operation = Some(OperationKind::parse(value).ok_or_else(|| {
                        bad(
                            "operation",
                            OperationKind::ALL.map(OperationKind::as_str).join(", "),
                        )
                    })?)
                }
                "q" => q.q = Some(value.to_lowercase()),
                "in_flight" => {
                    q.in_flight = Some(match value {
                        "true" | "1" | "yes" => true,
                        "false" | "0" | "no" => false,
                        _ => return Err(bad("in_flight", "true, false".to_string())),
                    })
                }
                "limit" => {
                    q.limit = value
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=MAX_LIMIT).contains(n))
                        .ok_or_else(|| bad("limit", format!("1 to {MAX_LIMIT}")))?
                }
                "offset" => {
                    q.offset = value
                        .parse()
                        .map_err(|_| bad("offset", "a number ≥ 0".to_string()))?
                }
                "sort" => {
                    q.sort = match value {
                        "age" => Sort::Age,
                        "-age" => Sort::NewestFirst,
                        "at_hop" => Sort::AtHop,
                        "cluster_id" => Sort::ClusterId,
                        _ => return Err(bad("sort", "age, -age, at_hop, cluster_id".to_string())),
                    }
                }
                other => return Err(QueryError::Unknown(other.to_string())),
            }
        }
        Ok(q)
    }

    fn matches(&self, row: &Row) -> bool {
        self.hop.is_none_or(|h| row.hop == Some(h))
            && self.phase.is_none_or(|p| row.phase == Some(p))
            && self.status.is_none_or(|s| row.status == s)
            && self.outcome.is_none_or(|o| row.outcome == o)
            && self.operation.is_none_or(|o| row.operation == Some(o))
            && self
                .in_flight
                .is_none_or(|f| (row.outcome == CreationOutcome::InFlight) == f)
            && self.q.as_deref().is_none_or(|needle| {
                [
                    &row.cluster_id,
                    &row.name,
                    &row.resource_id,
                    &row.mgmt_cluster,
                ]
                .iter()
                .any(|field| field.to_lowercase().contains(needle))
            })
    }
}

/// One page of the list.
#[derive(Debug, Serialize)]
pub struct Page {
    /// Rows matching the filters, over every page.
    pub total: usize,
    pub offset: usize,
    pub limit: usize,
    pub items: Vec<Row>,
}

pub fn list(rows: &[Row], query: &ListQuery) -> Page {
    // A day-2 operation's list shows each cluster as that operation stands.
    let projected: Vec<Row>;
    let rows = match query.operation.filter(|o| o.day2()) {
        Some(operation) => {
            projected = rows
                .iter()
                .filter_map(|r| r.as_operation(operation))
                .collect();
            &projected[..]
        }
        None => rows,
    };
    let mut matched: Vec<&Row> = rows.iter().filter(|r| query.matches(r)).collect();
    // Ties are broken by cluster id, so pages never overlap between polls
    // of an unchanged fleet.
    match query.sort {
        Sort::Age => matched.sort_by(|a, b| {
            a.created_at
                .cmp(&b.created_at)
                .then_with(|| a.cluster_id.cmp(&b.cluster_id))
        }),
        Sort::NewestFirst => matched.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| a.cluster_id.cmp(&b.cluster_id))
        }),
        Sort::AtHop => matched.sort_by(|a, b| {
            a.hop_since
                .map_or(i64::MAX, Stamp::as_millisecond)
                .cmp(&b.hop_since.map_or(i64::MAX, Stamp::as_millisecond))
                .then_with(|| a.cluster_id.cmp(&b.cluster_id))
        }),
        Sort::ClusterId => matched.sort_by(|a, b| a.cluster_id.cmp(&b.cluster_id)),
    }
    let total = matched.len();
    let items = matched
        .into_iter()
        .skip(query.offset)
        .take(query.limit)
        .cloned()
        .collect();
    Page {
        total,
        offset: query.offset,
        limit: query.limit,
        items,
    }
}
