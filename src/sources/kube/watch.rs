//! The list/watch protocol of one kind, written out (see [`watch_loop`]).

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::core::{DeserializeGuard, Resource};
use serde::de::DeserializeOwned;
use tracing::{Instrument, debug};

use crate::metrics::exporter::{KindState, RequestErrorKind};

use super::config::{KubeSourceConfig, WatchKind};
use super::failure::{WatchFailure, disabled_reason, disables};
use super::mapping::{MapperConfig, ObjRef, ToFacts};
use super::metrics;
use super::shared::Shared;

/// How often an absent or forbidden optional kind is looked for again: a CRD
/// installed later (or RBAC granted) is picked up without a restart, at the
/// cost of one list request per kind every five minutes.
pub const DISABLED_RECHECK: Duration = Duration::from_secs(300);

/// Two label selectors as one (a comma is AND).
pub(super) fn and_selectors(a: Option<String>, b: Option<String>) -> Option<String> {
    match (a.filter(|s| !s.is_empty()), b.filter(|s| !s.is_empty())) {
        (Some(a), Some(b)) => Some(format!("{a},{b}")),
        (a, b) => a.or(b),
    }
}

pub(super) struct Selectors {
    pub(super) labels: Option<String>,
    pub(super) fields: Option<String>,
}

/// How one list-then-watch session ended.
enum Ended {
    /// 410 Gone on a watch: the API server forgot our version; relist at once.
    Expired,
    /// 410 on a list's continue token: the list took longer than the
    /// server keeps its snapshot. Relisting at once could loop on a list
    /// that is always too slow, so this waits the backoff, without
    /// counting the source down (nothing failed).
    ListExpired,
    Failed(WatchFailure),
}

/// Keep one kind watched forever: list, then watch from the list's version,
/// re-watching when the server ends a watch and relisting after an error,
/// an expired version or an idle deadline.
///
/// This is the kube list/watch protocol written out rather than kube-rs's
/// `watcher`, because the watcher swallows BOOKMARK events and has no idle
/// deadline: a hung API server (socket open, nothing sent) would leave the
/// source looking fine forever. Here every event and bookmark is evidence of
/// life, and silence past `idle_timeout` is a failure (docs/design/09-reading-the-upstreams.md §9.6).
pub(super) async fn watch_loop<K>(
    shared: &Shared,
    cfg: &KubeSourceConfig,
    api: Api<DeserializeGuard<K>>,
    selectors: Selectors,
    kind: WatchKind,
) where
    K: Resource<DynamicType = ()> + ToFacts + Clone + DeserializeOwned + Debug + Send + 'static,
{
    // group/version/resource, e.g. hypershift.openshift.io/v1beta1/hostedclusters
    let resource = format!("{}/{}", K::api_version(&()), K::plural(&()));
    let session = Session {
        shared,
        cfg,
        api: &api,
        selectors: &selectors,
        kind,
        resource: &resource,
        mapper_cfg: MapperConfig::from(cfg),
    };
    let mut first_sync = true;
    loop {
        let ended = session.run(&mut first_sync).await;
        let failure = match ended {
            Ended::Expired => {
                debug!(source = %shared.source, kind = kind.as_str(), "resourceVersion expired; relisting");
                continue;
            }
            Ended::ListExpired => {
                let delay = shared.next_delay(cfg);
                debug!(source = %shared.source, kind = kind.as_str(), retry_in = ?delay, "list continue token expired; relisting");
                shared.wait_retry(delay).await;
                continue;
            }
            Ended::Failed(failure) => failure,
        };
        if disables(kind, &failure) {
            let (state, reason) = disabled_reason(&failure, &resource);
            if state == KindState::absent {
                shared.forget(kind);
            }
            shared
                .ctx
                .health
                .disabled(&shared.source, kind.as_str(), state, &reason);
            tokio::time::sleep(DISABLED_RECHECK).await;
            continue;
        }
        let reason = if matches!(failure, WatchFailure::Idle(_)) {
            metrics::RestartReason::idle
        } else {
            metrics::RestartReason::error
        };
        shared.metrics.restarted(&shared.source, reason);
        shared.failed(kind, &failure);
        let delay = shared.next_delay(cfg);
        // The source's going down is logged once by the health (with the
        // cause); each retry only at debug, so an outage is not a flood.
        debug!(source = %shared.source, kind = kind.as_str(), error = %crate::sources::health::cause_chain(&failure), retry_in = ?delay, "kube watch failed");
        shared.wait_retry(delay).await;
    }
}

