//! Watchers: one kube-runtime watcher per kind (list, then watch from the list's
//! resourceVersion with bookmarks, resume after a dropped stream, relist after 410 Gone),
//! a cache of the last observed objects that turns every relist into a reconciliation
//! (objects missing from it are delivered as deleted, so nothing stays behind as phantom
//! usage), and sinks that hand the changes to the scheduler and the object store.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ApiResource;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event as WatchEvent};
use kube::{Api, Resource};
use kubesched_framework::events::{ActionType, EventObject, EventResource};
use kubesched_framework::kinds::{AnyStore, ObjectKind};
use kubesched_framework::model::PodObject;
use kubesched_framework::registry;
use kubesched_scheduler::{ClusterChange, PodLister, Scheduler};
use parking_lot::{Mutex, RwLock};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::lenient::{Lenient, MetaOf, object_key};

/// The field selector of the pod watcher: finished pods are left out, as upstream's
/// informer leaves them out (a pod that finishes is then seen as deleted).
pub const POD_FIELD_SELECTOR: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// A kind the backend watches: pods and nodes always, then every kind the compiled-in
/// plugins declare (see `kubesched_framework::kinds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchedKind {
    /// The API kind, e.g. `PersistentVolumeClaim`.
    pub kind: &'static str,
    /// The API group (`""` for core).
    pub api_group: &'static str,
    /// The API version, e.g. `v1`.
    pub version: &'static str,
    /// The plural resource name, e.g. `persistentvolumeclaims`.
    pub resource: &'static str,
    /// The declared kind whose stores the watcher fills (None for pods and nodes, which
    /// feed the scheduler's cache).
    pub declared: Option<ObjectKind>,
}

impl WatchedKind {
    const POD: Self = Self {
        kind: "Pod",
        api_group: "",
        version: "v1",
        resource: "pods",
        declared: None,
    };
    const NODE: Self = Self {
        kind: "Node",
        api_group: "",
        version: "v1",
        resource: "nodes",
        declared: None,
    };

    fn declared(kind: ObjectKind) -> Self {
        Self {
            kind: kind.kind,
            api_group: kind.group,
            version: kind.version,
            resource: kind.plural,
            declared: Some(kind),
        }
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.api_group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.api_group, self.version)
        }
    }

    /// How kube's dynamic API names it.
    pub fn api_resource(&self) -> ApiResource {
        ApiResource {
            group: self.api_group.to_string(),
            version: self.version.to_string(),
            api_version: self.api_version(),
            kind: self.kind.to_string(),
            plural: self.resource.to_string(),
        }
    }
}

/// The kinds to watch for `plugins` (pods and nodes always, then each declared kind once,
/// by group and kind; a kind two plugins read through their own types is watched once).
pub fn kinds_to_watch_for<'a>(
    plugins: impl IntoIterator<Item = &'a registry::PluginDescriptor>,
) -> Vec<WatchedKind> {
    let mut out = vec![WatchedKind::POD, WatchedKind::NODE];
    for kind in registry::declared_kinds(plugins).reads {
        if !out
            .iter()
            .any(|w| w.api_group == kind.group && w.kind == kind.kind)
        {
            out.push(WatchedKind::declared(kind));
        }
    }
    out
}

/// The kinds the compiled-in plugins need (pods and nodes always).
pub fn kinds_to_watch() -> Vec<WatchedKind> {
    kinds_to_watch_for(registry::plugins())
}

/// The objects of one kind as last observed, by `namespace/name`.
#[derive(Debug)]
pub struct ObjectCache<K> {
    items: RwLock<HashMap<String, Arc<K>>>,
}

impl<K> Default for ObjectCache<K> {
    fn default() -> Self {
        Self {
            items: RwLock::new(HashMap::new()),
        }
    }
}

