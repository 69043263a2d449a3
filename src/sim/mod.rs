//! The simulated world (sim helper).
pub mod kube;
