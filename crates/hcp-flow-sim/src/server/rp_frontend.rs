//! The ARO HCP RP frontend: hcpOpenShiftClusters listed per subscription
//! (ARM paging with `$top`/`$skipToken`) or read one by one, and each
//! cluster's nodePools, listed (paged the same way) or read one by one.

use std::sync::Arc;

use axum::extract::{RawQuery, Request, State};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use super::shared::{ApiControl, json_response, param, query_pairs, respond};
use crate::plan::{Ms, Plan};
use crate::pools::{self, ServicePool};
use crate::wire::{self, RpApiVersion};
use crate::{Api, World};

const RP_DEFAULT_PAGE: usize = 100;
const RP_MAX_PAGE: usize = 1000;

const RP_TYPE: [&str; 2] = ["Microsoft.RedHatOpenShift", "hcpOpenShiftClusters"];

pub(super) async fn rp(
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
    if !(lit(rest, "providers") && lit(rest + 1, RP_TYPE[0]) && lit(rest + 2, RP_TYPE[1])) {
        return no_route(&ctl, &path);
    }
    // [/{name}[/nodePools[/{pool}]]]: a cluster's pools are read within
    // its resource group only, as ARM routes a child resource.
    let depth = seg.len().saturating_sub(rest + 3);
    let pools = depth >= 2;
    if depth > 3 || (pools && (!lit(rest + 4, "nodePools") || rg.is_none())) {
        return no_route(&ctl, &path);
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
    let list = List {
        world: &world,
        path: &path,
        version,
        pairs: &pairs,
    };

    if let Some(name) = seg.get(rest + 3) {
        let Some(rg) = rg else {
            return no_route(&ctl, &path);
        };
        let cluster = plans
            .iter()
            .find(|p| mine(p) && p.name.eq_ignore_ascii_case(name) && p.rp_exists(now));
        let not_found = |what: String| {
            let msg = format!("The Resource '{what}' under resource group '{rg}' was not found.");
            ctl.error(StatusCode::NOT_FOUND, "ResourceNotFound", &msg)
        };
        let cluster_type = format!("{}/{}/{name}", RP_TYPE[0], RP_TYPE[1]);
        let Some(p) = cluster else {
            // ARM answers a missing parent's children as the parent.
            let r = not_found(cluster_type);
            return if pools {
                respond_pools(&world, 0, r).await
            } else {
                respond(&world, Api::RpFrontend, 0, r).await
            };
        };
        if !pools {
            return match wire::rp_resource(p, now, v) {
                Some(body) => {
                    respond(
                        &world,
                        Api::RpFrontend,
                        1,
                        json_response(StatusCode::OK, &body),
                    )
                    .await
                }
                None => respond(&world, Api::RpFrontend, 0, not_found(cluster_type)).await,
            };
        }
        let pool = seg.get(rest + 5).copied();
        return cluster_pools(&world, &ctl, &list, p, pool, (rg, &cluster_type), (now, v)).await;
    }

    let listed: Vec<(String, &Arc<Plan>)> = plans
        .iter()
        .filter(|p| mine(p) && p.rp_exists(now))
        .map(|p| (p.resource_id().to_lowercase(), p))
        .collect();
    let body = match list.page(listed, |p| wire::rp_resource(p, now, v)) {
        Ok(body) => body,
        Err(r) => return *r,
    };
    let n = body["value"].as_array().map_or(0, Vec::len);
    respond(
        &world,
        Api::RpFrontend,
        n,
        json_response(StatusCode::OK, &body),
    )
    .await
}

/// A cluster's node pools (`…/nodePools[/{pool}]`), within its resource
/// group, as ARM serves a child resource.
async fn cluster_pools(
    world: &World,
    ctl: &ApiControl,
    list: &List<'_>,
    p: &Plan,
    pool: Option<&str>,
    (rg, cluster_type): (&str, &str),
    (now, v): (Ms, RpApiVersion),
) -> Response {
    let not_found = |what: String| {
        let msg = format!("The Resource '{what}' under resource group '{rg}' was not found.");
        ctl.error(StatusCode::NOT_FOUND, "ResourceNotFound", &msg)
    };
    let service_pools = p.service_pools();
    if let Some(pool) = pool {
        let found = service_pools
            .iter()
            .filter(|sp| sp.short.eq_ignore_ascii_case(pool))
            .find_map(|sp| pools::rp_node_pool(p, sp, now, v));
        return match found {
            Some(body) => respond_pools(world, 1, json_response(StatusCode::OK, &body)).await,
            None => {
                respond_pools(
                    world,
                    0,
                    not_found(format!("{cluster_type}/nodePools/{pool}")),
                )
                .await
            }
        };
    }
    let listed: Vec<(String, &ServicePool<'_>)> = service_pools
        .iter()
        .filter(|sp| p.rp_pool_state(sp, now).is_some())
        .map(|sp| {
            (
                format!("{}/nodePools/{}", p.resource_id(), sp.short).to_lowercase(),
                sp,
            )
        })
        .collect();
    let body = match list.page(listed, |sp| pools::rp_node_pool(p, sp, now, v)) {
        Ok(body) => body,
        Err(r) => return *r,
    };
    let n = body["value"].as_array().map_or(0, Vec::len);
    respond_pools(world, n, json_response(StatusCode::OK, &body)).await
}

fn no_route(ctl: &ApiControl, path: &str) -> Response {
    ctl.error(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("No route for '{path}'"),
    )
}

/// An answer about node pools: counted as one, then as any answer.
async fn respond_pools(world: &World, items: usize, r: Response) -> Response {
    world.control(Api::RpFrontend).node_pool_request();
    respond(world, Api::RpFrontend, items, r).await
}

/// One ARM list request: its path and parameters.
struct List<'a> {
    world: &'a World,
    path: &'a str,
    version: &'a str,
    pairs: &'a [(String, String)],
}

impl List<'_> {
    /// One page of `listed` (keyed by lower-cased id), with the `nextLink`
    /// of the next. Resources in a stable order by that key; the
    /// continuation token is the last key served, so churn between pages
    /// neither repeats nor skips a surviving resource.
    fn page<T>(
        &self,
        mut listed: Vec<(String, T)>,
        render: impl Fn(&T) -> Option<Value>,
    ) -> Result<Value, Box<Response>> {
        let top = match param(self.pairs, "$top").map(str::parse::<usize>) {
            None => RP_DEFAULT_PAGE,
            Some(Ok(n)) if n > 0 => n.min(RP_MAX_PAGE),
            Some(_) => {
                return Err(Box::new(self.world.control(Api::RpFrontend).error(
                    StatusCode::BAD_REQUEST,
                    "InvalidParameter",
                    "$top must be a positive integer",
                )));
            }
        };
        let skip = param(self.pairs, "$skipToken").map(str::to_string);
        listed.sort_by(|a, b| a.0.cmp(&b.0));
        let start = skip
            .as_ref()
            .map_or(0, |s| listed.partition_point(|(k, _)| k <= s));
        let page: Vec<Value> = listed[start..]
            .iter()
            .take(top)
            .filter_map(|(_, x)| render(x))
            .collect();
        let mut body = json!({ "value": page });
        if start + top < listed.len() {
            let last = &listed[start + top - 1].0;
            if let Some(base) = self.world.endpoints().map(|e| e.rp_frontend) {
                // ARM spells `$skipToken` literally; only the values are encoded.
                let enc = |v: &str| {
                    url::form_urlencoded::byte_serialize(v.as_bytes()).collect::<String>()
                };
                let mut next = base.clone();
                next.set_path(self.path);
                next.set_query(Some(&format!(
                    "api-version={}&$top={top}&$skipToken={}",
                    enc(self.version),
                    enc(last)
                )));
                body["nextLink"] = json!(next.as_str());
            }
        }
        Ok(body)
    }
}
