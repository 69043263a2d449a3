//! A cluster's node pools at the RP (ARM `nodePools`) and Clusters Service
//! (`/clusters/{id}/node_pools`): what is read, and when (docs/design/15b-operations.md
//! §15.11).
//!
//! Both APIs list pools per cluster only, so reading every cluster's pools
//! each cycle would cost one request per cluster per cycle. A cluster's
//! pools are read instead when a cheaper signal says they may have changed
//! ([`PoolHints`]: a NodePool that appeared, went or changed its phase, in
//! Maestro's feedback or a watch), on every fast poll while one of its pools
//! is not settled (its operation in flight), and by a slow rotation through
//! every known cluster that bounds how long a change can go unseen.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexSet;
use parking_lot::Mutex;
use serde::Deserialize;

use crate::model::{Change, ClusterKey, Hop, HopError, HopView, Observation, Phase, Via};
use crate::sources::UnknownValue;
use crate::sources::http;

/// Clusters whose pools are worth reading now, filled by the store after
/// the model saw a NodePool move, drained by the RP and Clusters Service
/// sources.
#[derive(Clone, Default)]
pub struct PoolHints {
    inner: Arc<Mutex<HintSets>>,
    /// Wake each source when a hint for it arrives (one stored permit: a
    /// hint while it reads wakes it again once).
    rp_wake: Arc<tokio::sync::Notify>,
    cs_wake: Arc<tokio::sync::Notify>,
}

/// First hinted, first read: a burst (the pools in flight at start) is read
/// in batches, and a cluster hinted while one is read waits behind the
/// burst, not behind every name that sorts before it.
#[derive(Default)]
struct HintSets {
    /// Lower-cased ARM resource ids.
    rp: IndexSet<String>,
    /// Clusters Service cluster ids.
    cs: IndexSet<String>,
}

/// At most this many hints wait per source: a burst (a management cluster
/// coming back) is read by the rotation instead of queueing without bound.
const MAX_HINTS: usize = 10_000;

impl PoolHints {
    /// Read these pools now: Clusters Service's of `cluster_id`, the RP's
    /// of `resource_id`.
    pub fn hint(&self, cluster_id: Option<&str>, resource_id: Option<&str>) {
        let mut sets = self.inner.lock();
        if let Some(id) = cluster_id
            && sets.cs.len() < MAX_HINTS
        {
            sets.cs.insert(id.to_string());
            self.cs_wake.notify_one();
        }
        if let Some(rid) = resource_id.filter(|r| !r.is_empty())
            && sets.rp.len() < MAX_HINTS
        {
            sets.rp.insert(rid.to_ascii_lowercase());
            self.rp_wake.notify_one();
        }
    }

    /// A hinted read that failed (a 5xx, a timeout): read again at the
    /// source's next poll, not at once, so a server that keeps failing is
    /// not asked in a loop. Dropped, the pool's move would go unread until
    /// the rotation's turn, an hour later (docs/design/15b-operations.md §15.11).
    pub fn retry(&self, rp: bool, key: &str) {
        let mut sets = self.inner.lock();
        let set = if rp { &mut sets.rp } else { &mut sets.cs };
        if set.len() < MAX_HINTS {
            set.insert(key.to_string());
        }
    }

    /// Resolves when a hint for the RP (`rp`) or Clusters Service arrives.
    pub fn woken(&self, rp: bool) -> impl std::future::Future<Output = ()> + Send + 'static {
        let wake = if rp {
            self.rp_wake.clone()
        } else {
            self.cs_wake.clone()
        };
        async move { wake.notified().await }
    }

    pub fn take_rp(&self) -> Vec<String> {
        self.take(true, usize::MAX)
    }

    pub fn take_cs(&self) -> Vec<String> {
        self.take(false, usize::MAX)
    }

    /// The `limit` oldest hints for the RP (`rp`) or Clusters Service. What
    /// is left wakes the source again, so a burst is read batch after
    /// batch, each delivered as it ends.
    pub fn take(&self, rp: bool, limit: usize) -> Vec<String> {
        let mut sets = self.inner.lock();
        let (set, wake) = if rp {
            (&mut sets.rp, &self.rp_wake)
        } else {
            (&mut sets.cs, &self.cs_wake)
        };
        let taken: Vec<String> = set.drain(..limit.min(set.len())).collect();
        if !set.is_empty() {
            wake.notify_one();
        }
        taken
    }

    /// Hints waiting for the RP (`rp`) or Clusters Service.
    pub fn waiting(&self, rp: bool) -> usize {
        let sets = self.inner.lock();
        if rp { sets.rp.len() } else { sets.cs.len() }
    }
}

