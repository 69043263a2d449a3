//! A simulated Kubernetes API server for the management-side hops: the real
//! list/watch protocol (resourceVersion, `?watch=1` JSON event streams,
//! BOOKMARK, `410 Gone`, label/field selectors, `limit`/`continue`) over an
//! in-memory object store, so the exporter's real kube client and watchers
//! are what tests exercise.
//!
//! Faults: [`KubeApiHandle::stop`]/[`KubeApiHandle::restart`] (the API server
//! goes away and comes back on the same address), [`KubeApiHandle::compact`]
//! (every older resourceVersion expires), and
//! [`KubeApiHandle::insert_raw_malformed`] (an object that does not match its
//! schema).

pub mod objects;
pub mod selector;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::SinkExt;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tracing::debug;

pub use objects::{KubeClusterFaults, KubeClusterSpec, objects_at};
use selector::{
    Requirement, fields_match, labels_match, parse_field_selector, parse_label_selector,
};

/// A kind the server serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResourceDef {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
}

impl ResourceDef {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

pub const RESOURCES: &[ResourceDef] = &[
    ResourceDef {
        group: "work.open-cluster-management.io",
        version: "v1",
        kind: "ManifestWork",
        plural: "manifestworks",
        namespaced: true,
    },
    ResourceDef {
        group: "hypershift.openshift.io",
        version: "v1beta1",
        kind: "HostedCluster",
        plural: "hostedclusters",
        namespaced: true,
    },
    ResourceDef {
        group: "hypershift.openshift.io",
        version: "v1beta1",
        kind: "NodePool",
        plural: "nodepools",
        namespaced: true,
    },
    ResourceDef {
        group: "hypershift.openshift.io",
        version: "v1beta1",
        kind: "HostedControlPlane",
        plural: "hostedcontrolplanes",
        namespaced: true,
    },
    ResourceDef {
        group: "cluster.open-cluster-management.io",
        version: "v1",
        kind: "ManagedCluster",
        plural: "managedclusters",
        namespaced: false,
    },
    ResourceDef {
        group: "",
        version: "v1",
        kind: "Pod",
        plural: "pods",
        namespaced: true,
    },
    ResourceDef {
        group: "multicluster.openshift.io",
        version: "v1",
        kind: "MultiClusterEngine",
        plural: "multiclusterengines",
        namespaced: false,
    },
    ResourceDef {
        group: "agent-install.openshift.io",
        version: "v1beta1",
        kind: "Agent",
        plural: "agents",
        namespaced: true,
    },
];

fn resource_by_kind(kind: &str) -> Option<usize> {
    RESOURCES.iter().position(|r| r.kind == kind)
}

#[derive(Debug, thiserror::Error)]
pub enum KubeSimError {
    #[error("object has no kind")]
    NoKind,
    #[error("the simulated API server does not serve kind {0}")]
    UnknownKind(String),
    #[error("object of kind {0} has no metadata.name")]
    NoName(String),
    #[error("cannot write kubeconfig {path}")]
    Kubeconfig {
        path: String,
        #[source]
        cause: std::io::Error,
    },
}

type ObjectKey = (usize, String, String);

#[derive(Debug)]
struct StoredEvent {
    rv: u64,
    resource: usize,
    kind: &'static str,
    object: Arc<Value>,
    /// The object before a MODIFIED event: selectors turn a change into
    /// ADDED or DELETED for a watcher the object enters or leaves.
    previous: Option<Arc<Value>>,
}

struct Store {
    rv: u64,
    objects: BTreeMap<ObjectKey, Arc<Value>>,
    history: VecDeque<Arc<StoredEvent>>,
    /// Events up to this resourceVersion are forgotten: a watch from an older
    /// version gets 410 Gone.
    compacted_to: u64,
    history_limit: usize,
    /// Paged lists are served from a snapshot, as etcd serves them at the
    /// list's revision; bounded, an evicted one answers 410 Expired.
    snapshots: HashMap<u64, Snapshot>,
    snapshot_order: VecDeque<u64>,
    next_snapshot: u64,
}

const MAX_SNAPSHOTS: usize = 64;

/// A paged list's resourceVersion and items.
type Snapshot = (u64, Arc<Vec<Arc<Value>>>);

struct Inner {
    store: Mutex<Store>,
    events: broadcast::Sender<Arc<StoredEvent>>,
    /// Bumped to end every open watch (stop, compact).
    epoch: watch::Sender<u64>,
    bookmark_interval: Mutex<Duration>,
}

/// The running (or stopped) server; cheap to clone.
#[derive(Clone)]
pub struct KubeApiHandle {
    inner: Arc<Inner>,
    addr: SocketAddr,
    server: Arc<Mutex<Option<ServerTask>>>,
}

struct ServerTask {
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
}

pub struct KubeApiServer;

impl KubeApiServer {
    /// Serve on a free loopback port; returns the handle and the base URL.
    pub async fn start() -> std::io::Result<(KubeApiHandle, String)> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (events, _) = broadcast::channel(4096);
        let (epoch, _) = watch::channel(0);
        let inner = Arc::new(Inner {
            store: Mutex::new(Store {
                rv: 1,
                objects: BTreeMap::new(),
                history: VecDeque::new(),
                compacted_to: 1,
                history_limit: 10_000,
                snapshots: HashMap::new(),
                snapshot_order: VecDeque::new(),
                next_snapshot: 1,
            }),
            events,
            epoch,
            bookmark_interval: Mutex::new(Duration::from_secs(5)),
        });
        let handle = KubeApiHandle {
            inner,
            addr,
            server: Arc::new(Mutex::new(None)),
        };
        handle.serve(listener);
        Ok((handle, format!("http://{addr}")))
    }
}

