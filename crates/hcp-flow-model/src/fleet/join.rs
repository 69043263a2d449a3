//! The RP provisional join (docs/design/04-identities-and-joins.md §4.4): the latest reading of
//! every RP resource, kept so a Clusters Service join can move it under the
//! CS id, and the moves themselves, both ways.

use super::*;

/// The latest reading of one RP resource, kept for every resource (every
/// shard) so a Clusters Service join can move it under the CS id. Kept
/// without what its map key says, the resource id (as the cluster key and,
/// usually, in the identity): some 300 bytes per resource of a fleet
/// (docs/performance.md).
#[derive(Clone, Debug)]
pub(super) struct RpReading {
    pub(super) hop: Hop,
    pub(super) via: Via,
    pub(super) object: Box<str>,
    pub(super) view: Box<HopView>,
    /// The identity's resource id was the key, and is put back from it.
    pub(super) rid_in_identity: bool,
    pub(super) initial: bool,
    pub(super) observed_at: Stamp,
}

impl RpReading {
    pub(super) fn new(
        rid: &str,
        observation: &Observation,
        view: &HopView,
        initial: bool,
        observed_at: Timestamp,
    ) -> RpReading {
        let mut view = Box::new(view.clone());
        // The key says the resource id; kept once there, not again here.
        let mut rid_in_identity = false;
        if let Some(identity) = view.identity.as_mut()
            && identity.resource_id.as_deref() == Some(rid)
        {
            identity.resource_id = None;
            rid_in_identity = true;
        }
        RpReading {
            hop: observation.hop,
            via: observation.via,
            object: observation.object.as_str().into(),
            view,
            rid_in_identity,
            initial,
            observed_at: observed_at.into(),
        }
    }

    /// The reading as an observation of `cluster_id`: `change` is the view
    /// (with the resource id `rid` back in its identity) or `Gone`.
    pub(super) fn observation(&self, rid: &str, cluster_id: &str, gone: bool) -> Observation {
        let change = if gone {
            Change::Gone
        } else {
            let mut view = self.view.clone();
            if self.rid_in_identity {
                view.identity_mut().resource_id = Some(rid.to_string());
            }
            Change::Upsert(view)
        };
        Observation {
            key: ClusterKey::Id(cluster_id.to_string()),
            hop: self.hop,
            via: self.via,
            object: self.object.to_string(),
            change,
        }
    }
}

impl Fleet {
    /// RP resources Clusters Service does not show: tracked under their
    /// provisional id (in this shard or another).
    pub fn unjoined_len(&self) -> usize {
        self.rp_latest
            .keys()
            .filter(|rid| !self.by_resource_id.contains_key(*rid))
            .count()
    }

    /// The copy of a lower-cased resource id the model's maps already hold,
    /// else a new one.
    pub(super) fn shared_rid(&self, rid: &str) -> Arc<str> {
        self.rp_latest
            .get_key_value(rid)
            .map(|(k, _)| k.clone())
            .or_else(|| {
                self.by_resource_id
                    .get_key_value(rid)
                    .map(|(k, _)| k.clone())
            })
            .unwrap_or_else(|| Arc::from(rid))
    }

    /// Clusters Service now shows the cluster of an ARM resource: its
    /// provisional timeline ends and the RP reading moves under the CS id,
    /// counted once — a verdict the provisional timeline already gave is
    /// kept (docs/design/04-identities-and-joins.md §4.4).
    pub(super) fn merge_provisional(
        &mut self,
        rid: &str,
        cluster_id: &str,
        initial: bool,
        now: Timestamp,
        result: &mut ApplyResult,
    ) {
        let provisional = provisional_cluster_id(rid);
        let mut carried = None;
        if let Some(old) = self.clusters.remove(&provisional) {
            result.changed.remove(&provisional);
            result.removed.insert(provisional.clone());
            carried = old.slo;
        }
        let Some(reading) = self.rp_latest.get(rid).cloned() else {
            return;
        };
        if !self.in_shard(cluster_id) {
            return;
        }
        if carried.is_none() && !self.in_shard(&provisional) {
            // Another shard tracked the provisional timeline and counted it
            // late if it passed the target before this join; decide the same
            // from the same upstream times instead of counting it again.
            carried = provisional_verdict(
                &reading.view,
                self.config.target(OperationKind::Create),
                now,
            );
        }
        if let Some(verdict) = carried
            && let Some(timeline) = self.clusters.get_mut(cluster_id).map(Arc::make_mut)
            && timeline.slo.is_none()
        {
            timeline.slo = Some(verdict);
            result.changed.insert(cluster_id.to_string());
        }
        let observation = reading.observation(rid, cluster_id, false);
        // A move, not news: silent unless both readings are news.
        let silent = reading.initial || initial;
        self.apply_to_cluster(
            cluster_id,
            observation,
            silent,
            reading.observed_at.timestamp(),
            now,
            result,
        );
    }

