//! ARO HCP RP frontend: `Microsoft.RedHatOpenShift/hcpOpenShiftClusters`
//! (hop `rp_frontend`, docs/design/01-overview.md §1.1; wire shapes in §10.7).
//!
//! Reads per subscription
//! `GET {base}/subscriptions/{sub}/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters?api-version=V`
//! (following `nextLink` as given, as long as it stays on the base URL's
//! origin) and individual resources `GET {base}{resource_id}?api-version=V`.
//!
//! Polling rules:
//! - Each subscription and each configured resource id is a *target* with its
//!   own schedule: the fast interval while one of its clusters is in flight
//!   (provisioningState not Succeeded/Failed/Canceled), else the slow interval,
//!   never longer than the full relist interval.
//! - A subscription list is complete for that subscription, so every list is
//!   a relist of it: a cluster it no longer shows is `Gone` (unless it is also
//!   a configured resource id, which its own GET decides). A 404 on a GET by
//!   id is `Gone`.
//! - Batches are `initial: true` until every target has succeeded once.
//! - Each page of a list is delivered as soon as it is read; only a list
//!   read to its end declares what it no longer shows gone.
//! - A failed target keeps its last state (nothing is declared gone), marks
//!   the sync failed (`hcpflow_source_up` 0) and retries with backoff.
//! - Only observations whose view changed are sent, except on a target's
//!   first success and once per full relist interval (and on
//!   [`RpFrontendSource::poll_all`]), where all are.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use serde::Deserialize;
use tracing::Instrument;

use crate::config::RpFrontendConfig;
use crate::model::{Change, ClusterKey, Hop, HopView, IdentityPatch, Observation, Phase, Via};
use crate::sources::health::cause_chain;
use crate::sources::http::{
    self, BuildError, HttpClient, MAX_PAGES, MassDeletionGuard, SourceError, Tracker, UpdateMode,
    WireCondition, null_default,
};
use crate::sources::node_pools::{ArmNodePool, PoolFollow, PoolHints, parse_arm_pool};
use crate::sources::poll::{Cadence, PollKind, TargetSchedule};
use crate::sources::{Parsed, SourceContext, UnknownValue};

/// The `kind` this source reports in `/readyz` and
/// `hcpflow_source_kind_info`: the ARM resource type the RP frontend lists.
pub const KIND: &str = "hcpOpenShiftClusters";

const PROVIDER_PATH: &str = "/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters";

/// An ARM list page: `{value, nextLink}`. `value` is optional here so that
/// [`ArmList::check`] can refuse a page without it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArmList {
    #[serde(default)]
    pub value: Option<Vec<http::RawItem>>,
    #[serde(default)]
    pub next_link: Option<String>,
}

impl ArmList {
    /// A page without `value` (an error document, `{}`, a proxy's JSON)
    /// is not a list: read as an empty one it would declare every cluster
    /// of the subscription gone (docs/design/09-reading-the-upstreams.md §9.9).
    pub fn check(&self) -> Result<(), String> {
        match self.value {
            Some(_) => Ok(()),
            None => Err("no `value`".to_string()),
        }
    }
}

