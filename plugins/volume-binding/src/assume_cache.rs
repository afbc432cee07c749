//! The assume cache: the API's PersistentVolumes and claims (from the object store) with
//! the plugin's in-flight decisions laid over them, as upstream's `AssumeCache`.
//!
//! Reserve assumes a volume bound to a claim (or a claim given a node to provision on) so
//! the next pod does not get the same volume while the binding cycle is still writing it.
//! An assumed object is dropped as soon as the API's copy moves past it (a newer
//! resourceVersion, or another object when versions are not numbers), or when Unreserve
//! restores it.

use std::collections::HashMap;
use std::sync::Arc;

use kubesched_framework::model::k8s_openapi::Metadata;
use kubesched_framework::model::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubesched_framework::{ObjectStore, Store};
use parking_lot::Mutex;

use crate::volume::resource_version;

struct Assumed<K> {
    /// What the plugin decided.
    object: Arc<K>,
    /// The API's copy when it was assumed.
    base: Arc<K>,
}

/// The API objects of one kind with assumed changes on top.
pub struct AssumeCache<K: 'static> {
    /// How errors name the kind, as upstream does (`v1.PersistentVolume`).
    description: &'static str,
    objects: Arc<ObjectStore>,
    store: fn(&ObjectStore) -> &Store<K>,
    assumed: Mutex<HashMap<String, Assumed<K>>>,
}

impl<K> std::fmt::Debug for AssumeCache<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AssumeCache")
            .field("kind", &self.description)
            .field("assumed", &self.assumed.lock().len())
            .finish()
    }
}

fn split(key: &str) -> (Option<&str>, &str) {
    match key.split_once('/') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, key),
    }
}

fn key_of(meta: &ObjectMeta) -> String {
    match meta.namespace.as_deref().filter(|n| !n.is_empty()) {
        Some(ns) => format!("{ns}/{}", meta.name.as_deref().unwrap_or_default()),
        None => meta.name.clone().unwrap_or_default(),
    }
}

/// Whether the API's copy has moved past an assumed object.
fn superseded<K: Metadata<Ty = ObjectMeta>>(api: &Arc<K>, a: &Assumed<K>) -> bool {
    if Arc::ptr_eq(api, &a.base) {
        return false;
    }
    match (
        resource_version(api.metadata().resource_version.as_deref()),
        resource_version(a.object.metadata().resource_version.as_deref()),
    ) {
        (Some(api), Some(assumed)) => api > assumed,
        // Without numeric versions (hand-written manifests), any new API copy wins.
        _ => true,
    }
}

impl<K: Metadata<Ty = ObjectMeta> + Send + Sync + 'static> AssumeCache<K> {
    /// A cache over one store of `objects`.
    pub fn new(
        description: &'static str,
        objects: Arc<ObjectStore>,
        store: fn(&ObjectStore) -> &Store<K>,
    ) -> Self {
        Self {
            description,
            objects,
            store,
            assumed: Mutex::new(HashMap::new()),
        }
    }

    fn api(&self, key: &str) -> Option<Arc<K>> {
        let (ns, name) = split(key);
        (self.store)(&self.objects).get(ns, name)
    }

    /// The object by key (`namespace/name` or `name`), assumed changes included.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        let api = self.api(key)?;
        let assumed = self.assumed.lock();
        match assumed.get(key) {
            Some(a) if !superseded(&api, a) => Some(a.object.clone()),
            _ => Some(api),
        }
    }

    /// The object as the API has it, without assumed changes.
    pub fn get_api(&self, key: &str) -> Option<Arc<K>> {
        self.api(key)
    }

    /// Every object, assumed changes included, sorted by key.
    pub fn list(&self) -> Vec<Arc<K>> {
        let all = (self.store)(&self.objects).list();
        let assumed = self.assumed.lock();
        if assumed.is_empty() {
            return all;
        }
        all.into_iter()
            .map(|api| match assumed.get(&key_of(api.metadata())) {
                Some(a) if !superseded(&api, a) => a.object.clone(),
                _ => api,
            })
            .collect()
    }

    /// Lays `object` over the API's copy. Refused when the API has no such object or when
    /// `object` is older than what the cache holds, with upstream's words.
    pub fn assume(&self, object: K) -> Result<(), String> {
        let key = key_of(object.metadata());
        let Some(api) = self.api(&key) else {
            return Err(format!("could not find {} {key:?}", self.description));
        };
        let mut assumed = self.assumed.lock();
        // Entries the API moved past are dead weight: drop them now and then.
        assumed.retain(|k, a| self.api(k).is_some_and(|api| !superseded(&api, a)));
        let latest = assumed
            .get(&key)
            .map_or_else(|| api.clone(), |a| a.object.clone());
        if let (Some(stored), Some(new)) = (
            resource_version(latest.metadata().resource_version.as_deref()),
            resource_version(object.metadata().resource_version.as_deref()),
        ) && new < stored
        {
            return Err(format!(
                "{} {key:?} is out of sync (stored: {stored}, assume: {new})",
                self.description
            ));
        }
        assumed.insert(
            key,
            Assumed {
                object: Arc::new(object),
                base: api,
            },
        );
        Ok(())
    }

    /// Drops the assumed change of `key`, if any.
    pub fn restore(&self, key: &str) {
        self.assumed.lock().remove(key);
    }

    /// Whether `key` has an assumed change still in effect.
    #[cfg(test)]
    pub fn is_assumed(&self, key: &str) -> bool {
        let Some(api) = self.api(key) else {
            return false;
        };
        self.assumed
            .lock()
            .get(key)
            .is_some_and(|a| !superseded(&api, a))
    }
}
