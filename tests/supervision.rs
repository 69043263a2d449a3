//! A source task that panics or returns is restarted with backoff, counted,
//! and its source is down until the new task lists again.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hcp_flow::clock::Clock;
use hcp_flow::metrics::exporter::{ExporterMetrics, SourceLabels};
use hcp_flow::sources::health::SourceHealth;
use hcp_flow::supervise::{Restart, supervise};
use prometheus_client::registry::Registry;

const KIND: &str = "resource-bundles";

fn restarts(metrics: &ExporterMetrics) -> u64 {
    metrics
        .source_restarts
        .get_or_create(&SourceLabels {
            source: "maestro".into(),
        })
        .get()
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..200 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for: {what}");
}

#[tokio::test]
async fn a_panicking_then_returning_source_is_restarted_counted_and_down_until_it_lists() {
    let mut registry = Registry::default();
    let metrics = ExporterMetrics::register(&mut registry);
    let health = SourceHealth::new(metrics.clone(), Clock::Real);
    health.expect("maestro");
    let starts = Arc::new(AtomicUsize::new(0));
    // Lets the test hold the third incarnation before it lists, to see
    // the source down in between.
    let gate = Arc::new(tokio::sync::Notify::new());

    let task = {
        let (health, starts, gate) = (health.clone(), starts.clone(), gate.clone());
        tokio::spawn(supervise(
            "maestro".to_string(),
            health.clone(),
            metrics.clone(),
            Restart {
                min_backoff: Duration::from_millis(20),
                max_backoff: Duration::from_millis(40),
                healthy_after: Duration::from_secs(60),
            },
            move || {
                let (health, starts, gate) = (health.clone(), starts.clone(), gate.clone());
                async move {
                    let n = starts.fetch_add(1, Ordering::SeqCst);
                    match n {
                        0 => {
                            health.listed("maestro", KIND);
                            panic!("an upstream answer the parser did not expect");
                        }
                        1 => {
                            health.listed("maestro", KIND);
                            // Returns: a poll loop that broke out.
                        }
                        _ => {
                            gate.notified().await;
                            health.listed("maestro", KIND);
                            std::future::pending::<()>().await;
                        }
                    }
                }
            },
        ))
    };

    eventually("two restarts", || restarts(&metrics) == 2).await;
    eventually("the third start", || starts.load(Ordering::SeqCst) == 3).await;
    assert!(
        !health.up("maestro"),
        "a restarted source is down until it lists again"
    );
    let status = health
        .status()
        .into_iter()
        .find(|s| s.source == "maestro")
        .unwrap();
    let last = status.last_error.unwrap().message;
    assert!(last.contains("returned"), "{last}");

    gate.notify_one();
    eventually("up after the new task listed", || health.up("maestro")).await;
    assert_eq!(restarts(&metrics), 2, "a healthy task is not restarted");
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains(r#"hcpflow_source_restarts_total{source="maestro"} 2"#),
        "{text}"
    );
    task.abort();
}
