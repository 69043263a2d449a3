//! What a poller sends: only the objects whose view changed, `Gone` for
//! those an upstream owner stopped showing, and the batch itself.

use std::collections::HashMap;
use std::sync::Arc;

use jiff::Timestamp;

use crate::model::{Batch, Change, ClusterKey, Hop, Observation, Via};
use crate::sources::{Parsed, SourceContext, UnknownValue};

/// Identifies one object of one hop, as the model keys it. The cluster key
/// is shared by the objects of one owner (a bundle shows its ManifestWork,
/// HostedCluster or NodePool, all of one cluster): one copy per owner, not
/// one per object, across a fleet's tens of thousands of them
/// (docs/performance.md).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SentKey {
    cluster: Arc<ClusterKey>,
    hop: Hop,
    via: Via,
    object: Box<str>,
}

/// Up to this many removed keys, [`Tracker::remove_vanished`] compares each
/// held key with each removed one instead of hashing every held key.
const COMPARE_AT_MOST: usize = 16;

impl SentKey {
    /// Equality, the fields that differ most often and cost least first.
    fn same_object(&self, other: &SentKey) -> bool {
        self.hop == other.hop
            && self.via == other.via
            && self.object == other.object
            && self.cluster == other.cluster
    }

    /// Whether `o` is this object, without building its key.
    fn is(&self, o: &Observation) -> bool {
        *self.cluster == o.key
            && self.hop == o.hop
            && self.via == o.via
            && *self.object == *o.object
    }

    /// The key of `o`, sharing the cluster key of any in `known` that has it.
    fn of<'a>(o: &Observation, known: impl IntoIterator<Item = &'a Sent>) -> SentKey {
        let cluster = known
            .into_iter()
            .find(|s| *s.key.cluster == o.key)
            .map_or_else(|| Arc::new(o.key.clone()), |s| s.key.cluster.clone());
        SentKey {
            cluster,
            hop: o.hop,
            via: o.via,
            object: o.object.as_str().into(),
        }
    }
}

fn gone(key: SentKey) -> Observation {
    let SentKey {
        cluster,
        hop,
        via,
        object,
    } = key;
    Observation {
        key: Arc::unwrap_or_clone(cluster),
        hop,
        via,
        object: object.into(),
        change: Change::Gone,
    }
}

/// One object an owner showed: its key, the fingerprint of what was sent,
/// and whether that was a fallback (no real reading, see
/// [`Tracker::update_with_fallbacks`]).
#[derive(Debug)]
struct Sent {
    key: SentKey,
    print: u64,
    fallback: bool,
}

/// Send `obs` unless it repeats what was sent before (same object, same
/// fingerprint, same kind of reading), and record it in `current`. A repeat
/// keeps its record: a poll that changes nothing allocates nothing that
/// lives on, so the long-lived records are not made anew among each list's
/// garbage (docs/performance.md).
fn send(
    obs: Observation,
    fallback: bool,
    previous: &mut Vec<Sent>,
    current: &mut Vec<Sent>,
    mode: UpdateMode,
    out: &mut Vec<Observation>,
) {
    let Change::Upsert(view) = &obs.change else {
        out.push(obs);
        return;
    };
    let print = view.fingerprint();
    let repeat = previous
        .iter()
        .position(|p| p.key.is(&obs) && p.print == print && p.fallback == fallback);
    let sent = match repeat {
        Some(i) => previous.swap_remove(i),
        None => Sent {
            key: SentKey::of(&obs, previous.iter().chain(current.iter())),
            print,
            fallback,
        },
    };
    current.push(sent);
    if mode.send_all || repeat.is_none() {
        out.push(obs);
    }
}

/// What a poller has sent, grouped by *owner* (the upstream object the
/// observations were read from: an ARM resource, a CS cluster, a bundle,
/// which may carry nested hops). It decides what to send next: objects whose
/// view changed, and `Gone` for objects an owner no longer shows.
#[derive(Debug, Default)]
pub struct Tracker {
    owners: HashMap<String, Vec<Sent>>,
}

