//! The Helm chart rendered by Helm's own engine, offline, through
//! `tests/chart/render.py` (helm-python-sdk; `.ci/run` installs it and sets
//! `HCPFLOW_HELM_PYTHON`).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// The chart, from the repository root.
pub const CHART: &str = "charts/hcp-flow";

/// The Python that has helm-python-sdk.
fn python() -> String {
    std::env::var("HCPFLOW_HELM_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// Renders the chart as release `release` in `namespace` once per scenario
/// (`{"name", "values_yaml"}`), and returns render.py's answer: the Helm
/// SDK's version and each scenario's manifests or error.
pub fn render(release: &str, namespace: &str, scenarios: Vec<Value>) -> Value {
    let request = json!({
        "chart": Path::new(super::ROOT).join(CHART),
        "release": release,
        "namespace": namespace,
        "scenarios": scenarios,
    });
    let mut child = Command::new(python())
        .arg(Path::new(super::ROOT).join("tests/chart/render.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {} ({e}); set HCPFLOW_HELM_PYTHON", python()));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "tests/chart/render.py failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}
