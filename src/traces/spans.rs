//! Operation spans built from a cluster's timeline: pure, no clock, no I/O.
//! Ids come from the operation's key (docs/design/07-traces.md §7, §15.6).

use std::borrow::Cow;
use std::time::SystemTime;

use jiff::Timestamp;
use opentelemetry::trace::{
    Event as SpanEvent, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};

use crate::model::{
    ConditionStatus, Hop, HopTimeline, OperationKind, Outcome, Timeline, Via, node_pool_of,
    span_id_of, target_version_of, trace_id,
};

/// The creation's root span name (each flow names its own root).
pub const ROOT_SPAN_NAME: &str = crate::model::CREATE.root_span;

/// Messages are free text from upstream; a span carries a bounded slice.
const MAX_MESSAGE_LEN: usize = 512;

/// How a creation ended, as the root span tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreationEnd {
    Succeeded,
    Failed,
    /// Deleted before it completed or failed.
    Deleted,
}

impl CreationEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            CreationEnd::Succeeded => "succeeded",
            CreationEnd::Failed => "failed",
            CreationEnd::Deleted => "deleted",
        }
    }
}

/// The name of a hop's span; a hop seen through Maestro's status feedback
/// gets its own span (and id) so it never collides with the same hop read
/// directly by a management-scope instance.
pub fn hop_span_name(hop: Hop, via: Via) -> String {
    match via {
        Via::Direct => format!("hcp.hop.{hop}"),
        Via::Maestro => format!("hcp.hop.{hop}.via_maestro"),
    }
}

fn scope() -> InstrumentationScope {
    InstrumentationScope::builder("hcp-flow/creation")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build()
}

fn context(key: &str, span: [u8; 8]) -> SpanContext {
    SpanContext::new(
        TraceId::from_bytes(trace_id(key)),
        SpanId::from_bytes(span),
        TraceFlags::SAMPLED,
        false,
        TraceState::default(),
    )
}

fn system_time(at: Timestamp) -> SystemTime {
    SystemTime::from(at)
}

fn bounded(s: &str) -> String {
    match s.char_indices().nth(MAX_MESSAGE_LEN) {
        Some((end, _)) => format!("{}…", &s[..end]),
        None => s.to_string(),
    }
}

/// `hcp.cluster.id` and the identities the timeline knows (empty ones left out).
fn identity_attributes(
    operation: OperationKind,
    subject: Option<&str>,
    cluster_id: &str,
    timeline: Option<&Timeline>,
) -> Vec<KeyValue> {
    let mut attributes = vec![
        KeyValue::new("hcp.cluster.id", cluster_id.to_string()),
        KeyValue::new("hcp.operation", operation.as_str()),
    ];
    if let Some(pool) = node_pool_of(operation, subject) {
        attributes.push(KeyValue::new("hcp.node_pool", pool.to_string()));
    }
    if let Some(version) = target_version_of(operation, subject) {
        attributes.push(KeyValue::new("hcp.target_version", version.to_string()));
    }
    if let Some(timeline) = timeline {
        // The ids the upstreams gave the operation, named for where they
        // come from: OCM's log tracing (docs/design/15b-operations.md §15.13).
        for id in timeline.upstream_ids() {
            attributes.push(KeyValue::new(
                format!("ocm.log_tracing.{}", id.name),
                id.value.to_string(),
            ));
        }
        let identity = &timeline.identity;
        for (key, value) in [
            ("hcp.cluster.name", identity.name.as_str()),
            ("cloud.resource_id", identity.resource_id.as_str()),
            ("hcp.mgmt_cluster", identity.mgmt_cluster.as_str()),
            ("hcp.platform", identity.platform.as_str()),
            ("hcp.cluster.version", identity.version.as_str()),
        ] {
            if !value.is_empty() {
                attributes.push(KeyValue::new(key, value.to_string()));
            }
        }
    }
    attributes
}

/// Why a hop failed: the upstream error (a provision error code) when there
/// is one, else the reason of its most recently changed condition.
pub fn failure_reason(hop: &HopTimeline) -> Option<(String, String)> {
    if let Some(error) = hop.error() {
        return Some((error.code.clone(), bounded(&error.message)));
    }
    hop.conditions()
        .filter(|(_, c)| !c.reason.is_empty())
        .max_by_key(|(_, c)| c.last_transition)
        .map(|(_, c)| (c.reason.to_string(), bounded(&c.message)))
}