/// How [`Tracker::update`] treats one owner's new observations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UpdateMode {
    /// Send every observation, changed or not (relists, first sync).
    pub send_all: bool,
    /// The owner was only partly readable (e.g. unparsable feedback): keep
    /// the objects it did not show instead of declaring them gone.
    pub partial: bool,
}

impl Tracker {
    /// Record what `owner` shows now (`observations` are upserts) and push
    /// what must be sent to `out`.
    pub fn update(
        &mut self,
        owner: &str,
        observations: Vec<Observation>,
        mode: UpdateMode,
        out: &mut Vec<Observation>,
    ) {
        self.update_with_fallbacks(owner, observations, Vec::new(), mode, out);
    }

    /// [`update`](Self::update), plus `fallbacks`: views of objects the
    /// owner should show but could not be read for (a bundle whose feedback
    /// is unreadable or absent, docs/design.md §2.6). A fallback is sent
    /// only for an object with no real reading sent before: a last good
    /// state is kept (the owner is partial), never overwritten by "unknown",
    /// and a real reading always replaces a fallback.
    pub fn update_with_fallbacks(
        &mut self,
        owner: &str,
        observations: Vec<Observation>,
        fallbacks: Vec<Observation>,
        mode: UpdateMode,
        out: &mut Vec<Observation>,
    ) {
        let (owner_key, mut previous) = self
            .owners
            .remove_entry(owner)
            .unwrap_or_else(|| (owner.to_string(), Vec::new()));
        let mut current: Vec<Sent> = Vec::with_capacity(observations.len() + fallbacks.len());
        for obs in observations {
            send(obs, false, &mut previous, &mut current, mode, out);
        }
        for obs in fallbacks {
            if current.iter().any(|c| c.key.is(&obs)) {
                continue;
            }
            let last_good = previous.iter().position(|p| p.key.is(&obs) && !p.fallback);
            match last_good {
                // Kept as it was, whatever the mode: unreadable is not gone.
                Some(i) => current.push(previous.swap_remove(i)),
                None => send(obs, true, &mut previous, &mut current, mode, out),
            }
        }
        for sent in previous {
            if current.iter().any(|c| c.key == sent.key) {
                continue;
            }
            if mode.partial {
                current.push(sent);
            } else {
                out.push(gone(sent.key));
            }
        }
        if !current.is_empty() {
            // Kept until the owner's next reading: without the room of the
            // fallbacks a real reading made unneeded (a bundle's, nearly
            // always), half of what a Maestro owner's record took
            // (docs/performance.md).
            current.shrink_to_fit();
            self.owners.insert(owner_key, current);
        }
    }

    /// The owner is gone upstream: `Gone` for everything it showed.
    pub fn remove(&mut self, owner: &str, out: &mut Vec<Observation>) {
        if let Some(objects) = self.owners.remove(owner) {
            out.extend(objects.into_iter().map(|sent| gone(sent.key)));
        }
    }

    /// Several owners are gone upstream (a relist no longer shows them):
    /// `Gone` for everything they showed that no remaining owner shows. A
    /// bundle deleted and created again under the same name is a new owner
    /// (a new id) showing the same objects; the old one's going must not
    /// take them away.
    pub fn remove_vanished(&mut self, owners: &[String], out: &mut Vec<Observation>) {
        let removed: Vec<Sent> = owners
            .iter()
            .filter_map(|o| self.owners.remove(o))
            .flatten()
            .collect();
        if removed.is_empty() {
            return;
        }
        // Which of the removed objects another owner still shows. Every
        // held object is looked at, but nothing the size of the tracker is
        // built: a set of every held key, made for each bundle a stream
        // event deleted, took all of a core at 20,000 clusters
        // (docs/performance.md). A few removed keys are compared field by
        // field, cheapest first; a relist's many are looked up in a set of
        // their own.
        let mut held = vec![false; removed.len()];
        let others = self.owners.values().flatten().map(|s| &s.key);
        if removed.len() <= COMPARE_AT_MOST {
            for key in others {
                for (r, held) in removed.iter().zip(held.iter_mut()) {
                    *held = *held || r.key.same_object(key);
                }
            }
        } else {
            let index: HashMap<&SentKey, usize> = removed
                .iter()
                .enumerate()
                .map(|(i, s)| (&s.key, i))
                .collect();
            for key in others {
                if let Some(&i) = index.get(key) {
                    held[i] = true;
                }
            }
        }
        out.extend(
            removed
                .into_iter()
                .zip(held)
                .filter(|(_, held)| !held)
                .map(|(s, _)| gone(s.key)),
        );
    }

