//! The timeline model (DESIGN section 2): pure, takes `now` as an argument.

mod hop;
mod observation;
pub mod phase_map;

pub use hop::{ConditionStatus, Hop, Outcome, Phase, SloOutcome, Via};
pub use observation::{
    Batch, Change, ClusterKey, Condition, HopError, HopView, IdentityPatch, Observation,
    PodCounts, Replicas, bounded_state, MAX_STATE_LEN,
};