impl<K> ObjectCache<K> {
    /// One object.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.items.read().get(key).cloned()
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.items.read().len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.items.read().is_empty()
    }

    fn insert(&self, key: String, obj: Arc<K>) -> Option<Arc<K>> {
        self.items.write().insert(key, obj)
    }

    fn remove(&self, key: &str) -> Option<Arc<K>> {
        self.items.write().remove(key)
    }

    /// Removes and returns every object whose key is not in `seen`, sorted by key.
    fn remove_missing(&self, seen: &HashSet<String>) -> Vec<Arc<K>> {
        let mut items = self.items.write();
        let mut gone: Vec<String> = items
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        gone.sort();
        gone.into_iter().filter_map(|k| items.remove(&k)).collect()
    }
}

impl PodLister for ObjectCache<Pod> {
    fn get(&self, namespace: &str, name: &str) -> Option<PodObject> {
        self.items
            .read()
            .get(&format!("{namespace}/{name}"))
            .cloned()
            .map(PodObject::new)
    }
}

/// Which watchers have finished their first list.
#[derive(Debug)]
pub struct SyncTracker {
    expected: BTreeSet<&'static str>,
    synced: Mutex<BTreeSet<&'static str>>,
    all: watch::Sender<bool>,
    /// When the last expected kind was listed (at creation when none is expected).
    at: std::sync::OnceLock<std::time::Instant>,
}

impl SyncTracker {
    /// Expects these kinds.
    pub fn new(kinds: &[WatchedKind]) -> Self {
        let expected: BTreeSet<&'static str> = kinds.iter().map(|k| k.kind).collect();
        let (all, _) = watch::channel(expected.is_empty());
        let at = std::sync::OnceLock::new();
        if expected.is_empty() {
            let _ = at.set(std::time::Instant::now());
        }
        Self {
            expected,
            synced: Mutex::new(BTreeSet::new()),
            all,
            at,
        }
    }

    fn mark(&self, kind: &'static str) {
        let mut s = self.synced.lock();
        if s.insert(kind) {
            tracing::info!(kind, "cache synced");
        }
        if self.expected.iter().all(|k| s.contains(k)) {
            // Stamped before anyone can see the flag, so nothing the scheduler does after
            // the sync can look earlier than it.
            let _ = self.at.set(std::time::Instant::now());
            self.all.send_replace(true);
        }
    }

    /// Whether every expected kind has been listed once.
    pub fn all_synced(&self) -> bool {
        *self.all.borrow()
    }

    /// The instant every expected kind had been listed once, when it has.
    pub fn synced_at(&self) -> Option<std::time::Instant> {
        self.at.get().copied()
    }

    /// The kinds not yet listed, sorted.
    pub fn pending(&self) -> Vec<&'static str> {
        let s = self.synced.lock();
        self.expected
            .iter()
            .filter(|k| !s.contains(*k))
            .copied()
            .collect()
    }

    /// Waits until every expected kind has been listed once.
    pub async fn wait(&self) {
        let mut rx = self.all.subscribe();
        // An error means the sender is gone, which cannot happen while `self` lives.
        let _ = rx.wait_for(|synced| *synced).await;
    }
}

/// Counters of what the watchers saw.
#[derive(Debug, Default)]
pub struct WatchStats {
    /// Objects that could not be decoded and were skipped.
    pub malformed: AtomicU64,
    /// Relists (initial lists included).
    pub lists: AtomicU64,
    /// Objects delivered as deleted because a relist no longer had them.
    pub deleted_on_relist: AtomicU64,
    /// Watch lines that could not be decoded at all (each made the watcher list again).
    pub undecodable: AtomicU64,
}

/// Receives one kind's changes, after the object cache was updated.
pub(crate) trait Sink<K>: Send + Sync + 'static {
    fn added(&self, obj: Arc<K>);
    fn updated(&self, old: Arc<K>, new: Arc<K>);
    fn deleted(&self, obj: Arc<K>);
}

pub(crate) struct PodSink(pub Arc<Scheduler>);

impl Sink<Pod> for PodSink {
    fn added(&self, obj: Arc<Pod>) {
        self.0
            .handle_change(ClusterChange::PodAdded(PodObject::new(obj)));
    }
    fn updated(&self, old: Arc<Pod>, new: Arc<Pod>) {
        self.0.handle_change(ClusterChange::PodUpdated(
            PodObject::new(old),
            PodObject::new(new),
        ));
    }
    fn deleted(&self, obj: Arc<Pod>) {
        self.0
            .handle_change(ClusterChange::PodDeleted(PodObject::new(obj)));
    }
}