/// At most this many clusters with a pool in flight are read again per
/// poll (more wait for the next turn).
const MAX_FOLLOWED_PER_POLL: usize = 100;

/// A cluster with a pool in flight is read again every this many polls,
/// and at once when a hint names it: what moves a pool at the RP or
/// Clusters Service mostly follows its NodePool, which hints it. A cluster
/// with a pool updating is read at every poll instead: nothing hints what
/// ends an upgrade there (Clusters Service's `error`), and reading every
/// pool in flight at every poll kept the demo's pollers seconds behind
/// their clusters (docs/design/15b-operations.md §15.11).
const FOLLOW_EVERY: u64 = 8;

/// At most this many hinted clusters are read in one batch: the batch is
/// delivered when its last read ends, so a burst of hints (every pool in
/// flight at start) reaches the model batch by batch rather than minutes
/// later all at once, and the reads' results are held for one batch only.
pub const MAX_HINTED_PER_BATCH: usize = 256;

/// How many clusters' pools a source reads at once: the reads are small,
/// and one at a time would hold the source's next poll behind them.
pub const CONCURRENT_READS: usize = 8;

/// One cluster's pools as a source read them: `Some(read)` to record
/// (`read` `None`: the cluster is gone), `None` when the answer was no list
/// (counted; what was read before stands).
pub type PoolAnswer = Result<Option<Option<Vec<(String, HopView)>>>, http::SourceError>;

/// Which clusters' pools one source reads on a fast poll, and what it sent
/// of the pools not settled.
pub struct PoolFollow {
    hints: Option<PoolHints>,
    /// Clusters whose last read showed a pool not settled, with the pools
    /// sent and their fingerprints: read on every fast poll, and a pool
    /// they no longer show is gone.
    unsettled: HashMap<String, Vec<(String, u64)>>,
    /// The rotation's turn: each poll reads the known clusters whose hash
    /// falls in its bucket, so the rotation holds no copy of the fleet's
    /// keys (they are long-lived memory at 10,000 clusters).
    turn: u64,
    /// Where the next poll's share of the followed clusters begins.
    followed_turn: u64,
    /// Of the followed clusters, those with a pool updating: read at every
    /// poll ([`FOLLOW_EVERY`]).
    updating: std::collections::HashSet<String>,
    /// When the last turn (of the rotation and the followed) was taken.
    last_turn: Option<std::time::Instant>,
    rotation_period: Duration,
    fast_interval: Duration,
}

impl PoolFollow {
    pub fn new(
        hints: Option<PoolHints>,
        rotation_period: Duration,
        fast_interval: Duration,
    ) -> Self {
        PoolFollow {
            hints,
            unsettled: HashMap::new(),
            turn: 0,
            followed_turn: 0,
            updating: std::collections::HashSet::new(),
            last_turn: None,
            rotation_period,
            fast_interval,
        }
    }

