//! Clusters Service (OCM): hop `clusters_service` (docs/design/01-overview.md §1.1; wire
//! shapes in docs/design/10-upstream-facts.md §10.8), through `/api/aro_hcp/v1alpha1` or
//! `/api/clusters_mgmt/v1`.
//!
//! Polling rules, each a paged list (`page`/`size`/`total`), so a poll costs
//! O(pages), never O(clusters):
//! - Full relist (first sync and every `full_relist_interval`): every cluster,
//!   everything sent; a cluster seen before and missing now is read by id
//!   (`search=id in (...)`), and `Gone` only when missing there too: the
//!   list's pages are offsets, and a deletion on an earlier page shifts a
//!   live cluster past a page boundary.
//! - Fast poll (`fast_poll_interval`): the in-flight clusters only,
//!   `search=state not in ('ready','hibernating','error')`. Clusters that were
//!   in flight and are missing from that answer are read in batched
//!   `search=id in (...)` queries; one missing from those too is `Gone`.
//!   Then the clusters created since the previous poll began (minus 30 s of
//!   clock skew), `search=creation_timestamp >= '...'`, whatever their
//!   state: one created and failed between two fast polls is never in flight
//!   when a poll looks, and would wait for the slow poll.
//! - Slow poll (`slow_poll_interval`): the settled clusters,
//!   `search=state in ('ready','hibernating','error')`.
//! - The first full sync is delivered with `initial: true`.
//! - A full relist and a slow poll (nearly the fleet) deliver each page as
//!   soon as it is read; a fast poll delivers when it ends.
//! - Any failed request fails the sync (`hcpflow_source_up` 0): nothing from
//!   an incomplete list is used to declare a cluster gone, and the poller
//!   retries with backoff.
//! - Only clusters whose view changed are sent, except on full relists.
//! - The management cluster comes from the cluster's provision shard, read
//!   once per cluster (a bounded number per poll, in-flight clusters first
//!   within each page) and cached; a failed read is retried after a while.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use serde::Deserialize;
use tracing::Instrument;

use crate::config::{ClustersServiceApi, ClustersServiceConfig};
use crate::model::{
    Change, ClusterKey, Hop, HopError, HopView, IdentityPatch, Observation, Phase, Via,
};
use crate::sources::health::cause_chain;
use crate::sources::http::{
    self, BuildError, HttpClient, MassDeletionGuard, SourceError, Tracker, UpdateMode, sql_quote,
};
use crate::sources::node_pools::{
    CsNodePool, CsNodePoolList, PoolFollow, PoolHints, parse_cs_pool,
};
use crate::sources::poll::{self, Cadence, Polled};
use crate::sources::{Parsed, SourceContext, UnknownValue};

mod wire;
pub use wire::*;

pub use crate::sources::poll::PollKind;

#[derive(Debug, Clone)]
enum ShardEntry {
    Known(Option<String>),
    RetryAt(Instant),
}

/// The Clusters Service poller.
pub struct ClustersServiceSource {
    ctx: SourceContext,
    cfg: ClustersServiceConfig,
    client: HttpClient,
    tracker: Tracker,
    in_flight: HashSet<String>,
    /// When the last successful poll began (the exporter's clock).
    last_poll_began: Option<jiff::Timestamp>,
    shards: HashMap<String, ShardEntry>,
    synced: bool,
    guard: MassDeletionGuard,
    /// Which clusters' `node_pools` to read (docs/design/15b-operations.md §15.11); none
    /// until [`ClustersServiceSource::with_pool_hints`] says what moved.
    pools: Option<PoolFollow>,
}

impl ClustersServiceSource {
    pub fn new(
        cfg: ClustersServiceConfig,
        ctx: SourceContext,
    ) -> Result<ClustersServiceSource, BuildError> {
        let client = HttpClient::new(&ctx.name, &cfg.http, ctx.metrics.clone())?;
        Ok(Self::with_client(cfg, ctx, client))
    }

    pub fn with_client(
        cfg: ClustersServiceConfig,
        ctx: SourceContext,
        client: HttpClient,
    ) -> ClustersServiceSource {
        ClustersServiceSource {
            ctx,
            cfg,
            client,
            tracker: Tracker::default(),
            in_flight: HashSet::new(),
            last_poll_began: None,
            shards: HashMap::new(),
            synced: false,
            guard: MassDeletionGuard::default(),
            pools: None,
        }
    }

