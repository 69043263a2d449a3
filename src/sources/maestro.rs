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
//!   everything sent; a bundle seen before and missing now is read by id
//!   (`search=id in (...)`) and `Gone` only when missing there too (the
//!   pages are offsets, and a deletion on an earlier page shifts a live
//!   bundle past a page boundary), with the hops nested in it. When an
//!   incremental pass falls due while a relist pages, it runs between two
//!   pages and is delivered at once: a bundle marked and removed during a
//!   relist of minutes is otherwise never seen marked (docs/design.md §9.5).
//! - Fast poll (`fast_poll_interval`): incremental,
//!   `search=updated_at > '<start, minus a small overlap>'`, where the start
//!   is the newest `updated_at` seen or, when earlier, the moment the
//!   previous poll began. Pages are offsets into a list in creation order: a
//!   bundle that starts matching while a poll pages through it lands on a
//!   page already read and is missed by that poll; it changed after that
//!   poll began, so the next one reads it. (Starting from the newest time
//!   seen alone missed it whenever a poll took longer than the overlap, until
//!   the next full relist.) The overlap re-reads bundles updated in the same
//!   instant as the newest one seen (or committed late) and absorbs clock
//!   skew; unchanged ones are not sent again.
//! - A full relist delivers each page as it is read; the first full sync's
//!   pages are delivered with `initial: true`.
//! - A failed request fails the sync (`hcpflow_source_up` 0) and the poller
//!   retries with backoff; what the pages read before it is delivered (the
//!   change tracker has moved), and nothing is called gone.
//! - Only objects whose view changed are sent, except on full relists.
//! - Every bundle is its own object of hop `maestro_bundle`, keyed by its
//!   name (else its id); the objects nested in it are keyed like the kube
//!   watches key them: the ManifestWork by name, each NodePool by name, the
//!   HostedCluster as the hop's one object (docs/design.md §2.5). A cluster
//!   has several bundles in ARO HCP (the HostedCluster's, one per NodePool).
//! - A bundle whose feedback is absent (`status` null, no feedback value)
//!   or cannot be read (counted under `statusFeedback.jsonRaw` /
//!   `statusFeedback.fieldValue.type`) carries the error `no_status` /
//!   `feedback_unreadable`; its nested objects keep their last good state,
//!   and those never read are shown `unknown` so their hops exist and age.
//!   Nested objects go only when the bundle goes or a readable feedback no
//!   longer shows them.
//! - Phases are read by `crate::views`, the same functions the kube watches
//!   use, and never from a clock: a HostedCluster Degraded past its budget is
//!   the model's to fail (docs/design.md §3.4).

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use serde::Deserialize;

use crate::config::MaestroConfig;
use crate::model::{Change, ClusterKey, Hop, HopView, Observation, Stamp, Via};
use crate::sources::health::cause_chain;
use crate::sources::http::{
    self, BuildError, HttpClient, MassDeletionGuard, SourceError, Tracker, UpdateMode, poll_span,
};
use crate::sources::poll::{self, Cadence, Polled};
use crate::sources::{Parsed, SourceContext, UnknownValue};
use crate::views::hosted_cluster::{self, HostedClusterStatus};
use crate::views::node_pool::{self, NodePoolStatus};
use crate::views::work::{self, FeedbackError, ManifestCondition, WorkStatus};
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

/// Bundle ids per `id in (...)` query, to stay under proxy URL limits.
const IDS_PER_QUERY: usize = 50;

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
    /// What the bundle carries (the ManifestWork and the objects in it),
    /// kept raw: read only when the feedback cannot say which objects the
    /// bundle should fill, and then leniently (see [`expected_objects`]).
    #[serde(default)]
    pub manifests: Option<Box<serde_json::value::RawValue>>,
    /// `null` until the agent reported.
    #[serde(default)]
    pub status: Option<BundleStatus>,
}

