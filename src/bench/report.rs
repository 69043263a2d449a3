//! The markdown `hcp-flow bench` prints (or writes to `--output`).

use std::time::Duration;

use super::MaestroMode;
use super::end_to_end::EndToEndFigures;
use super::figures::{Latency, mib, ms, series_budget};
use super::in_process::ExpositionFigures;
use super::kube::KubeFigures;
use super::shards::{InstanceFigures, ShardFigures};

/// Resident memory for a report, to a tenth of a MiB: the target, 150 MB,
/// is 143.05 MiB, and a side that holds 142.6 or 143.4 MiB reads "143" either way.
pub(super) fn rss_text(bytes: Option<u64>) -> String {
    bytes
        .map(|b| format!("{:.1} MiB", mib(b)))
        .unwrap_or_else(|| "n/a".into())
}

/// How many times `of`'s median `time` takes.
fn p50_ratio(time: &Latency, of: &Latency) -> f64 {
    time.p50.as_secs_f64() / of.p50.as_secs_f64().max(1e-9)
}

/// The markdown report `hcp-flow bench` prints (or writes to `--output`):
/// the exposition path, then the end-to-end runs side by side.
pub fn report(exposition: &ExpositionFigures, end_to_end: &[EndToEndFigures]) -> String {
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
    out.push_str(&end_to_end_table(end_to_end));
    out
}

/// The markdown `hcp-flow bench --shards N` (N > 1) prints: the exposition
/// path, then per way of reading Maestro one table with a column per
/// instance, the unsharded one first, and the sum check.
pub fn report_shards(exposition: &ExpositionFigures, runs: &[ShardFigures]) -> String {
    let whole = report(exposition, &[]);
    let mut out = whole;
    for run in runs {
        out.push_str(&shard_table(run));
    }
    out
}

/// `value` and its ratio to the unsharded instance's `whole`, for a shard.
fn with_ratio(text: String, value: f64, whole: f64, shard: bool) -> String {
    if !shard {
        return text;
    }
    match whole > 0.0 {
        true => format!("{text} ({:.2}×)", value / whole),
        // No ratio to nothing: the unsharded instance asked for none.
        false => format!("{text} (– ×)"),
    }
}

/// One side-by-side run of `hcp-flow bench --shards N`.
fn shard_table(run: &ShardFigures) -> String {
    let Some(whole) = run.instances.first() else {
        return String::new();
    };
    let out = format!(
        "## What each shard costs ({} shards and one unsharded instance side by side against one simulated world, {} clusters, {}, realistic upstream latency)

",
        run.shards,
        run.clusters,
        mode_heading(run.mode)
    );
    let mut table = Columns::new(out, &run.instances, |i| match i.shard {
        None => "unsharded".to_string(),
        Some(s) => format!(
            "shard {s} of {} (`--shard {s} --total-shards {}`)",
            run.shards, run.shards
        ),
    });
    shard_rows(&mut table, run, whole);
    let mut out = table.finish();
    out.push_str(&sum_check(run, whole));
    out.push_str(&format!(
        "
Every instance is scraped back to back in a round, every {} s; requests are counted between the first round after every instance was ready and the last one, {:.0} s later (three fast-poll cycles, `--maestro-watch` at most), before any instance's first full relist ({} after its first list ended){}. A round's check compares the clusters each instance tracks; the world churns, so instances that polled at different moments may differ for a round, and a few more rounds are taken until one adds up.

",
        super::shards::ROUND_EVERY.as_secs(),
        run.window.unwrap_or_default().as_secs_f64(),
        interval(run.full_relist),
        match run.window {
            Some(_) => String::new(),
            None => ": no window this time, so no requests".to_string(),
        }
    ));
    out
}

