//! A cluster's ended operations, kept for "what happened to this cluster
//! this week" (docs/design/15b-operations.md §15.12): each operation that succeeded or
//! failed, with its hops' times, bounded by a retention and a count, and
//! kept across restarts in the state store.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::hop::{Hop, Outcome, SloOutcome};
use super::operation::OperationKind;

/// ARM keeps operation records for seven days; so does the history.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
/// A week of a busy cluster's operations (a creation, a few pools, an
/// upgrade and its pools') fits many times over.
pub const DEFAULT_MAX_PER_CLUSTER: usize = 20;

/// How much history each cluster keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistoryLimits {
    pub retention: Duration,
    pub max_per_cluster: usize,
}

impl Default for HistoryLimits {
    fn default() -> Self {
        HistoryLimits {
            retention: DEFAULT_RETENTION,
            max_per_cluster: DEFAULT_MAX_PER_CLUSTER,
        }
    }
}

/// One ended operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EndedOperation {
    pub operation: OperationKind,
    /// What its key names after the kind: the pool, the target version, or
    /// both (docs/design/15-operations.md §15.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Box<str>>,
    pub started_at: Timestamp,
    pub ended_at: Timestamp,
    pub outcome: Outcome,
    /// Its one SLO verdict, when this instance gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloOutcome>,
    /// Each hop it passed: from the hop's start to its end there (none when
    /// the operation ended before the hop did).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hops: Vec<EndedHop>,
}

/// One hop of an ended operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndedHop {
    pub hop: Hop,
    pub started_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
}

/// A cluster's history as it is held in memory: its ended operations
/// encoded one after the other in one allocation, times to the
/// millisecond as varints relative to the operation's start. An ended
/// operation is read far less often than it is held (a cluster page, the
/// JSON, `diagnose`), and ten thousand clusters with a busy week each hold
/// some eighty thousand of them: as structs (80 bytes, and a `Vec` of
/// 48-byte hops each) that was 25 MiB; encoded it is some 50 bytes an
/// operation (docs/design/15b-operations.md §15.12). Shared, not copied, between the
/// timeline and the state store's memory of the cluster; serialised as
/// the list of its entries, so the state file's format is that list.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct History(Option<Arc<[u8]>>);

impl Serialize for History {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.entries())
    }
}

impl<'de> Deserialize<'de> for History {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let entries = Vec::<EndedOperation>::deserialize(deserializer)?;
        Ok(History::encode(&entries))
    }
}

impl FromIterator<EndedOperation> for History {
    fn from_iter<I: IntoIterator<Item = EndedOperation>>(iter: I) -> Self {
        History::encode(&iter.into_iter().collect::<Vec<_>>())
    }
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.entries()).finish()
    }
}