impl ResourceBundle {
    /// The bundle's object key in hop `maestro_bundle`: its `name` (the
    /// ManifestWork's, unique per consumer and meaningful to an SRE), else
    /// its id (docs/design.md §2.5).
    pub fn object(&self) -> &str {
        self.name
            .as_deref()
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .unwrap_or(&self.id)
    }
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

/// One manifest of a bundle (or of the ManifestWork inside it): the fields
/// that say which objects the bundle carries.
#[derive(Debug, Default, Deserialize)]
struct CarriedManifest {
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    metadata: Option<CarriedMeta>,
    #[serde(default)]
    spec: Option<CarriedSpec>,
}

#[derive(Debug, Default, Deserialize)]
struct CarriedMeta {
    #[serde(default)]
    name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct CarriedSpec {
    #[serde(default)]
    workload: Option<CarriedWorkload>,
}

#[derive(Debug, Default, Deserialize)]
struct CarriedWorkload {
    #[serde(default, deserialize_with = "null_default")]
    manifests: Vec<CarriedManifest>,
}

impl CarriedManifest {
    fn kind(&self) -> &str {
        self.kind.as_deref().unwrap_or("")
    }

    fn name(&self) -> &str {
        self.metadata
            .as_ref()
            .and_then(|m| m.name.as_deref())
            .unwrap_or("")
    }
}

/// One object of a nested hop: the hop and the object's key in it.
type NestedKey = (Hop, String);

/// The objects a bundle's feedback should fill, from what the bundle
/// carries: each `ManifestWork` (hop `manifestwork`, by name) and, inside
/// it, the `HostedCluster` (hop `hosted_cluster`, the hop's one object) and
/// each `NodePool` (hop `node_pool`, by name). Empty when the bundle does
/// not say (no `manifests`, or a shape this reader does not know, counted).
pub fn expected_objects(
    bundle: &ResourceBundle,
    unknown: &mut Vec<UnknownValue>,
) -> Vec<(Hop, String)> {
    let Some(raw) = bundle.manifests.as_deref() else {
        return Vec::new();
    };
    let manifests: Vec<CarriedManifest> = match serde_json::from_str::<Option<_>>(raw.get()) {
        Ok(m) => m.unwrap_or_default(),
        Err(err) => {
            unknown.push(UnknownValue {
                field: "manifests",
                value: err.to_string(),
            });
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for work in manifests.iter().filter(|m| m.kind() == "ManifestWork") {
        out.push((Hop::Manifestwork, work.name().to_string()));
        let inner = work
            .spec
            .as_ref()
            .and_then(|s| s.workload.as_ref())
            .map(|w| w.manifests.as_slice())
            .unwrap_or_default();
        for m in inner {
            match m.kind() {
                "HostedCluster" => out.push((Hop::HostedCluster, String::new())),
                "NodePool" => out.push((Hop::NodePool, m.name().to_string())),
                _ => {}
            }
        }
    }
    out
}

/// What one bundle says.
#[derive(Debug, Default)]
pub struct ParsedBundle {
    /// `None`: the bundle has no cluster id label and was skipped.
    pub cluster_id: Option<String>,
    pub observations: Vec<Observation>,
    /// Objects the bundle carries that its feedback could not fill, as
    /// `unknown` views: shown only where no good reading was ever seen
    /// ([`Tracker::update_with_fallbacks`]).
    pub placeholders: Vec<Observation>,
    /// Why, when the nested feedback was not complete (also the bundle's
    /// `error` unless the bundle itself failed): the nested hops not shown
    /// keep their last good state.
    pub feedback_error: Option<FeedbackError>,
    pub updated_at: Option<Stamp>,
}

/// Decode the `status` JsonRaw feedback of a manifest. `Ok(None)`: no
/// feedback (normal early on). `Err(())`: present but unreadable, counted.
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

/// What the nested feedback of one bundle gave: the readings, the objects
/// it showed, and what went wrong (for the whole work, or per object).
#[derive(Default)]
struct Nested {
    observations: Vec<Observation>,
    shown: Vec<NestedKey>,
    /// The work's own feedback is missing or unreadable: nothing inside it
    /// could be read.
    work_error: Option<FeedbackError>,
    /// Objects inside a readable work whose own feedback was not.
    object_errors: Vec<(NestedKey, FeedbackError)>,
}

impl Nested {
    fn push(&mut self, cluster_id: &str, hop: Hop, object: &str, view: HopView) {
        self.shown.push((hop, object.to_string()));
        self.observations
            .push(observation(cluster_id, hop, Via::Maestro, object, view));
    }

    fn error(&self) -> Option<FeedbackError> {
        self.object_errors
            .iter()
            .map(|(_, e)| *e)
            .chain(self.work_error)
            .reduce(FeedbackError::worst)
    }

    /// Why `key` was not shown: its own error, the work's, or (a readable
    /// work that does not list a manifest the bundle carries) no status.
    fn error_of(&self, key: &NestedKey) -> FeedbackError {
        self.object_errors
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, e)| *e)
            .or(self.work_error)
            .unwrap_or(FeedbackError::NoStatus)
    }
}

fn feedback_result<T>(r: Result<Option<T>, ()>) -> Result<T, FeedbackError> {
    match r {
        Ok(Some(v)) => Ok(v),
        Ok(None) => Err(FeedbackError::NoStatus),
        Err(()) => Err(FeedbackError::Unreadable),
    }
}

/// Read the ManifestWork feedback of a bundle's status and the HostedCluster
/// and NodePool feedback inside it (docs/design.md §2.6).
fn read_nested(
    cluster_id: &str,
    work_name: &str,
    status: &BundleStatus,
    deleting: bool,
    updated_at: Option<Stamp>,
    unknown: &mut Vec<UnknownValue>,
) -> Nested {
    let mut nested = Nested::default();
    let Some(work_manifest) = status
        .resource_status
        .iter()
        .find(|m| m.kind() == "ManifestWork")
    else {
        nested.work_error = Some(FeedbackError::NoStatus);
        return nested;
    };
    let work: WorkStatus = match feedback_result(json_feedback(work_manifest, unknown)) {
        Ok(work) => work,
        Err(e) => {
            nested.work_error = Some(e);
            return nested;
        }
    };
    // The work's own name; a bundle is named after the work it carries, so
    // that is the fallback when the feedback does not say.
    let work_name = work_manifest
        .resource_meta
        .as_ref()
        .and_then(|m| m.name.as_deref())
        .filter(|n| !n.is_empty())
        .unwrap_or(work_name)
        .to_string();
    let work_conditions = conditions::read(&work.conditions, unknown);
    let work_deleting = deleting || work::deleting_condition(&work_conditions);
    let mut work_view = work::read(work_conditions, work_deleting);
    work_view.updated_at = updated_at;
    nested.push(cluster_id, Hop::Manifestwork, &work_name, work_view);

    let manifests = work
        .resource_status
        .map(|r| r.manifests)
        .unwrap_or_default();
    for manifest in &manifests {
        let meta = manifest.resource_meta.clone().unwrap_or_default();
        match manifest.kind() {
            "HostedCluster" => {
                match feedback_result(json_feedback::<HostedClusterStatus>(manifest, unknown)) {
                    Ok(hc) => {
                        // Feedback carries the status only: the
                        // HasBeenAvailable annotation is not visible this
                        // way, the history is.
                        let reading =
                            hosted_cluster::read(Some(&hc), work_deleting, false, unknown);
                        let mut view = reading.view;
                        view.updated_at = updated_at;
                        view.identity_mut().namespace = meta.namespace.filter(|n| !n.is_empty());
                        view.identity_mut().version = reading.version;
                        nested.push(cluster_id, Hop::HostedCluster, "", view);
                    }
                    Err(e) => nested
                        .object_errors
                        .push(((Hop::HostedCluster, String::new()), e)),
                }
            }
            "NodePool" => {
                let name = meta.name.unwrap_or_default();
                match feedback_result(json_feedback::<NodePoolStatus>(manifest, unknown)) {
                    Ok(np) => {
                        let desired = manifest
                            .feedback("replicas")
                            .filter(|v| v.kind == "Integer")
                            .and_then(|v| {
                                node_pool::count(v.integer, "statusFeedback.replicas", unknown)
                            });
                        let mut view = node_pool::read(Some(&np), work_deleting, desired, unknown);
                        view.updated_at = updated_at;
                        nested.push(cluster_id, Hop::NodePool, &name, view);
                    }
                    Err(e) => nested.object_errors.push(((Hop::NodePool, name), e)),
                }
            }
            _ => {}
        }
    }
    nested
}

/// Longest message kept in a feedback error: it names the bundle and the
/// failure, never copies upstream text at length.
const MAX_FEEDBACK_MESSAGE: usize = 200;

/// Turn one bundle into its observations: the bundle hop (object: its
/// name), and the hops its nested feedback shows (the ManifestWork by name,
/// the HostedCluster, each NodePool by name), each read by the same view as
/// a kube watch reads the object. When the feedback is absent or cannot be
/// read, the bundle carries the error (`no_status`, `feedback_unreadable`)
/// and each object it should have filled gets a placeholder `unknown` view
/// (docs/design.md §2.6).
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
            updated_at,
            ..ParsedBundle::default()
        };
    };
    let deleting = bundle.deleted_at.as_deref().is_some_and(|d| !d.is_empty());
    let wire_conditions = bundle
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let mut bundle_view = work::read(conditions::read(wire_conditions, unknown), deleting);
    bundle_view.created_at = parse_time(bundle.created_at.as_deref(), "created_at", unknown);
    bundle_view.updated_at = updated_at;

    let nested = match &bundle.status {
        Some(status) => read_nested(
            cluster_id,
            bundle.object(),
            status,
            deleting,
            updated_at,
            unknown,
        ),
        None => Nested {
            work_error: Some(FeedbackError::NoStatus),
            ..Nested::default()
        },
    };
    let expected = expected_objects(bundle, unknown);
    let missing: Vec<&NestedKey> = expected
        .iter()
        .filter(|k| !nested.shown.contains(k))
        .collect();
    let feedback_error = match (nested.error(), missing.is_empty()) {
        (Some(e), _) => Some(e),
        (None, false) => Some(FeedbackError::NoStatus),
        (None, true) => None,
    };
    let mut placeholders = Vec::new();
    if let Some(e) = feedback_error {
        // A failed bundle keeps its failure as its error: that is what an
        // SRE must act on first; the feedback error still shows in the
        // nested objects' state.
        if bundle_view.error.is_none() {
            let what = match e {
                FeedbackError::NoStatus => "has no status for",
                FeedbackError::Unreadable => "has unreadable status feedback for",
            };
            let objects: Vec<String> = missing
                .iter()
                .map(|(hop, name)| match name.as_str() {
                    "" => hop.as_str().to_string(),
                    name => format!("{hop} {name}"),
                })
                .collect();
            let message = if objects.is_empty() {
                format!("bundle {} {what} the objects it carries", bundle.object())
            } else {
                format!("bundle {} {what} {}", bundle.object(), objects.join(", "))
            };
            bundle_view.error = Some(Box::new(e.error(&bounded(&message, MAX_FEEDBACK_MESSAGE))));
        }
        for key in missing {
            let mut view = nested.error_of(key).unread_object(bundle_view.created_at);
            view.updated_at = updated_at;
            let (hop, object) = key;
            placeholders.push(observation(cluster_id, *hop, Via::Maestro, object, view));
        }
    }
    let mut observations = vec![observation(
        cluster_id,
        Hop::MaestroBundle,
        Via::Direct,
        bundle.object(),
        bundle_view,
    )];
    observations.extend(nested.observations);
    ParsedBundle {
        cluster_id: Some(cluster_id.to_string()),
        observations,
        placeholders,
        feedback_error,
        updated_at,
    }
}