    /// Read each cluster's `node_pools` when `hints` says its pools moved,
    /// while one is not settled, and once per `node_pool_rotation`
    /// (docs/design/15b-operations.md §15.11). Without it (or with a zero rotation) the
    /// source reads clusters only.
    pub fn with_pool_hints(mut self, hints: PoolHints) -> ClustersServiceSource {
        if !self.cfg.node_pool_rotation.is_zero() {
            self.pools = Some(PoolFollow::new(
                Some(hints),
                self.cfg.node_pool_rotation,
                self.cfg.http.fast_poll_interval,
            ));
        }
        self
    }

    /// Read the node pools of the clusters due (docs/design/15b-operations.md §15.11). A
    /// failed read keeps what was read before and is counted with the
    /// source's requests; it does not take the source down.
    async fn read_pools(
        &mut self,
        rotate: bool,
        out: &mut Vec<Observation>,
        unknown: &mut Vec<UnknownValue>,
    ) {
        let Some(mut pools) = self.pools.take() else {
            return;
        };
        let due = pools.due_at(false, rotate, self.tracker.owners());
        let this = &*self;
        let read_one = |id: String| async move {
            let mut unknown = Vec::new();
            let read = this.read_cluster_pools(&id, &mut unknown).await.map(Some);
            (id, read, unknown)
        };
        let key_of = |id: &str| ClusterKey::Id(id.to_string());
        let kind = (false, Hop::ClustersService);
        pools
            .read_due(&self.ctx, kind, due, key_of, read_one, out, unknown)
            .await;
        self.pools = Some(pools);
    }

    /// One cluster's `node_pools` (one page: a cluster has a handful);
    /// `None` when the cluster is gone.
    async fn read_cluster_pools(
        &self,
        id: &str,
        unknown: &mut Vec<UnknownValue>,
    ) -> Result<Option<Vec<(String, HopView)>>, SourceError> {
        let mut url = self.client.url(&self.clusters_path())?;
        url.path_segments_mut()
            .map_err(|()| SourceError::InvalidUrl {
                base: self.clusters_path(),
                path: id.to_string(),
                source: url::ParseError::RelativeUrlWithCannotBeABaseBase,
            })?
            .push(id)
            .push("node_pools");
        url.query_pairs_mut().append_pair("size", "100");
        let Some(list) = self
            .client
            .get_json_or_absent::<CsNodePoolList>(url)
            .await?
        else {
            return Ok(None);
        };
        let mut pools = Vec::new();
        for item in list.items.unwrap_or_default() {
            if let Some(pool) =
                http::decode_item::<CsNodePool>(&item, "node_pools.items[]", unknown)
                && let Some(parsed) = parse_cs_pool(&pool, unknown)
            {
                pools.push(parsed);
            }
        }
        Ok(Some(pools))
    }

    /// Clusters currently known to be in flight.
    pub fn in_flight(&self) -> &HashSet<String> {
        &self.in_flight
    }

    /// Full relists, fast polls of what is in flight and slow polls of
    /// what has settled (docs/design/09-reading-the-upstreams.md §9.2).
    pub fn cadence(&self) -> Cadence {
        Cadence::new(&self.cfg.http, PollKind::Fast).with_slow(&self.cfg.http)
    }

    /// Poll forever. Abort the task to stop.
    pub async fn run(mut self) {
        self.ctx.health.declare(&self.ctx.name, &[KIND]);
        let cadence = self.cadence();
        poll::run(&mut self, cadence).await;
    }

    /// One poll of the given kind: read, deliver, record success. Returns
    /// whether every request succeeded. Clusters Service has no
    /// incremental list: asked for one, it polls what is in flight.
    pub async fn poll(&mut self, kind: PollKind) -> bool {
        let kind = match kind {
            PollKind::Incremental => PollKind::Fast,
            kind => kind,
        };
        // The poll span: every request of this poll is its child, and the
        // upstream sees it as the parent of its own spans (docs/design/07-traces.md §7.6).
        let span = http::poll_span(&self.ctx.name);
        span.record("poll_kind", kind.as_str());
        let ok = self.poll_inner(kind).instrument(span.clone()).await;
        http::poll_done(&span, ok);
        ok
    }

