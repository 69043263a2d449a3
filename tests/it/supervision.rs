//! A source task that panics or returns is restarted with backoff, counted,
//! and its source is down until the new task lists again.

use crate::common::store;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hcp_flow::metrics::exporter::{ExporterMetrics, SourceLabels};
use hcp_flow::metrics::exposition::Format;
use hcp_flow::sources::SourceContext;
use hcp_flow::supervise::{Restart, supervise};

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
    let store = store::builder().sources(&["maestro"]).build();
    let (health, metrics) = (store.health(), store.exporter_metrics());
    let ctx = SourceContext {
        name: "maestro".into(),
        sink: store.clone(),
        metrics: metrics.clone(),
        clock: Default::default(),
        health: health.clone(),
    };
    let starts = Arc::new(AtomicUsize::new(0));
    // Lets the test hold the third incarnation before it lists, to see
    // the source down in between.
    let gate = Arc::new(tokio::sync::Notify::new());

    let task = {
        let (starts, gate) = (starts.clone(), gate.clone());
        tokio::spawn(supervise(
            ctx,
            Restart {
                min_backoff: Duration::from_millis(20),
                max_backoff: Duration::from_millis(40),
                healthy_after: Duration::from_secs(60),
            },
            move |ctx: SourceContext| {
                let (health, starts, gate) = (ctx.health, starts.clone(), gate.clone());
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
    let text = store.scrape(Format::Text);
    assert!(
        text.contains(r#"hcpflow_source_restarts_total{source="maestro"} 2"#),
        "{text}"
    );
    task.abort();
}
