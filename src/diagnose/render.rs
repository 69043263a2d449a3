//! The three faces of a [`Report`]: a table for the terminal, JSON for a
//! script, Markdown for the incident document (the whole timeline and the
//! trace id).

use jiff::Timestamp;
use serde_json::Value;

use super::Report;
use crate::model::{Hop, human};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
    Markdown,
}

pub fn render(report: &Report, output: Output) -> String {
    match output {
        Output::Table => table(report),
        Output::Json => json(report),
        Output::Markdown => markdown(report),
    }
}

/// One hop's row, read from the timeline JSON (live or from an exporter).
struct Row {
    hop: Hop,
    phase: String,
    state: String,
    since: String,
    for_how_long: String,
    budget: String,
    ready_at: String,
    via: String,
    conditions: Vec<String>,
    unreadable: Option<String>,
}

fn text(v: &Value, pointer: &str) -> String {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn rows(report: &Report) -> Vec<Row> {
    let now = report.checked_at;
    let mut out = Vec::new();
    for hop in Hop::ALL {
        let unreadable = report
            .unreadable
            .iter()
            .find(|u| u.hops.contains(&hop))
            .map(|u| format!("{}: {}", u.source, u.error));
        let Some(h) = report
            .timeline
            .as_ref()
            .and_then(|t| t.pointer(&format!("/hops/{hop}")))
        else {
            if let Some(why) = unreadable {
                out.push(Row {
                    hop,
                    phase: "unreadable".to_string(),
                    state: String::new(),
                    since: String::new(),
                    for_how_long: String::new(),
                    budget: budget(report, hop),
                    ready_at: String::new(),
                    via: String::new(),
                    conditions: Vec::new(),
                    unreadable: Some(why),
                });
            }
            continue;
        };
        let since = text(h, "/since/at");
        let not_ready = matches!(
            h["phase"].as_str(),
            Some("pending" | "progressing" | "unknown")
        );
        let for_how_long = match since.parse::<Timestamp>() {
            Ok(at) if not_ready => human(now.duration_since(at).as_secs_f64()),
            _ => String::new(),
        };
        let conditions = h["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let mut s = format!("{}={}", text(c, "/type"), text(c, "/status"));
                let object = text(c, "/object");
                if !object.is_empty() {
                    s = format!("{object}: {s}");
                }
                let reason = text(c, "/reason");
                if !reason.is_empty() {
                    s.push_str(&format!(" ({reason})"));
                }
                let message = text(c, "/message");
                if !message.is_empty() {
                    s.push_str(&format!(": {message}"));
                }
                s
            })
            .collect();
        out.push(Row {
            hop,
            phase: text(h, "/phase"),
            state: text(h, "/state"),
            since: if h.pointer("/since/observed") == Some(&Value::Bool(true)) {
                format!("{since} (observed)")
            } else {
                since
            },
            for_how_long,
            budget: budget(report, hop),
            ready_at: text(h, "/ready_at"),
            via: text(h, "/via"),
            conditions,
            unreadable,
        });
    }
    out
}

/// The cluster's day-2 operations in flight (node pools', upgrades), each
/// judged on its own: `(status, sentence)` from the timeline's operations.
fn day2_operations(report: &Report) -> Vec<(String, String)> {
    report
        .timeline
        .as_ref()
        .and_then(|t| t["operations"].as_array())
        .into_iter()
        .flatten()
        .filter(|o| o["reason"].is_string())
        .map(|o| (text(o, "/verdict"), text(o, "/reason")))
        .collect()
}

fn budget(report: &Report, hop: Hop) -> String {
    report
        .budgets
        .get(&hop)
        .map(|s| human(*s))
        .unwrap_or_default()
}

