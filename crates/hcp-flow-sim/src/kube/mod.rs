//! A simulated Kubernetes API server for the management-side hops: the real
//! list/watch protocol (resourceVersion, `?watch=1` JSON event streams,
//! BOOKMARK, `410 Gone`, label/field selectors, `limit`/`continue`) over an
//! in-memory object store, so the exporter's real kube client and watchers
//! are what tests exercise.
//!
//! Faults: [`KubeApiHandle::stop`]/[`KubeApiHandle::restart`] (the API server
//! goes away and comes back on the same address), [`KubeApiHandle::compact`]
//! (every older resourceVersion expires), and
//! [`KubeApiHandle::insert_raw_malformed`] (an object that does not match its
//! schema), [`KubeApiHandle::freeze`] (a hung server: sockets open, nothing
//! answered or sent), [`KubeApiHandle::set_installed`] (a CRD missing: 404)
//! and [`KubeApiHandle::set_forbidden`] (RBAC: 403).
//!
//! `resources` lists the kinds served, `store` keeps the objects and their
//! history, `protocol` answers requests from them, and `kubeconfig` writes
//! the file clients reach the servers through.

mod kubeconfig;
pub mod objects;
mod protocol;
mod resources;
pub mod selector;
mod store;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use parking_lot::Mutex;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tracing::debug;

pub use kubeconfig::write_kubeconfig;
pub use objects::{
    ClusterLayout, KubeClusterFaults, KubeClusterSpec, KubeDeletion, KubeExtras, objects_at,
    objects_with,
};
pub use resources::{RESOURCES, ResourceDef};
use store::{Inner, Store};

#[derive(Debug, thiserror::Error)]
pub enum KubeSimError {
    #[error("object has no kind")]
    NoKind,
    #[error("the simulated API server does not serve kind {0}")]
    UnknownKind(String),
    #[error("object of kind {0} has no metadata.name")]
    NoName(String),
    #[error("cannot write kubeconfig {path}")]
    Kubeconfig {
        path: String,
        #[source]
        cause: std::io::Error,
    },
}

/// The running (or stopped) server; cheap to clone.
#[derive(Clone)]
pub struct KubeApiHandle {
    inner: Arc<Inner>,
    addr: SocketAddr,
    server: Arc<Mutex<Option<ServerTask>>>,
}

struct ServerTask {
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
}

pub struct KubeApiServer;

impl KubeApiServer {
    /// Serve on a free loopback port; returns the handle and the base URL.
    pub async fn start() -> std::io::Result<(KubeApiHandle, String)> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (events, _) = broadcast::channel(4096);
        let (epoch, _) = watch::channel(0);
        let inner = Arc::new(Inner {
            store: Mutex::new(Store {
                rv: 1,
                objects: BTreeMap::new(),
                history: VecDeque::new(),
                compacted_to: 1,
                history_limit: 10_000,
                snapshots: HashMap::new(),
                snapshot_order: VecDeque::new(),
                next_snapshot: 1,
            }),
            events,
            epoch,
            // Well inside the exporter's default idle deadline, so a quiet
            // but healthy simulated cluster never looks hung.
            bookmark_interval: Mutex::new(Duration::from_secs(5)),
            frozen: watch::channel(false).0,
            absent: Mutex::new(Default::default()),
            forbidden: Mutex::new(Default::default()),
            items_served: Default::default(),
        });
        let handle = KubeApiHandle {
            inner,
            addr,
            server: Arc::new(Mutex::new(None)),
        };
        handle.serve(listener);
        Ok((handle, format!("http://{addr}")))
    }
}

impl KubeApiHandle {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn serve(&self, listener: tokio::net::TcpListener) {
        let (shutdown, mut rx) = watch::channel(false);
        let app = Router::new()
            .fallback(protocol::handle)
            .with_state(self.inner.clone());
        let task = tokio::spawn(async move {
            let stopped = async move {
                let _ = rx.wait_for(|s| *s).await;
            };
            if let Err(e) = axum::serve(crate::tcp::no_delay(listener), app)
                .with_graceful_shutdown(stopped)
                .await
            {
                debug!(error = %e, "simulated kube API server ended");
            }
        });
        *self.server.lock() = Some(ServerTask { shutdown, task });
    }

    /// The API server goes away: open watches end, new connections are refused.
    pub async fn stop(&self) {
        let task = self.server.lock().take();
        // Stop accepting first, then end the open watches: a watch that
        // arrived between the two would otherwise stream bookmarks from a
        // server that is gone (its connection task outlives the server
        // task), and the exporter would believe it until the watch's own
        // timeout, as no real API server restart allows.
        if let Some(ServerTask { shutdown, task }) = task {
            let _ = shutdown.send(true);
            self.close_watches();
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        self.close_watches();
    }

    /// Serve again on the same address, with the objects changed while down.
    /// Like a restarted API server's fresh watch cache, older resourceVersions
    /// are gone, so watchers relist.
    pub async fn restart(&self) -> std::io::Result<()> {
        self.stop().await;
        {
            let mut store = self.inner.store.lock();
            store.history.clear();
            // Other writes move a real server's revision on; every version a
            // client holds is now older than the compaction.
            store.rv += 1;
            store.compacted_to = store.rv;
        }
        let listener = tokio::net::TcpListener::bind(self.addr).await?;
        self.serve(listener);
        Ok(())
    }
}
