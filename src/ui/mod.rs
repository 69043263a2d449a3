//! The web UI (docs/ui.md): a fleet page at `/`, a cluster page at
//! `/ui/clusters/{cluster_id}`, their assets, the fleet summary
//! `/api/v1/fleet` and the paged list behind `/api/v1/clusters?…`.
//!
//! Every asset is compiled into the binary, so the UI works air-gapped and
//! always matches the exporter serving it. The pages are static; their
//! scripts poll the JSON endpoints, and the server pages and filters the
//! fleet so a browser never downloads all of it.

pub mod fleet;
pub mod verdict;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use parking_lot::Mutex;
use serde::Serialize;

use crate::config::{TRACE_ID_PLACEHOLDER, UiConfig};
use crate::model::{Hop, trace_id_hex};
use crate::store::Store;
use fleet::{ListQuery, Row};

/// The cluster drill-down dashboard (dashboards/hcp-flow-cluster.json):
/// its uid and the variable that selects the cluster.
pub const GRAFANA_CLUSTER_DASHBOARD_UID: &str = "hcp-flow-cluster";
pub const GRAFANA_CLUSTER_VARIABLE: &str = "var-cluster_id";

const FLEET_HTML: &str = include_str!("assets/fleet.html");
const CLUSTER_HTML: &str = include_str!("assets/cluster.html");
const STYLE_CSS: &str = include_str!("assets/style.css");
const COMMON_JS: &str = include_str!("assets/common.js");
const FLEET_JS: &str = include_str!("assets/fleet.js");
const CLUSTER_JS: &str = include_str!("assets/cluster.js");

/// Where a page's settings go: a JSON block the page's script reads.
const SETTINGS_MARK: &str = "{{SETTINGS}}";

#[derive(Clone)]
struct UiState {
    store: Arc<Store>,
    rows: Arc<Rows>,
    config: Arc<UiConfig>,
}

/// How long one copy of the rows serves requests: one page refresh asks for
/// the summary and two lists at once, and every open page polls; at 10,000
/// clusters a copy holds the store's lock for about 10 ms.
const ROWS_MAX_AGE: Duration = Duration::from_secs(1);

/// The fleet's rows, copied from the store at most once per
/// [`ROWS_MAX_AGE`] and shared by the requests in between.
pub struct Rows {
    store: Arc<Store>,
    last: Mutex<Option<(Instant, Arc<Vec<Row>>)>>,
}

impl Rows {
    pub fn new(store: Arc<Store>) -> Arc<Rows> {
        Arc::new(Rows {
            store,
            last: Mutex::new(None),
        })
    }

    /// Blocking (it may copy the fleet): call it off the async workers. A
    /// request arriving while another copies waits for that copy instead of
    /// taking the store's lock again.
    fn get(&self) -> Arc<Vec<Row>> {
        let mut last = self.last.lock();
        if let Some((at, rows)) = last.as_ref()
            && at.elapsed() < ROWS_MAX_AGE
        {
            return rows.clone();
        }
        let rows = Arc::new(rows(&self.store));
        *last = Some((Instant::now(), rows.clone()));
        rows
    }
}

pub fn routes(rows: Arc<Rows>, config: UiConfig) -> Router {
    let store = rows.store.clone();
    Router::new()
        .route("/", get(fleet_page))
        // A wildcard: cluster ids hold `/` and `:`.
        .route("/ui/clusters/{*cluster_id}", get(cluster_page))
        .route("/ui/assets/{name}", get(asset))
        .route("/api/v1/fleet", get(fleet_summary))
        .with_state(UiState {
            store,
            rows,
            config: Arc::new(config),
        })
}

/// What a page's script is told by the server.
#[derive(Debug, Serialize)]
struct PageSettings<'a> {
    /// The cluster page's cluster, as the path named it (decoded).
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster_id: Option<&'a str>,
    trace_id: Option<String>,
    trace_url: Option<String>,
    grafana_url: Option<String>,
    /// Hops in path order.
    hops: Vec<&'static str>,
    hop_budgets_seconds: std::collections::BTreeMap<&'static str, f64>,
    creation_target_seconds: f64,
    /// A deletion's hops in the order it takes them, and its budgets
    /// (docs/design/15-operations.md §15.1, §15.4).
    delete_hops: Vec<&'static str>,
    delete_budgets_seconds: std::collections::BTreeMap<&'static str, f64>,
}

