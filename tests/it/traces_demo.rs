//! The traces acceptance run (docs/design/07-traces.md §7.1, docs/traces.md): `hcp-flow demo --clusters 20 --speed 60` with
//! `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at a local OTLP/HTTP receiver and
//! `OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf` delivers, within two minutes,
//! traces whose ids are SHA-256("hcp-flow/" + cluster_id) cut to 16 bytes,
//! each with a root span and hop spans under it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::common::otlp;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use sha2::{Digest, Sha256};

fn cluster_id_of(span: &Span) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == "hcp.cluster.id")
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
        .and_then(|v| match v {
            Value::StringValue(s) => Some(s.clone()),
            _ => None,
        })
}

/// Kills the demo when the test ends, however it ends.
struct Demo(std::process::Child);

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_exports_one_trace_per_creation_with_derived_ids() {
    let _machine = crate::common::load::share();
    let (received, receiver) = otlp::http_receiver(None);

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _demo = Demo(
        std::process::Command::new(env!("CARGO_BIN_EXE_hcp-flow"))
            .args(["demo", "--clusters", "20", "--speed", "60"])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver)
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
            .env("OTEL_SERVICE_NAME", "hcp-flow-demo-test")
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );

    let started = Instant::now();
    let complete_traces = loop {
        let got: Vec<Span> = received.spans().into_iter().map(|g| g.span).collect();
        let roots: BTreeMap<Vec<u8>, &Span> = got
            .iter()
            .filter(|s| s.name == "hcp.cluster.create")
            .map(|s| (s.trace_id.clone(), s))
            .collect();
        let complete: Vec<(String, usize)> = roots
            .values()
            .filter_map(|root| {
                let children = got
                    .iter()
                    .filter(|s| s.trace_id == root.trace_id && s.parent_span_id == root.span_id)
                    .count();
                (children >= 2).then(|| (cluster_id_of(root).unwrap_or_default(), children))
            })
            .collect();
        if complete.len() >= 3 {
            break (got, complete);
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "after two minutes only {} complete traces among {} spans",
            complete.len(),
            got.len()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };

    let (all, complete) = complete_traces;
    for (cluster_id, _) in &complete {
        let digest = Sha256::digest(format!("hcp-flow/{cluster_id}").as_bytes());
        let want = &digest[..16];
        let root = all
            .iter()
            .find(|s| {
                s.name == "hcp.cluster.create" && cluster_id_of(s).as_deref() == Some(cluster_id)
            })
            .unwrap();
        assert_eq!(
            root.trace_id, want,
            "trace id of {cluster_id} is not SHA-256(hcp-flow/id)[..16]"
        );
        assert!(root.parent_span_id.is_empty(), "the root has a parent");
        // Every span of the trace carries the same derived id and the cluster.
        for span in all.iter().filter(|s| s.trace_id == want) {
            assert!(
                span.end_time_unix_nano >= span.start_time_unix_nano,
                "{} ends before it starts",
                span.name
            );
        }
    }
    // Never twice: span ids are unique across everything received.
    let mut ids: Vec<(&Vec<u8>, &Vec<u8>)> = all
        .iter()
        .filter(|s| s.name.starts_with("hcp."))
        .map(|s| (&s.trace_id, &s.span_id))
        .collect();
    let before = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(before, ids.len(), "a creation span was exported twice");
}
