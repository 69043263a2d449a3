//! The Kubernetes API protocol as the simulated server speaks it: request
//! paths, discovery, lists with `limit`/`continue` and selectors, and
//! `?watch=1` JSON event streams with BOOKMARK and `410 Gone`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::SinkExt;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::resources::{RESOURCES, discovery, find_resource, groups};
use super::selector::{
    self, Requirement, fields_match, labels_match, parse_field_selector, parse_label_selector,
};
use super::store::{Inner, MAX_SNAPSHOTS, StoredEvent};

fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    (code, axum::Json(body)).into_response()
}

/// What a request path names.
enum Target {
    Version,
    CoreVersions,
    Groups,
    ResourceList(String),
    Collection {
        resource: usize,
        namespace: Option<String>,
    },
    Object {
        resource: usize,
        namespace: Option<String>,
        name: String,
    },
}

fn parse_path(path: &str) -> Option<Target> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match parts.as_slice() {
        ["version"] => return Some(Target::Version),
        ["api"] => return Some(Target::CoreVersions),
        ["apis"] => return Some(Target::Groups),
        ["api", "v1"] => return Some(Target::ResourceList("v1".into())),
        ["apis", g, v] => return Some(Target::ResourceList(format!("{g}/{v}"))),
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let (namespace, plural, name) = match rest {
        ["namespaces", ns, plural] => (Some(ns.to_string()), *plural, None),
        ["namespaces", ns, plural, name] => (Some(ns.to_string()), *plural, Some(*name)),
        [plural] => (None, *plural, None),
        [plural, name] => (None, *plural, Some(*name)),
        _ => return None,
    };
    let resource = find_resource(group, version, plural)?;
    Some(match name {
        Some(name) => Target::Object {
            resource,
            namespace,
            name: name.to_string(),
        },
        None => Target::Collection {
            resource,
            namespace,
        },
    })
}

struct Filter {
    resource: usize,
    namespace: Option<String>,
    labels: Vec<Requirement>,
    fields: Vec<Requirement>,
}

impl Filter {
    fn matches(&self, resource: usize, object: &Value) -> bool {
        resource == self.resource
            && self.namespace.as_deref().is_none_or(|ns| {
                object
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    == Some(ns)
            })
            && labels_match(&self.labels, object)
            && fields_match(&self.fields, object)
    }
}

fn flag(query: &HashMap<String, String>, key: &str) -> bool {
    query
        .get(key)
        .is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

pub(super) async fn handle(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    // A frozen server holds the request, its socket open, until thawed.
    let mut frozen = inner.frozen.subscribe();
    let _ = frozen.wait_for(|f| !*f).await;
    if method != Method::GET {
        return status(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "the simulated API server is read-only",
        );
    }
    let Some(target) = parse_path(uri.path()) else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        );
    };
    if let Some(refused) = refuse(&inner, &target) {
        return refused;
    }
    match target {
        Target::Version => axum::Json(json!({
            "major": "1", "minor": "33", "gitVersion": "v1.33.0-sim",
            "platform": "linux/amd64"
        }))
        .into_response(),
        Target::CoreVersions => axum::Json(
            json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
        )
        .into_response(),
        Target::Groups => axum::Json(groups(&inner.absent.lock())).into_response(),
        Target::ResourceList(gv) => match discovery(&gv, &inner.absent.lock()) {
            Some(list) => axum::Json(list).into_response(),
            None => status(StatusCode::NOT_FOUND, "NotFound", "no such group version"),
        },
        Target::Object {
            resource,
            namespace,
            name,
        } => {
            let key = (resource, namespace.unwrap_or_default(), name);
            match inner.store.lock().objects.get(&key) {
                Some(obj) => axum::Json((**obj).clone()).into_response(),
                None => status(StatusCode::NOT_FOUND, "NotFound", "object not found"),
            }
        }
        Target::Collection {
            resource,
            namespace,
        } => {
            let parse =
                |key: &str, f: fn(&str) -> Result<Vec<Requirement>, selector::SelectorError>| {
                    query.get(key).map(|s| f(s)).transpose()
                };
            let labels = match parse("labelSelector", parse_label_selector) {
                Ok(l) => l.unwrap_or_default(),
                Err(e) => return status(StatusCode::BAD_REQUEST, "BadRequest", &e.to_string()),
            };
            let fields = match parse("fieldSelector", parse_field_selector) {
                Ok(f) => f.unwrap_or_default(),
                Err(e) => return status(StatusCode::BAD_REQUEST, "BadRequest", &e.to_string()),
            };
            let filter = Filter {
                resource,
                namespace: namespace.filter(|_| RESOURCES[resource].namespaced),
                labels,
                fields,
            };
            if flag(&query, "watch") {
                watch_response(inner, filter, &query)
            } else {
                list_response(&inner, &filter, &query)
            }
        }
    }
}

