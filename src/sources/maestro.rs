//! Maestro resource bundles: hop `maestro_bundle`, and through the bundle's
//! status feedback the hops `manifestwork`, `hosted_cluster` and `node_pool`
//! marked `via="maestro"` (docs/design.md §2.6;
//! wire shapes in §10.5 and §10.6).
//!
//! The nesting read (the contract with the simulated world and with ARO HCP):
//! bundle `status.resourceStatus[]` → the manifest whose `resourceMeta.kind`
//! is `ManifestWork` → its feedback value `status` (`JsonRaw`) = that
//! ManifestWork's `.status` → its `resourceStatus.manifests[]` → the
//! `HostedCluster` manifest's feedback `status` = HostedCluster `.status`, and
//! each `NodePool` manifest's feedback `status` = NodePool `.status` plus an
//! optional `Integer` value `replicas` = `spec.replicas` (desired).
//!
//! Polling rules (each a paged list, `page`/`size`/`total`, O(pages)):
//! - Full relist (first sync and every `full_relist_interval`): every bundle,
//!   everything sent; a bundle seen before and missing now is `Gone`, with
//!   the hops nested in it.
//! - Fast poll (`fast_poll_interval`): incremental,
//!   `search=updated_at > '<newest updated_at seen, minus a small overlap>'`.
//!   The overlap re-reads bundles updated in the same instant as the newest
//!   one seen (or committed late); unchanged ones are not sent again.
//! - The first full sync is delivered with `initial: true`.
//! - A failed request fails the sync (`hcpflow_source_up` 0), delivers
//!   nothing, and the poller retries with backoff.
//! - Only objects whose view changed are sent, except on full relists.
//! - A bundle whose feedback cannot be read keeps its nested hops' last good
//!   state (counted under `statusFeedback.jsonRaw`); nested objects go only
//!   when the bundle goes or a readable feedback no longer shows them.
//! - Phases are read by `crate::views`, the same functions the kube watches
//!   use, and never from a clock: a HostedCluster Degraded past its budget is
//!   the model's to fail (docs/design.md §3.4).

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use serde::Deserialize;

use crate::config::MaestroConfig;
use crate::model::{Change, ClusterKey, Hop, HopView, Observation, Via};
use crate::sources::health::cause_chain;
use crate::sources::http::{
    self, Backoff, BuildError, HttpClient, MassDeletionGuard, Tracker, UpdateMode, poll_span,
};
use crate::sources::{Parsed, SourceContext, UnknownValue};
use crate::views::hosted_cluster::{self, HostedClusterStatus};
use crate::views::node_pool::{self, NodePoolStatus};
use crate::views::work::{self, ManifestCondition, WorkStatus};
use crate::views::{WireCondition, conditions, null_default, parse_time};
use tracing::Instrument;

/// The `kind` this source reports in `/readyz` and
/// `hcpflow_source_kind_info`: the collection Maestro lists.
pub const KIND: &str = "resource-bundles";

/// The label that carries the Clusters Service id on bundles.
pub const CLUSTER_ID_LABEL: &str = "api.openshift.com/id";

pub const BUNDLES_PATH: &str = "/api/maestro/v1/resource-bundles";

/// The `kind` of the bundle list envelope (docs/design.md §10.6).
pub const LIST_KIND: &str = "ResourceBundleList";

/// How far behind the newest `updated_at` seen the incremental query starts.
pub const INCREMENTAL_OVERLAP: SignedDuration = SignedDuration::from_secs(2);

/// A resource bundle, the fields read.
#[derive(Debug, Clone, Deserialize)]
pub struct ResourceBundle {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub consumer_name: Option<String>,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub updated_at: Option<String>,
    #[serde(default)]
    pub deleted_at: Option<String>,
    #[serde(default)]
    pub metadata: Option<BundleMetadata>,
    /// `null` until the agent reported.
    #[serde(default)]
    pub status: Option<BundleStatus>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct BundleMetadata {
    #[serde(default, deserialize_with = "null_default")]
    pub labels: BTreeMap<String, String>,
}

/// Bundle `status`: the keys `ObservedVersion` and `SequenceID` are not read.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleStatus {
    #[serde(default, deserialize_with = "null_default")]
    pub conditions: Vec<WireCondition>,
    /// A flat list here, unlike the ManifestWork CR's `resourceStatus.manifests`.
    #[serde(default, deserialize_with = "null_default")]
    pub resource_status: Vec<ManifestCondition>,
}

