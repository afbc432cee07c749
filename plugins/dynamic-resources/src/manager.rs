//! What DynamicResources knows beyond the object store, shared by every profile that uses
//! the same store (upstream's DRA manager): allocations in flight between Reserve and the
//! end of PreBind, claims as the plugin last wrote them until the watcher catches up, the
//! devices in use, the slice index and the CEL cache.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use kubesched_framework::ObjectStore;
use kubesched_framework::model::Quantity;
use kubesched_framework::model::k8s_openapi::api::resource::v1::ResourceClaim;
use parking_lot::Mutex;

use crate::cel::CelCache;
use crate::slices::{DeviceId, DeviceSet, SliceIndexCache};

/// The devices in use, with the claim store generation and manager version they reflect.
type AllocatedCache = (u64, u64, Arc<AllocatedState>);

/// The devices each stored claim's allocation takes, by the address of the store's `Arc`
/// (kept alive by the entry, so an address cannot be reused while it is here): a claim
/// the store still holds unchanged is not read again.
type DevicesByClaim = rustc_hash::FxHashMap<usize, (Arc<ResourceClaim>, Arc<ClaimDevices>)>;

/// Capacity (nano-units) by capacity name.
pub type Capacity = BTreeMap<String, i128>;

/// What allocated claims (in-flight and assumed ones included) take from the devices
/// (upstream's `AllocatedState`).
#[derive(Debug, Default, Clone)]
pub struct AllocatedState {
    /// Devices allocated whole (results without a `shareID`).
    pub devices: DeviceSet,
    /// Devices with at least one shared allocation (results with a `shareID`,
    /// DRAConsumableCapacity).
    pub shared: DeviceSet,
    /// The capacity the shared allocations of each device consume together.
    pub capacity: HashMap<DeviceId, Capacity>,
}

impl From<DeviceSet> for AllocatedState {
    fn from(devices: DeviceSet) -> Self {
        Self {
            devices,
            ..Self::default()
        }
    }
}

impl AllocatedState {
    /// Whether the device has any allocation (whole or shared).
    pub fn has(&self, id: &DeviceId) -> bool {
        self.devices.contains(id) || self.shared.contains(id) || self.capacity.contains_key(id)
    }

    fn add(&mut self, claim: &ClaimDevices) {
        self.devices.extend(claim.whole.iter().cloned());
        self.shared.extend(claim.shared.iter().cloned());
        for (id, used) in &claim.capacity {
            let total = self.capacity.entry(id.clone()).or_default();
            for (name, q) in used {
                *total.entry(name.clone()).or_default() += q;
            }
        }
    }
}

/// What one claim's allocation takes.
#[derive(Debug, Default)]
pub struct ClaimDevices {
    whole: Vec<DeviceId>,
    shared: Vec<DeviceId>,
    capacity: Vec<(DeviceId, Capacity)>,
}

/// Shared DRA state.
#[derive(Debug, Default)]
pub struct Manager {
    in_flight: Mutex<HashMap<String, Arc<ResourceClaim>>>,
    assumed: Mutex<HashMap<String, Arc<ResourceClaim>>>,
    /// Bumped whenever `in_flight` or `assumed` changes.
    version: AtomicU64,
    allocated: Mutex<Option<AllocatedCache>>,
    devices_by_claim: Mutex<DevicesByClaim>,
    /// Claims whose binding conditions a simulation's PreBind gave up on, by UID and
    /// allocation time: they count as timed out though no virtual time passed.
    binding_timed_out: Mutex<std::collections::HashSet<(String, String)>>,
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

/// When the claim was allocated, as written (empty: not allocated or not stamped).
fn allocation_time(claim: &ResourceClaim) -> String {
    claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.allocation_timestamp.as_ref())
        .map(|t| t.0.to_string())
        .unwrap_or_default()
}

