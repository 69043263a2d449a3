//! The three loopback HTTP servers and their transport faults.

//!
//! One file per API (`rp_frontend`, `clusters_service`, `maestro`); what
//! they share, the fault switches included, is in `shared`.

mod clusters_service;
mod maestro;
pub(crate) mod maestro_grpc;
mod rp_frontend;
mod shared;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::middleware;
use tokio::net::TcpListener;

pub(crate) use shared::ApiControl;

use super::{Api, Endpoints, World};

fn router(world: &World, api: Api) -> Router {
    let r = match api {
        Api::RpFrontend => Router::new()
            .fallback(rp_frontend::rp)
            .with_state(world.clone()),
        Api::ClustersService => clusters_service::cs_router(world),
        Api::Maestro => maestro::maestro_router(world),
    };
    r.layer(middleware::from_fn_with_state(
        (world.clone(), api),
        shared::faults,
    ))
}

pub(crate) async fn serve_all(world: World) -> std::io::Result<Endpoints> {
    let mut urls = Vec::new();
    for api in Api::ALL {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let addr = listener.local_addr()?;
        let url = url::Url::parse(&format!("http://{addr}/"))
            .map_err(|e| std::io::Error::other(format!("bad loopback url for {addr}: {e}")))?;
        tracing::info!(?api, %url, "simulated API listening");
        tokio::spawn(run(
            listener,
            addr,
            router(&world, api),
            world.control(api).clone(),
        ));
        urls.push(url);
    }
    // Maestro's gRPC service, on its own port as in Maestro (docs/design/11-simulated-world.md §11.8).
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let addr = listener.local_addr()?;
    let maestro_grpc = url::Url::parse(&format!("http://{addr}"))
        .map_err(|e| std::io::Error::other(format!("bad loopback url for {addr}: {e}")))?;
    tracing::info!(url = %maestro_grpc, "simulated Maestro gRPC listening");
    tokio::spawn(maestro_grpc::serve(world.clone(), listener));
    let mut urls = urls.into_iter();
    let mut next = || {
        urls.next()
            .ok_or_else(|| std::io::Error::other("missing endpoint"))
    };
    Ok(Endpoints {
        rp_frontend: next()?,
        clusters_service: next()?,
        maestro: next()?,
        maestro_grpc,
    })
}

/// Serves until the API is marked down, closes the port (connection refused),
/// and binds the same address again once it is up.
async fn run(listener: TcpListener, addr: SocketAddr, router: Router, ctl: Arc<ApiControl>) {
    let mut listener = Some(listener);
    let mut up = ctl.down.subscribe();
    loop {
        if up.wait_for(|down| !*down).await.is_err() {
            return;
        }
        let l = match listener.take() {
            Some(l) => l,
            None => match TcpListener::bind(addr).await {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(%addr, error = %e, "cannot listen again; retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let mut down = ctl.down.subscribe();
        let shutdown = async move {
            let _ = down.wait_for(|down| *down).await;
        };
        if let Err(e) = axum::serve(crate::tcp::no_delay(l), router.clone())
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::warn!(%addr, error = %e, "simulated API server stopped");
        }
    }
}
