//! What is kept between writes: the live clusters' memory and whether it
//! changed since the last write.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::{ClusterMemory, Memory};

/// The memory of the live clusters, kept by the store as clusters change:
/// added or replaced when a cluster's remembered part changes, removed with
/// the cluster. `generation` counts changes, so a write that raced with a
/// change leaves the memory dirty.
#[derive(Debug, Default)]
pub struct Remembered {
    clusters: BTreeMap<String, Arc<ClusterMemory>>,
    generation: u64,
    saved: u64,
    /// Restored entries not yet confirmed by a first sync of every source
    /// (see [`Remembered::forget_unseen`]).
    unconfirmed: bool,
    /// Kept only with a state store: without one nothing would read it.
    enabled: bool,
}

/// The memory at one instant, cheap to take under the store's lock: the
/// clusters' memory is shared, not copied.
#[derive(Clone, Debug, Default)]
pub struct MemorySnapshot {
    pub generation: u64,
    pub clusters: Vec<(String, Arc<ClusterMemory>)>,
}

impl MemorySnapshot {
    pub fn len(&self) -> usize {
        self.clusters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty()
    }

    /// The owned form the model restores from.
    pub fn to_memory(&self) -> Memory {
        Memory {
            clusters: self
                .clusters
                .iter()
                .map(|(id, m)| (id.clone(), (**m).clone()))
                .collect(),
        }
    }
}

impl Remembered {
    /// Start keeping memory, seeded with what a previous run remembered. The
    /// entries are kept until their cluster is read again (and replaced) or
    /// until every source has synced without showing it (and forgotten).
    pub fn restore(&mut self, memory: &Memory) {
        self.enabled = true;
        self.clusters = memory
            .clusters
            .iter()
            .map(|(id, m)| (id.clone(), Arc::new(m.clone())))
            .collect();
        self.unconfirmed = !self.clusters.is_empty();
        // What was just read is on disk already.
        self.saved = self.generation;
    }

    /// A cluster changed: remember its new memory, or forget it when the
    /// model no longer tracks it. Only a real difference makes it dirty.
    pub fn update(&mut self, cluster_id: &str, memory: Option<ClusterMemory>) {
        match memory {
            Some(memory) => {
                if self
                    .clusters
                    .get(cluster_id)
                    .is_some_and(|old| **old == memory)
                {
                    return;
                }
                self.clusters
                    .insert(cluster_id.to_string(), Arc::new(memory));
                self.generation += 1;
            }
            None => self.forget(cluster_id),
        }
    }

    /// A cluster was removed (deleted upstream, or gone from every list).
    pub fn forget(&mut self, cluster_id: &str) {
        if self.clusters.remove(cluster_id).is_some() {
            self.generation += 1;
        }
    }

    /// Whether memory is kept at all (a state store is configured).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Whether restored entries still wait for every source's first sync.
    pub fn unconfirmed(&self) -> bool {
        self.unconfirmed
    }

    /// Every source has synced once: a restored cluster the model does not
    /// track now was deleted while the exporter was down (or belongs to
    /// another shard). Forget those, so the file holds only live clusters.
    /// Returns how many were forgotten.
    pub fn forget_unseen(&mut self, tracked: impl Fn(&str) -> bool) -> usize {
        self.unconfirmed = false;
        let before = self.clusters.len();
        self.clusters.retain(|id, _| tracked(id));
        let forgotten = before - self.clusters.len();
        if forgotten > 0 {
            self.generation += 1;
        }
        forgotten
    }

    pub fn len(&self) -> usize {
        self.clusters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty()
    }

    pub fn get(&self, cluster_id: &str) -> Option<&ClusterMemory> {
        self.clusters.get(cluster_id).map(|m| &**m)
    }

    /// Changed since the last successful write.
    pub fn dirty(&self) -> bool {
        self.generation != self.saved
    }

    pub fn snapshot(&self) -> MemorySnapshot {
        MemorySnapshot {
            generation: self.generation,
            clusters: self
                .clusters
                .iter()
                .map(|(id, m)| (id.clone(), m.clone()))
                .collect(),
        }
    }

    /// The snapshot of `generation` is on disk.
    pub fn saved(&mut self, generation: u64) {
        self.saved = self.saved.max(generation);
    }
}
