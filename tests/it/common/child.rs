//! A test that needs the process to itself — its own environment variables,
//! or the process-wide tracing dispatch — runs as a child: this test binary
//! again, told to run only that (ignored) test. Every test shares one
//! process otherwise.

use std::process::Command;

/// Set in the child, so the ignored test knows it was started on purpose.
pub const CHILD: &str = "HCPFLOW_TEST_CHILD";

/// Runs the ignored test `name` (its path in this crate, e.g.
/// `config_cli::env_child_parses_variables`) in a child process with `env`
/// set and every `HCPFLOW_` variable of this process removed; panics with
/// its output unless it passed.
pub fn run_alone(name: &str, env: &[(&str, &std::ffi::OsStr)]) {
    let mut child = Command::new(std::env::current_exe().unwrap());
    for (var, _) in std::env::vars_os() {
        if var.to_string_lossy().starts_with("HCPFLOW_") {
            child.env_remove(var);
        }
    }
    child
        .args([
            name,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1");
    for (var, value) in env {
        child.env(var, value);
    }
    let output = child.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "child {name} failed:\n{stdout}\n{stderr}"
    );
}

/// Whether this process is a child [`run_alone`] started.
pub fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}
