//! The poll schedule of the HTTP sources (docs/design/09-reading-the-upstreams.md §9.2): which poll
//! is due, how long to wait after one, and the backoff after a failure.
//! A source says which polls it has and how to run one; the cadence is
//! kept here once, so the sources cannot drift apart in it.
//!
//! Two shapes share it. Clusters Service and Maestro poll one collection
//! with a [`Schedule`] driven by [`run`]. The RP frontend polls several
//! targets, each on its own [`TargetSchedule`] (docs/design/09-reading-the-upstreams.md §9.3).

use std::future::Future;
use std::time::{Duration, Instant};

use crate::config::HttpSourceConfig;
use crate::sources::http::{Backoff, after};

/// Which list a poll reads. [`as_str`](Self::as_str) is the poll span's
/// `poll_kind` attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollKind {
    /// Everything, everything sent: the first sync, and every
    /// `full_relist_interval` the only way deletions are seen.
    Full,
    /// What is in flight (Clusters Service), every `fast_poll_interval`.
    Fast,
    /// What has settled (Clusters Service), every `slow_poll_interval`.
    Slow,
    /// What changed since the last poll (Maestro), every
    /// `fast_poll_interval`.
    Incremental,
}

impl PollKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PollKind::Full => "full",
            PollKind::Fast => "fast",
            PollKind::Slow => "slow",
            PollKind::Incremental => "incremental",
        }
    }
}

/// The first retry after a failure; the backoff doubles from there up to
/// the slow interval, so a source that is down is asked no more often than
/// a healthy one at rest.
const BACKOFF_BASE: Duration = Duration::from_secs(1);

/// What a source's polls are, set once by the source from its config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cadence {
    /// The poll between full relists.
    pub frequent: PollKind,
    pub fast: Duration,
    /// The slow poll's interval, for a source that has a slow poll.
    pub slow: Option<Duration>,
    pub full: Duration,
    /// The shortest wait before a frequent poll.
    pub min_gap: Duration,
    /// The longest wait after a failure.
    pub backoff_cap: Duration,
}

impl Cadence {
    /// Full relists and `frequent` polls at the configured intervals, no
    /// slow poll, and no shortest wait.
    pub fn new(http: &HttpSourceConfig, frequent: PollKind) -> Cadence {
        Cadence {
            frequent,
            fast: http.fast_poll_interval,
            slow: None,
            full: http.full_relist_interval,
            min_gap: Duration::ZERO,
            backoff_cap: http.slow_poll_interval,
        }
    }

    /// Slow polls too, at the configured slow interval.
    pub fn with_slow(self, http: &HttpSourceConfig) -> Cadence {
        Cadence {
            slow: Some(http.slow_poll_interval),
            ..self
        }
    }

    /// Never wait less than `gap` before a frequent poll.
    pub fn with_min_gap(self, gap: Duration) -> Cadence {
        Cadence {
            min_gap: gap,
            ..self
        }
    }

    fn backoff(&self) -> Backoff {
        Backoff::new(BACKOFF_BASE, self.backoff_cap)
    }
}

/// A source [`run`] polls.
pub trait Polled: Send {
    /// Whether a full relist has completed. Until then every poll is full:
    /// nothing less tells the model what exists.
    fn synced(&self) -> bool;

    /// When the source wants its next frequent poll, for a source that
    /// times it from its own polls; `None` is a fast interval after the
    /// last poll ended.
    fn frequent_due(&self) -> Option<Instant> {
        None
    }

    /// Run one poll; says whether it succeeded.
    fn poll(&mut self, kind: PollKind) -> impl Future<Output = bool> + Send;

    /// Resolves when the source has something to read before its next poll
    /// is due (a cluster's node pools moved, docs/design/15b-operations.md §15.11); never,
    /// by default.
    fn woken(&self) -> impl Future<Output = ()> + Send + 'static {
        std::future::pending()
    }

    /// What the source reads when [`Polled::woken`] resolved.
    fn between_polls(&mut self) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// When each poll of one collection is next due.
