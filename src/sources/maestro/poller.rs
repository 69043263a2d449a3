//! The Maestro poller: full relists, and between them incremental polls
//! timed from when the last began, interleaved with a relist's pages
//! (docs/design/09-reading-the-upstreams.md §9.5). What a bundle says is read in the parent module.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use tracing::Instrument;

use super::event::{self, StatusEvent};
use super::known::{KnownBundles, Lookup};
use super::proto::CloudEvent;
use super::{
    BUNDLES_PATH, IDS_PER_QUERY, KIND, LIST_KIND, ResourceBundle, bundle_cluster_id, parse_bundle,
    updated_since_search,
};
use crate::config::{MaestroConfig, MaestroGrpcConfig};
use crate::model::{Hop, Observation, Stamp};
use crate::sources::health::cause_chain;
use crate::sources::http::{
    self, BuildError, HttpClient, MassDeletionGuard, SourceError, Tracker, UpdateMode, poll_span,
};
use crate::sources::poll::{self, Cadence, Polled};
use crate::sources::{SourceContext, UnknownValue};

pub use crate::sources::poll::PollKind;

mod lists;

/// How long the bundles first heard on the stream wait to be read together
/// (docs/design/09b-reading-the-upstreams.md §9.10). A status event does not name its bundle's
/// cluster (its ObjectMeta is the agent's: named by the resource id, with
/// Maestro's labels, not Clusters Service's), so a bundle no list has shown
/// is read by id once; reading each as it is heard cost one request per
/// new bundle, some hundred a minute at 10,000 clusters' churn. The first
/// is read at once; the next read waits until two seconds after it, for
/// every new bundle heard meanwhile.
pub const UNREAD_WINDOW: Duration = Duration::from_secs(2);

/// The bundles the stream says were deleted are forgotten together, at most
/// once per this window. Forgetting one looks at every object the tracker
/// holds (another bundle may show it), some 450,000 at 50,000 clusters: done
/// for each batch of events, with bundles deleted in nearly every batch, it
/// took the source's core and its events piled up past the queue
/// (docs/performance.md). A quarter of a second keeps a deletion's delay
/// well under the stream's second.
pub const FORGET_WINDOW: Duration = Duration::from_millis(250);

/// After each page of a paced list, a pause of this share of what the page
/// took (docs/design/09b-reading-the-upstreams.md §9.10): Maestro spends at most four fifths of the
/// list's time serving it, whatever its page size and load. A fixed pause
/// doubled a list of 100-bundle pages, which Maestro serves in half a
/// second, and a 20,000-cluster reconciling list outlasted ten minutes.
pub const PAGE_PAUSE_SHARE: f64 = 0.25;

/// A bundle column the source reads bundles by.
#[derive(Clone, Copy, Debug)]
enum BundleField {
    Id,
    Name,
}

impl BundleField {
    fn column(self) -> &'static str {
        match self {
            BundleField::Id => "id",
            BundleField::Name => "name",
        }
    }

    fn of(self, bundle: &ResourceBundle) -> &str {
        match self {
            BundleField::Id => &bundle.id,
            BundleField::Name => bundle.name.as_deref().unwrap_or_default(),
        }
    }
}

/// When work gathered for a window is due: never without any, at once the
/// first time, else a window after it was last done.
fn window_due(pending: bool, last: Option<Instant>, window: Duration) -> Option<Instant> {
    pending.then(|| last.map_or_else(Instant::now, |last| last + window))
}

