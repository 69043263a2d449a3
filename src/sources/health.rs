//! What each source says of itself, from evidence only (docs/design/09-reading-the-upstreams.md §9.7):
//! which kinds it reads, which have listed once, whether it is up, its last
//! error and since when it is down.
//!
//! A source is up while every enabled kind has completed a list (or poll)
//! since its last failure. `last_success` advances only on evidence: a
//! completed list/poll or a received event/bookmark ([`SourceHealth::alive`]),
//! never on a timer. A kind whose API is absent (optional CRD not installed)
//! or forbidden is disabled: it neither holds the source down nor `/readyz`.
//! The source's going down and its recovery are each logged once, with the
//! cause and the time it was down, never once per retry.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use parking_lot::Mutex;
use serde::Serialize;

use crate::clock::Clock;
use crate::metrics::exporter::ExporterMetrics;

pub use crate::metrics::exporter::KindState;

#[derive(Debug, Clone)]
struct KindHealth {
    state: KindState,
    listed_once: bool,
    /// Why the kind is failing or disabled.
    reason: Option<String>,
}

impl KindHealth {
    fn new() -> KindHealth {
        KindHealth {
            state: KindState::pending,
            listed_once: false,
            reason: None,
        }
    }
}

#[derive(Debug, Default)]
struct SourceState {
    kinds: BTreeMap<String, KindHealth>,
    up: bool,
    /// Serving what the last run read of this source until every enabled
    /// kind has listed once (docs/design/03-timeline-model.md §3.10).
    restored: bool,
    /// When the source went down after having been up (or first failed).
    down_since: Option<Timestamp>,
    last_error: Option<LastError>,
}

impl SourceState {
    fn all_enabled_ok(&self) -> bool {
        self.kinds
            .values()
            .filter(|k| k.state.enabled())
            .all(|k| k.state == KindState::ok)
    }

    /// Every enabled kind listed once.
    fn synced(&self) -> bool {
        self.kinds
            .values()
            .filter(|k| k.state.enabled())
            .all(|k| k.listed_once)
    }

    /// Synced, or serving what the last run read until it is.
    fn ready(&self) -> bool {
        self.restored || self.synced()
    }

    /// What a kind not listed yet is shown as.
    fn unlisted(&self) -> KindState {
        match self.restored {
            true => KindState::restored,
            false => KindState::pending,
        }
    }
}

/// What one kind's report changed, for the caller's own log line.
struct Transition {
    before: KindState,
    went_down: bool,
}

/// The last error a source met, for `/readyz` and the fleet page.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LastError {
    pub kind: String,
    pub at: Timestamp,
    pub message: String,
}

/// One disabled kind and why.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DisabledKind {
    pub kind: String,
    pub state: KindState,
    pub reason: Option<String>,
}

/// What `/readyz` and the fleet page show of one source.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SourceStatus {
    pub source: String,
    /// Every enabled kind listed once.
    pub synced: bool,
    /// Not synced yet since a restart, and serving what the last run read
    /// of the source meanwhile (docs/design/03-timeline-model.md §3.10).
    pub restored: bool,
    /// Every enabled kind listed since its last failure.
    pub up: bool,
    /// Enabled kinds that have not listed once yet.
    pub pending: Vec<String>,
    /// Enabled kinds whose last list or watch failed.
    pub failing: Vec<String>,
    pub disabled: Vec<DisabledKind>,
    pub down_since: Option<Timestamp>,
    pub last_error: Option<LastError>,
}

/// Shared by every source of one exporter; cheap to clone.
#[derive(Clone)]
pub struct SourceHealth {
    sources: Arc<Mutex<BTreeMap<String, SourceState>>>,
    /// Management clusters that are self-managed MCE hubs: what they show
    /// counts in `hcpflow_tracked_clusters{scope="self_managed"}`.
    self_managed_hubs: Arc<Mutex<std::collections::BTreeSet<String>>>,
    metrics: ExporterMetrics,
    clock: Clock,
}

