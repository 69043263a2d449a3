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

/// `times` copies of `body` into fresh memory, as a scrape's bytes would be
/// copied: the machine's floor for moving that body once, measured in the
/// same run as the scrape it is compared with (docs/performance.md).
pub fn memcpy_of(body: &[u8], times: usize) -> Latency {
    Latency::from_samples(
        (0..times.max(1))
            .map(|_| {
                let start = std::time::Instant::now();
                let copy = std::hint::black_box(body).to_vec();
                let took = start.elapsed();
                std::hint::black_box(copy);
                took
            })
            .collect(),
    )
}

/// An HTTP scrape's p99 as a multiple of the copy floor's p50: the figure
/// the design bounds at 1.5 (docs/performance.md).
pub fn floor_ratio(scrape: &Latency, memcpy: &Latency) -> f64 {
    scrape.p99.as_secs_f64() / memcpy.p50.as_secs_f64().max(1e-9)
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

/// The samples of an exposition without a `cluster_id` label: the
/// fleet-level series (the duration histograms by operation, hop,
/// platform and version; the sources' own), which grow with the label
/// values, not with the fleet. The rest, divided by the clusters, is the
/// series budget per cluster (docs/metrics.md).
pub fn fleet_level_series_in(body: &str) -> usize {
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty() && !l.contains("cluster_id=\""))
        .count()
}

/// `series` less `fleet_level`, per cluster: "12.3 per cluster, 456 fleet-level".
pub fn series_budget(series: usize, fleet_level: usize, clusters: usize) -> String {
    format!(
        "{:.1} per cluster, {fleet_level} fleet-level",
        series.saturating_sub(fleet_level) as f64 / clusters.max(1) as f64
    )
}

#[cfg(test)]
mod series_tests {
    use super::*;

    #[test]
    fn fleet_level_series_are_those_without_a_cluster() {
        let body = "# HELP a x\n# TYPE a gauge\n\
            hcpflow_hop_phase{cluster_id=\"c1\",hop=\"rp_frontend\"} 1\n\
            hcpflow_hop_phase{cluster_id=\"c2\",hop=\"rp_frontend\"} 1\n\
            hcpflow_hop_duration_seconds_bucket{operation=\"create\",le=\"5\"} 3 # {trace_id=\"ab\"} 4.0\n\
            hcpflow_source_up{source=\"maestro\"} 1\n\
            # EOF\n";
        assert_eq!(series_in(body), 4);
        assert_eq!(fleet_level_series_in(body), 2);
        assert_eq!(series_budget(4, 2, 2), "1.0 per cluster, 2 fleet-level");
    }

    #[test]
    fn the_floor_ratio_is_the_scrapes_p99_over_the_copys_p50() {
        let ms = Duration::from_millis;
        let scrape = Latency::from_samples(vec![ms(20), ms(25), ms(30)]);
        let memcpy = memcpy_of(&[7u8; 4096], 5);
        assert_eq!(memcpy.samples, 5);
        let floor = Latency::from_samples(vec![ms(10), ms(20), ms(40)]);
        assert!((floor_ratio(&scrape, &floor) - 1.5).abs() < 1e-9);
        assert!(floor_ratio(&scrape, &memcpy) > 0.0);
    }
}
