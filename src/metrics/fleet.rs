//! The per-cluster families, rendered from a timeline as a pure function.
//!
//! Each cluster's lines are rendered when the cluster changes and kept; a scrape
//! only concatenates them under each family header (kube-state-metrics' method),
//! which is what keeps a 10,000-cluster scrape within tens of milliseconds.
//! Only the current value of each set is emitted (value 1), never the whole set
//! with zeros (docs/design/05-metrics.md §5.2).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use jiff::Timestamp;

use crate::model::{Hop, HopTimeline, Phase, Timeline};
use crate::views::work::FeedbackError;

pub use super::families::*;

/// Which conditions and reasons become label values (the rest: not emitted,
/// or reason `other`). Bounded lists keep the series budget (docs/design/05-metrics.md §5.4).
#[derive(Clone, Debug, PartialEq)]
pub struct RenderConfig {
    pub conditions: BTreeMap<Hop, BTreeSet<String>>,
    pub reasons: BTreeSet<String>,
}

impl Default for RenderConfig {
    fn default() -> Self {
        let list = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let conditions = BTreeMap::from([
            (Hop::RpFrontend, list(&["Available", "Degraded"])),
            (Hop::MaestroBundle, list(&["Applied", "Available"])),
            // Applied only: a cluster has several works (the HostedCluster's,
            // one per pool), and the hop's phase already says Available;
            // Applied is what HCPManifestWorkNotApplied reads. Keeps a
            // one-pool cluster within 40 series (docs/design/05-metrics.md §5.4).
            (Hop::Manifestwork, list(&["Applied"])),
            // The two deletion conditions appear only while HyperShift
            // destroys the cluster: what holds a deletion at the hop.
            (
                Hop::HostedCluster,
                list(&[
                    "Available",
                    "Progressing",
                    "Degraded",
                    "CloudResourcesDestroyed",
                    "HostedClusterDestroyed",
                ]),
            ),
            (Hop::ControlPlane, list(&["Available"])),
            (
                Hop::ManagedCluster,
                list(&["ManagedClusterJoined", "ManagedClusterConditionAvailable"]),
            ),
            (Hop::NodePool, list(&["Ready"])),
        ]);
        RenderConfig {
            conditions,
            reasons: DEFAULT_REASONS.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// Condition reasons of the upstreams (docs/design/10-upstream-facts.md §10.1–§10.5) worth a label value.
pub const DEFAULT_REASONS: &[&str] = &[
    "AsExpected",
    "StatusUnknown",
    "NotFound",
    "WaitingForAvailable",
    "WaitingOnInfrastructureReady",
    "InfraStatusFailure",
    "QuorumAvailable",
    "EtcdWaitingForQuorum",
    "StatefulSetNotFound",
    "EtcdRecoveryJobFailed",
    "FromClusterVersion",
    "InvalidConfiguration",
    "KubeconfigWaitingForCreate",
    "UnsupportedHostedCluster",
    "InvalidImage",
    "MissingReleaseImages",
    "PlatformCredentialsNotFound",
    "InvalidAzureCredentials",
    "AzureError",
    "ExternalDNSHostNotReachable",
    "KASLoadBalancerNotReachable",
    "ReconciliationPaused",
    "ReconcileError",
    "ComponentsNotAvailable",
    "Blocked",
    "ValidationFailed",
    "InplaceUpgradeFailed",
    "IgnitionEndpointMissing",
    "IgnitionCACertMissing",
    "ignitionNotReached",
    "WaitingForNodes",
    "AppliedManifestWorkComplete",
    "AppliedManifestComplete",
    "AppliedManifestFailed",
    "ResourcesAvailable",
    "ResourceAvailable",
    "ResourcesNotAvailable",
    "Applying",
    "Completed",
    "Failed",
    "ManagedClusterJoined",
    "ManagedClusterAvailable",
    "ManagedClusterLeaseUpdateStopped",
    "ManagedClusterWaitForImporting",
    "ManagedClusterImporting",
    "ManagedClusterImported",
    "HubClusterAdminAccepted",
    "HubClusterAdminDenied",
];

/// One cluster's exposition lines, every family's in one allocation of
/// exactly its size, with where each family ends. Every line starts with its
/// family's name and `{cluster_id="…"`; that start is kept once per cluster
/// and written back at scrape time, which halves the text the exporter holds
/// (docs/design/05-metrics.md §5.5). Eleven growable strings per cluster cost a third
/// more than the text itself at fleet scale (docs/performance.md).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RenderedCluster {
    /// `{cluster_id="…"` (the id escaped), then each line from what follows
    /// the cluster id on, with its newline. One allocation: a scrape reads
    /// both together, and a second one cost a cache miss per family.
    text: Box<str>,
    /// Where the id label ends and the first family's lines begin.
    id_end: u32,
    /// Where each family's lines end.
    ends: [u32; FAMILY_COUNT],
    /// How many lines each family has: with `ends`, a family's length as
    /// written is known before it is written, so a sink makes room once.
    lines: [u32; FAMILY_COUNT],
    /// The lines' length as written.
    bytes: u32,
}

/// The lines being written, one string per family, each line from what
/// follows the cluster id on.
#[derive(Default)]
struct Families {
    families: [String; FAMILY_COUNT],
}

impl Families {
    /// One line of `family`: a value for each of its labels, in its order.
    fn sample<const N: usize>(&mut self, family: &Family<N>, values: [&str; N], value: &str) {
        self.sample_some(family, values.map(Some), value);
    }

    /// One line of `family` that leaves out the labels whose value is
    /// `None`.
    fn sample_some<const N: usize>(
        &mut self,
        family: &Family<N>,
        values: [Option<&str>; N],
        value: &str,
    ) {
        let Some(out) = self.families.get_mut(family.id.index()) else {
            return;
        };
        let labels = family
            .labels
            .iter()
            .zip(values)
            .filter_map(|(key, val)| Some((*key, val?)));
        sample(out, labels, value);
    }
}

impl RenderedCluster {
    fn pack(cluster_id: &str, families: [String; FAMILY_COUNT]) -> RenderedCluster {
        let rest: usize = families.iter().map(String::len).sum();
        let mut text = String::with_capacity(cluster_id.len() + 14 + rest);
        text.push_str("{cluster_id=\"");
        escape_label_value(&mut text, cluster_id);
        text.push('"');
        // One cluster's lines are kilobytes; u32 holds 4 GiB.
        let offset = |at: usize| u32::try_from(at).unwrap_or(u32::MAX);
        let id_end = text.len();
        let mut ends = [0u32; FAMILY_COUNT];
        let mut line_counts = [0u32; FAMILY_COUNT];
        let mut bytes = 0usize;
        for (((end, count), family), def) in ends
            .iter_mut()
            .zip(&mut line_counts)
            .zip(&families)
            .zip(&FAMILIES)
        {
            text.push_str(family);
            let lines = family.bytes().filter(|b| *b == b'\n').count();
            bytes += family.len() + lines * (def.name.len() + id_end);
            *end = offset(text.len());
            *count = offset(lines);
        }
        RenderedCluster {
            text: text.into_boxed_str(),
            id_end: offset(id_end),
            ends,
            lines: line_counts,
            bytes: offset(bytes),
        }
    }

    /// `{cluster_id="…"`: what follows a family's name on every line.
    fn id_label(&self) -> &str {
        self.text.get(..self.id_end as usize).unwrap_or_default()
    }

    /// The lines of the family at `index` in [`FAMILIES`], each from what
    /// follows the cluster id on.
    fn family_rest(&self, index: usize) -> &str {
        self.text.get(self.family_range(index)).unwrap_or_default()
    }

    /// Where family `index`'s lines are in `text`: empty past the last family.
    fn family_range(&self, index: usize) -> std::ops::Range<usize> {
        let start = match index {
            0 => Some(self.id_end),
            i => self.ends.get(i - 1).copied(),
        };
        match (start, self.ends.get(index)) {
            (Some(start), Some(end)) => start as usize..*end as usize,
            _ => 0..0,
        }
    }

    /// Ask the CPU to start loading what [`family_len`](Self::family_len)
    /// and [`write_family`](Self::write_family) read of this cluster's own
    /// fields. A scrape walks the fleet family by family, so every family
    /// of every cluster is a jump to memory not touched since the last
    /// family, which the hardware cannot foresee (docs/design/05-metrics.md §5.5).
    #[inline(always)]
    pub fn prefetch_fields(&self, family: FamilyId) {
        let index = family.index();
        prefetch(&self.text);
        prefetch(&self.id_end);
        if let (Some(end), Some(lines)) = (self.ends.get(index), self.lines.get(index)) {
            prefetch(end);
            prefetch(lines);
        }
    }

    /// Ask the CPU to start loading the text of `family` and the id
    /// label: the fields must be in cache already
    /// ([`prefetch_fields`](Self::prefetch_fields) a few clusters earlier),
    /// as their values say where the text is.
    #[inline(always)]
    pub fn prefetch_family(&self, family: FamilyId) {
        let text = self.text.as_bytes();
        if let Some(first) = text.first() {
            prefetch(first);
        }
        let Some(family) = text.get(self.family_range(family.index())) else {
            return;
        };
        // One hint per cache line, and one for the line the last byte is
        // in; a family larger than that (a cluster with hundreds of node
        // pools) is read ahead by the hardware once it is under way.
        for byte in family.iter().step_by(CACHE_LINE).take(PREFETCH_LINES) {
            prefetch(byte);
        }
        if let Some(last) = family.last() {
            prefetch(last);
        }
    }

    /// The length of `family`'s lines as the exposition shows them.
    pub fn family_len(&self, family: FamilyId) -> usize {
        let index = family.index();
        let (Some(def), Some(lines)) = (FAMILIES.get(index), self.lines.get(index)) else {
            return 0;
        };
        self.family_rest(index).len() + *lines as usize * (def.name.len() + self.id_end as usize)
    }

    /// The lines of `family`, as the exposition shows them, appended
    /// to `out` piece by piece (name, id label, rest of the line): the
    /// pieces go straight into the body, with no buffer in between, when
    /// the body is a buffer with room for [`family_len`](Self::family_len)
    /// bytes (docs/design/05-metrics.md §5.5).
    pub fn write_family(&self, family: FamilyId, out: &mut String) {
        self.for_each_piece(family.index(), |piece| out.push_str(piece));
    }

    /// [`write_family`](Self::write_family) into bytes (a chunk of a
    /// streamed body).
    pub fn write_family_bytes(&self, family: FamilyId, out: &mut Vec<u8>) {
        self.for_each_piece(family.index(), |piece| {
            out.extend_from_slice(piece.as_bytes())
        });
    }

    #[inline(always)]
    fn for_each_piece(&self, index: usize, mut put: impl FnMut(&str)) {
        let rest = self.family_rest(index);
        let Some(def) = FAMILIES.get(index).filter(|_| !rest.is_empty()) else {
            return;
        };
        let id_label = self.id_label();
        // Newlines found as bytes: `str::split_inclusive` compares each
        // match it finds again, which took a third of the assembly's time.
        // Just past a newline is a char boundary, so `get` never fails.
        let mut start = 0;
        while let Some(tail) = rest.as_bytes().get(start..).filter(|t| !t.is_empty()) {
            let end = memchr::memchr(b'\n', tail).map_or(rest.len(), |at| start + at + 1);
            put(def.name);
            put(id_label);
            put(rest.get(start..end).unwrap_or_default());
            start = end;
        }
    }

    /// The lines of `family`, as the exposition shows them, put
    /// together in `scratch` (a few kilobytes, reused from cluster to
    /// cluster, so it stays in cache) for the caller to hand on at once: for
    /// a sink that cannot take the pieces into a buffer of its own (a gzip
    /// encoder), three small writes per line cost more than the extra copy
    /// (docs/design/05-metrics.md §5.5).
    pub fn family_lines<'a>(&self, family: FamilyId, scratch: &'a mut String) -> &'a str {
        scratch.clear();
        self.write_family(family, scratch);
        scratch
    }

