//! The benchmark's exposition mode at a small scale, so it cannot rot
//! between the runs that produce docs/performance.md. It checks what the
//! figures must satisfy whatever the machine, never how fast.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

#[test]
fn exposition_figures_are_consistent_at_small_scale() {
    let figures = hcp_flow::bench::exposition(200, 3);
    assert_eq!(figures.clusters, 200);
    // At least one hop series per cluster.
    assert!(figures.series > 200, "{}", figures.series);
    // gzip shrinks the repetitive text many times over.
    assert!(figures.gzip_bytes > 0);
    assert!(
        figures.gzip_bytes * 5 < figures.bytes,
        "{} of {}",
        figures.gzip_bytes,
        figures.bytes
    );
    assert_eq!(figures.gzip.samples, 3);
    assert_eq!(figures.memcpy.samples, 3);
}