    async fn poll_inner(&mut self, kind: PollKind) -> bool {
        let observed_at = self.ctx.clock.now();
        let initial = !self.synced;
        let mut out = Vec::new();
        let mut unknown = Vec::new();
        let failure = match self.read(kind, initial, &mut out, &mut unknown).await {
            Ok(shards_ok) => {
                if kind == PollKind::Full {
                    self.synced = true;
                }
                // A full relist's pages went out as they were read; what is
                // left (clusters read by id, deletions) may be nothing. The
                // clusters go out before their pools are read: a poll's pool
                // reads (hinted, followed, the rotation's turn) held every
                // cluster it read, a join or a failure, until the last of
                // them ended, and under load that was tens of seconds
                // (docs/design/15b-operations.md §15.11).
                if kind == PollKind::Fast || !out.is_empty() || !unknown.is_empty() {
                    http::deliver(
                        &self.ctx,
                        initial,
                        std::mem::take(&mut out),
                        &std::mem::take(&mut unknown),
                    );
                }
                self.read_pools(true, &mut out, &mut unknown).await;
                if !out.is_empty() || !unknown.is_empty() {
                    http::deliver(&self.ctx, initial, out, &unknown);
                }
                self.last_poll_began = Some(observed_at);
                (!shards_ok).then(|| "a search of clusters in flight failed".to_string())
            }
            // A failed fast or slow poll delivers nothing; a full relist has
            // delivered the pages it read. Neither tells what is gone.
            Err(err) => {
                tracing::debug!(source = %self.ctx.name, poll = ?kind, error = %err, "Clusters Service poll failed");
                Some(cause_chain(&err))
            }
        };
        match &failure {
            None => self.ctx.health.listed(&self.ctx.name, KIND),
            Some(error) => self.ctx.health.failed(&self.ctx.name, KIND, error),
        }
        failure.is_none()
    }

    fn clusters_path(&self) -> String {
        format!("{}/clusters", self.cfg.api.path_prefix())
    }

    async fn list(
        &self,
        search: Option<&str>,
        unknown: &mut Vec<UnknownValue>,
    ) -> Result<Vec<CsCluster>, SourceError> {
        let search = scoped_search(search, self.cfg.search_scope.as_deref());
        let params: Vec<(&str, &str)> = search
            .as_deref()
            .map(|s| ("search", s))
            .into_iter()
            .collect();
        let path = self.clusters_path();
        let mut pager = http::Pager::new(&path, &params, LIST_KIND, self.cfg.http.page_size);
        let mut clusters = Vec::new();
        while let Some(items) = pager.next(&self.client).await? {
            clusters.extend(
                items
                    .iter()
                    .filter_map(|item| decode_cluster(item, unknown)),
            );
        }
        Ok(clusters)
    }