fn error_status(code: &str, message: &str) -> Status {
    if message.is_empty() {
        Status::error(code.to_string())
    } else {
        Status::error(format!("{code}: {message}"))
    }
}

/// What a hop span needs from the event that ended it.
#[derive(Clone, Debug)]
pub struct HopEnd {
    pub operation: OperationKind,
    /// The node pool of a pool's operation.
    pub subject: Option<Box<str>>,
    pub hop: Hop,
    pub outcome: Outcome,
    pub started: Timestamp,
    pub ended: Timestamp,
}

/// The child span of one hop: from the hop's start to the time it was done
/// (a creation's: ready; a deletion's: gone) or failed, with its condition
/// changes inside that window as events. A deletion's hop is gone when its
/// span ends, so it carries what the event says and the view `via`.
pub fn hop_span(cluster_id: &str, timeline: Option<&Timeline>, end: HopEnd, via: Via) -> SpanData {
    let key = end.operation.key(cluster_id, end.subject.as_deref());
    let hop_state = timeline
        .filter(|_| end.operation == OperationKind::Create)
        .and_then(|t| t.hop(end.hop));
    let via = hop_state.map_or(via, |h| h.via);
    let mut attributes =
        identity_attributes(end.operation, end.subject.as_deref(), cluster_id, timeline);
    attributes.push(KeyValue::new("hcp.hop", end.hop.as_str()));
    attributes.push(KeyValue::new("hcp.hop.via", via.as_str()));
    attributes.push(KeyValue::new("hcp.hop.outcome", end.outcome.as_str()));
    let mut events = Vec::new();
    let mut status = Status::Unset;
    if let Some(hop) = hop_state {
        attributes.push(KeyValue::new("hcp.hop.state", hop.state.to_string()));
        attributes.push(KeyValue::new("hcp.hop.phase", hop.phase.as_str()));
        if hop.since.observed {
            // Upstream gave no time: the end is when the exporter saw it.
            attributes.push(KeyValue::new("hcp.hop.end_observed", true));
        }
        events = condition_events(hop, end.started, end.ended);
        if end.outcome == Outcome::Failed {
            let (code, message) =
                failure_reason(hop).unwrap_or_else(|| (hop.state.to_string(), String::new()));
            attributes.push(KeyValue::new("error.type", code.clone()));
            status = error_status(&code, &message);
        }
    } else if end.outcome == Outcome::Failed {
        status = Status::error("failed");
    }
    SpanData {
        span_context: context(&key, span_id_of(&key, Some(end.hop), via)),
        parent_span_id: SpanId::from_bytes(span_id_of(&key, None, Via::Direct)),
        parent_span_is_remote: false,
        span_kind: SpanKind::Internal,
        name: Cow::Owned(hop_span_name(end.hop, via)),
        start_time: system_time(end.started),
        end_time: system_time(end.ended.max(end.started)),
        attributes,
        dropped_attributes_count: 0,
        events: span_events(events),
        links: span_links(
            timeline,
            end.hop,
            node_pool_of(end.operation, end.subject.as_deref()),
        ),
        status,
        instrumentation_scope: scope(),
    }
}

/// A link per trace context the hop's objects' annotations named: the
/// controllers' own traces of them (docs/design/07-traces.md §7.7).
/// A node pool's operation links only to its own pool's context.
fn span_links(timeline: Option<&Timeline>, hop: Hop, pool: Option<&str>) -> SpanLinks {
    let mut links = SpanLinks::default();
    links.links = timeline
        .into_iter()
        .flat_map(|t| t.trace_links(hop))
        .filter(|link| pool.is_none_or(|pool| &*link.object == pool))
        .map(|link| {
            let context = SpanContext::new(
                TraceId::from_bytes(link.context.trace_id),
                SpanId::from_bytes(link.context.span_id),
                TraceFlags::new(link.context.flags),
                true,
                TraceState::default(),
            );
            let mut attributes = vec![KeyValue::new("hcp.link.source", "annotation")];
            if !link.object.is_empty() {
                attributes.push(KeyValue::new("hcp.object", link.object.to_string()));
            }
            opentelemetry::trace::Link::new(context, attributes, 0)
        })
        .collect();
    links
}

fn span_events(events: Vec<SpanEvent>) -> SpanEvents {
    let mut span_events = SpanEvents::default();
    span_events.events = events;
    span_events
}