/// The Maestro poller.
pub struct MaestroSource {
    ctx: SourceContext,
    cfg: MaestroConfig,
    client: HttpClient,
    tracker: Tracker,
    newest_updated_at: Option<Timestamp>,
    /// When the last successful poll began (the exporter's clock).
    last_poll_began: Option<Timestamp>,
    synced: bool,
    guard: MassDeletionGuard,
    /// Bundles last seen with `deleted_at`: the incremental query cannot
    /// show that they are gone, so each fast poll reads them by id
    /// (docs/design/09-reading-the-upstreams.md §9.5).
    deleting: HashSet<String>,
    /// When the next incremental pass is due, between polls or between the
    /// pages of a full relist.
    incremental_due: Instant,
    /// How long the last incremental pass took.
    incremental_takes: Duration,
    /// With the stream: what the lists said of each followed bundle that
    /// a status event does not say (docs/design/09b-reading-the-upstreams.md §9.10), shared with the
    /// exporter that keeps it across restarts (§3.10). Empty when polling.
    known: KnownBundles,
    /// Whether Maestro is heard over its stream (and `known` kept).
    streaming: bool,
    /// With the stream: the bundles a list showed that this instance does
    /// not follow (another shard's, or unlabelled), by id. Their events
    /// carry the agent's metadata, not the cluster label, so without this
    /// each one looked like a bundle never listed and was read by id: a
    /// shard of n read (n-1)/n of all status events back (docs/design/08-scopes-and-scale-out.md
    /// §8.3). Ids only, a few MB at fleet scale; each relist keeps only
    /// those it showed. Empty when polling.
    ignored: HashSet<Box<str>>,
    /// With the stream, while a list pages: the events read meanwhile,
    /// applied between two pages so a list of minutes never holds them
    /// back (docs/design/09b-reading-the-upstreams.md §9.10).
    pub(super) inbox: Option<super::inbox::Inbox>,
    /// Bundles an event named that no list has shown yet, read by id
    /// together, at most once per [`UNREAD_WINDOW`].
    unread: std::collections::BTreeSet<String>,
    last_unread_read: Option<Instant>,
    /// Bundles the stream said were deleted, forgotten together at most
    /// once per [`FORGET_WINDOW`].
    deleted: Vec<String>,
    last_forget: Option<Instant>,
    /// A first list on the stream is paging: bundles first heard wait for
    /// it (it reaches them, or has) instead of being read by id.
    cold_listing: bool,
    /// Whether a list paces its pages: one that runs while state is served
    /// (a reconciling or periodic list on the stream) pauses after each
    /// page a [`PAGE_PAUSE_SHARE`] of what the page took, so the list costs
    /// Maestro a bounded share of its time. Unpaced: as fast as Maestro
    /// answers.
    pub(super) paced: bool,
}

impl MaestroSource {
    pub fn new(cfg: MaestroConfig, ctx: SourceContext) -> Result<MaestroSource, BuildError> {
        let client = HttpClient::new(&ctx.name, &cfg.http, ctx.metrics.clone())?;
        Ok(Self::with_client(cfg, ctx, client))
    }

    pub fn with_client(
        cfg: MaestroConfig,
        ctx: SourceContext,
        client: HttpClient,
    ) -> MaestroSource {
        MaestroSource {
            ctx,
            cfg,
            client,
            tracker: Tracker::default(),
            newest_updated_at: None,
            last_poll_began: None,
            synced: false,
            guard: MassDeletionGuard::default(),
            deleting: HashSet::new(),
            incremental_due: Instant::now(),
            incremental_takes: Duration::ZERO,
            known: KnownBundles::default(),
            streaming: false,
            ignored: HashSet::new(),
            inbox: None,
            unread: Default::default(),
            last_unread_read: None,
            deleted: Vec::new(),
            last_forget: None,
            cold_listing: false,
            paced: false,
        }
    }

    pub fn context(&self) -> &SourceContext {
        &self.ctx
    }

    /// Deliver what a pass has read so far and start afresh: a pass's pages
    /// go out as they are read (docs/design/09-reading-the-upstreams.md §9.5).
    fn deliver_so_far(
        &self,
        initial: bool,
        out: &mut Vec<Observation>,
        unknown: &mut Vec<UnknownValue>,
    ) {
        http::deliver(
            &self.ctx,
            initial,
            std::mem::take(out),
            &std::mem::take(unknown),
        );
    }

    /// Whether a full list has completed once.
    pub fn synced(&self) -> bool {
        self.synced
    }