    /// Every family's lines, in family order, as the exposition shows them.
    pub fn text(&self) -> String {
        let mut out = String::with_capacity(self.len());
        for family in &FAMILIES {
            self.write_family(family.id, &mut out);
        }
        out
    }

    /// The length of the lines as written.
    pub fn len(&self) -> usize {
        self.bytes as usize
    }

    /// What the lines take in memory: less than [`len`](Self::len).
    pub fn held_bytes(&self) -> usize {
        self.text.len()
    }

    pub fn is_empty(&self) -> bool {
        self.text.len() == self.id_end as usize
    }

    pub fn series(&self) -> usize {
        self.text.bytes().filter(|b| *b == b'\n').count()
    }
}

const CACHE_LINE: usize = 64;
/// Cache lines of one family that a scrape asks for ahead: 2 KiB, more than
/// a family of a cluster with a few node pools holds.
const PREFETCH_LINES: usize = 32;

/// A hint that `at` is about to be read: the CPU starts loading its cache
/// line and goes on. It changes no value, so a wrong hint costs time only.
#[inline(always)]
fn prefetch<T>(at: &T) {
    #[cfg(all(
        any(target_arch = "x86", target_arch = "x86_64"),
        target_feature = "sse"
    ))]
    safe_arch::prefetch_t0(at);
    #[cfg(not(all(
        any(target_arch = "x86", target_arch = "x86_64"),
        target_feature = "sse"
    )))]
    let _ = at;
}

