//! What a previous run remembered (docs/design/03-timeline-model.md §3.8, §15.8): handed to
//! the model at start, taken piece by piece as clusters are read again, and
//! what a restart would lose of each cluster now.

use super::*;

/// A restored [`ClusterMemory`], taken piece by piece as the cluster, its
/// hops and its objects are read again.
#[derive(Debug, Default)]
pub(super) struct Recall {
    pub(super) created_at: Option<Timestamp>,
    pub(super) completed_at: Option<Timestamp>,
    pub(super) failed_at: Option<Timestamp>,
    pub(super) slo: Option<SloOutcome>,
    pub(super) deletion: Option<DeletionMemory>,
    pub(super) day2_operations: Vec<Day2OperationMemory>,
    pub(super) history: crate::History,
    pub(super) hops: HashMap<Hop, HopMemory>,
    pub(super) objects: HashMap<(Hop, Via, String), ObjectMemory>,
}

impl From<ClusterMemory> for Recall {
    fn from(m: ClusterMemory) -> Recall {
        let mut objects = HashMap::new();
        let mut hops = HashMap::new();
        for mut hop in m.hops {
            for o in std::mem::take(&mut hop.objects) {
                objects.insert((hop.hop, o.via, o.object.clone()), o);
            }
            hops.insert(hop.hop, hop);
        }
        Recall {
            created_at: m.created_at,
            completed_at: m.completed_at,
            failed_at: m.failed_at,
            slo: m.slo,
            deletion: m.deletion,
            day2_operations: m.day2_operations,
            history: m.history,
            hops,
            objects,
        }
    }
}

impl Fleet {
    /// Hand the model what a previous run remembered. Call before the first
    /// batch; entries are used when their cluster is read again and state
    /// that reads the same keeps its remembered time.
    pub fn restore(&mut self, memory: Memory) {
        self.memory = memory
            .clusters
            .into_iter()
            .map(|(id, m)| (id, Recall::from(m)))
            .collect();
    }

    /// How many restored clusters have not been read again yet.
    pub fn unclaimed_memory(&self) -> usize {
        self.memory.len()
    }

    /// What a restart would lose of one cluster: observed times, first
    /// readiness, verdicts. `None` when the cluster is not tracked.
    pub fn memory_of(&self, cluster_id: &str) -> Option<ClusterMemory> {
        let timeline = self.clusters.get(cluster_id)?;
        let hops = timeline
            .hops
            .iter()
            .map(|(hop, h)| HopMemory {
                hop: *hop,
                phase: h.phase,
                since: h.since.at.into(),
                since_observed: h.since.observed,
                ready_at: h.ready_at.map(Into::into),
                ended: h.ended,
                ended_via_maestro: h.ended_via_maestro,
                objects: h
                    .objects
                    .iter()
                    .filter(|(_, o)| o.since.observed)
                    .map(|((via, object), o)| ObjectMemory {
                        via: *via,
                        object: object.clone(),
                        phase: o.view.phase,
                        state: o.view.state.to_string(),
                        since: o.since.at.into(),
                    })
                    .collect(),
            })
            .collect();
        Some(ClusterMemory {
            created_at: timeline
                .created_at
                .observed
                .then_some(timeline.created_at.at.into()),
            completed_at: timeline.completed_at.map(Into::into),
            failed_at: timeline.failed_at.map(Into::into),
            slo: timeline.slo,
            hops,
            deletion: timeline.deletion.as_deref().map(|d| DeletionMemory {
                started_at: d.started_at.at.into(),
                started_observed: d.started_at.observed,
                slo: d.slo,
                hops: d
                    .hops
                    .iter()
                    .map(|h| DeletionHopMemory {
                        hop: h.hop,
                        started_at: h.started_at.into(),
                        done_at: h.done_at.map(Into::into),
                    })
                    .collect(),
            }),
            day2_operations: timeline
                .day2_in_flight()
                .map(|op| Day2OperationMemory {
                    operation: op.kind,
                    subject: op.subject().unwrap_or_default().to_string(),
                    started_at: op.started_at.at.into(),
                    started_observed: op.started_at.observed,
                    slo: op.slo,
                    uncounted: op.uncounted,
                })
                .collect(),
            history: timeline.history.clone(),
        })
    }
}

/// A remembered node pool operation (in flight: only those are kept), as
/// the timeline keeps it again.
pub(super) fn day2_operation_of(m: Day2OperationMemory) -> Operation {
    let mut op = Operation::of_pool(
        m.operation,
        &m.subject,
        TimeMark {
            at: m.started_at.into(),
            observed: m.started_observed,
        },
    );
    // A pool's operation reaches its hops again as they are read; an
    // upgrade waits at its one hop from its start.
    if !m.operation.of_node_pool() || m.operation == OperationKind::NodePoolUpgrade {
        op.reached(m.operation.first_hop(), m.started_at.into());
    }
    op.slo = m.slo;
    op.uncounted = m.uncounted;
    op
}