pub(crate) struct NodeSink(pub Arc<Scheduler>);

impl Sink<Node> for NodeSink {
    fn added(&self, obj: Arc<Node>) {
        self.0.handle_change(ClusterChange::NodeAdded(obj));
    }
    fn updated(&self, old: Arc<Node>, new: Arc<Node>) {
        self.0.handle_change(ClusterChange::NodeUpdated(old, new));
    }
    fn deleted(&self, obj: Arc<Node>) {
        self.0.handle_change(ClusterChange::NodeDeleted(obj));
    }
}

/// An object of a declared kind as the watch delivers it: raw JSON, decoded into each
/// reading plugin's type by the stores (a decode failure is reported with the kind, the
/// object and the field, and the object is skipped).
#[derive(Debug, Clone)]
pub(crate) struct Raw {
    meta: ObjectMeta,
    value: serde_json::Value,
}

impl<'de> serde::Deserialize<'de> for Raw {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        let meta = value
            .get("metadata")
            .and_then(|m| ObjectMeta::deserialize(m).ok())
            .unwrap_or_default();
        Ok(Self { meta, value })
    }
}

impl Resource for Lenient<Raw> {
    type DynamicType = ApiResource;
    type Scope = kube::core::DynamicResourceScope;

    fn kind(dt: &ApiResource) -> std::borrow::Cow<'_, str> {
        dt.kind.as_str().into()
    }
    fn group(dt: &ApiResource) -> std::borrow::Cow<'_, str> {
        dt.group.as_str().into()
    }
    fn version(dt: &ApiResource) -> std::borrow::Cow<'_, str> {
        dt.version.as_str().into()
    }
    fn api_version(dt: &ApiResource) -> std::borrow::Cow<'_, str> {
        dt.api_version.as_str().into()
    }
    fn plural(dt: &ApiResource) -> std::borrow::Cow<'_, str> {
        dt.plural.as_str().into()
    }
    fn meta(&self) -> &ObjectMeta {
        Lenient::meta(self)
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.meta_mut_inner()
    }
}

impl MetaOf for Raw {
    fn meta_of(&self) -> &ObjectMeta {
        &self.meta
    }
}

impl<K: Resource> MetaOf for K {
    fn meta_of(&self) -> &ObjectMeta {
        self.meta()
    }
}

/// Fills the stores of one declared kind and tells the scheduler, so pods rejected by a
/// plugin that registered the kind's events get another chance.
pub(crate) struct StoreSink {
    pub scheduler: Arc<Scheduler>,
    /// Every store of the kind (one per Rust type plugins read it through).
    pub stores: Vec<Arc<dyn AnyStore>>,
    pub stats: Arc<WatchStats>,
}

impl StoreSink {
    fn notify(
        &self,
        resource: EventResource,
        action: ActionType,
        old: Option<EventObject>,
        new: Option<EventObject>,
    ) {
        self.scheduler.handle_change(ClusterChange::Other {
            resource,
            action,
            old,
            new,
        });
    }

    fn put(&self, obj: &Raw, action: ActionType) {
        for store in &self.stores {
            match store.upsert_raw(obj.value.clone()) {
                Ok((old, new)) => {
                    let action = if old.is_none() {
                        ActionType::ADD
                    } else {
                        action
                    };
                    self.notify(store.kind().event_resource(), action, old, Some(new));
                }
                Err(e) => {
                    self.stats.malformed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(kind = e.kind, object = %e.object, field = e.field.as_deref().unwrap_or(""), error = %e.message, "skipping malformed object");
                }
            }
        }
    }
}

