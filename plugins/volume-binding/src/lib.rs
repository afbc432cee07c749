//! VolumeBinding: a pod runs only where its PersistentVolumeClaims can be satisfied, and the
//! scheduler binds or provisions the volumes of WaitForFirstConsumer claims for the node it
//! chose, as upstream kube-scheduler's plugin does.
//!
//! PreFilter sorts the pod's claims (generic ephemeral volumes included) and rejects pods
//! whose claims are missing, being deleted, lost or unbound with Immediate binding; pods
//! without claims Skip. It narrows the candidates to the hostnames bound volumes pin.
//! Filter checks bound volumes' node affinity and finds, per node, a volume for each
//! unbound delayed claim (the smallest that fits) or a way to provision it (allowed
//! topologies, CSIStorageCapacity when the driver tracks capacity). Reserve assumes the
//! choice in the plugin's assume cache so the next pod does not take the same volume;
//! Unreserve reverts it. PreBind writes the bindings and selected nodes through the cluster
//! client and waits, on the object store, until every claim is bound or
//! `bindTimeoutSeconds` runs out. Score runs only with the StorageCapacityScoring gate
//! (alpha, off in v1.34): nodes are ranked by how full the volumes chosen there (or, when
//! only provisioning, the CSIStorageCapacity pools) would be, through `shape`; with the
//! gate off PreScore Skips, as upstream.
//!
//! The plugin reads PersistentVolumes, claims, StorageClasses, CSIDrivers and
//! CSIStorageCapacities from the object store and writes only through the cluster client; it
//! must not change the scheduler's cache or other plugins' state.

mod args;
mod assume_cache;
mod binding;
mod claims;
mod hints;
mod scoring;
mod volume;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kubesched_framework::events::{ActionType, ClusterEventWithHint, EventResource};
use kubesched_framework::metrics::CounterFamily;
use kubesched_framework::model::k8s_openapi::api::core::v1::Pod;
use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::{
    Code, CycleState, EnqueueExtensions, Feature, FilterPlugin, Handle, PluginError, PreBindPlugin,
    PreFilterPlugin, PreFilterResult, PreScorePlugin, ReservePlugin, ScorePlugin, Status,
    async_trait,
};
use parking_lot::Mutex;

pub use args::{
    DEFAULT_BIND_TIMEOUT_SECONDS, MAX_SHAPE_SCORE, UtilizationShapePoint, VolumeBindingArgs,
    default_shape,
};
pub use binding::ERR_BIND_TIMEOUT;
pub use volume::{
    ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE, NOT_SUPPORTED_PROVISIONER,
};

use binding::{Caches, Reserved};
use claims::{PodClaims, PodVolumes, all_bound, eligible_nodes, pod_volume_claims};
use scoring::{ClassStorage, Scorer};
use volume::{claim_class, has_claims, is_lost, pod_claims, requested_storage, volume_capacity};

/// The plugin's registered name.
pub const NAME: &str = "VolumeBinding";
/// PreFilter reason: a claim is unbound and its class binds immediately (the PV controller
/// has not bound it yet).
pub const ERR_REASON_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";
/// Filter reason: an unbound claim has no volume to take on the node and cannot be
/// provisioned there.
pub const ERR_REASON_BIND_CONFLICT: &str =
    "node(s) didn't find available persistent volumes to bind";
/// Filter reason: a bound claim's volume does not accept the node (v1.34 wording).
pub const ERR_REASON_NODE_CONFLICT: &str = "node(s) didn't match PersistentVolume's node affinity";
/// Filter reason: no capacity pool reachable from the node can hold a claim to provision.
pub const ERR_REASON_NOT_ENOUGH_SPACE: &str = "node(s) did not have enough free storage";
/// Filter reason: a bound claim's volume does not exist.
pub const ERR_REASON_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";

/// The VolumeBinding plugin.
pub struct VolumeBinding {
    handle: Handle,
    caches: Arc<Caches>,
    bind_timeout: Duration,
    /// `scheduler_volume_scheduling_stage_error_total{operation}`: finding (`predicate`),
    /// assuming (`assume`) or binding (`bind`) a pod's volumes failed with an error.
    stage_errors: Arc<CounterFamily>,
    /// Built from `shape` when StorageCapacityScoring is on; None: PreScore Skips.
    scorer: Option<Scorer>,
}

