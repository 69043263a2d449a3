//! A compact time for what the model stores per object (docs/performance.md):
//! views, conditions and hops hold several times each, hundreds of thousands
//! of them across a fleet. `jiff::Timestamp` is 16 bytes and its `Option` 24;
//! a [`Stamp`] is 8, and so is its `Option`.

use std::cmp::Ordering;
use std::fmt;
use std::num::NonZeroI64;

use jiff::Timestamp;
use serde::{Serialize, Serializer};

/// A point in time to the microsecond: what upstreams' times carry that
/// matters to a creation measured in seconds (a nanosecond part is dropped).
/// Microseconds since the Unix epoch with the sign bit flipped, so that the
/// stored value is never zero (jiff's range is far inside ±2^63 µs) and
/// `Option<Stamp>` needs no tag.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stamp(NonZeroI64);

impl Stamp {
    const FLIP: i64 = i64::MIN;

    /// The stamp of `at`, cut to the microsecond.
    pub fn new(at: Timestamp) -> Stamp {
        let micros = at.as_microsecond();
        // Zero only for i64::MIN µs, far outside jiff's range; the epoch
        // stands in for it rather than failing.
        Stamp(NonZeroI64::new(micros ^ Self::FLIP).unwrap_or(NonZeroI64::MIN))
    }

    fn micros(self) -> i64 {
        self.0.get() ^ Self::FLIP
    }

    /// The same time as a `jiff::Timestamp`, for arithmetic and printing.
    pub fn timestamp(self) -> Timestamp {
        Timestamp::from_microsecond(self.micros()).unwrap_or(if self.micros() < 0 {
            Timestamp::MIN
        } else {
            Timestamp::MAX
        })
    }

    pub fn as_second(self) -> i64 {
        self.timestamp().as_second()
    }

    pub fn as_millisecond(self) -> i64 {
        self.timestamp().as_millisecond()
    }
}

impl From<Timestamp> for Stamp {
    fn from(at: Timestamp) -> Stamp {
        Stamp::new(at)
    }
}

impl From<Stamp> for Timestamp {
    fn from(at: Stamp) -> Timestamp {
        at.timestamp()
    }
}

impl PartialEq<Timestamp> for Stamp {
    fn eq(&self, other: &Timestamp) -> bool {
        self.timestamp() == *other
    }
}

impl PartialOrd<Timestamp> for Stamp {
    fn partial_cmp(&self, other: &Timestamp) -> Option<Ordering> {
        self.timestamp().partial_cmp(other)
    }
}

impl Ord for Stamp {
    fn cmp(&self, other: &Stamp) -> Ordering {
        self.micros().cmp(&other.micros())
    }
}

impl PartialOrd for Stamp {
    fn partial_cmp(&self, other: &Stamp) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.timestamp(), f)
    }
}

impl fmt::Debug for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.timestamp(), f)
    }
}

impl std::str::FromStr for Stamp {
    type Err = jiff::Error;

    fn from_str(s: &str) -> Result<Stamp, jiff::Error> {
        s.parse::<Timestamp>().map(Stamp::new)
    }
}

/// Written as the timestamp it stands for (RFC 3339), as before.
impl Serialize for Stamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.timestamp().serialize(serializer)
    }
}

/// A time and where it came from. Upstream times are preferred; the
/// exporter's own observation time is only a fallback and is marked as such.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TimeMark {
    pub at: Stamp,
    /// True when upstream gave no time and this is when the exporter saw it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub observed: bool,
}

impl TimeMark {
    pub fn upstream(at: impl Into<Stamp>) -> TimeMark {
        TimeMark {
            at: at.into(),
            observed: false,
        }
    }

    pub fn observed(at: impl Into<Stamp>) -> TimeMark {
        TimeMark {
            at: at.into(),
            observed: true,
        }
    }

    /// The upstream time when there is one, else the observation time.
    pub fn from_option(upstream: Option<Stamp>, observed_at: Timestamp) -> TimeMark {
        match upstream {
            Some(at) => TimeMark::upstream(at),
            None => TimeMark::observed(observed_at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().expect("a valid timestamp")
    }

    #[test]
    fn a_stamp_and_its_option_take_eight_bytes() {
        assert_eq!(std::mem::size_of::<Stamp>(), 8);
        assert_eq!(std::mem::size_of::<Option<Stamp>>(), 8);
    }

    #[test]
    fn a_stamp_keeps_its_time_to_the_microsecond() {
        for s in [
            "2024-06-01T12:00:00Z",
            "2024-06-01T12:00:00.123456Z",
            "1970-01-01T00:00:00Z",
            "1969-12-31T23:59:59.999999Z",
            "0001-01-01T00:00:00Z",
        ] {
            assert_eq!(Stamp::new(at(s)).timestamp(), at(s), "{s}");
        }
        for edge in [Timestamp::MIN, Timestamp::MAX] {
            let back = Stamp::new(edge).timestamp();
            assert!(edge.duration_since(back).abs() < jiff::SignedDuration::from_micros(1));
        }
        assert_eq!(
            Stamp::new(at("2024-06-01T12:00:00.123456789Z")).timestamp(),
            at("2024-06-01T12:00:00.123456Z")
        );
    }

    #[test]
    fn stamps_order_as_their_times_across_the_epoch() {
        let times = [
            "0001-01-01T00:00:00Z",
            "1969-12-31T23:59:59.999999Z",
            "1970-01-01T00:00:00Z",
            "1970-01-01T00:00:00.000001Z",
            "2024-06-01T12:00:00Z",
        ];
        for pair in times.windows(2) {
            let (a, b) = (Stamp::new(at(pair[0])), Stamp::new(at(pair[1])));
            assert!(a < b, "{a} < {b}");
            assert!(a < at(pair[1]));
        }
    }

    #[test]
    fn a_stamp_is_written_as_its_timestamp() {
        let s = Stamp::new(at("2024-06-01T12:00:00.5Z"));
        assert_eq!(
            serde_json::to_string(&s).expect("serialises"),
            serde_json::to_string(&at("2024-06-01T12:00:00.5Z")).expect("serialises")
        );
        assert_eq!(s.to_string(), "2024-06-01T12:00:00.5Z");
    }
}
