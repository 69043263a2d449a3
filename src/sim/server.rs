//! The three loopback HTTP servers and their transport faults.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use axum::Router;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::plan::{Ms, Plan, SHARDS};
use super::search::{Kind, Search, Value as SVal};
use super::wire::{self, RpApiVersion};
use super::{Api, Endpoints, Fault, World};

/// Probability that a request starts a spontaneous 5xx burst (faults on).
const SPONTANEOUS_BURST_P: f64 = 0.002;
const RP_DEFAULT_PAGE: usize = 100;
const RP_MAX_PAGE: usize = 1000;
const OCM_DEFAULT_SIZE: usize = 100;

/// Transport-fault switches of one API.
pub(crate) struct ApiControl {
    api: Api,
    down: watch::Sender<bool>,
    server_errors: AtomicU32,
    malformed: AtomicU32,
    spontaneous: Option<Mutex<ChaCha8Rng>>,
    operations: AtomicU64,
}

impl ApiControl {
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
    fn error(&self, status: StatusCode, code: &str, message: &str) -> Response {
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

fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut r = (status, body.to_string()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

async fn faults(State((world, api)): State<(World, Api)>, req: Request, next: Next) -> Response {
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
async fn respond(world: &World, items: usize, r: Response) -> Response {
    tokio::time::sleep(world.latency().delay(items)).await;
    r
}

fn query_pairs(q: &Option<String>) -> Vec<(String, String)> {
    q.as_deref()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default()
}

fn param<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

// ---------------------------------------------------------------- RP frontend

const RP_TYPE: [&str; 2] = ["Microsoft.RedHatOpenShift", "hcpOpenShiftClusters"];

async fn rp(
    State(world): State<World>,
    method: Method,
    RawQuery(q): RawQuery,
    req: Request,
) -> Response {
    let ctl = world.control(Api::RpFrontend).clone();
    if method != Method::GET {
        return ctl.error(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "the simulated RP only serves GET",
        );
    }
    let pairs = query_pairs(&q);
    let Some(version) = param(&pairs, "api-version") else {
        return ctl.error(
            StatusCode::BAD_REQUEST,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        );
    };
    let Some(v) = RpApiVersion::parse(version) else {
        return ctl.error(
            StatusCode::BAD_REQUEST,
            "InvalidResourceType",
            &format!(
                "The resource type 'hcpOpenShiftClusters' could not be found for api version '{version}'. The supported api-versions are '{}'.",
                RpApiVersion::SUPPORTED
            ),
        );
    };
    let path = req.uri().path().to_string();
    let seg: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let lit = |i: usize, s: &str| seg.get(i).is_some_and(|x| x.eq_ignore_ascii_case(s));
    let now = world.now_ms();
    let plans = world.plans(now);
    let subs = world.subscriptions();

    // /subscriptions/{sub}[/resourceGroups/{rg}]/providers/Microsoft.RedHatOpenShift/hcpOpenShiftClusters[/{name}]
    let (sub, rg, rest) = if lit(0, "subscriptions") && seg.len() >= 2 {
        if lit(2, "resourceGroups") && seg.len() >= 4 {
            (seg[1], Some(seg[3]), 4)
        } else {
            (seg[1], None, 2)
        }
    } else {
        return ctl.error(
            StatusCode::NOT_FOUND,
            "NotFound",
            &format!("No route for '{path}'"),
        );
    };
    if !(lit(rest, "providers") && lit(rest + 1, RP_TYPE[0]) && lit(rest + 2, RP_TYPE[1]))
        || seg.len() > rest + 4
    {
        return ctl.error(
            StatusCode::NOT_FOUND,
            "NotFound",
            &format!("No route for '{path}'"),
        );
    }
    if !subs.iter().any(|s| s.eq_ignore_ascii_case(sub)) {
        return ctl.error(
            StatusCode::NOT_FOUND,
            "SubscriptionNotFound",
            &format!("The subscription '{sub}' could not be found."),
        );
    }
    let mine = |p: &Plan| {
        p.subscription_id.eq_ignore_ascii_case(sub)
            && rg.is_none_or(|rg| p.resource_group.eq_ignore_ascii_case(rg))
    };

    if let Some(name) = seg.get(rest + 3) {
        let Some(rg) = rg else {
            return ctl.error(
                StatusCode::NOT_FOUND,
                "NotFound",
                &format!("No route for '{path}'"),
            );
        };
        let found = plans
            .iter()
            .filter(|p| mine(p) && p.name.eq_ignore_ascii_case(name))
            .find_map(|p| wire::rp_resource(p, now, v));
        return match found {
            Some(body) => respond(&world, 1, json_response(StatusCode::OK, &body)).await,
            None => {
                let msg = format!(
                    "The Resource 'Microsoft.RedHatOpenShift/hcpOpenShiftClusters/{name}' under resource group '{rg}' was not found."
                );
                respond(
                    &world,
                    0,
                    ctl.error(StatusCode::NOT_FOUND, "ResourceNotFound", &msg),
                )
                .await
            }
        };
    }

    let top = match param(&pairs, "$top").map(str::parse::<usize>) {
        None => RP_DEFAULT_PAGE,
        Some(Ok(n)) if n > 0 => n.min(RP_MAX_PAGE),
        Some(_) => {
            return ctl.error(
                StatusCode::BAD_REQUEST,
                "InvalidParameter",
                "$top must be a positive integer",
            );
        }
    };
    let skip = param(&pairs, "$skipToken").map(str::to_string);
    // Resources in a stable order by lower-cased id; the continuation token
    // is the last id served, so churn between pages neither repeats nor
    // skips a surviving resource.
    let mut listed: Vec<(String, &Arc<Plan>)> = plans
        .iter()
        .filter(|p| mine(p) && p.rp_exists(now))
        .map(|p| (p.resource_id().to_lowercase(), p))
        .collect();
    listed.sort_by(|a, b| a.0.cmp(&b.0));
    let start = skip
        .as_ref()
        .map_or(0, |s| listed.partition_point(|(k, _)| k <= s));
    let page: Vec<Value> = listed[start..]
        .iter()
        .take(top)
        .filter_map(|(_, p)| wire::rp_resource(p, now, v))
        .collect();
    let mut body = json!({ "value": page });
    if start + top < listed.len() {
        let last = &listed[start + top - 1].0;
        if let Some(base) = world.endpoints().map(|e| e.rp_frontend) {
            // ARM spells `$skipToken` literally; only the values are encoded.
            let enc =
                |v: &str| url::form_urlencoded::byte_serialize(v.as_bytes()).collect::<String>();
            let mut next = base.clone();
            next.set_path(&path);
            next.set_query(Some(&format!(
                "api-version={}&$top={top}&$skipToken={}",
                enc(version),
                enc(last)
            )));
            body["nextLink"] = json!(next.as_str());
        }
    }
    let n = body["value"].as_array().map_or(0, Vec::len);
    respond(&world, n, json_response(StatusCode::OK, &body)).await
}

// ---------------------------------------------------------- Clusters Service

#[derive(Clone, Copy)]
enum CsApi {
    AroHcp,
    ClustersMgmt,
}

impl CsApi {
    fn prefix(self) -> &'static str {
        match self {
            CsApi::AroHcp => "/api/aro_hcp/v1alpha1",
            CsApi::ClustersMgmt => "/api/clusters_mgmt/v1",
        }
    }
}

fn cs_kind(field: &str) -> Option<Kind> {
    match field {
        "id"
        | "name"
        | "state"
        | "status.state"
        | "azure.subscription_id"
        | "azure.resource_group_name"
        | "azure.resource_name"
        | "region.id" => Some(Kind::Str),
        "creation_timestamp" => Some(Kind::Time),
        _ => None,
    }
}

fn cs_field<'a>(p: &'a Plan, state: &'static str) -> impl Fn(&str) -> SVal<'a> + 'a {
    move |f| match f {
        "id" => SVal::Str(&p.cluster_id),
        "name" | "azure.resource_name" => SVal::Str(&p.name),
        "state" | "status.state" => SVal::Str(state),
        "azure.subscription_id" => SVal::Str(&p.subscription_id),
        "azure.resource_group_name" => SVal::Str(&p.resource_group),
        "region.id" => SVal::Str(super::plan::REGION),
        "creation_timestamp" => SVal::Time(p.cs_created),
        _ => SVal::Null,
    }
}

struct Paging {
    page: usize,
    size: usize,
}

fn paging(pairs: &[(String, String)]) -> Result<Paging, String> {
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
fn page_of<T>(all: Vec<T>, pg: &Paging) -> (usize, Vec<T>) {
    let total = all.len();
    let items = all
        .into_iter()
        .skip((pg.page - 1).saturating_mul(pg.size))
        .take(pg.size)
        .collect();
    (total, items)
}

async fn cs_list(world: World, flavor: CsApi, q: Option<String>) -> Response {
    let ctl = world.control(Api::ClustersService).clone();
    let pairs = query_pairs(&q);
    let pg = match paging(&pairs) {
        Ok(p) => p,
        Err(e) => return ctl.error(StatusCode::BAD_REQUEST, "BadRequest", &e),
    };
    let search = match Search::parse(param(&pairs, "search").unwrap_or(""), cs_kind) {
        Ok(s) => s,
        Err(e) => {
            let msg = format!(
                "Can't parse search query '{}': {e}",
                param(&pairs, "search").unwrap_or("")
            );
            return ctl.error(StatusCode::BAD_REQUEST, "BadRequest", &msg);
        }
    };
    let now = world.now_ms();
    let plans = world.plans(now);
    let matched: Vec<&Arc<Plan>> = plans
        .iter()
        .filter(|p| {
            p.cs_state(now)
                .is_some_and(|state| search.matches(cs_field(p, state)))
        })
        .collect();
    let (total, page) = page_of(matched, &pg);
    let items: Vec<Value> = page
        .iter()
        .filter_map(|p| wire::cs_cluster(p, now, flavor.prefix()))
        .collect();
    let n = items.len();
    let body = json!({ "kind": "ClusterList", "page": pg.page, "size": n, "total": total, "items": items });
    respond(&world, n, json_response(StatusCode::OK, &body)).await
}

enum CsSub {
    Cluster,
    Status,
    Shard,
}

async fn cs_get(world: World, flavor: CsApi, id: String, sub: CsSub) -> Response {
    let ctl = world.control(Api::ClustersService).clone();
    let now = world.now_ms();
    let plans = world.plans(now);
    let prefix = flavor.prefix();
    let found = plans
        .iter()
        .find(|p| p.cluster_id == id && p.cs_exists(now))
        .and_then(|p| match sub {
            CsSub::Cluster => wire::cs_cluster(p, now, prefix),
            CsSub::Status => wire::cs_status(p, now, prefix),
            CsSub::Shard => Some(wire::provision_shard(
                &p.shard(),
                prefix,
                world.inner.params.t0 - 30 * 86_400_000,
            )),
        });
    match found {
        Some(body) => respond(&world, 1, json_response(StatusCode::OK, &body)).await,
        None => {
            respond(
                &world,
                0,
                ctl.error(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    &format!("Cluster '{id}' not found"),
                ),
            )
            .await
        }
    }
}

async fn cs_shards(world: World, flavor: CsApi) -> Response {
    let created = world.inner.params.t0 - 30 * 86_400_000;
    let items: Vec<Value> = SHARDS
        .iter()
        .map(|s| wire::provision_shard(s, flavor.prefix(), created))
        .collect();
    let body = json!({ "kind": "ProvisionShardList", "page": 1, "size": items.len(), "total": items.len(), "items": items });
    respond(&world, SHARDS.len(), json_response(StatusCode::OK, &body)).await
}

fn cs_router(world: &World) -> Router {
    let mut r = Router::new();
    for flavor in [CsApi::AroHcp, CsApi::ClustersMgmt] {
        let p = flavor.prefix();
        r = r
            .route(
                &format!("{p}/clusters"),
                get(move |State(w): State<World>, RawQuery(q): RawQuery| cs_list(w, flavor, q)),
            )
            .route(
                &format!("{p}/clusters/{{id}}"),
                get(move |State(w): State<World>, Path(id): Path<String>| {
                    cs_get(w, flavor, id, CsSub::Cluster)
                }),
            )
            .route(
                &format!("{p}/clusters/{{id}}/status"),
                get(move |State(w): State<World>, Path(id): Path<String>| {
                    cs_get(w, flavor, id, CsSub::Status)
                }),
            )
            .route(
                &format!("{p}/clusters/{{id}}/provision_shard"),
                get(move |State(w): State<World>, Path(id): Path<String>| {
                    cs_get(w, flavor, id, CsSub::Shard)
                }),
            )
            .route(
                &format!("{p}/provision_shards"),
                get(move |State(w): State<World>| cs_shards(w, flavor)),
            );
    }
    let ctl = world.control(Api::ClustersService).clone();
    r.fallback(move || {
        let ctl = ctl.clone();
        async move { ctl.error(StatusCode::NOT_FOUND, "NotFound", "no such resource") }
    })
    .with_state(world.clone())
}

// -------------------------------------------------------------------- Maestro

fn maestro_kind(field: &str) -> Option<Kind> {
    match field {
        "id" | "name" | "consumer_name" => Some(Kind::Str),
        "version" => Some(Kind::Int),
        "created_at" | "updated_at" | "deleted_at" => Some(Kind::Time),
        _ => None,
    }
}

fn maestro_field<'a>(p: &'a Plan, now: Ms) -> impl Fn(&str) -> SVal<'a> + 'a {
    move |f| match f {
        "id" => SVal::Str(&p.bundle_id),
        "name" => SVal::Str(&p.cluster_id),
        "consumer_name" => SVal::Str(p.shard().consumer_name),
        "version" => SVal::Int(1),
        "created_at" => SVal::Time(p.bundle_created),
        "updated_at" => SVal::Time(p.updated_at(now)),
        "deleted_at" => p.bundle_deleted_at(now).map_or(SVal::Null, SVal::Time),
        _ => SVal::Null,
    }
}

/// `orderBy`: comma-separated `field [asc|desc]` over the sortable columns.
fn order_by(spec: &str) -> Result<Vec<(String, bool)>, String> {
    spec.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|part| {
            let mut words = part.split_whitespace();
            let field = words.next().unwrap_or_default().to_string();
            let desc = match words.next().map(str::to_ascii_lowercase).as_deref() {
                None | Some("asc") => false,
                Some("desc") => true,
                Some(other) => return Err(format!("invalid order direction '{other}'")),
            };
            if words.next().is_some() || maestro_kind(&field).is_none() || field == "deleted_at" {
                return Err(format!("invalid order by '{part}'"));
            }
            Ok((field, desc))
        })
        .collect()
}

fn sort_key(p: &Plan, now: Ms, field: &str) -> (Ms, String) {
    match field {
        "updated_at" => (p.updated_at(now), String::new()),
        "created_at" => (p.bundle_created, String::new()),
        "version" => (1, String::new()),
        "consumer_name" => (0, p.shard().consumer_name.to_string()),
        "name" => (0, p.cluster_id.clone()),
        _ => (0, p.bundle_id.clone()),
    }
}

async fn maestro_list(State(world): State<World>, RawQuery(q): RawQuery) -> Response {
    let ctl = world.control(Api::Maestro).clone();
    let pairs = query_pairs(&q);
    let pg = match paging(&pairs) {
        Ok(p) => p,
        Err(e) => return ctl.error(StatusCode::BAD_REQUEST, "BadRequest", &e),
    };
    let raw_search = param(&pairs, "search").unwrap_or("");
    let search = match Search::parse(raw_search, maestro_kind) {
        Ok(s) => s,
        Err(e) => {
            let msg = format!("Failed to parse search query: {raw_search}: {e}");
            return ctl.error(StatusCode::BAD_REQUEST, "BadRequest", &msg);
        }
    };
    let order = match order_by(param(&pairs, "orderBy").unwrap_or("")) {
        Ok(o) => o,
        Err(e) => return ctl.error(StatusCode::BAD_REQUEST, "BadRequest", &e),
    };
    let now = world.now_ms();
    let plans = world.plans(now);
    let mut matched: Vec<&Arc<Plan>> = plans
        .iter()
        .filter(|p| p.bundle_exists(now) && search.matches(maestro_field(p, now)))
        .collect();
    // Default: creation order (then id), like the service's primary key scan.
    matched.sort_by(|a, b| {
        for (field, desc) in &order {
            let o = sort_key(a, now, field).cmp(&sort_key(b, now, field));
            let o = if *desc { o.reverse() } else { o };
            if o.is_ne() {
                return o;
            }
        }
        (a.bundle_created, &a.bundle_id).cmp(&(b.bundle_created, &b.bundle_id))
    });
    let (total, page) = page_of(matched, &pg);
    let items: Vec<Value> = page.iter().filter_map(|p| wire::bundle(p, now)).collect();
    let n = items.len();
    let body = json!({ "kind": "ResourceBundleList", "page": pg.page, "size": n, "total": total, "items": items });
    respond(&world, n, json_response(StatusCode::OK, &body)).await
}

async fn maestro_get(State(world): State<World>, Path(id): Path<String>) -> Response {
    let ctl = world.control(Api::Maestro).clone();
    let now = world.now_ms();
    let plans = world.plans(now);
    match plans
        .iter()
        .find(|p| p.bundle_id == id)
        .and_then(|p| wire::bundle(p, now))
    {
        Some(body) => respond(&world, 1, json_response(StatusCode::OK, &body)).await,
        None => {
            let msg = format!("Resource Bundle with id='{id}' not found");
            respond(
                &world,
                0,
                ctl.error(StatusCode::NOT_FOUND, "NotFound", &msg),
            )
            .await
        }
    }
}

async fn maestro_consumers(State(world): State<World>) -> Response {
    let created = wire::time(world.inner.params.t0 - 30 * 86_400_000, 6);
    let items: Vec<Value> = SHARDS
        .iter()
        .map(|s| {
            json!({
                "id": s.id, "kind": "Consumer", "href": format!("/api/maestro/v1/consumers/{}", s.id),
                "name": s.consumer_name, "labels": {}, "created_at": created, "updated_at": created
            })
        })
        .collect();
    let body = json!({ "kind": "ConsumerList", "page": 1, "size": items.len(), "total": items.len(), "items": items });
    respond(&world, SHARDS.len(), json_response(StatusCode::OK, &body)).await
}

fn maestro_router(world: &World) -> Router {
    let ctl = world.control(Api::Maestro).clone();
    Router::new()
        .route("/api/maestro/v1/resource-bundles", get(maestro_list))
        .route("/api/maestro/v1/resource-bundles/{id}", get(maestro_get))
        .route("/api/maestro/v1/consumers", get(maestro_consumers))
        .fallback(move || {
            let ctl = ctl.clone();
            async move { ctl.error(StatusCode::NOT_FOUND, "NotFound", "no such resource") }
        })
        .with_state(world.clone())
}

// ------------------------------------------------------------------- serving

fn router(world: &World, api: Api) -> Router {
    let r = match api {
        Api::RpFrontend => Router::new().fallback(rp).with_state(world.clone()),
        Api::ClustersService => cs_router(world),
        Api::Maestro => maestro_router(world),
    };
    r.layer(middleware::from_fn_with_state((world.clone(), api), faults))
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
    let mut urls = urls.into_iter();
    let mut next = || {
        urls.next()
            .ok_or_else(|| std::io::Error::other("missing endpoint"))
    };
    Ok(Endpoints {
        rp_frontend: next()?,
        clusters_service: next()?,
        maestro: next()?,
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
        if let Err(e) = axum::serve(l, router.clone())
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::warn!(%addr, error = %e, "simulated API server stopped");
        }
    }
}