#[derive(Debug)]
pub struct Schedule {
    cadence: Cadence,
    backoff: Backoff,
    next_full: Instant,
    next_slow: Instant,
}

impl Schedule {
    pub fn new(cadence: Cadence, start: Instant) -> Schedule {
        Schedule {
            backoff: cadence.backoff(),
            cadence,
            next_full: start,
            next_slow: start,
        }
    }

    /// The poll due at `now`: full until synced and when a relist is due,
    /// then slow when one is due, else the frequent poll. A failed poll
    /// moves no deadline, so what failed is what is tried again.
    pub fn due(&self, synced: bool, now: Instant) -> PollKind {
        if !synced || now >= self.next_full {
            PollKind::Full
        } else if self.cadence.slow.is_some() && now >= self.next_slow {
            PollKind::Slow
        } else {
            self.cadence.frequent
        }
    }

    /// A poll of `kind` succeeded and ended at `done`: how long to wait for
    /// the next one. A full relist also counts as a slow poll, and each
    /// interval runs from the end of the poll that reset it.
    pub fn succeeded(
        &mut self,
        kind: PollKind,
        done: Instant,
        frequent_due: Option<Instant>,
    ) -> Duration {
        self.backoff.reset();
        let cadence = &self.cadence;
        if kind == PollKind::Full {
            self.next_full = after(done, cadence.full);
        }
        if let Some(slow) = cadence.slow
            && matches!(kind, PollKind::Full | PollKind::Slow)
        {
            self.next_slow = after(done, slow);
        }
        let frequent = frequent_due
            .unwrap_or_else(|| after(done, cadence.fast))
            .saturating_duration_since(done)
            .max(cadence.min_gap);
        let mut wait = frequent.min(self.next_full.saturating_duration_since(done));
        if cadence.slow.is_some() {
            wait = wait.min(self.next_slow.saturating_duration_since(done));
        }
        wait
    }

    /// A poll failed: how long to wait before trying again.
    pub fn failed(&mut self) -> Duration {
        self.backoff.next_delay()
    }
}

/// Poll `source` forever on `cadence`. Abort the task to stop.
pub async fn run(source: &mut impl Polled, cadence: Cadence) {
    let mut schedule = Schedule::new(cadence, Instant::now());
    loop {
        let kind = schedule.due(source.synced(), Instant::now());
        let wait = if source.poll(kind).await {
            schedule.succeeded(kind, Instant::now(), source.frequent_due())
        } else {
            schedule.failed()
        };
        let until = tokio::time::Instant::now() + wait;
        loop {
            let woke = tokio::select! {
                () = tokio::time::sleep_until(until) => false,
                () = source.woken() => true,
            };
            if !woke {
                break;
            }
            source.between_polls().await;
        }
    }
}

/// One target's schedule, for a source whose targets each keep their own
/// cadence: fast while one of the target's clusters is in flight, else
/// slow, never longer than a full relist; a failed target backs off alone.
#[derive(Debug)]
pub struct TargetSchedule {
    next_due: Instant,
    backoff: Backoff,
    succeeded_once: bool,
    /// When this target last sent everything it showed (a relist).
    last_relist: Instant,
}

impl TargetSchedule {
    pub fn new(cadence: &Cadence, now: Instant) -> TargetSchedule {
        TargetSchedule {
            next_due: now,
            backoff: cadence.backoff(),
            succeeded_once: false,
            last_relist: now,
        }
    }

    pub fn is_due(&self, now: Instant) -> bool {
        self.next_due <= now
    }

    pub fn next_due(&self) -> Instant {
        self.next_due
    }

    pub fn succeeded_once(&self) -> bool {
        self.succeeded_once
    }

    /// Whether the target's last read failed.
    pub fn failing(&self) -> bool {
        self.backoff.failures() > 0
    }

    /// Whether a read begun at `now` sends everything it shows: the
    /// target's first success, and once per full relist interval.
    pub fn relist_due(&self, cadence: &Cadence, now: Instant) -> bool {
        !self.succeeded_once || now.duration_since(self.last_relist) >= cadence.full
    }

