//! A test API server: a small kube-apiserver stand-in on 127.0.0.1 that speaks the real
//! wire protocol for what kubesched uses — JSON list (with limit/continue pagination) and
//! watch (resourceVersion resumption, bookmarks, `410 Gone` for compacted versions, field
//! selectors with the documented ADDED/DELETED transitions), the `pods/binding`
//! subresource (409 for a bound or replaced pod), status patches (strategic merge),
//! events.k8s.io events, and leases with optimistic concurrency (409 on a stale
//! resourceVersion) — plus fault injection: status codes for chosen requests, requests
//! held until released, dropped watch streams, compaction, raw lines in watch streams.
//!
//! Pods are deleted as kube-apiserver deletes them: a pod on a node with a grace period
//! (the request's, else its `terminationGracePeriodSeconds`, else 30 s) gets a
//! `deletionTimestamp` and stays until the period ends (the server plays the kubelet) or a
//! delete with `gracePeriodSeconds=0` forces it out; an unassigned pod goes at once. The
//! server records every accepted binding with its node's usage at that moment, counts
//! its TCP connections, can be restarted on the same port with its state kept (watches
//! then get 410 Gone, as after a watch cache restart), and injects faults at random:
//! status codes and slow answers.
//!
//! Shortcuts, all on the safe side for a client: validation is limited to what the tests
//! need, and unsupported query features (label selectors, exact-version lists) are
//! refused with 400.

pub mod fixtures;
mod http;
pub mod patch;
pub mod selector;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Bytes;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

use selector::FieldSelector;

/// One resource the server serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceDef {
    /// API group ("" for core).
    pub group: &'static str,
    /// Version.
    pub version: &'static str,
    /// Plural resource name.
    pub plural: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
}

impl ResourceDef {
    /// `group/version`, or `version` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

macro_rules! res {
    ($g:expr, $v:expr, $p:expr, $k:expr, $n:expr) => {
        ResourceDef {
            group: $g,
            version: $v,
            plural: $p,
            kind: $k,
            namespaced: $n,
        }
    };
}

/// Every resource served.
pub const RESOURCES: &[ResourceDef] = &[
    res!("", "v1", "pods", "Pod", true),
    res!("", "v1", "nodes", "Node", false),
    res!(
        "resource.k8s.io",
        "v1",
        "resourceclaims",
        "ResourceClaim",
        true
    ),
    res!(
        "resource.k8s.io",
        "v1",
        "resourceslices",
        "ResourceSlice",
        false
    ),
    res!(
        "resource.k8s.io",
        "v1",
        "deviceclasses",
        "DeviceClass",
        false
    ),
    res!(
        "resource.k8s.io",
        "v1",
        "devicetaintrules",
        "DeviceTaintRule",
        false
    ),
    res!(
        "resource.k8s.io",
        "v1",
        "resourceclaimtemplates",
        "ResourceClaimTemplate",
        true
    ),
    res!(
        "scheduling.k8s.io",
        "v1beta1",
        "podgroups",
        "PodGroup",
        true
    ),
    res!("", "v1", "namespaces", "Namespace", false),
    res!("", "v1", "services", "Service", true),
    res!("", "v1", "configmaps", "ConfigMap", true),
    res!(
        "",
        "v1",
        "replicationcontrollers",
        "ReplicationController",
        true
    ),
    res!("", "v1", "persistentvolumes", "PersistentVolume", false),
    res!(
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        true
    ),
    res!("apps", "v1", "replicasets", "ReplicaSet", true),
    res!("apps", "v1", "statefulsets", "StatefulSet", true),
    res!(
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "StorageClass",
        false
    ),
    res!("storage.k8s.io", "v1", "csinodes", "CSINode", false),
    res!("storage.k8s.io", "v1", "csidrivers", "CSIDriver", false),
    res!(
        "storage.k8s.io",
        "v1",
        "csistoragecapacities",
        "CSIStorageCapacity",
        true
    ),
    res!(
        "storage.k8s.io",
        "v1",
        "volumeattachments",
        "VolumeAttachment",
        false
    ),
    res!(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        true
    ),
    res!("events.k8s.io", "v1", "events", "Event", true),
    res!("coordination.k8s.io", "v1", "leases", "Lease", true),
    res!(
        "authentication.k8s.io",
        "v1",
        "tokenreviews",
        "TokenReview",
        false
    ),
    res!(
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "SubjectAccessReview",
        false
    ),
];

/// Custom resources served besides [`RESOURCES`] (by every test API server of the
/// process: serving a definition twice is harmless).
static CUSTOM_RESOURCES: parking_lot::RwLock<Vec<&'static ResourceDef>> =
    parking_lot::RwLock::new(Vec::new());

/// Serves a custom resource (as if its CustomResourceDefinition were installed, with a
/// `status` subresource): list, watch, get, create, update, patch, delete, and `PUT`/`PATCH`
/// of `/status`. Returns its definition.
pub fn serve_custom_resource(def: ResourceDef) -> &'static ResourceDef {
    let mut all = CUSTOM_RESOURCES.write();
    if let Some(d) = all.iter().find(|d| ***d == def) {
        return d;
    }
    let d: &'static ResourceDef = Box::leak(Box::new(def));
    all.push(d);
    d
}

/// Serves the kind a plugin declares ([`serve_custom_resource`] for its descriptor).
pub fn serve_kind(kind: kubesched_framework::ObjectKind) -> &'static ResourceDef {
    serve_custom_resource(ResourceDef {
        group: kind.group,
        version: kind.version,
        plural: kind.plural,
        kind: kind.kind,
        namespaced: kind.namespaced,
    })
}

/// The served resource of this group, version and plural.
pub fn find_resource(group: &str, version: &str, plural: &str) -> Option<&'static ResourceDef> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
        .or_else(|| {
            CUSTOM_RESOURCES
                .read()
                .iter()
                .find(|r| r.group == group && r.version == version && r.plural == plural)
                .copied()
        })
}