/// What one bundle says.
#[derive(Debug, Default)]
pub struct ParsedBundle {
    /// `None`: the bundle has no cluster id label and was skipped.
    pub cluster_id: Option<String>,
    pub observations: Vec<Observation>,
    /// False when part of the nested feedback could not be read: the nested
    /// hops not shown keep their last good state.
    pub nested_complete: bool,
    pub updated_at: Option<Timestamp>,
}

/// Decode the `status` JsonRaw feedback of a manifest. `Ok(None)`: no
/// feedback yet (normal early on). `Err(())`: present but unreadable,
/// counted.
fn json_feedback<T: serde::de::DeserializeOwned>(
    m: &ManifestCondition,
    unknown: &mut Vec<UnknownValue>,
) -> Result<Option<T>, ()> {
    let Some(value) = m.feedback("status") else {
        return Ok(None);
    };
    if value.kind != "JsonRaw" {
        unknown.push(UnknownValue {
            field: "statusFeedback.fieldValue.type",
            value: value.kind.clone(),
        });
        return Err(());
    }
    let raw = value.json_raw.as_deref().unwrap_or("");
    match serde_json::from_str::<Option<T>>(raw) {
        Ok(status) => Ok(status),
        Err(err) => {
            unknown.push(UnknownValue {
                field: "statusFeedback.jsonRaw",
                value: err.to_string(),
            });
            Err(())
        }
    }
}

fn observation(cluster_id: &str, hop: Hop, via: Via, object: &str, view: HopView) -> Observation {
    Observation {
        key: ClusterKey::Id(cluster_id.to_string()),
        hop,
        via,
        object: object.to_string(),
        change: Change::Upsert(Box::new(view)),
    }
}

/// Turn one bundle into its observations: the bundle hop, and the hops its
/// nested feedback shows, each read by the same view as a kube watch reads
/// the object.
pub fn parse_bundle(bundle: &ResourceBundle, unknown: &mut Vec<UnknownValue>) -> ParsedBundle {
    let updated_at = parse_time(bundle.updated_at.as_deref(), "updated_at", unknown);
    let cluster_id = bundle
        .metadata
        .as_ref()
        .and_then(|m| m.labels.get(CLUSTER_ID_LABEL))
        .map(|s| s.trim())
        .filter(|s| !s.is_empty());
    let Some(cluster_id) = cluster_id else {
        unknown.push(UnknownValue {
            field: "metadata.labels.api.openshift.com/id",
            value: bundle.id.clone(),
        });
        return ParsedBundle {
            nested_complete: true,
            updated_at,
            ..ParsedBundle::default()
        };
    };
    let deleting = bundle.deleted_at.as_deref().is_some_and(|d| !d.is_empty());
    let status = bundle.status.clone().unwrap_or_default();
    let mut bundle_view = work::read(conditions::read(&status.conditions, unknown), deleting);
    bundle_view.created_at = parse_time(bundle.created_at.as_deref(), "created_at", unknown);
    bundle_view.updated_at = updated_at;
    let mut parsed = ParsedBundle {
        cluster_id: Some(cluster_id.to_string()),
        observations: vec![observation(
            cluster_id,
            Hop::MaestroBundle,
            Via::Direct,
            &bundle.id,
            bundle_view,
        )],
        nested_complete: true,
        updated_at,
    };

    let Some(work_manifest) = status
        .resource_status
        .iter()
        .find(|m| m.kind() == "ManifestWork")
    else {
        return parsed;
    };
    let work: WorkStatus = match json_feedback(work_manifest, unknown) {
        Ok(Some(work)) => work,
        // No feedback yet (the agent has not synced it) or unreadable
        // feedback: nothing nested to say, and nothing nested to take back.
        Ok(None) | Err(()) => {
            parsed.nested_complete = false;
            return parsed;
        }
    };
    let work_conditions = conditions::read(&work.conditions, unknown);
    let work_deleting = deleting || work::deleting_condition(&work_conditions);
    let mut work_view = work::read(work_conditions, work_deleting);
    work_view.updated_at = updated_at;
    parsed.observations.push(observation(
        cluster_id,
        Hop::Manifestwork,
        Via::Maestro,
        "",
        work_view,
    ));

    let manifests = work
        .resource_status
        .map(|r| r.manifests)
        .unwrap_or_default();
    for manifest in &manifests {
        let meta = manifest.resource_meta.clone().unwrap_or_default();
        match manifest.kind() {
            "HostedCluster" => match json_feedback::<HostedClusterStatus>(manifest, unknown) {
                Ok(Some(hc)) => {
                    // Feedback carries the status only: the HasBeenAvailable
                    // annotation is not visible this way, the history is.
                    let reading = hosted_cluster::read(Some(&hc), work_deleting, false, unknown);
                    let mut view = reading.view;
                    view.updated_at = updated_at;
                    view.identity.namespace = meta.namespace.filter(|n| !n.is_empty());
                    view.identity.version = reading.version;
                    parsed.observations.push(observation(
                        cluster_id,
                        Hop::HostedCluster,
                        Via::Maestro,
                        "",
                        view,
                    ));
                }
                Ok(None) | Err(()) => parsed.nested_complete = false,
            },
            "NodePool" => {
                let name = meta.name.unwrap_or_default();
                match json_feedback::<NodePoolStatus>(manifest, unknown) {
                    Ok(Some(np)) => {
                        let desired = manifest
                            .feedback("replicas")
                            .filter(|v| v.kind == "Integer")
                            .and_then(|v| {
                                node_pool::count(v.integer, "statusFeedback.replicas", unknown)
                            });
                        let mut view = node_pool::read(Some(&np), work_deleting, desired, unknown);
                        view.updated_at = updated_at;
                        parsed.observations.push(observation(
                            cluster_id,
                            Hop::NodePool,
                            Via::Maestro,
                            &name,
                            view,
                        ));
                    }
                    Ok(None) | Err(()) => parsed.nested_complete = false,
                }
            }
            _ => {}
        }
    }
    parsed
}

