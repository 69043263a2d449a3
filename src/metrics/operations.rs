//! Fleet-level families fed by model events: operation and hop duration
//! histograms (with the trace id as exemplar), SLO events, the targets and
//! budgets, and a few gauges. Every family carries the `operation` label
//! (docs/design/15-operations.md §15.5).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::exemplar::HistogramWithExemplars;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::metrics::exporter::AlwaysDescribed;
use crate::model::{
    Event, Hop, HopDurations, HopP95, ModelConfig, OperationKind, Outcome, SloOutcome, trace_id_hex,
};

/// Histogram bounds of an operation, in seconds at speed 1. Each operation
/// kind's SLO target is inserted when it is not one of them, so "within
/// target" is one bucket.
pub const CREATION_BUCKETS: &[f64] = &[
    60.0, 120.0, 300.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0, 5400.0, 7200.0,
];

/// Histogram bounds of one hop, in seconds at speed 1.
pub const HOP_BUCKETS: &[f64] = &[
    5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1200.0, 1800.0, 3600.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TraceLabels {
    pub trace_id: String,
}

/// Platforms as a closed set: the label is bounded whatever upstream sends.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum Platform {
    azure,
    aws,
    gcp,
    kubevirt,
    agent,
    ibmcloud,
    powervs,
    openstack,
    none,
    other,
    unknown,
}

impl Platform {
    pub fn from_identity(platform: &str) -> Platform {
        match platform.to_ascii_lowercase().as_str() {
            "" => Platform::unknown,
            "azure" => Platform::azure,
            "aws" => Platform::aws,
            "gcp" => Platform::gcp,
            "kubevirt" => Platform::kubevirt,
            "agent" => Platform::agent,
            "ibmcloud" => Platform::ibmcloud,
            "powervs" => Platform::powervs,
            "openstack" => Platform::openstack,
            "none" => Platform::none,
            _ => Platform::other,
        }
    }
}

/// The OpenShift minor version an operation ran at, as the `version` label
/// of the duration histograms (docs/design/15-operations.md §15.5): `4.17` for `4.17.3`,
/// `openshift-v4.17.3` or `4.17.0-rc.1`, `unknown` for anything else. Minor
/// only, and only numbers, so the label is bounded whatever upstream sends:
/// an SRE compares versions, not patch releases.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct MinorVersion(Option<(u8, u16)>);

impl MinorVersion {
    pub const UNKNOWN: MinorVersion = MinorVersion(None);

    pub fn parse(version: &str) -> MinorVersion {
        let v = version.trim();
        let v = v.strip_prefix("openshift-").unwrap_or(v);
        let v = v.strip_prefix(['v', 'V']).unwrap_or(v);
        let mut parts = v.split(['.', '-', '+']);
        fn number<T: std::str::FromStr>(part: Option<&str>) -> Option<T> {
            part.filter(|p| !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|p| p.parse().ok())
        }
        let major: Option<u8> = number(parts.next());
        let minor: Option<u16> = number(parts.next());
        match (major, minor) {
            (Some(major), Some(minor)) if major > 0 => MinorVersion(Some((major, minor))),
            _ => MinorVersion::UNKNOWN,
        }
    }
}

impl std::fmt::Display for MinorVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some((major, minor)) => write!(f, "{major}.{minor}"),
            None => f.write_str("unknown"),
        }
    }
}