/// The figures of each shard beside the unsharded instance's.
fn shard_rows(
    table: &mut Columns<'_, InstanceFigures>,
    run: &ShardFigures,
    whole: &InstanceFigures,
) {
    table.row(
        "clusters tracked (first round after every instance was ready)",
        |i| {
            with_ratio(
                i.tracked.to_string(),
                i.tracked as f64,
                whole.tracked as f64,
                i.shard.is_some(),
            )
        },
    );
    table.row("time to /readyz (all started together; noisy)", |i| {
        format!("{:.1} s", i.time_to_ready.as_secs_f64())
    });
    let rss = |b: Option<u64>, of: Option<u64>, shard: bool| match (b, of) {
        (Some(b), Some(of)) => with_ratio(rss_text(Some(b)), b as f64, of as f64, shard),
        _ => rss_text(b),
    };
    table.row("resident memory at /readyz", |i| {
        rss(i.rss_at_ready, whole.rss_at_ready, i.shard.is_some())
    });
    table.row("resident memory after the scrapes", |i| {
        rss(i.rss, whole.rss, i.shard.is_some())
    });
    table.row("series", |i| {
        with_ratio(
            i.series.to_string(),
            i.series as f64,
            whole.series as f64,
            i.shard.is_some(),
        )
    });
    table.row("series budget (without `cluster_id`: fleet-level)", |i| {
        series_budget(i.series, i.fleet_series, i.tracked)
    });
    table.row("bytes", |i| {
        with_ratio(
            format!("{} ({:.1} MiB)", i.bytes, i.bytes as f64 / 1048576.0),
            i.bytes as f64,
            whole.bytes as f64,
            i.shard.is_some(),
        )
    });
    let mut sources: Vec<&str> = run
        .instances
        .iter()
        .flat_map(|i| i.per_cycle.iter().map(|(s, _)| s.as_str()))
        .collect();
    sources.sort_unstable();
    sources.dedup();
    for source in &sources {
        let of = |i: &InstanceFigures| {
            i.per_cycle
                .iter()
                .find(|(s, _)| s == source)
                .map(|(_, v)| *v)
        };
        let whole_rate = of(whole);
        table.row(
            &format!(
                "upstream requests per fast-poll cycle ({}), `{source}`, same window for all",
                interval(run.cycle)
            ),
            |i| match (of(i), whole_rate) {
                (Some(v), Some(w)) => with_ratio(format!("{v:.1}"), v, w, i.shard.is_some()),
                (v, _) => optional(v, 1),
            },
        );
    }
    table.row(
        "scrape over HTTP p50 / p99 / max (noisy: instances share the cores)",
        |i| {
            format!(
                "{:.1} / {:.1} / {:.1} ms ({} scrapes)",
                ms(i.scrape.p50),
                ms(i.scrape.p99),
                ms(i.scrape.max),
                i.scrape.samples
            )
        },
    );
    table.row("CPUs", |_| run.pinning.clone());
}

/// Whether the shards' clusters added up to the unsharded instance's.
fn sum_check(run: &ShardFigures, whole: &InstanceFigures) -> String {
    let mut out = String::new();
    let shards = run.instances.iter().filter(|i| i.shard.is_some());
    let sum: usize = shards.map(|i| i.tracked).sum();
    out.push_str(&format!(
        "
**Sum check**: the shards tracked {sum} clusters together at the first round, the unsharded instance {}. ",
        whole.tracked
    ));
    out.push_str(&match run.held_at() {
        Some(k) => {
            let c = &run.rounds[k - 1];
            format!(
                "✔ The sum equals the unsharded count, no shard holding another's cluster or one held by two: round {k} of {} (sum {}, unsharded {}).
",
                run.rounds.len(),
                c.sum,
                c.whole
            )
        }
        None => {
            let closest = run.rounds.iter().min_by_key(|c| c.differing);
            format!(
                "✘ No round of {} added up{}.
",
                run.rounds.len(),
                closest.map_or(String::new(), |c| format!(
                    " (closest: sum {}, unsharded {}, {} clusters tracked on one side only, {} in the wrong shard, {} in two shards)",
                    c.sum, c.whole, c.differing, c.misplaced, c.shared
                ))
            )
        }
    });
    out
}

/// A column's heading: how that run's exporter read Maestro.
fn mode_heading(mode: MaestroMode) -> &'static str {
    match mode {
        MaestroMode::Rest => "Maestro over REST polls",
        MaestroMode::Stream => "Maestro over the gRPC stream",
    }
}