impl std::fmt::Debug for SourceHealth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceHealth").finish_non_exhaustive()
    }
}

/// The placeholder kind of a source declared before it names its kinds.
pub const WHOLE_SOURCE: &str = "*";

impl SourceHealth {
    pub fn new(metrics: ExporterMetrics, clock: Clock) -> SourceHealth {
        SourceHealth {
            sources: Arc::new(Mutex::new(BTreeMap::new())),
            self_managed_hubs: Arc::new(Mutex::new(Default::default())),
            metrics,
            clock,
        }
    }

    /// Expect `source` before its task names its kinds, so `/readyz` waits
    /// for it from the start.
    pub fn expect(&self, source: &str) {
        let mut sources = self.sources.lock();
        if sources.contains_key(source) {
            return;
        }
        let mut state = SourceState::default();
        state
            .kinds
            .insert(WHOLE_SOURCE.to_string(), KindHealth::new());
        sources.insert(source.to_string(), state);
        self.metrics.declare_source(source);
        self.publish_kind(source, WHOLE_SOURCE, None, Some(KindState::pending));
    }

    /// The kinds `source` reads. Kinds already known keep their state (a
    /// restarted source task does not forget what listed).
    pub fn declare(&self, source: &str, kinds: &[&str]) {
        let mut sources = self.sources.lock();
        let state = sources.entry(source.to_string()).or_default();
        let placeholder = state.kinds.remove(WHOLE_SOURCE).map(|k| k.state);
        let unlisted = state.unlisted();
        let mut added = Vec::new();
        for kind in kinds {
            if !state.kinds.contains_key(*kind) {
                let mut health = KindHealth::new();
                health.state = unlisted;
                state.kinds.insert(kind.to_string(), health);
                added.push(kind.to_string());
            }
        }
        self.metrics.declare_source(source);
        self.drop_placeholder(source, placeholder);
        for kind in added {
            self.publish_kind(source, &kind, None, Some(unlisted));
        }
    }

    /// `source`'s readings from the last run are served (docs/design/03-timeline-model.md
    /// §3.10): until each of its kinds lists once, the kind shows
    /// `restored` rather than `pending`, and the source counts as ready for
    /// `/readyz` (it serves state) but not as synced: it stays down
    /// (`hcpflow_source_up` 0) and the first-sync load waits for it. Call
    /// before the source runs.
    pub fn restored(&self, source: &str) {
        let mut sources = self.sources.lock();
        let state = sources.entry(source.to_string()).or_default();
        state.restored = true;
        let mut changed = Vec::new();
        for (name, kind) in &mut state.kinds {
            if kind.state == KindState::pending {
                kind.state = KindState::restored;
                changed.push(name.clone());
            }
        }
        for kind in changed {
            self.publish_kind(
                source,
                &kind,
                Some(KindState::pending),
                Some(KindState::restored),
            );
        }
    }

    /// Whether `source` still serves what the last run read of it, not
    /// having listed every kind since the restart.
    pub fn restoring(&self, source: &str) -> bool {
        self.sources.lock().get(source).is_some_and(|s| s.restored)
    }

    /// Every enabled kind of `source` has listed once.
    pub fn synced_source(&self, source: &str) -> bool {
        self.sources.lock().get(source).is_some_and(|s| s.synced())
    }

    /// A list or poll of `kind` completed: it is evidence of a live source.
    pub fn listed(&self, source: &str, kind: &str) {
        self.transition(source, kind, KindState::ok, None);
    }

    /// An event or bookmark arrived: the source is alive. Keeps
    /// `last_success` fresh while up; never turns a failing source up (only a
    /// completed list does).
    pub fn alive(&self, source: &str) {
        // Under the lock, so a concurrent failure cannot be overwritten.
        let sources = self.sources.lock();
        if sources.get(source).is_some_and(|s| s.up) {
            self.metrics.sync_succeeded(source, self.clock.now());
        }
    }