impl EncodeLabelValue for MinorVersion {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelValueEncoder<'_>,
    ) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_fmt(encoder, format_args!("{self}"))
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    pub operation: crate::metrics::Label<OperationKind>,
    pub platform: Platform,
    pub version: MinorVersion,
    pub outcome: crate::metrics::Label<Outcome>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HopOutcomeLabels {
    pub operation: crate::metrics::Label<OperationKind>,
    pub hop: crate::metrics::Label<Hop>,
    pub platform: Platform,
    pub version: MinorVersion,
    pub outcome: crate::metrics::Label<Outcome>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HopLabels {
    pub operation: crate::metrics::Label<OperationKind>,
    pub hop: crate::metrics::Label<Hop>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub operation: crate::metrics::Label<OperationKind>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SloLabels {
    pub operation: crate::metrics::Label<OperationKind>,
    pub outcome: crate::metrics::Label<SloOutcome>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ScopeLabels {
    pub scope: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: String,
    pub revision: String,
}

/// Builds histograms with run-time bounds (scaled in `demo`).
#[derive(Clone, Debug)]
pub struct Buckets(Arc<Vec<f64>>);

impl Buckets {
    /// `base` divided by `scale`, with `must_include` added (the SLO target).
    pub fn new(base: &[f64], scale: f64, must_include: Option<f64>) -> Buckets {
        let scale = if scale > 0.0 { scale } else { 1.0 };
        let mut bounds: Vec<f64> = base.iter().map(|b| b / scale).collect();
        if let Some(v) = must_include
            && !bounds.iter().any(|b| (b - v).abs() < 1e-9)
        {
            bounds.push(v);
        }
        bounds.sort_by(f64::total_cmp);
        Buckets(Arc::new(bounds))
    }

    pub fn bounds(&self) -> &[f64] {
        &self.0
    }
}

impl MetricConstructor<HistogramWithExemplars<TraceLabels>> for Buckets {
    fn new_metric(&self) -> HistogramWithExemplars<TraceLabels> {
        HistogramWithExemplars::new(self.0.iter().copied())
    }
}

type ExemplarHistogram<L> = Family<L, HistogramWithExemplars<TraceLabels>, Buckets>;

#[derive(Clone)]
pub struct OperationMetrics {
    pub operation_duration: ExemplarHistogram<OperationLabels>,
    pub hop_duration: ExemplarHistogram<HopOutcomeLabels>,
    pub slo_events: Family<SloLabels, Counter>,
    pub slo_target: Family<KindLabels, Gauge<f64, AtomicU64>>,
    pub hop_budget: Family<HopLabels, Gauge<f64, AtomicU64>>,
    pub tracked_clusters: Family<ScopeLabels, Gauge>,
    pub build_info: Family<BuildLabels, Gauge>,
    /// The succeeded hop durations of creations again, for the fleet's p95
    /// per hop that "at risk" compares with (the histogram keeps no
    /// readable counts).
    hop_durations: Arc<parking_lot::Mutex<HopDurations>>,
}

impl OperationMetrics {
    /// `time_scale` divides bucket bounds (1 in `serve`, the speed in `demo`).
    /// The targets and budgets are published as configured (the demo's are
    /// already scaled), so rules, `diagnose` and the UI read the model's own.
    pub fn register(
        registry: &mut Registry,
        model: &ModelConfig,
        time_scale: f64,
    ) -> OperationMetrics {
        let mut bounds = Buckets::new(CREATION_BUCKETS, time_scale, None)
            .bounds()
            .to_vec();
        for kind in OperationKind::ALL {
            let target = model.target(kind).as_secs_f64();
            if !bounds.iter().any(|b| (b - target).abs() < 1e-9) {
                bounds.push(target);
            }
        }
        let operation_buckets = Buckets::new(&bounds, 1.0, None);
        let hop_buckets = Buckets::new(HOP_BUCKETS, time_scale, None);
        let metrics = OperationMetrics {
            operation_duration: Family::new_with_constructor(operation_buckets),
            hop_duration: Family::new_with_constructor(hop_buckets.clone()),
            slo_events: Family::default(),
            slo_target: Family::default(),
            hop_budget: Family::default(),
            tracked_clusters: Family::default(),
            build_info: Family::default(),
            hop_durations: Arc::new(parking_lot::Mutex::new(HopDurations::new(
                hop_buckets.bounds(),
            ))),
        };
        let budgets = model.budgets();
        for operation in OperationKind::ALL {
            metrics
                .slo_target
                .get_or_create(&KindLabels {
                    operation: operation.into(),
                })
                .set(model.target(operation).as_secs_f64());
            // The hops of its flow: a node pool's operation has one.
            for &hop in operation.flow().hops {
                let budget = budgets.of(operation).get(hop);
                metrics
                    .hop_budget
                    .get_or_create(&HopLabels {
                        operation: operation.into(),
                        hop: hop.into(),
                    })
                    .set(budget.as_secs_f64());
            }
            for outcome in [SloOutcome::Good, SloOutcome::Late, SloOutcome::Failed] {
                let _ = metrics.slo_events.get_or_create(&SloLabels {
                    operation: operation.into(),
                    outcome: outcome.into(),
                });
            }
        }
        metrics
            .build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").to_string(),
                revision: option_env!("HCPFLOW_REVISION")
                    .unwrap_or("unknown")
                    .to_string(),
            })
            .set(1);

        registry.register(
            "hcpflow_operation_duration_seconds",
            "End-to-end time of each operation (create: from the earliest upstream creation time; delete: from the first sign of deletion; upgrades: from the rollout's upstream start) to success or failure; exemplar = trace id",
            AlwaysDescribed(metrics.operation_duration.clone()),
        );
        registry.register(
            "hcpflow_hop_duration_seconds",
            "Time from a hop's start to done (create: ready; delete: gone; upgrades: rolled out) or failed within its operation; exemplar = trace id",
            AlwaysDescribed(metrics.hop_duration.clone()),
        );
        registry.register(
            "hcpflow_operation_slo_events",
            "Operations by SLO verdict, each counted once: good (done within its target), late (the moment it passed the target in flight), failed (failed before the target)",
            metrics.slo_events.clone(),
        );
        registry.register(
            "hcpflow_operation_slo_target_seconds",
            "The latency SLO target of each operation kind (slo.creation_target, slo.operations.<kind>.target)",
            metrics.slo_target.clone(),
        );
        registry.register(
            "hcpflow_hop_budget_seconds",
            "How long a hop may wait in one phase while its operation is in flight (create: pending, progressing or unknown; delete: deleting; upgrades: until rolled out, from the upgrade's start) (slo.hop_budgets, slo.operations.<kind>.hop_budgets)",
            metrics.hop_budget.clone(),
        );
        registry.register(
            "hcpflow_tracked_clusters",
            "Clusters this instance follows, by scope",
            AlwaysDescribed(metrics.tracked_clusters.clone()),
        );
        registry.register(
            "hcpflow_build_info",
            "Version and revision of the running exporter (value 1)",
            metrics.build_info.clone(),
        );
        metrics
    }

    /// Feed one model event into histograms and counters. Events this
    /// instance does not own (`counted: false`) move nothing: another
    /// instance counts them (docs/design/08-scopes-and-scale-out.md §8.2).
    pub fn record(&self, event: &Event, platform_of: impl Fn(&str) -> String) {
        match event {
            Event::HopEnded {
                cluster_id,
                operation,
                subject,
                hop,
                platform,
                version,
                outcome,
                started,
                ended,
                counted: true,
                ..
            } => {
                let seconds = seconds_between(*started, *ended);
                self.hop_duration
                    .get_or_create(&HopOutcomeLabels {
                        operation: (*operation).into(),
                        hop: (*hop).into(),
                        platform: Platform::from_identity(&if platform.is_empty() {
                            platform_of(cluster_id)
                        } else {
                            platform.clone()
                        }),
                        version: MinorVersion::parse(version),
                        outcome: (*outcome).into(),
                    })
                    .observe(
                        seconds,
                        Some(trace(*operation, subject.as_deref(), cluster_id)),
                        None,
                    );
                if *operation == OperationKind::Create && *outcome == Outcome::Succeeded {
                    self.hop_durations.lock().observe(*hop, seconds);
                }
            }
            Event::OperationEnded {
                cluster_id,
                operation,
                subject,
                platform,
                version,
                outcome,
                started,
                ended,
                counted: true,
                ..
            } => {
                let platform = if platform.is_empty() {
                    platform_of(cluster_id)
                } else {
                    platform.clone()
                };
                self.operation_duration
                    .get_or_create(&OperationLabels {
                        operation: (*operation).into(),
                        platform: Platform::from_identity(&platform),
                        version: MinorVersion::parse(version),
                        outcome: (*outcome).into(),
                    })
                    .observe(
                        seconds_between(*started, *ended),
                        Some(trace(*operation, subject.as_deref(), cluster_id)),
                        None,
                    );
            }
            Event::Slo {
                operation,
                outcome,
                counted: true,
                ..
            } => {
                self.slo_events
                    .get_or_create(&SloLabels {
                        operation: (*operation).into(),
                        outcome: (*outcome).into(),
                    })
                    .inc();
            }
            Event::HopEnded { .. }
            | Event::OperationEnded { .. }
            | Event::Slo { .. }
            | Event::ClusterRemoved { .. } => {}
        }
    }
}

impl OperationMetrics {
    /// The fleet's p95 per hop of succeeded hop durations (docs/design/03-timeline-model.md §3.9).
    pub fn hop_p95(&self) -> HopP95 {
        self.hop_durations.lock().p95()
    }
}

/// The exemplar: the operation's trace id, derived from its key.
fn trace(operation: OperationKind, subject: Option<&str>, cluster_id: &str) -> TraceLabels {
    TraceLabels {
        trace_id: trace_id_hex(&operation.key(cluster_id, subject)),
    }
}

fn seconds_between(from: impl Into<jiff::Timestamp>, to: impl Into<jiff::Timestamp>) -> f64 {
    let (from, to) = (from.into(), to.into());
    ((to.as_millisecond() - from.as_millisecond()).max(0)) as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::MinorVersion;

    /// The `version` label keeps the minor of every spelling upstreams use
    /// (HyperShift's history, Clusters Service's version id, the RP's
    /// `version.id`) and nothing unbounded.
    #[test]
    fn the_version_label_is_the_minor_or_unknown() {
        for (version, want) in [
            ("4.17.3", "4.17"),
            ("4.20.24", "4.20"),
            ("4.12", "4.12"),
            ("openshift-v4.17.3", "4.17"),
            ("v4.18.0", "4.18"),
            ("4.19.0-rc.1", "4.19"),
            ("4.16.0+build", "4.16"),
            (" 4.15.2 ", "4.15"),
            ("", "unknown"),
            ("4", "unknown"),
            ("latest", "unknown"),
            ("4.x.1", "unknown"),
            ("0.1.0", "unknown"),
            ("4.99999.0", "unknown"),
            ("300.1", "unknown"),
            ("4.17\"} 1\n", "unknown"),
        ] {
            assert_eq!(
                MinorVersion::parse(version).to_string(),
                want,
                "{version:?}"
            );
        }
    }
}
