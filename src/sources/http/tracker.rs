//! What a poller sends: only the objects whose view changed, `Gone` for
//! those an upstream owner stopped showing, and the batch itself.

use std::collections::HashMap;

use crate::model::{Batch, Change, ClusterKey, Hop, Observation, Via};
use crate::sources::{Parsed, SourceContext, UnknownValue};

/// Up to this many removed objects, [`Tracker::remove_vanished`] compares
/// each held object with each removed one instead of hashing every held one.
const COMPARE_AT_MOST: usize = 16;

/// One object an owner showed: which it is, the fingerprint of what was
/// sent, and whether that was a fallback (no real reading, see
/// [`Tracker::update_with_fallbacks`]). Its cluster is its owner's: the
/// objects of one owner are one cluster's (a bundle shows its ManifestWork,
/// HostedCluster or NodePool), so the cluster key is held once per owner,
/// not once per object, across a fleet's tens of thousands of them
/// (docs/performance.md).
#[derive(Debug)]
struct Sent {
    object: Box<str>,
    /// The object's cluster, only when it is not its owner's.
    cluster: Option<Box<ClusterKey>>,
    print: u64,
    hop: Hop,
    via: Via,
    fallback: bool,
}

/// What identifies a held object: equal for the same object whatever
/// owner shows it. Fields in the order they are compared, those that
/// differ most often and cost least first.
#[derive(PartialEq, Eq, Hash)]
struct ObjectRef<'a> {
    hop: Hop,
    via: Via,
    object: &'a str,
    cluster: &'a ClusterKey,
}

impl Sent {
    /// The record of `o`, sent as `print`, for an owner of `cluster`.
    fn new(o: &Observation, owner: &ClusterKey, print: u64, fallback: bool) -> Sent {
        Sent {
            object: o.object.as_str().into(),
            cluster: (o.key != *owner).then(|| Box::new(o.key.clone())),
            print,
            hop: o.hop,
            via: o.via,
            fallback,
        }
    }

    fn cluster<'a>(&'a self, owner: &'a ClusterKey) -> &'a ClusterKey {
        self.cluster.as_deref().unwrap_or(owner)
    }

    fn object_ref<'a>(&'a self, owner: &'a ClusterKey) -> ObjectRef<'a> {
        ObjectRef {
            hop: self.hop,
            via: self.via,
            object: &self.object,
            cluster: self.cluster(owner),
        }
    }

    /// Whether `o` is this object, held for an owner of `owner`.
    fn is(&self, owner: &ClusterKey, o: &Observation) -> bool {
        self.hop == o.hop
            && self.via == o.via
            && *self.object == *o.object
            && *self.cluster(owner) == o.key
    }

    /// The same record, held for an owner of `to` instead of `from`.
    fn moved(mut self, from: &ClusterKey, to: &ClusterKey) -> Sent {
        if from != to {
            let cluster = self.cluster(from).clone();
            self.cluster = (cluster != *to).then(|| Box::new(cluster));
        }
        self
    }

    fn gone(self, owner: &ClusterKey) -> Observation {
        let key = match self.cluster {
            Some(cluster) => *cluster,
            None => owner.clone(),
        };
        Observation {
            key,
            hop: self.hop,
            via: self.via,
            object: self.object.into(),
            change: Change::Gone,
        }
    }
}

/// What one owner showed last, in one exact-size allocation.
#[derive(Debug)]
struct Shown {
    /// The cluster of its objects.
    cluster: ClusterKey,
    sent: Box<[Sent]>,
}