    /// A list, poll or watch of `kind` failed. `error` is the whole cause
    /// chain on one line. Logged once when the source goes down; later
    /// failures only at debug level.
    pub fn failed(&self, source: &str, kind: &str, error: &str) {
        let change = self.transition(source, kind, KindState::failing, Some(error));
        if change.went_down {
            tracing::warn!(
                source,
                kind,
                error,
                "source down; keeping its last good state"
            );
        } else {
            tracing::debug!(source, kind, error, "source still down");
        }
    }

    /// `kind` is disabled: its API is absent or forbidden. Logged once per
    /// change, with the reason.
    pub fn disabled(&self, source: &str, kind: &str, why: KindState, reason: &str) {
        debug_assert!(!why.enabled());
        let change = self.transition(source, kind, why, Some(reason));
        if change.before != why {
            tracing::warn!(
                source,
                kind,
                state = ?why,
                reason,
                "kind disabled; it no longer holds the source down or /readyz"
            );
        }
    }

    /// Set one kind's state and re-derive its source's: the one path every
    /// report takes. Publishes the kind's series and `source_up`, and logs
    /// the source's recovery.
    fn transition(
        &self,
        source: &str,
        kind: &str,
        to: KindState,
        reason: Option<&str>,
    ) -> Transition {
        let now = self.clock.now();
        let mut sources = self.sources.lock();
        let state = sources.entry(source.to_string()).or_default();
        let placeholder = if kind == WHOLE_SOURCE {
            None
        } else {
            state.kinds.remove(WHOLE_SOURCE).map(|k| k.state)
        };
        let kind_health = state
            .kinds
            .entry(kind.to_string())
            .or_insert_with(KindHealth::new);
        let before = kind_health.state;
        kind_health.state = to;
        kind_health.reason = reason.map(str::to_string);
        if to == KindState::ok {
            kind_health.listed_once = true;
        }
        if state.restored && state.synced() {
            state.restored = false;
            tracing::info!(
                source,
                "source listed every kind since the restart; what it restored is reconciled"
            );
        }
        let was_up = state.up;
        let up = state.all_enabled_ok();
        state.up = up;
        let mut went_down = false;
        if to == KindState::failing {
            state.last_error = Some(LastError {
                kind: kind.to_string(),
                at: now,
                message: reason.unwrap_or_default().to_string(),
            });
            went_down = was_up || state.down_since.is_none();
            if went_down {
                state.down_since = Some(now);
            }
        }
        let recovered_from = state.down_since.take_if(|_| up).filter(|_| !was_up);
        // Published under the lock: two kinds reporting at once must not
        // leave the series saying other than the state (a late `source_up`
        // 0 from a transition the other one already superseded).
        self.drop_placeholder(source, placeholder);
        self.publish_kind(source, kind, Some(before), Some(to));
        if up {
            self.metrics.sync_succeeded(source, now);
        } else {
            self.metrics.sync_failed(source);
        }
        drop(sources);
        if let Some(since) = recovered_from {
            tracing::info!(
                source,
                down_for = %format_seconds(now.duration_since(since).as_secs_f64()),
                "source recovered"
            );
        }
        Transition { before, went_down }
    }

    /// `mgmt_cluster` is a self-managed MCE hub (its kube source says so
    /// before it delivers anything), so the store counts its clusters in
    /// scope `self_managed` rather than `management` (docs/design/08-scopes-and-scale-out.md §8.1).
    pub fn self_managed_hub(&self, mgmt_cluster: &str) {
        self.self_managed_hubs
            .lock()
            .insert(mgmt_cluster.to_string());
    }

    pub fn is_self_managed_hub(&self, mgmt_cluster: &str) -> bool {
        self.self_managed_hubs.lock().contains(mgmt_cluster)
    }

