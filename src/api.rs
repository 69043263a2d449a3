//! The JSON form of a timeline served at `/api/v1/clusters` (docs/design/12-interfaces.md §12.2).

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::Serialize;

use crate::model::{
    Condition, CreationOutcome, Hop, HopError, HopP95, Identity, Join, OperationBudgets,
    OperationKind, OperationOutcome, Phase, PodCounts, Replicas, SloOutcome, Stamp, Status,
    TimeMark, Timeline, Verdict, Via, join_of, operation_verdict, trace_id_hex, verdict,
};

/// What judging a timeline needs besides the timeline: taken once per
/// request, so every item of a response is judged at the same instant.
#[derive(Clone, Copy, Debug)]
pub struct Judge {
    /// The RP frontend is read (docs/design/04-identities-and-joins.md §4.4).
    pub rp_in_scope: bool,
    pub budgets: OperationBudgets,
    pub p95: HopP95,
    pub now: Timestamp,
}

impl Judge {
    pub fn verdict(&self, timeline: &Timeline) -> Verdict {
        verdict(timeline, &self.budgets, &self.p95, self.now)
    }
}

#[derive(Debug, Serialize)]
pub struct TimelineJson<'a> {
    pub cluster_id: &'a str,
    /// The creation's trace id (the dashboards link to traces with it).
    pub trace_id: String,
    #[serde(flatten)]
    pub identity: &'a Identity,
    pub created_at: TimeMark,
    pub completed_at: Option<Stamp>,
    pub failed_at: Option<Stamp>,
    pub outcome: CreationOutcome,
    pub slo: Option<SloOutcome>,
    /// How the RP resource and the Clusters Service cluster relate:
    /// `joined`, `rp_only` (an RP resource CS does not show; `cluster_id` is
    /// provisional) or `cs_without_rp` (the RP is read and shows none).
    /// Absent when the RP and CS are not both in play.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub join: Option<Join>,
    /// Where the cluster stands and why: its operation in flight judged
    /// (in_progress, at_risk, stuck, failed), else ready, degraded or
    /// deleted (docs/design/03-timeline-model.md §3.9, §15.7). `verdict.operation` names the
    /// operation judged.
    pub verdict: Verdict,
    /// The operation in flight, if any (`create`, `delete`).
    pub operation_in_flight: Option<OperationKind>,
    /// Every operation of the cluster the exporter follows, oldest first:
    /// the creation, each node pool's creation, removal and upgrade, each
    /// control-plane upgrade, and the deletion once it began.
    pub operations: Vec<OperationJson>,
    /// Its ended operations, oldest first, each with its hops' times, within
    /// `history.retention` and `history.max_per_cluster` (docs/design/15b-operations.md
    /// §15.12).
    pub history: Vec<HistoryJson>,
    /// The ids the upstreams gave its operations, which their logs are
    /// searched by: each object's log-tracing annotations
    /// (`logging.open-cluster-management.io/<name>`), by hop and object
    /// (docs/design/15b-operations.md §15.13).
    pub upstream_ids: Vec<&'a crate::model::UpstreamIdOf>,
    pub hops: BTreeMap<&'static str, HopJson<'a>>,
}

/// One ended operation of a cluster's history.
#[derive(Debug, Serialize)]
pub struct HistoryJson {
    #[serde(flatten)]
    pub ended: crate::model::EndedOperation,
    /// Its trace id (every operation's is derived from its key).
    pub trace_id: String,
    pub duration_seconds: f64,
}

/// One operation of a cluster (docs/design/15-operations.md §15).
#[derive(Debug, Serialize)]
pub struct OperationJson {
    pub operation: OperationKind,
    /// The node pool a node pool's operation follows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_pool: Option<String>,
    /// The version an upgrade rolls out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_version: Option<String>,
    /// The key its trace id derives from: `<cluster_id>`, `<cluster_id>/delete`,
    /// `<cluster_id>/node_pool_create/<pool>`, `<cluster_id>/upgrade/<version>`,
    /// `<cluster_id>/node_pool_upgrade/<pool>/<version>`.
    pub key: String,
    pub trace_id: String,
    pub started_at: TimeMark,
    pub ended_at: Option<Stamp>,
    pub outcome: OperationOutcome,
    pub slo: Option<SloOutcome>,
    /// The verdict's word while the operation is in flight (or just failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Status>,
    /// A day-2 operation's own verdict in one sentence (stuck at its hop
    /// past its budget, or in progress); the cluster's verdict judges its
    /// creation and deletion (docs/design/15-operations.md §15.10).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A deletion's hops: when each began deleting and when its object was
    /// gone (a creation's hops are the timeline's `hops`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hops: Vec<OperationHopJson>,
}

#[derive(Debug, Serialize)]
pub struct OperationHopJson {
    pub hop: Hop,
    pub started_at: Stamp,
    pub done_at: Option<Stamp>,
}

#[derive(Debug, Serialize)]
pub struct HopJson<'a> {
    pub phase: Phase,
    pub state: &'a str,
    pub since: TimeMark,
    pub ready_at: Option<Stamp>,
    pub started_at: Option<Stamp>,
    pub via: Via,
    pub updated_at: Option<Stamp>,
    pub error: Option<&'a HopError>,
    pub conditions: Vec<ConditionJson<'a>>,
    /// Per object (node pool, bundle) when the hop has several or names them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<ObjectJson<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pods: Option<PodCounts>,
    /// The finalizers holding a deleting object (a HostedCluster's while
    /// HyperShift destroys the cloud resources).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub finalizers: Vec<&'a str>,
}