/// The clusters an owner's records are held for: `now` for what it shows
/// now, `was` for what it held before, when that was another cluster.
struct Owners<'a> {
    now: &'a ClusterKey,
    was: &'a ClusterKey,
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
    clusters: &Owners<'_>,
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
        .position(|p| p.is(clusters.was, &obs) && p.print == print && p.fallback == fallback);
    let sent = match repeat {
        Some(i) => previous.swap_remove(i).moved(clusters.was, clusters.now),
        None => Sent::new(&obs, clusters.now, print, fallback),
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
    owners: HashMap<Box<str>, Shown>,
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
    /// is unreadable or absent, docs/design/02-hops-and-phases.md §2.6). A fallback is sent
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
        let (owner_key, held) = match self.owners.remove_entry(owner) {
            Some((key, shown)) => (key, Some(shown)),
            None => (Box::from(owner), None),
        };
        let first = observations.first().or(fallbacks.first()).map(|o| &o.key);
        // The owner's cluster: the one it had, unless what it shows now is
        // another's (a record is then moved, not made again).
        let (now, was, mut previous) = match (held, first) {
            (Some(shown), Some(key)) if shown.cluster != *key => {
                (key.clone(), Some(shown.cluster), shown.sent.into_vec())
            }
            (Some(shown), _) => (shown.cluster, None, shown.sent.into_vec()),
            (None, Some(key)) => (key.clone(), None, Vec::new()),
            (None, None) => return,
        };
        let clusters = Owners {
            now: &now,
            was: was.as_ref().unwrap_or(&now),
        };
        let mut current: Vec<Sent> = Vec::with_capacity(observations.len() + fallbacks.len());
        for obs in observations {
            send(
                obs,
                false,
                &mut previous,
                &mut current,
                &clusters,
                mode,
                out,
            );
        }
        for obs in fallbacks {
            if current.iter().any(|c| c.is(clusters.now, &obs)) {
                continue;
            }
            let last_good = previous
                .iter()
                .position(|p| p.is(clusters.was, &obs) && !p.fallback);
            match last_good {
                // Kept as it was, whatever the mode: unreadable is not gone.
                Some(i) => current.push(previous.swap_remove(i).moved(clusters.was, clusters.now)),
                None => send(obs, true, &mut previous, &mut current, &clusters, mode, out),
            }
        }
        for sent in previous {
            let shown_now = sent.object_ref(clusters.was);
            if current
                .iter()
                .any(|c| c.object_ref(clusters.now) == shown_now)
            {
                continue;
            }
            if mode.partial {
                current.push(sent.moved(clusters.was, clusters.now));
            } else {
                out.push(sent.gone(clusters.was));
            }
        }
        if !current.is_empty() {
            // Exactly its size until the owner's next reading: without the
            // room of the fallbacks a real reading made unneeded (a
            // bundle's, nearly always), half of what a Maestro owner's
            // record took (docs/performance.md).
            let sent = current.into_boxed_slice();
            self.owners.insert(owner_key, Shown { cluster: now, sent });
        }
    }

    /// The owner is gone upstream: `Gone` for everything it showed.
    pub fn remove(&mut self, owner: &str, out: &mut Vec<Observation>) {
        if let Some(Shown { cluster, sent }) = self.owners.remove(owner) {
            out.extend(sent.into_vec().into_iter().map(|s| s.gone(&cluster)));
        }
    }

    /// Several owners are gone upstream (a relist no longer shows them):
    /// `Gone` for everything they showed that no remaining owner shows. A
    /// bundle deleted and created again under the same name is a new owner
    /// (a new id) showing the same objects; the old one's going must not
    /// take them away.
    pub fn remove_vanished(&mut self, owners: &[String], out: &mut Vec<Observation>) {
        let removed: Vec<Shown> = owners
            .iter()
            .filter_map(|o| self.owners.remove(o.as_str()))
            .collect();
        let objects: Vec<ObjectRef<'_>> = removed
            .iter()
            .flat_map(|shown| shown.sent.iter().map(|s| s.object_ref(&shown.cluster)))
            .collect();
        if objects.is_empty() {
            return;
        }
        // Which of the removed objects another owner still shows. Every
        // held object is looked at, but nothing the size of the tracker is
        // built: a set of every held key, made for each bundle a stream
        // event deleted, took all of a core at 20,000 clusters
        // (docs/performance.md). A few removed objects are compared field
        // by field, cheapest first; a relist's many are looked up in a set
        // of their own.
        let mut held = vec![false; objects.len()];
        let others = self
            .owners
            .values()
            .flat_map(|shown| shown.sent.iter().map(|s| s.object_ref(&shown.cluster)));
        if objects.len() <= COMPARE_AT_MOST {
            for other in others {
                for (r, held) in objects.iter().zip(held.iter_mut()) {
                    *held = *held || *r == other;
                }
            }
        } else {
            let index: HashMap<&ObjectRef<'_>, usize> =
                objects.iter().enumerate().map(|(i, o)| (o, i)).collect();
            for other in others {
                if let Some(&i) = index.get(&other) {
                    held[i] = true;
                }
            }
        }
        drop(objects);
        let mut held = held.into_iter();
        for Shown { cluster, sent } in removed {
            for s in sent.into_vec() {
                if !held.next().unwrap_or(false) {
                    out.push(s.gone(&cluster));
                }
            }
        }
    }

    pub fn contains(&self, owner: &str) -> bool {
        self.owners.contains_key(owner)
    }

    pub fn owners(&self) -> impl Iterator<Item = &str> {
        self.owners.keys().map(AsRef::as_ref)
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
/// relist confirms it (docs/design/09-reading-the-upstreams.md §9.9). A list that proves it is a list
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
///
/// The batch is stamped now, when its readings are in hand, not when the
/// poll that read them began: a poll of many pages or targets, or one
/// retried, may read a state the upstream reached after the poll began,
/// and a stamp from the poll's start would date that state before it
/// existed (docs/design/03-timeline-model.md §3.2).
pub fn deliver(
    ctx: &SourceContext,
    initial: bool,
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
        observed_at: ctx.clock.now(),
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
    fn an_owners_objects_hold_its_cluster_key_once() {
        let mut t = Tracker::default();
        let mut out = Vec::new();
        let shown = vec![
            upsert("c", Hop::MaestroBundle, "w", "x"),
            upsert("c", Hop::Manifestwork, "w", "x"),
            upsert("c", Hop::HostedCluster, "", "x"),
        ];
        t.update("bundle", shown.clone(), UpdateMode::default(), &mut out);
        let held = &t.owners["bundle"];
        assert_eq!(held.cluster, ClusterKey::Id("c".into()));
        assert!(held.sent.iter().all(|s| s.cluster.is_none()));
        // An object of another cluster says so, and goes with its own key.
        let mut other = shown.clone();
        other.push(upsert("d", Hop::NodePool, "np", "x"));
        t.update("bundle", other, UpdateMode::default(), &mut out);
        let held = &t.owners["bundle"];
        let apart: Vec<_> = held
            .sent
            .iter()
            .filter_map(|s| s.cluster.as_deref())
            .collect();
        assert_eq!(apart, vec![&ClusterKey::Id("d".into())]);
        out.clear();
        t.update("bundle", shown, UpdateMode::default(), &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(
            (
                &out[0].key,
                out[0].object.as_str(),
                matches!(out[0].change, Change::Gone)
            ),
            (&ClusterKey::Id("d".into()), "np", true)
        );
    }

    #[test]
    fn an_owner_whose_objects_move_to_another_cluster_keeps_their_records() {
        let mut t = Tracker::default();
        let mut out = Vec::new();
        let shown = |cluster: &str| {
            vec![
                upsert(cluster, Hop::MaestroBundle, "w", "x"),
                upsert("c", Hop::Manifestwork, "w", "x"),
            ]
        };
        t.update("bundle", shown("c"), UpdateMode::default(), &mut out);
        out.clear();
        // The bundle's own object now reads as cluster "e": new, and the
        // one of "c" is gone; the ManifestWork of "c" is unchanged.
        t.update("bundle", shown("e"), UpdateMode::default(), &mut out);
        let mut seen: Vec<_> = out
            .iter()
            .map(|o| {
                (
                    o.key.clone(),
                    o.object.clone(),
                    matches!(o.change, Change::Gone),
                )
            })
            .collect();
        seen.sort();
        assert_eq!(
            seen,
            vec![
                (ClusterKey::Id("c".into()), "w".into(), true),
                (ClusterKey::Id("e".into()), "w".into(), false),
            ]
        );
        out.clear();
        t.update("bundle", shown("e"), UpdateMode::default(), &mut out);
        assert!(out.is_empty(), "nothing changed: {out:?}");
        t.remove("bundle", &mut out);
        let mut gone: Vec<_> = out.iter().map(|o| (o.key.clone(), o.hop)).collect();
        gone.sort();
        assert_eq!(
            gone,
            vec![
                (ClusterKey::Id("c".into()), Hop::Manifestwork),
                (ClusterKey::Id("e".into()), Hop::MaestroBundle),
            ]
        );
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
        let names_at: Vec<*const u8> = sent.sent.iter().map(|s| s.object.as_ptr()).collect();

        out.clear();
        t.update("bundle", shown, UpdateMode::default(), &mut out);
        assert!(out.is_empty(), "nothing changed, nothing sent");
        let (key, sent) = t.owners.get_key_value("bundle").expect("the owner");
        assert_eq!(key.as_ptr(), key_at, "the owner's key is the one it had");
        let mut now: Vec<*const u8> = sent.sent.iter().map(|s| s.object.as_ptr()).collect();
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
    fn an_owners_record_keeps_only_the_objects_it_shows() {
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
        assert_eq!(t.owners["b"].sent.len(), 2, "the fallbacks are not kept");
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
