//! Headroom for timing-sensitive tests. Every test of this crate runs in one
//! process, several at a time (`RUST_TEST_THREADS` in `.cargo/config.toml`):
//! most of them wait on a world's sped-up clock and use little CPU. What
//! does use it — a simulated world, an exporter, a child process — holds a
//! [`share`] of the machine, and a test that measures how fast something
//! shows up under load (an alert within its budget plus seconds) holds a
//! [`heavy`] one, so the machine's two cores are never promised twice over.
//! A share is granted as soon as it fits: the longest tests (the end-to-end
//! bench, the fidelity runs) start at once instead of queueing behind each
//! other, and the whole run takes as long as its longest chain.

use std::cell::Cell;

use parking_lot::{Condvar, Mutex};

/// What the machine holds at once, in units of "one world and its exporter"
/// (measured: with six, a whole run keeps the two cores about two-thirds
/// busy, docs/development.md).
const CAPACITY: u32 = 6;
/// A timing-sensitive test: three of them at once at most, or two beside
/// two worlds.
const HEAVY: u32 = 2;
/// A bench child process, which scrapes and polls as fast as it can, each
/// side pinned to a core: beside it only one world fits, never a
/// timing-sensitive test. A bench beside the alert-fidelity run once held
/// the exporter's view of a deleted node pool past its 20-second budget
/// (60× speed) and raised a false alarm.
const HOG: u32 = CAPACITY - 1;

struct Ledger {
    used: u32,
}

static LEDGER: Mutex<Ledger> = Mutex::new(Ledger { used: 0 });
static CHANGED: Condvar = Condvar::new();

thread_local! {
    /// Units this thread's test holds: its later shares (the exporter over
    /// its world) are covered by the first.
    static HELD: Cell<u32> = const { Cell::new(0) };
}

/// Units of the machine, given back when dropped.
pub struct Share {
    units: u32,
}

impl Drop for Share {
    fn drop(&mut self) {
        if self.units == 0 {
            return;
        }
        HELD.with(|held| held.set(held.get().saturating_sub(self.units)));
        LEDGER.lock().used -= self.units;
        CHANGED.notify_all();
    }
}

fn take(units: u32) -> Share {
    if HELD.with(Cell::get) > 0 {
        return Share { units: 0 };
    }
    let mut ledger = LEDGER.lock();
    while ledger.used + units > CAPACITY {
        CHANGED.wait(&mut ledger);
    }
    ledger.used += units;
    drop(ledger);
    HELD.with(|held| held.set(units));
    Share { units }
}

/// One unit: a simulated world with its exporter, or a child exporter.
pub fn share() -> Share {
    take(1)
}

/// Half the machine, for a test whose assertions are latencies: taken
/// before its world, which then runs inside it.
pub fn heavy() -> Share {
    take(HEAVY)
}

/// Nearly the whole machine, for a test that runs a bench: it runs beside
/// one light test at most.
pub fn hog() -> Share {
    take(HOG)
}
