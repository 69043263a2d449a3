//! The benchmark's exposition mode at a small scale, so it cannot rot
//! between the runs that produce docs/performance.md. It checks what the
//! figures must satisfy whatever the machine, never how fast.

#[test]
fn exposition_figures_are_consistent_at_small_scale() {
    let _machine = crate::common::load::hog();
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
    // The chunked assembly hands on the whole body, once.
    assert_eq!(figures.chunked.samples, 3);
    assert_eq!(figures.chunked_bytes, figures.bytes);
}

/// The yardstick renders every sample the exporter served.
#[test]
fn the_generic_encoder_baseline_renders_every_sample() {
    let _machine = crate::common::load::hog();
    let figures = hcp_flow::bench::exposition(50, 2);
    assert_eq!(figures.generic_encoder_samples, figures.series);
    assert_eq!(figures.generic_encoder.samples, 2);
}

/// Where the bench runs the exporter: under `taskset -c 0` when the
/// machine has two CPUs and taskset works, itself otherwise; the report
/// says which.
#[test]
fn the_exporter_command_is_pinned_only_when_pinning_worked() {
    let _machine = crate::common::load::hog();
    use hcp_flow::bench::pin::Pinning;
    let exe = std::path::Path::new("/bin/true");
    let pinned = Pinning::Pinned {
        exporter: 0,
        others: 1,
    };
    let command = pinned.command(exe);
    assert_eq!(command.get_program(), "taskset");
    let args: Vec<_> = command.get_args().collect();
    assert_eq!(args, ["-c", "0", "/bin/true"]);
    assert!(pinned.describe().contains("CPU 0"));
    let shared = Pinning::Shared("1 CPU".into());
    assert_eq!(shared.command(exe).get_program(), "/bin/true");
    assert!(shared.describe().contains("not pinned (1 CPU)"));
}

/// The soak mode end to end at a tiny scale: the binary starts both sides
/// of a churning world and `hcp-flow serve`, scrapes it, samples its memory
/// and prints the curve with its verdict. Whether 40 s is flat says
/// nothing, so only the exit codes the check allows are accepted.
#[test]
fn the_soak_runs_both_sides_and_prints_its_memory_curve() {
    let _machine = crate::common::load::hog();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hcp-flow"))
        .args([
            "bench",
            "--soak",
            "40s",
            "--clusters",
            "30",
            "--speed",
            "10",
        ])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{:?}: {report}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("## Soak (30 clusters"), "{report}");
    assert!(report.contains("| scrapes (failed) | "), "{report}");
    assert!(report.contains("| 0:00 | "), "{report}");
    // Each sample reads memory against the world's population and what the
    // exporter tracks; churn keeps the world at its size.
    let samples: Vec<Vec<&str>> = report
        .lines()
        .map(|l| l.split('|').map(str::trim).collect::<Vec<_>>())
        .filter(|cells| cells.len() == 6 && cells[2].ends_with(" MiB"))
        .collect();
    assert!(samples.len() >= 3, "{report}");
    for cells in &samples {
        assert_eq!(cells[3], "30", "the world's population: {report}");
        assert!(cells[4].parse::<usize>().is_ok(), "tracked: {report}");
    }
    assert!(
        report.contains("flat:") || report.contains("GROWING:"),
        "no verdict: {report}"
    );
}

/// Run `hcp-flow bench` with `args` and return its report.
fn bench_report(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hcp-flow"))
        .arg("bench")
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{:?}: {report}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    report
}

/// The figure in the report row that starts with `row`, as a number (its
/// first cell after the name).
fn first_number(report: &str, row: &str) -> f64 {
    let line = report
        .lines()
        .find(|l| l.starts_with(row))
        .unwrap_or_else(|| panic!("no row {row:?} in {report}"));
    line[row.len()..]
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|s| !s.is_empty())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no number in {line:?}"))
}

/// The management-side bench at small scale, so it cannot rot: it reads
/// the exporter's body both plain and gzipped, and the gzipped one is
/// smaller than the text.
#[test]
fn the_kube_bench_runs_and_reports_both_encodings() {
    let _machine = crate::common::load::hog();
    let report = bench_report(&["--kube", "--clusters", "30", "--scrapes", "3"]);
    let bytes = first_number(&report, "| bytes |");
    let gzip = report
        .lines()
        .find(|l| l.starts_with("| scrape over HTTP asking for gzip"))
        .unwrap_or_else(|| panic!("{report}"));
    let gzip_bytes: f64 = gzip
        .split("ms, ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{gzip}"));
    assert!(bytes > 10_000.0, "{report}");
    assert!(gzip_bytes > 0.0 && gzip_bytes * 3.0 < bytes, "{report}");
    assert!(first_number(&report, "| series |") > 30.0, "{report}");
    // Per cluster and fleet-level, from the same body: both there.
    let budget = "| series budget (without `cluster_id`: fleet-level) |";
    assert!(first_number(&report, budget) > 1.0, "{report}");
    let fleet_level: f64 = report
        .lines()
        .find(|l| l.starts_with(budget))
        .and_then(|l| l.split("per cluster, ").nth(1))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{report}"));
    assert!(fleet_level > 0.0, "{report}");
}

