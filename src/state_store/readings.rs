//! The last readings of a source, kept beside the memory so a restarted
//! exporter serves them at once (docs/design/03-timeline-model.md §3.10).
//!
//! The memory (§3.8) keeps what only the exporter observed: times and
//! verdicts. It does not keep what the hops *say*, so a restarted exporter
//! had nothing to show until its sources listed again: at 50,000 clusters,
//! the ten minutes or more of one full list of Maestro's bundles. The
//! readings file keeps every object one source delivered (each object's
//! whole view, and the cluster's identity once), written from the model's
//! timelines, read back as that source's first, silent delivery.
//!
//! One file, `readings.json.gz`: gzip-compressed JSON, an envelope
//! `{format: "hcp-flow/readings", version: 1, written_at, source, objects:
//! [...]}`. Written and read one object at a time: neither a write nor a
//! start ever holds every object twice. Written like the state file
//! (temporary file, fsync, rename, fsync of the directory), never fatal
//! when reading: a file that cannot be read is set aside and ignored.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use flate2::Compression;
use flate2::write::GzEncoder;
use jiff::Timestamp;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use super::{LoadError, StateStore, StateStoreError};
use crate::model::{
    Change, ClusterKey, Condition, ConditionStatus, FailsAfterBudget, Hop, HopError, HopView,
    IdentityPatch, Observation, Phase, PodCounts, Replicas, Stamp, Timeline, Via,
};

pub const READINGS_FILE_NAME: &str = "readings.json.gz";
pub const READINGS_IGNORED_FILE_NAME: &str = "readings.json.gz.ignored";
const READINGS_TEMP_FILE_NAME: &str = ".readings.json.gz.tmp";
pub const READINGS_FORMAT: &str = "hcp-flow/readings";
pub const READINGS_VERSION: u32 = 1;
/// How often the readings are written when the source delivered anything
/// since: an object per bundle and nested hop makes the file a few
/// megabytes at 10,000 clusters, too much to write every 15 s.
pub const READINGS_INTERVAL: Duration = Duration::from_secs(60);
/// Objects handed to the model in one delivery when the file is read.
const CHUNK: usize = 2_000;

/// Which hops and views one source delivers, so the file keeps exactly what
/// that source would say again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadingsOf {
    /// Maestro: every bundle (hop `maestro_bundle`) and everything read
    /// through a bundle's feedback (`via="maestro"`).
    Maestro,
}

