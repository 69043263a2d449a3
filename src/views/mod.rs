//! One reading per object kind (docs/design/02-hops-and-phases.md §2.3).
//!
//! A HostedCluster, a NodePool, a ManifestWork (or a Maestro bundle, whose
//! status is a ManifestWork's), a HostedControlPlane and a ManagedCluster are
//! each turned into a hop's facts — phase, bounded `state`, conditions,
//! failure code, since — by exactly one function here. The Maestro feedback
//! path and the kube watch path both deserialize the same status types
//! defined here and call the same function, so one object gives the same
//! facts whichever way it was read. The RP frontend and Clusters Service
//! tables live here too, so every hop's phase rules are in one folder.
//!
//! Views are pure and never read a clock. A phase that elapsed time alone
//! would change (a never-Available HostedCluster Degraded past its budget) is
//! stated as a [`FailsAfterBudget`](crate::model::FailsAfterBudget) for the
//! model to decide with its own clock.

pub mod clusters_service;
pub mod conditions;
pub mod control_plane;
pub mod hosted_cluster;
pub mod managed_cluster;
pub mod node_pool;
pub mod rp_frontend;
pub mod work;

use crate::model::Stamp;

pub use conditions::WireCondition;

/// An upstream value the exporter did not recognise; counted in
/// `hcpflow_unknown_values_total{source, field}`, never fatal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownValue {
    /// Upstream field path, e.g. `properties.provisioningState`.
    pub field: &'static str,
    pub value: String,
}

/// Parse an upstream RFC 3339 time; an unreadable one is counted and reads
/// as absent (the exporter's observation time is then the fallback).
pub fn parse_time(
    raw: Option<&str>,
    field: &'static str,
    unknown: &mut Vec<UnknownValue>,
) -> Option<Stamp> {
    let raw = raw.filter(|s| !s.is_empty())?;
    match raw.parse::<jiff::Timestamp>() {
        Ok(t) => Some(t.into()),
        Err(_) => {
            unknown.push(UnknownValue {
                field,
                value: raw.to_string(),
            });
            None
        }
    }
}

/// Null reads as the default: upstreams send `"reason": null` and
/// `"conditions": null` where a schema says string or list.
pub fn null_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + serde::Deserialize<'de>,
{
    use serde::Deserialize;
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}
