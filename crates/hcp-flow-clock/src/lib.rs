//! "Now", for everything that is not the pure model: the sources' observation
//! times, the store's model clock, the simulated world. Real time in `serve`
//! and the demo; a hand-driven one in tests, so a test that sets the clock
//! knows exactly what every part sees (docs/design/03-timeline-model.md §3.4).

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use parking_lot::Mutex;

/// Where a part reads "now". Everything the world serves is a pure function
/// of this time, and sources stamp what they read with it.
#[derive(Clone, Debug, Default)]
pub enum Clock {
    #[default]
    Real,
    Manual(ManualClock),
}

/// A clock that only moves when told to. Clones share the same time.
#[derive(Clone, Debug)]
pub struct ManualClock(Arc<Mutex<Timestamp>>);

impl ManualClock {
    pub fn new(t0: Timestamp) -> ManualClock {
        ManualClock(Arc::new(Mutex::new(t0)))
    }

    pub fn now(&self) -> Timestamp {
        *self.0.lock()
    }

    pub fn set(&self, t: Timestamp) {
        *self.0.lock() = t;
    }

    pub fn advance(&self, d: Duration) {
        let mut now = self.0.lock();
        let step = SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX);
        *now = now.saturating_add(step).unwrap_or(Timestamp::MAX);
    }
}

impl Clock {
    /// A manual clock starting at `t0`.
    pub fn manual(t0: Timestamp) -> Clock {
        Clock::Manual(ManualClock::new(t0))
    }

    pub fn now(&self) -> Timestamp {
        match self {
            Clock::Real => Timestamp::now(),
            Clock::Manual(m) => m.now(),
        }
    }

    /// Moves a manual clock forward. Real time cannot be moved: this is a
    /// no-op on [`Clock::Real`] (logged, since it is almost surely a test bug).
    pub fn advance(&self, d: Duration) {
        match self {
            Clock::Real => tracing::warn!("Clock::advance called on the real clock; ignored"),
            Clock::Manual(m) => m.advance(d),
        }
    }

    /// Sets a manual clock. No-op (logged) on the real clock.
    pub fn set(&self, t: Timestamp) {
        match self {
            Clock::Real => tracing::warn!("Clock::set called on the real clock; ignored"),
            Clock::Manual(m) => m.set(t),
        }
    }
}
