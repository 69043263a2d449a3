//! The timeline model (docs/design/03-timeline-model.md §3): pure, takes `now` as an argument.

mod budget;
mod condition;
mod fleet;
mod history;
mod hop;
mod ids;
mod listener;
mod memory;
mod observation;
mod operation;
mod quantile;
mod stamp;
pub mod testing;
mod text;
mod timeline;
mod trace_link;
mod upstream_ids;
mod verdict;

pub use budget::{HopBudgets, OperationBudgets};
pub use condition::{Condition, ConditionSays};
pub use fleet::{
    ApplyResult, Event, Fleet, Join, ModelConfig, OperationTargets, Ownership, PROVISIONAL_PREFIX,
    follows, is_provisional, join_of, provisional_cluster_id, shard_of,
};
pub use history::{EndedHop, EndedOperation, History, HistoryLimits, prune as history_prune};
pub use hop::{ConditionStatus, Hop, Outcome, Phase, SloOutcome, Via};
pub use ids::{span_id, span_id_of, trace_id, trace_id_hex};
pub use listener::EventListener;
pub use memory::{
    ClusterMemory, Day2OperationMemory, DeletionHopMemory, DeletionMemory, HopMemory, Memory,
    ObjectMemory,
};
pub use observation::{
    Batch, Change, ClusterKey, FailsAfterBudget, HopError, HopView, IdentityPatch, MAX_STATE_LEN,
    Observation, PodCounts, Replicas, Rollout, bounded_state, shared_conditions,
};
pub use operation::{
    CREATE, DEFAULT_CREATION_TARGET, DEFAULT_DELETE_TARGET, DEFAULT_NODE_POOL_CREATE_TARGET,
    DEFAULT_NODE_POOL_DELETE_TARGET, DEFAULT_NODE_POOL_UPGRADE_TARGET, DEFAULT_UPGRADE_TARGET,
    DELETE, Flow, HopDone, NODE_POOL_CREATE, NODE_POOL_DELETE, NODE_POOL_UPGRADE, Operation,
    OperationHop, OperationKind, OperationOutcome, UPGRADE, node_pool_of, target_version_of,
};
pub use quantile::{HopDurations, HopP95, MIN_P95_SAMPLES};
pub use stamp::Stamp;
pub use text::Text;
pub use timeline::INSTALLED_NOT_AVAILABLE;
pub use timeline::provisioned_update;
pub use timeline::{
    CreationOutcome, HopMap, HopTimeline, Identity, ObjectMap, ObjectState, PoolReading, TimeMark,
    Timeline, Waiting, same_pool,
};
pub use trace_link::{TRACEPARENT_ANNOTATIONS, TraceLink, TraceParent, TraceParentError};
pub use upstream_ids::{LOG_TRACING_PREFIX, UpstreamId, UpstreamIdOf, log_tracing_ids};
pub use verdict::{Status, Verdict, explain, failed_hop, human, operation_verdict, verdict};

#[cfg(test)]
mod deadline_tests;
#[cfg(test)]
mod edge_tests;
#[cfg(test)]
mod operation_tests;
#[cfg(test)]
mod pool_service_tests;
#[cfg(test)]
mod pool_tests;
#[cfg(test)]
mod restart_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod upgrade_service_tests;
#[cfg(test)]
mod upgrade_tests;