impl std::fmt::Debug for VolumeBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VolumeBinding")
            .field("bind_timeout", &self.bind_timeout)
            .field("caches", &self.caches)
            .field("scorer", &self.scorer)
            .finish()
    }
}

impl VolumeBinding {
    /// Builds the plugin from its args, over the handle's object store and client.
    pub fn new(args: &VolumeBindingArgs, handle: &Handle) -> Result<Self, PluginError> {
        kubesched_framework::registry::PluginArgs::validate(args, handle.features())
            .map_err(|e| PluginError(format!("{NAME}: invalid VolumeBindingArgs: {e}")))?;
        let shape = args
            .scoring_shape(handle.features().enabled(Feature::StorageCapacityScoring))
            .map_err(|e| PluginError(format!("{NAME}: invalid VolumeBindingArgs: {e}")))?;
        let metrics = handle.plugin_metrics();
        let stage_errors = metrics.counter_family(
            "scheduler_volume_scheduling_stage_error",
            "Volume scheduling stage error count",
            "operation",
        );
        // Upstream still registers the binder cache's counter, though nothing has counted
        // into it since its pod binding cache went; described here so the name is known.
        metrics.counter_family(
            "scheduler_volume_binder_cache_requests",
            "Total number for request volume binding cache",
            "operation",
        );
        Ok(Self {
            stage_errors,
            scorer: shape.as_deref().map(Scorer::new),
            handle: handle.clone(),
            caches: Arc::new(Caches::new(handle.objects())),
            bind_timeout: Duration::from_secs(
                u64::try_from(args.bind_timeout_seconds).unwrap_or(0),
            ),
        })
    }

    /// Upstream's `podHasPVCs` checks, on the API's claims: every claim exists, is not
    /// lost or being deleted, and an ephemeral volume's claim belongs to the pod.
    fn check_claims(&self, pod: &PodInfo) -> Result<(), String> {
        let store = &self.handle.objects().persistent_volume_claims;
        for (name, ephemeral) in pod_claims(&pod.pod) {
            let Some(pvc) = store.get(Some(&pod.namespace), &name) else {
                return Err(if ephemeral {
                    format!(
                        "waiting for ephemeral volume controller to create the persistentvolumeclaim {name:?}"
                    )
                } else {
                    format!("persistentvolumeclaim {name:?} not found")
                });
            };
            if is_lost(&pvc) {
                return Err(format!(
                    "persistentvolumeclaim {name:?} bound to non-existent persistentvolume {:?}",
                    volume::claim_volume_name(&pvc)
                ));
            }
            if pvc.metadata.deletion_timestamp.is_some() {
                return Err(format!("persistentvolumeclaim {name:?} is being deleted"));
            }
            if ephemeral && !owned_by(&pvc.metadata, &pod.pod) {
                return Err(format!(
                    "PVC {}/{name} was not created for pod {}/{} (pod is not owner)",
                    pod.namespace, pod.namespace, pod.name
                ));
            }
        }
        Ok(())
    }
}

/// Whether the pod is the claim's controller (upstream's `metav1.IsControlledBy`).
fn owned_by(
    meta: &kubesched_framework::model::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    pod: &Pod,
) -> bool {
    let pod_uid = pod.metadata.uid.as_deref().unwrap_or_default();
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .is_some_and(|r| r.uid == pod_uid)
}

// The kinds it reads (the backends watch and load them) and the writes it makes (RBAC).
use kubesched_framework::KindWrite;
use kubesched_framework::model::k8s_openapi::api::core::v1 as corev1;
use kubesched_framework::model::k8s_openapi::api::storage::v1 as storagev1;
kubesched_framework::register_plugin! {
    name: NAME,
    plugin: VolumeBinding,
    args: VolumeBindingArgs,
    kinds: [
        corev1::PersistentVolume,
        corev1::PersistentVolumeClaim,
        storagev1::StorageClass,
        storagev1::CSINode,
        storagev1::CSIDriver,
        storagev1::CSIStorageCapacity,
    ],
    writes: [
        // PreBind writes a volume's claimRef and a claim's selected node.
        KindWrite::update::<corev1::PersistentVolume>(),
        KindWrite::update::<corev1::PersistentVolumeClaim>(),
    ],
    factory: VolumeBinding::new,
}