impl KubeApiHandle {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn serve(&self, listener: tokio::net::TcpListener) {
        let (shutdown, mut rx) = watch::channel(false);
        let app = Router::new()
            .fallback(handle)
            .with_state(self.inner.clone());
        let task = tokio::spawn(async move {
            let stopped = async move {
                let _ = rx.wait_for(|s| *s).await;
            };
            if let Err(e) = axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await
            {
                debug!(error = %e, "simulated kube API server ended");
            }
        });
        *self.server.lock() = Some(ServerTask { shutdown, task });
    }

    /// Create or replace an object (by kind, namespace, name), bumping its
    /// resourceVersion; returns the new resourceVersion.
    pub fn apply(&self, mut obj: Value) -> Result<u64, KubeSimError> {
        let kind = obj
            .get("kind")
            .and_then(Value::as_str)
            .ok_or(KubeSimError::NoKind)?
            .to_string();
        let resource = resource_by_kind(&kind).ok_or(KubeSimError::UnknownKind(kind.clone()))?;
        let def = RESOURCES[resource];
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .ok_or(KubeSimError::NoName(kind.clone()))?
            .to_string();
        let namespace = if def.namespaced {
            obj.pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("default")
                .to_string()
        } else {
            String::new()
        };
        let mut store = self.inner.store.lock();
        store.rv += 1;
        let rv = store.rv;
        let key = (resource, namespace.clone(), name);
        let previous = store.objects.get(&key).cloned();
        obj["apiVersion"] = json!(def.api_version());
        let meta = &mut obj["metadata"];
        if def.namespaced {
            meta["namespace"] = json!(namespace);
        }
        meta["resourceVersion"] = json!(rv.to_string());
        let uid = previous
            .as_ref()
            .and_then(|p| p.pointer("/metadata/uid").cloned())
            .unwrap_or_else(|| json!(format!("00000000-0000-4000-8000-{rv:012}")));
        meta["uid"] = uid;
        if meta.get("creationTimestamp").is_none_or(Value::is_null) {
            let created = previous
                .as_ref()
                .and_then(|p| p.pointer("/metadata/creationTimestamp").cloned())
                .unwrap_or_else(|| json!(jiff::Timestamp::now().to_string()));
            meta["creationTimestamp"] = created;
        }
        let object = Arc::new(obj);
        store.objects.insert(key, object.clone());
        let kind = if previous.is_some() {
            "MODIFIED"
        } else {
            "ADDED"
        };
        self.record(
            &mut store,
            StoredEvent {
                rv,
                resource,
                kind,
                object,
                previous,
            },
        );
        Ok(rv)
    }

    fn record(&self, store: &mut Store, event: StoredEvent) {
        let event = Arc::new(event);
        store.history.push_back(event.clone());
        while store.history.len() > store.history_limit {
            if let Some(old) = store.history.pop_front() {
                store.compacted_to = old.rv;
            }
        }
        // No receiver is fine: nobody watches.
        let _ = self.inner.events.send(event);
    }

    /// Delete an object; false when it did not exist.
    pub fn delete(&self, kind: &str, namespace: Option<&str>, name: &str) -> bool {
        let Some(resource) = resource_by_kind(kind) else {
            return false;
        };
        let namespace = if RESOURCES[resource].namespaced {
            namespace.unwrap_or("default").to_string()
        } else {
            String::new()
        };
        let mut store = self.inner.store.lock();
        let Some(previous) = store
            .objects
            .remove(&(resource, namespace, name.to_string()))
        else {
            return false;
        };
        store.rv += 1;
        let rv = store.rv;
        let mut gone = (*previous).clone();
        gone["metadata"]["resourceVersion"] = json!(rv.to_string());
        self.record(
            &mut store,
            StoredEvent {
                rv,
                resource,
                kind: "DELETED",
                object: Arc::new(gone),
                previous: None,
            },
        );
        true
    }