    /// The clusters (keys as the source names them) whose pools this poll
    /// reads: the hinted ones (`rp`: the RP's hints, else Clusters
    /// Service's), those with a pool not settled, and the rotation's bucket
    /// of `known` for this turn.
    pub fn due<'a>(&mut self, rp: bool, known: impl Iterator<Item = &'a str>) -> Vec<String> {
        self.due_at(rp, true, known)
    }

    /// [`PoolFollow::due`], or between two polls (`rotate` false): only
    /// what was hinted, with no turn of the rotation and none of the
    /// followed clusters (the next poll reads those).
    pub fn due_at<'a>(
        &mut self,
        rp: bool,
        rotate: bool,
        known: impl Iterator<Item = &'a str>,
    ) -> Vec<String> {
        self.due_when(rp, rotate, known, std::time::Instant::now())
    }

    /// [`PoolFollow::due_at`] at `now`.
    pub fn due_when<'a>(
        &mut self,
        rp: bool,
        rotate: bool,
        known: impl Iterator<Item = &'a str>,
        now: std::time::Instant,
    ) -> Vec<String> {
        let mut due: BTreeSet<String> = match &self.hints {
            Some(h) => h.take(rp, MAX_HINTED_PER_BATCH).into_iter().collect(),
            None => BTreeSet::new(),
        };
        // One turn per fast interval, however often the source polls (the
        // RP polls each subscription on its own schedule).
        let turn_due = self
            .last_turn
            .is_none_or(|t| now.duration_since(t) >= self.fast_interval);
        if !rotate || !turn_due {
            return due.into_iter().collect();
        }
        self.last_turn = Some(now);
        // Followed pools: those updating each poll, the others an eighth
        // each poll (each read every `FOLLOW_EVERY` polls; a hint reads one
        // at once), at most `MAX_FOLLOWED_PER_POLL`, so a fleet with many
        // pools in flight still has its clusters read on time.
        let turn = self.followed_turn % FOLLOW_EVERY;
        self.followed_turn = self.followed_turn.wrapping_add(1);
        let mut followed: Vec<&String> = self
            .unsettled
            .keys()
            .filter(|key| self.updating.contains(*key) || bucket(key, FOLLOW_EVERY) == turn)
            .collect();
        followed.sort_by_key(|key| (!self.updating.contains(*key), *key));
        followed.truncate(MAX_FOLLOWED_PER_POLL);
        due.extend(followed.into_iter().cloned());
        let buckets = rotation_buckets(self.fast_interval, self.rotation_period);
        let turn = self.turn % buckets;
        self.turn = self.turn.wrapping_add(1);
        due.extend(
            known
                .filter(|key| bucket(key, buckets) == turn)
                .map(str::to_string),
        );
        due.into_iter().collect()
    }

    /// Record one cluster's pools as read (`None`: the cluster is gone, so
    /// are its pools) and push what to send: every reading of a settled
    /// pool (the model keeps none of those unless an operation follows
    /// it), a pool not settled when it changed, and `Gone` for a pool
    /// followed before that the read no longer shows.
    pub fn record(
        &mut self,
        cluster: &str,
        key: &ClusterKey,
        hop: Hop,
        read: Option<Vec<(String, HopView)>>,
        out: &mut Vec<Observation>,
    ) {
        let before = self.unsettled.remove(cluster).unwrap_or_default();
        let read = read.unwrap_or_default();
        let updating = read
            .iter()
            .any(|(_, view)| crate::model::provisioned_update(hop, &view.state));
        if updating {
            self.updating.insert(cluster.to_string());
        } else {
            self.updating.remove(cluster);
        }
        let mut after = Vec::new();
        for (name, view) in read {
            let fingerprint = view.fingerprint();
            let settled = settled(&view);
            let repeat = before.iter().any(|(n, f)| *n == name && *f == fingerprint);
            if !settled {
                after.push((name.clone(), fingerprint));
            }
            if !repeat {
                out.push(Observation {
                    key: key.clone(),
                    hop,
                    via: Via::Direct,
                    object: name,
                    change: Change::Upsert(Box::new(view)),
                });
            }
        }
        for (name, _) in before {
            let still = after.iter().any(|(n, _)| *n == name)
                || out.iter().any(|o| o.object == name && &o.key == key);
            if !still {
                out.push(Observation {
                    key: key.clone(),
                    hop,
                    via: Via::Direct,
                    object: name,
                    change: Change::Gone,
                });
            }
        }
        if !after.is_empty() {
            self.unsettled.insert(cluster.to_string(), after);
        }
    }

    /// Read the pools of the clusters `due` (keys as the source names
    /// them), [`CONCURRENT_READS`] at a time with `read_one`, record each
    /// answer ([`PoolFollow::record`], keyed by `key_of`) into `out`, and
    /// hint a failed read again for the next poll without waking the source
    /// (docs/design/15b-operations.md §15.11). `hcpflow_node_pool_reads_queued` shows what
    /// waits before and after. `rp`: the RP's hints, else Clusters
    /// Service's.
    #[allow(clippy::too_many_arguments)]
    pub async fn read_due<F, Fut>(
        &mut self,
        ctx: &crate::sources::SourceContext,
        (rp, hop): (bool, Hop),
        due: Vec<String>,
        key_of: impl Fn(&str) -> ClusterKey,
        read_one: F,
        out: &mut Vec<Observation>,
        unknown: &mut Vec<UnknownValue>,
    ) where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = (String, PoolAnswer, Vec<UnknownValue>)>,
    {
        use futures::StreamExt as _;
        let hints = self.hints.clone();
        let waiting = move || hints.as_ref().map_or(0, |h| h.waiting(rp));
        ctx.metrics
            .node_pool_reads_queued(&ctx.name, due.len() + waiting());
        let reads: Vec<_> = futures::stream::iter(due)
            .map(read_one)
            .buffer_unordered(CONCURRENT_READS)
            .collect()
            .await;
        for (cluster, answer, mut read_unknown) in reads {
            unknown.append(&mut read_unknown);
            match answer {
                // Not a list: what was read before stands.
                Ok(None) => {}
                Ok(Some(read)) => self.record(&cluster, &key_of(&cluster), hop, read, out),
                Err(error) => {
                    tracing::debug!(source = %ctx.name, cluster = %cluster, %error, "reading a cluster's node pools failed");
                    if let Some(hints) = &self.hints {
                        hints.retry(rp, &cluster);
                    }
                }
            }
        }
        ctx.metrics.node_pool_reads_queued(&ctx.name, waiting());
    }

    /// The store's hints this follows, if any.
    pub fn hints(&self) -> Option<&PoolHints> {
        self.hints.as_ref()
    }

    /// Clusters with a pool not settled.
    pub fn unsettled(&self) -> usize {
        self.unsettled.len()
    }
}