/// `s` cut to at most `max` bytes on a character boundary.
fn bounded(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
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
            // Nothing was seen before a one-shot read: every placeholder applies.
            parsed.observations.extend(b.placeholders);
        }
    }
    parsed
}

/// The `search` of the incremental poll reading what changed after `start`.
pub fn updated_since_search(start: Timestamp) -> String {
    let from = start.checked_sub(INCREMENTAL_OVERLAP).unwrap_or(start);
    format!("updated_at > {}", http::sql_quote(&from.to_string()))
}

/// The search reading the bundles of one Clusters Service cluster by the
/// label ARO HCP puts on them: the cheatsheet's Maestro query.
pub fn cluster_label_search(cluster_id: &str) -> String {
    format!(
        "payload->'metadata'->'labels'->>'api.openshift.com/id'={}",
        http::sql_quote(cluster_id)
    )
}

pub use crate::sources::poll::PollKind;

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
    /// (docs/design.md §9.5).
    deleting: HashSet<String>,
    /// When the next incremental pass is due, between polls or between the
    /// pages of a full relist.
    incremental_due: Instant,
    /// How long the last incremental pass took.
    incremental_takes: Duration,
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
        }
    }

    /// The newest bundle `updated_at` seen (the incremental query's start).
    pub fn newest_updated_at(&self) -> Option<Timestamp> {
        self.newest_updated_at
    }

    /// Full relists and, between them, incremental polls timed by the
    /// polls themselves (docs/design.md §9.5); no slow poll.
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
        // upstream sees it as the parent of its own spans (docs/design.md §7.6).
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
        // a few bundles, never the fleet (docs/design.md §12.4).
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

    /// The incremental pass: the bundles updated since the last pass began
    /// (or the newest update seen, when earlier), then, by id, the bundles
    /// being deleted that it did not show. Delivers each page as it is read,
    /// also when a later request fails: the pages read before the failure
    /// already moved the change tracker, and would otherwise count as sent.
    /// Returns the bundles it saw.
    async fn incremental_pass(
        &mut self,
        observed_at: Timestamp,
        newest: Timestamp,
    ) -> Result<HashSet<String>, SourceError> {
        let began = Instant::now();
        let search = updated_since_search(self.last_poll_began.map_or(newest, |b| b.min(newest)));
        let params = [("search", search.as_str())];
        let mode = UpdateMode {
            send_all: false,
            partial: false,
        };
        let mut out = Vec::new();
        let mut unknown = Vec::new();
        let mut seen = HashSet::new();
        let mut pager = http::Pager::new(BUNDLES_PATH, &params, LIST_KIND, self.cfg.http.page_size);
        let listed = loop {
            match pager.next(&self.client).await {
                Ok(Some(items)) => {
                    self.accept_page(items, mode, &mut seen, &mut out, &mut unknown);
                    // Each page goes out as it is read, as in a relist: when
                    // bundles change faster than Maestro lists them, a pass
                    // grows with every round, and one that delivered at its
                    // end showed nothing new at all (docs/design.md §9.5).
                    http::deliver(
                        &self.ctx,
                        false,
                        observed_at,
                        std::mem::take(&mut out),
                        &std::mem::take(&mut unknown),
                    );
                }
                Ok(None) => break Ok(()),
                Err(err) => break Err(err),
            }
        };
        if listed.is_ok() {
            // Bundles being deleted that this pass did not show: read by id,
            // so a deletion is seen within one fast poll, not at the next
            // full relist. A failed read keeps them for the next pass.
            let deleting: Vec<String> = self
                .deleting
                .iter()
                .filter(|id| !seen.contains(*id))
                .cloned()
                .collect();
            if let Ok(gone) = self
                .read_by_id(deleting, mode, &mut out, &mut unknown)
                .await
            {
                self.forget(&gone, &mut out);
            }
            self.last_poll_began = Some(
                self.last_poll_began
                    .map_or(observed_at, |b| b.max(observed_at)),
            );
            self.incremental_takes = began.elapsed();
            self.incremental_due = http::after(
                Instant::now(),
                next_incremental_wait(self.cfg.http.fast_poll_interval, self.incremental_takes),
            );
        }
        http::deliver(&self.ctx, false, observed_at, out, &unknown);
        listed.map(|()| seen)
    }

    /// The full relist: every bundle, everything sent; a bundle tracked and
    /// not listed is read by id and gone only when missing there too.
    ///
    /// A relist of a large fleet takes minutes, and a bundle marked for
    /// deletion and removed meanwhile is never seen marked: listed alive on
    /// an early page, it would stay until the next relist. So when an
    /// incremental pass falls due between two pages, it runs there and its
    /// findings are delivered at once (docs/design.md §9.5). Every page is
    /// delivered as it is read, so a failed relist has already delivered
    /// what its pages said (the tracker moved).
    async fn full_pass(
        &mut self,
        observed_at: Timestamp,
        scope: Option<String>,
    ) -> Result<(), SourceError> {
        let initial = !self.synced;
        let began = Instant::now();
        let interleave = !initial && scope.is_none();
        self.incremental_due = http::after(began, self.cfg.http.fast_poll_interval);
        let mut interleaved = false;
        let params: Vec<(&str, &str)> = scope
            .as_deref()
            .map(|s| ("search", s))
            .into_iter()
            .collect();
        let mode = UpdateMode {
            send_all: true,
            partial: false,
        };
        let mut out = Vec::new();
        let mut unknown = Vec::new();
        let mut seen = HashSet::new();
        // What was tracked before this poll: the pages below add to it.
        let known = self.tracker.len();
        // Page by page: each bundle becomes observations (and its nested JSON
        // is dropped) before the next page is fetched.
        let mut pager = http::Pager::new(BUNDLES_PATH, &params, LIST_KIND, self.cfg.http.page_size);
        loop {
            match pager.next(&self.client).await {
                Ok(Some(items)) => {
                    self.accept_page(items, mode, &mut seen, &mut out, &mut unknown);
                    // Each page is delivered as it is read: a relist never
                    // holds the observations of every bundle at once, a
                    // peak the allocator would keep (docs/design.md §9.5). A first sync's pages are
                    // initial (silent) batches, and what a page says
                    // reaches the model before the pass below reads newer
                    // states of the same bundles.
                    http::deliver(
                        &self.ctx,
                        initial,
                        observed_at,
                        std::mem::take(&mut out),
                        &std::mem::take(&mut unknown),
                    );
                }
                Ok(None) => break,
                Err(err) => return Err(err),
            }
            if let Some(newest) = self.newest_updated_at
                && interleave
                && Instant::now() >= self.incremental_due
            {
                let pass_seen = self.incremental_pass(self.ctx.clock.now(), newest).await?;
                seen.extend(pass_seen);
                interleaved = true;
            }
        }
        let missing: Vec<String> = self
            .tracker
            .owners()
            .filter(|o| !seen.contains(*o))
            .map(str::to_string)
            .collect();
        // The pages are offsets into a list that changes while it is read:
        // a bundle deleted from an earlier page shifts a live one past a
        // page boundary. Missing is not gone until a read by id agrees. When
        // that read fails (an id the service refuses in a query), the list
        // is believed, as before the check.
        let confirmed = match self.read_by_id(missing, mode, &mut out, &mut unknown).await {
            Ok(absent) | Err(absent) => absent,
        };
        let vanished = self.guard.filter(&self.ctx, KIND, known, confirmed);
        self.forget(&vanished, &mut out);
        self.synced = true;
        http::deliver(&self.ctx, initial, observed_at, out, &unknown);
        self.last_poll_began = Some(
            self.last_poll_began
                .map_or(observed_at, |b| b.max(observed_at)),
        );
        if !interleaved {
            // The relist began reading at `observed_at`: the next pass reads
            // from there, an interval after the relist ends at the latest.
            self.incremental_due = http::after(
                Instant::now(),
                next_incremental_wait(self.cfg.http.fast_poll_interval, self.incremental_takes),
            );
        }
        Ok(())
    }

    /// Decode one page of bundles and accept each, noting its id in `seen`.
    fn accept_page(
        &mut self,
        items: Vec<http::RawItem>,
        mode: UpdateMode,
        seen: &mut HashSet<String>,
        out: &mut Vec<Observation>,
        unknown: &mut Vec<UnknownValue>,
    ) {
        for item in items {
            let Some(bundle) = http::decode_item::<ResourceBundle>(&item, "items[]", unknown)
            else {
                continue;
            };
            seen.insert(bundle.id.clone());
            self.accept(bundle, mode, out, unknown);
        }
    }

    /// Read these bundles by id, accepting what is found. `Ok`: the ids
    /// Maestro no longer has. `Err`: a read failed, and the ids it did not
    /// find include those of the failed read: the caller decides what
    /// absence means then.
    async fn read_by_id(
        &mut self,
        mut ids: Vec<String>,
        mode: UpdateMode,
        out: &mut Vec<Observation>,
        unknown: &mut Vec<UnknownValue>,
    ) -> Result<Vec<String>, Vec<String>> {
        ids.sort();
        let mut absent = Vec::new();
        let mut failed = false;
        for chunk in ids.chunks(IDS_PER_QUERY) {
            let search = format!(
                "id in ({})",
                chunk
                    .iter()
                    .map(|id| http::sql_quote(id))
                    .collect::<Vec<_>>()
                    .join(",")
            );
            let params = [("search", search.as_str())];
            let mut pager =
                http::Pager::new(BUNDLES_PATH, &params, LIST_KIND, self.cfg.http.page_size);
            let mut found = HashSet::new();
            loop {
                match pager.next(&self.client).await {
                    Ok(Some(items)) => {
                        for item in items {
                            if let Some(bundle) =
                                http::decode_item::<ResourceBundle>(&item, "items[]", unknown)
                            {
                                found.insert(bundle.id.clone());
                                self.accept(bundle, mode, out, unknown);
                            }
                        }
                    }
                    Ok(None) => break,
                    Err(err) => {
                        tracing::debug!(source = %self.ctx.name, error = %cause_chain(&err), "reading bundles by id failed");
                        failed = true;
                        break;
                    }
                }
            }
            absent.extend(chunk.iter().filter(|id| !found.contains(*id)).cloned());
        }
        if failed { Err(absent) } else { Ok(absent) }
    }

    /// These bundles are gone upstream: `Gone` for what they showed.
    fn forget(&mut self, gone: &[String], out: &mut Vec<Observation>) {
        for id in gone {
            self.deleting.remove(id);
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
        if bundle.deleted_at.as_deref().is_some_and(|d| !d.is_empty()) {
            self.deleting.insert(bundle.id.clone());
        } else {
            self.deleting.remove(&bundle.id);
        }
        let parsed = parse_bundle(&bundle, unknown);
        if let Some(t) = parsed.updated_at.map(Stamp::timestamp) {
            self.newest_updated_at = Some(self.newest_updated_at.map_or(t, |n| n.max(t)));
        }
        let followed = parsed
            .cluster_id
            .as_deref()
            .is_some_and(|id| self.ctx.sink.follows(id));
        if !followed {
            // Unlabelled, or another shard's: not ours to track (a shard
            // keeps only its own bundles, docs/design.md §8.3); forget it if
            // it once was.
            self.deleting.remove(&bundle.id);
            self.tracker.remove(&bundle.id, out);
            return;
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
    /// ended (docs/design.md §9.5).
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
/// fast-poll interval (docs/design.md §9.5). So the pause is the interval
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