#[derive(Debug, Serialize)]
pub struct ConditionJson<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    pub object: &'a str,
    #[serde(flatten)]
    pub condition: &'a Condition,
}

#[derive(Debug, Serialize)]
pub struct ObjectJson<'a> {
    pub name: &'a str,
    pub phase: Phase,
    pub state: &'a str,
    pub since: TimeMark,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<Replicas>,
}

pub fn timeline_json<'a>(timeline: &'a Timeline, judge: &Judge) -> TimelineJson<'a> {
    let verdict = judge.verdict(timeline);
    let hops = timeline
        .hops
        .iter()
        .map(|(hop, h)| {
            let objects = h
                .effective_objects()
                .filter(|(name, _)| !name.is_empty())
                .map(|(name, o)| ObjectJson {
                    name,
                    phase: o.view.phase,
                    state: &o.view.state,
                    since: o.since,
                    replicas: o.view.replicas,
                })
                .collect();
            let json = HopJson {
                phase: h.phase,
                state: &h.state,
                since: h.since,
                ready_at: h.ready_at,
                started_at: h.started_at,
                via: h.via,
                updated_at: h.updated_at(),
                error: h.error(),
                conditions: h
                    .conditions()
                    .map(|(object, condition)| ConditionJson { object, condition })
                    .collect(),
                objects,
                pods: h.pods(),
                finalizers: h
                    .effective_objects()
                    .flat_map(|(_, o)| o.view.conditions.iter())
                    .filter(|c| c.is_finalizer())
                    .map(|c| &*c.reason)
                    .collect(),
            };
            (hop.as_str(), json)
        })
        .collect();
    TimelineJson {
        cluster_id: &timeline.cluster_id,
        trace_id: trace_id_hex(&timeline.cluster_id),
        identity: &timeline.identity,
        created_at: timeline.created_at,
        completed_at: timeline.completed_at,
        failed_at: timeline.failed_at,
        outcome: timeline.outcome,
        slo: timeline.slo,
        join: join_of(timeline, judge.rp_in_scope),
        operation_in_flight: timeline.operation_in_flight(),
        operations: operations_json(timeline, &verdict, judge),
        verdict,
        upstream_ids: timeline
            .upstream_ids
            .iter()
            .flat_map(|v| v.iter())
            .collect(),
        history: timeline
            .history
            .entries()
            .into_iter()
            .map(|ended| HistoryJson {
                trace_id: trace_id_hex(
                    &ended
                        .operation
                        .key(&timeline.cluster_id, ended.subject.as_deref()),
                ),
                duration_seconds: (ended.ended_at - ended.started_at)
                    .total(jiff::Unit::Second)
                    .unwrap_or_default()
                    .max(0.0),
                ended,
            })
            .collect(),
        hops,
    }
}

/// An operation kept on the timeline (a deletion, a node pool's), with
/// its hops.
fn operation_json(
    cluster_id: &str,
    op: &crate::model::Operation,
    verdict: Option<Status>,
) -> OperationJson {
    let key = op.key(cluster_id);
    OperationJson {
        operation: op.kind,
        node_pool: op.node_pool().map(str::to_string),
        target_version: op.target_version().map(str::to_string),
        trace_id: trace_id_hex(&key),
        key,
        started_at: op.started_at,
        ended_at: op.ended_at,
        outcome: op.outcome,
        slo: op.slo,
        verdict,
        reason: None,
        hops: op
            .hops
            .iter()
            .map(|h| OperationHopJson {
                hop: h.hop,
                started_at: h.started_at,
                done_at: h.done_at,
            })
            .collect(),
    }
}

/// The cluster's operations, with the verdict's word on the one it judged.
pub fn operations_json(
    timeline: &Timeline,
    verdict: &Verdict,
    judge: &Judge,
) -> Vec<OperationJson> {
    let judged = |kind: OperationKind, outcome: OperationOutcome| {
        (verdict.operation == Some(kind)
            && matches!(
                outcome,
                OperationOutcome::InFlight | OperationOutcome::Failed
            ))
        .then_some(verdict.status)
    };
    let id = &timeline.cluster_id;
    let create = OperationKind::Create;
    let mut out = vec![OperationJson {
        operation: create,
        node_pool: None,
        target_version: None,
        key: create.key(id, None),
        trace_id: trace_id_hex(&create.key(id, None)),
        started_at: timeline.created_at,
        ended_at: timeline.completed_at.or(timeline.failed_at).or_else(|| {
            // Ended by the deletion's start.
            (timeline.outcome == CreationOutcome::Deleted)
                .then(|| timeline.deletion.as_deref().map(|d| d.started_at.at))
                .flatten()
        }),
        outcome: timeline.outcome,
        slo: timeline.slo,
        verdict: judged(create, timeline.outcome),
        reason: None,
        hops: Vec::new(),
    }];
    if let Some(d) = timeline.deletion.as_deref() {
        out.push(operation_json(id, d, judged(d.kind, d.outcome)));
    }
    // Day-2 operations in flight, each with its own verdict.
    out.extend(timeline.day2_in_flight().map(|op| {
        let own = operation_verdict(timeline, op, &judge.budgets, judge.now);
        OperationJson {
            reason: Some(own.reason),
            ..operation_json(id, op, Some(own.status))
        }
    }));
    out
}