/// Parse a list of raw bundles (pure; for tests and one-shot reads).
pub fn parse_items(items: Vec<http::RawItem>) -> Parsed {
    let mut parsed = Parsed::default();
    for item in items {
        if let Some(bundle) =
            http::decode_item::<ResourceBundle>(&item, "items[]", &mut parsed.unknown)
        {
            let b = parse_bundle(&bundle, &mut parsed.unknown);
            parsed.observations.extend(b.observations);
        }
    }
    parsed
}

/// The `search` of the incremental poll.
pub fn updated_since_search(newest_seen: Timestamp) -> String {
    let from = newest_seen
        .checked_sub(INCREMENTAL_OVERLAP)
        .unwrap_or(newest_seen);
    format!("updated_at > {}", http::sql_quote(&from.to_string()))
}

/// Which list a poll reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollKind {
    Full,
    Incremental,
}

impl PollKind {
    /// The `poll_kind` attribute of the poll span.
    pub fn as_str(self) -> &'static str {
        match self {
            PollKind::Full => "full",
            PollKind::Incremental => "incremental",
        }
    }
}

/// The Maestro poller.
pub struct MaestroSource {
    ctx: SourceContext,
    cfg: MaestroConfig,
    client: HttpClient,
    tracker: Tracker,
    newest_updated_at: Option<Timestamp>,
    synced: bool,
    guard: MassDeletionGuard,
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
            synced: false,
            guard: MassDeletionGuard::default(),
        }
    }

    /// The newest bundle `updated_at` seen (the incremental query's start).
    pub fn newest_updated_at(&self) -> Option<Timestamp> {
        self.newest_updated_at
    }

    /// Poll forever. Abort the task to stop.
    pub async fn run(mut self) {
        self.ctx.health.declare(&self.ctx.name, &[KIND]);
        let cfg = self.cfg.http.clone();
        let mut backoff = Backoff::new(Duration::from_secs(1), cfg.slow_poll_interval);
        let mut next_full = Instant::now();
        loop {
            let kind = if !self.synced || Instant::now() >= next_full {
                PollKind::Full
            } else {
                PollKind::Incremental
            };
            let wait = if self.poll(kind).await {
                backoff.reset();
                if kind == PollKind::Full {
                    next_full = http::after(Instant::now(), cfg.full_relist_interval);
                }
                cfg.fast_poll_interval
                    .min(next_full.saturating_duration_since(Instant::now()))
            } else {
                backoff.next_delay()
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// One poll: read, deliver, record success. An incremental poll before
    /// anything was seen is a full one. Returns whether it succeeded.
    pub async fn poll(&mut self, kind: PollKind) -> bool {
        // The poll span: every request of this poll is its child, and the
        // upstream sees it as the parent of its own spans (docs/design.md §7.6).
        let span = poll_span(&self.ctx.name);
        let ok = self.poll_inner(kind).instrument(span.clone()).await;
        super::http::poll_done(&span, ok);
        ok
    }

    async fn poll_inner(&mut self, kind: PollKind) -> bool {
        let observed_at = self.ctx.clock.now();
        let initial = !self.synced;
        let kind = match (kind, self.newest_updated_at) {
            (PollKind::Incremental, Some(_)) if self.synced => PollKind::Incremental,
            _ => PollKind::Full,
        };
        tracing::Span::current().record("poll_kind", kind.as_str());
        let search = match (kind, self.newest_updated_at) {
            (PollKind::Incremental, Some(newest)) => Some(updated_since_search(newest)),
            _ => None,
        };
        let params: Vec<(&str, &str)> = search
            .as_deref()
            .map(|s| ("search", s))
            .into_iter()
            .collect();
        let mut out = Vec::new();
        let mut unknown = Vec::new();
        let mut seen = HashSet::new();
        // What was tracked before this poll: the pages below add to it.
        let known = self.tracker.len();
        let mode = UpdateMode {
            send_all: kind == PollKind::Full,
            partial: false,
        };
        // Page by page: each bundle becomes observations (and its nested JSON
        // is dropped) before the next page is fetched.
        let mut pager = http::Pager::new(BUNDLES_PATH, &params, LIST_KIND, self.cfg.http.page_size);
        loop {
            let items = match pager.next(&self.client).await {
                Ok(Some(items)) => items,
                Ok(None) => break,
                Err(err) => {
                    tracing::debug!(source = %self.ctx.name, poll = ?kind, error = %err, "Maestro poll failed");
                    // Pages read before the failure already moved the change
                    // tracker: deliver what they said, or it would count as
                    // sent. (A first sync delivers nothing: its retry is a
                    // full list that sends everything.)
                    if !initial {
                        http::deliver(&self.ctx, false, observed_at, out, &unknown);
                    }
                    self.ctx
                        .health
                        .failed(&self.ctx.name, KIND, &cause_chain(&err));
                    return false;
                }
            };
            for item in items {
                let Some(bundle) =
                    http::decode_item::<ResourceBundle>(&item, "items[]", &mut unknown)
                else {
                    continue;
                };
                seen.insert(bundle.id.clone());
                self.accept(bundle, mode, &mut out, &mut unknown);
            }
        }
        if kind == PollKind::Full {
            let missing: Vec<String> = self
                .tracker
                .owners()
                .filter(|o| !seen.contains(*o))
                .map(str::to_string)
                .collect();
            let vanished = self.guard.filter(&self.ctx, KIND, known, missing);
            for owner in vanished {
                self.tracker.remove(&owner, &mut out);
            }
        }
        if kind == PollKind::Full {
            self.synced = true;
        }
        http::deliver(&self.ctx, initial, observed_at, out, &unknown);
        self.ctx.health.listed(&self.ctx.name, KIND);
        true
    }

    fn accept(
        &mut self,
        bundle: ResourceBundle,
        mode: UpdateMode,
        out: &mut Vec<Observation>,
        unknown: &mut Vec<UnknownValue>,
    ) {
        let parsed = parse_bundle(&bundle, unknown);
        if let Some(t) = parsed.updated_at {
            self.newest_updated_at = Some(self.newest_updated_at.map_or(t, |n| n.max(t)));
        }
        if parsed.cluster_id.is_none() {
            // Unlabelled: not ours to track; forget it if it once was.
            self.tracker.remove(&bundle.id, out);
            return;
        }
        let mode = UpdateMode {
            partial: !parsed.nested_complete,
            ..mode
        };
        self.tracker
            .update(&bundle.id, parsed.observations, mode, out);
    }
}
