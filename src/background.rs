//! The threads the exporter's own work runs on: the sources (polls, pages
//! parsed, watch events mapped, clusters rendered), the model clock and the
//! state writer. They run at a lower OS priority than the threads that serve
//! HTTP, so a scrape never waits behind a page being parsed
//! (docs/design/05-metrics.md §5.5).

use std::future::Future;

use tokio::runtime::{Handle, Runtime};
use tokio::task::JoinHandle;

/// How much lower than the process the background threads run (Linux
/// niceness). At +10 the kernel gives a busy server thread about nine tenths
/// of a shared core; the background still gets all of it between requests.
pub const NICENESS: i32 = 10;

/// The name of every background thread (`top -H`, `ps -L` show it).
pub const THREAD_NAME: &str = "hcp-flow-bg";

/// How much lower the background threads started from now on run; the
/// process's default is [`NICENESS`].
static NICENESS_NOW: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(NICENESS);

/// Run the background threads started from now on `niceness` levels lower
/// than the process (0: at its priority). For a process whose other
/// threads are not the exporter's own servers: the integration tests run
/// simulated upstreams, Prometheus and other tests beside each exporter on
/// two cores, where a background ten levels down got about a tenth of a
/// busy core and fell behind the world it reads; they run everything at one
/// priority instead (docs/development.md).
pub fn set_niceness(niceness: i32) {
    NICENESS_NOW.store(niceness.clamp(0, 19), std::sync::atomic::Ordering::Relaxed);
}

#[derive(Debug, thiserror::Error)]
#[error("cannot start the background threads")]
pub struct BackgroundError(#[source] std::io::Error);

/// A runtime of its own for background work. Dropped from inside another
/// runtime, it stops without waiting (tasks are aborted first by their owner).
pub struct Background {
    runtime: Option<Runtime>,
}

impl Background {
    /// As many worker threads as the process may use, each lowered by
    /// [`NICENESS`] when it starts.
    pub fn start() -> Result<Background, BackgroundError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .thread_name(THREAD_NAME)
            .on_thread_start(lower_this_threads_priority)
            .enable_all()
            .build()
            .map_err(BackgroundError)?;
        Ok(Background {
            runtime: Some(runtime),
        })
    }

    pub fn handle(&self) -> Option<&Handle> {
        self.runtime.as_ref().map(Runtime::handle)
    }

    /// Run `task` on these threads (servers it spawns stay on them) and wait
    /// for what it returns; `None` when the threads stopped first.
    pub async fn run<T: Send + 'static>(
        &self,
        task: impl Future<Output = T> + Send + 'static,
    ) -> Option<T> {
        self.handle()?.spawn(task).await.ok()
    }

    /// Run `task` on the background threads.
    pub fn spawn<F>(&self, task: F) -> JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        match self.handle() {
            Some(handle) => handle.spawn(task),
            // Only after drop began; nothing spawns then, but never panic.
            None => tokio::spawn(task),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            // Blocking here would panic inside the caller's runtime.
            runtime.shutdown_background();
        }
    }
}

/// Lower the calling thread's priority (by [`NICENESS`] unless
/// [`set_niceness`] said otherwise). On Linux a thread's
/// niceness is its own (setpriority on a thread id). A refusal (a sandbox
/// without the syscall) leaves the thread as it was: the exporter is then
/// only slower to answer under load, never wrong.
fn lower_this_threads_priority() {
    let niceness = NICENESS_NOW.load(std::sync::atomic::Ordering::Relaxed);
    if niceness == 0 {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{getpriority_process, setpriority_process};
        let tid = rustix::thread::gettid();
        let result = getpriority_process(Some(tid))
            .and_then(|now| setpriority_process(Some(tid), (now + niceness).min(19)));
        if let Err(error) = result {
            tracing::debug!(%error, "background thread keeps the process's priority");
        }
    }
}

/// The calling thread's niceness (Linux), for tests and the startup summary.
pub fn this_threads_niceness() -> Option<i32> {
    #[cfg(target_os = "linux")]
    {
        rustix::process::getpriority_process(Some(rustix::thread::gettid())).ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn background_work_runs_on_named_threads_below_the_servers_priority() {
        let background = Background::start().expect("background runtime");
        let server = this_threads_niceness().expect("niceness of the test thread");
        let (name, niceness) = background
            .handle()
            .expect("running")
            .spawn(async {
                (
                    std::thread::current().name().map(str::to_string),
                    this_threads_niceness(),
                )
            })
            .await
            .expect("the task ran");
        assert_eq!(name.as_deref(), Some(THREAD_NAME));
        let niceness = niceness.expect("niceness of the background thread");
        assert_eq!(niceness, (server + NICENESS).min(19));
        // Dropped inside a runtime: must not panic.
        drop(background);
    }
}