    /// Returns whether every provision shard read succeeded (list failures
    /// are errors).
    async fn read(
        &mut self,
        kind: PollKind,
        initial: bool,
        out: &mut Vec<Observation>,
        unknown: &mut Vec<UnknownValue>,
    ) -> Result<bool, SourceError> {
        let mut vanished = Vec::new();
        let mut shard_reads = SHARD_READS_PER_POLL;
        let mut shards_ok = true;
        let reads = match kind {
            PollKind::Full => {
                let seen = self
                    .list_pages(None, initial, &mut shard_reads, &mut shards_ok)
                    .await?;
                let mut missing: Vec<String> = self
                    .tracker
                    .owners()
                    .filter(|o| !seen.contains(*o))
                    .map(str::to_string)
                    .collect();
                // Pages are offsets into a list that changes while it is
                // read: a cluster deleted from an earlier page shifts a live
                // one past the page boundary. Absent from the list is not
                // gone until a read by id agrees.
                // When that read fails (an id the service refuses in a
                // query), the list is believed, as before the check.
                missing.sort();
                let mut confirmed = Vec::new();
                let mut reads = Vec::new();
                for chunk in missing.chunks(IDS_PER_QUERY) {
                    let search = ids_search(chunk.iter().map(String::as_str));
                    let found = match self.list(Some(&search), unknown).await {
                        Ok(found) => found,
                        Err(error) => {
                            tracing::debug!(source = %self.ctx.name, error = %cause_chain(&error), "reading clusters missing from a relist by id failed; they count as gone");
                            Vec::new()
                        }
                    };
                    let found_ids: HashSet<&str> = found.iter().map(|r| r.id.as_str()).collect();
                    confirmed.extend(
                        chunk
                            .iter()
                            .filter(|id| !found_ids.contains(id.as_str()))
                            .cloned(),
                    );
                    reads.extend(found.into_iter().filter(|r| !seen.contains(&r.id)));
                }
                // In flight is what this relist shows in flight: the pages
                // above and the clusters read by id below.
                self.in_flight.retain(|id| seen.contains(id));
                vanished = self
                    .guard
                    .filter(&self.ctx, "clusters", self.tracker.len(), confirmed);
                reads
            }
            PollKind::Fast | PollKind::Incremental => {
                let mut reads = self.list(Some(&in_flight_search()), unknown).await?;
                let seen: HashSet<String> = reads.iter().map(|r| r.id.clone()).collect();
                let mut missing: Vec<String> = self
                    .in_flight
                    .iter()
                    .filter(|id| !seen.contains(*id))
                    .cloned()
                    .collect();
                missing.sort();
                for chunk in missing.chunks(IDS_PER_QUERY) {
                    let search = ids_search(chunk.iter().map(String::as_str));
                    let found = self.list(Some(&search), unknown).await?;
                    let found_ids: HashSet<&str> = found.iter().map(|r| r.id.as_str()).collect();
                    vanished.extend(
                        chunk
                            .iter()
                            .filter(|id| !found_ids.contains(id.as_str()))
                            .cloned(),
                    );
                    reads.extend(found);
                }
                if let Some(began) = self.last_poll_began {
                    let recent = self
                        .list(Some(&created_since_search(began)), unknown)
                        .await?;
                    let have: HashSet<String> = reads.iter().map(|r| r.id.clone()).collect();
                    reads.extend(recent.into_iter().filter(|r| !have.contains(&r.id)));
                }
                reads
            }
            // Every settled cluster: nearly the fleet, so page by page too.
            PollKind::Slow => {
                let search = settled_search();
                self.list_pages(Some(&search), false, &mut shard_reads, &mut shards_ok)
                    .await?;
                Vec::new()
            }
        };
        for id in &vanished {
            self.tracker.remove(id, out);
            self.in_flight.remove(id);
            self.shards.remove(id);
        }
        let send_all = kind == PollKind::Full;
        shards_ok &= self
            .take_in(reads, send_all, &mut shard_reads, out, unknown)
            .await;
        Ok(shards_ok)
    }

    /// Every page of a list of nearly the fleet (all clusters with no
    /// `search`: a full relist, sending all; the settled ones: a slow poll,
    /// sending changes), each delivered as soon as it is read
    /// (docs/design/09-reading-the-upstreams.md §9.4): ten thousand clusters' reads and observations
    /// are never held at once. Returns the ids the list showed; only a list
    /// read to its end gets here, so only it tells what is gone.
    async fn list_pages(
        &mut self,
        search: Option<&str>,
        initial: bool,
        shard_reads: &mut usize,
        shards_ok: &mut bool,
    ) -> Result<HashSet<String>, SourceError> {
        let send_all = search.is_none();
        let search = scoped_search(search, self.cfg.search_scope.as_deref());
        let params: Vec<(&str, &str)> = search
            .as_deref()
            .map(|s| ("search", s))
            .into_iter()
            .collect();
        let path = self.clusters_path();
        let mut pager = http::Pager::new(&path, &params, LIST_KIND, self.cfg.http.page_size);
        let mut seen = HashSet::new();
        while let Some(items) = pager.next(&self.client).await? {
            let mut unknown = Vec::new();
            let reads: Vec<CsCluster> = items
                .iter()
                .filter_map(|item| decode_cluster(item, &mut unknown))
                .collect();
            drop(items);
            seen.extend(reads.iter().map(|r| r.id.clone()));
            let mut out = Vec::new();
            *shards_ok &= self
                .take_in(reads, send_all, shard_reads, &mut out, &mut unknown)
                .await;
            http::deliver(&self.ctx, initial && !out.is_empty(), out, &unknown);
        }
        Ok(seen)
    }

