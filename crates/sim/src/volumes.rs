//! The PV controller and the provisioners of the in-memory cluster, so that what-ifs with
//! claims behave like a cluster (the ephemeral volume controller, which creates the claims
//! of generic ephemeral volumes, is `SimCluster::apply_pod`'s): claims pre-bound by name or
//! by a volume's claimRef (which is how VolumeBinding's PreBind binds a static volume) get
//! bound; claims the scheduler gave a node (`volume.kubernetes.io/selected-node`) get a
//! provisioned volume with that node's topology; Immediate claims get the smallest matching
//! volume or a provisioned one; claims without a class get the default class, as the PV
//! controller does retroactively. Provisioning from a class whose CSI driver tracks
//! capacity takes the volume's size off the first CSIStorageCapacity reachable from the
//! node.
//!
//! Every change is a new object with a new numeric resourceVersion and a change event, as a
//! watch would deliver it. The controller works from a [`VolumeIndex`] of what changed, so a
//! run with many volumes costs per change, not per change times volumes.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::api::storage::v1::{CSIStorageCapacity, StorageClass};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubesched_framework::ObjectStore;
use kubesched_framework::events::{ActionType, EventObject, EventResource};
use kubesched_framework::model::storage::{claim_class_if_set, volume_class};
use kubesched_framework::model::{LabelSelector, Quantity as ModelQuantity};
use kubesched_scheduler::ClusterChange;

const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// How many passes a sync makes at most (each pass settles one more step of a chain such as
/// default class → provisioning → binding).
const MAX_PASSES: usize = 8;

/// The controller's view of the cluster for one sync.
pub(crate) struct VolumeController<'a> {
    pub objects: &'a ObjectStore,
    pub nodes: &'a BTreeMap<String, Arc<api::Node>>,
    pub resource_version: &'a mut u64,
    pub changes: &'a mut VecDeque<ClusterChange>,
    pub index: &'a mut VolumeIndex,
}

/// A claim's `(namespace, name)`.
type ClaimKey = (String, String);

/// What the controller has to look at, kept up to date from every storage change.
#[derive(Debug, Default)]
pub(crate) struct VolumeIndex {
    /// Claims to look at on the next sync.
    dirty: BTreeSet<ClaimKey>,
    /// Unbound claims nothing could be done for yet; a new volume or class may help them.
    waiting: BTreeSet<ClaimKey>,
    /// The volume whose claimRef names each claim.
    claim_refs: HashMap<ClaimKey, String>,
    /// Volumes that may still need the Available phase.
    unphased: BTreeSet<String>,
}

fn claim_ref_key(pv: &api::PersistentVolume) -> Option<ClaimKey> {
    let r = pv.spec.as_ref()?.claim_ref.as_ref()?;
    Some((r.namespace.clone()?, r.name.clone()?))
}

impl VolumeIndex {
    /// Takes note of a change the cluster delivers; storage kinds only.
    pub fn observe(&mut self, change: &ClusterChange) {
        let ClusterChange::Other {
            resource, old, new, ..
        } = change
        else {
            return;
        };
        match resource {
            EventResource::PersistentVolume => self.observe_volume(
                old.as_ref()
                    .and_then(|o| o.downcast::<api::PersistentVolume>()),
                new.as_ref()
                    .and_then(|o| o.downcast::<api::PersistentVolume>()),
            ),
            EventResource::PersistentVolumeClaim => self.observe_claim(
                old.as_ref()
                    .and_then(|o| o.downcast::<api::PersistentVolumeClaim>()),
                new.as_ref()
                    .and_then(|o| o.downcast::<api::PersistentVolumeClaim>()),
            ),
            EventResource::StorageClass => {
                let waiting = std::mem::take(&mut self.waiting);
                self.dirty.extend(waiting);
            }
            _ => {}
        }
    }

