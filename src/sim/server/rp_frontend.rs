//! The ARO HCP RP frontend: hcpOpenShiftClusters listed per subscription
//! (ARM paging with `$top`/`$skipToken`) or read one by one.

use std::sync::Arc;

use axum::extract::{RawQuery, Request, State};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use super::shared::{json_response, param, query_pairs, respond};
use crate::sim::plan::Plan;
use crate::sim::wire::{self, RpApiVersion};
use crate::sim::{Api, World};

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
            Some(body) => {
                respond(
                    &world,
                    Api::RpFrontend,
                    1,
                    json_response(StatusCode::OK, &body),
                )
                .await
            }
            None => {
                let msg = format!(
                    "The Resource 'Microsoft.RedHatOpenShift/hcpOpenShiftClusters/{name}' under resource group '{rg}' was not found."
                );
                respond(
                    &world,
                    Api::RpFrontend,
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
    respond(
        &world,
        Api::RpFrontend,
        n,
        json_response(StatusCode::OK, &body),
    )
    .await
}