impl History {
    /// The history of `entries`, oldest first as given.
    pub fn encode(entries: &[EndedOperation]) -> History {
        if entries.is_empty() {
            return History(None);
        }
        let mut out = Vec::with_capacity(entries.len() * 48);
        for e in entries {
            encode_one(&mut out, e);
        }
        History(Some(Arc::from(out)))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// Its ended operations, oldest first.
    pub fn entries(&self) -> Vec<EndedOperation> {
        let mut reader = Reader(self.0.as_deref().unwrap_or_default());
        let mut entries = Vec::new();
        while !reader.0.is_empty() {
            match decode_one(&mut reader) {
                Some(e) => entries.push(e),
                // Only this module writes the bytes; a short read would be
                // its own defect, and what was read so far is still right.
                None => break,
            }
        }
        entries
    }

    /// The bytes it holds.
    pub fn encoded_len(&self) -> usize {
        self.0.as_deref().map_or(0, <[u8]>::len)
    }

    /// The history `limits` keep at `now`; itself, shared, when they keep
    /// all of it.
    pub fn pruned(&self, limits: HistoryLimits, now: Timestamp) -> History {
        let mut entries = self.entries();
        let before = entries.len();
        prune(&mut entries, limits, now);
        if entries.len() == before {
            self.clone()
        } else {
            History::encode(&entries)
        }
    }
}

fn millis(at: Timestamp) -> i64 {
    at.as_millisecond()
}

fn at_millis(ms: i64) -> Option<Timestamp> {
    Timestamp::from_millisecond(ms).ok()
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_signed(out: &mut Vec<u8>, v: i64) {
    put_varint(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// `None` as 0, a value as its zigzag code plus one.
fn put_optional(out: &mut Vec<u8>, v: Option<i64>) {
    match v {
        None => put_varint(out, 0),
        Some(v) => put_varint(out, (((v << 1) ^ (v >> 63)) as u64).saturating_add(1)),
    }
}

fn index_of<T: PartialEq + Copy>(all: &[T], v: T) -> u8 {
    all.iter().position(|x| *x == v).unwrap_or(0) as u8
}

const OUTCOMES: [Outcome; 2] = [Outcome::Succeeded, Outcome::Failed];
const SLOS: [Option<SloOutcome>; 4] = [
    None,
    Some(SloOutcome::Good),
    Some(SloOutcome::Late),
    Some(SloOutcome::Failed),
];

fn encode_one(out: &mut Vec<u8>, e: &EndedOperation) {
    out.push(index_of(&OperationKind::ALL, e.operation));
    out.push(index_of(&OUTCOMES, e.outcome) | (index_of(&SLOS, e.slo) << 2));
    let start = millis(e.started_at);
    put_signed(out, start);
    put_signed(out, millis(e.ended_at) - start);
    match &e.subject {
        None => put_varint(out, 0),
        Some(s) => {
            put_varint(out, s.len() as u64 + 1);
            out.extend_from_slice(s.as_bytes());
        }
    }
    put_varint(out, e.hops.len() as u64);
    for hop in &e.hops {
        out.push(index_of(&Hop::ALL, hop.hop));
        let hop_start = millis(hop.started_at);
        put_signed(out, hop_start - start);
        put_optional(out, hop.ended_at.map(|end| millis(end) - hop_start));
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (first, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*first)
    }

    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn signed(&mut self) -> Option<i64> {
        let v = self.varint()?;
        Some(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    fn optional(&mut self) -> Option<Option<i64>> {
        match self.varint()? {
            0 => Some(None),
            v => {
                let v = v - 1;
                Some(Some(((v >> 1) as i64) ^ -((v & 1) as i64)))
            }
        }
    }

    fn bytes(&mut self, n: usize) -> Option<&[u8]> {
        if n > self.0.len() {
            return None;
        }
        let (taken, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(taken)
    }
}

fn decode_one(r: &mut Reader<'_>) -> Option<EndedOperation> {
    let operation = *OperationKind::ALL.get(usize::from(r.byte()?))?;
    let packed = r.byte()?;
    let outcome = *OUTCOMES.get(usize::from(packed & 0b11))?;
    let slo = *SLOS.get(usize::from(packed >> 2))?;
    let start = r.signed()?;
    let ended_at = at_millis(start + r.signed()?)?;
    let subject = match r.varint()? {
        0 => None,
        n => {
            let bytes = r.bytes(usize::try_from(n - 1).ok()?)?;
            Some(std::str::from_utf8(bytes).ok()?.into())
        }
    };
    let count = r.varint()?;
    let mut hops = Vec::with_capacity(usize::try_from(count).ok()?.min(Hop::ALL.len()));
    for _ in 0..count {
        let hop = *Hop::ALL.get(usize::from(r.byte()?))?;
        let hop_start = start + r.signed()?;
        let ended_at = match r.optional()? {
            None => None,
            Some(d) => Some(at_millis(hop_start + d)?),
        };
        hops.push(EndedHop {
            hop,
            started_at: at_millis(hop_start)?,
            ended_at,
        });
    }
    Some(EndedOperation {
        operation,
        subject,
        started_at: at_millis(start)?,
        ended_at,
        outcome,
        slo,
        hops,
    })
}

/// Add `ended` to `history`, oldest first, and drop what the limits no
/// longer keep at `now`: entries that ended before the retention, then the
/// oldest past the count.
pub fn keep(history: &mut History, ended: EndedOperation, limits: HistoryLimits, now: Timestamp) {
    if limits.max_per_cluster == 0 {
        return;
    }
    let mut entries = history.entries();
    entries.push(ended);
    prune(&mut entries, limits, now);
    *history = History::encode(&entries);
}

/// Drop what `limits` no longer keep at `now`.
pub fn prune(entries: &mut Vec<EndedOperation>, limits: HistoryLimits, now: Timestamp) {
    let cutoff = jiff::SignedDuration::try_from(limits.retention)
        .ok()
        .and_then(|r| now.checked_sub(r).ok());
    if let Some(cutoff) = cutoff {
        entries.retain(|e| e.ended_at >= cutoff);
    }
    entries.sort_by_key(|e| e.ended_at);
    let excess = entries.len().saturating_sub(limits.max_per_cluster);
    entries.drain(..excess);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests: a panic is the failure report

    use super::*;

    fn t(hours: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + hours * 3600).unwrap()
    }

    fn ended(at: Timestamp) -> EndedOperation {
        EndedOperation {
            operation: OperationKind::NodePoolCreate,
            subject: Some("np-1".into()),
            started_at: at,
            ended_at: at,
            outcome: Outcome::Succeeded,
            slo: Some(SloOutcome::Good),
            hops: Vec::new(),
        }
    }

    #[test]
    fn it_keeps_a_week_and_at_most_the_count_oldest_first() {
        let limits = HistoryLimits {
            retention: Duration::from_secs(7 * 24 * 3600),
            max_per_cluster: 3,
        };
        let mut history = History::default();
        for h in [0, 10, 20] {
            keep(&mut history, ended(t(h)), limits, t(h));
        }
        assert_eq!(history.entries().len(), 3);
        // A fourth: the oldest goes.
        keep(&mut history, ended(t(30)), limits, t(30));
        let at: Vec<Timestamp> = history.entries().iter().map(|e| e.ended_at).collect();
        assert_eq!(at, vec![t(10), t(20), t(30)]);
        // Eight days later: only what ended within the week stays.
        keep(&mut history, ended(t(30 + 24 * 7)), limits, t(30 + 24 * 7));
        let at: Vec<Timestamp> = history.entries().iter().map(|e| e.ended_at).collect();
        assert_eq!(at, vec![t(30), t(30 + 24 * 7)]);
    }

    #[test]
    fn every_kind_outcome_verdict_and_hop_reads_back_as_it_was_kept() {
        let mut entries = Vec::new();
        let mut at = t(0);
        for (i, operation) in OperationKind::ALL.into_iter().enumerate() {
            for outcome in OUTCOMES {
                for slo in SLOS {
                    let started_at = at;
                    let hops = Hop::ALL
                        .iter()
                        .enumerate()
                        .map(|(h, hop)| EndedHop {
                            hop: *hop,
                            // A hop may have begun before the operation (a
                            // pool's RP update read late), and may not end.
                            started_at: started_at
                                .checked_add(jiff::SignedDuration::from_millis(
                                    (h as i64 - 2) * 61_001,
                                ))
                                .unwrap(),
                            ended_at: (h % 3 != 0).then(|| {
                                started_at
                                    .checked_add(jiff::SignedDuration::from_millis(
                                        h as i64 * 90_007,
                                    ))
                                    .unwrap()
                            }),
                        })
                        .collect();
                    entries.push(EndedOperation {
                        operation,
                        subject: (i % 2 == 1).then(|| format!("np-{i} to 4.20.{i}").into()),
                        started_at,
                        ended_at: started_at
                            .checked_add(jiff::SignedDuration::from_millis(4_321_987))
                            .unwrap(),
                        outcome,
                        slo,
                        hops,
                    });
                    at = at.checked_add(jiff::SignedDuration::from_hours(1)).unwrap();
                }
            }
        }
        let history = History::encode(&entries);
        assert_eq!(history.entries(), entries);
        // The point of the encoding: far below the structs it replaces.
        let as_structs: usize = entries
            .iter()
            .map(|e| {
                std::mem::size_of::<EndedOperation>()
                    + e.hops.len() * std::mem::size_of::<EndedHop>()
            })
            .sum();
        assert!(
            history.encoded_len() * 3 < as_structs,
            "{} bytes encoded against {as_structs} as structs",
            history.encoded_len()
        );
    }

    #[test]
    fn an_entry_kept_reads_back_through_keep() {
        let mut history = History::default();
        keep(&mut history, ended(t(5)), HistoryLimits::default(), t(5));
        assert_eq!(history.entries(), vec![ended(t(5))]);
    }

    #[test]
    fn a_count_of_zero_keeps_nothing() {
        let limits = HistoryLimits {
            max_per_cluster: 0,
            ..HistoryLimits::default()
        };
        let mut history = History::default();
        keep(&mut history, ended(t(0)), limits, t(0));
        assert!(history.is_empty());
    }
}