/// The cells of the report row that starts with `row`, after its name.
fn cells(report: &str, row: &str) -> Vec<String> {
    let line = report
        .lines()
        .find(|l| l.starts_with(row))
        .unwrap_or_else(|| panic!("no row {row:?} in {report}"));
    line.split('|')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .skip(1)
        .map(String::from)
        .collect()
}

/// The first number in a cell.
fn number_in(cell: &str) -> Option<f64> {
    cell.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|s| !s.is_empty())
        .and_then(|s| s.parse().ok())
}

/// The service-side end-to-end bench at small scale, once per way of
/// reading Maestro, side by side: REST polls, then the gRPC stream.
#[test]
fn the_end_to_end_bench_runs_at_small_scale() {
    let _machine = crate::common::load::hog();
    // Thirty clusters at real speed never turn 50 bundles Available: half
    // a minute of watching per mode shows the figures' rows without
    // waiting six.
    let report = bench_report(&[
        "--clusters",
        "30",
        "--scrapes",
        "3",
        "--maestro-watch",
        "30s",
    ]);
    assert!(report.contains("## End to end"), "{report}");
    assert!(
        report.contains(
            "| figure | Maestro over REST polls | Maestro over the gRPC stream |\n|---|---|---|\n"
        ),
        "{report}"
    );
    for tracked in cells(&report, "| shard |") {
        let tracked = tracked
            .strip_prefix("the whole fleet: ")
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or_else(|| panic!("no shard row: {report}"));
        assert!(
            tracked >= 25,
            "the whole fleet tracked {tracked} of 30: {report}"
        );
    }
    for cell in cells(&report, "| time to /readyz") {
        assert!(number_in(&cell).is_some_and(|s| s > 0.0), "{report}");
    }
    assert_eq!(
        cells(&report, "| scrape over HTTP asking for gzip").len(),
        2,
        "{report}"
    );
    assert_eq!(
        cells(
            &report,
            "| Maestro bundle Available → shown in /metrics p50 / p99 / max | "
        )
        .len(),
        2,
        "{report}"
    );
    // Both runs counted Maestro's REST requests over a window after
    // /readyz: the polls' column at least one poll a cycle, the stream's a
    // number (its reads by id of new bundles, if any).
    let requests = cells(&report, "| Maestro REST requests per minute once ready");
    assert_eq!(requests.len(), 2, "{report}");
    let (rest, stream) = (number_in(&requests[0]), number_in(&requests[1]));
    assert!(rest.is_some_and(|r| r >= 1.0), "{report}");
    assert!(stream.is_some_and(|s| s >= 0.0), "{report}");
    assert!(requests[1].contains("(over "), "{report}");
    // The series budget of each run: per cluster and fleet-level.
    let budgets = cells(
        &report,
        "| series budget (without `cluster_id`: fleet-level)",
    );
    assert_eq!(budgets.len(), 2, "{report}");
    for budget in &budgets {
        assert!(
            number_in(budget).is_some_and(|n| n > 1.0) && budget.contains(" fleet-level"),
            "{report}"
        );
    }
    // Every run's exporter is where the first one was: pinned once.
    let cpus = cells(&report, "| CPUs |");
    assert_eq!(cpus.len(), 2, "{report}");
    assert_eq!(cpus[0], cpus[1], "{report}");
}

