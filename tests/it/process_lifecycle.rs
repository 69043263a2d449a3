//! The real binary as an operator runs it: logs a person (or a log
//! pipeline) can read when stderr is not a terminal, the configuration one
//! setting per line, one line when a source goes down rather than one per
//! retry, and on SIGTERM queued spans flushed and exit 0 within the grace.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;

const BIN: &str = env!("CARGO_BIN_EXE_hcp-flow");

/// Spans received by an OTLP/HTTP (protobuf) receiver on loopback.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<usize>>);

fn otlp_receiver(runtime: &tokio::runtime::Runtime) -> (Received, SocketAddr) {
    use axum::body::Bytes;
    use axum::extract::State;

    async fn traces(State(received): State<Received>, body: Bytes) -> Vec<u8> {
        if let Ok(request) = ExportTraceServiceRequest::decode(body) {
            let spans: usize = request
                .resource_spans
                .iter()
                .flat_map(|r| &r.scope_spans)
                .map(|s| s.spans.len())
                .sum();
            *received.0.lock().unwrap() += spans;
        }
        ExportTraceServiceResponse::default().encode_to_vec()
    }
    let received = Received::default();
    let router = axum::Router::new()
        .route("/v1/traces", axum::routing::post(traces))
        .with_state(received.clone());
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    runtime.spawn(async move { axum::serve(listener, router).await.unwrap() });
    (received, addr)
}

fn sigterm(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn wait_with_deadline(child: &mut Child, deadline: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            panic!("the process did not exit within {deadline:?} of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Everything the child wrote to stderr, read on a thread so it never
/// blocks on a full pipe.
fn drain(stream: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            let mut text = sink.lock().unwrap();
            text.push_str(&line);
            text.push('\n');
        }
    });
    text
}

fn get(url: &str) -> Option<String> {
    crate::common::init();
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    client.get(url).send().ok()?.text().ok()
}

fn metric_value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn sigterm_flushes_queued_spans_and_exits_zero_within_the_grace_period() {
    let _machine = crate::common::load::share();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (received, otlp) = otlp_receiver(&runtime);
    let mut child = Command::new(BIN)
        .args([
            "demo",
            "--clusters",
            "6",
            "--speed",
            "600",
            "--listen",
            "127.0.0.1:0",
        ])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{otlp}"))
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        // Nothing leaves before shutdown: only the flush can send spans.
        .env("OTEL_BSP_SCHEDULE_DELAY", "600000")
        .env_remove("NO_COLOR")
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = drain(child.stderr.take().unwrap());
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut base = None;
    let mut line = String::new();
    while base.is_none() && stdout.read_line(&mut line).unwrap() > 0 {
        if let Some(at) = line.find("http://")
            && line.contains("/metrics")
        {
            let url = &line[at..];
            base = Some(url[..url.find("/metrics").unwrap()].to_string());
        }
        line.clear();
    }
    let base = base.expect("the demo prints its address");

    // Wait for finished hops: their spans are queued, not yet sent.
    let start = Instant::now();
    loop {
        let metrics = get(&format!("{base}/metrics")).unwrap_or_default();
        if metric_value(
            &metrics,
            r#"hcpflow_operation_slo_events_total{operation="create",outcome="good"}"#,
        ) >= 1.0
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no creation completed in the demo"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        *received.0.lock().unwrap(),
        0,
        "spans left before shutdown; the test would not prove the flush"
    );

    sigterm(&child);
    // The demo's grace is 2 s; allow for process start-up noise.
    let status = wait_with_deadline(&mut child, Duration::from_secs(6));
    assert!(status.success(), "exit status {status:?}");
    assert!(
        *received.0.lock().unwrap() > 0,
        "the spans queued at SIGTERM were flushed"
    );
    std::thread::sleep(Duration::from_millis(100));
    let stderr = stderr.lock().unwrap().clone();
    assert!(
        !stderr.contains('\u{1b}'),
        "no ANSI colour codes when stderr is not a terminal:\n{stderr}"
    );
    assert!(stderr.contains("shutting down"), "{stderr}");
}

#[test]
fn serve_logs_each_setting_as_fields_and_a_down_source_once() {
    let _machine = crate::common::load::share();
    let dir = std::env::temp_dir().join(format!("hcp-flow-lifecycle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Nothing listens on the RP's port: every poll fails, with backoff.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_addr = closed.local_addr().unwrap();
    drop(closed);
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "listen: 127.0.0.1:0\nlog_format: json\nshutdown_grace: 3s\nsources:\n  rp_frontend:\n    base_url: http://{closed_addr}\n    subscriptions: [6b690bec-0c16-4ecb-8f67-781caf40bba7]\n"
        ),
    )
    .unwrap();
    let mut child = Command::new(BIN)
        .args(["serve", "--config", config.to_str().unwrap()])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = drain(child.stderr.take().unwrap());
    // Long enough for several failed polls (backoff from 1 s).
    std::thread::sleep(Duration::from_secs(5));
    sigterm(&child);
    let status = wait_with_deadline(&mut child, Duration::from_secs(6));
    assert!(status.success(), "exit status {status:?}");
    std::thread::sleep(Duration::from_millis(100));
    let stderr = stderr.lock().unwrap().clone();

    let records: Vec<serde_json::Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let settings: Vec<(&str, &str)> = records
        .iter()
        .filter(|r| r["fields"]["message"] == "configuration")
        .map(|r| {
            (
                r["fields"]["setting"].as_str().unwrap(),
                r["fields"]["value"].as_str().unwrap(),
            )
        })
        .collect();
    let names: Vec<&str> = settings.iter().map(|(s, _)| *s).collect();
    for expected in [
        "listen",
        "log_format",
        "shutdown_grace",
        "source rp_frontend",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    assert!(
        settings.iter().all(|(_, v)| !v.contains('\n')),
        "no multi-line field: {settings:?}"
    );
    assert!(settings.contains(&("shutdown_grace", "3s")), "{settings:?}");
    let down: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| {
            r["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("source down"))
        })
        .collect();
    assert_eq!(
        down.len(),
        1,
        "one line when the source goes down, not one per retry:\n{stderr}"
    );
    let error = down[0]["fields"]["error"].as_str().unwrap();
    assert!(error.contains(&closed_addr.to_string()), "{error}");
    let _ = std::fs::remove_dir_all(&dir);
}
