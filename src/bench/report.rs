//! The markdown `hcp-flow bench` prints (or writes to `--output`).

use super::end_to_end::EndToEndFigures;
use super::figures::{Latency, mib, ms};
use super::in_process::ExpositionFigures;
use super::kube::KubeFigures;

/// Resident memory for a report, to a tenth of a MiB: the target, 150 MB,
/// is 143.05 MiB, and a side that holds 142.6 or 143.4 MiB reads "143" either way.
fn rss_text(bytes: Option<u64>) -> String {
    bytes
        .map(|b| format!("{:.1} MiB", mib(b)))
        .unwrap_or_else(|| "n/a".into())
}

/// How many times `of`'s median `time` takes.
fn p50_ratio(time: &Latency, of: &Latency) -> f64 {
    time.p50.as_secs_f64() / of.p50.as_secs_f64().max(1e-9)
}

/// The markdown report `hcp-flow bench` prints (or writes to `--output`).
pub fn report(exposition: &ExpositionFigures, end_to_end: &EndToEndFigures) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "## Exposition path ({} synthetic clusters, in process)\n\n\
         | figure | value |\n|---|---|\n\
         | series | {} |\n| bytes | {} ({:.1} MiB) |\n\
         | scrape OpenMetrics p50 / p99 / max | {:.1} / {:.1} / {:.1} ms ({} scrapes) |\n\
         | scrape text 0.0.4 p50 / p99 / max | {:.1} / {:.1} / {:.1} ms |\n\
         | scrape OpenMetrics + gzip (level 1) p50 / p99 | {:.1} / {:.1} ms, {} bytes ({:.1} MiB, {:.1}× smaller) |\n\
         | assembly as a plain HTTP body (chunk writer, chunks dropped) p50 / p99 | {:.1} / {:.1} ms |\n\
         | memcpy of the same bytes p50 (floor) | {:.2} ms; scrape p50 is {:.2}× it, the plain HTTP body's assembly {:.2}× |\n\
         | prometheus-client's generic encoder, same samples, p50 / p99 | {:.1} / {:.1} ms ({} samples); our scrape p50 is {:.2}× it |\n\
         | resident memory after fill and scrapes | {} |\n\n",
        exposition.clusters,
        exposition.series,
        exposition.bytes,
        exposition.bytes as f64 / 1048576.0,
        ms(exposition.openmetrics.p50),
        ms(exposition.openmetrics.p99),
        ms(exposition.openmetrics.max),
        exposition.openmetrics.samples,
        ms(exposition.text.p50),
        ms(exposition.text.p99),
        ms(exposition.text.max),
        ms(exposition.gzip.p50),
        ms(exposition.gzip.p99),
        exposition.gzip_bytes,
        exposition.gzip_bytes as f64 / 1048576.0,
        exposition.bytes as f64 / exposition.gzip_bytes.max(1) as f64,
        ms(exposition.chunked.p50),
        ms(exposition.chunked.p99),
        ms(exposition.memcpy.p50),
        p50_ratio(&exposition.openmetrics, &exposition.memcpy),
        p50_ratio(&exposition.chunked, &exposition.memcpy),
        ms(exposition.generic_encoder.p50),
        ms(exposition.generic_encoder.p99),
        exposition.generic_encoder_samples,
        p50_ratio(&exposition.openmetrics, &exposition.generic_encoder),
        rss_text(exposition.rss_after),
    ));
    out.push_str(&format!(
        "## End to end (`hcp-flow serve` against the simulated world, {} clusters, realistic upstream latency)\n\n\
         | figure | value |\n|---|---|\n\
         | shard | {} |\n\
         | time to /readyz (first full sync of every source) | {:.1} s |\n\
         | series | {} |\n| bytes | {} ({:.1} MiB) |\n\
         | scrape over HTTP p50 / p99 / max | {:.1} / {:.1} / {:.1} ms ({} scrapes) |\n\
         | scrape over HTTP asking for gzip p50 / p99 / max | {:.1} / {:.1} / {:.1} ms, {} bytes ({:.1} MiB) |\n\
         | exporter resident memory at /readyz / after the scrapes | {} / {} |\n\
         | CPUs | {} |\n",
        end_to_end.clusters,
        match end_to_end.shards {
            1 => format!("the whole fleet: {} clusters tracked", end_to_end.tracked),
            n => format!(
                "0 of {n} (`--shard 0 --total-shards {n}`): {} clusters tracked",
                end_to_end.tracked
            ),
        },
        end_to_end.time_to_ready.as_secs_f64(),
        end_to_end.series,
        end_to_end.bytes,
        end_to_end.bytes as f64 / 1048576.0,
        ms(end_to_end.scrape.p50),
        ms(end_to_end.scrape.p99),
        ms(end_to_end.scrape.max),
        end_to_end.scrape.samples,
        ms(end_to_end.scrape_gzip.p50),
        ms(end_to_end.scrape_gzip.p99),
        ms(end_to_end.scrape_gzip.max),
        end_to_end.gzip_bytes,
        end_to_end.gzip_bytes as f64 / 1048576.0,
        rss_text(end_to_end.rss_at_ready),
        rss_text(end_to_end.rss),
        end_to_end.pinning,
    ));
    out.push_str(&format!(
        "| Maestro bundle Available → shown in /metrics p50 / p99 / max | {:.1} / {:.1} / {:.1} s ({} bundles; fast poll every {:?}; includes up to one scrape; {} still not shown two cycles after the watch ended) |\n",
        end_to_end.maestro_to_metrics.p50.as_secs_f64(),
        end_to_end.maestro_to_metrics.p99.as_secs_f64(),
        end_to_end.maestro_to_metrics.max.as_secs_f64(),
        end_to_end.maestro_to_metrics.samples,
        end_to_end.cycle,
        end_to_end.maestro_not_shown,
    ));
    for (source, per_cycle) in &end_to_end.requests_per_cycle {
        out.push_str(&format!(
            "| upstream requests per fast-poll cycle ({:?}), `{}` | {:.1} |\n",
            end_to_end.cycle, source, per_cycle
        ));
    }
    out
}