    /// Between two pages of a list (the last took `page_took`): apply the
    /// events the stream delivered meanwhile, and pause if the list is
    /// paced, applying events as they come. An error when the stream was
    /// lost: the list is of no use then, as a new subscription lists again.
    async fn between_pages(&mut self, page_took: Duration) -> Result<(), SourceError> {
        if self.inbox.is_none() {
            return Ok(());
        }
        let until = self
            .paced
            .then(|| Instant::now() + page_took.mul_f64(PAGE_PAUSE_SHARE));
        // Everything queued when the page came in, a batch at a time: a
        // page of a large list takes seconds, and events must not pile up
        // behind it. Not what arrives while those are applied: under steady
        // churn on a busy core the queue never runs dry, and chasing it held
        // a 100-cluster list between two pages for ten seconds and more.
        // Later events wait in the queue for the next gap (the reading task
        // keeps reading, so Maestro's buffer never fills).
        let mut backlog = self.inbox.as_ref().map_or(0, |inbox| inbox.queued());
        loop {
            let Some(inbox) = self.inbox.as_mut() else {
                return Ok(());
            };
            let (events, alive) = inbox.drain();
            if let Some(lost) = inbox.lost() {
                return Err(SourceError::Interrupted(format!(
                    "the stream it reconciles was lost: {}",
                    cause_chain(lost)
                )));
            }
            if alive {
                self.ctx.health.alive(&self.ctx.name);
            }
            if !events.is_empty() {
                backlog = backlog.saturating_sub(events.len());
                self.apply_events(events).await;
                // A batch is milliseconds of work on a runtime the server
                // shares: let a scrape in between.
                tokio::task::yield_now().await;
                if backlog > 0 {
                    continue;
                }
            }
            // While a list pages behind served state (paced), bundles
            // first heard are read together, a window apart: after a
            // restart every restored bundle is unknown to the stream until
            // the list reaches it, and reading them as they were heard, a
            // read between every two pages, held a 20,000-cluster list back
            // past ten minutes. What the list has shown meanwhile is not
            // read. A first list serves nothing yet: the rest is read after
            // it.
            if !self.cold_listing && self.unread_due().is_some_and(|due| due <= Instant::now()) {
                self.read_unread().await;
            }
            if self.forget_due().is_some_and(|due| due <= Instant::now()) {
                self.forget_deleted();
            }
            match until {
                Some(until) if Instant::now() < until => {
                    let wait = until.saturating_duration_since(Instant::now());
                    if let Some(inbox) = self.inbox.as_mut() {
                        inbox.wait(wait).await;
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    /// How often the whole collection is listed again.
    pub fn relist_interval(&self) -> Duration {
        self.cfg.http.full_relist_interval
    }

    /// The stream's settings, when Maestro is heard over its stream.
    pub fn grpc(&self) -> Option<MaestroGrpcConfig> {
        self.cfg.grpc.as_deref().cloned()
    }

    /// Keep what the stream's events need from the lists (docs/design/09b-reading-the-upstreams.md
    /// §9.10).
    pub fn remember_for_stream(&mut self) {
        self.streaming = true;
    }

    /// Keep what the stream knows in `known`: the map the exporter seeded
    /// from the last run's bundle ids and writes at shutdown, the same for
    /// every restart of this source (docs/design/03-timeline-model.md §3.10).
    pub fn remembering(mut self, known: KnownBundles) -> MaestroSource {
        self.known = known;
        self
    }

    /// Apply status events from the stream: each becomes the bundle the
    /// list would show (completed with what the last list said) and is read
    /// by the same [`parse_bundle`]; `Deleted` removes it. A bundle the
    /// lists never showed is read by id, so its first reading is the
    /// list's. An event older than what a list showed since is skipped.
    /// Malformed events are counted and skipped (docs/design/09b-reading-the-upstreams.md §9.10).
    pub async fn apply_events(&mut self, events: Vec<CloudEvent>) {
        let mode = UpdateMode {
            send_all: false,
            partial: false,
        };
        let mut out = Vec::new();
        let mut unknown = Vec::new();
        let mut unread = Vec::new();
        // Forgotten together, at most once per window: what a bundle showed
        // is gone unless another still shows it, which looks at every held
        // object.
        let mut deleted = Vec::new();
        for ev in &events {
            match event::decode(ev, &mut unknown) {
                None => {}
                // Another shard's too: forgotten with the rest, a window
                // later, so a status event just behind it is still dropped.
                Some(StatusEvent::Deleted { id, .. }) => deleted.push(id),
                Some(StatusEvent::Status {
                    mut bundle,
                    sequence,
                }) => {
                    // Another shard's (or unlabelled): nothing to read.
                    if self.ignored.contains(bundle.id.as_str()) {
                        continue;
                    }
                    match self.known.fill(&mut bundle, sequence) {
                        Lookup::Stale => continue,
                        Lookup::Filled => {}
                        // Never listed: its event alone would name it by
                        // the agent's ObjectMeta, not as the list does.
                        Lookup::Unknown => {
                            unread.push(bundle.id);
                            continue;
                        }
                    }
                    self.accept(*bundle, mode, &mut out, &mut unknown);
                }
            }
        }
        drop(events);
        self.deleted.extend(deleted);
        if self.forget_due().is_some_and(|due| due <= Instant::now()) {
            self.forget_deleted_into(&mut out);
        }
        self.unread.extend(unread);
        // Between lists, a full query's worth is read without waiting for
        // the window; while a list pages, only a window apart (above).
        let listing = self.inbox.is_some();
        if !self.cold_listing
            && self.unread_due().is_some_and(|due| {
                due <= Instant::now() || (!listing && self.unread.len() >= IDS_PER_QUERY)
            })
        {
            self.read_unread_into(mode, &mut out, &mut unknown).await;
        }
        http::deliver(&self.ctx, false, out, &unknown);
    }

    /// When the bundles the stream said were deleted are to be forgotten:
    /// at once, or a window after the last time (docs/design/09b-reading-the-upstreams.md §9.10).
    /// `None` when there are none.
    pub fn forget_due(&self) -> Option<Instant> {
        window_due(!self.deleted.is_empty(), self.last_forget, FORGET_WINDOW)
    }

    /// Forget the bundles the stream said were deleted, and deliver that
    /// what they showed is gone.
    pub fn forget_deleted(&mut self) {
        let mut out = Vec::new();
        self.forget_deleted_into(&mut out);
        http::deliver(&self.ctx, false, out, &[]);
    }

    fn forget_deleted_into(&mut self, out: &mut Vec<Observation>) {
        self.last_forget = Some(Instant::now());
        let deleted = std::mem::take(&mut self.deleted);
        self.forget(&deleted, out);
    }

    /// When the bundles heard but never listed are to be read: at once, or
    /// a window after the last such read (docs/design/09b-reading-the-upstreams.md §9.10). `None`
    /// when there are none.
    pub fn unread_due(&self) -> Option<Instant> {
        window_due(
            !self.unread.is_empty(),
            self.last_unread_read,
            UNREAD_WINDOW,
        )
    }

    /// Read the bundles heard but never listed, by id, in one request per
    /// 50, and deliver what they show.
    pub async fn read_unread(&mut self) {
        let mode = UpdateMode {
            send_all: false,
            partial: false,
        };
        let (mut out, mut unknown) = (Vec::new(), Vec::new());
        self.read_unread_into(mode, &mut out, &mut unknown).await;
        http::deliver(&self.ctx, false, out, &unknown);
    }

    async fn read_unread_into(
        &mut self,
        mode: UpdateMode,
        out: &mut Vec<Observation>,
        unknown: &mut Vec<UnknownValue>,
    ) {
        self.last_unread_read = Some(Instant::now());
        // A list may have shown them since they were heard, and then at
        // least as new as the event: known now, nothing to read.
        let mut ids = self.known.unknown_of(std::mem::take(&mut self.unread));
        // Heard before a list showed them as another shard's: a first list
        // of a large fleet hears thousands, and read by id they made a
        // shard ask Maestro three and a half times what one instance asks.
        ids.retain(|id| !self.ignored.contains(id.as_str()));
        if ids.is_empty() {
            return;
        }
        // A failed read (Maestro down a moment, a 5xx) is tried again a
        // window later: on the stream the next list comes only with the
        // next resubscription or relist, minutes away, and the bundle would
        // stay unseen until then (docs/design/09b-reading-the-upstreams.md §9.10). Absent ids of a
        // failed read are tried again too; the next read that answers
        // drops those that are gone.
        if let Err(not_read) = self.read_by_id(ids, mode, out, unknown).await {
            self.unread.extend(not_read);
        }
    }

    /// The newest bundle `updated_at` seen (the incremental query's start).
    pub fn newest_updated_at(&self) -> Option<Timestamp> {
        self.newest_updated_at
    }

    /// Full relists and, between them, incremental polls timed by the
    /// polls themselves (docs/design/09-reading-the-upstreams.md §9.5); no slow poll.
    pub fn cadence(&self) -> Cadence {
        let http = &self.cfg.http;
        Cadence::new(http, PollKind::Incremental)
            .with_min_gap(MIN_POLL_GAP.min(http.fast_poll_interval))
    }

    /// Poll forever. Abort the task to stop.
    pub async fn run(mut self) {
        self.ctx.health.declare(&self.ctx.name, &[KIND]);
        let cadence = self.cadence();
        poll::run(&mut self, cadence).await;
    }

    /// One poll: read, deliver, record success. Any poll but a full one is
    /// incremental; an incremental poll before anything was seen is a full
    /// one. Returns whether it succeeded.
    pub async fn poll(&mut self, kind: PollKind) -> bool {
        // The poll span: every request of this poll is its child, and the
        // upstream sees it as the parent of its own spans (docs/design/07-traces.md §7.6).
        let span = poll_span(&self.ctx.name);
        let ok = self.poll_inner(kind).instrument(span.clone()).await;
        super::http::poll_done(&span, ok);
        ok
    }

    async fn poll_inner(&mut self, kind: PollKind) -> bool {
        let observed_at = self.ctx.clock.now();
        let scope = self
            .cfg
            .search_scope
            .clone()
            .filter(|c| !c.trim().is_empty());
        // A scope is the whole search (a JSONB label search cannot be ANDed
        // with `updated_at`), so every scoped poll reads the scope in full:
        // a few bundles, never the fleet (docs/design/12-interfaces.md §12.4).
        let incremental_from = match (kind, self.newest_updated_at) {
            (kind, Some(newest)) if kind != PollKind::Full && self.synced && scope.is_none() => {
                Some(newest)
            }
            _ => None,
        };
        let kind = match incremental_from {
            Some(_) => PollKind::Incremental,
            None => PollKind::Full,
        };
        tracing::Span::current().record("poll_kind", kind.as_str());
        let result = match incremental_from {
            Some(newest) => self.incremental_pass(observed_at, newest).await.map(drop),
            None => self.full_pass(observed_at, scope).await,
        };
        self.cold_listing = false;
        match result {
            Ok(()) => {
                self.ctx.health.listed(&self.ctx.name, KIND);
                true
            }
            Err(err) => {
                tracing::debug!(source = %self.ctx.name, poll = ?kind, error = %err, "Maestro poll failed");
                self.ctx
                    .health
                    .failed(&self.ctx.name, KIND, &cause_chain(&err));
                false
            }
        }
    }

    /// These bundles are gone upstream: `Gone` for what they showed.
    fn forget(&mut self, gone: &[String], out: &mut Vec<Observation>) {
        for id in gone {
            self.deleting.remove(id);
        }
        if self.streaming {
            self.known.forget_all(gone);
            for id in gone {
                self.ignored.remove(id.as_str());
            }
        }
        self.tracker.remove_vanished(gone, out);
    }

    fn accept(
        &mut self,
        bundle: ResourceBundle,
        mode: UpdateMode,
        out: &mut Vec<Observation>,
        unknown: &mut Vec<UnknownValue>,
    ) {
        // Another shard's bundle is known by its label alone: its status
        // feedback (the ManifestWork, HostedCluster and pools in it) is
        // never read into views, so a shard parses only its share
        // (docs/design/08-scopes-and-scale-out.md §8.3). Its `updated_at` still moves the next
        // incremental query's start, as every bundle's does. An unlabelled
        // one is read as before, which counts it as unknown and stops.
        let foreign = bundle_cluster_id(&bundle).is_some_and(|id| !self.ctx.sink.follows(id));
        let parsed = match foreign {
            true => super::ParsedBundle {
                updated_at: crate::views::parse_time(
                    bundle.updated_at.as_deref(),
                    "updated_at",
                    unknown,
                ),
                ..super::ParsedBundle::default()
            },
            false => parse_bundle(&bundle, unknown),
        };
        if let Some(t) = parsed.updated_at.map(Stamp::timestamp) {
            self.newest_updated_at = Some(self.newest_updated_at.map_or(t, |n| n.max(t)));
        }
        if parsed.cluster_id.is_none() {
            // Unlabelled, or another shard's: not ours to track (a shard
            // keeps only its own bundles, docs/design/08-scopes-and-scale-out.md §8.3); forget it if
            // it once was.
            self.deleting.remove(&bundle.id);
            if self.streaming {
                self.known.forget(&bundle.id);
                self.ignored.insert(bundle.id.as_str().into());
            }
            self.tracker.remove(&bundle.id, out);
            return;
        }
        if bundle.deleted_at.as_deref().is_some_and(|d| !d.is_empty()) {
            self.deleting.insert(bundle.id.clone());
        } else {
            self.deleting.remove(&bundle.id);
        }
        if self.streaming {
            self.ignored.remove(bundle.id.as_str());
            self.known.remember(&bundle);
        }
        let mode = UpdateMode {
            partial: parsed.feedback_error.is_some(),
            ..mode
        };
        self.tracker.update_with_fallbacks(
            &bundle.id,
            parsed.observations,
            parsed.placeholders,
            mode,
            out,
        );
    }
}

impl Polled for MaestroSource {
    fn synced(&self) -> bool {
        self.synced
    }

    /// Incremental polls are timed from when the last one began, not
    /// ended (docs/design/09-reading-the-upstreams.md §9.5).
    fn frequent_due(&self) -> Option<Instant> {
        Some(self.incremental_due)
    }

    fn poll(&mut self, kind: PollKind) -> impl Future<Output = bool> + Send {
        MaestroSource::poll(self, kind)
    }
}

/// The shortest pause between two polls, so a Maestro that answers at once
/// is not asked back to back.
const MIN_POLL_GAP: Duration = Duration::from_secs(1);

/// The pause after a successful poll before the next incremental one. A
/// change that lands just after a query began is read by the next poll and
/// shown when that poll ends; starting the next one an interval after the
/// last began, less the time a poll takes, shows every change within one
/// fast-poll interval (docs/design/09-reading-the-upstreams.md §9.5). So the pause is the interval
/// less two polls' time, and never below [`MIN_POLL_GAP`].
pub fn next_incremental_wait(interval: Duration, poll_takes: Duration) -> Duration {
    interval
        .saturating_sub(poll_takes.saturating_mul(2))
        .max(MIN_POLL_GAP.min(interval))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_poll_begins_so_a_change_is_shown_within_one_interval() {
        let interval = Duration::from_secs(15);
        // A change just after a query began waits for the pause and the
        // next poll, never more than an interval after this poll began.
        for takes in [0.2, 1.0, 3.7, 6.0] {
            let takes = Duration::from_secs_f64(takes);
            let shown_after = takes + next_incremental_wait(interval, takes) + takes;
            assert!(
                shown_after <= interval,
                "{takes:?}: shown after {shown_after:?}"
            );
        }
        // A poll that takes half the interval or more cannot keep it: the
        // polls then follow each other with the smallest gap.
        assert_eq!(
            next_incremental_wait(interval, Duration::from_secs(9)),
            MIN_POLL_GAP
        );
        // An interval shorter than the gap is kept (tests poll fast).
        let short = Duration::from_millis(200);
        assert_eq!(next_incremental_wait(short, Duration::ZERO), short);
    }
}