fn settings(store: &Store, config: &UiConfig, cluster_id: Option<&str>) -> String {
    let trace_id = cluster_id.map(trace_id_hex);
    let settings = PageSettings {
        cluster_id,
        trace_url: trace_id
            .as_deref()
            .and_then(|id| trace_url(config.trace_url_template.as_deref(), id)),
        grafana_url: cluster_id.and_then(|id| grafana_cluster_url(config.grafana_url.as_ref(), id)),
        trace_id,
        hops: Hop::ALL.iter().map(|h| h.as_str()).collect(),
        hop_budgets_seconds: store
            .hop_budgets()
            .iter()
            .map(|(hop, d)| (hop.as_str(), d.as_secs_f64()))
            .collect(),
        creation_target_seconds: store.creation_target_seconds(),
        delete_hops: crate::model::DELETE
            .hops
            .iter()
            .map(|h| h.as_str())
            .collect(),
        delete_budgets_seconds: store
            .operation_budgets()
            .delete
            .iter()
            .map(|(hop, d)| (hop.as_str(), d.as_secs_f64()))
            .collect(),
    };
    script_json(&serde_json::to_string(&settings).unwrap_or_else(|_| "{}".to_string()))
}

/// JSON made safe inside a `<script>` element: `<` cannot close it, and the
/// line separators JavaScript once refused are escaped.
fn script_json(json: &str) -> String {
    json.replace('<', "\\u003c")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// The trace UI's link for `trace_id`.
pub fn trace_url(template: Option<&str>, trace_id: &str) -> Option<String> {
    template.map(|t| t.replace(TRACE_ID_PLACEHOLDER, trace_id))
}

/// The cluster dashboard in Grafana at `base`, for `cluster_id`.
pub fn grafana_cluster_url(base: Option<&url::Url>, cluster_id: &str) -> Option<String> {
    let mut url = base?.clone();
    // Grafana may live under a sub-path; the dashboard path goes below it.
    let path = format!(
        "{}/d/{GRAFANA_CLUSTER_DASHBOARD_UID}",
        url.path().trim_end_matches('/')
    );
    url.set_path(&path);
    url.query_pairs_mut()
        .append_pair(GRAFANA_CLUSTER_VARIABLE, cluster_id);
    Some(url.to_string())
}

async fn fleet_page(State(ui): State<UiState>) -> Html<String> {
    Html(FLEET_HTML.replace(SETTINGS_MARK, &settings(&ui.store, &ui.config, None)))
}

async fn cluster_page(State(ui): State<UiState>, Path(cluster_id): Path<String>) -> Html<String> {
    Html(CLUSTER_HTML.replace(
        SETTINGS_MARK,
        &settings(&ui.store, &ui.config, Some(&cluster_id)),
    ))
}

async fn asset(Path(name): Path<String>) -> Response {
    let (content_type, body) = match name.as_str() {
        "style.css" => ("text/css; charset=utf-8", STYLE_CSS),
        "common.js" => ("text/javascript; charset=utf-8", COMMON_JS),
        "fleet.js" => ("text/javascript; charset=utf-8", FLEET_JS),
        "cluster.js" => ("text/javascript; charset=utf-8", CLUSTER_JS),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, content_type),
            // Assets change only with the binary; a short cache keeps an
            // upgrade visible within a minute.
            (header::CACHE_CONTROL, "max-age=60"),
        ],
        body,
    )
        .into_response()
}

/// Every row, copied under the store's lock (with its verdict, judged as
/// the JSON judges it); nothing else happens under it.
fn rows(store: &Store) -> Vec<Row> {
    let judge = store.judge();
    store.with_timelines(|timelines| timelines.map(|t| fleet::row_of(t, &judge)).collect())
}

async fn fleet_summary(State(ui): State<UiState>) -> Response {
    let (store, rows) = (ui.store.clone(), ui.rows.clone());
    // Walking 10,000 rows is CPU work: off the async workers.
    let summary = tokio::task::spawn_blocking(move || {
        let rows = rows.get();
        let now = store.clock().now();
        fleet::summary(
            &rows,
            &store.hop_budgets(),
            store.creation_target_seconds(),
            store.source_status(),
            now,
        )
    })
    .await;
    match summary {
        Ok(summary) => axum::Json(summary).into_response(),
        Err(error) => {
            tracing::error!(%error, "building the fleet summary failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// `/api/v1/clusters` with a query string: one page of rows.
pub async fn list(rows: Arc<Rows>, query: &str) -> Response {
    let query = match ListQuery::parse(url::form_urlencoded::parse(query.as_bytes())) {
        Ok(q) => q,
        Err(error) => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(serde_json::json!({ "error": error.to_string() })),
            )
                .into_response();
        }
    };
    let page = tokio::task::spawn_blocking(move || fleet::list(&rows.get(), &query)).await;
    match page {
        Ok(page) => axum::Json(page).into_response(),
        Err(error) => {
            tracing::error!(%error, "building the cluster list failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

#[cfg(test)]
mod tests;