fn header_lines(report: &Report) -> Vec<(String, String)> {
    let mut out = vec![("target".to_string(), report.target.clone())];
    if let Some(t) = &report.timeline {
        for (label, key) in [
            ("cluster_id", "/cluster_id"),
            ("name", "/name"),
            ("resource_id", "/resource_id"),
            ("mgmt_cluster", "/mgmt_cluster"),
            ("namespace", "/namespace"),
            ("platform", "/platform"),
            ("outcome", "/outcome"),
            ("created_at", "/created_at/at"),
            ("trace_id", "/trace_id"),
        ] {
            let v = text(t, key);
            if !v.is_empty() {
                out.push((label.to_string(), v));
            }
        }
    }
    out.push(("read from".to_string(), report.read_from.clone()));
    out.push(("checked at".to_string(), report.checked_at.to_string()));
    out
}

fn table(report: &Report) -> String {
    let mut out = String::new();
    for (k, v) in header_lines(report) {
        out.push_str(&format!("{k:<13}{v}\n"));
    }
    out.push('\n');
    let rows = rows(report);
    let head = ["HOP", "PHASE", "STATE", "SINCE", "FOR", "BUDGET", "VIA"];
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            [
                r.hop.to_string(),
                r.phase.clone(),
                r.state.clone(),
                r.since.clone(),
                r.for_how_long.clone(),
                r.budget.clone(),
                r.via.clone(),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..head.len())
        .map(|i| {
            cells
                .iter()
                .map(|c| c[i].chars().count())
                .chain([head[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |values: &[String]| {
        let mut s = String::new();
        for (i, v) in values.iter().enumerate() {
            if i + 1 == values.len() {
                s.push_str(v);
            } else {
                s.push_str(&format!("{v:<w$}  ", w = widths[i]));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    out.push_str(&line(&head.map(str::to_string)));
    for (row, cell) in rows.iter().zip(&cells) {
        out.push_str(&line(cell));
        for c in &row.conditions {
            out.push_str(&format!("    {c}\n"));
        }
        if let Some(why) = &row.unreadable {
            out.push_str(&format!("    could not be read: {why}\n"));
        }
    }
    if rows.is_empty() {
        out.push_str("(no hop seen)\n");
    }
    let day2 = day2_operations(report);
    if !day2.is_empty() {
        out.push_str("\nnode pool and upgrade operations in flight:\n");
        for (status, reason) in &day2 {
            out.push_str(&format!("  {status:<12}{reason}\n"));
        }
    }
    let ids = upstream_ids(report);
    if !ids.is_empty() {
        out.push_str(&format!(
            "\nupstream ids: {}\n",
            ids.join(", ").replace('`', "")
        ));
    }
    out.push_str(&format!(
        "\nverdict: {} (exit {})\n",
        report.verdict_line(),
        report.exit_code()
    ));
    out
}

fn json(report: &Report) -> String {
    let value = serde_json::json!({
        "target": report.target,
        "read_from": report.read_from,
        "checked_at": report.checked_at,
        "outcome": report.outcome(),
        "exit_code": report.exit_code(),
        "verdict": report.verdict_line(),
        "budgets_seconds": report.budgets,
        "unreadable": report.unreadable,
        "timeline": report.timeline,
    });
    serde_json::to_string_pretty(&value).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
        + "\n"
}

/// The upstreams' ids the timeline carries, `name=value (hop object)`.
fn upstream_ids(report: &Report) -> Vec<String> {
    report
        .timeline
        .as_ref()
        .and_then(|t| t["upstream_ids"].as_array())
        .into_iter()
        .flatten()
        .map(|u| {
            format!(
                "`{}={}` ({} {})",
                text(u, "/name"),
                text(u, "/value"),
                text(u, "/hop"),
                text(u, "/object")
            )
        })
        .collect()
}

/// The history the timeline carries (docs/design/15b-operations.md §15.12), a row per
/// ended operation: what, when, how long, how it ended, its hops.
fn history_rows(report: &Report) -> Vec<Vec<String>> {
    let Some(ended) = report
        .timeline
        .as_ref()
        .and_then(|t| t["history"].as_array())
    else {
        return Vec::new();
    };
    let seconds_between = |from: &serde_json::Value, to: &serde_json::Value| -> Option<f64> {
        let from: jiff::Timestamp = from.as_str()?.parse().ok()?;
        let to: jiff::Timestamp = to.as_str()?.parse().ok()?;
        Some((to - from).total(jiff::Unit::Second).ok()?.max(0.0))
    };
    ended
        .iter()
        .map(|e| {
            let mut what = text(e, "/operation");
            let subject = text(e, "/subject");
            if !subject.is_empty() {
                what = format!("{what} {subject}");
            }
            let hops: Vec<String> = e["hops"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|h| {
                    let hop = text(h, "/hop");
                    match seconds_between(&h["started_at"], &h["ended_at"]) {
                        Some(took) => format!("{hop} {}", crate::model::human(took)),
                        None => format!("{hop} (not done)"),
                    }
                })
                .collect();
            vec![
                what,
                text(e, "/started_at"),
                crate::model::human(e["duration_seconds"].as_f64().unwrap_or_default()),
                text(e, "/outcome"),
                text(e, "/slo"),
                hops.join(", "),
                format!("`{}`", text(e, "/trace_id")),
            ]
        })
        .collect()
}

/// Markdown cells must not break the table.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn markdown(report: &Report) -> String {
    let mut out = format!("# hcp-flow diagnose: `{}`\n\n", report.target);
    out.push_str(&format!(
        "**Verdict:** {} (exit code {}).\n\n",
        cell(&report.verdict_line()),
        report.exit_code()
    ));
    out.push_str("| | |\n|---|---|\n");
    for (k, v) in header_lines(report) {
        out.push_str(&format!("| {k} | `{}` |\n", cell(&v)));
    }
    out.push_str("\n## Timeline\n\n| hop | phase | state | since | for | budget | ready at | via |\n|---|---|---|---|---|---|---|---|\n");
    let rows = rows(report);
    for r in &rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.hop,
            cell(&r.phase),
            cell(&r.state),
            cell(&r.since),
            cell(&r.for_how_long),
            cell(&r.budget),
            cell(&r.ready_at),
            cell(&r.via)
        ));
    }
    let with_conditions: Vec<&Row> = rows.iter().filter(|r| !r.conditions.is_empty()).collect();
    if !with_conditions.is_empty() {
        out.push_str("\n## Conditions\n\n");
        for r in with_conditions {
            out.push_str(&format!("- **{}**\n", r.hop));
            for c in &r.conditions {
                out.push_str(&format!("  - {}\n", cell(c)));
            }
        }
    }
    let day2 = day2_operations(report);
    if !day2.is_empty() {
        out.push_str("\n## Node pool and upgrade operations in flight\n\n");
        for (status, reason) in &day2 {
            out.push_str(&format!("- **{status}**: {}\n", cell(reason)));
        }
    }
    let ids = upstream_ids(report);
    if !ids.is_empty() {
        out.push_str("\n## Upstream ids\n\nSearch the upstreams' logs by these (OCM log tracing, `logging.open-cluster-management.io/<name>`).\n\n");
        for id in &ids {
            out.push_str(&format!("- {}\n", cell(id)));
        }
    }
    let history = history_rows(report);
    if !history.is_empty() {
        out.push_str("\n## History\n\nThe cluster's ended operations, oldest first, each hop it passed with how long it took there.\n\n| operation | started | took | outcome | SLO | hops | trace id |\n|---|---|---|---|---|---|---|\n");
        for row in &history {
            out.push_str(&format!(
                "| {} |\n",
                row.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | ")
            ));
        }
    }
    if !report.unreadable.is_empty() {
        out.push_str("\n## Could not be read\n\n");
        for u in &report.unreadable {
            let hops: Vec<String> = u.hops.iter().map(Hop::to_string).collect();
            out.push_str(&format!(
                "- `{}` (hops {}): {}\n",
                u.source,
                hops.join(", "),
                cell(&u.error)
            ));
        }
    }
    if let Some(t) = &report.timeline {
        let trace = text(t, "/trace_id");
        if !trace.is_empty() {
            out.push_str(&format!(
                "\n## Trace\n\nThe creation's trace id is `{trace}`: search it in the trace UI; the metrics' exemplars carry it too.\n"
            ));
        }
    }
    out
}