    /// The state of one kind, if declared.
    pub fn kind_state(&self, source: &str, kind: &str) -> Option<KindState> {
        self.sources
            .lock()
            .get(source)
            .and_then(|s| s.kinds.get(kind))
            .map(|k| k.state)
    }

    /// Whether `source` is up now.
    pub fn up(&self, source: &str) -> bool {
        self.sources.lock().get(source).is_some_and(|s| s.up)
    }

    /// Every enabled kind of every source has listed once, or the source
    /// serves what the last run read of it (`/readyz`).
    pub fn ready(&self) -> bool {
        self.sources.lock().values().all(SourceState::ready)
    }

    /// Every enabled kind of every source has listed once since the start
    /// (the first-sync load, docs/design/03-timeline-model.md §3.3).
    pub fn synced(&self) -> bool {
        self.sources.lock().values().all(SourceState::synced)
    }

    pub fn status(&self) -> Vec<SourceStatus> {
        self.sources
            .lock()
            .iter()
            .map(|(name, s)| {
                let enabled = || s.kinds.iter().filter(|(_, k)| k.state.enabled());
                SourceStatus {
                    source: name.clone(),
                    synced: s.synced(),
                    restored: s.restored,
                    up: s.up,
                    pending: enabled()
                        .filter(|(_, k)| !k.listed_once)
                        .map(|(n, _)| n.clone())
                        .collect(),
                    failing: enabled()
                        .filter(|(_, k)| k.state == KindState::failing)
                        .map(|(n, _)| n.clone())
                        .collect(),
                    disabled: s
                        .kinds
                        .iter()
                        .filter(|(_, k)| !k.state.enabled())
                        .map(|(n, k)| DisabledKind {
                            kind: n.clone(),
                            state: k.state,
                            reason: k.reason.clone(),
                        })
                        .collect(),
                    down_since: s.down_since,
                    last_error: s.last_error.clone(),
                }
            })
            .collect()
    }

    /// Named kinds replace the placeholder a source was expected with
    /// (declared, or reported by a test driving one poll): clear its series,
    /// whatever state it was in (pending, or failing after its task did).
    fn drop_placeholder(&self, source: &str, removed: Option<KindState>) {
        if removed.is_some() {
            self.publish_kind(source, WHOLE_SOURCE, removed, None);
        }
    }

    fn publish_kind(
        &self,
        source: &str,
        kind: &str,
        before: Option<KindState>,
        after: Option<KindState>,
    ) {
        if before == after {
            return;
        }
        if let Some(before) = before {
            self.metrics.kind_state(source, kind, before, false);
        }
        if let Some(after) = after {
            self.metrics.kind_state(source, kind, after, true);
        }
    }
}

/// An error and its causes on one line (`a: b: c`), for logs and `/readyz`.
pub fn cause_chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let text = e.to_string();
        // Some errors repeat their cause in their own message.
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = e.source();
    }
    out
}

