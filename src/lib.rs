//! hcp-flow follows every hosted control plane creation through each hop of its
//! path and turns what it sees into Prometheus metrics and traces.
//!
//! Data flows one way: source → observation → timeline → (exposition | JSON).

pub mod api;
pub mod app;
pub mod bench;
pub mod cli;
pub mod clock;
pub mod config;
pub mod demo;
pub mod metrics;
pub mod model;
pub mod server;
pub mod sim;
pub mod sources;
pub mod store;
pub mod telemetry;
pub mod traces;
pub mod views;