/// A duration as the configuration writes it (`10m`, `15s`).
fn interval(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// The end-to-end runs side by side, a column each.
fn end_to_end_table(runs: &[EndToEndFigures]) -> String {
    let Some(first) = runs.first() else {
        return String::new();
    };
    let mut out = format!(
        "## End to end (`hcp-flow serve` against the simulated world, {} clusters, realistic upstream latency)\n\n",
        first.clusters
    );
    if runs.len() > 1 {
        out.push_str(
            "Each column is a run of its own against a fresh world of the same size and seed, \
             one after the other on this machine.\n\n",
        );
    }
    let mut table = Columns::new(out, runs, |r| mode_heading(r.mode).to_string());
    run_rows(&mut table);
    request_rows(&mut table, first);
    scrape_rows(&mut table);
    let mut out = table.finish();
    out.push_str(&format!(
        "\nRequests are counted from the first scrape after /readyz to the last scrape of the \
         Maestro watch that ended before any source's first full relist could begin ({} after \
         its first list ended): no relist is in them. With the stream, Maestro is asked nothing \
         between relists but to read by id the bundles first heard on the stream (one request \
         per batch of them, docs/design/09b-reading-the-upstreams.md §9.10).\n",
        interval(first.full_relist)
    ));
    out
}

/// What each end-to-end run was: its shard, how it read Maestro, how soon
/// it was ready and how soon a bundle's change showed.
fn run_rows(table: &mut Columns<'_, EndToEndFigures>) {
    table.row("shard", |r| match r.shards {
        1 => format!("the whole fleet: {} clusters tracked", r.tracked),
        n => format!(
            "0 of {n} (`--shard 0 --total-shards {n}`): {} clusters tracked",
            r.tracked
        ),
    });
    table.row("Maestro read by", |r| match r.mode {
        MaestroMode::Rest => format!(
            "REST: incremental poll every {}, full relist every {}",
            interval(r.cycle),
            interval(r.full_relist)
        ),
        MaestroMode::Stream => format!(
            "gRPC stream; REST list after each subscription and every {}, by id for a bundle first heard on the stream",
            interval(r.full_relist)
        ),
    });
    table.row("time to /readyz (first full sync of every source)", |r| {
        format!("{:.1} s", r.time_to_ready.as_secs_f64())
    });
    table.row(
        "Maestro bundle Available → shown in /metrics p50 / p99 / max",
        |r| match r.maestro_to_metrics.samples {
            0 => format!(
                "no bundle turned Available while watched ({} not shown)",
                r.maestro_not_shown
            ),
            n => format!(
                "{:.1} / {:.1} / {:.1} s ({n} bundles; includes up to one scrape; {} still not shown two fast-poll cycles after the watch ended)",
                r.maestro_to_metrics.p50.as_secs_f64(),
                r.maestro_to_metrics.p99.as_secs_f64(),
                r.maestro_to_metrics.max.as_secs_f64(),
                r.maestro_not_shown,
            ),
        },
    );
    table.row(
        "Maestro REST requests per minute once ready (no relist in the window)",
        |r| match (r.requests.maestro_per_minute, r.requests.window) {
            (Some(per_minute), Some(window)) => {
                format!("{per_minute:.1} (over {:.0} s)", window.as_secs_f64())
            }
            _ => "n/a (no scrape between /readyz and the first relist)".to_string(),
        },
    );
    table.row("bundles Maestro answered per minute, same window", |r| {
        optional(r.requests.maestro_bundles_served_per_minute, 0)
    });
    table.row(
        "bundles the world created per minute, same window (followed clusters)",
        |r| optional(r.requests.bundles_created_per_minute, 1),
    );
}

/// What each run asked of the upstreams, once ready and in steady state.
fn request_rows(table: &mut Columns<'_, EndToEndFigures>, first: &EndToEndFigures) {
    let runs = table.runs;
    let mut sources: Vec<&str> = runs
        .iter()
        .flat_map(|r| {
            r.requests
                .per_cycle
                .iter()
                .chain(r.steady.requests.per_cycle.iter())
                .map(|(s, _)| s.as_str())
        })
        .collect();
    sources.sort_unstable();
    sources.dedup();
    let pool_changes = |requests: &super::end_to_end::Requests| match requests.pool_changes {
        Some(c) => format!(
            "{:.1} / {:.1} ({:.1} / {:.1}); {}",
            c.rp_clusters, c.cs_clusters, c.rp_changes, c.cs_changes, c.in_flight
        ),
        None => "n/a".to_string(),
    };
    for source in &sources {
        table.row(
            &format!(
                "upstream requests per fast-poll cycle ({}), `{source}`, same window",
                interval(first.cycle)
            ),
            |r| {
                let per_cycle = r.requests.per_cycle.iter().find(|(s, _)| s == source);
                optional(per_cycle.map(|(_, v)| *v), 1)
            },
        );
    }
    table.row(
        "node pools in the world per fast-poll cycle, same window: clusters with a pool that moved at the RP / Clusters Service (pool state changes); pool operations in flight at its end",
        |r| pool_changes(&r.requests),
    );
    table.row(
        "steady state: /readyz → the RP and Clusters Service caught up on the node pools in flight at start (`hcpflow_node_pool_reads_queued` below one batch, looked for from the end of the Maestro watch on)",
        |r| match r.steady.caught_up_after {
            Some(after) => format!(
                "{:.0} s; then a window of {:.0} s",
                after.as_secs_f64(),
                r.steady.requests.window.map_or(0.0, |w| w.as_secs_f64())
            ),
            None => {
                "n/a (not before the first relist, or a fleet under 1,000 clusters)".to_string()
            }
        },
    );
    for source in &sources {
        table.row(
            &format!(
                "steady state: upstream requests per fast-poll cycle ({}), `{source}`",
                interval(first.cycle)
            ),
            |r| {
                let per_cycle = r
                    .steady
                    .requests
                    .per_cycle
                    .iter()
                    .find(|(s, _)| s == source);
                optional(per_cycle.map(|(_, v)| *v), 1)
            },
        );
    }
    table.row(
        "steady state: node pools in the world per fast-poll cycle (as above)",
        |r| pool_changes(&r.steady.requests),
    );
}

/// What a scrape of each run took, and its memory.
fn scrape_rows(table: &mut Columns<'_, EndToEndFigures>) {
    table.row("series", |r| r.series.to_string());
    table.row("series budget (without `cluster_id`: fleet-level)", |r| {
        series_budget(r.series, r.fleet_series, r.clusters)
    });
    table.row("bytes", |r| {
        format!("{} ({:.1} MiB)", r.bytes, r.bytes as f64 / 1048576.0)
    });
    table.row("scrape over HTTP p50 / p99 / max", |r| {
        format!(
            "{:.1} / {:.1} / {:.1} ms ({} scrapes)",
            ms(r.scrape.p50),
            ms(r.scrape.p99),
            ms(r.scrape.max),
            r.scrape.samples
        )
    });
    table.row(
        "the same through reqwest (a second copy on the scraper's core) p50 / p99 / max",
        |r| {
            format!(
                "{:.1} / {:.1} / {:.1} ms",
                ms(r.scrape_reqwest.p50),
                ms(r.scrape_reqwest.p99),
                ms(r.scrape_reqwest.max),
            )
        },
    );
    table.row("scrape over HTTP asking for gzip p50 / p99 / max", |r| {
        format!(
            "{:.1} / {:.1} / {:.1} ms, {} bytes ({:.1} MiB)",
            ms(r.scrape_gzip.p50),
            ms(r.scrape_gzip.p99),
            ms(r.scrape_gzip.max),
            r.gzip_bytes,
            r.gzip_bytes as f64 / 1048576.0
        )
    });
    table.row(
        "exporter resident memory at /readyz / after the scrapes",
        |r| format!("{} / {}", rss_text(r.rss_at_ready), rss_text(r.rss)),
    );
    table.row(
        "memcpy of the same body p50 / p99; HTTP scrape p99 over the memcpy p50 (bar 1.5×)",
        |r| floor_text(&r.scrape, &r.memcpy),
    );
    table.row("operation history held (`--history`)", |r| {
        history_text(r.history)
    });
    table.row("CPUs", |r| r.pinning.clone());
}

/// A markdown table with one column per run (or instance), written a row
/// at a time.
struct Columns<'a, T> {
    out: String,
    runs: &'a [T],
}

