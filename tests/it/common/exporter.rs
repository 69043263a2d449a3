//! The real exporter, started the way `serve` and `demo` start it, and
//! served on a free loopback port.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hcp_flow::app::{self, Exporter};
use hcp_flow::clock::Clock;
use hcp_flow::config::Config;
use hcp_flow::store::Store;

use super::world::TestWorld;

/// An exporter to start: `config` with what the test sets.
pub struct ExporterBuilder {
    config: Config,
    time_scale: f64,
    clock: Clock,
    routes: Option<axum::Router>,
}

/// An exporter over `config`, histogram bounds as `serve` has them.
pub fn with_config(config: &Config) -> ExporterBuilder {
    ExporterBuilder {
        config: config.clone(),
        time_scale: 1.0,
        clock: Clock::Real,
        routes: None,
    }
}

/// The exporter `hcp-flow demo` runs over `world`: its configuration,
/// histogram bounds divided by its speed.
pub fn of_world(world: &TestWorld) -> ExporterBuilder {
    with_config(&world.config).time_scale(world.speed())
}

impl ExporterBuilder {
    /// Divides histogram bounds (the demo's speed).
    pub fn time_scale(mut self, time_scale: f64) -> Self {
        self.time_scale = time_scale;
        self
    }

    /// The clock the model and the sources read (a world's manual one).
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Routes served beside the exporter's own (a world's ground truth).
    pub fn routes(mut self, routes: axum::Router) -> Self {
        self.routes = Some(routes);
        self
    }

    /// Started, sources running, not served.
    pub fn start(self) -> Exporter {
        super::init();
        let exporter = Exporter::start_with_clock(&self.config, self.time_scale, self.clock)
            .expect("the exporter starts");
        match self.routes {
            Some(routes) => exporter.with_routes(routes),
            None => exporter,
        }
    }

    /// Started and served on a free loopback port until dropped.
    pub async fn serve(self) -> Served {
        let (served, task) = self
            .serve_until(std::future::pending(), Duration::from_secs(1))
            .await;
        Served {
            url: served.url,
            store: served.store,
            task,
            _load: served.load,
        }
    }

    /// Started and served on a free loopback port until `shutdown`, as
    /// `serve` runs it.
    async fn serve_until(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
        grace: Duration,
    ) -> (Bound, tokio::task::JoinHandle<()>) {
        let load = super::load::share();
        let exporter = self.start();
        let store = exporter.store.clone();
        let listener = app::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("a free loopback port");
        let addr = listener
            .local_addr()
            .expect("a bound listener has an address");
        let task = tokio::spawn(async move {
            let _ = exporter.serve(listener, shutdown, grace).await;
        });
        let bound = Bound {
            url: format!("http://{addr}"),
            store,
            load,
        };
        (bound, task)
    }
}

/// What a served exporter is reached by.
struct Bound {
    url: String,
    store: Arc<Store>,
    load: super::load::Share,
}

/// An exporter served until [`Stoppable::stop`] shuts it down as SIGTERM
/// does: the sources stop, and the state directory is written once more.
pub struct Stoppable {
    pub url: String,
    pub store: Arc<Store>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
    _load: super::load::Share,
}

impl Stoppable {
    /// Shut down gracefully and wait until it has.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(20), self.task)
            .await
            .expect("the exporter shuts down within its grace period")
            .expect("the exporter's task ends without a panic");
    }
}

impl ExporterBuilder {
    /// Started and served on a free loopback port until stopped.
    pub async fn serve_stoppable(self) -> Stoppable {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shutdown = async move {
            let _ = stopped.await;
        };
        let (bound, task) = self.serve_until(shutdown, Duration::from_secs(10)).await;
        Stoppable {
            url: bound.url,
            store: bound.store,
            stop,
            task,
            _load: bound.load,
        }
    }
}

/// A served exporter; stopped when dropped.
pub struct Served {
    /// `http://<addr>`, without a trailing slash.
    pub url: String,
    pub store: Arc<Store>,
    task: tokio::task::JoinHandle<()>,
    _load: super::load::Share,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}