    /// A read begun at `began` succeeded; `relisted` when it sent
    /// everything. The next is due from now.
    pub fn succeeded(
        &mut self,
        cadence: &Cadence,
        began: Instant,
        relisted: bool,
        in_flight: bool,
    ) {
        self.succeeded_once = true;
        self.backoff.reset();
        if relisted {
            self.last_relist = began;
        }
        let interval = match cadence.slow {
            Some(slow) if !in_flight => slow,
            _ => cadence.fast,
        };
        self.next_due = after(Instant::now(), interval.min(cadence.full));
    }

    /// A read failed: the next is due after the backoff, which is returned.
    pub fn failed(&mut self) -> Duration {
        let delay = self.backoff.next_delay();
        self.next_due = after(Instant::now(), delay);
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cadence() -> Cadence {
        Cadence {
            frequent: PollKind::Fast,
            fast: Duration::from_secs(15),
            slow: Some(Duration::from_secs(120)),
            full: Duration::from_secs(600),
            min_gap: Duration::ZERO,
            backoff_cap: Duration::from_secs(120),
        }
    }

    #[test]
    fn full_until_synced_then_slow_and_fast_as_they_fall_due() {
        let start = Instant::now();
        let mut schedule = Schedule::new(cadence(), start);
        assert_eq!(schedule.due(false, start), PollKind::Full);
        // A failed first sync is tried again as a full one.
        let _ = schedule.failed();
        assert_eq!(schedule.due(false, start), PollKind::Full);
        let wait = schedule.succeeded(PollKind::Full, start, None);
        assert_eq!(wait, Duration::from_secs(15));
        assert_eq!(schedule.due(true, start + wait), PollKind::Fast);
        let at = |s| start + Duration::from_secs(s);
        assert_eq!(schedule.due(true, at(120)), PollKind::Slow);
        assert_eq!(
            schedule.succeeded(PollKind::Slow, at(120), None),
            Duration::from_secs(15)
        );
        assert_eq!(schedule.due(true, at(239)), PollKind::Fast);
        assert_eq!(schedule.due(true, at(600)), PollKind::Full);
        // A poll that overran the relist deadline waits for nothing.
        assert_eq!(
            schedule.succeeded(PollKind::Fast, at(601), None),
            Duration::ZERO
        );
    }

    #[test]
    fn a_source_that_times_its_own_polls_keeps_the_shortest_gap() {
        let start = Instant::now();
        let cadence = Cadence {
            frequent: PollKind::Incremental,
            slow: None,
            min_gap: Duration::from_secs(1),
            ..cadence()
        };
        let mut schedule = Schedule::new(cadence, start);
        let wait = schedule.succeeded(PollKind::Full, start, Some(start));
        assert_eq!(wait, Duration::from_secs(1));
        let due = start + Duration::from_secs(7);
        assert_eq!(
            schedule.succeeded(PollKind::Incremental, start, Some(due)),
            Duration::from_secs(7)
        );
        // Without a slow poll, the frequent one is all there is.
        assert_eq!(
            schedule.due(true, start + Duration::from_secs(599)),
            PollKind::Incremental
        );
    }

    #[test]
    fn a_target_polls_fast_while_in_flight_and_relists_once_per_interval() {
        let cadence = cadence();
        let start = Instant::now();
        let mut target = TargetSchedule::new(&cadence, start);
        assert!(target.is_due(start) && target.relist_due(&cadence, start));
        let _ = target.failed();
        assert!(target.failing() && !target.succeeded_once());
        target.succeeded(&cadence, start, true, true);
        assert!(!target.failing() && target.succeeded_once());
        assert!(!target.relist_due(&cadence, start + Duration::from_secs(599)));
        assert!(target.relist_due(&cadence, start + Duration::from_secs(600)));
        let fast_due = target.next_due();
        target.succeeded(&cadence, start, false, false);
        assert!(target.next_due() >= fast_due + Duration::from_secs(100));
    }
}
