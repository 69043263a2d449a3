//! Source tasks under supervision (docs/design/09-reading-the-upstreams.md §9.7): a source task that
//! panics or returns is restarted with backoff and counted
//! (`hcpflow_source_restarts_total`), and its source is down until the new
//! task lists again — a dead task never leaves `source_up` at its last value.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt;

use crate::sources::SourceContext;
use crate::sources::health::WHOLE_SOURCE;

/// How a supervised task is restarted.
#[derive(Clone, Copy, Debug)]
pub struct Restart {
    /// Delay before the first restart; doubles on each further one.
    pub min_backoff: Duration,
    pub max_backoff: Duration,
    /// A task that ran this long without ending resets the backoff.
    pub healthy_after: Duration,
}

impl Default for Restart {
    fn default() -> Restart {
        Restart {
            min_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            healthy_after: Duration::from_secs(300),
        }
    }
}

/// Run `start(ctx)` forever: each time its future panics or returns, mark
/// the source down, count the restart and start it again with a fresh
/// context after a backoff. Abort the returned future's task to stop.
pub async fn supervise<F, Fut>(ctx: SourceContext, restart: Restart, mut start: F)
where
    F: FnMut(SourceContext) -> Fut,
    Fut: Future<Output = ()>,
{
    let source = ctx.name.clone();
    let mut backoff = restart.min_backoff;
    loop {
        let started = tokio::time::Instant::now();
        // A source holds no state another task could see half-updated
        // (it reports through the store's own locks), so resuming after
        // its panic is sound.
        let ended = AssertUnwindSafe(start(ctx.clone())).catch_unwind().await;
        let why = match ended {
            Ok(()) => "the source task returned".to_string(),
            Err(panic) => format!("the source task panicked: {}", panic_message(&*panic)),
        };
        if started.elapsed() >= restart.healthy_after {
            backoff = restart.min_backoff;
        }
        ctx.metrics.source_restarted(&source);
        ctx.health.failed(&source, WHOLE_SOURCE, &why);
        tracing::error!(source = %source, reason = %why, restart_in = ?backoff, "restarting the source task");
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(restart.max_backoff.max(restart.min_backoff));
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}
