//! What the kinds of one watcher set share: the mapper, the one backoff,
//! the source's health, and the emitting of batches to the model.

use std::collections::BTreeSet;
use std::time::Duration;

use parking_lot::Mutex;
use rand::Rng;
use tracing::{debug, warn};

use crate::model::Batch;
use crate::sources::SourceContext;
use crate::views::UnknownValue;

use super::config::{KubeMode, KubeSourceConfig, WatchKind};
use super::failure::WatchFailure;
use super::mapping::{Facts, Mapper, ObjRef};
use super::metrics::{self, KubeMetrics};

pub(super) struct Shared {
    pub(super) source: String,
    pub(super) mgmt_cluster: String,
    pub(super) ctx: SourceContext,
    pub(super) metrics: KubeMetrics,
    pub(super) inner: Mutex<Inner>,
    pub(super) backoff: Mutex<Backoff>,
    /// Bumped whenever a kind lists: wakes the kinds waiting to retry.
    pub(super) relists: tokio::sync::watch::Sender<u64>,
    pub(super) mode: KubeMode,
    pub(super) environment: String,
    pub(super) environment_warned: std::sync::atomic::AtomicBool,
}

pub(super) struct Inner {
    pub(super) mapper: Mapper,
}

impl Shared {
    pub(super) fn event(&self, event: &str) {
        self.ctx.metrics.watch_event(&self.source, event);
    }

    /// Flush the mapper into one batch; the sink is called under our lock
    /// so batches of different kinds reach the model in mapper order.
    pub(super) fn emit(&self, inner: &mut Inner, initial: bool, kind: WatchKind) {
        let now = self.ctx.clock.now();
        let observations = inner.mapper.flush();
        match kind {
            WatchKind::MultiClusterEngine => {
                let phase = inner.mapper.mce_phase();
                let label = phase.as_ref().map(|p| {
                    let (label, known) = metrics::mce_phase_label(p.as_deref());
                    if !known {
                        self.ctx.metrics.unknown_value(&self.source, "status.phase");
                    }
                    label.to_string()
                });
                self.metrics
                    .set_mce_phase(&self.mgmt_cluster, label.as_deref());
            }
            WatchKind::Agent => {
                let unknown = self
                    .metrics
                    .set_agents(&self.mgmt_cluster, inner.mapper.agents());
                for stage in unknown {
                    debug!(source = %self.source, stage = %stage, "unknown agent stage");
                    self.ctx
                        .metrics
                        .unknown_value(&self.source, "status.progress.currentStage");
                }
            }
            _ => {}
        }
        if observations.is_empty() && !initial {
            return;
        }
        self.ctx.sink.apply(Batch {
            source: self.source.clone(),
            initial,
            observed_at: now,
            observations,
        });
    }

    /// A live event or bookmark proves the watch is alive: keep the
    /// last-success time fresh, but never turn a failing source up (only a
    /// relist does).
    pub(super) fn refresh_health(&self) {
        self.ctx.health.alive(&self.source);
    }

    /// One page of a relist: its objects go to the mapper and what changed
    /// to the model at once, so a relist holds one page's facts and
    /// observations, not a whole kind's (docs/design/09-reading-the-upstreams.md §9.6).
    pub(super) fn relisted_page(
        &self,
        kind: WatchKind,
        items: Vec<(ObjRef, Facts)>,
        initial: bool,
    ) {
        let mut inner = self.inner.lock();
        for (at, facts) in items {
            inner.mapper.upsert(at, facts);
        }
        self.emit(&mut inner, initial, kind);
    }

    /// The relist is complete: known objects it did not show are gone.
    pub(super) fn relisted(&self, kind: WatchKind, seen: BTreeSet<ObjRef>, initial: bool) {
        let mut inner = self.inner.lock();
        let known = inner.mapper.known(kind);
        let vanished: Vec<&ObjRef> = known.difference(&seen).collect();
        if !vanished.is_empty() {
            debug!(source = %self.source, kind = kind.as_str(), count = vanished.len(), "relist: objects vanished");
        }
        for at in vanished {
            inner.mapper.delete(kind, at);
        }
        self.emit(&mut inner, initial, kind);
        drop(inner);
        self.ctx.health.listed(&self.source, kind.as_str());
    }

    /// The kind's API is gone (its CRD was removed): so are its objects.
    pub(super) fn forget(&self, kind: WatchKind) {
        let mut inner = self.inner.lock();
        let known = inner.mapper.known(kind);
        if known.is_empty() {
            return;
        }
        for at in &known {
            inner.mapper.delete(kind, at);
        }
        self.emit(&mut inner, false, kind);
    }

    pub(super) fn applied(&self, kind: WatchKind, at: ObjRef, facts: Facts) {
        let mut inner = self.inner.lock();
        inner.mapper.upsert(at, facts);
        self.emit(&mut inner, false, kind);
        drop(inner);
        self.refresh_health();
    }

    pub(super) fn deleted(&self, kind: WatchKind, at: &ObjRef) {
        let mut inner = self.inner.lock();
        inner.mapper.delete(kind, at);
        self.emit(&mut inner, false, kind);
        drop(inner);
        self.refresh_health();
    }