/// The definition of a plural resource name.
pub fn resource(plural: &str) -> &'static ResourceDef {
    RESOURCES
        .iter()
        .find(|r| r.plural == plural)
        .or_else(|| {
            CUSTOM_RESOURCES
                .read()
                .iter()
                .find(|r| r.plural == plural)
                .copied()
        })
        .unwrap_or_else(|| panic!("the test API server does not serve {plural}"))
}

/// One request as the server saw it. It is logged when it arrives, before anything it
/// asks for happens (kube-apiserver's audit stage `RequestReceived`), and its status is
/// filled in when it is answered (`ResponseComplete`; for a watch, when the stream
/// starts). So a test that sees a request's effect always finds the request in the log,
/// and one that needs its answer waits for it ([`TestApiServer::wait_for_requests`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// HTTP method.
    pub method: String,
    /// Path.
    pub path: String,
    /// Query string.
    pub query: String,
    /// Response status; `None` while the request is being answered.
    pub status: Option<u16>,
    /// The RBAC view: API group, `resource` or `resource/subresource`, verb.
    pub rbac: Option<(String, String, String)>,
    /// When it arrived.
    pub at: std::time::Instant,
}

/// A gate that holds matching requests until released.
#[derive(Debug, Clone, Default)]
pub struct Gate {
    inner: Arc<GateInner>,
}

#[derive(Debug, Default)]
struct GateInner {
    released: AtomicBool,
    held: AtomicUsize,
    notify: Notify,
    arrived: Notify,
}

impl Gate {
    /// Lets every held request (and later ones) through.
    pub fn release(&self) {
        self.inner.released.store(true, Ordering::SeqCst);
        self.inner.notify.notify_waiters();
    }

    /// How many requests have reached the gate.
    pub fn held(&self) -> usize {
        self.inner.held.load(Ordering::SeqCst)
    }

    /// Waits until `n` requests have reached the gate (false on timeout).
    pub async fn wait_held(&self, n: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let arrived = self.inner.arrived.notified();
            if self.held() >= n {
                return true;
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                return self.held() >= n;
            }
        }
    }

    async fn pass(&self) {
        self.inner.held.fetch_add(1, Ordering::SeqCst);
        self.inner.arrived.notify_waiters();
        loop {
            let n = self.inner.notify.notified();
            if self.inner.released.load(Ordering::SeqCst) {
                return;
            }
            n.await;
        }
    }
}

/// What an injected fault does.
#[derive(Debug, Clone)]
pub enum FaultAction {
    /// Answer with this status code and message.
    Status(u16, String),
    /// Wait at the gate, then serve normally.
    Hold(Gate),
    /// Wait this long, then serve normally.
    Delay(Duration),
}

#[derive(Debug, Clone)]
struct Fault {
    method: String,
    path_contains: String,
    remaining: Option<usize>,
    /// The share of matching requests it applies to (1.0: all).
    probability: f64,
    action: FaultAction,
}

/// A binding the server accepted, with its node's usage right after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingRecord {
    /// `namespace/name` of the pod.
    pub pod: String,
    /// The pod's UID.
    pub uid: String,
    /// The node.
    pub node: String,
    /// The resourceVersion of the binding.
    pub resource_version: u64,
    /// Requested CPU (millicores) of the node's pods that still hold resources: bound,
    /// not finished (terminating ones included).
    pub cpu_used: i64,
    /// Their requested memory (bytes).
    pub memory_used: i64,
    /// Their number.
    pub pods_used: i64,
    /// The node's allocatable CPU (millicores).
    pub cpu_allocatable: i64,
    /// The node's allocatable memory (bytes).
    pub memory_allocatable: i64,
    /// The node's allocatable pod count.
    pub pods_allocatable: i64,
}

impl BindingRecord {
    /// Whether the node was over any allocatable amount after this binding.
    pub fn overcommitted(&self) -> bool {
        self.cpu_used > self.cpu_allocatable
            || self.memory_used > self.memory_allocatable
            || self.pods_used > self.pods_allocatable
    }
}

/// The server's TCP connections.
#[derive(Debug, Default)]
pub struct ConnectionStats {
    /// Open now.
    pub open: AtomicUsize,
    /// Accepted since the start.
    pub accepted: AtomicUsize,
    /// Most open at once (reset with [`TestApiServer::reset_peak_connections`]).
    pub peak: AtomicUsize,
}

/// An error answered as a `Status` object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP code.
    pub code: u16,
    /// Machine-readable reason (`NotFound`, `Conflict`, ...).
    pub reason: &'static str,
    /// Message.
    pub message: String,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
        }
    }

    fn not_found(def: &ResourceDef, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(def)),
        )
    }

    fn conflict(def: &ResourceDef, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(def)
            ),
        )
    }

    /// The Status object.
    pub fn status(&self) -> Value {
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        })
    }
}

fn qualified(def: &ResourceDef) -> String {
    if def.group.is_empty() {
        def.plural.to_string()
    } else {
        format!("{}.{}", def.plural, def.group)
    }
}

struct Change {
    rv: u64,
    res: &'static str,
    ns: String,
    old: Option<Value>,
    new: Option<Value>,
}

struct WatchSub {
    id: u64,
    res: &'static str,
    ns: Option<String>,
    selector: FieldSelector,
    tx: mpsc::UnboundedSender<Result<Bytes, std::io::Error>>,
}

