//! What the three simulated APIs share: their transport faults, JSON
//! responses after the upstream's latency, query parameters and OCM-style
//! paging.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::{Api, Fault, World};

/// Probability that a request starts a spontaneous 5xx burst (faults on).
const SPONTANEOUS_BURST_P: f64 = 0.002;
const OCM_DEFAULT_SIZE: usize = 100;

/// Transport-fault switches of one API.
pub(crate) struct ApiControl {
    api: Api,
    pub(super) down: watch::Sender<bool>,
    server_errors: AtomicU32,
    malformed: AtomicU32,
    spontaneous: Option<Mutex<ChaCha8Rng>>,
    operations: AtomicU64,
    /// Objects answered (list items, or 1 per object read): what a reader
    /// cost this API, for tests that a walk reads one creation, not a fleet.
    items_served: AtomicU64,
    /// Requests about node pools answered (lists and reads, errors too):
    /// what reading a fleet's pools costs this API.
    node_pool_requests: AtomicU64,
    /// Ids of the objects read by a search on their id (Maestro's `id in
    /// (...)`): for tests that a reader did not need to read them so.
    read_by_id: Mutex<std::collections::BTreeSet<String>>,
}

impl ApiControl {
    pub(super) fn served(&self, items: usize) {
        self.items_served.fetch_add(items as u64, Ordering::Relaxed);
    }

