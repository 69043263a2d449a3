//! The JSON form of a timeline served at `/api/v1/clusters` (docs/design.md §12.2).

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::Serialize;

use crate::model::{
    Condition, CreationOutcome, OperationBudgets, HopError, HopP95, Identity, Join, Phase, PodCounts,
    Replicas, SloOutcome, Stamp, TimeMark, Timeline, Verdict, Via, join_of, trace_id_hex, verdict,
};

/// What judging a timeline needs besides the timeline: taken once per
/// request, so every item of a response is judged at the same instant.
#[derive(Clone, Copy, Debug)]
pub struct Judge {
    /// The RP frontend is read (docs/design.md §4.4).
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
    /// Where the creation stands and why: ready, in_progress, at_risk,
    /// stuck, failed or deleted (docs/design.md §3.9).
    pub verdict: Verdict,
    pub hops: BTreeMap<&'static str, HopJson<'a>>,
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
        verdict: judge.verdict(timeline),
        hops,
    }
}