/// How many polls one rotation takes: every known cluster is read once
/// per `period` when polls come every `fast`.
fn rotation_buckets(fast: Duration, period: Duration) -> u64 {
    (period.as_secs_f64() / fast.as_secs_f64().max(0.001)).max(1.0) as u64
}

/// A cluster's bucket: a stable hash of its key, so it is read on the same
/// turn of every rotation.
fn bucket(key: &str, buckets: u64) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    key.hash(&mut h);
    h.finish() % buckets.max(1)
}

/// Nothing to wait for: ready. A pool being updated is followed until it
/// is ready again, as the model keeps it: the update may be the RP's or
/// Clusters Service's part of the pool's upgrade, timed until it settles
/// (docs/design/15-operations.md §15.10).
fn settled(view: &HopView) -> bool {
    view.phase == Phase::Ready
}

// ---- ARM `nodePools` ---------------------------------------------------

/// The fields of an ARM `nodePools` resource the exporter reads.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArmNodePool {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub system_data: Option<ArmSystemData>,
    #[serde(default)]
    pub properties: Option<ArmNodePoolProperties>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArmSystemData {
    #[serde(default)]
    pub created_at: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArmNodePoolProperties {
    #[serde(default)]
    pub provisioning_state: Option<String>,
}

/// One ARM node pool as its `rp_frontend` reading: the pool's name (the
/// last segment of its id when `name` is absent), its provisioningState
/// mapped as the cluster's, dated by `systemData.createdAt`.
pub fn parse_arm_pool(
    pool: &ArmNodePool,
    unknown: &mut Vec<UnknownValue>,
) -> Option<(String, HopView)> {
    let name = pool
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .or_else(|| {
            pool.id
                .as_deref()
                .and_then(|id| id.rsplit('/').next())
                .map(str::to_string)
        })
        .filter(|n| !n.is_empty())?;
    let raw = pool
        .properties
        .as_ref()
        .and_then(|p| p.provisioning_state.as_deref())
        .unwrap_or("");
    let phase = crate::views::rp_frontend::phase(raw).unwrap_or_else(|| {
        unknown.push(UnknownValue {
            field: "nodePools.properties.provisioningState",
            value: raw.to_string(),
        });
        Phase::Unknown
    });
    let created_at = http::parse_time(
        pool.system_data
            .as_ref()
            .and_then(|s| s.created_at.as_deref()),
        "nodePools.systemData.createdAt",
        unknown,
    );
    Some((
        name,
        HopView {
            created_at,
            ..HopView::new(raw, phase)
        },
    ))
}

// ---- Clusters Service `node_pools` -------------------------------------

/// The fields of a Clusters Service node pool the exporter reads.
#[derive(Debug, Deserialize)]
pub struct CsNodePool {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub status: Option<CsNodePoolStatus>,
}

#[derive(Debug, Default, Deserialize)]
pub struct CsNodePoolStatus {
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub state: Option<CsNodePoolState>,
}

#[derive(Debug, Default, Deserialize)]
pub struct CsNodePoolState {
    #[serde(default)]
    pub value: Option<String>,
    #[serde(default)]
    pub last_updated_timestamp: Option<String>,
}

/// A Clusters Service node pool state's phase (the states ARO HCP's
/// backend maps to the pool's provisioningState).
pub fn cs_pool_phase(state: &str) -> Option<Phase> {
    Some(match state {
        "validating" | "pending" | "validating_update" | "pending_update" => Phase::Pending,
        "installing" | "updating" => Phase::Progressing,
        "ready" => Phase::Ready,
        "uninstalling" => Phase::Deleting,
        "error" | "recoverable_error" => Phase::Failed,
        _ => return None,
    })
}

/// One Clusters Service node pool as its `clusters_service` reading, in
/// its state since `state.last_updated_timestamp`; a failed one carries
/// CS's message as its error.
pub fn parse_cs_pool(
    pool: &CsNodePool,
    unknown: &mut Vec<UnknownValue>,
) -> Option<(String, HopView)> {
    let name = pool.id.clone().filter(|n| !n.is_empty())?;
    let status = pool.status.as_ref();
    let state = status.and_then(|s| s.state.as_ref());
    let raw = state.and_then(|s| s.value.as_deref()).unwrap_or("");
    let phase = cs_pool_phase(raw).unwrap_or_else(|| {
        unknown.push(UnknownValue {
            field: "node_pools.status.state.value",
            value: raw.to_string(),
        });
        Phase::Unknown
    });
    let since = http::parse_time(
        state.and_then(|s| s.last_updated_timestamp.as_deref()),
        "node_pools.status.state.last_updated_timestamp",
        unknown,
    );
    let error = (phase == Phase::Failed).then(|| {
        Box::new(HopError {
            code: raw.to_string(),
            message: status.and_then(|s| s.message.clone()).unwrap_or_default(),
        })
    });
    Some((
        name,
        HopView {
            since,
            error,
            ..HopView::new(raw, phase)
        },
    ))
}

/// A Clusters Service list page of node pools (`NodePoolList`).
#[derive(Debug, Deserialize)]
pub struct CsNodePoolList {
    #[serde(default)]
    pub items: Option<Vec<http::RawItem>>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests: a panic is the failure report

    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn a_rotation_reads_every_known_cluster_once_per_period() {
        let fast = Duration::from_secs(10);
        assert_eq!(rotation_buckets(fast, Duration::from_secs(3600)), 360);
        assert_eq!(rotation_buckets(fast, Duration::from_secs(1)), 1);
        let mut follow = PoolFollow::new(None, Duration::from_secs(100), fast);
        let known: Vec<String> = (0..500).map(|i| format!("c{i}")).collect();
        let mut reads = BTreeMap::new();
        let start = std::time::Instant::now();
        let at = |i: u32| start + fast * i;
        assert!(
            !follow
                .due_when(false, true, known.iter().map(String::as_str), at(0))
                .is_empty()
        );
        assert!(
            follow
                .due_when(false, true, known.iter().map(String::as_str), at(0))
                .is_empty(),
            "one turn per fast interval, however often it is asked"
        );
        let mut follow = PoolFollow::new(None, Duration::from_secs(100), fast);
        for i in 0..20 {
            for key in follow.due_when(false, true, known.iter().map(String::as_str), at(i)) {
                *reads.entry(key).or_insert(0) += 1;
            }
        }
        assert_eq!(
            reads.len(),
            500,
            "two rotations of ten polls read the whole fleet"
        );
        assert!(
            reads.values().all(|n| *n == 2),
            "each cluster once per rotation"
        );
        let per_poll = 500 / 10;
        let mut follow = PoolFollow::new(None, Duration::from_secs(100), fast);
        let one = follow.due(false, known.iter().map(String::as_str)).len();
        assert!(
            one > per_poll / 2 && one < per_poll * 2,
            "{one} of about {per_poll}"
        );
    }

    #[test]
    fn a_pool_not_settled_is_read_every_poll_and_sent_when_it_changes_or_goes() {
        let hints = PoolHints::default();
        let mut follow = PoolFollow::new(
            Some(hints.clone()),
            Duration::from_secs(3600),
            Duration::from_secs(10),
        );
        hints.hint(Some("c1"), Some("/SUBSCRIPTIONS/S/x"));
        assert_eq!(follow.due(false, std::iter::empty()), ["c1"]);
        assert_eq!(
            follow.due(false, std::iter::empty()),
            Vec::<String>::new(),
            "a hint is taken once"
        );
        let key = ClusterKey::Id("c1".into());
        let installing = || HopView::new("installing", Phase::Progressing);
        let mut out = Vec::new();
        follow.record(
            "c1",
            &key,
            Hop::ClustersService,
            Some(vec![("np".into(), installing())]),
            &mut out,
        );
        assert_eq!(out.len(), 1);
        let start = std::time::Instant::now();
        let polls: Vec<Vec<String>> = (0..FOLLOW_EVERY as u32)
            .map(|i| {
                let at = start + Duration::from_secs(10) * (i + 1);
                follow.due_when(false, true, std::iter::empty(), at)
            })
            .collect();
        assert_eq!(
            polls.iter().filter(|p| p.as_slice() == ["c1"]).count(),
            1,
            "followed while not settled, once every {FOLLOW_EVERY} polls: {polls:?}"
        );
        out.clear();
        follow.record(
            "c1",
            &key,
            Hop::ClustersService,
            Some(vec![("np".into(), installing())]),
            &mut out,
        );
        assert!(out.is_empty(), "an unchanged pool is not sent again");
        follow.record("c1", &key, Hop::ClustersService, Some(Vec::new()), &mut out);
        assert!(
            matches!(out.as_slice(), [o] if matches!(o.change, Change::Gone) && o.object == "np")
        );
        assert_eq!(follow.unsettled(), 0);
        assert_eq!(hints.take_rp(), ["/subscriptions/s/x"]);
    }

    #[test]
    fn a_pool_updating_is_read_at_every_poll_the_others_in_turns() {
        let mut follow = PoolFollow::new(None, Duration::from_secs(3600), Duration::from_secs(10));
        let mut out = Vec::new();
        let mut record = |follow: &mut PoolFollow, id: &str, state: &str| {
            follow.record(
                id,
                &ClusterKey::Id(id.to_string()),
                Hop::ClustersService,
                Some(vec![("np".into(), HopView::new(state, Phase::Progressing))]),
                &mut out,
            );
        };
        for i in 0..FOLLOW_EVERY * 4 {
            record(&mut follow, &format!("c{i:03}"), "installing");
        }
        record(&mut follow, "upgrading", "updating");
        let start = std::time::Instant::now();
        let mut reads: BTreeMap<String, usize> = BTreeMap::new();
        for i in 0..FOLLOW_EVERY {
            let at = start + Duration::from_secs(10) * (i as u32 + 1);
            let due = follow.due_when(false, true, std::iter::empty(), at);
            assert!(due.iter().any(|k| k == "upgrading"), "poll {i}: {due:?}");
            for key in due {
                *reads.entry(key).or_default() += 1;
            }
        }
        assert_eq!(reads["upgrading"], FOLLOW_EVERY as usize);
        assert!(
            reads
                .iter()
                .filter(|(k, _)| *k != "upgrading")
                .all(|(_, n)| *n == 1),
            "each other followed cluster once in {FOLLOW_EVERY} polls: {reads:?}"
        );
        assert_eq!(reads.len(), FOLLOW_EVERY as usize * 4 + 1);
        // Ready again: no longer read at every poll.
        record(&mut follow, "upgrading", "installing");
        assert!(!follow.updating.contains("upgrading"));
    }

    #[tokio::test]
    async fn a_hinted_read_that_failed_is_read_at_the_next_turn_without_waking_the_source() {
        let hints = PoolHints::default();
        hints.hint(None, Some("/subscriptions/s/x"));
        let mut follow = PoolFollow::new(Some(hints.clone()), Duration::ZERO, Duration::ZERO);
        // Taken for a read, which fails.
        let first = follow.due_at(true, false, std::iter::empty());
        assert_eq!(first, ["/subscriptions/s/x"]);
        let _ = tokio::time::timeout(Duration::from_millis(10), hints.woken(true)).await;
        hints.retry(true, &first[0]);
        assert_eq!(hints.waiting(true), 1);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), hints.woken(true))
                .await
                .is_err(),
            "a retry waits for the next poll: a failing server is not asked in a loop"
        );
        assert_eq!(
            follow.due_at(true, false, std::iter::empty()),
            ["/subscriptions/s/x"],
            "read again at the next turn"
        );
        assert_eq!(hints.waiting(true), 0);
    }

    #[tokio::test]
    async fn a_burst_of_hints_is_read_in_batches_first_hinted_first() {
        let hints = PoolHints::default();
        let total = MAX_HINTED_PER_BATCH + 10;
        // Hinted in an order their names do not sort in.
        let ids: Vec<String> = (0..total).rev().map(|i| format!("c{i:04}")).collect();
        for id in &ids {
            hints.hint(Some(id), None);
        }
        hints.hint(Some(&ids[0]), None);
        assert_eq!(hints.waiting(false), total, "a hint already waiting is one");
        let mut follow = PoolFollow::new(Some(hints.clone()), Duration::ZERO, Duration::ZERO);
        let first = follow.due_at(false, false, std::iter::empty());
        assert_eq!(first.len(), MAX_HINTED_PER_BATCH);
        let mut expected: Vec<String> = ids[..MAX_HINTED_PER_BATCH].to_vec();
        expected.sort();
        assert_eq!(first, expected, "the oldest hints first");
        assert_eq!(hints.waiting(false), 10);
        // What is left wakes the source again at once.
        tokio::time::timeout(Duration::from_secs(1), hints.woken(false))
            .await
            .expect("the rest of a burst wakes the source");
        let rest = follow.due_at(false, false, std::iter::empty());
        assert_eq!(rest.len(), 10);
        assert_eq!(hints.waiting(false), 0);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), hints.woken(false))
                .await
                .is_err(),
            "nothing left, nothing wakes it"
        );
    }

    #[test]
    fn pools_parse_as_the_reference_shapes_name_them() {
        let mut unknown = Vec::new();
        let arm: ArmNodePool = serde_json::from_str(
            r#"{"id":"/subscriptions/s/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters/c/nodePools/np1",
                "systemData":{"createdAt":"2026-11-27T10:00:00Z"},"properties":{"provisioningState":"Provisioning"}}"#,
        )
        .unwrap();
        let (name, view) = parse_arm_pool(&arm, &mut unknown).unwrap();
        assert_eq!((name.as_str(), view.phase), ("np1", Phase::Progressing));
        assert!(view.created_at.is_some());
        let cs: CsNodePool = serde_json::from_str(
            r#"{"kind":"NodePool","id":"np1","status":{"message":"quota exceeded","state":{"value":"error","last_updated_timestamp":"2026-11-27T10:05:00Z"}}}"#,
        )
        .unwrap();
        let (name, view) = parse_cs_pool(&cs, &mut unknown).unwrap();
        assert_eq!((name.as_str(), view.phase), ("np1", Phase::Failed));
        assert_eq!(view.error.unwrap().message, "quota exceeded");
        let odd: CsNodePool =
            serde_json::from_str(r#"{"id":"np2","status":{"state":{"value":"hatching"}}}"#)
                .unwrap();
        assert_eq!(
            parse_cs_pool(&odd, &mut unknown).unwrap().1.phase,
            Phase::Unknown
        );
        assert_eq!(unknown.len(), 1);
    }
}