impl ReadingsOf {
    pub fn delivers(self, hop: Hop, via: Via) -> bool {
        match self {
            ReadingsOf::Maestro => hop == Hop::MaestroBundle || via == Via::Maestro,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct SavedCondition {
    #[serde(rename = "type")]
    kind: String,
    status: ConditionStatus,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_transition: Option<Timestamp>,
}

#[derive(Serialize, Deserialize)]
struct SavedError {
    code: String,
    #[serde(default)]
    message: String,
}

#[derive(Serialize, Deserialize, Default)]
struct SavedIdentity {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    resource_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    subscription_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    resource_group: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    mgmt_cluster: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    platform: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    version: String,
}

/// One object as its source last delivered it.
#[derive(Serialize, Deserialize)]
struct SavedObject {
    cluster: String,
    hop: Hop,
    via: Via,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    object: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    state: String,
    phase: Phase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    since: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    created_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    updated_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    conditions: Vec<SavedCondition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<SavedError>,
    /// desired, current, ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    replicas: Option<[u32; 3]>,
    /// ready, not ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pods: Option<[u32; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fails_after_budget: Option<(Timestamp, SavedError)>,
    /// The cluster's identity, on its first object only: the model keeps
    /// identities on the timeline, not on each view.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    identity: Option<SavedIdentity>,
}

fn saved_error(e: &HopError) -> SavedError {
    SavedError {
        code: e.code.clone(),
        message: e.message.clone(),
    }
}

fn hop_error(e: SavedError) -> HopError {
    HopError {
        code: e.code,
        message: e.message,
    }
}

impl SavedObject {
    fn of(timeline: &Timeline, hop: Hop, via: Via, object: &str, view: &HopView) -> SavedObject {
        SavedObject {
            cluster: timeline.cluster_id.clone(),
            hop,
            via,
            object: object.to_string(),
            state: view.state.as_str().to_string(),
            phase: view.phase,
            since: view.since.map(Stamp::timestamp),
            created_at: view.created_at.map(Stamp::timestamp),
            updated_at: view.updated_at.map(Stamp::timestamp),
            conditions: view
                .conditions
                .iter()
                .map(|c| SavedCondition {
                    kind: c.kind.as_str().to_string(),
                    status: c.status,
                    reason: c.reason.as_str().to_string(),
                    message: c.message.as_str().to_string(),
                    last_transition: c.last_transition.map(Stamp::timestamp),
                })
                .collect(),
            error: view.error.as_deref().map(saved_error),
            replicas: view.replicas.map(|r| [r.desired, r.current, r.ready]),
            pods: view.pods.map(|p| [p.ready, p.not_ready]),
            fails_after_budget: view
                .fails_after_budget
                .as_deref()
                .map(|f| (f.since, saved_error(&f.error))),
            identity: None,
        }
    }

    fn into_observation(self) -> Observation {
        let mut view = HopView::new(&self.state, self.phase);
        view.since = self.since.map(Stamp::new);
        view.created_at = self.created_at.map(Stamp::new);
        view.updated_at = self.updated_at.map(Stamp::new);
        let conditions = self.conditions.into_iter().map(|c| {
            Condition::new(
                c.kind.as_str(),
                c.status,
                c.reason.as_str(),
                c.message,
                c.last_transition.map(Stamp::new),
            )
        });
        view.conditions = crate::model::shared_conditions(conditions.collect());
        view.error = self.error.map(|e| Box::new(hop_error(e)));
        view.replicas = self.replicas.map(|[desired, current, ready]| Replicas {
            desired,
            current,
            ready,
        });
        view.pods = self
            .pods
            .map(|[ready, not_ready]| PodCounts { ready, not_ready });
        view.fails_after_budget = self.fails_after_budget.map(|(since, error)| {
            Box::new(FailsAfterBudget {
                since,
                error: hop_error(error),
            })
        });
        if let Some(id) = self.identity {
            let some = |s: String| (!s.is_empty()).then_some(s);
            view.set_identity(IdentityPatch {
                name: some(id.name),
                resource_id: some(id.resource_id),
                subscription_id: some(id.subscription_id),
                resource_group: some(id.resource_group),
                mgmt_cluster: some(id.mgmt_cluster),
                namespace: some(id.namespace),
                platform: some(id.platform),
                version: some(id.version),
                // Maestro's readings: no annotations are read through it.
                trace_parents: Vec::new(),
                upstream_ids: Vec::new(),
                // A rollout is read again with the bundle's next status; a
                // restored reading starts no upgrade (it loads silently).
                rollout: None,
            });
        }
        Observation {
            key: ClusterKey::Id(self.cluster),
            hop: self.hop,
            via: self.via,
            object: self.object,
            change: Change::Upsert(Box::new(view)),
        }
    }
}

fn saved_identity(timeline: &Timeline) -> SavedIdentity {
    let id = &timeline.identity;
    SavedIdentity {
        name: id.name.clone(),
        resource_id: id.resource_id.clone(),
        subscription_id: id.subscription_id.to_string(),
        resource_group: id.resource_group.to_string(),
        mgmt_cluster: id.mgmt_cluster.to_string(),
        namespace: id.namespace.clone(),
        platform: id.platform.to_string(),
        version: id.version.to_string(),
    }
}

/// The objects of `timelines` that `of` delivers, serialised one at a time.
struct ObjectsOf<'a> {
    timelines: &'a [Arc<Timeline>],
    of: ReadingsOf,
}

impl Serialize for ObjectsOf<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let of = self.of;
        serializer.collect_seq(self.timelines.iter().flat_map(move |timeline| {
            // One timeline's objects at a time: a few, never the fleet's.
            let mut saved: Vec<SavedObject> = timeline
                .hops
                .iter()
                .flat_map(|(hop, h)| {
                    h.objects
                        .iter()
                        .filter(move |((via, _), _)| of.delivers(*hop, *via))
                        .map(move |((via, object), state)| {
                            SavedObject::of(timeline, *hop, *via, object, &state.view)
                        })
                })
                .collect();
            if let Some(first) = saved.first_mut() {
                first.identity = Some(saved_identity(timeline));
            }
            saved
        }))
    }
}

#[derive(Serialize)]
struct ReadingsOut<'a> {
    format: &'static str,
    version: u32,
    written_at: Timestamp,
    source: &'a str,
    objects: ObjectsOf<'a>,
}

/// What the file says of itself, read before its objects.
#[derive(Deserialize)]
struct ReadingsHeader {
    format: String,
    version: u32,
    written_at: Timestamp,
    source: String,
}

/// What was read back from the readings file.
#[derive(Debug, Clone, PartialEq)]
pub struct RestoredReadings {
    pub source: String,
    pub written_at: Timestamp,
    pub objects: usize,
}

/// Reads the envelope's `objects`, handing them on in chunks.
struct ObjectsSeed<'f> {
    deliver: &'f mut dyn FnMut(Vec<Observation>, Timestamp),
    written_at: Timestamp,
    count: usize,
}