    pub fn contains(&self, owner: &str) -> bool {
        self.owners.contains_key(owner)
    }

    pub fn owners(&self) -> impl Iterator<Item = &str> {
        self.owners.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.owners.len()
    }

    pub fn is_empty(&self) -> bool {
        self.owners.is_empty()
    }
}

/// A relist deleting more than half of what a source knows is a mass
/// deletion only from this many known objects on; below, a few clusters
/// deleted together is ordinary.
pub const MASS_DELETION_MIN_KNOWN: usize = 10;

/// Holds back a relist that would delete more than half of at least
/// [`MASS_DELETION_MIN_KNOWN`] known objects at once, until the next full
/// relist confirms it (docs/design.md §9.9). A list that proves it is a list
/// can still be wrong (a search that broke upstream, a restored empty
/// database, the wrong region behind the URL); deleting half the fleet's
/// timelines on one such answer loses their history for good, while waiting
/// one relist only delays a real deletion.
#[derive(Debug, Default)]
pub struct MassDeletionGuard {
    held: bool,
}

impl MassDeletionGuard {
    /// Of the `vanished` owners a relist of `scope` found missing among
    /// `known`, the ones to delete now: all of them, or none while a mass
    /// deletion waits for confirmation. Warns and counts each occurrence
    /// once.
    pub fn filter(
        &mut self,
        ctx: &SourceContext,
        scope: &str,
        known: usize,
        vanished: Vec<String>,
    ) -> Vec<String> {
        let mass = known >= MASS_DELETION_MIN_KNOWN && vanished.len() * 2 > known;
        if !mass {
            self.held = false;
            return vanished;
        }
        if self.held {
            self.held = false;
            tracing::warn!(
                source = %ctx.name,
                scope,
                known,
                deleted = vanished.len(),
                "a second relist confirms the mass deletion; applying it"
            );
            return vanished;
        }
        self.held = true;
        ctx.metrics.mass_deletion(&ctx.name);
        tracing::warn!(
            source = %ctx.name,
            scope,
            known,
            missing = vanished.len(),
            "a relist would delete more than half of what this source knows at once; \
             holding the deletion back until the next full relist confirms it"
        );
        Vec::new()
    }

    /// True while a mass deletion waits for its confirming relist.
    pub fn holding(&self) -> bool {
        self.held
    }
}

/// Count unknown values and deliver a batch. An empty batch is still sent
/// when `initial`, so the model knows the source completed its first sync.
pub fn deliver(
    ctx: &SourceContext,
    initial: bool,
    observed_at: Timestamp,
    observations: Vec<Observation>,
    unknown: &[UnknownValue],
) {
    ctx.count_unknown(unknown);
    if observations.is_empty() && !initial {
        return;
    }
    ctx.sink.apply(Batch {
        source: ctx.name.clone(),
        initial,
        observed_at,
        observations,
    });
}