impl<'a, T> Columns<'a, T> {
    /// Start the table under `out`, each column headed by `heading`.
    fn new(mut out: String, runs: &'a [T], heading: impl Fn(&T) -> String) -> Self {
        out.push_str("| figure |");
        for run in runs {
            out.push_str(&format!(" {} |", heading(run)));
        }
        out.push_str("\n|---|");
        out.push_str(&"---|".repeat(runs.len()));
        out.push('\n');
        Columns { out, runs }
    }

    fn row(&mut self, name: &str, cell: impl Fn(&T) -> String) {
        self.out.push_str(&format!("| {name} |"));
        for run in self.runs {
            self.out.push_str(&format!(" {} |", cell(run)));
        }
        self.out.push('\n');
    }

    fn finish(self) -> String {
        self.out
    }
}

/// A figure to `decimals` places, or "n/a".
fn optional(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "n/a".to_string(), |v| format!("{v:.decimals$}"))
}

/// The copy floor and the scrape's ratio to it.
fn floor_text(scrape: &Latency, memcpy: &Latency) -> String {
    format!(
        "{:.1} / {:.1} ms; {:.2}×",
        ms(memcpy.p50),
        ms(memcpy.p99),
        super::figures::floor_ratio(scrape, memcpy)
    )
}

/// What `--history` seeded, or that it did not.
fn history_text(seeded: Option<super::history::SeededHistory>) -> String {
    match seeded {
        None => "none (no `--history`, no state directory)".to_string(),
        Some(s) => format!(
            "{} operations over {} clusters (state file {:.1} MiB)",
            s.operations,
            s.clusters,
            s.file_bytes as f64 / 1048576.0
        ),
    }
}