/// A resource whose CRD is not installed answers 404 like any unknown
/// path; a forbidden one 403 with the message a real server's RBAC gives.
fn refuse(inner: &Inner, target: &Target) -> Option<Response> {
    let (Target::Collection {
        resource,
        namespace,
    }
    | Target::Object {
        resource,
        namespace,
        ..
    }) = target
    else {
        return None;
    };
    if inner.absent.lock().contains(resource) {
        return Some(status(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        ));
    }
    if inner.forbidden.lock().contains(resource) {
        let def = RESOURCES[*resource];
        let scope = match namespace {
            Some(ns) => format!("in the namespace \"{ns}\""),
            None => "at the cluster scope".to_string(),
        };
        let qualified = if def.group.is_empty() {
            def.plural.to_string()
        } else {
            format!("{}.{}", def.plural, def.group)
        };
        let message = format!(
            "{qualified} is forbidden: User \"system:serviceaccount:hcp-flow:hcp-flow\" cannot list resource \"{}\" in API group \"{}\" {scope}",
            def.plural, def.group
        );
        return Some(status(StatusCode::FORBIDDEN, "Forbidden", &message));
    }
    None
}

fn list_response(inner: &Inner, filter: &Filter, query: &HashMap<String, String>) -> Response {
    let def = RESOURCES[filter.resource];
    let limit = query
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0);
    let mut store = inner.store.lock();
    let (rv, items, offset) = match query.get("continue").filter(|c| !c.is_empty()) {
        Some(token) => {
            let parsed = token
                .split_once('-')
                .and_then(|(id, off)| Some((id.parse::<u64>().ok()?, off.parse::<usize>().ok()?)));
            let found = parsed.and_then(|(id, off)| {
                store
                    .snapshots
                    .get(&id)
                    .map(|(rv, items)| (*rv, items.clone(), off))
            });
            match found {
                Some(f) => f,
                None => {
                    return status(
                        StatusCode::GONE,
                        "Expired",
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                    );
                }
            }
        }
        None => {
            let items: Vec<Arc<Value>> = store
                .objects
                .iter()
                .filter(|((r, _, _), obj)| filter.matches(*r, obj))
                .map(|(_, obj)| obj.clone())
                .collect();
            (store.rv, Arc::new(items), 0)
        }
    };
    let end = limit.map_or(items.len(), |l| (offset + l).min(items.len()));
    let page: Vec<Value> = items
        .get(offset..end)
        .unwrap_or_default()
        .iter()
        .map(|o| (**o).clone())
        .collect();
    inner.served(page.len());
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if end < items.len() {
        let id = store.next_snapshot;
        store.next_snapshot += 1;
        store.snapshots.insert(id, (rv, items.clone()));
        store.snapshot_order.push_back(id);
        while store.snapshot_order.len() > MAX_SNAPSHOTS {
            if let Some(old) = store.snapshot_order.pop_front() {
                store.snapshots.remove(&old);
            }
        }
        metadata["continue"] = json!(format!("{id}-{end}"));
        metadata["remainingItemCount"] = json!(items.len() - end);
    }
    axum::Json(json!({
        "apiVersion": def.api_version(),
        "kind": format!("{}List", def.kind),
        "metadata": metadata,
        "items": page,
    }))
    .into_response()
}

fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

fn gone_line() -> Bytes {
    event_line(
        "ERROR",
        &json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "too old resource version", "reason": "Expired", "code": 410
        }),
    )
}