/// The markdown `hcp-flow bench --kube` prints.
pub fn report_kube(k: &KubeFigures) -> String {
    format!(
        "## Management side (`hcp-flow serve` watching a simulated Kubernetes API server, {} HostedClusters, {} objects)\n\n\
         | figure | value |\n|---|---|\n\
         | time to /readyz (first list of every kind) | {:.1} s |\n\
         | watch event → visible in /metrics p50 / p99 / max | {:.0} / {:.0} / {:.0} ms ({} changes; includes one scrape) |\n\
         | series | {} |\n| bytes | {} ({:.1} MiB) |\n\
         | scrape over HTTP p50 / p99 / max | {:.1} / {:.1} / {:.1} ms ({} scrapes) |\n\
         | scrape over HTTP asking for gzip p50 / p99 / max | {:.1} / {:.1} / {:.1} ms, {} bytes ({:.1} MiB) |\n\
         | exporter resident memory at /readyz / after the scrapes | {} / {} |\n\
         | CPUs | {} |\n",
        k.clusters,
        k.objects,
        k.time_to_ready.as_secs_f64(),
        ms(k.event_to_metrics.p50),
        ms(k.event_to_metrics.p99),
        ms(k.event_to_metrics.max),
        k.event_to_metrics.samples,
        k.series,
        k.bytes,
        k.bytes as f64 / 1048576.0,
        ms(k.scrape.p50),
        ms(k.scrape.p99),
        ms(k.scrape.max),
        k.scrape.samples,
        ms(k.scrape_gzip.p50),
        ms(k.scrape_gzip.p99),
        ms(k.scrape_gzip.max),
        k.gzip_bytes,
        k.gzip_bytes as f64 / 1048576.0,
        rss_text(k.rss_at_ready),
        rss_text(k.rss),
        k.pinning,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Either side of the 150 MB target (143.05 MiB) reads differently.
    #[test]
    fn resident_memory_is_reported_to_a_tenth_of_a_mib() {
        assert_eq!(rss_text(Some(150_000_000)), "143.1 MiB");
        assert_eq!(rss_text(Some(149_500_000)), "142.6 MiB");
        assert_eq!(rss_text(Some(150_400_000)), "143.4 MiB");
        assert_eq!(rss_text(None), "n/a");
    }
}