    /// Clusters Service no longer shows the cluster: its RP reading leaves
    /// the CS timeline and, while the ARM resource exists, is tracked under
    /// its provisional id again.
    pub(super) fn split_provisional(
        &mut self,
        rid: &str,
        cluster_id: &str,
        now: Timestamp,
        result: &mut ApplyResult,
    ) {
        let Some(reading) = self.rp_latest.get(rid).cloned() else {
            return;
        };
        let observed_at = reading.observed_at.timestamp();
        if self.in_shard(cluster_id) {
            let gone = reading.observation(rid, cluster_id, true);
            self.apply_to_cluster(cluster_id, gone, true, observed_at, now, result);
        }
        let provisional = provisional_cluster_id(rid);
        if self.in_shard(&provisional) {
            let moved = reading.observation(rid, &provisional, false);
            self.apply_to_cluster(&provisional, moved, true, observed_at, now, result);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Phase;
    use crate::testing::{batch, obs, rp};

    #[test]
    pub(super) fn the_join_maps_share_one_copy_of_a_resource_id() {
        let at: Timestamp = "2026-06-10T23:00:00Z".parse().unwrap_or_default();
        let rid = "/subscriptions/s/resourcegroups/g/providers/microsoft.redhatopenshift/hcpopenshiftclusters/a";
        let mut fleet = Fleet::new(ModelConfig::default());
        fleet.apply(
            batch(false, at, vec![rp(rid).state("Accepted", Phase::Pending)]),
            at,
        );
        fleet.apply(
            batch(
                false,
                at,
                vec![
                    obs("c1", Hop::ClustersService)
                        .state("installing", Phase::Progressing)
                        .resource_id(rid),
                ],
            ),
            at,
        );
        let (latest, _) = fleet.rp_latest.get_key_value(rid).expect("the RP reading");
        let (joined, id) = fleet.by_resource_id.get_key_value(rid).expect("the join");
        assert_eq!(id, "c1");
        assert!(Arc::ptr_eq(latest, joined));
        assert!(Arc::ptr_eq(latest, &fleet.resource_id_of["c1"]));
    }

    #[test]
    pub(super) fn a_kept_rp_reading_gets_its_resource_id_back_from_its_key() {
        let at: Timestamp = "2026-06-10T23:00:00Z".parse().unwrap_or_default();
        let rid = "/subscriptions/s/resourcegroups/g/providers/microsoft.redhatopenshift/hcpopenshiftclusters/a";
        let mut fleet = Fleet::new(ModelConfig::default());
        let cs = || {
            obs("c1", Hop::ClustersService)
                .state("installing", Phase::Progressing)
                .resource_id(rid)
        };
        let reading = rp(rid)
            .state("Accepted", Phase::Pending)
            .resource_id(rid)
            .name("a");
        fleet.apply(batch(false, at, vec![reading, cs()]), at);
        let kept = &fleet.rp_latest[rid];
        assert_eq!(
            kept.view.identity().resource_id,
            None,
            "held once, as the key"
        );
        assert_eq!(kept.view.identity().name.as_deref(), Some("a"));

        // Clusters Service lets the cluster go; the RP resource moves back
        // under its provisional id, whole.
        fleet.apply(batch(false, at, vec![cs().gone()]), at);
        let back = fleet
            .get(&provisional_cluster_id(rid))
            .expect("the provisional timeline");
        assert_eq!(back.identity.resource_id, rid);
        assert_eq!(back.identity.name, "a");
        assert_eq!(back.phase(Hop::RpFrontend), Some(Phase::Pending));
    }
}