/// The pod's claims for this cycle, shared by every copy of the cycle state (as upstream
/// shares its state pointer): Filter records per node what would be bound, Reserve what it
/// assumed.
#[derive(Clone)]
struct CycleData(Arc<CycleInner>);

struct CycleInner {
    claims: PodClaims,
    /// What Filter found on each node that passed with something to bind or provision.
    by_node: Mutex<HashMap<String, PodVolumes>>,
    /// What Reserve assumed.
    reserved: Mutex<Option<Reserved>>,
}

impl PreFilterPlugin for VolumeBinding {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        if !has_claims(&pod.pod) {
            return (None, Status::skip());
        }
        if let Err(message) = self.check_claims(pod) {
            return (None, Status::unresolvable(message));
        }
        let claims = match pod_volume_claims(
            &pod.pod,
            &pod.namespace,
            &self.caches.pvcs,
            &self.caches.pvs,
            self.handle.objects(),
        ) {
            Ok(c) => c,
            Err(e) => return (None, Status::error(e)),
        };
        if claims.unbound_immediate {
            return (None, Status::unresolvable(ERR_REASON_UNBOUND_IMMEDIATE));
        }
        let result = eligible_nodes(&claims, &self.caches.pvs).map(PreFilterResult::nodes);
        state.write(CycleData(Arc::new(CycleInner {
            claims,
            by_node: Mutex::new(HashMap::new()),
            reserved: Mutex::new(None),
        })));
        (result, Status::success())
    }
}

impl FilterPlugin for VolumeBinding {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(data) = state.read::<CycleData>() else {
            return Status::error("reading VolumeBinding's cycle state: not found");
        };
        let Some(n) = node.node() else {
            return Status::error("node not found");
        };
        let (volumes, conflicts) = match data.0.claims.find_pod_volumes(&n.name, &n.labels) {
            Ok(found) => found,
            Err(e) => {
                self.stage_errors.inc("predicate");
                return Status::error(e);
            }
        };
        if !conflicts.none() {
            return Status::new(Code::UnschedulableAndUnresolvable, conflicts.reasons());
        }
        if !volumes.is_empty() {
            data.0.by_node.lock().insert(n.name.clone(), volumes);
        }
        Status::success()
    }
}

impl PreScorePlugin for VolumeBinding {
    fn pre_score(
        &self,
        state: &mut CycleState,
        _pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> Status {
        // Without the gate there is nothing to score; without claims every node would
        // score 0 (upstream scores them so; skipping changes no total).
        if self.scorer.is_none() || state.read::<CycleData>().is_none() {
            return Status::skip();
        }
        Status::success()
    }
}

impl ScorePlugin for VolumeBinding {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let Some(scorer) = &self.scorer else {
            return Ok(0);
        };
        let Some(data) = state.read::<CycleData>() else {
            return Err(Status::error(
                "reading VolumeBinding's cycle state: not found",
            ));
        };
        let Some(n) = node.node() else {
            return Err(Status::error("node not found"));
        };
        let by_node = data.0.by_node.lock();
        let Some(volumes) = by_node.get(&n.name) else {
            return Ok(0);
        };
        let delayed = &data.0.claims.delayed;
        let mut classes: BTreeMap<&str, ClassStorage> = BTreeMap::new();
        if !volumes.static_bindings.is_empty() {
            // Volumes that exist: what the claims ask of what the volumes hold.
            for (i, pv) in &volumes.static_bindings {
                let class = pv
                    .spec
                    .as_ref()
                    .and_then(|s| s.storage_class_name.as_deref())
                    .unwrap_or_default();
                let c = classes.entry(class).or_default();
                c.requested += requested_storage(&delayed[*i].pvc);
                c.capacity += volume_capacity(pv);
            }
        } else {
            // Only provisioning: the claims of a class against the pool they come from
            // (taken once per class, not summed: two claims share one pool).
            for (i, capacity) in volumes.provisions.iter().zip(&volumes.provision_capacities) {
                let Some(capacity) = capacity else {
                    continue;
                };
                let pvc = &delayed[*i].pvc;
                let c = classes.entry(claim_class(pvc)).or_default();
                c.capacity = *capacity;
                c.requested += requested_storage(pvc);
            }
        }
        Ok(scorer.score(&classes))
    }
}