/// One event per condition of the hop whose last transition falls within
/// the span (the timeline keeps each condition's latest transition).
fn condition_events(hop: &HopTimeline, from: Timestamp, to: Timestamp) -> Vec<SpanEvent> {
    let mut events: Vec<SpanEvent> = hop
        .conditions()
        .filter_map(|(object, c)| {
            let at = c.last_transition?;
            if at < from || at > to {
                return None;
            }
            let status = match c.status {
                ConditionStatus::True => "True",
                ConditionStatus::False => "False",
                ConditionStatus::Unknown => "Unknown",
            };
            let mut attributes = vec![
                KeyValue::new("hcp.condition.type", c.kind.to_string()),
                KeyValue::new("hcp.condition.status", status),
            ];
            if !c.reason.is_empty() {
                attributes.push(KeyValue::new("hcp.condition.reason", c.reason.to_string()));
            }
            if !c.message.is_empty() {
                attributes.push(KeyValue::new("hcp.condition.message", bounded(&c.message)));
            }
            if !object.is_empty() {
                attributes.push(KeyValue::new("hcp.object", object.to_string()));
            }
            Some(SpanEvent::new(
                format!("{}={status}", c.kind),
                system_time(at.into()),
                attributes,
                0,
            ))
        })
        .collect();
    events.sort_by_key(|e| e.timestamp);
    events
}

/// The root span of an operation, from its start (a creation's earliest
/// upstream creation time, a deletion's first sign) to its end.
pub fn root_span(
    operation: OperationKind,
    subject: Option<&str>,
    cluster_id: &str,
    timeline: &Timeline,
    end: CreationEnd,
    started: Timestamp,
    ended: Timestamp,
) -> SpanData {
    let key = operation.key(cluster_id, subject);
    let mut attributes = identity_attributes(operation, subject, cluster_id, Some(timeline));
    attributes.push(KeyValue::new("hcp.operation.outcome", end.as_str()));
    let (slo, start_observed) = match operation {
        OperationKind::Create => {
            attributes.push(KeyValue::new("hcp.creation.outcome", end.as_str()));
            (timeline.slo, timeline.created_at.observed)
        }
        OperationKind::Delete => match timeline.deletion.as_deref() {
            Some(d) => (d.slo, d.started_at.observed),
            None => (None, true),
        },
        _ => match timeline.day2_operation(operation, subject) {
            Some(op) => (op.slo, op.started_at.observed),
            None => (None, true),
        },
    };
    if let Some(slo) = slo {
        attributes.push(KeyValue::new("hcp.slo.outcome", slo.as_str()));
    }
    if start_observed {
        attributes.push(KeyValue::new("hcp.operation.start_observed", true));
        if operation == OperationKind::Create {
            attributes.push(KeyValue::new("hcp.creation.start_observed", true));
        }
    }
    let mut status = Status::Unset;
    if end == CreationEnd::Failed && operation.day2() {
        // The hop that failed it, as the model kept it; an upgrade has one.
        let hop = timeline
            .day2_operations()
            .filter(|op| op.kind == operation && op.subject() == subject)
            .find_map(|op| op.failed_hop)
            .unwrap_or(operation.first_hop());
        status = Status::error(format!("{hop}: failed"));
        attributes.push(KeyValue::new("hcp.failed_hop", hop.as_str()));
    } else if end == CreationEnd::Failed {
        // The hop the verdict names: the trace and `diagnose` agree.
        match crate::model::failed_hop(timeline) {
            Some((hop, h)) => {
                let (code, message) =
                    failure_reason(h).unwrap_or_else(|| (h.state.to_string(), String::new()));
                attributes.push(KeyValue::new("hcp.failed_hop", hop.as_str()));
                attributes.push(KeyValue::new("error.type", code.clone()));
                status = error_status(&format!("{hop}: {code}"), &message);
            }
            None => status = Status::error("failed"),
        }
    }
    SpanData {
        span_context: context(&key, span_id_of(&key, None, Via::Direct)),
        parent_span_id: SpanId::INVALID,
        parent_span_is_remote: false,
        span_kind: SpanKind::Internal,
        name: Cow::Borrowed(operation.flow().root_span),
        start_time: system_time(started),
        end_time: system_time(ended.max(started)),
        attributes,
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status,
        instrumentation_scope: scope(),
    }
}
