//! What the benches share of their figures: latency distributions, memory
//! and the counting of a scrape's samples.

use std::time::Duration;

/// Latency distribution of repeated measurements.
#[derive(Clone, Debug)]
pub struct Latency {
    pub samples: usize,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl Latency {
    pub fn from_samples(mut samples: Vec<Duration>) -> Latency {
        samples.sort_unstable();
        let at = |q: f64| {
            let index = ((samples.len() as f64 - 1.0) * q).round() as usize;
            samples.get(index).copied().unwrap_or_default()
        };
        Latency {
            samples: samples.len(),
            p50: at(0.50),
            p99: at(0.99),
            max: samples.last().copied().unwrap_or_default(),
        }
    }
}

/// Resident set size of this process in bytes (Linux), if readable.
pub fn resident_memory() -> Option<u64> {
    resident_memory_of("self")
}

/// Resident set size of a process (`"self"` or a pid) in bytes.
pub fn resident_memory_of(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Samples in an exposition: its lines that are neither comments nor empty.
pub fn series_in(body: &str) -> usize {
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .count()
}