impl ReservePlugin for VolumeBinding {
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node_name: &str) -> Status {
        let Some(data) = state.read::<CycleData>() else {
            // The pod has no claims.
            return Status::success();
        };
        let volumes = data.0.by_node.lock().get(node_name).cloned();
        let mut reserved = match volumes {
            Some(v) if !all_bound(&pod.pod, &pod.namespace, &self.caches.pvcs) => {
                match self.caches.assume(&data.0.claims, &v, node_name) {
                    Ok(r) => r,
                    Err(e) => {
                        self.stage_errors.inc("assume");
                        return Status::error(e);
                    }
                }
            }
            _ => Reserved {
                all_bound: true,
                ..Reserved::default()
            },
        };
        reserved.node_labels = self
            .handle
            .snapshot()
            .get(node_name)
            .and_then(|n| n.node().map(|n| n.labels.clone()));
        *data.0.reserved.lock() = Some(reserved);
        Status::success()
    }

    fn unreserve(&self, state: &mut CycleState, _pod: &PodInfo, _node_name: &str) {
        let Some(data) = state.read::<CycleData>() else {
            return;
        };
        if let Some(reserved) = data.0.reserved.lock().as_ref() {
            self.caches.unreserve(reserved);
        }
    }
}

#[async_trait]
impl PreBindPlugin for VolumeBinding {
    async fn pre_bind(&self, state: &CycleState, pod: &PodInfo, node_name: &str) -> Status {
        let Some(data) = state.read::<CycleData>() else {
            return Status::skip();
        };
        let Some(reserved) = data.0.reserved.lock().clone() else {
            return Status::error(format!("no pod volumes found for node {node_name:?}"));
        };
        if reserved.all_bound {
            return Status::skip();
        }
        tracing::debug!(pod = %pod.key(), node = node_name, "binding volumes");
        match self
            .caches
            .bind(
                self.handle.client().as_ref(),
                self.handle.objects(),
                &reserved,
                node_name,
                self.bind_timeout,
            )
            .await
        {
            Ok(()) => {
                tracing::debug!(pod = %pod.key(), "volumes bound");
                Status::success()
            }
            Err(e) => {
                tracing::debug!(pod = %pod.key(), error = %e, "binding volumes failed");
                self.stage_errors.inc("bind");
                Status::error(e)
            }
        }
    }

    /// Work only when Reserve found claims still to bind or provision.
    fn pre_bind_pre_flight(&self, state: &CycleState, _pod: &PodInfo, node_name: &str) -> Status {
        let Some(data) = state.read::<CycleData>() else {
            // The pod has no claims.
            return Status::skip();
        };
        match data.0.reserved.lock().as_ref() {
            None => Status::error(format!("no pod volumes found for node {node_name:?}")),
            Some(r) if r.all_bound => Status::skip(),
            Some(_) => Status::success(),
        }
    }

    /// Volumes are bound apart from everything other PreBind plugins touch: v1.36's
    /// plugin lets its PreBind run beside theirs (#135393).
    fn pre_bind_allows_parallel(&self, _state: &CycleState, _pod: &PodInfo, _node: &str) -> bool {
        true
    }
}

impl EnqueueExtensions for VolumeBinding {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        let add_update = ActionType::ADD.union(ActionType::UPDATE);
        vec![
            // A class's allowed topologies decide where claims can be provisioned.
            ClusterEventWithHint::with_hint(
                EventResource::StorageClass,
                add_update,
                hints::after_class_change,
            ),
            // Claims get bound, created or given a node.
            ClusterEventWithHint::with_hint(
                EventResource::PersistentVolumeClaim,
                add_update,
                hints::after_claim_change,
            ),
            ClusterEventWithHint::new(EventResource::PersistentVolume, add_update),
            // Node labels decide volume node affinity and allowed topologies. With queueing
            // hints on (the v1.34 default), upstream does not register taint updates here.
            ClusterEventWithHint::new(
                EventResource::Node,
                ActionType::ADD.union(ActionType::UPDATE_NODE_LABEL),
            ),
            ClusterEventWithHint::with_hint(
                EventResource::CSINode,
                add_update,
                hints::after_csi_node_change,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::CSIDriver,
                ActionType::UPDATE,
                hints::after_csi_driver_change,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::CSIStorageCapacity,
                add_update,
                hints::after_capacity_change,
            ),
        ]
    }
}