/// `namespace/name` of a claim, as upstream's `klog.KObj` prints it.
pub fn kobj(claim: &ResourceClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or(""),
        claim.metadata.name.as_deref().unwrap_or("")
    )
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

    /// Records that PreBind gave up waiting for this allocation's binding conditions.
    pub fn mark_binding_timed_out(&self, claim: &ResourceClaim) {
        self.binding_timed_out
            .lock()
            .insert((uid(claim).to_string(), allocation_time(claim)));
    }

    /// Whether PreBind gave up on this allocation of the claim.
    pub fn binding_timed_out(&self, claim: &ResourceClaim) -> bool {
        let timed_out = self.binding_timed_out.lock();
        !timed_out.is_empty()
            && timed_out.contains(&(uid(claim).to_string(), allocation_time(claim)))
    }

    /// Forgets the timeouts of a claim (it got deallocated).
    pub fn forget_binding_timeout(&self, claim: &ResourceClaim) {
        let id = uid(claim);
        self.binding_timed_out.lock().retain(|(u, _)| u != id);
    }

    /// Drops an in-flight allocation; true when there was one.
    pub fn remove_pending_allocation(&self, claim_uid: &str) -> bool {
        let removed = self.in_flight.lock().remove(claim_uid).is_some();
        if removed {
            self.bump();
        }
        removed
    }

    /// What every claim allocated or in flight takes, except admin-access allocations
    /// (they do not take a device away from others). Claims the store holds unchanged since
    /// the last call are not read again: with a claim per pod, the store changes with every
    /// pod, and rereading every allocation per attempt was most of PreFilter's time.
    pub fn allocated_state(&self, objects: &ObjectStore) -> Arc<AllocatedState> {
        let generation = objects.resource_claims.generation();
        let version = self.version.load(Ordering::Acquire);
        if let Some((g, v, set)) = self.allocated.lock().as_ref()
            && *g == generation
            && *v == version
        {
            return set.clone();
        }
        // Written copies newer than the store's replace them (few: until the watch catches up).
        let assumed: Vec<Arc<ResourceClaim>> = self.assumed.lock().values().cloned().collect();
        let mut replaced = rustc_hash::FxHashSet::default();
        let mut newer = Vec::new();
        for a in assumed {
            let stored = objects.resource_claims.get(
                a.metadata.namespace.as_deref(),
                a.metadata.name.as_deref().unwrap_or(""),
            );
            match stored {
                Some(s) if uid(&s) == uid(&a) && resource_version(&a) > resource_version(&s) => {
                    replaced.insert(Arc::as_ptr(&s) as usize);
                    newer.push(a);
                }
                _ => {}
            }
        }
        let mut set = AllocatedState::default();
        let mut known = self.devices_by_claim.lock();
        let mut next = DevicesByClaim::default();
        next.reserve(known.len());
        for claim in objects.resource_claims.list() {
            let address = Arc::as_ptr(&claim) as usize;
            let devices = match known.remove(&address) {
                Some((_, devices)) => devices,
                None => devices_of(&claim),
            };
            if !replaced.contains(&address) {
                set.add(&devices);
            }
            next.insert(address, (claim, devices));
        }
        *known = next;
        drop(known);
        for claim in &newer {
            set.add(&devices_of(claim));
        }
        for claim in self.in_flight.lock().values() {
            set.add(&devices_of(claim));
        }
        let set = Arc::new(set);
        *self.allocated.lock() = Some((generation, version, set.clone()));
        set
    }
}

/// The devices a claim's allocation takes away from others (admin access takes none):
/// whole, or shared with the capacity the share consumes.
fn devices_of(claim: &ResourceClaim) -> Arc<ClaimDevices> {
    let mut out = ClaimDevices::default();
    let results = claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref());
    for (i, r) in results.into_iter().flatten().enumerate() {
        if r.admin_access == Some(true) {
            continue;
        }
        let id = DeviceId::new(&r.driver, &r.pool, &r.device);
        if r.share_id.is_none() {
            out.whole.push(id);
            continue;
        }
        let mut used = Capacity::new();
        let mut broken = false;
        for (name, q) in r.consumed_capacity.iter().flatten() {
            match Quantity::parse(&q.0) {
                Ok(q) => *used.entry(name.clone()).or_default() += q.nanos(),
                Err(e) => {
                    tracing::warn!(
                        claim = %kobj(claim),
                        field = %format!("status.allocation.devices.results[{i}].consumedCapacity[{name}]"),
                        error = %e,
                        "unreadable consumed capacity: the device counts as allocated whole"
                    );
                    broken = true;
                }
            }
        }
        if broken {
            out.whole.push(id);
            continue;
        }
        if !used.is_empty() {
            out.capacity.push((id.clone(), used));
        }
        out.shared.push(id);
    }
    Arc::new(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(name: &str, version: &str, devices: &[(&str, bool)]) -> ResourceClaim {
        let results: Vec<_> = devices
            .iter()
            .map(|(d, admin)| {
                json!({"request": "r", "driver": "gpu.example.com", "pool": "n1", "device": d,
                       "adminAccess": admin})
            })
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                         "resourceVersion": version},
            "spec": {},
            "status": {"allocation": {"devices": {"results": results}}},
        }))
        .expect("claim")
    }

    fn names(state: &AllocatedState) -> Vec<String> {
        let mut out: Vec<String> = state.devices.iter().map(|d| d.device.to_string()).collect();
        out.sort();
        out
    }

    #[test]
    fn allocated_devices_follow_the_store_written_copies_and_in_flight_allocations() {
        let objects = ObjectStore::default();
        let manager = Manager::default();
        objects
            .resource_claims
            .upsert(claim("a", "1", &[("gpu-0", false), ("gpu-1", true)]));
        objects.resource_claims.upsert(claim("b", "1", &[]));
        // Admin access leaves the device to others.
        assert_eq!(names(&manager.allocated_state(&objects)), ["gpu-0"]);

        // A copy the plugin wrote, newer than the store's, counts instead of it; an
        // allocation in flight counts too.
        manager.assume(Arc::new(claim("b", "2", &[("gpu-2", false)])));
        manager.signal_pending_allocation(Arc::new(claim("c", "1", &[("gpu-3", false)])));
        assert_eq!(
            names(&manager.allocated_state(&objects)),
            ["gpu-0", "gpu-2", "gpu-3"]
        );

        // The store catches up and a claim goes away: its devices are free again.
        objects
            .resource_claims
            .upsert(claim("b", "2", &[("gpu-2", false)]));
        manager.remove_pending_allocation("uid-c");
        objects.resource_claims.remove(Some("ns"), "a");
        assert_eq!(names(&manager.allocated_state(&objects)), ["gpu-2"]);

        // Unchanged claims are remembered by the store's object, not reread.
        assert_eq!(manager.devices_by_claim.lock().len(), 1);
    }
}