impl<'de> Visitor<'de> for &mut ObjectsSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of objects")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut chunk = Vec::with_capacity(CHUNK);
        while let Some(object) = seq.next_element::<SavedObject>()? {
            chunk.push(object.into_observation());
            self.count += 1;
            if chunk.len() == CHUNK {
                (self.deliver)(
                    std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK)),
                    self.written_at,
                );
            }
        }
        if !chunk.is_empty() {
            (self.deliver)(chunk, self.written_at);
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for &mut ObjectsSeed<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

/// The envelope, reading only `objects` (the header was checked before).
struct EnvelopeSeed<'s, 'f>(&'s mut ObjectsSeed<'f>);

impl<'de> Visitor<'de> for EnvelopeSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the readings envelope")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key == "objects" {
                map.next_value_seed(&mut *self.0)?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

impl StateStore {
    fn readings_path(&self) -> PathBuf {
        self.dir.join(READINGS_FILE_NAME)
    }

    /// Write the objects of `timelines` that `source` delivers (`of`) as the
    /// new readings file, atomically. Returns how many clusters it covered.
    pub fn save_readings(
        &self,
        source: &str,
        of: ReadingsOf,
        timelines: &[Arc<Timeline>],
        now: Timestamp,
    ) -> Result<usize, StateStoreError> {
        let out = ReadingsOut {
            format: READINGS_FORMAT,
            version: READINGS_VERSION,
            written_at: now,
            source,
            objects: ObjectsOf { timelines, of },
        };
        let path = self.readings_path();
        self.replace_file(&path, READINGS_TEMP_FILE_NAME, |w| {
            let mut gz = GzEncoder::new(w, Compression::fast());
            super::persist::write_json(&mut gz, &out)?;
            gz.finish()?;
            Ok(())
        })
        .inspect_err(|error| {
            tracing::warn!(
                error = %crate::sources::health::cause_chain(error),
                "the readings file cannot be written; the previous one is kept"
            );
        })?;
        Ok(timelines.len())
    }

    /// Read the readings file of `source`, handing its objects to `deliver`
    /// a chunk at a time, with when they were written. `None` when there is none, or it cannot be used
    /// (set aside, with one warning): the exporter then starts without
    /// readings, as before there was a file.
    pub fn load_readings(
        &self,
        source: &str,
        deliver: &mut dyn FnMut(Vec<Observation>, Timestamp),
    ) -> Option<RestoredReadings> {
        let path = self.readings_path();
        let checked = self.read_readings(&path, None).and_then(|header| {
            if header.format != READINGS_FORMAT || header.version != READINGS_VERSION {
                Err(LoadError::OtherVersion {
                    path: path.clone(),
                    format: header.format,
                    version: header.version.into(),
                })
            } else if header.source != source {
                Err(LoadError::OtherSource {
                    path: path.clone(),
                    found: header.source,
                    wanted: source.to_string(),
                })
            } else {
                Ok(header)
            }
        });
        let header = match checked {
            Ok(header) => header,
            Err(LoadError::Missing { .. }) => return None,
            Err(error) => {
                self.set_aside(&path, READINGS_IGNORED_FILE_NAME, &error);
                return None;
            }
        };
        let mut seed = ObjectsSeed {
            deliver,
            written_at: header.written_at,
            count: 0,
        };
        if let Err(error) = self.read_readings(&path, Some(&mut seed)) {
            // What was delivered before the damage stays: each object read
            // is whole, and the source's first list reconciles the rest.
            self.set_aside(&path, READINGS_IGNORED_FILE_NAME, &error);
        }
        Some(RestoredReadings {
            source: header.source,
            written_at: header.written_at,
            objects: seed.count,
        })
    }

    /// One pass over the file, bounded in size: its header, or (with
    /// `objects`) its objects.
    fn read_readings(
        &self,
        path: &Path,
        objects: Option<&mut ObjectsSeed<'_>>,
    ) -> Result<ReadingsHeader, LoadError> {
        let parsed = self.parse_file(path, |json| match objects {
            None => ReadingsHeader::deserialize(json).map(Some),
            Some(seed) => {
                de::Deserializer::deserialize_map(json, EnvelopeSeed(seed)).map(|()| None)
            }
        })?;
        Ok(match parsed {
            Some(header) => header,
            // The header was read by the first pass; this one only says the
            // body parsed whole.
            None => ReadingsHeader {
                format: READINGS_FORMAT.to_string(),
                version: READINGS_VERSION,
                written_at: Timestamp::UNIX_EPOCH,
                source: String::new(),
            },
        })
    }
}
