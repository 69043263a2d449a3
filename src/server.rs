//! The HTTP surface: `/metrics`, `/healthz`, `/readyz`, `/api/v1/clusters`,
//! `/api/v1/clusters/{cluster_id}`, and the web UI's routes (`crate::ui`).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Extension, Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::api::timeline_json;
use crate::config::UiConfig;
use crate::metrics::exposition::Format;
use crate::store::Store;

pub fn router(store: Arc<Store>, ui: UiConfig) -> Router {
    let rows = crate::ui::Rows::new(store.clone());
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/api/v1/clusters", get(clusters))
        // A wildcard: self-managed ids hold a `/`, provisional ids and ARM
        // resource ids many.
        .route("/api/v1/clusters/{*cluster_id}", get(cluster))
        .with_state(store)
        .layer(Extension(rows.clone()))
        .merge(crate::ui::routes(rows, ui))
}

/// Serve the exporter's routes until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    store: Arc<Store>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_router(listener, router(store, UiConfig::default()), shutdown).await
}

/// Serve `routes` (the exporter's, perhaps with more) until `shutdown` resolves.
pub async fn serve_router(
    listener: tokio::net::TcpListener,
    routes: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, routes)
        .with_graceful_shutdown(shutdown)
        .await
}

async fn metrics(State(store): State<Arc<Store>>, headers: HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = Format::negotiate(accept);
    // Rendering is CPU work on cached text; keep it off the async workers.
    let body = tokio::task::spawn_blocking(move || store.scrape(format)).await;
    match body {
        Ok(body) => ([(header::CONTENT_TYPE, format.content_type())], body).into_response(),
        Err(error) => {
            tracing::error!(%error, "rendering /metrics failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(store): State<Arc<Store>>) -> Response {
    let sources = store.source_status();
    let ready = sources.iter().all(|s| s.synced);
    let body = serde_json::json!({
        "ready": ready,
        "clusters": store.len(),
        "sources": sources,
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, axum::Json(body)).into_response()
}

/// Without a query string every timeline, as it always was; with one, a
/// filtered page of rows for the UI (docs/ui.md).
async fn clusters(
    State(store): State<Arc<Store>>,
    Extension(rows): Extension<Arc<crate::ui::Rows>>,
    RawQuery(query): RawQuery,
) -> Response {
    if let Some(query) = query.filter(|q| !q.is_empty()) {
        return crate::ui::list(rows, &query).await;
    }
    let judge = store.judge();
    let body = store.with_timelines(|timelines| {
        let items: Vec<_> = timelines.map(|t| timeline_json(t, &judge)).collect();
        serde_json::to_vec(&serde_json::json!({ "items": items }))
    });
    json_response(body)
}

async fn cluster(State(store): State<Arc<Store>>, Path(cluster_id): Path<String>) -> Response {
    let judge = store.judge();
    match store.resolve(&cluster_id, |t| {
        serde_json::to_vec(&timeline_json(t, &judge))
    }) {
        Some(body) => json_response(body),
        None => (
            StatusCode::NOT_FOUND,
            axum::Json(serde_json::json!({
                "error": "cluster not found",
                "cluster_id": cluster_id,
            })),
        )
            .into_response(),
    }
}

fn json_response(body: Result<Vec<u8>, serde_json::Error>) -> Response {
    match body {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(error) => {
            tracing::error!(%error, "serialising timelines failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