type Key = (&'static str, String, String);

pub(crate) struct State {
    rv: u64,
    objects: BTreeMap<Key, Value>,
    history: Vec<Change>,
    compacted: u64,
    watchers: Vec<WatchSub>,
    next_id: u64,
    faults: Vec<Fault>,
    requests: Vec<RequestRecord>,
    snapshots: HashMap<u64, (u64, Arc<Vec<Value>>)>,
    bookmark_interval: Duration,
    token: String,
    /// Tokens TokenReview accepts: token → (user, groups).
    users: HashMap<String, (String, Vec<String>)>,
    /// Non-resource grants SubjectAccessReview honours: (user or group, verb, path).
    grants: Vec<(String, String, String)>,
    /// Every binding accepted, in order.
    bindings: Vec<BindingRecord>,
    /// When each terminating pod's grace period ends.
    terminating: HashMap<Key, std::time::Instant>,
    /// Node name → (namespace, name) of the pods whose `spec.nodeName` is that node, kept
    /// with every change so a binding's usage check reads one node's pods, not all pods.
    pods_by_node: HashMap<String, BTreeSet<(String, String)>>,
    /// Woken on every change of an object and every request logged or answered, so
    /// tests wait for what they expect instead of sleeping.
    changed: Arc<Notify>,
    /// The newest resourceVersion a bookmark carried, by resource.
    bookmarks: HashMap<&'static str, u64>,
    /// Resources whose next watch event goes out cut in half.
    cut_next: BTreeSet<&'static str>,
}

fn now_text() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

fn meta_str(obj: &Value, field: &str) -> String {
    obj.pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// The object as a watch event or a GET shows it: with kind and apiVersion.
fn typed(def: &ResourceDef, obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Value::Object(m) = &mut o {
        m.insert("kind".into(), Value::String(def.kind.into()));
        m.insert("apiVersion".into(), Value::String(def.api_version()));
    }
    o
}

/// One watch line, `type` first and then `object`, the field order kube-apiserver writes.
fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = String::with_capacity(256);
    line.push_str("{\"type\":");
    line.push_str(&Value::String(kind.to_string()).to_string());
    line.push_str(",\"object\":");
    line.push_str(&object.to_string());
    line.push_str("}\n");
    Bytes::from(line)
}

impl State {
    fn new(token: String) -> Self {
        Self {
            rv: 100,
            objects: BTreeMap::new(),
            history: Vec::new(),
            compacted: 0,
            watchers: Vec::new(),
            next_id: 1,
            faults: Vec::new(),
            requests: Vec::new(),
            changed: Arc::new(Notify::new()),
            bookmarks: HashMap::new(),
            cut_next: BTreeSet::new(),
            snapshots: HashMap::new(),
            bookmark_interval: Duration::from_secs(1),
            token,
            users: HashMap::new(),
            grants: Vec::new(),
            bindings: Vec::new(),
            terminating: HashMap::new(),
            pods_by_node: HashMap::new(),
        }
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    /// The watch event for a change as a watcher with this selector sees it.
    fn event_for(
        def: &ResourceDef,
        sel: &FieldSelector,
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Option<Bytes> {
        let m_old = old.is_some_and(|o| sel.matches(o));
        let m_new = new.is_some_and(|n| sel.matches(n));
        match (old, new) {
            (None, Some(n)) if m_new => Some(event_line("ADDED", &typed(def, n))),
            (Some(_), Some(n)) => match (m_old, m_new) {
                (true, true) => Some(event_line("MODIFIED", &typed(def, n))),
                // An object leaving the selection is deleted for this watcher.
                (true, false) => Some(event_line("DELETED", &typed(def, n))),
                (false, true) => Some(event_line("ADDED", &typed(def, n))),
                (false, false) => None,
            },
            (Some(o), None) if m_old => Some(event_line("DELETED", &typed(def, o))),
            _ => None,
        }
    }

    fn record(
        &mut self,
        def: &'static ResourceDef,
        ns: &str,
        rv: u64,
        old: Option<Value>,
        new: Option<Value>,
    ) {
        if def.plural == "pods" {
            self.index_pod_node(ns, old.as_ref(), new.as_ref());
        }
        let cut = self.cut_next.remove(def.plural);
        self.watchers.retain(|w| {
            if w.res != def.plural || w.ns.as_deref().is_some_and(|n| n != ns) {
                return !w.tx.is_closed();
            }
            match Self::event_for(def, &w.selector, old.as_ref(), new.as_ref()) {
                Some(line) if cut => {
                    let mut half = line[..line.len() / 2].to_vec();
                    half.push(b'\n');
                    w.tx.send(Ok(Bytes::from(half))).is_ok()
                }
                Some(line) => w.tx.send(Ok(line)).is_ok(),
                None => !w.tx.is_closed(),
            }
        });
        self.history.push(Change {
            rv,
            res: def.plural,
            ns: ns.to_string(),
            old,
            new,
        });
        self.changed.notify_waiters();
    }

    /// Notes a bookmark sent on a watch of `plural`.
    pub(crate) fn bookmark_sent(&mut self, plural: &'static str, rv: u64) {
        let newest = self.bookmarks.entry(plural).or_default();
        *newest = (*newest).max(rv);
        self.changed.notify_waiters();
    }

    /// Logs a request as it arrives; the index is where its answer goes.
    pub(crate) fn request_received(&mut self, record: RequestRecord) -> usize {
        self.requests.push(record);
        self.changed.notify_waiters();
        self.requests.len() - 1
    }

    /// Fills in the status of the request logged at `index`.
    pub(crate) fn request_answered(&mut self, index: usize, status: u16) {
        if let Some(r) = self.requests.get_mut(index) {
            r.status = Some(status);
        }
        self.changed.notify_waiters();
    }

    /// Moves a pod between the `pods_by_node` entries of its old and new node.
    fn index_pod_node(&mut self, ns: &str, old: Option<&Value>, new: Option<&Value>) {
        let node_of = |p: Option<&Value>| {
            p.and_then(|p| p.pointer("/spec/nodeName"))
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .map(str::to_string)
        };
        let (old_node, new_node) = (node_of(old), node_of(new));
        if old_node == new_node {
            return;
        }
        let Some(name) = new
            .or(old)
            .and_then(|p| p.pointer("/metadata/name"))
            .and_then(Value::as_str)
        else {
            return;
        };
        let entry = (ns.to_string(), name.to_string());
        if let Some(node) = old_node
            && let Some(pods) = self.pods_by_node.get_mut(&node)
        {
            pods.remove(&entry);
            if pods.is_empty() {
                self.pods_by_node.remove(&node);
            }
        }
        if let Some(node) = new_node {
            self.pods_by_node.entry(node).or_default().insert(entry);
        }
    }

    fn key(def: &'static ResourceDef, ns: &str, name: &str) -> Key {
        (
            def.plural,
            if def.namespaced {
                ns.to_string()
            } else {
                String::new()
            },
            name.to_string(),
        )
    }

    pub(crate) fn get(&self, def: &'static ResourceDef, ns: &str, name: &str) -> Option<&Value> {
        self.objects.get(&Self::key(def, ns, name))
    }

    pub(crate) fn create(
        &mut self,
        def: &'static ResourceDef,
        ns: &str,
        mut obj: Value,
    ) -> Result<Value, ApiError> {
        let name = meta_str(&obj, "name");
        let name = if name.is_empty() {
            let prefix = meta_str(&obj, "generateName");
            if prefix.is_empty() {
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    format!("{} is invalid: metadata.name: Required value", def.kind),
                ));
            }
            format!("{prefix}{:05x}", self.next_id)
        } else {
            name
        };
        let ns = if def.namespaced {
            let body_ns = meta_str(&obj, "namespace");
            if !ns.is_empty() {
                ns.to_string()
            } else if !body_ns.is_empty() {
                body_ns
            } else {
                "default".into()
            }
        } else {
            String::new()
        };
        let key = Self::key(def, &ns, &name);
        if self.objects.contains_key(&key) {
            return Err(ApiError::new(
                409,
                "AlreadyExists",
                format!("{} \"{name}\" already exists", qualified(def)),
            ));
        }
        let rv = self.next_rv();
        self.next_id += 1;
        if let Value::Object(m) = &mut obj {
            m.remove("kind");
            m.remove("apiVersion");
            let meta = m.entry("metadata").or_insert_with(|| json!({}));
            if let Value::Object(meta) = meta {
                meta.insert("name".into(), Value::String(name));
                if def.namespaced {
                    meta.insert("namespace".into(), Value::String(ns.clone()));
                }
                meta.entry("uid")
                    .or_insert_with(|| Value::String(format!("uid-{:08x}-{rv}", fastrand_u32())));
                meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
                meta.entry("creationTimestamp")
                    .or_insert_with(|| Value::String(now_text()));
            }
        }
        self.objects.insert(key, obj.clone());
        self.record(def, &ns, rv, None, Some(obj.clone()));
        Ok(obj)
    }

    /// Replaces an object. With `check_rv`, a resourceVersion in the body must match.
    pub(crate) fn update(
        &mut self,
        def: &'static ResourceDef,
        ns: &str,
        name: &str,
        mut obj: Value,
        check_rv: bool,
    ) -> Result<Value, ApiError> {
        let key = Self::key(def, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(ApiError::not_found(def, name));
        };
        let given = meta_str(&obj, "resourceVersion");
        if check_rv && !given.is_empty() && given != meta_str(&old, "resourceVersion") {
            return Err(ApiError::conflict(
                def,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
        if let (Value::Object(m), Some(old_meta)) = (&mut obj, old.get("metadata")) {
            m.remove("kind");
            m.remove("apiVersion");
            let meta = m.entry("metadata").or_insert_with(|| json!({}));
            for k in ["name", "namespace", "uid", "creationTimestamp"] {
                if let (Value::Object(meta), Some(v)) = (&mut *meta, old_meta.get(k)) {
                    meta.insert(k.into(), v.clone());
                }
            }
        }
        self.commit(def, key, old, obj)
    }

    /// A `PUT` of the `status` subresource: the status of `obj` replaces the stored one;
    /// everything else stays as stored. Conflict on a stale resourceVersion.
    pub(crate) fn update_status(
        &mut self,
        def: &'static ResourceDef,
        ns: &str,
        name: &str,
        obj: Value,
    ) -> Result<Value, ApiError> {
        let key = Self::key(def, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(ApiError::not_found(def, name));
        };
        let given = meta_str(&obj, "resourceVersion");
        if !given.is_empty() && given != meta_str(&old, "resourceVersion") {
            return Err(ApiError::conflict(
                def,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
        let mut new = old.clone();
        match obj.get("status") {
            Some(status) => new["status"] = status.clone(),
            None => {
                if let Some(m) = new.as_object_mut() {
                    m.remove("status");
                }
            }
        }
        self.commit(def, key, old, new)
    }

    /// Stores `new` in place of `old` unless nothing changed (then no new version).
    fn commit(
        &mut self,
        def: &'static ResourceDef,
        key: Key,
        old: Value,
        mut new: Value,
    ) -> Result<Value, ApiError> {
        let mut cmp = new.clone();
        if let Some(m) = cmp.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert(
                "resourceVersion".into(),
                old["metadata"]["resourceVersion"].clone(),
            );
        }
        if cmp == old {
            return Ok(old);
        }
        let rv = self.next_rv();
        if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let ns = key.1.clone();
        self.objects.insert(key, new.clone());
        self.record(def, &ns, rv, Some(old), Some(new.clone()));
        Ok(new)
    }

    /// Applies `f` to a copy of the object and stores the result.
    pub(crate) fn mutate(
        &mut self,
        def: &'static ResourceDef,
        ns: &str,
        name: &str,
        f: impl FnOnce(&mut Value) -> Result<(), ApiError>,
    ) -> Result<Value, ApiError> {
        let key = Self::key(def, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(ApiError::not_found(def, name));
        };
        let mut new = old.clone();
        f(&mut new)?;
        self.commit(def, key, old, new)
    }

    /// Deletes an object. A pod on a node that has not finished is deleted gracefully
    /// (`grace`: the request's `gracePeriodSeconds`; None: the pod's own period or 30 s):
    /// it gets a `deletionTimestamp` and stays until the period ends; 0 removes it at once.
    pub(crate) fn delete(
        &mut self,
        def: &'static ResourceDef,
        ns: &str,
        name: &str,
        uid: Option<&str>,
        rv: Option<&str>,
        grace: Option<i64>,
    ) -> Result<Value, ApiError> {
        let key = Self::key(def, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(ApiError::not_found(def, name));
        };
        if def.plural == "pods" {
            let assigned = old
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty());
            let phase = old.pointer("/status/phase").and_then(Value::as_str);
            let finished = matches!(phase, Some("Succeeded") | Some("Failed"));
            let grace = grace
                .or_else(|| {
                    old.pointer("/spec/terminationGracePeriodSeconds")
                        .and_then(Value::as_i64)
                })
                .unwrap_or(30)
                .max(0);
            if assigned && !finished && grace > 0 {
                return self.delete_gracefully(def, key, old, uid, rv, grace);
            }
        }
        self.check_preconditions(def, name, &old, uid, rv)?;
        self.objects.remove(&key);
        self.terminating.remove(&key);
        let rv = self.next_rv();
        let mut last = old.clone();
        if let Some(m) = last.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        // Watchers see the final state with the deletion's version.
        self.record(def, &key.1, rv, Some(last.clone()), None);
        Ok(last)
    }

    fn check_preconditions(
        &self,
        def: &'static ResourceDef,
        name: &str,
        old: &Value,
        uid: Option<&str>,
        rv: Option<&str>,
    ) -> Result<(), ApiError> {
        if let Some(uid) = uid
            && uid != meta_str(old, "uid")
        {
            return Err(ApiError::conflict(
                def,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta_str(old, "uid")
                ),
            ));
        }
        if let Some(rv) = rv
            && rv != meta_str(old, "resourceVersion")
        {
            return Err(ApiError::conflict(
                def,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    meta_str(old, "resourceVersion")
                ),
            ));
        }
        Ok(())
    }

    /// Marks a pod as terminating (or shortens its grace period), as the pod registry's
    /// graceful deletion does; it leaves when the period ends or on a forced delete.
    fn delete_gracefully(
        &mut self,
        def: &'static ResourceDef,
        key: Key,
        old: Value,
        uid: Option<&str>,
        rv: Option<&str>,
        grace: i64,
    ) -> Result<Value, ApiError> {
        self.check_preconditions(def, &key.2, &old, uid, rv)?;
        let deadline = std::time::Instant::now() + Duration::from_secs(grace as u64);
        if let Some(current) = self.terminating.get(&key)
            && *current <= deadline
        {
            // Already terminating with a shorter period: nothing changes.
            return Ok(old);
        }
        self.terminating.insert(key.clone(), deadline);
        let at = k8s_openapi::jiff::Timestamp::now()
            + k8s_openapi::jiff::SignedDuration::from_secs(grace);
        let mut new = old.clone();
        if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("deletionTimestamp".into(), Value::String(at.to_string()));
            m.insert("deletionGracePeriodSeconds".into(), json!(grace));
        }
        self.commit(def, key, old, new)
    }

    /// Removes the terminating pods whose grace period is over (the kubelet's part).
    fn finish_terminating(&mut self) {
        let now = std::time::Instant::now();
        let mut due: Vec<Key> = self
            .terminating
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(k, _)| k.clone())
            .collect();
        due.sort();
        for key in due {
            self.terminating.remove(&key);
            let def = resource(key.0);
            let _ = self.delete(def, &key.1, &key.2, None, None, Some(0));
        }
    }

    /// The usage of a node by the pods bound to it that have not finished.
    fn node_usage(&self, node: &str) -> (i64, i64, i64) {
        let (mut cpu, mut memory, mut pods) = (0, 0, 0);
        let bound = self.pods_by_node.get(node).into_iter().flatten();
        for p in bound.filter_map(|(ns, name)| self.get(resource("pods"), ns, name)) {
            if matches!(
                p.pointer("/status/phase").and_then(Value::as_str),
                Some("Succeeded") | Some("Failed")
            ) {
                continue;
            }
            let (c, m) = pod_requests(p);
            cpu += c;
            memory += m;
            pods += 1;
        }
        (cpu, memory, pods)
    }

    fn record_binding(&mut self, def: &'static ResourceDef, ns: &str, name: &str) {
        let Some(pod) = self.get(def, ns, name).cloned() else {
            return;
        };
        let node = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let (cpu_used, memory_used, pods_used) = self.node_usage(&node);
        let allocatable = self
            .get(resource("nodes"), "", &node)
            .and_then(|n| n.pointer("/status/allocatable").cloned())
            .unwrap_or(Value::Null);
        let amount = |k: &str, milli: bool| {
            allocatable
                .get(k)
                .and_then(Value::as_str)
                .and_then(|q| kubesched_model::Quantity::parse(q).ok())
                .map(|q| if milli { q.milli_value() } else { q.value() })
                .unwrap_or(0)
        };
        self.bindings.push(BindingRecord {
            pod: format!("{ns}/{name}"),
            uid: meta_str(&pod, "uid"),
            node,
            resource_version: self.rv,
            cpu_used,
            memory_used,
            pods_used,
            cpu_allocatable: amount("cpu", true),
            memory_allocatable: amount("memory", false),
            pods_allocatable: amount("pods", false),
        });
    }

    fn list(&self, def: &'static ResourceDef, ns: Option<&str>, sel: &FieldSelector) -> Vec<Value> {
        self.objects
            .range((def.plural, String::new(), String::new())..)
            .take_while(|(k, _)| k.0 == def.plural)
            .filter(|(k, _)| ns.is_none_or(|n| k.1 == n))
            .map(|(_, v)| v)
            .filter(|v| sel.matches(v))
            .cloned()
            .collect()
    }
}

/// A pod's effective CPU (millicores) and memory requests, by the model's rules.
fn pod_requests(pod: &Value) -> (i64, i64) {
    let Ok(p) = serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(pod.clone()) else {
        return (0, 0);
    };
    match kubesched_model::PodInfo::new(Arc::new(p)) {
        Ok(info) => (info.requests.milli_cpu, info.requests.memory),
        Err(_) => (0, 0),
    }
}

/// A pseudo-random number in [0, 1) for faults injected at random.
pub(crate) fn random_f64() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_usize(COUNTER.fetch_add(1, Ordering::Relaxed));
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

fn fastrand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id() as u64);
    h.finish() as u32
}