impl Sink<Raw> for StoreSink {
    fn added(&self, obj: Arc<Raw>) {
        self.put(&obj, ActionType::ADD);
    }
    fn updated(&self, _old: Arc<Raw>, new: Arc<Raw>) {
        self.put(&new, ActionType::UPDATE);
    }
    fn deleted(&self, obj: Arc<Raw>) {
        let meta = obj.meta_of();
        for store in &self.stores {
            if let Some(old) = store.remove_raw(
                meta.namespace.as_deref(),
                meta.name.as_deref().unwrap_or(""),
            ) {
                self.notify(
                    store.kind().event_resource(),
                    ActionType::DELETE,
                    Some(old),
                    None,
                );
            }
        }
    }
}

/// Settings shared by the watchers.
#[derive(Debug, Clone)]
pub(crate) struct WatchSettings {
    pub page_size: u32,
    pub sync: Arc<SyncTracker>,
    pub stats: Arc<WatchStats>,
}

fn same_uid(a: &ObjectMeta, b: &ObjectMeta) -> bool {
    match (&a.uid, &b.uid) {
        (Some(x), Some(y)) => x == y,
        _ => true,
    }
}

/// Applies watcher events to the cache and the sink.
struct Reconciler<K, S> {
    kind: WatchedKind,
    cache: Arc<ObjectCache<K>>,
    sink: S,
    settings: WatchSettings,
    relist: Option<HashSet<String>>,
}

impl<K, S> Reconciler<K, S>
where
    K: MetaOf + Send + Sync + 'static,
    S: Sink<K>,
{
    fn handle(&mut self, event: WatchEvent<Lenient<K>>) {
        match event {
            WatchEvent::Init => {
                self.settings.stats.lists.fetch_add(1, Ordering::Relaxed);
                self.relist = Some(HashSet::new());
            }
            WatchEvent::InitApply(obj) => {
                if let Some(seen) = self.relist.as_mut() {
                    seen.insert(obj.key());
                }
                self.apply(obj);
            }
            WatchEvent::InitDone => {
                let seen = self.relist.take().unwrap_or_default();
                for old in self.cache.remove_missing(&seen) {
                    // Deleted while we were not watching: deliver the last state we knew.
                    tracing::debug!(kind = self.kind.kind, object = %object_key(old.meta_of()), "gone after relist; delivering as deleted");
                    self.settings
                        .stats
                        .deleted_on_relist
                        .fetch_add(1, Ordering::Relaxed);
                    self.sink.deleted(old);
                }
                self.settings.sync.mark(self.kind.kind);
            }
            WatchEvent::Apply(obj) => self.apply(obj),
            WatchEvent::Delete(obj) => self.delete(obj),
        }
    }

    fn apply(&self, obj: Lenient<K>) {
        let key = obj.key();
        let new = match obj.object {
            Ok(o) => Arc::new(o),
            Err(m) => {
                self.settings
                    .stats
                    .malformed
                    .fetch_add(1, Ordering::Relaxed);
                tracing::warn!(kind = self.kind.kind, object = %key, field = %m.field, error = %m.message, "skipping malformed object");
                return;
            }
        };
        match self.cache.insert(key, new.clone()) {
            None => self.sink.added(new),
            Some(old) if !same_uid(old.meta_of(), new.meta_of()) => {
                // Replaced under the same name while we were away.
                self.sink.deleted(old);
                self.sink.added(new);
            }
            Some(old)
                if old.meta_of().resource_version.is_some()
                    && old.meta_of().resource_version == new.meta_of().resource_version => {}
            Some(old) => self.sink.updated(old, new),
        }
    }

    fn delete(&self, obj: Lenient<K>) {
        let key = obj.key();
        let Some(last) = self.cache.remove(&key) else {
            tracing::debug!(kind = self.kind.kind, object = %key, "deletion of an object never seen");
            return;
        };
        match obj.object {
            Ok(o) => self.sink.deleted(Arc::new(o)),
            Err(_) => self.sink.deleted(last),
        }
    }
}

/// Whether an error means the watch cannot resume from its resourceVersion and the
/// watcher must list again. kube-runtime relists by itself on a 410 ERROR event in the
/// stream (what the API server sends); this covers a server answering the watch request
/// itself with 410.
fn needs_fresh_list(err: &watcher::Error) -> bool {
    matches!(err, watcher::Error::WatchStartFailed(kube::Error::Api(s)) if s.code == 410)
}