/// Render one cluster. Pure: same timeline, same text.
pub fn render_cluster(timeline: &Timeline, config: &RenderConfig) -> RenderedCluster {
    let mut out = Families::default();
    let id = timeline.cluster_id.as_str();
    let ident = &timeline.identity;

    out.sample(
        &CLUSTER_INFO,
        [
            &ident.name,
            &ident.resource_id,
            &ident.subscription_id,
            &ident.resource_group,
            &ident.mgmt_cluster,
            &ident.namespace,
            &ident.platform,
            &ident.version,
        ],
        "1",
    );
    out.sample(&CLUSTER_CREATED, [], &seconds(timeline.created_at.at));
    if let Some(done) = timeline.completed_at {
        out.sample(&CREATION_COMPLETED, [], &seconds(done));
    }
    render_operations(timeline, &mut out);
    for (hop, state) in &timeline.hops {
        render_hop(*hop, state, config, &mut out);
    }
    RenderedCluster::pack(id, out.families)
}

/// The operations' families of one cluster: each operation in flight, when
/// it started and where a day-2 one waits, and each failed day-2 operation
/// the model keeps.
fn render_operations(timeline: &Timeline, out: &mut Families) {
    if let Some(operation) = timeline.operation_in_flight() {
        let started = match timeline.deletion_in_flight() {
            Some(deletion) => deletion.started_at.at,
            None => timeline.created_at.at,
        };
        let kind = operation.as_str();
        out.sample(&OPERATION_IN_FLIGHT, [kind, "", ""], "1");
        out.sample(&OPERATION_STARTED, [kind, ""], &seconds(started));
    }
    for op in timeline.day2_in_flight() {
        let kind = op.kind.as_str();
        let pool = op.node_pool().unwrap_or_default();
        let version = op.target_version().unwrap_or_default();
        out.sample(&OPERATION_IN_FLIGHT, [kind, pool, version], "1");
        // One upgrade in flight per cluster and per pool (a new target
        // replaces the old): the start needs no version to be unique.
        out.sample(&OPERATION_STARTED, [kind, pool], &seconds(op.started_at.at));
        let waiting = timeline.waiting_of(op);
        out.sample(
            &OPERATION_WAITING,
            [
                kind,
                pool,
                waiting.hop.as_str(),
                waiting.phase.as_str(),
                waiting.state.map_or("", |s| s.as_str()),
                waiting.via.as_str(),
            ],
            &seconds(waiting.since),
        );
    }

    for op in timeline
        .day2_operations()
        .filter(|op| op.outcome == crate::model::OperationOutcome::Failed)
    {
        let hop = op.failed_hop.unwrap_or(op.kind.first_hop());
        let pool = op.node_pool().unwrap_or_default();
        let code = match (op.node_pool(), hop) {
            (Some(pool), Hop::RpFrontend | Hop::ClustersService) => {
                timeline.pool_reading_of(hop, pool).map(|r| {
                    r.state
                        .view
                        .error
                        .as_ref()
                        .map_or(r.state.view.state.as_str(), |e| e.code.as_str())
                })
            }
            _ => timeline.hop(hop).map(|h| {
                h.error()
                    .map(|e| e.code.as_str())
                    .unwrap_or(h.state.as_str())
            }),
        };
        out.sample(
            &OPERATION_FAILED,
            [
                op.kind.as_str(),
                pool,
                op.target_version().unwrap_or_default(),
                hop.as_str(),
                bounded_code(code.unwrap_or("unknown")),
            ],
            &seconds(op.ended_at.unwrap_or(op.started_at.at)),
        );
    }
}