/// A running test API server. Stops when dropped.
pub struct TestApiServer {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    listening: Mutex<Option<Listening>>,
    connections: Arc<ConnectionStats>,
    kubelet: tokio::task::JoinHandle<()>,
    dir: PathBuf,
    /// Serving over TLS (ALPN h2 and http/1.1) with the test certificate, when set.
    tls: Option<Arc<rustls::ServerConfig>>,
}

/// The accept loop and the connections it serves.
struct Listening {
    accept: tokio::task::JoinHandle<()>,
    served: Arc<Mutex<tokio::task::JoinSet<()>>>,
}

impl Listening {
    /// Stops accepting and drops every connection at once (as a crash does).
    fn kill(self) {
        self.accept.abort();
        self.served.lock().abort_all();
    }
}

impl std::fmt::Debug for TestApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestApiServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl Drop for TestApiServer {
    fn drop(&mut self) {
        if let Some(l) = self.listening.lock().take() {
            l.kill();
        }
        self.kubelet.abort();
        self.state.lock().watchers.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One open connection, counted while it lives.
struct OpenConnection(Arc<ConnectionStats>);

impl OpenConnection {
    fn new(stats: &Arc<ConnectionStats>) -> Self {
        stats.accepted.fetch_add(1, Ordering::SeqCst);
        let open = stats.open.fetch_add(1, Ordering::SeqCst) + 1;
        stats.peak.fetch_max(open, Ordering::SeqCst);
        Self(stats.clone())
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

fn serve_on(
    listener: tokio::net::TcpListener,
    state: Arc<Mutex<State>>,
    stats: Arc<ConnectionStats>,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> Listening {
    let served = Arc::new(Mutex::new(tokio::task::JoinSet::new()));
    let router = http::router(state);
    let set = served.clone();
    let accept = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let counted = OpenConnection::new(&stats);
            let service = hyper_util::service::TowerToHyperService::new(router.clone());
            let mut set = set.lock();
            // Finished connections are reaped here, so the set stays small.
            while set.try_join_next().is_some() {}
            let tls = tls.clone();
            set.spawn(async move {
                let _counted = counted;
                // HTTP/1.1 or HTTP/2, whichever the client speaks (over TLS, as ALPN chose).
                let builder = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                );
                match tls {
                    Some(tls) => {
                        let Ok(stream) = tokio_rustls::TlsAcceptor::from(tls).accept(stream).await
                        else {
                            return;
                        };
                        let io = hyper_util::rt::TokioIo::new(stream);
                        let _ = builder.serve_connection(io, service).await;
                    }
                    None => {
                        let io = hyper_util::rt::TokioIo::new(stream);
                        let _ = builder.serve_connection(io, service).await;
                    }
                }
            });
        }
    });
    Listening { accept, served }
}

impl TestApiServer {
    /// Starts a server on a free port of 127.0.0.1.
    pub async fn start() -> Self {
        Self::start_with(None).await
    }