    /// Take clusters read into the in-flight set, the shard cache (at most
    /// `shard_reads` more reads this poll) and the tracker. Returns whether
    /// every shard read succeeded.
    async fn take_in(
        &mut self,
        reads: Vec<CsCluster>,
        send_all: bool,
        shard_reads: &mut usize,
        out: &mut Vec<Observation>,
        unknown: &mut Vec<UnknownValue>,
    ) -> bool {
        for cluster in &reads {
            if is_in_flight(cluster) {
                self.in_flight.insert(cluster.id.clone());
            } else {
                self.in_flight.remove(&cluster.id);
            }
        }
        let shards_ok = self.read_shards(&reads, shard_reads).await;
        let mode = UpdateMode {
            send_all,
            partial: false,
        };
        for cluster in reads {
            let mgmt = match self.shards.get(&cluster.id) {
                Some(ShardEntry::Known(m)) => m.clone(),
                _ => None,
            };
            let obs = parse_cluster(&cluster, self.cfg.api, mgmt, unknown);
            self.tracker.update(&cluster.id, vec![obs], mode, out);
        }
        shards_ok
    }

    /// Read the provision shard of clusters that do not have one cached,
    /// in-flight clusters first, at most `budget` (what is left of
    /// [`SHARD_READS_PER_POLL`] this poll).
    async fn read_shards(&mut self, reads: &[CsCluster], budget: &mut usize) -> bool {
        let now = Instant::now();
        let mut wanted: Vec<(&str, bool)> = reads
            .iter()
            .filter(|r| match self.shards.get(&r.id) {
                None => true,
                Some(ShardEntry::RetryAt(at)) => *at <= now,
                Some(ShardEntry::Known(_)) => false,
            })
            .map(|r| (r.id.as_str(), is_in_flight(r)))
            .collect();
        wanted.sort_by_key(|(_, flight)| !flight);
        wanted.truncate(*budget);
        *budget -= wanted.len();
        let mut ok = true;
        for (id, _) in wanted {
            let entry = match self.read_shard(id).await {
                Ok(Some(shard)) => ShardEntry::Known(mgmt_cluster_of(&shard)),
                // Not assigned yet: ask again later.
                Ok(None) => ShardEntry::RetryAt(http::after(now, SHARD_RETRY)),
                Err(err) => {
                    ok = false;
                    tracing::warn!(source = %self.ctx.name, cluster_id = id, error = %err, "provision shard read failed");
                    ShardEntry::RetryAt(http::after(now, SHARD_RETRY))
                }
            };
            self.shards.insert(id.to_string(), entry);
        }
        ok
    }

    async fn read_shard(&self, id: &str) -> Result<Option<ProvisionShard>, SourceError> {
        let mut url = self.client.url(&self.clusters_path())?;
        // Segments are pushed, not formatted, so an odd id cannot change the path.
        url.path_segments_mut()
            .map_err(|()| SourceError::InvalidUrl {
                base: self.clusters_path(),
                path: id.to_string(),
                source: url::ParseError::RelativeUrlWithCannotBeABaseBase,
            })?
            .push(id)
            .push("provision_shard");
        self.client.get_json_or_absent(url).await
    }
}

impl Polled for ClustersServiceSource {
    fn synced(&self) -> bool {
        self.synced
    }

    fn poll(&mut self, kind: PollKind) -> impl Future<Output = bool> + Send {
        ClustersServiceSource::poll(self, kind)
    }

    fn woken(&self) -> impl Future<Output = ()> + Send + 'static {
        let hints = self.pools.as_ref().and_then(|p| p.hints()).cloned();
        async move {
            match hints {
                Some(h) => h.woken(false).await,
                None => std::future::pending().await,
            }
        }
    }

    /// The pools of the clusters hinted since the last poll, read now: a
    /// pool's move reaches the model a second after it, not a fast poll
    /// later (docs/design/15b-operations.md §15.11).
    async fn between_polls(&mut self) {
        let mut out = Vec::new();
        let mut unknown = Vec::new();
        self.read_pools(false, &mut out, &mut unknown).await;
        if !out.is_empty() || !unknown.is_empty() {
            http::deliver(&self.ctx, !self.synced, out, &unknown);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_is_anded_into_every_search_and_alone_when_there_is_none() {
        const SCOPE: &str = "azure.subscription_id = 's' and azure.resource_group_name = 'g'";
        let scope = Some(SCOPE);
        assert_eq!(scoped_search(None, None), None);
        assert_eq!(
            scoped_search(Some("id in ('a')"), None).as_deref(),
            Some("id in ('a')")
        );
        assert_eq!(scoped_search(None, scope).as_deref(), scope);
        assert_eq!(
            scoped_search(Some(&in_flight_search()), scope).unwrap(),
            format!("{} and {SCOPE}", in_flight_search())
        );
        assert_eq!(
            scoped_search(None, Some("  ")),
            None,
            "a blank scope is none"
        );
    }
}
