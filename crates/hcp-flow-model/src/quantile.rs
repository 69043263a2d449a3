//! The fleet's p95 per hop, from the same buckets and the same durations as
//! `hcpflow_hop_duration_seconds{outcome="succeeded"}`, estimated the way
//! PromQL's `histogram_quantile` does, so "at risk" in the JSON, the UI and
//! `diagnose` agrees with the `hcpflow:hop_duration_seconds:p95` record the
//! alert reads (docs/design/03-timeline-model.md §3.9).

use super::hop::Hop;

/// Fewer durations than this give no p95: with a handful of creations the
/// "fleet's p95" is one cluster's luck, and "at risk" would be noise. The
/// recording rule holds the same floor.
pub const MIN_P95_SAMPLES: u64 = 20;

/// The p95 per hop, or None where the fleet has too few durations.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HopP95([Option<f64>; Hop::ALL.len()]);

impl HopP95 {
    pub fn get(&self, hop: Hop) -> Option<f64> {
        self.0[hop.index()]
    }

    pub fn set(&mut self, hop: Hop, seconds: Option<f64>) {
        self.0[hop.index()] = seconds;
    }
}

/// Cumulative bucket counts of hop durations, per hop.
#[derive(Clone, Debug)]
pub struct HopDurations {
    bounds: Vec<f64>,
    /// Per hop, one count per bound plus the +Inf bucket (not cumulative).
    counts: Vec<Vec<u64>>,
}

impl HopDurations {
    /// `bounds`: the histogram's upper bounds, ascending.
    pub fn new(bounds: &[f64]) -> HopDurations {
        HopDurations {
            bounds: bounds.to_vec(),
            counts: vec![vec![0; bounds.len() + 1]; Hop::ALL.len()],
        }
    }

    pub fn observe(&mut self, hop: Hop, seconds: f64) {
        let bucket = self
            .bounds
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(self.bounds.len());
        self.counts[hop.index()][bucket] += 1;
    }

    /// `histogram_quantile(q, …)` of one hop: linear interpolation inside
    /// the bucket that holds the rank, the lowest bucket starting at 0, and
    /// the highest finite bound when the rank falls in +Inf.
    pub fn quantile(&self, hop: Hop, q: f64) -> Option<f64> {
        let counts = &self.counts[hop.index()];
        let total: u64 = counts.iter().sum();
        if total < MIN_P95_SAMPLES || self.bounds.is_empty() {
            return None;
        }
        let rank = q * total as f64;
        let mut below = 0u64;
        for (i, &count) in counts.iter().enumerate() {
            let through = below + count;
            if through as f64 >= rank && count > 0 {
                let Some(&upper) = self.bounds.get(i) else {
                    return self.bounds.last().copied();
                };
                let lower = if i == 0 { 0.0 } else { self.bounds[i - 1] };
                let into = (rank - below as f64) / count as f64;
                return Some(lower + (upper - lower) * into);
            }
            below = through;
        }
        self.bounds.last().copied()
    }

    pub fn p95(&self) -> HopP95 {
        let mut out = HopP95::default();
        for hop in Hop::ALL {
            out.set(hop, self.quantile(hop, 0.95));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_few_durations_give_no_p95() {
        let mut d = HopDurations::new(&[10.0, 20.0]);
        for _ in 0..MIN_P95_SAMPLES - 1 {
            d.observe(Hop::HostedCluster, 5.0);
        }
        assert_eq!(d.quantile(Hop::HostedCluster, 0.95), None);
        d.observe(Hop::HostedCluster, 5.0);
        assert!(d.quantile(Hop::HostedCluster, 0.95).is_some());
        assert_eq!(d.quantile(Hop::NodePool, 0.95), None);
    }

    // Worked like PromQL: 100 durations, 90 in (0,60], 10 in (60,120]:
    // rank 95 is the 5th of 10 in the second bucket, so 60 + 60 × 0.5 = 90.
    #[test]
    fn interpolates_inside_the_bucket_like_histogram_quantile() {
        let mut d = HopDurations::new(&[60.0, 120.0, 300.0]);
        for _ in 0..90 {
            d.observe(Hop::MaestroBundle, 30.0);
        }
        for _ in 0..10 {
            d.observe(Hop::MaestroBundle, 100.0);
        }
        assert_eq!(d.quantile(Hop::MaestroBundle, 0.95), Some(90.0));
        assert_eq!(d.p95().get(Hop::MaestroBundle), Some(90.0));
        // A bound is inclusive (le): 60 s lands in the first bucket.
        let mut e = HopDurations::new(&[60.0, 120.0]);
        for _ in 0..20 {
            e.observe(Hop::NodePool, 60.0);
        }
        assert_eq!(e.quantile(Hop::NodePool, 0.95), Some(57.0));
    }

    #[test]
    fn a_rank_in_the_infinite_bucket_is_the_highest_bound() {
        let mut d = HopDurations::new(&[60.0, 120.0]);
        for _ in 0..20 {
            d.observe(Hop::NodePool, 5000.0);
        }
        assert_eq!(d.quantile(Hop::NodePool, 0.95), Some(120.0));
    }
}