    /// One failed session: counted by kind, and the source down with the
    /// cause first (refused, DNS, TLS, timeout, the HTTP status) and the
    /// whole chain after it, the API's Status message included.
    pub(super) fn failed(&self, kind: WatchKind, failure: &WatchFailure) {
        self.event("error");
        self.ctx
            .metrics
            .request_failed(&self.source, failure.kind());
        let message = format!(
            "{}: {}",
            failure.cause().describe(),
            crate::sources::health::cause_chain(failure)
        );
        self.ctx
            .health
            .failed(&self.source, kind.as_str(), &message);
    }

    /// Count what the views did not recognise in one object.
    pub(super) fn unknown(&self, unknown: &mut Vec<UnknownValue>) {
        self.ctx.count_unknown(unknown);
        unknown.clear();
    }

    pub(super) fn malformed(&self, kind: WatchKind, at: &ObjRef, error: &str) {
        warn!(source = %self.source, kind = kind.as_str(), namespace = %at.namespace(), name = %at.name(), error = %error, "skipping an object that does not parse");
        self.event("malformed");
        self.ctx.metrics.unknown_value(&self.source, "object");
    }
}

fn with_jitter(d: Duration) -> Duration {
    d.mul_f64(rand::rng().random_range(0.8..1.2))
}

/// One backoff for the whole management cluster, not one per kind
/// (docs/design/09-reading-the-upstreams.md §9.6): kinds failing together are one retry round, so the
/// delay doubles once per round, and the first kind to list again resets it
/// and wakes every other kind, so after an outage all kinds relist within
/// moments of the first instead of each sitting out its own long delay.
pub(super) struct Backoff {
    pub(super) next: Duration,
    pub(super) grown_at: Option<tokio::time::Instant>,
}

impl Shared {
    /// The wait before this kind's next attempt.
    pub(super) fn next_delay(&self, cfg: &KubeSourceConfig) -> Duration {
        let max = cfg.max_backoff.max(cfg.min_backoff);
        let now = tokio::time::Instant::now();
        let mut backoff = self.backoff.lock();
        let delay = backoff.next;
        // Another kind failing within the same round shares its delay.
        if backoff
            .grown_at
            .is_none_or(|at| now.duration_since(at) >= delay)
        {
            backoff.next = (delay * 2).min(max);
            backoff.grown_at = Some(now);
        }
        delay
    }

    /// A kind listed: the cluster answers, so every waiting kind retries now.
    pub(super) fn list_succeeded(&self, cfg: &KubeSourceConfig) {
        {
            let mut backoff = self.backoff.lock();
            backoff.next = cfg.min_backoff;
            backoff.grown_at = None;
        }
        self.relists.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Sleep `delay` (jittered) or until any kind of this source lists.
    pub(super) async fn wait_retry(&self, delay: Duration) {
        let mut relists = self.relists.subscribe();
        tokio::select! {
            _ = tokio::time::sleep(with_jitter(delay)) => {}
            _ = relists.changed() => {}
        }
    }

    /// `--kube-environment` only drives the namespace fallback for cluster
    /// ids; say once, loudly, when the cluster shows it is wrong.
    pub(super) fn check_environment(&self, kind: WatchKind, at: &ObjRef) {
        if kind != WatchKind::HostedCluster
            || self
                .environment_warned
                .load(std::sync::atomic::Ordering::Relaxed)
        {
            return;
        }
        if let Some(why) = environment_mismatch(self.mode, &self.environment, at.namespace())
            && !self
                .environment_warned
                .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            warn!(source = %self.source, namespace = %at.namespace(), name = %at.name(), "{why}");
        }
    }
}

/// Why a HostedCluster's namespace contradicts the configured environment,
/// if it does. In ARO mode HostedClusters live in `ocm-<env>-<id>`; the
/// environment serves only to read `<id>` out of it when the id label is
/// missing (docs/design/04-identities-and-joins.md §4.2).
pub fn environment_mismatch(mode: KubeMode, environment: &str, namespace: &str) -> Option<String> {
    if mode != KubeMode::Aro || environment.is_empty() {
        return None;
    }
    let prefix = format!("ocm-{environment}-");
    if namespace.starts_with(&prefix) {
        return None;
    }
    let seen = namespace
        .strip_prefix("ocm-")
        .and_then(|rest| rest.split('-').next())
        .filter(|e| !e.is_empty());
    Some(match seen {
        Some(other) => format!(
            "HostedCluster namespace {namespace} is of environment {other:?}, not the configured {environment:?} (sources.kube[].environment / --kube-environment): cluster ids of HostedClusters without the id label cannot be read from their namespace"
        ),
        None => format!(
            "HostedCluster namespace {namespace} is not of the form ocm-{environment}-<id> (sources.kube[].environment / --kube-environment): cluster ids of HostedClusters without the id label cannot be read from their namespace"
        ),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn an_environment_the_namespaces_contradict_is_named() {
        let check = |mode, env, ns| environment_mismatch(mode, env, ns);
        assert_eq!(check(KubeMode::Aro, "prod", "ocm-prod-2abc-name"), None);
        let other = check(KubeMode::Aro, "prod", "ocm-int-2abc").unwrap();
        assert!(
            other.contains(r#"of environment "int", not the configured "prod""#),
            "{other}"
        );
        let foreign = check(KubeMode::Aro, "prod", "clusters").unwrap();
        assert!(
            foreign.contains("not of the form ocm-prod-<id>"),
            "{foreign}"
        );
        // Self-managed hubs and an unset environment have nothing to contradict.
        assert_eq!(check(KubeMode::SelfManaged, "prod", "clusters"), None);
        assert_eq!(check(KubeMode::Aro, "", "clusters"), None);
    }
}
