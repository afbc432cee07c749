//! One kind's objects ([`Store`]), the backends' type-erased view of it ([`AnyStore`]),
//! which decodes raw objects from a watch or a manifest without knowing the Rust type, and
//! the descriptor that makes such a store for a kind ([`ObjectKind`]).
//! [`ObjectStore`](crate::ObjectStore) holds one store per kind.

use std::any::{Any, TypeId};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::{Metadata, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use parking_lot::RwLock;

use crate::events::{EventObject, EventResource};
use crate::kind::{DecodeError, Kind, KindName, KindScope, decode_object};

/// The type-erased descriptor of a [`Kind`]: what a backend needs to watch, list, load
/// and store its objects without knowing the Rust type.
#[derive(Clone, Copy)]
pub struct ObjectKind {
    /// The API group (`""` for the core group).
    pub group: &'static str,
    /// The API version, e.g. `v1alpha1`.
    pub version: &'static str,
    /// The kind, e.g. `PodGroup`.
    pub kind: &'static str,
    /// The plural resource name, e.g. `podgroups`.
    pub plural: &'static str,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
    type_id: fn() -> TypeId,
    new_store: fn() -> Arc<dyn AnyStore>,
}

impl ObjectKind {
    /// The descriptor of `K`.
    pub const fn of<K: Kind>() -> Self {
        Self {
            group: K::GROUP,
            version: K::VERSION,
            kind: K::KIND,
            plural: K::URL_PATH_SEGMENT,
            namespaced: <K::Scope as KindScope>::NAMESPACED,
            type_id: TypeId::of::<K>,
            new_store: new_store::<K>,
        }
    }

    /// `group/version`, or `version` for the core group (the `apiVersion` of its objects).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `plural.group` (`plural` for the core group), as `kubectl` and RBAC messages name it.
    pub fn resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Its group and kind.
    pub const fn name(&self) -> KindName {
        KindName {
            group: self.group,
            kind: self.kind,
        }
    }

    /// Whether an object with this `apiVersion` and `kind` is of this kind's group and kind
    /// (the version is checked when the object is decoded).
    pub fn matches(&self, api_version: &str, kind: &str) -> bool {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        self.kind == kind && self.group == group
    }

    /// The Rust type behind the descriptor.
    pub fn type_id(&self) -> TypeId {
        (self.type_id)()
    }

    /// The resource its change events are reported as: the built-in resources the queue
    /// has always known keep their names, every other kind is [`EventResource::Kind`].
    pub fn event_resource(&self) -> EventResource {
        EventResource::of_kind(self.name())
    }

    /// A new, empty store for objects of this kind.
    pub(crate) fn new_store(&self) -> Arc<dyn AnyStore> {
        (self.new_store)()
    }
}

impl PartialEq for ObjectKind {
    fn eq(&self, other: &Self) -> bool {
        self.type_id() == other.type_id()
    }
}

impl Eq for ObjectKind {}

impl fmt::Debug for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.api_version(), self.kind)
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.kind, self.resource())
    }
}

/// One kind's objects by `namespace/name` (or `name` for cluster-scoped kinds).
#[derive(Debug)]
pub struct Store<K> {
    items: RwLock<BTreeMap<String, Arc<K>>>,
    /// Counts the changes, so a plugin waiting for the cluster (e.g. for a volume to be
    /// bound) wakes up on the next change instead of polling.
    changes: tokio::sync::watch::Sender<u64>,
    /// Bumped on every write, so readers can keep what they derive from the content
    /// until it changes.
    generation: AtomicU64,
}

impl<K> Default for Store<K> {
    fn default() -> Self {
        Self {
            items: RwLock::new(BTreeMap::new()),
            changes: tokio::sync::watch::Sender::new(0),
            generation: AtomicU64::new(0),
        }
    }
}

impl<K> Store<K> {
    /// A receiver that sees every later change of this store (`changed().await`).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn changed(&self) {
        self.generation.fetch_add(1, Ordering::Release);
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }
}

fn key_of(meta: &ObjectMeta) -> String {
    match &meta.namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{}", meta.name.as_deref().unwrap_or("")),
        _ => meta.name.clone().unwrap_or_default(),
    }
}

