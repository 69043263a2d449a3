//! The world's clock: real time for the demo, a hand-driven one for tests.

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use parking_lot::Mutex;

/// Where the world reads "now". Everything the world serves is a pure function
/// of this time, so a test that sets the clock knows exactly what is on the wire.
#[derive(Clone, Debug, Default)]
pub enum SimClock {
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

impl SimClock {
    /// A manual clock starting at `t0`.
    pub fn manual(t0: Timestamp) -> SimClock {
        SimClock::Manual(ManualClock::new(t0))
    }

    pub fn now(&self) -> Timestamp {
        match self {
            SimClock::Real => Timestamp::now(),
            SimClock::Manual(m) => m.now(),
        }
    }

    /// Moves a manual clock forward. Real time cannot be moved: this is a
    /// no-op on [`SimClock::Real`] (logged, since it is almost surely a test bug).
    pub fn advance(&self, d: Duration) {
        match self {
            SimClock::Real => tracing::warn!("SimClock::advance called on the real clock; ignored"),
            SimClock::Manual(m) => m.advance(d),
        }
    }

    /// Sets a manual clock. No-op (logged) on the real clock.
    pub fn set(&self, t: Timestamp) {
        match self {
            SimClock::Real => tracing::warn!("SimClock::set called on the real clock; ignored"),
            SimClock::Manual(m) => m.set(t),
        }
    }
}