/// Merge a parsed page into an accumulator.
pub fn extend_parsed(acc: &mut Parsed, more: Parsed) {
    acc.observations.extend(more.observations);
    acc.unknown.extend(more.unknown);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::{HopView, Phase};

    fn upsert(id: &str, hop: Hop, object: &str, state: &str) -> Observation {
        Observation {
            key: ClusterKey::Id(id.to_string()),
            hop,
            via: Via::Maestro,
            object: object.to_string(),
            change: Change::Upsert(Box::new(HopView::new(state, Phase::Progressing))),
        }
    }

    fn summary(out: &[Observation]) -> Vec<(String, bool)> {
        out.iter()
            .map(|o| (o.object.clone(), matches!(o.change, Change::Gone)))
            .collect()
    }

    #[test]
    fn an_owners_objects_share_one_copy_of_their_cluster_key() {
        let mut t = Tracker::default();
        let mut out = Vec::new();
        let shown = vec![
            upsert("c", Hop::MaestroBundle, "w", "x"),
            upsert("c", Hop::Manifestwork, "w", "x"),
            upsert("c", Hop::HostedCluster, "", "x"),
        ];
        t.update("bundle", shown.clone(), UpdateMode::default(), &mut out);
        let first = t.owners["bundle"][0].key.cluster.clone();
        assert!(
            t.owners["bundle"]
                .iter()
                .all(|s| Arc::ptr_eq(&s.key.cluster, &first))
        );
        // The next reading keeps the same copy.
        t.update("bundle", shown, UpdateMode::default(), &mut out);
        assert!(Arc::ptr_eq(&t.owners["bundle"][2].key.cluster, &first));
    }

    #[test]
    fn a_poll_that_changes_nothing_keeps_the_records_it_had() {
        let mut t = Tracker::default();
        let mut out = Vec::new();
        let shown = vec![
            upsert("c", Hop::NodePool, "a", "x"),
            upsert("c", Hop::NodePool, "b", "x"),
        ];
        t.update("bundle", shown.clone(), UpdateMode::default(), &mut out);
        let (key, sent) = t.owners.get_key_value("bundle").expect("the owner");
        let key_at = key.as_ptr();
        let names_at: Vec<*const u8> = sent.iter().map(|s| s.key.object.as_ptr()).collect();

        out.clear();
        t.update("bundle", shown, UpdateMode::default(), &mut out);
        assert!(out.is_empty(), "nothing changed, nothing sent");
        let (key, sent) = t.owners.get_key_value("bundle").expect("the owner");
        assert_eq!(key.as_ptr(), key_at, "the owner's key is the one it had");
        let mut now: Vec<*const u8> = sent.iter().map(|s| s.key.object.as_ptr()).collect();
        let mut then = names_at;
        now.sort();
        then.sort();
        assert_eq!(now, then, "each object's record is the one it had");
    }

    #[test]
    fn tracker_sends_changes_and_gone() {
        let mut t = Tracker::default();
        let mut out = Vec::new();
        let first = vec![
            upsert("c", Hop::NodePool, "a", "x"),
            upsert("c", Hop::NodePool, "b", "x"),
        ];
        t.update("bundle", first.clone(), UpdateMode::default(), &mut out);
        assert_eq!(out.len(), 2);

        out.clear();
        t.update("bundle", first.clone(), UpdateMode::default(), &mut out);
        assert!(out.is_empty(), "nothing changed, nothing sent");

        t.update(
            "bundle",
            first.clone(),
            UpdateMode {
                send_all: true,
                partial: false,
            },
            &mut out,
        );
        assert_eq!(out.len(), 2, "relists send everything");

        out.clear();
        t.update(
            "bundle",
            vec![upsert("c", Hop::NodePool, "a", "y")],
            UpdateMode::default(),
            &mut out,
        );
        assert_eq!(
            summary(&out),
            vec![("a".to_string(), false), ("b".to_string(), true)]
        );

        out.clear();
        t.update(
            "bundle",
            vec![],
            UpdateMode {
                send_all: false,
                partial: true,
            },
            &mut out,
        );
        assert!(out.is_empty(), "a partial read keeps what it did not show");
        t.remove("bundle", &mut out);
        assert_eq!(summary(&out), vec![("a".to_string(), true)]);
        assert!(t.is_empty());
    }

    #[test]
    fn an_owners_record_keeps_no_room_for_the_fallbacks_it_did_not_need() {
        let mut t = Tracker::default();
        let mut out = Vec::new();
        let real = |object: &str| upsert("c", Hop::NodePool, object, "Ready");
        let unknown = |object: &str| upsert("c", Hop::NodePool, object, "no_status");
        t.update_with_fallbacks(
            "b",
            vec![real("a"), real("b")],
            vec![unknown("a"), unknown("b")],
            UpdateMode::default(),
            &mut out,
        );
        let kept = &t.owners["b"];
        assert_eq!((kept.len(), kept.capacity()), (2, 2));
    }

    #[test]
    fn a_fallback_fills_only_where_nothing_good_was_seen() {
        let mut t = Tracker::default();
        let mut out = Vec::new();
        let partial = UpdateMode {
            send_all: false,
            partial: true,
        };
        let bundle = upsert("c", Hop::MaestroBundle, "b", "Applied");
        let unknown = |object: &str| upsert("c", Hop::NodePool, object, "no_status");
        // Never read: the fallback is sent, once.
        t.update_with_fallbacks(
            "b",
            vec![bundle.clone()],
            vec![unknown("a")],
            partial,
            &mut out,
        );
        assert_eq!(
            summary(&out),
            vec![("b".into(), false), ("a".into(), false)]
        );
        out.clear();
        t.update_with_fallbacks(
            "b",
            vec![bundle.clone()],
            vec![unknown("a")],
            partial,
            &mut out,
        );
        assert!(out.is_empty(), "an unchanged fallback is not sent again");
        // A real reading replaces it, even if it says the same.
        t.update(
            "b",
            vec![bundle.clone(), unknown("a")],
            UpdateMode::default(),
            &mut out,
        );
        assert_eq!(summary(&out), vec![("a".into(), false)]);
        out.clear();
        // Unreadable again: the last good state stays, nothing is sent.
        t.update_with_fallbacks(
            "b",
            vec![bundle.clone()],
            vec![unknown("a")],
            partial,
            &mut out,
        );
        assert!(out.is_empty(), "the last good reading is kept: {out:?}");
        // ...and stays kept however many polls fail.
        t.update_with_fallbacks("b", vec![bundle], vec![unknown("a")], partial, &mut out);
        assert!(out.is_empty());
        t.remove("b", &mut out);
        assert_eq!(
            summary(&out).len(),
            2,
            "the bundle and its pool go together"
        );
    }

    #[test]
    fn a_vanished_owner_takes_only_what_no_other_owner_shows() {
        let mut t = Tracker::default();
        let mut out = Vec::new();
        let mode = UpdateMode::default();
        // Two bundles of one cluster, and an old bundle (deleted, created
        // again under a new id) showing the same objects as its successor.
        t.update(
            "hc",
            vec![upsert("c", Hop::Manifestwork, "c", "x")],
            mode,
            &mut out,
        );
        t.update(
            "old",
            vec![upsert("c", Hop::Manifestwork, "c-np-1", "x")],
            mode,
            &mut out,
        );
        t.update(
            "new",
            vec![upsert("c", Hop::Manifestwork, "c-np-1", "y")],
            mode,
            &mut out,
        );
        out.clear();
        t.remove_vanished(&["old".to_string(), "missing".to_string()], &mut out);
        assert!(
            out.is_empty(),
            "c-np-1 is still shown by the new bundle: {out:?}"
        );
        t.remove_vanished(&["new".to_string()], &mut out);
        assert_eq!(summary(&out), vec![("c-np-1".into(), true)]);
        assert_eq!(t.owners().collect::<Vec<_>>(), vec!["hc"]);
    }

    /// A relist removes many owners at once, past what is compared key by
    /// key: the same rule holds when the removed keys are looked up.
    #[test]
    fn many_vanished_owners_take_only_what_no_other_owner_shows() {
        let mut t = Tracker::default();
        let mut out = Vec::new();
        let mode = UpdateMode::default();
        let pools = COMPARE_AT_MOST + 4;
        for i in 0..pools {
            let object = format!("c-np-{i}");
            t.update(
                &format!("old-{i}"),
                vec![upsert("c", Hop::Manifestwork, &object, "x")],
                mode,
                &mut out,
            );
        }
        // Pool 0 was created again under a new id.
        t.update(
            "new-0",
            vec![upsert("c", Hop::Manifestwork, "c-np-0", "y")],
            mode,
            &mut out,
        );
        out.clear();
        let old: Vec<String> = (0..pools).map(|i| format!("old-{i}")).collect();
        t.remove_vanished(&old, &mut out);
        let mut gone = summary(&out);
        gone.sort();
        let mut want: Vec<(String, bool)> =
            (1..pools).map(|i| (format!("c-np-{i}"), true)).collect();
        want.sort();
        assert_eq!(gone, want, "c-np-0 is still shown by new-0");
        assert_eq!(t.owners().collect::<Vec<_>>(), vec!["new-0"]);
    }
}