    fn observe_volume(
        &mut self,
        old: Option<&api::PersistentVolume>,
        new: Option<&api::PersistentVolume>,
    ) {
        if let Some(key) = old.and_then(claim_ref_key) {
            let name = old.and_then(|o| o.metadata.name.as_ref());
            if self.claim_refs.get(&key) == name {
                self.claim_refs.remove(&key);
            }
        }
        let Some(pv) = new else {
            return;
        };
        let name = pv.metadata.name.clone().unwrap_or_default();
        match claim_ref_key(pv) {
            Some(key) => {
                self.claim_refs.insert(key.clone(), name);
                self.dirty.insert(key);
            }
            None => {
                let phase = pv.status.as_ref().and_then(|s| s.phase.as_deref());
                if phase.is_none_or(|p| p.is_empty() || p == "Pending") {
                    self.unphased.insert(name);
                }
                // A free volume may be what a waiting claim needs.
                let waiting = std::mem::take(&mut self.waiting);
                self.dirty.extend(waiting);
            }
        }
    }

    fn observe_claim(
        &mut self,
        old: Option<&api::PersistentVolumeClaim>,
        new: Option<&api::PersistentVolumeClaim>,
    ) {
        match new {
            Some(pvc) => {
                let key = key_of(pvc);
                if fully_bound(pvc) || pvc.metadata.deletion_timestamp.is_some() {
                    self.waiting.remove(&key);
                } else {
                    self.dirty.insert(key);
                }
            }
            None => {
                if let Some(pvc) = old {
                    let key = key_of(pvc);
                    self.waiting.remove(&key);
                    self.dirty.remove(&key);
                }
            }
        }
    }

    /// Whether a sync has anything to do.
    pub fn has_work(&self) -> bool {
        !self.dirty.is_empty() || !self.unphased.is_empty()
    }
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn annotate(meta: &mut ObjectMeta, key: &str, value: &str) {
    meta.annotations
        .get_or_insert_with(Default::default)
        .insert(key.into(), value.into());
}

fn volume_name(pvc: &api::PersistentVolumeClaim) -> &str {
    pvc.spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or_default()
}

fn fully_bound(pvc: &api::PersistentVolumeClaim) -> bool {
    !volume_name(pvc).is_empty() && annotation(&pvc.metadata, BIND_COMPLETED).is_some()
}

fn nanos(q: Option<&Quantity>) -> i128 {
    q.and_then(|q| ModelQuantity::parse(&q.0).ok())
        .map_or(0, |q| q.nanos())
}

fn request(pvc: &api::PersistentVolumeClaim) -> Option<&Quantity> {
    pvc.spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")
}

fn capacity(pv: &api::PersistentVolume) -> Option<&Quantity> {
    pv.spec.as_ref()?.capacity.as_ref()?.get("storage")
}

fn key_of(pvc: &api::PersistentVolumeClaim) -> (String, String) {
    (
        pvc.metadata.namespace.clone().unwrap_or_default(),
        pvc.metadata.name.clone().unwrap_or_default(),
    )
}

/// Whether the volume's claimRef names the claim (and its UID when the reference has one).
fn refers_to(pv: &api::PersistentVolume, pvc: &api::PersistentVolumeClaim) -> bool {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    r.name == pvc.metadata.name
        && r.namespace == pvc.metadata.namespace
        && r.uid
            .as_deref()
            .filter(|u| !u.is_empty())
            .is_none_or(|u| pvc.metadata.uid.as_deref() == Some(u))
}

fn claim_ref(pvc: &api::PersistentVolumeClaim) -> api::ObjectReference {
    api::ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        namespace: pvc.metadata.namespace.clone(),
        name: pvc.metadata.name.clone(),
        uid: pvc.metadata.uid.clone(),
        resource_version: pvc.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// Whether `pv` can take `pvc` as the PV controller matches them (no node involved).
fn matches(pv: &api::PersistentVolume, pvc: &api::PersistentVolumeClaim, class: &str) -> bool {
    let (Some(spec), Some(claim)) = (pv.spec.as_ref(), pvc.spec.as_ref()) else {
        return false;
    };
    if spec.claim_ref.is_some()
        || pv.metadata.deletion_timestamp.is_some()
        || pv.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Available")
        || volume_class(pv) != class
        || nanos(capacity(pv)) < nanos(request(pvc))
        || spec.volume_mode.as_deref().unwrap_or("Filesystem")
            != claim.volume_mode.as_deref().unwrap_or("Filesystem")
        || spec.volume_attributes_class_name != claim.volume_attributes_class_name
    {
        return false;
    }
    let offered = spec.access_modes.as_deref().unwrap_or_default();
    if !claim
        .access_modes
        .iter()
        .flatten()
        .all(|m| offered.contains(m))
    {
        return false;
    }
    match &claim.selector {
        None => true,
        Some(sel) => LabelSelector::compile(Some(sel), "spec.selector")
            .is_ok_and(|s| s.matches(&pv.metadata.labels.clone().unwrap_or_default())),
    }
}

impl VolumeController<'_> {
    fn next_version(&mut self, current: Option<&str>) -> String {
        let current = current.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        *self.resource_version = (*self.resource_version).max(current) + 1;
        self.resource_version.to_string()
    }

    fn put_pv(&mut self, old: Option<Arc<api::PersistentVolume>>, mut pv: api::PersistentVolume) {
        let current = old
            .as_ref()
            .and_then(|o| o.metadata.resource_version.clone());
        pv.metadata.resource_version = Some(self.next_version(current.as_deref()));
        let new = Arc::new(pv.clone());
        self.objects.persistent_volumes.upsert(pv);
        self.push(EventResource::PersistentVolume, old, new);
    }

    fn put_pvc(
        &mut self,
        old: Option<Arc<api::PersistentVolumeClaim>>,
        mut pvc: api::PersistentVolumeClaim,
    ) {
        let current = old
            .as_ref()
            .and_then(|o| o.metadata.resource_version.clone());
        pvc.metadata.resource_version = Some(self.next_version(current.as_deref()));
        let new = Arc::new(pvc.clone());
        self.objects.persistent_volume_claims.upsert(pvc);
        self.push(EventResource::PersistentVolumeClaim, old, new);
    }

    fn push<K: Send + Sync + 'static>(
        &mut self,
        resource: EventResource,
        old: Option<Arc<K>>,
        new: Arc<K>,
    ) {
        let action = if old.is_some() {
            ActionType::UPDATE
        } else {
            ActionType::ADD
        };
        let change = ClusterChange::Other {
            resource,
            action,
            old: old.map(EventObject::object),
            new: Some(EventObject::object(new)),
        };
        self.index.observe(&change);
        self.changes.push_back(change);
    }

