//! Maestro: resource bundles listed with `search` and `orderBy`, read one
//! by one, and the consumers (one per management cluster).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use serde_json::{Value, json};

use super::shared::{json_response, page_of, paging, param, query_pairs, respond};
use crate::plan::{BundlePlan, Ms, Plan, SHARDS};
use crate::search::{Kind, Search, Value as SVal};
use crate::wire;
use crate::{Api, World};

fn maestro_kind(field: &str) -> Option<Kind> {
    match field {
        "id" | "name" | "consumer_name" => Some(Kind::Str),
        "version" => Some(Kind::Int),
        "created_at" | "updated_at" | "deleted_at" => Some(Kind::Time),
        _ => None,
    }
}

fn maestro_field<'a>(p: &'a Plan, b: &'a BundlePlan, now: Ms) -> impl Fn(&str) -> SVal<'a> + 'a {
    move |f| match f {
        "id" => SVal::Str(&b.id),
        "name" => SVal::Str(&b.name),
        "consumer_name" => SVal::Str(p.shard().consumer_name),
        "version" => SVal::Int(1),
        "created_at" => SVal::Time(b.created),
        "updated_at" => SVal::Time(p.updated_at(b, now)),
        "deleted_at" => p.bundle_deleted_at(b, now).map_or(SVal::Null, SVal::Time),
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

fn sort_key(p: &Plan, b: &BundlePlan, now: Ms, field: &str) -> (Ms, String) {
    match field {
        "updated_at" => (p.updated_at(b, now), String::new()),
        "created_at" => (b.created, String::new()),
        "version" => (1, String::new()),
        "consumer_name" => (0, p.shard().consumer_name.to_string()),
        "name" => (0, b.name.clone()),
        _ => (0, b.id.clone()),
    }
}

/// What a bundle list filters by.
enum BundleSearch {
    Columns(Search),
    /// `payload->'metadata'->'labels'->>'KEY' = 'VALUE'`.
    Label(String, String),
}

/// The one JSONB form the sim understands, the cheatsheet's label search:
/// `payload->'metadata'->'labels'->>'KEY' = 'VALUE'` (any spacing, `''` for
/// a quote inside a literal). Anything else: None.
fn parse_label_search(search: &str) -> Option<(String, String)> {
    fn literal(s: &str) -> Option<(String, &str)> {
        let s = s.trim_start().strip_prefix('\'')?;
        let mut out = String::new();
        let mut chars = s.char_indices();
        while let Some((i, c)) = chars.next() {
            if c == '\'' {
                if s[i + 1..].starts_with('\'') {
                    out.push('\'');
                    chars.next();
                } else {
                    return Some((out, &s[i + 1..]));
                }
            } else {
                out.push(c);
            }
        }
        None
    }
    let rest = search.trim_start().strip_prefix("payload")?;
    let rest = rest.trim_start().strip_prefix("->")?;
    let (metadata, rest) = literal(rest)?;
    let rest = rest.trim_start().strip_prefix("->")?;
    let (labels, rest) = literal(rest)?;
    let rest = rest.trim_start().strip_prefix("->>")?;
    let (key, rest) = literal(rest)?;
    let rest = rest.trim_start().strip_prefix('=')?;
    let (value, rest) = literal(rest)?;
    (metadata == "metadata" && labels == "labels" && rest.trim().is_empty()).then_some((key, value))
}

async fn maestro_list(State(world): State<World>, RawQuery(q): RawQuery) -> Response {
    let ctl = world.control(Api::Maestro).clone();
    let pairs = query_pairs(&q);
    let pg = match paging(&pairs) {
        Ok(p) => p,
        Err(e) => return ctl.error(StatusCode::BAD_REQUEST, "BadRequest", &e),
    };
    let raw_search = param(&pairs, "search").unwrap_or("");
    // Maestro hands a search holding `->>` or `@>` to PostgreSQL as one
    // JSONB expression over the payload, and everything else to its
    // SQL-where-like parser (reference: Maestro's search).
    let search = if raw_search.contains("->>") || raw_search.contains("@>") {
        match parse_label_search(raw_search) {
            Some((key, value)) => BundleSearch::Label(key, value),
            None => {
                let msg = format!(
                    "Failed to parse search query: {raw_search}: unsupported JSONB expression"
                );
                return ctl.error(StatusCode::BAD_REQUEST, "BadRequest", &msg);
            }
        }
    } else {
        match Search::parse(raw_search, maestro_kind) {
            Ok(s) => BundleSearch::Columns(s),
            Err(e) => {
                let msg = format!("Failed to parse search query: {raw_search}: {e}");
                return ctl.error(StatusCode::BAD_REQUEST, "BadRequest", &msg);
            }
        }
    };
    let order = match order_by(param(&pairs, "orderBy").unwrap_or("")) {
        Ok(o) => o,
        Err(e) => return ctl.error(StatusCode::BAD_REQUEST, "BadRequest", &e),
    };
    let now = world.now_ms();
    let plans = world.plans(now);
    // Every bundle of every cluster: the HostedCluster's and one per pool.
    let mut matched: Vec<(&Arc<Plan>, &BundlePlan)> = plans
        .iter()
        .flat_map(|p| p.bundles_at(now).map(move |b| (p, b)))
        .filter(|(p, b)| match &search {
            BundleSearch::Columns(search) => search.matches(maestro_field(p, b, now)),
            BundleSearch::Label(key, value) => wire::bundle_labels(p)
                .get(key.as_str())
                .and_then(Value::as_str)
                .is_some_and(|v| v == value),
        })
        .collect();
    // Default: creation order (then id), like the service's primary key scan.
    matched.sort_by(|(pa, a), (pb, b)| {
        for (field, desc) in &order {
            let o = sort_key(pa, a, now, field).cmp(&sort_key(pb, b, now, field));
            let o = if *desc { o.reverse() } else { o };
            if o.is_ne() {
                return o;
            }
        }
        (a.created, &a.id).cmp(&(b.created, &b.id))
    });
    let (total, page) = page_of(matched, &pg);
    if raw_search.trim_start().starts_with("id ") {
        ctl.read_by_id(page.iter().map(|(_, b)| b.id.as_str()));
    }
    let items: Vec<Value> = page
        .iter()
        .filter_map(|(p, b)| wire::bundle(p, b, now))
        .collect();
    let n = items.len();
    let body = json!({ "kind": "ResourceBundleList", "page": pg.page, "size": n, "total": total, "items": items });
    respond(
        &world,
        Api::Maestro,
        n,
        json_response(StatusCode::OK, &body),
    )
    .await
}

async fn maestro_get(State(world): State<World>, Path(id): Path<String>) -> Response {
    let ctl = world.control(Api::Maestro).clone();
    let now = world.now_ms();
    let plans = world.plans(now);
    match plans
        .iter()
        .find_map(|p| p.bundles.iter().find(|b| b.id == id).map(|b| (p, b)))
        .and_then(|(p, b)| wire::bundle(p, b, now))
    {
        Some(body) => {
            respond(
                &world,
                Api::Maestro,
                1,
                json_response(StatusCode::OK, &body),
            )
            .await
        }
        None => {
            let msg = format!("Resource Bundle with id='{id}' not found");
            respond(
                &world,
                Api::Maestro,
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
    respond(
        &world,
        Api::Maestro,
        SHARDS.len(),
        json_response(StatusCode::OK, &body),
    )
    .await
}

pub(super) fn maestro_router(world: &World) -> Router {
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

#[cfg(test)]
mod tests {
    use super::parse_label_search;

    #[test]
    fn the_label_search_of_the_cheatsheet_parses_and_nothing_else_does() {
        let want = Some(("api.openshift.com/id".to_string(), "2abc".to_string()));
        assert_eq!(
            parse_label_search("payload->'metadata'->'labels'->>'api.openshift.com/id'='2abc'"),
            want
        );
        assert_eq!(
            parse_label_search(
                " payload -> 'metadata' -> 'labels' ->> 'api.openshift.com/id' = '2abc' "
            ),
            want
        );
        assert_eq!(
            parse_label_search("payload->'metadata'->'labels'->>'k'='it''s'"),
            Some(("k".to_string(), "it's".to_string()))
        );
        for bad in [
            "payload->'metadata'->'labels'->>'k'='v' and updated_at > '2026-01-01'",
            "payload->'spec'->'labels'->>'k'='v'",
            "payload->'metadata'->'labels'->>'k'",
            "payload @> '{}'",
        ] {
            assert_eq!(parse_label_search(bad), None, "{bad}");
        }
    }
}
