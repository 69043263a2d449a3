//! Metric families: the fleet families rendered from the timeline store, and
//! the exporter's own metrics.

pub mod exporter;
pub mod exposition;
pub mod families;
pub mod fleet;
mod labels;
pub use labels::{AsLabel, Label};
pub mod operations;