struct Session<'a, K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug> {
    shared: &'a Shared,
    cfg: &'a KubeSourceConfig,
    api: &'a Api<DeserializeGuard<K>>,
    selectors: &'a Selectors,
    kind: WatchKind,
    resource: &'a str,
    mapper_cfg: MapperConfig,
}

impl<K> Session<'_, K>
where
    K: Resource<DynamicType = ()> + ToFacts + Clone + DeserializeOwned + Debug + Send + 'static,
{
    async fn run(&self, first_sync: &mut bool) -> Ended {
        let relist_span = tracing::info_span!("kube.relist", source = %self.shared.source, kind = self.kind.as_str());
        let version = match self.relist(first_sync).instrument(relist_span).await {
            Ok(version) => version,
            Err(ended) => return ended,
        };
        self.watch(version).await
    }

    /// Time one request against the idle deadline and count it.
    async fn request<T>(
        &self,
        verb: &'static str,
        call: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, WatchFailure> {
        let started = tokio::time::Instant::now();
        let result = tokio::time::timeout(self.cfg.idle_timeout, call).await;
        self.shared
            .ctx
            .metrics
            .request_done(&self.shared.source, started.elapsed().as_secs_f64());
        match result {
            Err(_) => Err(WatchFailure::Idle(self.cfg.idle_timeout)),
            Ok(Err(cause)) => Err(WatchFailure::Request {
                verb,
                resource: self.resource.to_string(),
                cause,
            }),
            Ok(Ok(answer)) => Ok(answer),
        }
    }

    /// List every page, each handed to the mapper as it comes; at the end,
    /// known objects missing from the list are deleted. Returns the list's
    /// version.
    async fn relist(&self, first_sync: &mut bool) -> Result<String, Ended> {
        let shared = self.shared;
        shared.event("init");
        let mut seen = BTreeSet::new();
        let mut unknown = Vec::new();
        let mut continue_token: Option<String> = None;
        let version = loop {
            let mut lp = ListParams::default().limit(self.cfg.page_size.max(1));
            lp.label_selector = self.selectors.labels.clone();
            lp.field_selector = self.selectors.fields.clone();
            lp.continue_token = continue_token.take();
            let page = match self.request("list", self.api.list(&lp)).await {
                Ok(page) => page,
                // An expired continue token: start the list again.
                Err(failure) if failure.code() == Some(410) => return Err(Ended::ListExpired),
                Err(failure) => return Err(Ended::Failed(failure)),
            };
            let mut items = Vec::with_capacity(page.items.len());
            for guard in page.items {
                shared.event("init_apply");
                match guard.0 {
                    Ok(mut obj) => {
                        // Nothing downstream reads managedFields.
                        obj.meta_mut().managed_fields = None;
                        let at = ObjRef::of(obj.meta());
                        shared.check_environment(self.kind, &at);
                        seen.insert(at.clone());
                        items.push((at, obj.facts(&self.mapper_cfg, &mut unknown)));
                        shared.unknown(&mut unknown);
                    }
                    Err(invalid) => {
                        let at = ObjRef::of(&invalid.metadata);
                        shared.malformed(self.kind, &at, &invalid.error);
                        // Keep what we knew of it: unreadable is not gone.
                        seen.insert(at);
                    }
                }
            }
            shared.relisted_page(self.kind, items, *first_sync);
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => continue_token = Some(token),
                None => {
                    break page
                        .metadata
                        .resource_version
                        .filter(|v| !v.is_empty())
                        .ok_or_else(|| {
                            Ended::Failed(WatchFailure::NoResourceVersion(
                                self.resource.to_string(),
                            ))
                        })?;
                }
            }
        };
        shared.event("init_done");
        shared.relisted(self.kind, seen, *first_sync);
        *first_sync = false;
        shared.list_succeeded(self.cfg);
        Ok(version)
    }

    /// Watch from `version` until something fails; a watch the server ends
    /// (its timeout) is re-opened from the last version seen.
    async fn watch(&self, mut version: String) -> Ended {
        loop {
            let span = tracing::info_span!("kube.watch", source = %self.shared.source, kind = self.kind.as_str());
            match self.watch_once(&mut version).instrument(span).await {
                Ok(()) => continue,
                Err(ended) => return ended,
            }
        }
    }

    async fn watch_once(&self, version: &mut String) -> Result<(), Ended> {
        let shared = self.shared;
        // The server ends each watch before the idle deadline could pass
        // (three quarters of it): a healthy but quiet API server then proves
        // itself by closing the watch cleanly even where its bookmarks come
        // only once a minute, and re-watching from the last version is cheap
        // (no relist).
        let server_timeout = self
            .cfg
            .watch_timeout
            .min(self.cfg.idle_timeout.mul_f64(0.75));
        let mut wp = WatchParams::default().timeout(
            u32::try_from(server_timeout.as_secs())
                .unwrap_or(290)
                .clamp(1, 290),
        );
        // Bookmarks are the evidence a quiet watch is alive (the default,
        // said here because the idle deadline depends on it).
        wp.bookmarks = true;
        wp.label_selector = self.selectors.labels.clone();
        wp.field_selector = self.selectors.fields.clone();
        // A watch's duration is counted until its headers: its lifetime is
        // the server's timeout, no measure of the API server's latency.
        let stream = match self.request("watch", self.api.watch(&wp, version)).await {
            Ok(stream) => stream,
            Err(failure) if failure.code() == Some(410) => return Err(Ended::Expired),
            Err(failure) => return Err(Ended::Failed(failure)),
        };
        let mut stream = std::pin::pin!(stream);
        let mut unknown = Vec::new();
        loop {
            let next = match tokio::time::timeout(self.cfg.idle_timeout, stream.next()).await {
                Err(_) => return Err(Ended::Failed(WatchFailure::Idle(self.cfg.idle_timeout))),
                // The server ended the watch (its timeout): it answered, so
                // it is alive; watch again from where it left off.
                Ok(None) => {
                    shared.refresh_health();
                    return Ok(());
                }
                Ok(Some(next)) => next,
            };
            let event = match next {
                Ok(event) => event,
                Err(cause) => {
                    return Err(Ended::Failed(WatchFailure::Request {
                        verb: "watch",
                        resource: self.resource.to_string(),
                        cause,
                    }));
                }
            };
            match event {
                WatchEvent::Added(guard) | WatchEvent::Modified(guard) => {
                    shared.event("apply");
                    match guard.0 {
                        Ok(mut obj) => {
                            obj.meta_mut().managed_fields = None;
                            if let Some(v) = obj.meta().resource_version.clone() {
                                *version = v;
                            }
                            let at = ObjRef::of(obj.meta());
                            shared.check_environment(self.kind, &at);
                            let facts = obj.facts(&self.mapper_cfg, &mut unknown);
                            shared.unknown(&mut unknown);
                            shared.applied(self.kind, at, facts);
                        }
                        Err(invalid) => {
                            if let Some(v) = invalid.metadata.resource_version.clone() {
                                *version = v;
                            }
                            shared.malformed(
                                self.kind,
                                &ObjRef::of(&invalid.metadata),
                                &invalid.error,
                            );
                            shared.refresh_health();
                        }
                    }
                }
                WatchEvent::Deleted(guard) => {
                    shared.event("delete");
                    let meta = match &guard.0 {
                        Ok(obj) => obj.meta(),
                        Err(invalid) => &invalid.metadata,
                    };
                    if let Some(v) = meta.resource_version.clone() {
                        *version = v;
                    }
                    shared.deleted(self.kind, &ObjRef::of(meta));
                }
                WatchEvent::Bookmark(bookmark) => {
                    shared.event("bookmark");
                    *version = bookmark.metadata.resource_version;
                    shared.refresh_health();
                }
                WatchEvent::Error(status) => {
                    shared.event("error");
                    if status.code == 410 {
                        shared
                            .ctx
                            .metrics
                            .request_failed(&shared.source, RequestErrorKind::status_4xx);
                        return Err(Ended::Expired);
                    }
                    return Err(Ended::Failed(WatchFailure::Event {
                        resource: self.resource.to_string(),
                        status,
                    }));
                }
            }
        }
    }
}