impl<K: Metadata<Ty = ObjectMeta>> Store<K> {
    /// Adds or replaces an object.
    pub fn upsert(&self, obj: K) {
        self.upsert_arc(Arc::new(obj));
    }

    /// Adds or replaces an object already shared; returns the one it replaced.
    pub fn upsert_arc(&self, obj: Arc<K>) -> Option<Arc<K>> {
        let key = key_of(obj.metadata());
        let old = self.items.write().insert(key, obj);
        self.changed();
        old
    }

    /// A number that changes whenever the content changes.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Removes an object; returns it if it was there.
    pub fn remove(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        let key = match namespace {
            Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
            _ => name.to_string(),
        };
        let removed = self.items.write().remove(&key);
        if removed.is_some() {
            self.changed();
        }
        removed
    }

    /// One object.
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        let items = self.items.read();
        match namespace {
            Some(ns) if !ns.is_empty() => items.get(&format!("{ns}/{name}")).cloned(),
            _ => items.get(name).cloned(),
        }
    }

    /// Every object, sorted by key.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.items.read().values().cloned().collect()
    }

    /// Every object of a namespace, sorted by name.
    pub fn list_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        let prefix = format!("{namespace}/");
        self.items
            .read()
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.items.read().len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.items.read().is_empty()
    }

    /// Replaces the whole content (after a relist).
    pub fn replace_all(&self, objs: Vec<K>) {
        let map = objs
            .into_iter()
            .map(|o| (key_of(o.metadata()), Arc::new(o)))
            .collect();
        *self.items.write() = map;
        self.changed();
    }
}

/// The backends' type-erased view of one kind's [`Store`]: they feed it raw objects
/// (from a watch or a manifest) without knowing the Rust type. Plugins use the typed
/// [`Store`] from [`ObjectStore::of`](crate::ObjectStore::of) instead.
pub trait AnyStore: Send + Sync + 'static {
    /// The kind stored.
    fn kind(&self) -> ObjectKind;
    /// Decodes a raw object and adds or replaces it; returns the previous and the new
    /// object as events carry them (hints downcast them to the kind's type).
    fn upsert_raw(
        &self,
        value: serde_json::Value,
    ) -> Result<(Option<EventObject>, EventObject), DecodeError>;
    /// Removes an object; returns it as events carry it if it was there.
    fn remove_raw(&self, namespace: Option<&str>, name: &str) -> Option<EventObject>;
    /// One object as JSON (with `apiVersion` and `kind`).
    fn get_raw(&self, namespace: Option<&str>, name: &str) -> Option<serde_json::Value>;
    /// Number of objects.
    fn len(&self) -> usize;
    /// Whether there is none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The typed store, for [`ObjectStore::of`](crate::ObjectStore::of)'s downcast.
    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

/// A new, empty store of `K`'s objects (what [`ObjectKind::of`] keeps for the backends).
pub(crate) fn new_store<K: Kind>() -> Arc<dyn AnyStore> {
    Arc::new(Store::<K>::default())
}

impl<K: Kind> AnyStore for Store<K> {
    fn kind(&self) -> ObjectKind {
        ObjectKind::of::<K>()
    }

    fn upsert_raw(
        &self,
        value: serde_json::Value,
    ) -> Result<(Option<EventObject>, EventObject), DecodeError> {
        let obj = Arc::new(decode_object::<K>(value)?);
        let old = self.upsert_arc(obj.clone());
        Ok((old.map(EventObject::object), EventObject::object(obj)))
    }

    fn remove_raw(&self, namespace: Option<&str>, name: &str) -> Option<EventObject> {
        self.remove(namespace, name).map(EventObject::object)
    }

    fn get_raw(&self, namespace: Option<&str>, name: &str) -> Option<serde_json::Value> {
        let obj = self.get(namespace, name)?;
        let mut v = serde_json::to_value(&*obj).ok()?;
        if let Some(m) = v.as_object_mut() {
            m.insert("apiVersion".into(), K::API_VERSION.into());
            m.insert("kind".into(), K::KIND.into());
        }
        Some(v)
    }

    fn len(&self) -> usize {
        Store::len(self)
    }

    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}
