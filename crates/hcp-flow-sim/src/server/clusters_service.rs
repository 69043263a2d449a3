//! Clusters Service, under both API prefixes it serves (aro_hcp/v1alpha1
//! and clusters_mgmt/v1): cluster lists with `search`, one cluster, its
//! status and provision shard, and its node pools (paged list with
//! `search`, one pool, its status).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use serde_json::{Value, json};

use super::shared::{json_response, page_of, paging, param, query_pairs, respond};
use crate::plan::{Plan, SHARDS};
use crate::pools::{self, ServicePool};
use crate::search::{Kind, Search, Value as SVal};
use crate::wire;
use crate::{Api, World};

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
        "region.id" => SVal::Str(crate::plan::REGION),
        "creation_timestamp" => p.cs_created.map_or(SVal::Null, SVal::Time),
        _ => SVal::Null,
    }
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
    respond(
        &world,
        Api::ClustersService,
        n,
        json_response(StatusCode::OK, &body),
    )
    .await
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
        Some(body) => {
            respond(
                &world,
                Api::ClustersService,
                1,
                json_response(StatusCode::OK, &body),
            )
            .await
        }
        None => {
            respond(
                &world,
                Api::ClustersService,
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
    respond(
        &world,
        Api::ClustersService,
        SHARDS.len(),
        json_response(StatusCode::OK, &body),
    )
    .await
}

fn pool_kind(field: &str) -> Option<Kind> {
    match field {
        "id" | "azure_node_pool.resource_name" | "status.state.value" => Some(Kind::Str),
        _ => None,
    }
}

/// A node pool request, counted as one before it is answered as any.
async fn respond_pools(world: &World, items: usize, r: Response) -> Response {
    world.control(Api::ClustersService).node_pool_request();
    respond(world, Api::ClustersService, items, r).await
}

fn cluster_not_found(ctl: &super::ApiControl, id: &str) -> Response {
    ctl.error(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("Cluster '{id}' not found"),
    )
}

async fn cs_pool_list(world: World, flavor: CsApi, id: String, q: Option<String>) -> Response {
    let ctl = world.control(Api::ClustersService).clone();
    let pairs = query_pairs(&q);
    let pg = match paging(&pairs) {
        Ok(p) => p,
        Err(e) => return ctl.error(StatusCode::BAD_REQUEST, "BadRequest", &e),
    };
    let search = match Search::parse(param(&pairs, "search").unwrap_or(""), pool_kind) {
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
    let Some(p) = plans
        .iter()
        .find(|p| p.cluster_id == id && p.cs_exists(now))
    else {
        return respond_pools(&world, 0, cluster_not_found(&ctl, &id)).await;
    };
    let service_pools = p.service_pools();
    let matched: Vec<(&ServicePool<'_>, &'static str)> = service_pools
        .iter()
        .filter_map(|sp| p.cs_pool_state(sp, now).map(|(state, _)| (sp, state)))
        .filter(|(sp, state)| {
            search.matches(|f| match f {
                "id" | "azure_node_pool.resource_name" => SVal::Str(sp.short),
                "status.state.value" => SVal::Str(state),
                _ => SVal::Null,
            })
        })
        .collect();
    let (total, page) = page_of(matched, &pg);
    let items: Vec<Value> = page
        .iter()
        .filter_map(|(sp, _)| pools::cs_node_pool(p, sp, now, flavor.prefix()))
        .collect();
    let n = items.len();
    let body = json!({ "kind": "NodePoolList", "page": pg.page, "size": n, "total": total, "items": items });
    respond_pools(&world, n, json_response(StatusCode::OK, &body)).await
}

async fn cs_pool_get(
    world: World,
    flavor: CsApi,
    id: String,
    pool: String,
    status: bool,
) -> Response {
    let ctl = world.control(Api::ClustersService).clone();
    let now = world.now_ms();
    let plans = world.plans(now);
    let Some(p) = plans
        .iter()
        .find(|p| p.cluster_id == id && p.cs_exists(now))
    else {
        return respond_pools(&world, 0, cluster_not_found(&ctl, &id)).await;
    };
    let prefix = flavor.prefix();
    let found = p
        .service_pools()
        .iter()
        .filter(|sp| sp.short == pool)
        .find_map(|sp| {
            if status {
                pools::cs_node_pool_status(p, sp, now, prefix)
            } else {
                pools::cs_node_pool(p, sp, now, prefix)
            }
        });
    match found {
        Some(body) => respond_pools(&world, 1, json_response(StatusCode::OK, &body)).await,
        None => {
            let msg = format!("Node pool '{pool}' not found in cluster '{id}'");
            respond_pools(
                &world,
                0,
                ctl.error(StatusCode::NOT_FOUND, "NotFound", &msg),
            )
            .await
        }
    }
}

pub(super) fn cs_router(world: &World) -> Router {
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
                &format!("{p}/clusters/{{id}}/node_pools"),
                get(
                    move |State(w): State<World>, Path(id): Path<String>, RawQuery(q): RawQuery| {
                        cs_pool_list(w, flavor, id, q)
                    },
                ),
            )
            .route(
                &format!("{p}/clusters/{{id}}/node_pools/{{np}}"),
                get(
                    move |State(w): State<World>, Path((id, np)): Path<(String, String)>| {
                        cs_pool_get(w, flavor, id, np, false)
                    },
                ),
            )
            .route(
                &format!("{p}/provision_shards"),
                get(move |State(w): State<World>| cs_shards(w, flavor)),
            );
    }
    // The node pool status sub-resource is aro_hcp's alone (clusters_mgmt
    // v1 defines none).
    let flavor = CsApi::AroHcp;
    r = r.route(
        &format!(
            "{}/clusters/{{id}}/node_pools/{{np}}/status",
            flavor.prefix()
        ),
        get(
            move |State(w): State<World>, Path((id, np)): Path<(String, String)>| {
                cs_pool_get(w, flavor, id, np, true)
            },
        ),
    );
    let ctl = world.control(Api::ClustersService).clone();
    r.fallback(move || {
        let ctl = ctl.clone();
        async move { ctl.error(StatusCode::NOT_FOUND, "NotFound", "no such resource") }
    })
    .with_state(world.clone())
}