/// The warm restart at small scale: both starts timed, the first warm
/// scrape's Maestro kinds, the state file written before the SIGTERM, and
/// the downtime's changes reflected (thirty clusters may have none in ten
/// seconds; then the row says so).
#[test]
fn the_warm_restart_bench_reports_both_starts() {
    let _machine = crate::common::load::hog();
    let report = bench_report(&["--warm-restart", "--clusters", "30", "--downtime", "10s"]);
    assert!(report.contains("## Warm restart"), "{report}");
    for row in ["| time to /readyz |", "| time to `hcpflow_source_up"] {
        let times = cells(&report, row);
        assert_eq!(times.len(), 2, "{report}");
        for cell in &times {
            assert!(cell.ends_with(" s"), "{row}: {report}");
            assert!(number_in(cell).is_some_and(|s| s > 0.0), "{report}");
        }
    }
    // The first scrape of each start names Maestro's kinds (or its
    // placeholder) with their states; the warm one shows what the state
    // file gave back.
    let first = cells(&report, "| first scrape:");
    assert_eq!(first.len(), 2, "{report}");
    let restored = |cell: &str| {
        // The last part: the kinds before it may be `restored` too.
        cell.rsplit("; ")
            .find_map(|part| part.strip_suffix(" restored"))
            .and_then(|n| n.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no restored count in {cell:?}"))
    };
    assert_eq!(restored(&first[0]), 0.0, "{report}");
    assert!(restored(&first[1]) >= 1.0, "{report}");
    // The warm start serves Maestro's last readings before it lists: its
    // kinds say so (docs/design/03-timeline-model.md §3.10), the cold one's are pending.
    assert!(
        first[0].contains("pending") && !first[0].contains("` restored"),
        "{report}"
    );
    assert!(first[1].contains("` restored"), "{report}");
    assert!(first.iter().all(|c| c.contains("` ")), "{report}");
    // The state file held the fleet before the SIGTERM and after it.
    let state = &cells(&report, "| state file before SIGTERM |")[0];
    let writes = number_in(state).unwrap_or(0.0);
    assert!(writes >= 1.0, "{report}");
    assert!(!state.ends_with("no file"), "{report}");
    assert!(
        cells(&report, "| SIGTERM → exit |")[0].contains("exit status: 0"),
        "{report}"
    );
    let downtime = number_in(&cells(&report, "| downtime")[0]).unwrap_or(0.0);
    assert!((10.0..40.0).contains(&downtime), "{report}");
    let changes = &cells(&report, "| changes during the downtime")[0];
    assert!(changes.contains(" bundles turned Available, "), "{report}");
    let reflected = &cells(&report, "| every downtime change reflected")[0];
    assert!(
        reflected == "no change to reflect" || reflected.contains("after the warm start"),
        "not every change reflected: {report}"
    );
}

/// `--shards 3` at small scale: one unsharded exporter and the three shards
/// side by side against one world, a column each with its ratio to the
/// unsharded one, and the check that the shards' clusters add up to it.
#[test]
fn the_shards_bench_measures_every_shard_against_one_instance() {
    let _machine = crate::common::load::hog();
    let report = bench_report(&[
        "--clusters",
        "30",
        "--scrapes",
        "3",
        "--shards",
        "3",
        "--maestro",
        "stream",
        "--maestro-watch",
        "20s",
    ]);
    assert!(
        report.contains(
            "| figure | unsharded | shard 0 of 3 (`--shard 0 --total-shards 3`) | \
             shard 1 of 3 (`--shard 1 --total-shards 3`) | \
             shard 2 of 3 (`--shard 2 --total-shards 3`) |\n|---|---|---|---|---|\n"
        ),
        "{report}"
    );
    // The exposition table above has rows of the same names.
    let at = report
        .find("## What each shard costs")
        .unwrap_or_else(|| panic!("no shards table: {report}"));
    let report = &report[at..];
    let tracked = cells(report, "| clusters tracked");
    assert_eq!(tracked.len(), 4, "{report}");
    let counts: Vec<f64> = tracked.iter().filter_map(|c| number_in(c)).collect();
    assert_eq!(counts.len(), 4, "{report}");
    assert!(counts[0] >= 25.0, "{report}");
    assert_eq!(counts[1] + counts[2] + counts[3], counts[0], "{report}");
    // Every shard's figure comes with its ratio to the unsharded one.
    for row in [
        "| clusters tracked",
        "| resident memory at /readyz",
        "| resident memory after the scrapes",
        "| series |",
        "| bytes |",
    ] {
        let row_cells = cells(report, row);
        assert_eq!(row_cells.len(), 4, "{row}: {report}");
        assert!(!row_cells[0].contains('×'), "{row}: {report}");
        for cell in &row_cells[1..] {
            assert!(cell.ends_with("×)"), "{row}: {report}");
        }
    }
    // Each instance's own requests, by source, over one window.
    let requests: Vec<&str> = report
        .lines()
        .filter(|l| l.starts_with("| upstream requests per fast-poll cycle"))
        .collect();
    assert!(requests.len() >= 3, "{report}");
    for line in requests {
        assert_eq!(line.matches(" | ").count(), 4, "{line}");
    }
    assert!(
        report.contains("**Sum check**: the shards tracked ")
            && report.contains("✔ The sum equals the unsharded count"),
        "{report}"
    );
}