    /// Store an object whose status does not match its schema (conditions
    /// as a string): valid JSON and metadata, so only a strict decoder trips.
    pub fn insert_raw_malformed(
        &self,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<u64, KubeSimError> {
        let mut metadata = json!({"name": name});
        if let Some(ns) = namespace {
            metadata["namespace"] = json!(ns);
        }
        self.apply(json!({
            "kind": kind,
            "metadata": metadata,
            "spec": "not-an-object",
            "status": {"conditions": "not-a-list", "ready": "maybe", "phase": 7},
        }))
    }

    /// Current objects of a kind (all namespaces).
    pub fn objects(&self, kind: &str) -> Vec<Value> {
        let Some(resource) = resource_by_kind(kind) else {
            return Vec::new();
        };
        let store = self.inner.store.lock();
        store
            .objects
            .iter()
            .filter(|((r, _, _), _)| *r == resource)
            .map(|(_, v)| (**v).clone())
            .collect()
    }

    pub fn resource_version(&self) -> u64 {
        self.inner.store.lock().rv
    }

    /// How many events are kept for watches resuming from an older version.
    pub fn set_history_limit(&self, limit: usize) {
        self.inner.store.lock().history_limit = limit.max(1);
    }

    pub fn set_bookmark_interval(&self, every: Duration) {
        *self.inner.bookmark_interval.lock() = every.max(Duration::from_millis(10));
    }

    /// Forget all history and end every open watch: each watcher's next
    /// watch gets 410 Gone and must relist.
    pub fn compact(&self) {
        {
            let mut store = self.inner.store.lock();
            store.history.clear();
            // Other writes move a real server's revision on; every version a
            // client holds is now older than the compaction.
            store.rv += 1;
            store.compacted_to = store.rv;
        }
        self.close_watches();
    }

    /// End every open watch stream (clients re-watch from their version).
    pub fn close_watches(&self) {
        self.inner.epoch.send_modify(|e| *e += 1);
    }

    /// The API server goes away: open watches end, new connections are refused.
    pub async fn stop(&self) {
        self.close_watches();
        let task = self.server.lock().take();
        if let Some(ServerTask { shutdown, task }) = task {
            let _ = shutdown.send(true);
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }

    /// Serve again on the same address, with the objects changed while down.
    /// Like a restarted API server's fresh watch cache, older resourceVersions
    /// are gone, so watchers relist.
    pub async fn restart(&self) -> std::io::Result<()> {
        self.stop().await;
        {
            let mut store = self.inner.store.lock();
            store.history.clear();
            // Other writes move a real server's revision on; every version a
            // client holds is now older than the compaction.
            store.rv += 1;
            store.compacted_to = store.rv;
        }
        let listener = tokio::net::TcpListener::bind(self.addr).await?;
        self.serve(listener);
        Ok(())
    }
}

/// Write a kubeconfig with one context (and cluster and user) per server:
/// plain http, no auth.
pub fn write_kubeconfig(path: &Path, servers: &[(&str, &str)]) -> Result<(), KubeSimError> {
    let mut out = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for (name, url) in servers {
        out.push_str(&format!("- name: {name}\n  cluster:\n    server: {url}\n"));
    }
    out.push_str("users:\n");
    for (name, _) in servers {
        out.push_str(&format!("- name: {name}\n  user: {{}}\n"));
    }
    out.push_str("contexts:\n");
    for (name, _) in servers {
        out.push_str(&format!(
            "- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n"
        ));
    }
    if let Some((first, _)) = servers.first() {
        out.push_str(&format!("current-context: {first}\n"));
    }
    std::fs::write(path, out).map_err(|cause| KubeSimError::Kubeconfig {
        path: path.display().to_string(),
        cause,
    })
}

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

fn find_resource(group: &str, version: &str, plural: &str) -> Option<usize> {
    RESOURCES
        .iter()
        .position(|r| r.group == group && r.version == version && r.plural == plural)
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

fn discovery(group_version: &str) -> Option<Value> {
    let resources: Vec<Value> = RESOURCES
        .iter()
        .filter(|r| r.api_version() == group_version)
        .map(|r| {
            json!({
                "name": r.plural,
                "singularName": r.kind.to_ascii_lowercase(),
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "list", "watch"],
            })
        })
        .collect();
    (!resources.is_empty()).then(|| {
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources})
    })
}

fn groups() -> Value {
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for r in RESOURCES.iter().filter(|r| !r.group.is_empty()) {
        if !seen.contains(&(r.group, r.version)) {
            seen.push((r.group, r.version));
        }
    }
    let groups: Vec<Value> = seen
        .iter()
        .map(|(g, v)| {
            let gv = json!({"groupVersion": format!("{g}/{v}"), "version": v});
            json!({"name": g, "versions": [gv.clone()], "preferredVersion": gv})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
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

async fn handle(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
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
        Target::Groups => axum::Json(groups()).into_response(),
        Target::ResourceList(gv) => match discovery(&gv) {
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
    let mut epoch = inner.epoch.subscribe();
    epoch.mark_unchanged();
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
                            Some(line) => (line, false),
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