/// What a watcher sees of one stored event, after its selectors.
fn visible(filter: &Filter, event: &StoredEvent) -> Option<Bytes> {
    let now = filter.matches(event.resource, &event.object);
    let before = event
        .previous
        .as_ref()
        .is_some_and(|p| filter.matches(event.resource, p));
    let kind = match (event.kind, before, now) {
        ("DELETED", _, true) => "DELETED",
        ("MODIFIED", true, true) => "MODIFIED",
        ("MODIFIED", false, true) | ("ADDED", _, true) => "ADDED",
        ("MODIFIED", true, false) => "DELETED",
        _ => return None,
    };
    Some(event_line(kind, &event.object))
}

fn watch_response(inner: Arc<Inner>, filter: Filter, query: &HashMap<String, String>) -> Response {
    let def = RESOURCES[filter.resource];
    let bookmarks = flag(query, "allowWatchBookmarks");
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map_or(Duration::from_secs(1800), Duration::from_secs);
    let from = query
        .get("resourceVersion")
        .and_then(|rv| rv.parse::<u64>().ok())
        .filter(|rv| *rv > 0);
    // Subscribe and read history under one lock: no event falls between.
    let (replay, mut live, start_rv, expired) = {
        let store = inner.store.lock();
        let live = inner.events.subscribe();
        match from {
            Some(rv) if rv < store.compacted_to => (Vec::new(), live, rv, true),
            Some(rv) => {
                let replay: Vec<Bytes> = store
                    .history
                    .iter()
                    .filter(|e| e.rv > rv)
                    .filter_map(|e| visible(&filter, e))
                    .collect();
                (replay, live, store.rv, false)
            }
            None => {
                let replay: Vec<Bytes> = store
                    .objects
                    .iter()
                    .filter(|((r, _, _), obj)| filter.matches(*r, obj))
                    .map(|(_, obj)| event_line("ADDED", obj))
                    .collect();
                (replay, live, store.rv, false)
            }
        }
    };
    inner.served(replay.len());
    let mut epoch = inner.epoch.subscribe();
    epoch.mark_unchanged();
    let mut frozen = inner.frozen.subscribe();
    let bookmark_every = *inner.bookmark_interval.lock();
    let (mut tx, rx) = futures::channel::mpsc::channel::<Result<Bytes, Infallible>>(64);
    tokio::spawn(async move {
        if expired {
            let _ = tx.send(Ok(gone_line())).await;
            return;
        }
        for line in replay {
            if tx.send(Ok(line)).await.is_err() {
                return;
            }
        }
        let mut last_rv = start_rv;
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(bookmark_every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // Frozen: send nothing at all, not even bookmarks, until thawed.
            if *frozen.borrow() {
                tokio::select! {
                    _ = &mut deadline => return,
                    _ = epoch.changed() => return,
                    _ = frozen.wait_for(|f| !*f) => {}
                }
            }
            let (line, last) = tokio::select! {
                _ = &mut deadline => return,
                _ = epoch.changed() => return,
                // A bookmark promises every event up to its revision was
                // delivered: use the last one this stream passed on, never
                // the store's newest (events still queued here would be
                // skipped as already seen and the client would resume past
                // them: lost for good).
                _ = ticker.tick(), if bookmarks => {
                    (event_line("BOOKMARK", &json!({
                        "kind": def.kind, "apiVersion": def.api_version(),
                        "metadata": {"resourceVersion": last_rv.to_string()}
                    })), false)
                }
                received = live.recv() => match received {
                    Ok(event) if event.rv <= last_rv => continue,
                    Ok(event) => {
                        last_rv = event.rv;
                        match visible(&filter, &event) {
                            Some(line) => {
                                inner.served(1);
                                (line, false)
                            }
                            None => continue,
                        }
                    }
                    // Too slow a reader lost events: like the real server,
                    // tell it to relist.
                    Err(broadcast::error::RecvError::Lagged(_)) => (gone_line(), true),
                    Err(broadcast::error::RecvError::Closed) => return,
                },
            };
            if tx.send(Ok(line)).await.is_err() || last {
                return;
            }
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(rx))
        .unwrap_or_else(|_| {
            status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                "response",
            )
        })
}