    /// Brings the claims and volumes that changed as far as the controller would.
    pub fn sync(&mut self) {
        for _ in 0..MAX_PASSES {
            if !self.index.has_work() {
                break;
            }
            for name in std::mem::take(&mut self.index.unphased) {
                self.mark_available(&name);
            }
            for (ns, name) in std::mem::take(&mut self.index.dirty) {
                if let Some(pvc) = self.objects.persistent_volume_claims.get(Some(&ns), &name) {
                    self.sync_claim(&pvc);
                }
            }
        }
    }

    /// A new volume nobody claims is Available.
    fn mark_available(&mut self, name: &str) {
        let Some(pv) = self.objects.persistent_volumes.get(None, name) else {
            return;
        };
        let unset = pv
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_none_or(|p| p.is_empty() || p == "Pending");
        if unset && pv.spec.as_ref().is_none_or(|s| s.claim_ref.is_none()) {
            let mut new = (*pv).clone();
            new.status.get_or_insert_with(Default::default).phase = Some("Available".into());
            self.put_pv(Some(pv), new);
        }
    }

    fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        self.objects.storage_classes.get(None, name)
    }

    /// The default class (the newest if several claim to be), as the PV controller assigns
    /// it to claims created without one.
    fn default_class(&self) -> Option<Arc<StorageClass>> {
        self.objects
            .storage_classes
            .list()
            .into_iter()
            .filter(|c| annotation(&c.metadata, DEFAULT_CLASS) == Some("true"))
            .max_by(|a, b| {
                (&a.metadata.creation_timestamp, &a.metadata.name)
                    .cmp(&(&b.metadata.creation_timestamp, &b.metadata.name))
            })
    }

    fn sync_claim(&mut self, pvc: &Arc<api::PersistentVolumeClaim>) {
        if fully_bound(pvc) || pvc.metadata.deletion_timestamp.is_some() {
            return;
        }
        let key = key_of(pvc);
        // Pre-bound by name: bind when the volume is free or already ours.
        let name = volume_name(pvc);
        if !name.is_empty() {
            match self.objects.persistent_volumes.get(None, name) {
                Some(pv)
                    if pv.spec.as_ref().is_none_or(|s| s.claim_ref.is_none())
                        || refers_to(&pv, pvc) =>
                {
                    self.bind(pv, pvc, false);
                }
                _ => {
                    self.index.waiting.insert(key);
                }
            }
            return;
        }
        // A volume already pointing at the claim (a static binding written by the scheduler).
        if let Some(pv) = self
            .index
            .claim_refs
            .get(&key)
            .and_then(|v| self.objects.persistent_volumes.get(None, v))
            .filter(|pv| refers_to(pv, pvc))
        {
            self.bind(pv, pvc, true);
            return;
        }
        let class = match claim_class_if_set(pvc) {
            Some(c) => c.to_string(),
            None => {
                if let Some(dc) = self.default_class() {
                    let mut new = (**pvc).clone();
                    new.spec
                        .get_or_insert_with(Default::default)
                        .storage_class_name = dc.metadata.name.clone();
                    self.put_pvc(Some(pvc.clone()), new);
                    return;
                }
                String::new()
            }
        };
        let sc = (!class.is_empty()).then(|| self.class(&class)).flatten();
        if let Some(node) = annotation(&pvc.metadata, SELECTED_NODE).map(str::to_string) {
            match sc {
                Some(sc) if provisions(&sc) => self.provision(pvc, &sc, Some(&node)),
                _ => {
                    self.index.waiting.insert(key);
                }
            }
            return;
        }
        let delayed = sc
            .as_ref()
            .is_some_and(|c| c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"));
        if delayed {
            // The scheduler decides; its write of the selected node or of a volume's
            // claimRef brings the claim back here.
            return;
        }
        if self.bind_existing(pvc, &class) {
            return;
        }
        match sc {
            Some(sc) if provisions(&sc) => self.provision(pvc, &sc, None),
            _ => {
                self.index.waiting.insert(key);
            }
        }
    }

    /// Binds the smallest Available volume of `class` that fits the claim.
    fn bind_existing(&mut self, pvc: &Arc<api::PersistentVolumeClaim>, class: &str) -> bool {
        let best = self
            .objects
            .persistent_volumes
            .list()
            .into_iter()
            .filter(|pv| matches(pv, pvc, class))
            .min_by_key(|pv| nanos(capacity(pv)));
        match best {
            Some(pv) => {
                self.bind(pv, pvc, true);
                true
            }
            None => false,
        }
    }

    /// Binds both sides, as the PV controller's `bind`.
    fn bind(
        &mut self,
        pv: Arc<api::PersistentVolume>,
        pvc: &Arc<api::PersistentVolumeClaim>,
        by_controller: bool,
    ) {
        let mut new_pv = (*pv).clone();
        if !refers_to(&pv, pvc) {
            annotate(&mut new_pv.metadata, BOUND_BY_CONTROLLER, "yes");
        }
        new_pv.spec.get_or_insert_with(Default::default).claim_ref = Some(claim_ref(pvc));
        new_pv.status.get_or_insert_with(Default::default).phase = Some("Bound".into());
        if new_pv != *pv {
            self.put_pv(Some(pv.clone()), new_pv.clone());
        }
        let mut new_pvc = (**pvc).clone();
        let spec = new_pvc.spec.get_or_insert_with(Default::default);
        spec.volume_name = new_pv.metadata.name.clone();
        annotate(&mut new_pvc.metadata, BIND_COMPLETED, "yes");
        if by_controller {
            annotate(&mut new_pvc.metadata, BOUND_BY_CONTROLLER, "yes");
        }
        let status = new_pvc.status.get_or_insert_with(Default::default);
        status.phase = Some("Bound".into());
        let pv_spec = new_pv.spec.as_ref();
        status.access_modes = pv_spec.and_then(|s| s.access_modes.clone());
        status.capacity = pv_spec.and_then(|s| s.capacity.clone());
        self.put_pvc(Some(pvc.clone()), new_pvc);
    }

    /// Creates the volume a provisioner would, then binds it.
    fn provision(
        &mut self,
        pvc: &Arc<api::PersistentVolumeClaim>,
        sc: &StorageClass,
        node: Option<&str>,
    ) {
        let provisioner = sc.provisioner.as_str();
        let (ns, name) = key_of(pvc);
        let uid = pvc
            .metadata
            .uid
            .clone()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| format!("{ns}-{name}"));
        let pv_name = format!("pvc-{uid}");
        let node = node.and_then(|n| self.nodes.get(n).cloned());
        let size = request(pvc)
            .cloned()
            .unwrap_or_else(|| Quantity("0".into()));
        let claim = pvc.spec.clone().unwrap_or_default();
        let mut pv = api::PersistentVolume {
            metadata: ObjectMeta {
                name: Some(pv_name.clone()),
                uid: Some(format!("sim-{pv_name}")),
                ..Default::default()
            },
            spec: Some(api::PersistentVolumeSpec {
                access_modes: claim.access_modes.clone(),
                capacity: Some(BTreeMap::from([("storage".to_string(), size.clone())])),
                claim_ref: Some(claim_ref(pvc)),
                persistent_volume_reclaim_policy: Some(
                    sc.reclaim_policy.clone().unwrap_or_else(|| "Delete".into()),
                ),
                storage_class_name: sc.metadata.name.clone(),
                volume_mode: Some(
                    claim
                        .volume_mode
                        .clone()
                        .unwrap_or_else(|| "Filesystem".into()),
                ),
                mount_options: sc.mount_options.clone(),
                node_affinity: self.topology(sc, node.as_deref()),
                ..Default::default()
            }),
            status: Some(api::PersistentVolumeStatus {
                phase: Some("Bound".into()),
                ..Default::default()
            }),
        };
        annotate(&mut pv.metadata, PROVISIONED_BY, provisioner);
        set_source(&mut pv, provisioner, &pv_name);
        self.put_pv(None, pv);
        if let Some(node) = &node {
            self.take_capacity(sc, node, nanos(Some(&size)));
        }
        let Some(pv) = self.objects.persistent_volumes.get(None, &pv_name) else {
            return;
        };
        self.bind(pv, pvc, true);
    }

    /// The node affinity of a volume provisioned for `node`: the values the node has for the
    /// driver's topology keys (from its CSINode), else for the class's allowed topology keys.
    /// Without a node, the first allowed topology segment.
    fn topology(
        &self,
        sc: &StorageClass,
        node: Option<&api::Node>,
    ) -> Option<api::VolumeNodeAffinity> {
        let allowed: Vec<(String, Vec<String>)> = sc
            .allowed_topologies
            .iter()
            .flatten()
            .flat_map(|t| t.match_label_expressions.iter().flatten())
            .map(|e| (e.key.clone(), e.values.clone()))
            .collect();
        let requirement = |key: &str, value: &str| api::NodeSelectorRequirement {
            key: key.into(),
            operator: "In".into(),
            values: Some(vec![value.into()]),
        };
        let expressions: Vec<api::NodeSelectorRequirement> = match node {
            Some(node) => {
                let name = node.metadata.name.as_deref().unwrap_or_default();
                let labels = node.metadata.labels.clone().unwrap_or_default();
                let driver_keys: Option<Vec<String>> = self
                    .objects
                    .csi_nodes
                    .get(None, name)
                    .and_then(|n| {
                        n.spec
                            .drivers
                            .iter()
                            .find(|d| d.name == sc.provisioner)
                            .and_then(|d| d.topology_keys.clone())
                    })
                    .filter(|k| !k.is_empty());
                let keys = driver_keys.unwrap_or_else(|| {
                    let mut keys: Vec<String> = allowed.iter().map(|(k, _)| k.clone()).collect();
                    keys.dedup();
                    keys
                });
                keys.iter()
                    .filter_map(|k| labels.get(k).map(|v| requirement(k, v)))
                    .collect()
            }
            None => {
                let mut seen = std::collections::BTreeSet::new();
                allowed
                    .iter()
                    .filter(|(k, _)| seen.insert(k.clone()))
                    .filter_map(|(k, values)| values.first().map(|v| requirement(k, v)))
                    .collect()
            }
        };
        (!expressions.is_empty()).then(|| api::VolumeNodeAffinity {
            required: Some(api::NodeSelector {
                node_selector_terms: vec![api::NodeSelectorTerm {
                    match_expressions: Some(expressions),
                    match_fields: None,
                }],
            }),
        })
    }

    /// Takes `size` off the first capacity pool of the class reachable from the node, when
    /// the class's CSI driver tracks capacity.
    fn take_capacity(&mut self, sc: &StorageClass, node: &api::Node, size: i128) {
        let tracks = self
            .objects
            .csi_drivers
            .get(None, &sc.provisioner)
            .is_some_and(|d| d.spec.storage_capacity == Some(true));
        if !tracks {
            return;
        }
        let class = sc.metadata.name.as_deref().unwrap_or_default();
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let reachable = |c: &CSIStorageCapacity| {
            c.storage_class_name == class
                && c.node_topology.as_ref().is_some_and(|t| {
                    LabelSelector::compile(Some(t), "nodeTopology")
                        .is_ok_and(|s| s.matches(&labels))
                })
        };
        let Some(pool) = self
            .objects
            .csi_storage_capacities
            .list()
            .into_iter()
            .find(|c| reachable(c) && c.capacity.is_some())
        else {
            return;
        };
        let left = (nanos(pool.capacity.as_ref()) - size).max(0);
        let mut new = (*pool).clone();
        new.capacity = Some(bytes(left));
        if nanos(new.maximum_volume_size.as_ref()) > left {
            new.maximum_volume_size = Some(bytes(left));
        }
        let current = pool.metadata.resource_version.clone();
        new.metadata.resource_version = Some(self.next_version(current.as_deref()));
        let new_arc = Arc::new(new.clone());
        self.objects.csi_storage_capacities.upsert(new);
        self.push(EventResource::CSIStorageCapacity, Some(pool), new_arc);
    }
}

