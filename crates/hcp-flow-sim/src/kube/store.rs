//! The in-memory object store behind the simulated API server: objects by
//! kind, namespace and name, one resourceVersion counter, the event history
//! watches resume from, and the snapshots paged lists are served from.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};

use super::resources::{RESOURCES, resource_by_kind};
use super::{KubeApiHandle, KubeSimError};

pub(super) type ObjectKey = (usize, String, String);

#[derive(Debug)]
pub(super) struct StoredEvent {
    pub(super) rv: u64,
    pub(super) resource: usize,
    pub(super) kind: &'static str,
    pub(super) object: Arc<Value>,
    /// The object before a MODIFIED event: selectors turn a change into
    /// ADDED or DELETED for a watcher the object enters or leaves.
    pub(super) previous: Option<Arc<Value>>,
}

pub(super) struct Store {
    pub(super) rv: u64,
    pub(super) objects: BTreeMap<ObjectKey, Arc<Value>>,
    pub(super) history: VecDeque<Arc<StoredEvent>>,
    /// Events up to this resourceVersion are forgotten: a watch from an older
    /// version gets 410 Gone.
    pub(super) compacted_to: u64,
    pub(super) history_limit: usize,
    /// Paged lists are served from a snapshot, as etcd serves them at the
    /// list's revision; bounded, an evicted one answers 410 Expired.
    pub(super) snapshots: HashMap<u64, Snapshot>,
    pub(super) snapshot_order: VecDeque<u64>,
    pub(super) next_snapshot: u64,
}

pub(super) const MAX_SNAPSHOTS: usize = 64;

/// A paged list's resourceVersion and items.
pub(super) type Snapshot = (u64, Arc<Vec<Arc<Value>>>);

pub(super) struct Inner {
    pub(super) store: Mutex<Store>,
    pub(super) events: broadcast::Sender<Arc<StoredEvent>>,
    /// Bumped to end every open watch (stop, compact).
    pub(super) epoch: watch::Sender<u64>,
    pub(super) bookmark_interval: Mutex<Duration>,
    /// While true the server holds every request and sends nothing on open
    /// watches, sockets kept open: a hung API server, not a dead one.
    pub(super) frozen: watch::Sender<bool>,
    /// Resources whose CRD is "not installed": 404 like a real server, and
    /// left out of discovery.
    pub(super) absent: Mutex<std::collections::BTreeSet<usize>>,
    /// Resources the client's RBAC forbids: 403 with a Status like a real
    /// server's.
    pub(super) forbidden: Mutex<std::collections::BTreeSet<usize>>,
    /// Objects answered in lists and watch events: what readers cost this
    /// API server.
    pub(super) items_served: std::sync::atomic::AtomicU64,
}

impl Inner {
    pub(super) fn served(&self, items: usize) {
        self.items_served
            .fetch_add(items as u64, std::sync::atomic::Ordering::Relaxed);
    }
}

impl KubeApiHandle {
    /// Objects this API server has answered in lists and watch events.
    pub fn items_served(&self) -> u64 {
        self.inner
            .items_served
            .load(std::sync::atomic::Ordering::Relaxed)
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

    /// Hang the server: requests wait and open watches send nothing (not
    /// even bookmarks) until [`KubeApiHandle::unfreeze`]; connections stay
    /// open, so only a client's own deadline notices.
    pub fn freeze(&self) {
        self.inner.frozen.send_replace(true);
    }

    pub fn unfreeze(&self) {
        self.inner.frozen.send_replace(false);
    }

    /// Serve `kind` or not, as a cluster with or without its CRD; false for
    /// a kind the simulator does not know.
    pub fn set_installed(&self, kind: &str, installed: bool) -> bool {
        let Some(resource) = resource_by_kind(kind) else {
            return false;
        };
        let mut absent = self.inner.absent.lock();
        if installed {
            absent.remove(&resource);
        } else {
            absent.insert(resource);
        }
        drop(absent);
        // Open watches of an uninstalled kind end, as when a CRD is deleted.
        self.close_watches();
        true
    }

    /// Forbid (or allow again) listing and watching `kind`; false for a
    /// kind the simulator does not know.
    pub fn set_forbidden(&self, kind: &str, forbidden: bool) -> bool {
        let Some(resource) = resource_by_kind(kind) else {
            return false;
        };
        let mut set = self.inner.forbidden.lock();
        if forbidden {
            set.insert(resource);
        } else {
            set.remove(&resource);
        }
        drop(set);
        self.close_watches();
        true
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
}