    pub(super) fn read_by_id<'a>(&self, ids: impl IntoIterator<Item = &'a str>) {
        self.read_by_id
            .lock()
            .extend(ids.into_iter().map(str::to_string));
    }

    /// The ids of the objects read by a search on their id so far.
    pub fn ids_read_by_id(&self) -> std::collections::BTreeSet<String> {
        self.read_by_id.lock().clone()
    }

    pub(super) fn node_pool_request(&self) {
        self.node_pool_requests.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests about node pools this API has answered so far (a request
    /// a transport fault answered is not one: it never reached the route).
    pub fn node_pool_requests(&self) -> u64 {
        self.node_pool_requests.load(Ordering::Relaxed)
    }

    /// Objects this API has answered so far.
    pub fn items_served(&self) -> u64 {
        self.items_served.load(Ordering::Relaxed)
    }

    pub fn new(api: Api, seed: u64, faults: bool) -> ApiControl {
        let spontaneous = faults.then(|| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(u64::MAX - 1 - api as u64);
            Mutex::new(rng)
        });
        ApiControl {
            api,
            down: watch::Sender::new(false),
            server_errors: AtomicU32::new(0),
            malformed: AtomicU32::new(0),
            spontaneous,
            operations: AtomicU64::new(0),
            items_served: AtomicU64::new(0),
            node_pool_requests: AtomicU64::new(0),
            read_by_id: Mutex::default(),
        }
    }

    pub fn inject(&self, fault: Fault) {
        match fault {
            Fault::ServerErrors { for_requests, .. } => {
                self.server_errors.fetch_add(for_requests, Ordering::SeqCst);
            }
            Fault::MalformedJson { for_requests, .. } => {
                self.malformed.fetch_add(for_requests, Ordering::SeqCst);
            }
            Fault::Down { .. } => {
                self.down.send_replace(true);
            }
            Fault::Up { .. } => {
                self.down.send_replace(false);
            }
            // The stream's own switches (`maestro_grpc`).
            Fault::StreamDrop | Fault::MalformedEvents { .. } => {}
        }
    }

    fn take(counter: &AtomicU32) -> bool {
        counter
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    fn operation_id(&self) -> String {
        format!(
            "sim-{:?}-{}",
            self.api,
            self.operations.fetch_add(1, Ordering::Relaxed)
        )
        .to_lowercase()
    }

    /// The API's own error body for `status`.
    pub(super) fn error(&self, status: StatusCode, code: &str, message: &str) -> Response {
        let body = match self.api {
            Api::RpFrontend => json!({ "error": { "code": code, "message": message } }),
            Api::ClustersService => json!({
                "kind": "Error",
                "id": status.as_u16().to_string(),
                "href": format!("/api/clusters_mgmt/v1/errors/{}", status.as_u16()),
                "code": format!("CLUSTERS-MGMT-{}", status.as_u16()),
                "reason": message,
                "operation_id": self.operation_id(),
            }),
            Api::Maestro => {
                // rh-trex service error codes.
                let id = match status.as_u16() {
                    400 => 21,
                    404 => 7,
                    _ => 9,
                };
                json!({
                    "kind": "Error",
                    "id": id.to_string(),
                    "href": format!("/api/maestro/v1/errors/{id}"),
                    "code": format!("maestro-{id}"),
                    "reason": message,
                    "operation_id": self.operation_id(),
                })
            }
        };
        json_response(status, &body)
    }

    /// A 200 whose body breaks off mid-document.
    fn malformed(&self) -> Response {
        let body = match self.api {
            Api::RpFrontend => r#"{"value":[{"id":"/subscriptions/"#,
            Api::ClustersService => r#"{"kind":"ClusterList","page":1,"size":100,"total":"#,
            Api::Maestro => r#"{"kind":"ResourceBundleList","page":1,"items":[{"id":"#,
        };
        let mut r = (StatusCode::OK, body).into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        r
    }
}

pub(super) fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut r = (status, body.to_string()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

pub(super) async fn faults(
    State((world, api)): State<(World, Api)>,
    req: Request,
    next: Next,
) -> Response {
    let ctl = world.control(api).clone();
    let fault = if *ctl.down.borrow() {
        Some(ctl.error(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "the service is down",
        ))
    } else if ApiControl::take(&ctl.server_errors) {
        Some(ctl.error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerError",
            "injected server error",
        ))
    } else if ApiControl::take(&ctl.malformed) {
        Some(ctl.malformed())
    } else {
        let burst = ctl.spontaneous.as_ref().and_then(|rng| {
            let mut rng = rng.lock();
            rng.random_bool(SPONTANEOUS_BURST_P)
                .then(|| rng.random_range(0..=2u32))
        });
        burst.map(|more| {
            ctl.server_errors.fetch_add(more, Ordering::SeqCst);
            tracing::debug!(?api, "spontaneous 5xx burst");
            ctl.error(
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                "the service is temporarily unavailable",
            )
        })
    };
    match fault {
        Some(r) => {
            tokio::time::sleep(world.latency().delay(0)).await;
            r
        }
        None => next.run(req).await,
    }
}

/// Answers after the upstream latency of a response with `items` items.
pub(super) async fn respond(world: &World, api: Api, items: usize, r: Response) -> Response {
    world.control(api).served(items);
    tokio::time::sleep(world.latency().delay(items)).await;
    r
}

pub(super) fn query_pairs(q: &Option<String>) -> Vec<(String, String)> {
    q.as_deref()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn param<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

pub(super) struct Paging {
    pub(super) page: usize,
    pub(super) size: usize,
}

pub(super) fn paging(pairs: &[(String, String)]) -> Result<Paging, String> {
    let num = |name: &str, default: usize| -> Result<usize, String> {
        match param(pairs, name) {
            None | Some("") => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("'{v}' is not a valid value for '{name}'")),
        }
    };
    let page = num("page", 1)?;
    if page == 0 {
        return Err("'page' must be 1 or more".into());
    }
    Ok(Paging {
        page,
        size: num("size", OCM_DEFAULT_SIZE)?,
    })
}

/// One page of an OCM-style list.
pub(super) fn page_of<T>(all: Vec<T>, pg: &Paging) -> (usize, Vec<T>) {
    let total = all.len();
    let items = all
        .into_iter()
        .skip((pg.page - 1).saturating_mul(pg.size))
        .take(pg.size)
        .collect();
    (total, items)
}