    /// Starts a server over HTTPS with the test certificate (`extender.test`, signed by
    /// the test CA) offering HTTP/2 and HTTP/1.1 by ALPN, as kube-apiserver does.
    pub async fn start_tls() -> Self {
        let mut tls = crate::extender::tls_server_config(false);
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Self::start_with(Some(Arc::new(tls))).await
    }

    async fn start_with(tls: Option<Arc<rustls::ServerConfig>>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding 127.0.0.1");
        let addr = listener.local_addr().expect("local address");
        let token = format!("token-{}", addr.port());
        let state = Arc::new(Mutex::new(State::new(token)));
        let connections = Arc::new(ConnectionStats::default());
        let listening = serve_on(listener, state.clone(), connections.clone(), tls.clone());
        let kubelet = {
            let state = state.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    state.lock().finish_terminating();
                }
            })
        };
        let dir = std::env::temp_dir().join(format!(
            "kubesched-apiserver-{}-{}",
            std::process::id(),
            addr.port()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self {
            addr,
            state,
            listening: Mutex::new(Some(listening)),
            connections,
            kubelet,
            dir,
            tls,
        }
    }

    /// Stops at once (every connection dropped, as a crash does), stays away for
    /// `down_for` (connections are refused), then serves again on the same port with the
    /// same objects. The change history is forgotten, so watches resumed from an older
    /// version get 410 Gone and list again, as after kube-apiserver's watch cache restarts.
    pub async fn restart(&self, down_for: Duration) {
        if let Some(l) = self.listening.lock().take() {
            l.kill();
        }
        self.state.lock().watchers.clear();
        self.compact();
        tokio::time::sleep(down_for).await;
        let listener = loop {
            match tokio::net::TcpListener::bind(self.addr).await {
                Ok(l) => break l,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        *self.listening.lock() = Some(serve_on(
            listener,
            self.state.clone(),
            self.connections.clone(),
            self.tls.clone(),
        ));
    }

    /// The server's TCP connection counts.
    pub fn connections(&self) -> &ConnectionStats {
        &self.connections
    }

    /// Starts measuring the peak of open connections afresh.
    pub fn reset_peak_connections(&self) {
        let open = self.connections.open.load(Ordering::SeqCst);
        self.connections.peak.store(open, Ordering::SeqCst);
    }

    /// Every binding accepted so far, in order.
    pub fn bindings(&self) -> Vec<BindingRecord> {
        self.state.lock().bindings.clone()
    }

    /// Deletes a pod as `kubectl delete --grace-period` does (see [`State::delete`]).
    pub fn delete_with_grace(&self, ns: &str, name: &str, grace: i64) -> Option<Value> {
        self.state
            .lock()
            .delete(resource("pods"), ns, name, None, None, Some(grace))
            .ok()
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A kubeconfig file pointing at the server (with the bearer token it requires).
    pub fn write_kubeconfig(&self) -> PathBuf {
        let path = self.dir.join("kubeconfig");
        let token = self.state.lock().token.clone();
        let cluster = match &self.tls {
            Some(_) => format!(
                "server: https://{}\n    certificate-authority: {}\n    tls-server-name: extender.test",
                self.addr,
                crate::extender::tls_fixture("ca.crt").display()
            ),
            None => format!("server: http://{}", self.addr),
        };
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    {cluster}\nusers:\n- name: test\n  user:\n    token: {token}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n    namespace: default\ncurrent-context: test\n"
        );
        std::fs::write(&path, text).expect("writing the kubeconfig");
        path
    }

    /// A scratch folder removed with the server.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Creates an object (any JSON; nothing is validated beyond the name).
    pub fn create(&self, plural: &str, obj: Value) -> Value {
        self.state
            .lock()
            .create(resource(plural), "", obj)
            .expect("create")
    }

    /// Creates or replaces an object.
    pub fn apply(&self, plural: &str, obj: Value) -> Value {
        let def = resource(plural);
        let ns = if def.namespaced {
            meta_or(&obj, "namespace", "default")
        } else {
            String::new()
        };
        let name = meta_str(&obj, "name");
        let mut st = self.state.lock();
        if st.get(def, &ns, &name).is_some() {
            st.update(def, &ns, &name, obj, false).expect("update")
        } else {
            st.create(def, &ns, obj).expect("create")
        }
    }

    /// Changes an object in place; None when it does not exist.
    pub fn modify(
        &self,
        plural: &str,
        ns: &str,
        name: &str,
        f: impl FnOnce(&mut Value),
    ) -> Option<Value> {
        self.state
            .lock()
            .mutate(resource(plural), ns, name, |v| {
                f(v);
                Ok(())
            })
            .ok()
    }

    /// Deletes an object at once (a forced delete); None when it does not exist.
    pub fn delete(&self, plural: &str, ns: &str, name: &str) -> Option<Value> {
        self.state
            .lock()
            .delete(resource(plural), ns, name, None, None, Some(0))
            .ok()
    }

    /// One object.
    pub fn get(&self, plural: &str, ns: &str, name: &str) -> Option<Value> {
        self.state.lock().get(resource(plural), ns, name).cloned()
    }

    /// Every object of a resource.
    pub fn list(&self, plural: &str) -> Vec<Value> {
        self.state
            .lock()
            .list(resource(plural), None, &FieldSelector::default())
    }

    /// The latest resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.state.lock().rv
    }

    /// Forgets the change history: watches from an older version get 410 Gone, and
    /// list pagination snapshots expire.
    pub fn compact(&self) {
        let mut st = self.state.lock();
        st.compacted = st.rv;
        st.history.clear();
        st.snapshots.clear();
    }

    /// Ends every open watch of a resource: cleanly (end of the response, as at a
    /// timeout) or abruptly (the connection breaks mid-stream). Returns how many.
    pub fn drop_watches(&self, plural: &str, abrupt: bool) -> usize {
        let mut st = self.state.lock();
        let mut n = 0;
        st.watchers.retain(|w| {
            if w.res != plural {
                return true;
            }
            n += 1;
            if abrupt {
                let _ = w.tx.send(Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "injected connection reset",
                )));
            }
            false
        });
        n
    }

    /// The newest resourceVersion a bookmark on a watch of `plural` carried, if any was
    /// sent.
    pub fn last_bookmark(&self, plural: &str) -> Option<u64> {
        self.state.lock().bookmarks.get(plural).copied()
    }

    /// Open watches of a resource.
    pub fn open_watches(&self, plural: &str) -> usize {
        let mut st = self.state.lock();
        st.watchers.retain(|w| !w.tx.is_closed());
        st.watchers.iter().filter(|w| w.res == plural).count()
    }

    /// Sends the next event of every open watch of `plural` cut in half (the first half
    /// of its JSON, then the newline), as a broken proxy or a torn connection would: the
    /// event itself is lost from that stream.
    pub fn cut_next_watch_event(&self, plural: &str) {
        let mut st = self.state.lock();
        let def = resource(plural);
        st.cut_next.insert(def.plural);
    }

    /// Sends a raw line to every open watch of a resource (e.g. broken JSON).
    pub fn inject_watch_line(&self, plural: &str, line: &str) {
        let st = self.state.lock();
        for w in st.watchers.iter().filter(|w| w.res == plural) {
            let _ = w.tx.send(Ok(Bytes::from(format!("{line}\n"))));
        }
    }

    /// Answers the next `count` requests with this method whose path contains
    /// `path_contains` with `code`.
    pub fn fail_requests(&self, method: &str, path_contains: &str, count: usize, code: u16) {
        self.state.lock().faults.push(Fault {
            method: method.to_string(),
            path_contains: path_contains.to_string(),
            remaining: Some(count),
            probability: 1.0,
            action: FaultAction::Status(code, format!("injected failure ({code})")),
        });
    }

    /// Answers this share (0..=1) of the requests with this method whose path contains
    /// `path_contains` with `code`, until the faults are cleared.
    pub fn fail_at_random(&self, method: &str, path_contains: &str, probability: f64, code: u16) {
        self.state.lock().faults.push(Fault {
            method: method.to_string(),
            path_contains: path_contains.to_string(),
            remaining: None,
            probability,
            action: FaultAction::Status(code, format!("injected failure ({code})")),
        });
    }

    /// Delays this share (0..=1) of the matching requests by `delay`, until the faults
    /// are cleared.
    pub fn delay_at_random(
        &self,
        method: &str,
        path_contains: &str,
        probability: f64,
        delay: Duration,
    ) {
        self.state.lock().faults.push(Fault {
            method: method.to_string(),
            path_contains: path_contains.to_string(),
            remaining: None,
            probability,
            action: FaultAction::Delay(delay),
        });
    }

    /// Holds every request with this method whose path contains `path_contains` until
    /// the returned gate is released.
    pub fn hold_requests(&self, method: &str, path_contains: &str) -> Gate {
        let gate = Gate::default();
        self.state.lock().faults.push(Fault {
            method: method.to_string(),
            path_contains: path_contains.to_string(),
            remaining: None,
            probability: 1.0,
            action: FaultAction::Hold(gate.clone()),
        });
        gate
    }

    /// Removes every injected fault (held requests stay held until their gate opens).
    pub fn clear_faults(&self) {
        self.state.lock().faults.clear();
    }

    /// Every request so far in the order they arrived, the ones still being answered
    /// with no status.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.state.lock().requests.clone()
    }

    /// Waits until at least `n` requests matching `matches` have been answered, and
    /// returns every answered match (`None` when `timeout` passes first). Use it
    /// instead of reading [`Self::requests`] right after seeing an effect: the effect of
    /// a request shows before its answer is logged.
    pub async fn wait_for_requests(
        &self,
        n: usize,
        timeout: Duration,
        matches: impl Fn(&RequestRecord) -> bool,
    ) -> Option<Vec<RequestRecord>> {
        let answered = |s: &Self| -> Vec<RequestRecord> {
            s.state
                .lock()
                .requests
                .iter()
                .filter(|r| r.status.is_some() && matches(r))
                .cloned()
                .collect()
        };
        let mut found = Vec::new();
        let held = self
            .wait_until(timeout, |s| {
                found = answered(s);
                found.len() >= n
            })
            .await;
        held.then_some(found)
    }

    /// Makes TokenReview accept `token` as `user` in `groups` (the server's own token,
    /// the one of [`TestApiServer::write_kubeconfig`], is accepted for API calls only).
    pub fn add_user_token(&self, token: &str, user: &str, groups: &[&str]) {
        self.state.lock().users.insert(
            token.to_string(),
            (
                user.to_string(),
                groups.iter().map(|g| g.to_string()).collect(),
            ),
        );
    }

    /// Lets a user or a group `verb` a non-resource `path` (a trailing `*` is a prefix),
    /// as a ClusterRole with `nonResourceURLs` would.
    pub fn grant_non_resource(&self, subject: &str, verb: &str, path: &str) {
        self.state
            .lock()
            .grants
            .push((subject.to_string(), verb.to_string(), path.to_string()));
    }

    /// Sets how often open watches that asked for bookmarks get one.
    pub fn set_bookmark_interval(&self, every: Duration) {
        self.state.lock().bookmark_interval = every;
    }

    /// Waits until `check` holds (true) or `timeout` passes (false). `check` runs again
    /// whenever an object changes or a request is logged or answered, and at least every
    /// 100 ms for conditions outside the server (a scheduler's own state).
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut check: impl FnMut(&Self) -> bool,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        let changed = self.state.lock().changed.clone();
        loop {
            // Registered before the check, so a change between the two is not missed.
            let notified = changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if check(self) {
                return true;
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return false;
            }
            let wake = deadline.min(now + Duration::from_millis(100));
            let _ = tokio::time::timeout_at(wake, notified).await;
        }
    }
}

