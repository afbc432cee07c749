//! `ObjectStore`: the latest copy of the cluster objects plugins look up besides nodes and
//! pods, one [`Store`] per object kind, keyed by kind. Plugins declare the kinds they read
//! (see [`crate::kinds`]); both backends fill the stores of the declared kinds from their
//! event streams; plugins only read them (writes go through
//! [`ObjectWriter`](crate::ObjectWriter)).

use std::any::TypeId;
use std::collections::BTreeMap;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::kind::Kind;
use crate::kinds::ObjectKind;
use crate::store::AnyStore;
pub use crate::store::Store;

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
use kubesched_model::{LabelSelector, Labels, PodInfo};
use parking_lot::RwLock;

/// The objects plugins read besides nodes and pods: one [`Store`] per kind, keyed by the
/// kind's Rust type. [`ObjectStore::of`] gives a kind's store (created empty on first use);
/// a plugin resolves the stores it reads once, when it is built, and keeps the `Arc`.
///
/// The named fields are shortcuts to the stores of the built-in kinds in-tree plugins
/// read: the same `Arc` that [`ObjectStore::of`] returns for that type.
#[allow(missing_docs)]
pub struct ObjectStore {
    pub namespaces: Arc<Store<Namespace>>,
    pub services: Arc<Store<Service>>,
    pub replica_sets: Arc<Store<ReplicaSet>>,
    pub stateful_sets: Arc<Store<StatefulSet>>,
    pub replication_controllers: Arc<Store<ReplicationController>>,
    pub persistent_volumes: Arc<Store<PersistentVolume>>,
    pub persistent_volume_claims: Arc<Store<PersistentVolumeClaim>>,
    pub storage_classes: Arc<Store<StorageClass>>,
    pub csi_nodes: Arc<Store<CSINode>>,
    pub csi_drivers: Arc<Store<CSIDriver>>,
    pub csi_storage_capacities: Arc<Store<CSIStorageCapacity>>,
    pub volume_attachments: Arc<Store<VolumeAttachment>>,
    pub pod_disruption_budgets: Arc<Store<PodDisruptionBudget>>,
    pub resource_slices: Arc<Store<ResourceSlice>>,
    pub device_classes: Arc<Store<DeviceClass>>,
    pub resource_claims: Arc<Store<ResourceClaim>>,
    pub resource_claim_templates: Arc<Store<ResourceClaimTemplate>>,
    /// Every kind's store, the shortcuts' included.
    kinds: RwLock<FxHashMap<TypeId, Arc<dyn AnyStore>>>,
}

impl Default for ObjectStore {
    fn default() -> Self {
        let namespaces = Arc::new(Store::<Namespace>::default());
        let services = Arc::new(Store::<Service>::default());
        let replica_sets = Arc::new(Store::<ReplicaSet>::default());
        let stateful_sets = Arc::new(Store::<StatefulSet>::default());
        let replication_controllers = Arc::new(Store::<ReplicationController>::default());
        let persistent_volumes = Arc::new(Store::<PersistentVolume>::default());
        let persistent_volume_claims = Arc::new(Store::<PersistentVolumeClaim>::default());
        let storage_classes = Arc::new(Store::<StorageClass>::default());
        let csi_nodes = Arc::new(Store::<CSINode>::default());
        let csi_drivers = Arc::new(Store::<CSIDriver>::default());
        let csi_storage_capacities = Arc::new(Store::<CSIStorageCapacity>::default());
        let volume_attachments = Arc::new(Store::<VolumeAttachment>::default());
        let pod_disruption_budgets = Arc::new(Store::<PodDisruptionBudget>::default());
        let resource_slices = Arc::new(Store::<ResourceSlice>::default());
        let device_classes = Arc::new(Store::<DeviceClass>::default());
        let resource_claims = Arc::new(Store::<ResourceClaim>::default());
        let resource_claim_templates = Arc::new(Store::<ResourceClaimTemplate>::default());
        let built_in: [Arc<dyn AnyStore>; 17] = [
            namespaces.clone(),
            services.clone(),
            replica_sets.clone(),
            stateful_sets.clone(),
            replication_controllers.clone(),
            persistent_volumes.clone(),
            persistent_volume_claims.clone(),
            storage_classes.clone(),
            csi_nodes.clone(),
            csi_drivers.clone(),
            csi_storage_capacities.clone(),
            volume_attachments.clone(),
            pod_disruption_budgets.clone(),
            resource_slices.clone(),
            device_classes.clone(),
            resource_claims.clone(),
            resource_claim_templates.clone(),
        ];
        let kinds = built_in
            .into_iter()
            .map(|s| (s.kind().type_id(), s))
            .collect();
        Self {
            namespaces,
            services,
            replica_sets,
            stateful_sets,
            replication_controllers,
            persistent_volumes,
            persistent_volume_claims,
            storage_classes,
            csi_nodes,
            csi_drivers,
            csi_storage_capacities,
            volume_attachments,
            pod_disruption_budgets,
            resource_slices,
            device_classes,
            resource_claims,
            resource_claim_templates,
            kinds: RwLock::new(kinds),
        }
    }
}

impl std::fmt::Debug for ObjectStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut m = f.debug_map();
        for k in self.kinds() {
            let len = self.kinds.read().get(&k.type_id()).map_or(0, |s| s.len());
            m.entry(&k.resource(), &len);
        }
        m.finish()
    }
}

fn typed<K: Kind>(store: Arc<dyn AnyStore>) -> Arc<Store<K>> {
    match store.as_any().downcast::<Store<K>>() {
        Ok(s) => s,
        // Stores are keyed by their own type id, so this cannot happen; a fresh store
        // keeps the caller going all the same.
        Err(_) => Arc::new(Store::default()),
    }
}

impl ObjectStore {
    /// The store of kind `K`, created empty on first use. A lookup: call it when a plugin
    /// is built and keep the `Arc`, not per node.
    pub fn of<K: Kind>(&self) -> Arc<Store<K>> {
        if let Some(s) = self.kinds.read().get(&TypeId::of::<K>()) {
            return typed(s.clone());
        }
        typed(self.register(ObjectKind::of::<K>()))
    }

    /// The type-erased store of `kind`, created empty on first use (the backends call
    /// this for every declared kind before they fill the stores).
    pub fn register(&self, kind: ObjectKind) -> Arc<dyn AnyStore> {
        self.kinds
            .write()
            .entry(kind.type_id())
            .or_insert_with(|| kind.new_store())
            .clone()
    }

    /// The stores of the kinds with this `apiVersion`'s group and this kind name (several
    /// when two plugins read the same kind through their own types).
    pub fn stores_for(&self, api_version: &str, kind: &str) -> Vec<Arc<dyn AnyStore>> {
        let mut found: Vec<Arc<dyn AnyStore>> = self
            .kinds
            .read()
            .values()
            .filter(|s| s.kind().matches(api_version, kind))
            .cloned()
            .collect();
        found.sort_by_key(|s| s.kind().version);
        found
    }

    /// Every kind with a store, sorted by group and kind.
    pub fn kinds(&self) -> Vec<ObjectKind> {
        let mut all: Vec<ObjectKind> = self.kinds.read().values().map(|s| s.kind()).collect();
        all.sort_by_key(|k| (k.group, k.kind, k.version));
        all
    }

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
                .map(|rs| rs.spec.selector.clone()),
            ("apps/v1", "StatefulSet") => self
                .stateful_sets
                .get(ns, &owner.name)
                .map(|ss| ss.spec.selector.clone()),
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