/// One hop's families: its phase and since when, its Maestro status time,
/// its failure, its allow-listed conditions, its pools' replicas, its
/// feedback errors and its control-plane pods.
fn render_hop(hop: Hop, state: &HopTimeline, config: &RenderConfig, out: &mut Families) {
    let hop_name = hop.as_str();
    out.sample(
        &HOP_PHASE,
        [
            hop_name,
            state.phase.as_str(),
            &state.state,
            state.via.as_str(),
        ],
        "1",
    );
    out.sample(&HOP_PHASE_SINCE, [hop_name], &seconds(state.since.at));
    if hop == Hop::MaestroBundle
        && let Some(updated) = state.status_updated_at()
    {
        out.sample(&HOP_STATUS_UPDATED, [hop_name], &seconds(updated));
    }
    if state.phase == Phase::Failed {
        let code = state
            .error()
            .map(|e| e.code.as_str())
            .or_else(|| failing_reason(state))
            .unwrap_or("unknown");
        out.sample(&HOP_FAILURE_INFO, [hop_name, bounded_code(code)], "1");
    }
    if let Some(allowed) = config.conditions.get(&hop) {
        for (object, condition) in state.conditions() {
            if !allowed.contains(condition.kind.as_str()) {
                continue;
            }
            let reason = if condition.reason.is_empty()
                || config.reasons.contains(condition.reason.as_str())
            {
                condition.reason.as_str()
            } else {
                "other"
            };
            // Hops that hold several objects name them, so two
            // bundles (or works) of one cluster never make two series
            // of one label set (docs/design/02-hops-and-phases.md §2.5).
            let (object_label, node_pool) = match hop {
                Hop::MaestroBundle | Hop::Manifestwork => (Some(object), None),
                Hop::NodePool => (None, Some(object)),
                _ => (None, None),
            };
            out.sample_some(
                &HOP_CONDITION,
                [
                    Some(hop_name),
                    Some(condition.kind.as_str()),
                    Some(condition.status.as_str()),
                    Some(reason),
                    object_label,
                    node_pool,
                ],
                "1",
            );
        }
    }
    for (pool, replicas) in state.replicas() {
        for (kind, value) in [
            ("desired", replicas.desired),
            ("current", replicas.current),
            ("ready", replicas.ready),
        ] {
            out.sample(&NODE_POOL_REPLICAS, [pool, kind], &value.to_string());
        }
    }
    for (object, o) in state.effective_objects() {
        let Some(error) = o.view.error.as_ref() else {
            continue;
        };
        if let Some(feedback) = FeedbackError::from_code(&error.code) {
            out.sample(
                &HOP_FEEDBACK_ERROR,
                [hop_name, object, feedback.code()],
                "1",
            );
        }
    }
    if let Some(pods) = state.pods() {
        for (readiness, value) in [("ready", pods.ready), ("not_ready", pods.not_ready)] {
            out.sample(&CONTROL_PLANE_PODS, [readiness], &value.to_string());
        }
    }
}