/// `93s` → `1m33s`, for log lines a person reads.
fn format_seconds(seconds: f64) -> String {
    let total = seconds.max(0.0).round() as u64;
    match (total / 3600, (total % 3600) / 60, total % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;

    fn health() -> (SourceHealth, ExporterMetrics, Registry, Clock) {
        let mut registry = Registry::default();
        let metrics = ExporterMetrics::register(&mut registry);
        let clock = Clock::manual("2026-01-01T00:00:00Z".parse().unwrap());
        (
            SourceHealth::new(metrics.clone(), clock.clone()),
            metrics,
            registry,
            clock,
        )
    }

    fn text(registry: &Registry) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, registry).unwrap();
        out
    }

    #[test]
    fn ready_and_up_need_every_enabled_kind() {
        let (health, _, registry, _) = health();
        health.expect("kube/a");
        assert!(!health.ready());
        health.declare("kube/a", &["HostedCluster", "Agent"]);
        health.listed("kube/a", "HostedCluster");
        assert!(!health.ready(), "Agent has not listed");
        assert!(!health.up("kube/a"));
        let status = health.status();
        assert_eq!(status[0].pending, vec!["Agent".to_string()]);

        health.disabled("kube/a", "Agent", KindState::absent, "no such CRD");
        assert!(
            health.ready(),
            "an absent optional kind does not hold readiness"
        );
        assert!(health.up("kube/a"));
        let out = text(&registry);
        assert!(
            out.contains(
                r#"hcpflow_source_kind_info{source="kube/a",kind="Agent",state="absent"} 1"#
            ),
            "{out}"
        );
        assert!(!out.contains(r#"kind="Agent",state="pending""#), "{out}");
        assert!(!out.contains(r#"kind="*""#), "placeholder gone: {out}");
        assert!(
            out.contains(r#"hcpflow_source_up{source="kube/a"} 1"#),
            "{out}"
        );
    }

    #[test]
    fn a_failure_downs_the_source_until_that_kind_lists_again() {
        let (health, _, registry, clock) = health();
        health.declare("maestro", &["resource-bundles"]);
        health.listed("maestro", "resource-bundles");
        assert!(health.up("maestro"));
        clock.advance(std::time::Duration::from_secs(10));
        health.failed("maestro", "resource-bundles", "connection refused");
        assert!(!health.up("maestro"));
        assert!(health.ready(), "ready stays: it listed once");
        // Evidence of life from a still-failing source does not turn it up.
        health.alive("maestro");
        assert!(!health.up("maestro"));
        let status = &health.status()[0];
        assert_eq!(status.failing, vec!["resource-bundles".to_string()]);
        assert_eq!(
            status.last_error.as_ref().unwrap().message,
            "connection refused"
        );
        assert!(status.down_since.is_some());
        clock.advance(std::time::Duration::from_secs(20));
        health.listed("maestro", "resource-bundles");
        assert!(health.up("maestro"));
        assert!(health.status()[0].down_since.is_none());
        let out = text(&registry);
        assert!(
            out.contains(r#"hcpflow_source_up{source="maestro"} 1"#),
            "{out}"
        );
        assert!(
            out.contains(
                r#"hcpflow_source_kind_info{source="maestro",kind="resource-bundles",state="ok"} 1"#
            ),
            "{out}"
        );
        assert!(
            !out.contains(r#"state="failing""#),
            "one series per kind: {out}"
        );
    }

    #[test]
    fn last_success_moves_only_on_evidence() {
        let (health, metrics, _, clock) = health();
        health.declare("rp_frontend", &["hcpOpenShiftClusters"]);
        health.listed("rp_frontend", "hcpOpenShiftClusters");
        let last = |m: &ExporterMetrics| {
            m.source_last_success
                .get_or_create(&crate::metrics::exporter::SourceLabels {
                    source: "rp_frontend".into(),
                })
                .get()
        };
        let first = last(&metrics);
        clock.advance(std::time::Duration::from_secs(30));
        assert_eq!(last(&metrics), first, "time alone is no evidence");
        health.alive("rp_frontend");
        assert_eq!(last(&metrics), first + 30.0);
    }

    #[test]
    fn declared_kinds_clear_a_failed_placeholder_series() {
        let (health, _, registry, _) = health();
        health.expect("kube/a");
        health.failed("kube/a", WHOLE_SOURCE, "no kubeconfig");
        assert!(text(&registry).contains(r#"kind="*",state="failing"} 1"#));
        health.declare("kube/a", &["HostedCluster"]);
        let out = text(&registry);
        assert!(!out.contains(r#"kind="*""#), "{out}");
        assert!(
            out.contains(r#"hcpflow_source_kind_info{source="kube/a",kind="HostedCluster",state="pending"} 1"#),
            "{out}"
        );
    }

    #[test]
    fn durations_read_like_a_person_writes_them() {
        assert_eq!(format_seconds(14.2), "14s");
        assert_eq!(format_seconds(93.0), "1m33s");
        assert_eq!(format_seconds(3725.0), "1h2m5s");
    }
}
