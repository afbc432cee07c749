//! `ObjectStore`: the latest copy of the cluster objects plugins look up besides nodes and
//! pods (namespaces, services, workloads, storage, disruption budgets, dynamic resources). Both backends fill
//! it from their event streams; plugins only read it.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, PersistentVolume, PersistentVolumeClaim, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};
use k8s_openapi::{Metadata, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use kubesched_model::{LabelSelector, Labels, PodInfo};
use parking_lot::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

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
        let key = key_of(obj.metadata());
        self.items.write().insert(key, Arc::new(obj));
        self.changed();
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

/// The object kinds plugins may read, each in its own store.
#[derive(Debug, Default)]
#[allow(missing_docs)]
pub struct ObjectStore {
    pub namespaces: Store<Namespace>,
    pub services: Store<Service>,
    pub replica_sets: Store<ReplicaSet>,
    pub stateful_sets: Store<StatefulSet>,
    pub replication_controllers: Store<ReplicationController>,
    pub persistent_volumes: Store<PersistentVolume>,
    pub persistent_volume_claims: Store<PersistentVolumeClaim>,
    pub storage_classes: Store<StorageClass>,
    pub csi_nodes: Store<CSINode>,
    pub csi_drivers: Store<CSIDriver>,
    pub csi_storage_capacities: Store<CSIStorageCapacity>,
    pub volume_attachments: Store<VolumeAttachment>,
    pub pod_disruption_budgets: Store<PodDisruptionBudget>,
    pub resource_slices: Store<ResourceSlice>,
    pub device_classes: Store<DeviceClass>,
    pub resource_claims: Store<ResourceClaim>,
    pub resource_claim_templates: Store<ResourceClaimTemplate>,
}

impl ObjectStore {
    /// The labels of a namespace (empty when unknown).
    pub fn namespace_labels(&self, namespace: &str) -> BTreeMap<String, String> {
        self.namespaces
            .get(None, namespace)
            .and_then(|n| n.metadata.labels.clone())
            .unwrap_or_default()
    }

    /// The selector deduced from the Services selecting the pod and the
    /// ReplicationController, ReplicaSet or StatefulSet controlling it (upstream's
    /// `helper.DefaultSelector`, shared by the spreading plugins). Empty when none is found.
    pub fn default_selector(&self, pod: &PodInfo) -> LabelSelector {
        let mut set = Labels::new();
        for svc in self.services.list_namespace(&pod.namespace) {
            // A Service without a selector selects nothing, not everything.
            let Some(sel) = svc.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
                continue;
            };
            if sel.iter().all(|(k, v)| pod.labels.get(k) == Some(v)) {
                set.extend(sel.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        let mut selector = LabelSelector::from_map(&set);
        let Some(owner) = pod
            .pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
        else {
            return selector;
        };
        let ns = Some(pod.namespace.as_str());
        let extra = match (owner.api_version.as_str(), owner.kind.as_str()) {
            ("v1", "ReplicationController") => {
                if let Some(rc_sel) = self
                    .replication_controllers
                    .get(ns, &owner.name)
                    .and_then(|rc| rc.spec.as_ref().and_then(|s| s.selector.clone()))
                {
                    set.extend(rc_sel);
                    selector = LabelSelector::from_map(&set);
                }
                None
            }
            ("apps/v1", "ReplicaSet") => self
                .replica_sets
                .get(ns, &owner.name)
                .and_then(|rs| rs.spec.as_ref().map(|s| s.selector.clone())),
            ("apps/v1", "StatefulSet") => self
                .stateful_sets
                .get(ns, &owner.name)
                .and_then(|ss| ss.spec.as_ref().map(|s| s.selector.clone())),
            _ => None,
        };
        if let Some(extra) = extra
        // A malformed controller selector adds nothing (upstream ignores it too).
        && let Ok(compiled) = LabelSelector::compile(Some(&extra), "spec.selector")
        {
            for r in compiled.requirements {
                selector.push(r);
            }
        }
        selector
    }
}
