//! Real processes for integration tests: Prometheus, Alertmanager and
//! friends on loopback, with their logs kept for the failure message.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A child process killed (by pid) when dropped.
pub struct Process {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Process {
    pub fn start(name: &'static str, program: &str, args: &[String], dir: &Path) -> Process {
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).expect("log file");
        let child = Command::new(program)
            .args(args)
            .stdout(Stdio::from(out.try_clone().expect("log file")))
            .stderr(Stdio::from(out))
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {program} ({e}): install Debian's prometheus and prometheus-alertmanager; .ci/run does")
            });
        Process { name, child, log }
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        format!(
            "--- {} log ---\n{}",
            self.name,
            lines[lines.len().saturating_sub(30)..].join("\n")
        )
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

pub async fn wait_for<T>(
    what: &str,
    limit: Duration,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = probe().await {
            return Some(v);
        }
        if start.elapsed() > limit {
            eprintln!("gave up waiting for {what} after {limit:?}");
            return None;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub async fn query(
    client: &reqwest::Client,
    prometheus: &str,
    expr: &str,
) -> Result<Value, String> {
    let response = client
        .get(format!("{prometheus}/api/v1/query"))
        .query(&[("query", expr)])
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let body: Value = response.json().await.map_err(|e| e.to_string())?;
    if body["status"] == "success" {
        Ok(body["data"]["result"].clone())
    } else {
        Err(format!("{}: {}", body["errorType"], body["error"]))
    }
}

/// A fresh temporary directory for one test's processes, named after it.
pub fn tempdir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hcp-flow-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One Prometheus HTTP API call: its `data` on success, else the error
/// Prometheus gave (type and message), so a failure names the cause.
async fn api(
    client: &reqwest::Client,
    prometheus: &str,
    path: &str,
    params: &[(&str, String)],
) -> Result<Value, String> {
    let response = client
        .get(format!("{prometheus}{path}"))
        .query(params)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let body: Value = response.json().await.map_err(|e| e.to_string())?;
    if body["status"] == "success" {
        Ok(body["data"].clone())
    } else {
        Err(format!("{}: {}", body["errorType"], body["error"]))
    }
}

/// `/api/v1/query_range`: the matrix of `expr` from `start` to `end` (Unix
/// seconds) every `step` seconds, as a time-series panel asks for it.
pub async fn query_range(
    client: &reqwest::Client,
    prometheus: &str,
    expr: &str,
    start: f64,
    end: f64,
    step: f64,
) -> Result<Value, String> {
    let params = [
        ("query", expr.to_string()),
        ("start", start.to_string()),
        ("end", end.to_string()),
        ("step", step.to_string()),
    ];
    let data = api(client, prometheus, "/api/v1/query_range", &params).await?;
    Ok(data["result"].clone())
}

/// `/api/v1/query_exemplars`: the exemplars of the series `expr` selects
/// from `start` to `end` (Unix seconds), as Grafana asks for a panel's dots.
pub async fn query_exemplars(
    client: &reqwest::Client,
    prometheus: &str,
    expr: &str,
    start: f64,
    end: f64,
) -> Result<Value, String> {
    let params = [
        ("query", expr.to_string()),
        ("start", start.to_string()),
        ("end", end.to_string()),
    ];
    api(client, prometheus, "/api/v1/query_exemplars", &params).await
}

/// `/api/v1/label/{label}/values` of the series `selector` matches from
/// `start` to `end` (Unix seconds): what a Grafana `label_values` variable lists.
pub async fn label_values(
    client: &reqwest::Client,
    prometheus: &str,
    label: &str,
    selector: &str,
    start: f64,
    end: f64,
) -> Result<Vec<String>, String> {
    let params = [
        ("match[]", selector.to_string()),
        ("start", start.to_string()),
        ("end", end.to_string()),
    ];
    let data = api(
        client,
        prometheus,
        &format!("/api/v1/label/{label}/values"),
        &params,
    )
    .await?;
    Ok(data
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect())
}

/// A real Prometheus on a free loopback port, configured by `config` (YAML,
/// written to `<dir>/<name>.yml`), its TSDB in `<dir>/<name>-data`. Returns
/// the process and its base URL; [`wait_ready`] tells when it serves.
pub fn start_prometheus(name: &'static str, config: &str, dir: &Path) -> (Process, String) {
    start_prometheus_with(name, config, dir, &[])
}

fn start_prometheus_with(
    name: &'static str,
    config: &str,
    dir: &Path,
    flags: &[String],
) -> (Process, String) {
    let port = free_port();
    let file = dir.join(format!("{name}.yml"));
    std::fs::write(&file, config).unwrap();
    let mut args = vec![
        format!("--config.file={}", file.display()),
        format!(
            "--storage.tsdb.path={}",
            dir.join(format!("{name}-data")).display()
        ),
        format!("--web.listen-address=127.0.0.1:{port}"),
    ];
    args.extend_from_slice(flags);
    let process = Process::start(name, "prometheus", &args, dir);
    (process, format!("http://127.0.0.1:{port}"))
}

/// A real Alertmanager on a free loopback port with the configuration file
/// `config` (relative paths in it, such as `templates:`, resolve against the
/// file's directory), no clustering, its state in `<dir>/<name>-data`.
pub fn start_alertmanager(name: &'static str, config: &Path, dir: &Path) -> (Process, String) {
    let port = free_port();
    let process = Process::start(
        name,
        "prometheus-alertmanager",
        &[
            format!("--config.file={}", config.display()),
            format!(
                "--storage.path={}",
                dir.join(format!("{name}-data")).display()
            ),
            format!("--web.listen-address=127.0.0.1:{port}"),
            "--cluster.listen-address=".to_string(),
        ],
        dir,
    );
    (process, format!("http://127.0.0.1:{port}"))
}

/// Waits until a Prometheus or Alertmanager at `base` answers `/-/ready`.
pub async fn wait_ready(client: &reqwest::Client, base: &str, limit: Duration) -> bool {
    wait_for(&format!("{base} to be ready"), limit, async || {
        let r = client.get(format!("{base}/-/ready")).send().await.ok()?;
        r.status().is_success().then_some(())
    })
    .await
    .is_some()
}

/// `/api/v1/query` evaluated at `time` (Unix seconds): comparing two
/// Prometheus servers at one instant.
pub async fn query_at(
    client: &reqwest::Client,
    prometheus: &str,
    expr: &str,
    time: f64,
) -> Result<Value, String> {
    let params = [("query", expr.to_string()), ("time", time.to_string())];
    let data = api(client, prometheus, "/api/v1/query", &params).await?;
    Ok(data["result"].clone())
}

/// Seconds since the epoch, as Prometheus' API takes them.
pub fn now_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A real Prometheus to start: what it scrapes, which rules it evaluates,
/// where it sends alerts, every second unless the test says otherwise.
pub struct PrometheusBuilder {
    name: &'static str,
    interval: Duration,
    external_labels: Vec<(String, String)>,
    rules: Vec<PathBuf>,
    alertmanager: Option<String>,
    scrape: Vec<(String, String)>,
    /// A whole `scrape_configs:` section as a program printed it (the split
    /// demo's), in place of [`PrometheusBuilder::scrape`]'s jobs.
    scrape_configs: Option<String>,
    flags: Vec<String>,
}

/// A Prometheus named `name` (its log and TSDB in the test's directory).
pub fn prometheus(name: &'static str) -> PrometheusBuilder {
    PrometheusBuilder {
        name,
        interval: Duration::from_secs(1),
        external_labels: Vec::new(),
        rules: Vec::new(),
        alertmanager: None,
        scrape: Vec::new(),
        scrape_configs: None,
        flags: Vec::new(),
    }
}

/// Every rule file the project ships (`alerts/*.yaml`), in name order.
pub fn shipped_rules() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(Path::new(super::ROOT).join("alerts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

impl PrometheusBuilder {
    /// Scrape and evaluation interval.
    pub fn every(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    pub fn external_label(mut self, name: &str, value: &str) -> Self {
        self.external_labels
            .push((name.to_string(), value.to_string()));
        self
    }

    /// Every rule file of `alerts/`.
    pub fn shipped_rules(mut self) -> Self {
        self.rules.extend(shipped_rules());
        self
    }

    /// Alerts go to the Alertmanager at `addr` (`host:port` or a URL).
    pub fn alertmanager(mut self, addr: &str) -> Self {
        self.alertmanager = Some(addr.trim_start_matches("http://").to_string());
        self
    }

    /// A command-line flag beside the config, storage and listen ones.
    pub fn flag(mut self, flag: &str) -> Self {
        self.flags.push(flag.to_string());
        self
    }

    /// Scrape `addr` (`host:port` or a URL) as job `job`.
    pub fn scrape(mut self, job: &str, addr: &str) -> Self {
        self.scrape.push((
            job.to_string(),
            addr.trim_start_matches("http://").to_string(),
        ));
        self
    }

    /// Scrape what `yaml` says: a `scrape_configs:` section as `hcp-flow
    /// demo --topology split` prints it, every instance with its labels.
    pub fn scrape_configs(mut self, yaml: &str) -> Self {
        assert!(self.scrape.is_empty(), "scrape jobs or a section, not both");
        self.scrape_configs = Some(yaml.to_string());
        self
    }

    /// The configuration file it is started with.
    pub fn config(&self) -> String {
        // Prometheus durations are whole units: `2s`, `500ms`.
        let every = match self.interval.subsec_millis() {
            0 => format!("{}s", self.interval.as_secs()),
            _ => format!("{}ms", self.interval.as_millis()),
        };
        let mut out =
            format!("global:\n  scrape_interval: {every}\n  evaluation_interval: {every}\n");
        if !self.external_labels.is_empty() {
            out.push_str("  external_labels:\n");
            for (name, value) in &self.external_labels {
                out.push_str(&format!("    {name}: {value}\n"));
            }
        }
        if !self.rules.is_empty() {
            out.push_str("rule_files:\n");
            for rule in &self.rules {
                out.push_str(&format!("  - {}\n", rule.display()));
            }
        }
        if let Some(am) = &self.alertmanager {
            out.push_str(&format!(
                "alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['{am}']\n"
            ));
        }
        if let Some(section) = &self.scrape_configs {
            out.push_str(section.trim_end());
            out.push('\n');
        }
        if !self.scrape.is_empty() {
            out.push_str("scrape_configs:\n");
            for (job, addr) in &self.scrape {
                out.push_str(&format!(
                    "  - job_name: {job}\n    static_configs:\n      - targets: ['{addr}']\n"
                ));
            }
        }
        out
    }

    /// Started on a free loopback port, its files in `dir`: the process
    /// and its base URL; [`wait_ready`] tells when it serves.
    pub fn start(self, dir: &Path) -> (Process, String) {
        start_prometheus_with(self.name, &self.config(), dir, &self.flags)
    }
}

/// Waits until, with `exporter`, the exporter's `/readyz` says ready and
/// then the Prometheus at `prometheus` has scraped job `hcp-flow`
/// successfully: no alert can be judged before both.
///
/// Each stage waits on its own event (the exporter's sources synced, a
/// successful scrape), checked every half second, for as long as `limit`
/// allows; on a machine the other tests load (a load average of 16 once
/// kept a first scrape past a minute) give a generous one. Giving up says
/// which stage did not come and what it last answered.
pub async fn wait_scraped(
    client: &reqwest::Client,
    prometheus: &str,
    exporter: Option<&str>,
    limit: Duration,
) -> bool {
    let start = Instant::now();
    let mut last = String::new();
    if let Some(exporter) = exporter {
        let ready = wait_for("the exporter's /readyz", limit, async || {
            match client.get(format!("{exporter}/readyz")).send().await {
                Ok(r) if r.status().is_success() => Some(()),
                Ok(r) => {
                    last = format!(
                        "/readyz answered {}: {}",
                        r.status(),
                        r.text().await.unwrap_or_default()
                    );
                    None
                }
                Err(e) => {
                    last = format!("/readyz: {e}");
                    None
                }
            }
        })
        .await;
        if ready.is_none() {
            eprintln!("{last}");
            return false;
        }
        eprintln!("the exporter was ready after {:?}", start.elapsed());
    }
    let left = limit.saturating_sub(start.elapsed());
    let scraped = wait_for(
        "a successful scrape of job hcp-flow",
        left,
        async || match query(client, prometheus, "up{job=\"hcp-flow\"}").await {
            Ok(up) => {
                let up = up.as_array().cloned().unwrap_or_default();
                if up.iter().any(|s| s["value"][1].as_str() == Some("1")) {
                    return Some(());
                }
                last = format!("up{{job=\"hcp-flow\"}}: {up:?}");
                None
            }
            Err(e) => {
                last = format!("Prometheus: {e}");
                None
            }
        },
    )
    .await;
    if scraped.is_none() {
        eprintln!("{last}");
        return false;
    }
    eprintln!(
        "the exporter was ready and scraped after {:?}",
        start.elapsed()
    );
    true
}
