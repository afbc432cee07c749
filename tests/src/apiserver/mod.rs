//! A test API server: a small kube-apiserver stand-in on 127.0.0.1 that speaks the real
//! wire protocol for what kubesched uses — JSON list (with limit/continue pagination) and
//! watch (resourceVersion resumption, bookmarks, `410 Gone` for compacted versions, field
//! selectors with the documented ADDED/DELETED transitions), the `pods/binding`
//! subresource (409 for a bound or replaced pod), status patches (strategic merge),
//! events.k8s.io events, and leases with optimistic concurrency (409 on a stale
//! resourceVersion) — plus fault injection: status codes for chosen requests, requests
//! held until released, dropped watch streams, compaction, raw lines in watch streams.
//!
//! Shortcuts, all on the safe side for a client: pods are deleted at once (no grace
//! period, no kubelet), validation is limited to what the tests need, and unsupported
//! query features (label selectors, exact-version lists) are refused with 400.

pub mod fixtures;
mod http;
pub mod patch;
pub mod selector;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Bytes;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc, oneshot};

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
    res!("", "v1", "namespaces", "Namespace", false),
    res!("", "v1", "services", "Service", true),
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
];

/// The definition of a plural resource name.
pub fn resource(plural: &str) -> &'static ResourceDef {
    RESOURCES
        .iter()
        .find(|r| r.plural == plural)
        .unwrap_or_else(|| panic!("the test API server does not serve {plural}"))
}

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// HTTP method.
    pub method: String,
    /// Path.
    pub path: String,
    /// Query string.
    pub query: String,
    /// Response status.
    pub status: u16,
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
}

#[derive(Debug, Clone)]
struct Fault {
    method: String,
    path_contains: String,
    remaining: Option<usize>,
    action: FaultAction,
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
    snapshots: HashMap<u64, (u64, Vec<Value>)>,
    bookmark_interval: Duration,
    token: String,
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

fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = json!({ "type": kind, "object": object }).to_string();
    line.push('\n');
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
            snapshots: HashMap::new(),
            bookmark_interval: Duration::from_secs(1),
            token,
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
        self.watchers.retain(|w| {
            if w.res != def.plural || w.ns.as_deref().is_some_and(|n| n != ns) {
                return !w.tx.is_closed();
            }
            match Self::event_for(def, &w.selector, old.as_ref(), new.as_ref()) {
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

    pub(crate) fn delete(
        &mut self,
        def: &'static ResourceDef,
        ns: &str,
        name: &str,
        uid: Option<&str>,
        rv: Option<&str>,
    ) -> Result<Value, ApiError> {
        let key = Self::key(def, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(ApiError::not_found(def, name));
        };
        if let Some(uid) = uid
            && uid != meta_str(&old, "uid")
        {
            return Err(ApiError::conflict(
                def,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta_str(&old, "uid")
                ),
            ));
        }
        if let Some(rv) = rv
            && rv != meta_str(&old, "resourceVersion")
        {
            return Err(ApiError::conflict(
                def,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    meta_str(&old, "resourceVersion")
                ),
            ));
        }
        self.objects.remove(&key);
        let rv = self.next_rv();
        let mut last = old.clone();
        if let Some(m) = last.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        // Watchers see the final state with the deletion's version.
        self.record(def, &key.1, rv, Some(last.clone()), None);
        Ok(last)
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
    shutdown: Option<oneshot::Sender<()>>,
    dir: PathBuf,
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
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.state.lock().watchers.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl TestApiServer {
    /// Starts a server on a free port of 127.0.0.1.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding 127.0.0.1");
        let addr = listener.local_addr().expect("local address");
        let token = format!("token-{}", addr.port());
        let state = Arc::new(Mutex::new(State::new(token)));
        let router = http::router(state.clone());
        let (tx, rx) = oneshot::channel();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        let dir = std::env::temp_dir().join(format!(
            "kubesched-apiserver-{}-{}",
            std::process::id(),
            addr.port()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self {
            addr,
            state,
            shutdown: Some(tx),
            dir,
        }
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A kubeconfig file pointing at the server (with the bearer token it requires).
    pub fn write_kubeconfig(&self) -> PathBuf {
        let path = self.dir.join("kubeconfig");
        let token = self.state.lock().token.clone();
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: http://{}\nusers:\n- name: test\n  user:\n    token: {token}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n    namespace: default\ncurrent-context: test\n",
            self.addr
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

    /// Deletes an object; None when it does not exist.
    pub fn delete(&self, plural: &str, ns: &str, name: &str) -> Option<Value> {
        self.state
            .lock()
            .delete(resource(plural), ns, name, None, None)
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

    /// Open watches of a resource.
    pub fn open_watches(&self, plural: &str) -> usize {
        let mut st = self.state.lock();
        st.watchers.retain(|w| !w.tx.is_closed());
        st.watchers.iter().filter(|w| w.res == plural).count()
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
            action: FaultAction::Status(code, format!("injected failure ({code})")),
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
            action: FaultAction::Hold(gate.clone()),
        });
        gate
    }

    /// Removes every injected fault (held requests stay held until their gate opens).
    pub fn clear_faults(&self) {
        self.state.lock().faults.clear();
    }

    /// Every request so far, oldest first.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.state.lock().requests.clone()
    }

    /// Sets how often open watches that asked for bookmarks get one.
    pub fn set_bookmark_interval(&self, every: Duration) {
        self.state.lock().bookmark_interval = every;
    }

    /// Polls `check` every 20 ms until it holds (true) or `timeout` passes (false).
    pub async fn wait_until(
        &self,
        timeout: Duration,
        mut check: impl FnMut(&Self) -> bool,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if check(self) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn meta_or(obj: &Value, field: &str, default: &str) -> String {
    let v = meta_str(obj, field);
    if v.is_empty() { default.to_string() } else { v }
}