/// The fields of an hcpOpenShiftClusters resource the exporter reads.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HcpOpenShiftCluster {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub system_data: Option<SystemData>,
    #[serde(default)]
    pub properties: Option<ClusterProperties>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemData {
    #[serde(default)]
    pub created_at: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProperties {
    #[serde(default)]
    pub provisioning_state: Option<String>,
    #[serde(default)]
    pub version: Option<VersionProfile>,
    /// Only from api-version 2026-06-30-preview on.
    #[serde(default)]
    pub status: Option<ResourceStatus>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct VersionProfile {
    #[serde(default)]
    pub id: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ResourceStatus {
    #[serde(default, deserialize_with = "null_default")]
    pub conditions: Vec<WireCondition>,
}

/// One resource read: its observation.
#[derive(Debug)]
pub struct ParsedCluster {
    /// Lower-cased ARM resource id (the owner key and the join key).
    pub resource_id: String,
    pub observation: Observation,
    /// The phase, to schedule the next poll.
    pub phase: Phase,
}

/// `subscriptions/{sub}` and `resourceGroups/{rg}` of an ARM id (segment
/// names are case-insensitive in ARM).
pub fn id_scope(resource_id: &str) -> (Option<String>, Option<String>) {
    let mut subscription = None;
    let mut resource_group = None;
    let mut segments = resource_id.split('/').filter(|s| !s.is_empty());
    while let Some(segment) = segments.next() {
        if segment.eq_ignore_ascii_case("subscriptions") {
            subscription = segments.next().map(str::to_string);
        } else if segment.eq_ignore_ascii_case("resourcegroups") {
            resource_group = segments.next().map(str::to_string);
        }
    }
    (subscription, resource_group)
}

/// Turn one resource into its `rp_frontend` observation.
pub fn parse_cluster(
    cluster: &HcpOpenShiftCluster,
    unknown: &mut Vec<UnknownValue>,
) -> ParsedCluster {
    let resource_id = cluster.id.to_lowercase();
    let props = cluster.properties.clone().unwrap_or_default();
    let raw_state = props.provisioning_state.as_deref().unwrap_or("");
    let phase = match crate::views::rp_frontend::phase(raw_state) {
        Some(phase) => phase,
        None => {
            unknown.push(UnknownValue {
                field: "properties.provisioningState",
                value: raw_state.to_string(),
            });
            Phase::Unknown
        }
    };
    let conditions = props
        .status
        .as_ref()
        .map(|s| http::conditions(&s.conditions, unknown))
        .unwrap_or_default();
    // The condition that explains the state carries the upstream time the
    // state was entered.
    let explaining: &[&str] = match phase {
        Phase::Ready => &["Available"],
        Phase::Failed => &["Degraded", "Available"],
        _ => &["Progressing"],
    };
    let (subscription, resource_group) = id_scope(&cluster.id);
    let name = cluster
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .or_else(|| cluster.id.rsplit('/').next().map(str::to_string));
    let view = HopView {
        since: http::transition_of(&conditions, explaining),
        created_at: http::parse_time(
            cluster
                .system_data
                .as_ref()
                .and_then(|s| s.created_at.as_deref()),
            "systemData.createdAt",
            unknown,
        ),
        conditions,
        identity: IdentityPatch {
            name,
            resource_id: Some(resource_id.clone()),
            // Subscription ids are GUIDs, compared case-insensitively by ARM;
            // lower-cased so RP and Clusters Service agree on the label.
            subscription_id: subscription.map(|s| s.to_lowercase()),
            resource_group,
            version: props.version.and_then(|v| v.id).filter(|v| !v.is_empty()),
            ..IdentityPatch::default()
        }
        .boxed(),
        ..HopView::new(raw_state, phase)
    };
    ParsedCluster {
        observation: Observation {
            key: ClusterKey::ArmResourceId(resource_id.clone()),
            hop: Hop::RpFrontend,
            via: Via::Direct,
            object: String::new(),
            change: Change::Upsert(Box::new(view)),
        },
        resource_id,
        phase,
    }
}

/// Turn one list page into observations (items that are not resources are
/// skipped and counted).
pub fn parse_list(list: ArmList) -> (Vec<ParsedCluster>, Vec<UnknownValue>) {
    let mut unknown = Vec::new();
    let items = list.value.unwrap_or_default();
    let mut clusters = Vec::with_capacity(items.len());
    for item in items {
        if let Some(c) = http::decode_item::<HcpOpenShiftCluster>(&item, "value[]", &mut unknown) {
            clusters.push(parse_cluster(&c, &mut unknown));
        }
    }
    (clusters, unknown)
}

/// Observations of a list of parsed clusters.
pub fn to_parsed(clusters: Vec<ParsedCluster>, unknown: Vec<UnknownValue>) -> Parsed {
    Parsed {
        observations: clusters.into_iter().map(|c| c.observation).collect(),
        unknown,
    }
}

fn in_flight(phase: Phase) -> bool {
    !matches!(phase, Phase::Ready | Phase::Failed)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum TargetKind {
    Subscription(String),
    /// Lower-cased resource id as the owner key, original for the URL.
    Resource {
        id: String,
        owner: String,
    },
}

#[derive(Debug)]
struct Target {
    kind: TargetKind,
    schedule: TargetSchedule,
}

/// The RP frontend poller.
pub struct RpFrontendSource {
    ctx: SourceContext,
    cfg: RpFrontendConfig,
    client: HttpClient,
    tracker: Tracker,
    cadence: Cadence,
    targets: Vec<Target>,
    explicit_owners: HashSet<String>,
    /// One per subscription: each list is a relist of its subscription.
    guards: HashMap<String, MassDeletionGuard>,
    /// What each subscription's last list showed. A relist forgets what its
    /// own previous list showed, whatever the ids say: an id naming another
    /// subscription (or none) must not outlive the list that brought it.
    listed_under: HashMap<String, HashSet<String>>,
    /// Which clusters' `nodePools` to read (docs/design/15b-operations.md §15.11); none
    /// until [`RpFrontendSource::with_pool_hints`] says what moved.
    pools: Option<PoolFollow>,
}

impl RpFrontendSource {
    pub fn new(cfg: RpFrontendConfig, ctx: SourceContext) -> Result<RpFrontendSource, BuildError> {
        let client = HttpClient::new(&ctx.name, &cfg.http, ctx.metrics.clone())?;
        Ok(Self::with_client(cfg, ctx, client))
    }

    /// Use a prepared client (e.g. one with a request hook).
    pub fn with_client(
        cfg: RpFrontendConfig,
        ctx: SourceContext,
        client: HttpClient,
    ) -> RpFrontendSource {
        let now = Instant::now();
        let cadence = Self::cadence(&cfg);
        let mut targets: Vec<Target> = cfg
            .subscriptions
            .iter()
            .map(|s| TargetKind::Subscription(s.clone()))
            .chain(cfg.resource_ids.iter().map(|id| TargetKind::Resource {
                id: id.clone(),
                owner: id.to_lowercase(),
            }))
            .map(|kind| Target {
                kind,
                schedule: TargetSchedule::new(&cadence, now),
            })
            .collect();
        targets.dedup_by(|a, b| a.kind == b.kind);
        let explicit_owners = cfg
            .resource_ids
            .iter()
            .map(|id| id.to_lowercase())
            .collect();
        RpFrontendSource {
            ctx,
            cfg,
            client,
            tracker: Tracker::default(),
            cadence,
            targets,
            explicit_owners,
            guards: HashMap::new(),
            listed_under: HashMap::new(),
            pools: None,
        }
    }

    /// Read each cluster's `nodePools` when `hints` says its pools moved,
    /// while one is not settled, and once per `node_pool_rotation`
    /// (docs/design/15b-operations.md §15.11). Without it (or with a zero rotation) the
    /// source reads clusters only.
    pub fn with_pool_hints(mut self, hints: PoolHints) -> RpFrontendSource {
        if !self.cfg.node_pool_rotation.is_zero() {
            self.pools = Some(PoolFollow::new(
                Some(hints),
                self.cfg.node_pool_rotation,
                self.cfg.http.fast_poll_interval,
            ));
        }
        self
    }

    /// Each target fast while one of its clusters is in flight, else slow,
    /// relisted at least once per full interval (docs/design/09-reading-the-upstreams.md §9.3).
    fn cadence(cfg: &RpFrontendConfig) -> Cadence {
        Cadence::new(&cfg.http, PollKind::Fast).with_slow(&cfg.http)
    }

    /// Poll forever. Abort the task to stop.
    pub async fn run(mut self) {
        self.ctx.health.declare(&self.ctx.name, &[KIND]);
        loop {
            let now = Instant::now();
            if self.pools.is_none() || self.targets.iter().any(|t| t.schedule.is_due(now)) {
                self.poll().await;
            } else {
                // Only the rotation's turn is due: no cluster is read.
                self.read_pools_between(true).await;
            }
            let next = self
                .targets
                .iter()
                .map(|t| t.schedule.next_due())
                .min()
                .unwrap_or_else(|| http::after(Instant::now(), self.cfg.http.slow_poll_interval));
            // The rotation turns once per fast interval, whatever the
            // clusters' cadence (docs/design/15b-operations.md §15.11).
            let next = match &self.pools {
                Some(_) => next.min(http::after(
                    Instant::now(),
                    self.cfg.http.fast_poll_interval,
                )),
                None => next,
            };
            let hints = self.pools.as_ref().and_then(|p| p.hints()).cloned();
            loop {
                let woken = async {
                    match &hints {
                        Some(h) => h.woken(true).await,
                        None => std::future::pending().await,
                    }
                };
                let woke = tokio::select! {
                    () = tokio::time::sleep_until(next.into()) => false,
                    () = woken => true,
                };
                if !woke {
                    break;
                }
                self.read_pools_between(false).await;
            }
        }
    }

    /// Read every target whose time has come, deliver one batch, and record
    /// the sync's success or failure. Returns whether every target read
    /// succeeded.
    pub async fn poll(&mut self) -> bool {
        self.poll_targets(false).await
    }

    /// Read every target now (a full relist).
    pub async fn poll_all(&mut self) -> bool {
        self.poll_targets(true).await
    }

    async fn poll_targets(&mut self, all: bool) -> bool {
        // The poll span: every request of this poll is its child, and the
        // upstream sees it as the parent of its own spans (docs/design/07-traces.md §7.6).
        let span = http::poll_span(&self.ctx.name);
        span.record("poll_kind", if all { "full" } else { "due_targets" });
        let ok = self.poll_targets_inner(all).instrument(span.clone()).await;
        http::poll_done(&span, ok);
        ok
    }

    async fn poll_targets_inner(&mut self, all: bool) -> bool {
        let now = Instant::now();
        let initial = !self.targets.iter().all(|t| t.schedule.succeeded_once());
        let mut out = Vec::new();
        let mut unknown = Vec::new();
        let mut ok = true;
        let mut failure = None;
        let mut delivered = false;
        for i in 0..self.targets.len() {
            if !all && !self.targets[i].schedule.is_due(now) {
                continue;
            }
            let kind = self.targets[i].kind.clone();
            let send_all = all || self.targets[i].schedule.relist_due(&self.cadence, now);
            let result = match &kind {
                TargetKind::Subscription(sub) => {
                    let listed = self
                        .read_subscription(sub, send_all, initial, &mut out)
                        .await;
                    delivered |= listed.delivered;
                    listed.result
                }
                TargetKind::Resource { id, owner } => {
                    self.read_resource(id, owner, send_all, &mut out, &mut unknown)
                        .await
                }
            };
            let schedule = &mut self.targets[i].schedule;
            match result {
                Ok(any_in_flight) => {
                    schedule.succeeded(&self.cadence, now, send_all, any_in_flight);
                }
                Err(err) => {
                    ok = false;
                    let delay = schedule.failed();
                    tracing::debug!(source = %self.ctx.name, error = %err, retry_in = ?delay, "RP frontend read failed");
                    failure = Some(cause_chain(&err));
                }
            }
        }
        self.read_pools(true, &mut out, &mut unknown).await;
        // A poll where nothing was read delivers nothing: an empty initial
        // batch would claim a first sync that did not happen.
        let initial = initial && (ok || delivered || !out.is_empty());
        // Pages already went out as they were read; an empty batch after
        // them would say nothing.
        if !out.is_empty() || !unknown.is_empty() || !delivered {
            http::deliver(&self.ctx, initial, out, &unknown);
        }
        // Up only when every subscription's last read succeeded.
        let all_ok = self.targets.iter().all(|t| !t.schedule.failing());
        match &failure {
            None if all_ok => self.ctx.health.listed(&self.ctx.name, KIND),
            None => {}
            Some(error) => self.ctx.health.failed(&self.ctx.name, KIND, error),
        }
        ok
    }

    /// List one subscription page by page and relist it in the tracker.
    /// Each page is delivered as soon as it is read, so a list of ten
    /// thousand resources never sits in memory at once; only a complete
    /// list tells what is gone (docs/design/09-reading-the-upstreams.md §9.3). Says whether one of
    /// its clusters is in flight, and whether any page was delivered.
    async fn read_subscription(
        &mut self,
        sub: &str,
        send_all: bool,
        initial: bool,
        out: &mut Vec<Observation>,
    ) -> Listed {
        let mut seen = HashSet::new();
        let mut any_in_flight = false;
        let mut delivered = false;
        let result = self
            .read_pages(
                sub,
                send_all,
                initial,
                &mut seen,
                &mut any_in_flight,
                &mut delivered,
            )
            .await;
        let result = result.map(|()| {
            self.relist(sub, &seen, out);
            any_in_flight
        });
        Listed { result, delivered }
    }

    async fn read_pages(
        &mut self,
        sub: &str,
        send_all: bool,
        initial: bool,
        seen: &mut HashSet<String>,
        any_in_flight: &mut bool,
        delivered: &mut bool,
    ) -> Result<(), SourceError> {
        let mut url = self
            .client
            .url(&format!("/subscriptions/{sub}{PROVIDER_PATH}"))?;
        url.query_pairs_mut()
            .append_pair("api-version", &self.cfg.api_version);
        for page_index in 0..MAX_PAGES {
            let page: ArmList = http::get_page(
                &self.client,
                url.clone(),
                "ARM list",
                page_index > 0,
                ArmList::check,
            )
            .await?;
            let next = page.next_link.clone().filter(|l| !l.is_empty());
            let (parsed, unknown) = parse_list(page);
            let mut out = Vec::new();
            for cluster in parsed {
                *any_in_flight |= in_flight(cluster.phase);
                let ParsedCluster {
                    resource_id,
                    observation,
                    ..
                } = cluster;
                self.accept(&resource_id, observation, send_all, &mut out);
                seen.insert(resource_id);
            }
            *delivered |= !out.is_empty();
            http::deliver(&self.ctx, initial && !out.is_empty(), out, &unknown);
            match next {
                Some(link) => url = self.client.same_origin(&link)?,
                None => break,
            }
        }
        Ok(())
    }

    /// With every page read, the list is complete: what the subscription's
    /// previous list showed and this one does not is gone (through the
    /// mass-deletion guard).
    fn relist(&mut self, sub: &str, seen: &HashSet<String>, out: &mut Vec<Observation>) {
        let sub_lower = sub.to_lowercase();
        let mut listed = self.listed_under.remove(&sub_lower).unwrap_or_default();
        let known = listed.len();
        let missing: Vec<String> = listed
            .iter()
            .filter(|owner| !seen.contains(*owner) && !self.explicit_owners.contains(*owner))
            .cloned()
            .collect();
        let vanished: HashSet<String> = self
            .guards
            .entry(sub_lower.clone())
            .or_default()
            .filter(&self.ctx, sub, known, missing.clone())
            .into_iter()
            .collect();
        // What this list shows, and what the guard held back (still known,
        // missing again next relist). Updated in place, not rebuilt: a relist
        // of ten thousand resources would otherwise copy every id again,
        // long-lived memory made anew among each list's garbage.
        let missing: HashSet<String> = missing.into_iter().collect();
        listed.retain(|owner| {
            seen.contains(owner) || (missing.contains(owner) && !vanished.contains(owner))
        });
        for owner in seen {
            if !listed.contains(owner) {
                listed.insert(owner.clone());
            }
        }
        self.listed_under.insert(sub_lower, listed);
        for owner in vanished {
            self.tracker.remove(&owner, out);
        }
    }

    async fn read_resource(
        &mut self,
        id: &str,
        owner: &str,
        send_all: bool,
        out: &mut Vec<Observation>,
        unknown: &mut Vec<UnknownValue>,
    ) -> Result<bool, SourceError> {
        let mut url = self.client.url(id)?;
        url.query_pairs_mut()
            .append_pair("api-version", &self.cfg.api_version);
        let Some(cluster) = self
            .client
            .get_json_or_absent::<HcpOpenShiftCluster>(url)
            .await?
        else {
            self.tracker.remove(owner, out);
            return Ok(false);
        };
        let parsed = parse_cluster(&cluster, unknown);
        let flight = in_flight(parsed.phase);
        self.accept(&parsed.resource_id, parsed.observation, send_all, out);
        Ok(flight)
    }

    /// Read the node pools of the clusters due (docs/design/15b-operations.md §15.11). A
    /// failed read keeps what was read before and is counted with the
    /// source's requests; it does not take the source down, whose clusters
    /// were read.
    /// Node pools read between two polls of the clusters: those hinted
    /// (a pool's move reaches the model a second after it, not a poll
    /// later), those not settled, and (`rotate`) the rotation's turn.
    async fn read_pools_between(&mut self, rotate: bool) {
        let initial = !self.targets.iter().all(|t| t.schedule.succeeded_once());
        let mut out = Vec::new();
        let mut unknown = Vec::new();
        self.read_pools(rotate, &mut out, &mut unknown).await;
        if !out.is_empty() || !unknown.is_empty() {
            http::deliver(&self.ctx, initial, out, &unknown);
        }
    }

    async fn read_pools(
        &mut self,
        rotate: bool,
        out: &mut Vec<Observation>,
        unknown: &mut Vec<UnknownValue>,
    ) {
        let Some(mut pools) = self.pools.take() else {
            return;
        };
        // A resource both listed and configured by id is read twice in
        // its turn at most: cheaper than a copy of the fleet's ids.
        let known = self
            .listed_under
            .values()
            .flatten()
            .chain(self.explicit_owners.iter())
            .map(String::as_str);
        let due = pools.due_at(true, rotate, known);
        let this = &*self;
        let read_one = |rid: String| async move {
            let mut unknown = Vec::new();
            let read = match this.read_cluster_pools(&rid, &mut unknown).await {
                // Not a list: what was read before stands.
                Ok(Some(None)) => Ok(None),
                // Gone (404), or its pools.
                Ok(read) => Ok(Some(read.map(Option::unwrap_or_default))),
                Err(error) => Err(error),
            };
            (rid, read, unknown)
        };
        let key_of = |rid: &str| ClusterKey::ArmResourceId(rid.to_string());
        let kind = (true, Hop::RpFrontend);
        pools
            .read_due(&self.ctx, kind, due, key_of, read_one, out, unknown)
            .await;
        self.pools = Some(pools);
    }

    /// One cluster's `nodePools`, every page; `None` when the cluster is
    /// gone (ARM answers 404 for the list of a missing parent), `Some(None)`
    /// when a page is not a list (counted).
    async fn read_cluster_pools(
        &self,
        rid: &str,
        unknown: &mut Vec<UnknownValue>,
    ) -> Result<Option<Option<Vec<(String, HopView)>>>, SourceError> {
        let mut url = self.client.url(&format!("{rid}/nodePools"))?;
        url.query_pairs_mut()
            .append_pair("api-version", &self.cfg.api_version);
        let mut pools = Vec::new();
        for _ in 0..MAX_PAGES {
            let Some(page) = self
                .client
                .get_json_or_absent::<ArmList>(url.clone())
                .await?
            else {
                return Ok(None);
            };
            if let Err(why) = page.check() {
                unknown.push(UnknownValue {
                    field: "nodePools",
                    value: why,
                });
                return Ok(Some(None));
            }
            let next = page.next_link.clone().filter(|l| !l.is_empty());
            for item in page.value.unwrap_or_default() {
                if let Some(pool) =
                    http::decode_item::<ArmNodePool>(&item, "nodePools.value[]", unknown)
                    && let Some(parsed) = parse_arm_pool(&pool, unknown)
                {
                    pools.push(parsed);
                }
            }
            match next {
                Some(link) => url = self.client.same_origin(&link)?,
                None => break,
            }
        }
        Ok(Some(Some(pools)))
    }

    fn accept(
        &mut self,
        resource_id: &str,
        observation: Observation,
        send_all: bool,
        out: &mut Vec<Observation>,
    ) {
        let mode = UpdateMode {
            send_all,
            partial: false,
        };
        self.tracker
            .update(resource_id, vec![observation], mode, out);
    }
}

/// What listing one subscription came to.
struct Listed {
    /// Whether one of its clusters is in flight, or why the list failed.
    result: Result<bool, SourceError>,
    /// Whether some page was delivered before the list ended or failed.
    delivered: bool,
}