/// A quantity of bytes from nano units.
fn bytes(nanos: i128) -> Quantity {
    Quantity((nanos / 1_000_000_000).to_string())
}

/// Whether the class can provision at all.
fn provisions(sc: &StorageClass) -> bool {
    !sc.provisioner.is_empty() && sc.provisioner != NO_PROVISIONER
}

/// The volume source a provisioner gives its volumes: in-tree kinds for the in-tree
/// provisioners that have one, CSI for everything else.
fn set_source(pv: &mut api::PersistentVolume, provisioner: &str, name: &str) {
    let spec = pv.spec.get_or_insert_with(Default::default);
    match provisioner {
        "kubernetes.io/aws-ebs" => {
            spec.aws_elastic_block_store = Some(api::AWSElasticBlockStoreVolumeSource {
                volume_id: name.into(),
                ..Default::default()
            });
        }
        "kubernetes.io/gce-pd" => {
            spec.gce_persistent_disk = Some(api::GCEPersistentDiskVolumeSource {
                pd_name: name.into(),
                ..Default::default()
            });
        }
        "kubernetes.io/azure-disk" => {
            spec.azure_disk = Some(api::AzureDiskVolumeSource {
                disk_name: name.into(),
                disk_uri: format!("/subscriptions/sim/disks/{name}"),
                ..Default::default()
            });
        }
        "kubernetes.io/cinder" => {
            spec.cinder = Some(api::CinderPersistentVolumeSource {
                volume_id: name.into(),
                ..Default::default()
            });
        }
        p if p.starts_with("kubernetes.io/") => {}
        p => {
            spec.csi = Some(api::CSIPersistentVolumeSource {
                driver: p.into(),
                volume_handle: name.into(),
                ..Default::default()
            });
        }
    }
}
