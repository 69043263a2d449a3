//! `promtool check metrics` on a scrape body.

/// Panics with promtool's report unless it accepts `body` without a word: a
/// parse error and a lint finding (a counter that lost its type shows up as an
/// untyped `x_total` with "no help text") both fail.
pub fn check_metrics(body: &str) {
    use std::io::Write;
    let mut child = match std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            panic!("promtool not runnable ({e}): install Debian's prometheus package; .ci/run does")
        }
    };
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(body.as_bytes())
        .expect("promtool reads its stdin");
    let out = child.wait_with_output().expect("promtool runs");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && report.trim().is_empty(),
        "promtool check metrics:\n{report}"
    );
}