fn meta_or(obj: &Value, field: &str, default: &str) -> String {
    let v = meta_str(obj, field);
    if v.is_empty() { default.to_string() } else { v }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_on(name: &str, node: Option<&str>, cpu: &str) -> Value {
        let mut p = json!({
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        });
        if let Some(n) = node {
            p["spec"]["nodeName"] = json!(n);
        }
        p
    }

    #[test]
    fn node_usage_follows_pods_onto_off_and_between_nodes() {
        let pods = resource("pods");
        let mut st = State::new("t".into());
        st.create(pods, "a", pod_on("bound", Some("n1"), "500m"))
            .expect("create");
        st.create(pods, "a", pod_on("pending", None, "1"))
            .expect("create");
        assert_eq!(st.node_usage("n1"), (500, 0, 1));
        // Binding moves the pending pod onto n1; a finished pod no longer counts.
        st.mutate(pods, "a", "pending", |p| {
            p["spec"]["nodeName"] = json!("n1");
            Ok(())
        })
        .expect("bind");
        assert_eq!(st.node_usage("n1"), (1500, 0, 2));
        st.mutate(pods, "a", "bound", |p| {
            p["status"] = json!({"phase": "Succeeded"});
            Ok(())
        })
        .expect("finish");
        assert_eq!(st.node_usage("n1"), (1000, 0, 1));
        // A replacement moves it elsewhere; a deletion takes it off.
        st.mutate(pods, "a", "pending", |p| {
            p["spec"]["nodeName"] = json!("n2");
            Ok(())
        })
        .expect("move");
        assert_eq!(st.node_usage("n1"), (0, 0, 0));
        assert_eq!(st.node_usage("n2"), (1000, 0, 1));
        st.delete(pods, "a", "pending", None, None, Some(0))
            .expect("delete");
        assert_eq!(st.node_usage("n2"), (0, 0, 0));
        assert!(
            st.pods_by_node
                .values()
                .all(|p| !p.contains(&("a".into(), "pending".into())))
        );
    }
}