/// The reason of the first condition in a bad state, for hops failed by a
/// condition rather than an error code.
fn failing_reason(state: &HopTimeline) -> Option<&str> {
    state
        .conditions()
        .map(|(_, c)| c)
        .find(|c| c.status == crate::model::ConditionStatus::False && !c.reason.is_empty())
        .map(|c| c.reason.as_str())
}

/// Error codes are short identifiers (OCM4001, InvalidImage); anything else
/// becomes `other` so free text never reaches a label.
fn bounded_code(code: &str) -> &str {
    let ok = !code.is_empty()
        && code.len() <= 64
        && code
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if ok { code } else { "other" }
}

/// Unix seconds with millisecond precision; `Display` for f64 never uses an
/// exponent, so the text stays what both exposition formats expect.
pub fn seconds(at: impl Into<Timestamp>) -> String {
    let at = at.into();
    let ms = at.as_millisecond();
    if ms.rem_euclid(1000) == 0 {
        format!("{}", ms / 1000)
    } else {
        format!("{}", ms as f64 / 1000.0)
    }
}

/// One line from what follows the cluster id on: the other labels, the
/// value and the newline. The family's name and the cluster id, which every
/// line starts with, are written at scrape time ([`RenderedCluster`]).
fn sample<'a>(out: &mut String, labels: impl Iterator<Item = (&'a str, &'a str)>, value: &str) {
    for (key, val) in labels {
        out.push(',');
        out.push_str(key);
        out.push_str("=\"");
        escape_label_value(out, val);
        out.push('"');
    }
    out.push_str("} ");
    out.push_str(value);
    out.push('\n');
}

/// Label value escaping shared by the text format and OpenMetrics.
pub fn escape_label_value(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// The `# HELP` and `# TYPE` lines of one family.
pub fn write_header(out: &mut String, family: &FamilyDef) {
    let _ = writeln!(out, "# HELP {} {}", family.name, family.help);
    let _ = writeln!(out, "# TYPE {} {}", family.name, family.kind.as_str());
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "fleet_tests.rs"]
mod tests;