/// Runs one kind's watcher until the task is aborted.
pub(crate) async fn run_watcher<K, S>(
    api: Api<Lenient<K>>,
    kind: WatchedKind,
    field_selector: Option<&'static str>,
    cache: Arc<ObjectCache<K>>,
    sink: S,
    settings: WatchSettings,
) where
    K: MetaOf + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    Lenient<K>: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    <Lenient<K> as Resource>::DynamicType: Clone + Eq + std::hash::Hash,
    S: Sink<K>,
{
    let mut config = watcher::Config::default().page_size(settings.page_size.max(1));
    if let Some(f) = field_selector {
        config = config.fields(f);
    }
    let mut reconciler = Reconciler {
        kind,
        cache,
        sink,
        settings,
        relist: None,
    };
    // Lists taken in a row because of undecodable lines, for a backoff should a server
    // keep sending them.
    let mut undecodable_in_a_row: u32 = 0;
    loop {
        if undecodable_in_a_row > 1 {
            let wait = Duration::from_millis(100 << undecodable_in_a_row.min(8));
            tokio::time::sleep(wait.min(Duration::from_secs(30))).await;
        }
        let stream = watcher::watcher(api.clone(), config.clone()).default_backoff();
        futures::pin_mut!(stream);
        let mut fresh_list = false;
        while let Some(event) = stream.next().await {
            match event {
                Ok(e) => {
                    if matches!(e, WatchEvent::Apply(_) | WatchEvent::Delete(_)) {
                        undecodable_in_a_row = 0;
                    }
                    reconciler.handle(e);
                }
                Err(e) if needs_fresh_list(&e) => {
                    tracing::info!(kind = kind.kind, error = %e, "watch resource version too old; listing again");
                    fresh_list = true;
                    break;
                }
                Err(watcher::Error::WatchError(s))
                    if s.code == 410
                        && s.message
                            .starts_with(crate::watch_lines::UNDECODABLE_MESSAGE) =>
                {
                    // The line guard's stand-in for a cut or garbled event: kube-runtime
                    // lists again, as on any 410.
                    reconciler
                        .settings
                        .stats
                        .undecodable
                        .fetch_add(1, Ordering::Relaxed);
                    undecodable_in_a_row += 1;
                    tracing::warn!(kind = kind.kind, message = %s.message, "watch error: an event could not be decoded; listing again");
                    if undecodable_in_a_row > 1 {
                        fresh_list = true;
                        break;
                    }
                }
                Err(watcher::Error::WatchError(s)) if s.code == 410 => {
                    tracing::info!(kind = kind.kind, message = %s.message, "watch expired; listing again");
                }
                Err(watcher::Error::WatchFailed(kube::Error::SerdeError(e))) => {
                    // A line that is not an event (cut, or garbage): kube-runtime would go
                    // on with the next line and the event in it would be lost until some
                    // later relist. Listing again now loses nothing.
                    reconciler
                        .settings
                        .stats
                        .undecodable
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(kind = kind.kind, error = %e, "watch error: an event could not be decoded; listing again");
                    undecodable_in_a_row += 1;
                    fresh_list = true;
                    break;
                }
                Err(e) => {
                    tracing::warn!(kind = kind.kind, error = %e, "watch error; retrying with backoff");
                }
            }
        }
        if !fresh_list {
            // kube-runtime's watcher stream never ends; if it does, start over.
            tracing::warn!(kind = kind.kind, "watch stream ended; starting again");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_and_nodes_are_always_watched() {
        let kinds: Vec<&str> = kinds_to_watch().iter().map(|k| k.kind).collect();
        assert!(
            kinds.contains(&"Pod") && kinds.contains(&"Node"),
            "{kinds:?}"
        );
        // No plugin is linked into this crate's tests: nothing else is needed.
        assert_eq!(kinds.len(), 2, "{kinds:?}");
    }

    #[test]
    fn the_pod_selector_leaves_finished_pods_out() {
        assert_eq!(
            POD_FIELD_SELECTOR,
            "status.phase!=Succeeded,status.phase!=Failed"
        );
    }
}
