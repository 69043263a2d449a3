//! Maestro resource bundles: hop `maestro_bundle`, and through the bundle's
//! status feedback the hops `manifestwork`, `hosted_cluster` and `node_pool`
//! marked `via="maestro"` (docs/design/02-hops-and-phases.md §2.6;
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
//!   relist of minutes is otherwise never seen marked (docs/design/09-reading-the-upstreams.md §9.5).
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
//!   HostedCluster as the hop's one object (docs/design/02-hops-and-phases.md §2.5). A cluster
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
//!   the model's to fail (docs/design/03-timeline-model.md §3.4).

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use serde::Deserialize;

use crate::model::{Change, ClusterKey, Hop, HopView, Observation, Stamp, Via};
use crate::sources::http;
use crate::sources::{Parsed, UnknownValue};
use crate::views::hosted_cluster::{self, HostedClusterStatus};
use crate::views::node_pool::{self, NodePoolStatus};
use crate::views::work::{self, FeedbackError, ManifestCondition, WorkStatus};
use crate::views::{WireCondition, conditions, null_default, parse_time};

/// The `kind` this source reports in `/readyz` and
/// `hcpflow_source_kind_info`: the collection Maestro lists.
pub const KIND: &str = "resource-bundles";

/// The label that carries the Clusters Service id on bundles.
pub const CLUSTER_ID_LABEL: &str = "api.openshift.com/id";

pub const BUNDLES_PATH: &str = "/api/maestro/v1/resource-bundles";

/// The `kind` of the bundle list envelope (docs/design/10-upstream-facts.md §10.6).
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

impl BundleStatus {
    /// The agent's sequence id of this status, when readable.
    pub fn sequence(&self) -> Option<u64> {
        match self.sequence_id.as_ref()? {
            serde_json::Value::String(s) => s.trim().parse().ok(),
            serde_json::Value::Number(n) => n.as_u64(),
            _ => None,
        }
    }
}

impl ResourceBundle {
    /// The bundle's object key in hop `maestro_bundle`: its `name` (the
    /// ManifestWork's, unique per consumer and meaningful to an SRE), else
    /// its id (docs/design/02-hops-and-phases.md §2.5).
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
    /// Read for OCM's log-tracing ids (docs/design/15b-operations.md §15.13).
    #[serde(default, deserialize_with = "null_default")]
    pub annotations: BTreeMap<String, String>,
}

/// Bundle `status`: the key `ObservedVersion` is not read; `SequenceID`
/// only orders what the stream says against what a list said
/// (docs/design/09b-reading-the-upstreams.md §9.10).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleStatus {
    /// Text or number, read leniently: a value of another type is no
    /// sequence.
    #[serde(rename = "SequenceID", default)]
    pub sequence_id: Option<serde_json::Value>,
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
/// and NodePool feedback inside it (docs/design/02-hops-and-phases.md §2.6).
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
                        view.identity_mut().rollout = reading.rollout.map(|r| *r);
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

/// The cluster a bundle names by its label, as [`parse_bundle`] reads it:
/// a shard asks it first, so another shard's bundle is never read further
/// (docs/design/08-scopes-and-scale-out.md §8.3).
pub fn bundle_cluster_id(bundle: &ResourceBundle) -> Option<&str> {
    bundle
        .metadata
        .as_ref()
        .and_then(|m| m.labels.get(CLUSTER_ID_LABEL))
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
}

/// Turn one bundle into its observations: the bundle hop (object: its
/// name), and the hops its nested feedback shows (the ManifestWork by name,
/// the HostedCluster, each NodePool by name), each read by the same view as
/// a kube watch reads the object. When the feedback is absent or cannot be
/// read, the bundle carries the error (`no_status`, `feedback_unreadable`)
/// and each object it should have filled gets a placeholder `unknown` view
/// (docs/design/02-hops-and-phases.md §2.6).
pub fn parse_bundle(bundle: &ResourceBundle, unknown: &mut Vec<UnknownValue>) -> ParsedBundle {
    let updated_at = parse_time(bundle.updated_at.as_deref(), "updated_at", unknown);
    let Some(cluster_id) = bundle_cluster_id(bundle) else {
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
    // The ids the bundle's source gave its operation (OCM log tracing).
    let ids = bundle
        .metadata
        .as_ref()
        .map(|m| crate::model::log_tracing_ids(m.annotations.iter()))
        .unwrap_or_default();
    if !ids.is_empty() {
        bundle_view.identity_mut().upstream_ids = ids;
    }

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
    // A deleted bundle and what it carries are deleting from its
    // `deleted_at`: the deletion's start on the service side
    // (docs/design/15-operations.md §15.3), not the time they were last applied.
    if deleting {
        let deleted_at = parse_time(bundle.deleted_at.as_deref(), "deleted_at", unknown);
        for o in observations.iter_mut() {
            if let crate::model::Change::Upsert(view) = &mut o.change
                && view.phase == crate::model::Phase::Deleting
                && deleted_at.is_some()
            {
                view.since = deleted_at;
            }
        }
    }
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

pub mod event;
mod inbox;
pub mod known;
mod poller;
pub mod proto;
pub mod stream;

pub use known::KnownBundles;
pub use poller::{FORGET_WINDOW, MaestroSource, PollKind, UNREAD_WINDOW, next_incremental_wait};
