//! Maestro resource bundles: hop `maestro_bundle`, and through the bundle's
//! status feedback the hops `manifestwork`, `hosted_cluster` and `node_pool`
//! marked `via="maestro"` (DESIGN section 1; wire shapes in reference FACTS 5
//! and 6).
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
//! - A HostedCluster Degraded but not yet past its budget turns `failed` with
//!   time alone, while its bundle may never change again: such bundles are
//!   kept and evaluated again when the budget runs out.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use serde::Deserialize;

use crate::config::MaestroConfig;
use crate::model::phase_map;
use crate::model::{
    Change, ClusterKey, Condition, ConditionStatus, Hop, HopError, HopView, Observation, Phase,
    Replicas, Via,
};
use crate::sources::http::{
    self, Backoff, BuildError, HttpClient, Tracker, UpdateMode, WireCondition, null_default,
};
use crate::sources::{Parsed, SourceContext, UnknownValue};

/// The label that carries the Clusters Service id on bundles.
pub const CLUSTER_ID_LABEL: &str = "api.openshift.com/id";

pub const BUNDLES_PATH: &str = "/api/maestro/v1/resource-bundles";

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

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestCondition {
    #[serde(default)]
    pub resource_meta: Option<ResourceMeta>,
    #[serde(default, deserialize_with = "null_default")]
    pub conditions: Vec<WireCondition>,
    /// JSON key `statusFeedback`, singular.
    #[serde(default)]
    pub status_feedback: Option<StatusFeedback>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ResourceMeta {
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct StatusFeedback {
    #[serde(default, deserialize_with = "null_default")]
    pub values: Vec<FeedbackValue>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackValue {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub field_value: Option<FieldValue>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldValue {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub integer: Option<i64>,
    #[serde(default)]
    pub json_raw: Option<String>,
}

/// A ManifestWork `.status` (FACTS 5).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkStatus {
    #[serde(default, deserialize_with = "null_default")]
    pub conditions: Vec<WireCondition>,
    #[serde(default)]
    pub resource_status: Option<WorkResourceStatus>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct WorkResourceStatus {
    #[serde(default, deserialize_with = "null_default")]
    pub manifests: Vec<ManifestCondition>,
}

/// A HostedCluster `.status` (FACTS 1), the fields read.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct HostedClusterStatus {
    #[serde(default, deserialize_with = "null_default")]
    pub conditions: Vec<WireCondition>,
    #[serde(default)]
    pub version: Option<ClusterVersionStatus>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ClusterVersionStatus {
    #[serde(default, deserialize_with = "null_default")]
    pub history: Vec<VersionHistory>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct VersionHistory {
    #[serde(default)]
    pub state: Option<String>,
}

/// A NodePool `.status` (FACTS 3), the fields read.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    #[serde(default, deserialize_with = "null_default")]
    pub conditions: Vec<WireCondition>,
    #[serde(default)]
    pub replicas: Option<i64>,
    #[serde(default)]
    pub nodes_info: Option<NodesInfo>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodesInfo {
    #[serde(default, deserialize_with = "null_default")]
    pub node_versions: Vec<NodeVersion>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeVersion {
    #[serde(default)]
    pub ready_node_count: Option<i64>,
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
    /// When the phase of a nested hop changes with time alone.
    pub recheck_at: Option<Timestamp>,
}

fn kind_of(m: &ManifestCondition) -> &str {
    m.resource_meta
        .as_ref()
        .and_then(|r| r.kind.as_deref())
        .unwrap_or("")
}

/// The feedback value `name` of a manifest.
fn feedback<'a>(m: &'a ManifestCondition, name: &str) -> Option<&'a FieldValue> {
    m.status_feedback
        .as_ref()?
        .values
        .iter()
        .find(|v| v.name == name)?
        .field_value
        .as_ref()
}

/// Decode the `status` JsonRaw feedback of a manifest. `Ok(None)`: no
/// feedback yet (normal early on). `Err(())`: present but unreadable,
/// counted.
fn json_feedback<T: serde::de::DeserializeOwned>(
    m: &ManifestCondition,
    unknown: &mut Vec<UnknownValue>,
) -> Result<Option<T>, ()> {
    let Some(value) = feedback(m, "status") else {
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

fn condition_error(c: &Condition) -> HopError {
    HopError {
        code: if c.reason.is_empty() {
            c.kind.clone()
        } else {
            c.reason.clone()
        },
        message: c.message.clone(),
    }
}

fn true_condition<'a>(conditions: &'a [Condition], kind: &str) -> Option<&'a Condition> {
    phase_map::find(conditions, kind).filter(|c| c.status == ConditionStatus::True)
}

/// The view of a work hop (bundle or ManifestWork).
fn work_view(conditions: Vec<Condition>, deleting: bool) -> HopView {
    let phase = phase_map::work(&conditions, deleting);
    let state = phase_map::work_state(&conditions, deleting);
    let error = (phase == Phase::Failed)
        .then(|| {
            true_condition(&conditions, "Degraded")
                .or_else(|| {
                    conditions.iter().find(|c| {
                        phase_map::WORK_APPLY_FAILURE_REASONS.contains(&c.reason.as_str())
                    })
                })
                .map(condition_error)
        })
        .flatten();
    let explaining: &[&str] = match phase {
        Phase::Ready => &["Available"],
        Phase::Failed => &["Degraded", "Applied", "Progressing"],
        _ => &["Applied", "Available"],
    };
    HopView {
        since: http::transition_of(&conditions, explaining),
        conditions,
        error,
        ..HopView::new(state, phase)
    }
}

fn hosted_cluster_view(
    status: &HostedClusterStatus,
    deleting: bool,
    now: Timestamp,
    budget: Duration,
    unknown: &mut Vec<UnknownValue>,
) -> (HopView, Option<Timestamp>) {
    let conditions = http::conditions(&status.conditions, unknown);
    let history = status
        .version
        .as_ref()
        .map(|v| v.history.as_slice())
        .unwrap_or_default();
    let has_been_available = history
        .iter()
        .any(|h| h.state.as_deref() == Some("Completed"));
    let phase = phase_map::hosted_cluster(&conditions, deleting, has_been_available, now, budget);
    let fatal = phase_map::first_false(&conditions, &phase_map::HOSTED_CLUSTER_FATAL_CONDITIONS);
    let error = match phase {
        Phase::Failed => fatal
            .or_else(|| true_condition(&conditions, "Degraded"))
            .map(condition_error),
        _ => None,
    };
    let since = match phase {
        Phase::Failed => fatal
            .and_then(|c| c.last_transition)
            .or_else(|| http::transition_of(&conditions, &["Degraded"])),
        _ => http::transition_of(&conditions, &["Available"]),
    };
    let state = match history.first().and_then(|h| h.state.as_deref()) {
        Some(s) if !s.is_empty() => s,
        _ if conditions.is_empty() => "no status yet",
        _ if phase == Phase::Ready => "Available",
        _ => "NotAvailable",
    };
    let recheck = match phase {
        Phase::Progressing => {
            phase_map::hosted_cluster_degraded_deadline(&conditions, has_been_available, budget)
        }
        _ => None,
    };
    let view = HopView {
        since,
        conditions,
        error,
        ..HopView::new(state, phase)
    };
    (view, recheck)
}

fn count(value: Option<i64>, field: &'static str, unknown: &mut Vec<UnknownValue>) -> Option<u32> {
    let v = value?;
    match u32::try_from(v) {
        Ok(n) => Some(n),
        Err(_) => {
            unknown.push(UnknownValue {
                field,
                value: v.to_string(),
            });
            None
        }
    }
}

fn node_pool_view(
    status: &NodePoolStatus,
    desired_feedback: Option<&FieldValue>,
    deleting: bool,
    unknown: &mut Vec<UnknownValue>,
) -> HopView {
    let conditions = http::conditions(&status.conditions, unknown);
    let desired = desired_feedback
        .filter(|v| v.kind == "Integer")
        .and_then(|v| count(v.integer, "statusFeedback.replicas", unknown));
    let current = count(status.replicas, "status.replicas", unknown).unwrap_or(0);
    let counted: Option<u32> = status.nodes_info.as_ref().map(|info| {
        info.node_versions
            .iter()
            .filter_map(|v| {
                count(
                    v.ready_node_count,
                    "status.nodesInfo.readyNodeCount",
                    unknown,
                )
            })
            .fold(0u32, u32::saturating_add)
    });
    let ready_true = true_condition(&conditions, "Ready").is_some();
    let ready = counted.unwrap_or(if ready_true { current } else { 0 });
    let phase = phase_map::node_pool(&conditions, deleting, desired, ready);
    let fatal = phase_map::first_false(&conditions, &phase_map::NODE_POOL_FATAL_CONDITIONS);
    let error = (phase == Phase::Failed)
        .then(|| fatal.map(condition_error))
        .flatten();
    let since = match phase {
        Phase::Failed => fatal.and_then(|c| c.last_transition),
        _ => http::transition_of(&conditions, &["Ready"]),
    };
    let state = if conditions.is_empty() {
        "no status yet"
    } else if ready_true {
        "Ready"
    } else {
        "NotReady"
    };
    HopView {
        since,
        conditions,
        error,
        // Without spec.replicas (autoscaling, or feedback not configured)
        // the observed count is the best statement of "desired".
        replicas: Some(Replicas {
            desired: desired.unwrap_or(current),
            current,
            ready,
        }),
        ..HopView::new(state, phase)
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
/// nested feedback shows. `now` and `degraded_budget` decide whether a
/// Degraded HostedCluster has failed.
pub fn parse_bundle(
    bundle: &ResourceBundle,
    now: Timestamp,
    degraded_budget: Duration,
    unknown: &mut Vec<UnknownValue>,
) -> ParsedBundle {
    let updated_at = http::parse_time(bundle.updated_at.as_deref(), "updated_at", unknown);
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
    let mut bundle_view = work_view(http::conditions(&status.conditions, unknown), deleting);
    bundle_view.created_at = http::parse_time(bundle.created_at.as_deref(), "created_at", unknown);
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
        recheck_at: None,
    };

    let Some(work_manifest) = status
        .resource_status
        .iter()
        .find(|m| kind_of(m) == "ManifestWork")
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
    let work_conditions = http::conditions(&work.conditions, unknown);
    let work_deleting = deleting || true_condition(&work_conditions, "Deleting").is_some();
    let mut work_view = work_view(work_conditions, work_deleting);
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
        match kind_of(manifest) {
            "HostedCluster" => match json_feedback::<HostedClusterStatus>(manifest, unknown) {
                Ok(Some(hc)) => {
                    let (mut view, recheck) =
                        hosted_cluster_view(&hc, work_deleting, now, degraded_budget, unknown);
                    view.updated_at = updated_at;
                    view.identity.namespace = meta.namespace.filter(|n| !n.is_empty());
                    parsed.recheck_at = recheck;
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
                        let mut view = node_pool_view(
                            &np,
                            feedback(manifest, "replicas"),
                            work_deleting,
                            unknown,
                        );
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
pub fn parse_items(items: Vec<http::RawItem>, now: Timestamp, degraded_budget: Duration) -> Parsed {
    let mut parsed = Parsed::default();
    for item in items {
        if let Some(bundle) =
            http::decode_item::<ResourceBundle>(&item, "items[]", &mut parsed.unknown)
        {
            let b = parse_bundle(&bundle, now, degraded_budget, &mut parsed.unknown);
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

/// The Maestro poller.
pub struct MaestroSource {
    ctx: SourceContext,
    cfg: MaestroConfig,
    client: HttpClient,
    tracker: Tracker,
    newest_updated_at: Option<Timestamp>,
    /// Bundles whose phase changes with time alone, with when to look again.
    rechecks: HashMap<String, (Timestamp, ResourceBundle)>,
    degraded_budget: Duration,
    synced: bool,
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
            rechecks: HashMap::new(),
            degraded_budget: phase_map::DEFAULT_DEGRADED_BUDGET,
            synced: false,
        }
    }

    /// How long a never-Available HostedCluster may stay Degraded before its
    /// hop is failed.
    pub fn with_degraded_budget(mut self, budget: Duration) -> MaestroSource {
        self.degraded_budget = budget;
        self
    }

    /// The newest bundle `updated_at` seen (the incremental query's start).
    pub fn newest_updated_at(&self) -> Option<Timestamp> {
        self.newest_updated_at
    }

    /// Poll forever. Abort the task to stop.
    pub async fn run(mut self) {
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
        let observed_at = Timestamp::now();
        let initial = !self.synced;
        let kind = match (kind, self.newest_updated_at) {
            (PollKind::Incremental, Some(_)) if self.synced => PollKind::Incremental,
            _ => PollKind::Full,
        };
        let search = match (kind, self.newest_updated_at) {
            (PollKind::Incremental, Some(newest)) => Some(updated_since_search(newest)),
            _ => None,
        };
        let params: Vec<(&str, &str)> = search
            .as_deref()
            .map(|s| ("search", s))
            .into_iter()
            .collect();
        let now = Timestamp::now();
        let mut out = Vec::new();
        let mut unknown = Vec::new();
        let mut seen = HashSet::new();
        let mode = UpdateMode {
            send_all: kind == PollKind::Full,
            partial: false,
        };
        // Page by page: each bundle becomes observations (and its nested JSON
        // is dropped) before the next page is fetched.
        let mut pager = http::Pager::new(BUNDLES_PATH, &params, self.cfg.http.page_size);
        loop {
            let items = match pager.next(&self.client).await {
                Ok(Some(items)) => items,
                Ok(None) => break,
                Err(err) => {
                    tracing::warn!(source = %self.ctx.name, poll = ?kind, error = %err, "Maestro poll failed");
                    // Pages read before the failure already moved the change
                    // tracker: deliver what they said, or it would count as
                    // sent. (A first sync delivers nothing: its retry is a
                    // full list that sends everything.)
                    if !initial {
                        http::deliver(&self.ctx, false, observed_at, out, &unknown);
                    }
                    self.ctx.metrics.sync_failed(&self.ctx.name);
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
                self.accept(bundle, now, mode, &mut out, &mut unknown);
            }
        }
        if kind == PollKind::Full {
            let vanished: Vec<String> = self
                .tracker
                .owners()
                .filter(|o| !seen.contains(*o))
                .map(str::to_string)
                .collect();
            for owner in vanished {
                self.tracker.remove(&owner, &mut out);
                self.rechecks.remove(&owner);
            }
        }
        let due: Vec<String> = self
            .rechecks
            .iter()
            .filter(|(id, (at, _))| *at <= now && !seen.contains(*id))
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            if let Some((_, bundle)) = self.rechecks.remove(&id) {
                self.accept(bundle, now, UpdateMode::default(), &mut out, &mut unknown);
            }
        }
        if kind == PollKind::Full {
            self.synced = true;
        }
        http::deliver(&self.ctx, initial, observed_at, out, &unknown);
        self.ctx
            .metrics
            .sync_succeeded(&self.ctx.name, Timestamp::now());
        true
    }

    fn accept(
        &mut self,
        bundle: ResourceBundle,
        now: Timestamp,
        mode: UpdateMode,
        out: &mut Vec<Observation>,
        unknown: &mut Vec<UnknownValue>,
    ) {
        let parsed = parse_bundle(&bundle, now, self.degraded_budget, unknown);
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
        match parsed.recheck_at {
            Some(at) => {
                self.rechecks.insert(bundle.id.clone(), (at, bundle));
            }
            None => {
                self.rechecks.remove(&bundle.id);
            }
        }
    }
}