/// The markdown `hcp-flow bench --kube` prints.
pub fn report_kube(k: &KubeFigures) -> String {
    format!(
        "## Management side (`hcp-flow serve` watching a simulated Kubernetes API server, {} HostedClusters, {} objects)\n\n\
         | figure | value |\n|---|---|\n\
         | time to /readyz (first list of every kind) | {:.1} s |\n\
         | watch event → visible in /metrics p50 / p99 / max | {:.0} / {:.0} / {:.0} ms ({} changes; includes one scrape) |\n\
         | series | {} |\n| series budget (without `cluster_id`: fleet-level) | {} |\n| bytes | {} ({:.1} MiB) |\n\
         | scrape over HTTP p50 / p99 / max | {:.1} / {:.1} / {:.1} ms ({} scrapes) |\n\
         | the same through reqwest (a second copy on the scraper's core) p50 / p99 / max | {:.1} / {:.1} / {:.1} ms |\n\
         | scrape over HTTP asking for gzip p50 / p99 / max | {:.1} / {:.1} / {:.1} ms, {} bytes ({:.1} MiB) |\n\
         | exporter resident memory at /readyz / after the scrapes | {} / {} |\n\
         | memcpy of the same body p50 / p99; HTTP scrape p99 over the memcpy p50 (bar 1.5×) | {} |\n\
         | operation history held (`--history`) | {} |\n\
         | CPUs | {} |\n",
        k.clusters,
        k.objects,
        k.time_to_ready.as_secs_f64(),
        ms(k.event_to_metrics.p50),
        ms(k.event_to_metrics.p99),
        ms(k.event_to_metrics.max),
        k.event_to_metrics.samples,
        k.series,
        series_budget(k.series, k.fleet_series, k.clusters),
        k.bytes,
        k.bytes as f64 / 1048576.0,
        ms(k.scrape.p50),
        ms(k.scrape.p99),
        ms(k.scrape.max),
        k.scrape.samples,
        ms(k.scrape_reqwest.p50),
        ms(k.scrape_reqwest.p99),
        ms(k.scrape_reqwest.max),
        ms(k.scrape_gzip.p50),
        ms(k.scrape_gzip.p99),
        ms(k.scrape_gzip.max),
        k.gzip_bytes,
        k.gzip_bytes as f64 / 1048576.0,
        rss_text(k.rss_at_ready),
        rss_text(k.rss),
        floor_text(&k.scrape, &k.memcpy),
        history_text(k.history),
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
