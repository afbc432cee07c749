//! What DynamicResources knows beyond the object store, shared by every profile that uses
//! the same store (upstream's DRA manager): allocations in flight between Reserve and the
//! end of PreBind, claims as the plugin last wrote them until the watcher catches up, the
//! devices in use, the slice index and the CEL cache.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use kubesched_framework::ObjectStore;
use kubesched_framework::model::k8s_openapi::api::resource::v1::ResourceClaim;
use parking_lot::Mutex;

use crate::cel::CelCache;
use crate::slices::{DeviceId, SliceIndexCache};

/// The devices in use, with the claim store generation and manager version they reflect.
type AllocatedCache = (u64, u64, Arc<HashSet<DeviceId>>);

/// Shared DRA state.
#[derive(Debug, Default)]
pub struct Manager {
    in_flight: Mutex<HashMap<String, Arc<ResourceClaim>>>,
    assumed: Mutex<HashMap<String, Arc<ResourceClaim>>>,
    /// Bumped whenever `in_flight` or `assumed` changes.
    version: AtomicU64,
    allocated: Mutex<Option<AllocatedCache>>,
    /// The slice index.
    pub slices: SliceIndexCache,
    /// Compiled selectors.
    pub cel: CelCache,
}

/// The manager of an object store: one per store, shared by all plugin instances on it.
pub fn for_store(objects: &Arc<ObjectStore>) -> Arc<Manager> {
    static MANAGERS: Mutex<Vec<(Weak<ObjectStore>, Arc<Manager>)>> = Mutex::new(Vec::new());
    let mut all = MANAGERS.lock();
    all.retain(|(w, _)| w.strong_count() > 0);
    if let Some((_, m)) = all
        .iter()
        .find(|(w, _)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(objects)))
    {
        return m.clone();
    }
    let m = Arc::new(Manager::default());
    all.push((Arc::downgrade(objects), m.clone()));
    m
}

fn resource_version(claim: &ResourceClaim) -> u64 {
    claim
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The claim's UID.
pub fn uid(claim: &ResourceClaim) -> &str {
    claim.metadata.uid.as_deref().unwrap_or("")
}

impl Manager {
    fn bump(&self) {
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// A claim as the scheduler should see it: the store's copy, or the copy the plugin
    /// wrote when the store has not caught up with it yet.
    pub fn claim(
        &self,
        objects: &ObjectStore,
        namespace: &str,
        name: &str,
    ) -> Option<Arc<ResourceClaim>> {
        let stored = objects.resource_claims.get(Some(namespace), name);
        let k = key(namespace, name);
        let mut assumed = self.assumed.lock();
        let Some(a) = assumed.get(&k).cloned() else {
            return stored;
        };
        match stored {
            Some(s) if uid(&s) == uid(&a) && resource_version(&a) > resource_version(&s) => Some(a),
            other => {
                assumed.remove(&k);
                drop(assumed);
                self.bump();
                other
            }
        }
    }

    /// Remembers a claim the plugin just wrote to the API server.
    pub fn assume(&self, claim: Arc<ResourceClaim>) {
        let k = key(
            claim.metadata.namespace.as_deref().unwrap_or(""),
            claim.metadata.name.as_deref().unwrap_or(""),
        );
        self.assumed.lock().insert(k, claim);
        self.bump();
    }

    /// Forgets the written copy of a claim (the store's copy is right again).
    pub fn restore(&self, namespace: &str, name: &str) {
        if self.assumed.lock().remove(&key(namespace, name)).is_some() {
            self.bump();
        }
    }

    /// Whether an allocation of this claim is between Reserve and the end of PreBind.
    pub fn has_pending_allocation(&self, claim_uid: &str) -> bool {
        self.in_flight.lock().contains_key(claim_uid)
    }

    /// Records an allocation decided in Reserve.
    pub fn signal_pending_allocation(&self, claim: Arc<ResourceClaim>) {
        self.in_flight.lock().insert(uid(&claim).to_string(), claim);
        self.bump();
    }

    /// Drops an in-flight allocation; true when there was one.
    pub fn remove_pending_allocation(&self, claim_uid: &str) -> bool {
        let removed = self.in_flight.lock().remove(claim_uid).is_some();
        if removed {
            self.bump();
        }
        removed
    }

    /// Every device allocated to a claim or in flight, except admin-access allocations
    /// (they do not take a device away from others).
    pub fn allocated_devices(&self, objects: &ObjectStore) -> Arc<HashSet<DeviceId>> {
        let generation = objects.resource_claims.generation();
        let version = self.version.load(Ordering::Acquire);
        if let Some((g, v, set)) = self.allocated.lock().as_ref()
            && *g == generation
            && *v == version
        {
            return set.clone();
        }
        let mut set = HashSet::new();
        let assumed = self.assumed.lock().clone();
        let mut add = |claim: &ResourceClaim| {
            let results = claim
                .status
                .as_ref()
                .and_then(|s| s.allocation.as_ref())
                .and_then(|a| a.devices.as_ref())
                .and_then(|d| d.results.as_ref());
            for r in results.into_iter().flatten() {
                if r.admin_access == Some(true) {
                    continue;
                }
                set.insert(DeviceId::new(&r.driver, &r.pool, &r.device));
            }
        };
        for claim in objects.resource_claims.list() {
            let k = key(
                claim.metadata.namespace.as_deref().unwrap_or(""),
                claim.metadata.name.as_deref().unwrap_or(""),
            );
            match assumed.get(&k) {
                Some(a)
                    if uid(a) == uid(&claim) && resource_version(a) > resource_version(&claim) =>
                {
                    add(a)
                }
                _ => add(&claim),
            }
        }
        for claim in self.in_flight.lock().values() {
            add(claim);
        }
        let set = Arc::new(set);
        *self.allocated.lock() = Some((generation, version, set.clone()));
        set
    }
}
