//! Quick run of the exposition benchmark without the CLI:
//! `cargo run --release --example bench_exposition -- 10000`.
fn main() {
    let clusters = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let f = hcp_flow::bench::exposition(clusters, 50);
    println!(
        "clusters={} series={} bytes={} ({:.1} MiB) fill={:.0}ms om p50={:.1}ms p99={:.1}ms text p50={:.1}ms p99={:.1}ms chunked p50={:.1}ms p99={:.1}ms memcpy p50={:.1}ms rss before={:?} after={:?} MiB",
        f.clusters,
        f.series,
        f.bytes,
        f.bytes as f64 / 1048576.0,
        hcp_flow::bench::ms(f.fill),
        hcp_flow::bench::ms(f.openmetrics.p50),
        hcp_flow::bench::ms(f.openmetrics.p99),
        hcp_flow::bench::ms(f.text.p50),
        hcp_flow::bench::ms(f.text.p99),
        hcp_flow::bench::ms(f.chunked.p50),
        hcp_flow::bench::ms(f.chunked.p99),
        hcp_flow::bench::ms(f.memcpy.p50),
        f.rss_before.map(hcp_flow::bench::mib),
        f.rss_after.map(hcp_flow::bench::mib),
    );
}
