//! DynamicResources: dynamic resource allocation with structured parameters
//! (resource.k8s.io/v1), as kube-scheduler v1.37 does it.
//!
//! PreEnqueue holds a pod back until its ResourceClaims exist; PreFilter reads them,
//! checks their device classes and prepares the [allocator](allocator::Allocator) for the
//! claims still to allocate; Filter allocates them on each node (and checks the node
//! selectors of claims already allocated, and whether their binding failed or timed
//! out); Score prefers nodes giving prioritized lists their first choices; Reserve keeps
//! the chosen allocation in flight so no other pod gets the same devices; PreBind writes
//! allocation and `reservedFor` to the claims through the cluster client, then waits for
//! the binding conditions of their devices; Unreserve and PostFilter undo. Pods without
//! claims skip everything after one look at their spec. The plugin reads claims, slices
//! and classes from the object store and never talks to the API server but through
//! [`ClusterClient`](kubesched_framework::ClusterClient).
//!
//! The allocator follows v1.37's default gates (each can be turned off, or
//! `--emulated-version` picks an older release's): device taints and DeviceTaintRules,
//! partitionable devices (shared counter sets, `perDeviceNodeSelection`), consumable
//! capacity (shared devices, `requestPolicy`, `distinctAttribute`) and binding
//! conditions. `DynamicResourcesArgs`: `filterTimeout` bounds each Filter's search (an
//! error naming the node when it runs out, so the pod backs off), `bindingTimeout` (ten
//! minutes) bounds PreBind's wait.
//!
//! **Binding conditions in a simulation.** No device driver runs in `simulate`: a claim's
//! device conditions are what its manifest's `status.devices` says, and only the
//! plugin's own writes change a claim. The virtual clock does not move while PreBind
//! waits, so PreBind answers at once: the pod binds when every binding condition is
//! already True, fails with upstream's `claim NAME binding failed: ...` when a failure
//! condition is, and otherwise fails with upstream's `device binding timeout`, the claim
//! then counting as timed out (the next attempt's Filter finds it unavailable and
//! PostFilter deallocates it, as upstream does once `bindingTimeout` has passed), so such
//! a pod goes round allocation, timeout and deallocation until the simulation stops, as it
//! would in a cluster whose driver never attaches the device (there, ten minutes a round).
//! In a cluster PreBind waits, waking on every claim change.
//!
//! **Extended resources backed by DRA** (`DRAExtendedResource`, GA in v1.37; see
//! [`extended`]): a pod requesting an extended resource a DeviceClass names gets, on a node
//! that does not advertise it, a claim of its own: PreFilter starts it in memory, Filter
//! gives it the node's requests (one per container request, `container-<i>-request-<j>`)
//! and allocates it with the pod's claims, Reserve keeps it in flight, PreBind creates it
//! (`<pod>-extended-resources-<5 characters>`, the pod as controller), writes allocation
//! and reservation and sets the pod's `status.extendedResourceClaimStatus`. A claim an
//! earlier attempt created makes Filter answer `cannot schedule extended resource claim`
//! and PostFilter delete it; Unreserve deletes the one PreBind created. Nodes whose device
//! plugin advertises the resource are NodeResourcesFit's, as before. Binding conditions of
//! that claim's devices are not waited for.

pub mod allocator;
mod args;
pub mod capacity;
pub mod cel;
pub mod extended;
pub mod manager;
pub mod slices;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use kubesched_framework::dra_devices::{DeviceTally, DraExtendedDevices};
use kubesched_framework::events::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
};
use kubesched_framework::model::k8s_openapi::api::core::v1::{
    ContainerExtendedResourceRequest, Pod, PodExtendedResourceClaimStatus,
};
use kubesched_framework::model::k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceTaintRule, ResourceClaim, ResourceClaimConsumerReference,
    ResourceClaimStatus,
};
use kubesched_framework::model::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kubesched_framework::model::k8s_openapi::jiff;
use kubesched_framework::model::{NodeInfo, NodeSelector, PodInfo, PodObject};
use kubesched_framework::normalize::default_normalize_score;
use kubesched_framework::{
    ClientError, CycleState, EnqueueExtensions, Event, EventType, FilterPlugin, Framework, Handle,
    MAX_NODE_SCORE, NodeToStatus, ObjectRef, PluginError, PostFilterPlugin, PostFilterResult,
    PreBindPlugin, PreEnqueuePlugin, PreFilterPlugin, PreFilterResult, ReservePlugin, ScorePlugin,
    Status, async_trait,
};
use parking_lot::Mutex;

use crate::allocator::{Allocator, Features, NodeRef, Stopped, TIMED_OUT, TaintRule};
pub use crate::args::{ArgDuration, ArgGates, DynamicResourcesArgs};
use crate::extended::PodExtended;
use crate::manager::AllocatedState;
use crate::manager::{Manager, kobj, uid};
use crate::slices::SliceIndex;

/// The plugin's registered name.
pub const NAME: &str = "DynamicResources";
/// Filter: the pending claims do not all fit on the node.
pub const ERR_REASON_CANNOT_ALLOCATE: &str = "cannot allocate all claims";
/// Filter: an allocated claim's node selector excludes the node.
pub const ERR_REASON_NOT_AVAILABLE: &str = "resourceclaim not available on the node";
/// PreFilter: an allocated claim cannot take another consumer.
pub const ERR_REASON_IN_USE: &str = "resourceclaim in use";
/// PostFilter: nothing to deallocate.
pub const MSG_NO_NEW_CLAIMS: &str = "no new claims to deallocate";
/// PostFilter: a claim was deallocated so the pod may fit next time.
pub const MSG_DEALLOCATED: &str = "deallocation of ResourceClaim completed";
/// PostFilter: no claim could be deallocated.
pub const MSG_STILL_NOT_SCHEDULABLE: &str = "still not schedulable";
/// Filter: the extended-resource claim an earlier attempt created is still there
/// (PostFilter deletes it).
pub const ERR_REASON_EXTENDED_CLAIM: &str = "cannot schedule extended resource claim";
/// Filter: an extended resource neither the node advertises nor a DeviceClass provides.
pub const ERR_REASON_CANNOT_FIT_RESOURCE: &str = "cannot fit resource";
/// PostFilter: the extended-resource claim of an earlier attempt was deleted.
pub const MSG_DELETED: &str = "deletion of ResourceClaim completed";
/// How long PreBind waits for a created extended-resource claim to reach the store.
const EXTENDED_CLAIM_VISIBLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);
/// The finalizer the scheduler puts on claims it allocates.
pub const FINALIZER: &str = "resource.kubernetes.io/delete-protection";
/// Upstream's `ResourceClaimReservedForMaxSize`.
pub const RESERVED_FOR_MAX_SIZE: usize = 256;
/// How often PreBind tries a claim update that ran into a conflict (client-go's
/// `retry.DefaultRetry`).
const CONFLICT_RETRIES: usize = 5;

/// The DynamicResources plugin.
pub struct DynamicResources {
    handle: Handle,
    manager: Arc<Manager>,
    features: Features,
    /// How long one Filter call may search a node (None: without limit).
    filter_timeout: Option<std::time::Duration>,
    /// How long PreBind waits for binding conditions (`bindingTimeout`).
    binding_timeout: std::time::Duration,
    /// DRADeviceTaintRules: DeviceTaintRule objects taint the devices they select.
    taint_rules: bool,
    /// DRAExtendedResource: extended resources DeviceClasses name come from devices.
    extended_resource: bool,
    /// The plugin's metrics (v1.37 names).
    metrics: DraMetrics,
}

/// v1.37's DRA metrics the scheduler counts (`pkg/scheduler/metrics/metrics.go` and
/// `k8s.io/dynamic-resource-allocation`'s, after #138542 renamed the claim-creation
/// counter).
#[derive(Debug, Clone)]
struct DraMetrics {
    /// `dynamic_resource_allocation_resourceclaim_creates_total{status, admin_access}`:
    /// the claims PreBind created for DRA-backed extended resources (`success` or
    /// `failure`; such claims never ask for admin access).
    claim_creates: Arc<kubesched_framework::metrics::VecFamily>,
    /// `scheduler_dra_bindingconditions_allocations_total{profile, driver, status}`: per
    /// driver with devices that have binding conditions, one per PreBind that waited
    /// (`success`, `failure`, `timeout`).
    binding_allocations: Arc<kubesched_framework::metrics::VecFamily>,
    /// `scheduler_dra_bindingconditions_wait_duration_seconds{profile, driver, status}`.
    binding_wait: Arc<kubesched_framework::metrics::VecFamily>,
}

impl DraMetrics {
    fn on(handle: &Handle) -> Self {
        let m = handle.plugin_metrics();
        Self {
            claim_creates: m.counter_vec(
                "dynamic_resource_allocation_resourceclaim_creates",
                "Number of ResourceClaims creation requests, categorized by creation status and admin access",
                &["status", "admin_access"],
            ),
            binding_allocations: m.counter_vec(
                "scheduler_dra_bindingconditions_allocations",
                "Number of allocations using devices with BindingConditions, counted per driver per scheduling attempt",
                &["profile", "driver", "status"],
            ),
            binding_wait: m.histogram_vec(
                "scheduler_dra_bindingconditions_wait_duration_seconds",
                "Time in seconds spent waiting for BindingConditions to be satisfied during PreBind.",
                &["profile", "driver", "status"],
                kubesched_framework::metrics::exponential_buckets(0.1, 2.0, 14),
            ),
        }
    }
}

impl std::fmt::Debug for DynamicResources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamicResources")
            .field("features", &self.features)
            .field("filter_timeout", &self.filter_timeout)
            .finish_non_exhaustive()
    }
}

impl DynamicResources {
    /// Builds the plugin on the handle's object store and cluster client.
    pub fn new(args: &DynamicResourcesArgs, handle: &Handle) -> Result<Self, PluginError> {
        let gate = |name: &str| handle.features().enabled_by_name(name).unwrap_or(false);
        let filter_timeout = args
            .filter_limit(ArgGates::of(handle.features()))
            .map_err(|e| PluginError(format!("{NAME}: invalid DynamicResourcesArgs: {e}")))?;
        Ok(Self {
            handle: handle.clone(),
            manager: manager::for_store(handle.objects()),
            features: Features {
                admin_access: gate("DRAAdminAccess"),
                prioritized_list: gate("DRAPrioritizedList"),
                device_taints: gate("DRADeviceTaints"),
                partitionable_devices: gate("DRAPartitionableDevices"),
                consumable_capacity: gate("DRAConsumableCapacity"),
                binding_conditions: gate("DRADeviceBindingConditions")
                    && gate("DRAResourceClaimDeviceStatus"),
            },
            filter_timeout,
            binding_timeout: args.binding_limit(),
            taint_rules: gate("DRADeviceTaintRules"),
            extended_resource: gate("DRAExtendedResource"),
            metrics: DraMetrics::on(handle),
        })
    }

    /// The shared DRA state (in-flight allocations, slice index).
    pub fn manager(&self) -> &Arc<Manager> {
        &self.manager
    }

    /// The claims of the pod, one per `spec.resourceClaims` entry that names one, or the
    /// reason the pod cannot be scheduled yet.
    fn pod_claims(&self, pod: &Pod) -> Result<Vec<Arc<ResourceClaim>>, String> {
        let mut out = Vec::new();
        self.foreach_claim(pod, |c| out.push(c))?;
        Ok(out)
    }

    fn foreach_claim(
        &self,
        pod: &Pod,
        mut f: impl FnMut(Arc<ResourceClaim>),
    ) -> Result<(), String> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let pod_name = pod.metadata.name.as_deref().unwrap_or("");
        let Some(claims) = pod.spec.as_ref().and_then(|s| s.resource_claims.as_ref()) else {
            return Ok(());
        };
        for pc in claims {
            let (name, must_check_owner) = if let Some(n) = &pc.resource_claim_name {
                (Some(n.clone()), false)
            } else if pc.resource_claim_template_name.is_some() {
                let status = pod
                    .status
                    .as_ref()
                    .and_then(|s| s.resource_claim_statuses.as_ref())
                    .and_then(|v| v.iter().find(|s| s.name == pc.name));
                match status {
                    Some(s) => (s.resource_claim_name.clone(), true),
                    None => {
                        return Err(format!(
                            "pod \"{namespace}/{pod_name}\": ResourceClaim not created yet"
                        ));
                    }
                }
            } else {
                return Err(format!(
                    "pod \"{namespace}/{pod_name}\", spec.resourceClaim {:?}: none of the supported fields are set",
                    pc.name
                ));
            };
            // No claim was generated for this entry: that is allowed and means nothing to do.
            let Some(name) = name else {
                continue;
            };
            let Some(claim) = self.manager.claim(self.handle.objects(), namespace, &name) else {
                return Err(format!(
                    "resourceclaim.resource.k8s.io \"{name}\" not found"
                ));
            };
            if claim.metadata.deletion_timestamp.is_some() {
                return Err(format!("resourceclaim \"{name}\" is being deleted"));
            }
            if must_check_owner && !controlled_by(&claim, pod, namespace, pod_name) {
                return Err(format!(
                    "ResourceClaim {namespace}/{name} was not created for pod {namespace}/{pod_name} (pod is not owner)"
                ));
            }
            f(claim);
        }
        Ok(())
    }

    /// Writes allocation (if the scheduler made one) and the reservation for the pod into
    /// the claim, retrying on conflicts with a fresh copy as upstream's `bindClaim`.
    async fn bind_claim(
        &self,
        claim: &Arc<ResourceClaim>,
        allocation: Option<&AllocationResult>,
        pod: &PodInfo,
    ) -> Result<ResourceClaim, String> {
        let client = self.handle.client();
        let name = kobj(claim);
        let namespace = claim.metadata.namespace.as_deref().unwrap_or("");
        let claim_name = claim.metadata.name.as_deref().unwrap_or("");
        let mut current = (**claim).clone();
        let mut last_conflict = None;
        for attempt in 0..CONFLICT_RETRIES {
            if attempt > 0 {
                current = client
                    .get_resource_claim(namespace, claim_name)
                    .await
                    .map_err(|e| format!("get updated claim {name} after conflict: {e}"))?;
            }
            if current.metadata.deletion_timestamp.is_some() {
                return Err(format!("claim {name} got deleted in the meantime"));
            }
            if let Some(allocation) = allocation {
                if current
                    .status
                    .as_ref()
                    .is_some_and(|s| s.allocation.is_some())
                {
                    return Err(format!(
                        "claim {name} got allocated elsewhere in the meantime"
                    ));
                }
                let finalizers = current.metadata.finalizers.get_or_insert_with(Vec::new);
                if !finalizers.iter().any(|f| f == FINALIZER) {
                    finalizers.push(FINALIZER.to_string());
                    match client.update_resource_claim(&current).await {
                        Ok(updated) => current = updated,
                        Err(ClientError::Conflict(e)) => {
                            last_conflict =
                                Some(format!("add finalizer to claim {name}: conflict: {e}"));
                            continue;
                        }
                        Err(e) => return Err(format!("add finalizer to claim {name}: {e}")),
                    }
                }
                current
                    .status
                    .get_or_insert_with(ResourceClaimStatus::default)
                    .allocation = Some(allocation.clone());
            }
            if self.features.binding_conditions
                && let Some(a) = current.status.as_mut().and_then(|s| s.allocation.as_mut())
                && a.allocation_timestamp.is_none()
            {
                a.allocation_timestamp = self.now();
            }
            current
                .status
                .get_or_insert_with(ResourceClaimStatus::default)
                .reserved_for
                .get_or_insert_with(Vec::new)
                .push(ResourceClaimConsumerReference {
                    api_group: None,
                    resource: "pods".into(),
                    name: pod.name.clone(),
                    uid: pod.uid.clone(),
                });
            let what = if allocation.is_some() {
                "add allocation and reservation to claim"
            } else {
                "add reservation to claim"
            };
            match client.update_resource_claim_status(&current).await {
                Ok(updated) => return Ok(updated),
                Err(ClientError::Conflict(e)) => {
                    last_conflict = Some(format!("{what} {name}: conflict: {e}"));
                }
                Err(e) => return Err(format!("{what} {name}: {e}")),
            }
        }
        Err(last_conflict.unwrap_or_else(|| format!("update claim {name}: conflict")))
    }
}

impl DynamicResources {
    /// PreBind's part for the extended-resource claim Reserve allocated: creates it,
    /// writes allocation and reservation, waits for the store to have it, and names it in
    /// the pod's `status.extendedResourceClaimStatus`. Nothing when device plugins
    /// provide every extended resource on the node.
    async fn bind_extended_claim(&self, ext: &ExtendedState, pod: &PodInfo) -> Result<(), String> {
        let Some((reserved, mappings)) = ext.reserved.lock().clone() else {
            return Ok(());
        };
        let allocation = reserved.status.as_ref().and_then(|s| s.allocation.clone());
        let client = self.handle.client();
        let bound = async {
            let current = ext.claim.lock().clone();
            let created = if extended::is_in_memory(&current) {
                let mut claim = reserved.clone();
                claim.metadata.name = None;
                claim.metadata.uid = None;
                claim.metadata.resource_version = None;
                claim.metadata.finalizers = None;
                claim.status = None;
                let namespace = claim.metadata.namespace.clone().unwrap_or_default();
                tracing::debug!(pod = %pod.key(), "creating the claim for extended resources");
                let created = client.create_resource_claim(&claim).await;
                let status = if created.is_ok() {
                    "success"
                } else {
                    "failure"
                };
                self.metrics.claim_creates.inc(&[status, "false"]);
                let created = created.map_err(|e| {
                    format!("create claim for extended resources {namespace}/: {e}")
                })?;
                let created = Arc::new(created);
                // From now on Unreserve deletes it.
                *ext.claim.lock() = created.clone();
                created
            } else {
                current
            };
            let bound = self.bind_claim(&created, allocation.as_ref(), pod).await?;
            let bound = Arc::new(bound);
            *ext.claim.lock() = bound.clone();
            self.manager.assume(bound.clone());
            self.wait_for_claim_in_store(&bound).await;
            Ok::<_, String>(bound)
        }
        .await;
        self.manager.remove_pending_allocation(&ext.initial_uid);
        let bound = bound?;
        if mappings.is_empty() {
            return Err(format!(
                "nil or empty request mappings, no update of pod {}/{} ExtendedResourceClaimStatus",
                pod.namespace, pod.name
            ));
        }
        let status = PodExtendedResourceClaimStatus {
            request_mappings: mappings,
            resource_claim_name: bound.metadata.name.clone().unwrap_or_default(),
        };
        client
            .patch_pod_extended_resource_claim_status(pod, &status)
            .await
            .map_err(|e| {
                format!(
                    "update pod {}/{} ExtendedResourceClaimStatus: {e}",
                    pod.namespace, pod.name
                )
            })
    }

    /// Waits (at most two minutes, as upstream) until the store has the claim as PreBind
    /// wrote it, so the next pods see its devices taken; a claim that does not show up is
    /// only logged. Woken by the store's changes rather than upstream's one-second poll.
    /// Under a virtual clock the store has it at once.
    async fn wait_for_claim_in_store(&self, claim: &ResourceClaim) {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or("");
        let name = claim.metadata.name.as_deref().unwrap_or("");
        let store = &self.handle.objects().resource_claims;
        let seen = || {
            store.get(Some(namespace), name).is_some_and(|c| {
                uid(&c) == uid(claim) && resource_version(&c) >= resource_version(claim)
            })
        };
        if self.handle.clock().is_virtual() {
            return;
        }
        // Subscribed before the first look, so a change between the two is not missed.
        let mut changes = store.subscribe();
        let deadline = tokio::time::Instant::now() + EXTENDED_CLAIM_VISIBLE_TIMEOUT;
        loop {
            if seen() {
                return;
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                // Timed out, or the store went away with the scheduler.
                _ => break,
            }
        }
        tracing::debug!(claim = %kobj(claim), "claim not in the store in time");
    }

    /// The handle clock's wall time as an API timestamp, to the second (as the API
    /// server stores it).
    fn now(&self) -> Option<Time> {
        let since = self
            .handle
            .clock()
            .wall_now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?;
        let secs = i64::try_from(since.as_secs()).ok()?;
        jiff::Timestamp::from_second(secs).ok().map(Time)
    }

    /// Upstream's `isClaimReadyForBinding`: every binding condition of every allocated
    /// device is True in the claim's `status.devices`; an error when a binding failure
    /// condition is True.
    fn claim_ready_for_binding(claim: &ResourceClaim) -> Result<bool, String> {
        let Some(allocation) = allocation_of(claim) else {
            return Ok(false);
        };
        let name = claim.metadata.name.as_deref().unwrap_or("");
        for result in allocation
            .devices
            .as_ref()
            .and_then(|d| d.results.as_ref())
            .into_iter()
            .flatten()
        {
            let conditions = result.binding_conditions.as_deref().unwrap_or_default();
            if conditions.is_empty() {
                continue;
            }
            let Some(status) = claim
                .status
                .as_ref()
                .and_then(|s| s.devices.as_ref())
                .and_then(|d| {
                    d.iter().find(|d| {
                        d.device == result.device
                            && d.driver == result.driver
                            && d.pool == result.pool
                    })
                })
            else {
                return Ok(false);
            };
            let found = |t: &str| status.conditions.iter().flatten().find(|c| c.type_ == t);
            for failure in result.binding_failure_conditions.iter().flatten() {
                if let Some(c) = found(failure).filter(|c| c.status == "True") {
                    return Err(format!(
                        "claim {name} binding failed: reason={}, message={:?}",
                        c.reason, c.message
                    ));
                }
            }
            if !conditions
                .iter()
                .all(|t| found(t).is_some_and(|c| c.status == "True"))
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Upstream's `isClaimTimeout`: a device of the claim has binding conditions and the
    /// claim was allocated longer than `bindingTimeout` ago (or, in a simulation, PreBind
    /// gave up on it already).
    fn claim_binding_timed_out(&self, claim: &ResourceClaim) -> bool {
        if !self.features.binding_conditions {
            return false;
        }
        let Some(allocation) = allocation_of(claim) else {
            return false;
        };
        let Some(stamp) = &allocation.allocation_timestamp else {
            return false;
        };
        let conditioned = allocation
            .devices
            .as_ref()
            .and_then(|d| d.results.as_ref())
            .into_iter()
            .flatten()
            .any(|r| r.binding_conditions.is_some());
        if !conditioned {
            return false;
        }
        if self.manager.binding_timed_out(claim) {
            return true;
        }
        let Ok(timeout) = jiff::SignedDuration::try_from(self.binding_timeout) else {
            return false;
        };
        let Some(now) = self.now() else {
            return false;
        };
        stamp
            .0
            .checked_add(timeout)
            .is_ok_and(|deadline| deadline < now.0)
    }

    /// Upstream's `isPodReadyForBinding`, on the newest copy of each claim (the store's
    /// when a driver has written it since, else the one PreBind wrote).
    fn pod_ready_for_binding(&self, s: &StateInner) -> Result<bool, String> {
        let claims = s.claims.lock().clone();
        for (index, ours) in claims.iter().enumerate() {
            let (claim, newer) = self.latest_claim(ours, false)?;
            if newer {
                s.claims.lock()[index] = claim.clone();
            }
            if !self.claim_ready_or_failed(&claim)? {
                return Ok(false);
            }
        }
        // The claim of the pod's DRA-backed extended resources waits for its devices'
        // binding conditions like the pod's own claims (upstream keeps it last among them).
        if let Some(ext) = &s.extended {
            let ours = ext.claim.lock().clone();
            if allocation_of(&ours).is_some() {
                let (claim, newer) = self.latest_claim(&ours, true)?;
                if newer {
                    *ext.claim.lock() = claim.clone();
                }
                if !self.claim_ready_or_failed(&claim)? {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// The claim as the store has it now, when that is newer than `ours` (true), else
    /// `ours`.
    fn latest_claim(
        &self,
        ours: &Arc<ResourceClaim>,
        created_here: bool,
    ) -> Result<(Arc<ResourceClaim>, bool), String> {
        let namespace = ours.metadata.namespace.as_deref().unwrap_or("");
        let name = ours.metadata.name.as_deref().unwrap_or("");
        let Some(stored) = self.manager.claim(self.handle.objects(), namespace, name) else {
            if created_here {
                // Created by this PreBind and not seen by the watch yet: as written.
                return Ok((ours.clone(), false));
            }
            return Err(format!(
                "resourceclaim.resource.k8s.io \"{name}\" not found"
            ));
        };
        Ok(if resource_version(&stored) > resource_version(ours) {
            (stored, true)
        } else {
            (ours.clone(), false)
        })
    }

    /// Whether the claim's binding conditions are all met; an error when one failed or
    /// the claim timed out.
    fn claim_ready_or_failed(&self, claim: &ResourceClaim) -> Result<bool, String> {
        if Self::claim_ready_for_binding(claim)? {
            return Ok(true);
        }
        if self.claim_binding_timed_out(claim) {
            let name = claim.metadata.name.as_deref().unwrap_or("");
            return Err(format!("claim {name} binding timeout"));
        }
        Ok(false)
    }

    /// The claims PreBind binds: the pod's own, and the created claim of its DRA-backed
    /// extended resources.
    fn claims_in_pre_bind(s: &StateInner) -> Vec<Arc<ResourceClaim>> {
        let mut claims = s.claims.lock().clone();
        if let Some(ext) = &s.extended {
            let claim = ext.claim.lock().clone();
            if allocation_of(&claim).is_some() {
                claims.push(claim);
            }
        }
        claims
    }

    /// PreBind's wait for binding conditions: until every claim is ready, a failure
    /// condition is True, a claim times out, or `bindingTimeout` passes (`device binding
    /// timeout`). It wakes on every claim change, and at least every five seconds as
    /// upstream polls. Under a virtual clock (simulate) nothing but the plugin changes
    /// claims and no time passes while PreBind waits: the answer is given at once, a
    /// claim not ready yet timing out as it would once `bindingTimeout` has passed.
    async fn wait_for_binding_conditions(&self, s: &StateInner) -> Result<(), String> {
        const POLL: std::time::Duration = std::time::Duration::from_secs(5);
        const TIMEOUT: &str = "device binding timeout";
        let mut changes = self.handle.objects().resource_claims.subscribe();
        if self.handle.clock().is_virtual() {
            if self.pod_ready_for_binding(s)? {
                return Ok(());
            }
            for claim in Self::claims_in_pre_bind(s) {
                if has_binding_conditions(std::slice::from_ref(&claim)) {
                    self.manager.mark_binding_timed_out(&claim);
                }
            }
            return Err(TIMEOUT.into());
        }
        let deadline = tokio::time::Instant::now() + self.binding_timeout;
        loop {
            if self.pod_ready_for_binding(s)? {
                return Ok(());
            }
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        // The store went away; keep to the poll.
                        tokio::time::sleep(POLL.min(deadline - tokio::time::Instant::now())).await;
                    }
                }
                _ = tokio::time::sleep(POLL) => {}
                _ = tokio::time::sleep_until(deadline) => return Err(TIMEOUT.into()),
            }
        }
    }
}

/// The drivers of the allocated devices with binding conditions, each once, sorted.
fn binding_condition_drivers(claims: &[Arc<ResourceClaim>]) -> BTreeSet<String> {
    claims
        .iter()
        .filter_map(|c| allocation_of(c))
        .filter_map(|a| a.devices.as_ref())
        .filter_map(|d| d.results.as_ref())
        .flatten()
        .filter(|r| r.binding_conditions.as_ref().is_some_and(|b| !b.is_empty()))
        .map(|r| r.driver.clone())
        .collect()
}

/// Whether an allocated claim has a device with binding conditions.
fn has_binding_conditions(claims: &[Arc<ResourceClaim>]) -> bool {
    claims.iter().any(|c| {
        allocation_of(c)
            .and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.as_ref())
            .is_some_and(|r| {
                r.iter()
                    .any(|r| r.binding_conditions.as_ref().is_some_and(|b| !b.is_empty()))
            })
    })
}

fn resource_version(claim: &ResourceClaim) -> u64 {
    claim
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

// The kinds it reads (the backends watch and load them) and the writes it makes (RBAC).
use kubesched_framework::KindWrite;
use kubesched_framework::model::k8s_openapi::api::resource::v1 as resourcev1;
kubesched_framework::register_plugin! {
    name: NAME,
    plugin: DynamicResources,
    args: DynamicResourcesArgs,
    kinds: [
        resourcev1::ResourceClaim,
        resourcev1::ResourceSlice,
        resourcev1::DeviceClass,
        resourcev1::DeviceTaintRule,
    ],
    writes: [
        // PreBind adds its finalizer and writes the allocation; Unreserve patches reservedFor.
        KindWrite::update::<resourcev1::ResourceClaim>(),
        KindWrite::status::<resourcev1::ResourceClaim>(),
        // The claim of a pod's DRA-backed extended resources: PreBind creates it, a
        // failed attempt's is deleted.
        KindWrite {
            kind: kubesched_framework::ObjectKind::of::<resourcev1::ResourceClaim>(),
            verbs: &["create", "delete"],
            status_verbs: &[],
        },
    ],
    factory: DynamicResources::new,
}

/// Whether the pod controls the claim. A pod without a UID (a manifest never through an
/// API server) goes by `namespace/name`, as the model names it.
fn controlled_by(claim: &ResourceClaim, pod: &Pod, namespace: &str, pod_name: &str) -> bool {
    let pod_uid = pod
        .metadata
        .uid
        .clone()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| format!("{namespace}/{pod_name}"));
    claim.metadata.namespace.as_deref() == Some(namespace)
        && claim
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true) && o.uid == pod_uid)
}

fn is_reserved_for(claim: &ResourceClaim, pod_uid: &str) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.as_ref())
        .is_some_and(|r| r.iter().any(|c| c.uid == pod_uid))
}

fn reserved_count(claim: &ResourceClaim) -> usize {
    claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.as_ref())
        .map_or(0, Vec::len)
}

fn allocation_of(claim: &ResourceClaim) -> Option<&AllocationResult> {
    claim.status.as_ref().and_then(|s| s.allocation.as_ref())
}

/// Read without decoding the object: a pod without claims (nearly every pod of a dump)
/// stays packed.
fn has_claims(pod: &PodObject) -> bool {
    pod.has_resource_claims()
}

/// What PreFilter learnt about the pod's claims, shared by the cycle's later points.
#[derive(Debug, Default)]
struct StateInner {
    /// The pod's claims, as of PreFilter (replaced by PreBind's writes).
    claims: Mutex<Vec<Arc<ResourceClaim>>>,
    /// For allocated claims with a node selector: the selector.
    available_on: Vec<Option<NodeSelector>>,
    /// Indices (into `claims`) of the claims the allocator allocates.
    to_allocate: Vec<usize>,
    allocator: Option<Allocator>,
    /// Allocated claims found unavailable on some node (for PostFilter).
    unavailable: Mutex<BTreeSet<usize>>,
    /// Filter's allocation per feasible node, aligned with `to_allocate`.
    node_allocations: Mutex<HashMap<String, Vec<AllocationResult>>>,
    /// Reserve's choice per claim index.
    allocations: Mutex<HashMap<usize, AllocationResult>>,
    /// Some allocated claim has devices with binding conditions (Filter checks them).
    has_conditions: bool,
    /// The pod's extended resources backed by DRA (None: it has none, or the gate is off).
    extended: Option<ExtendedState>,
}

/// The extended-resource claim with one node's requests, and which container request maps
/// to which of its device requests.
type NodeExtendedClaim = (Arc<ResourceClaim>, Vec<ContainerExtendedResourceRequest>);

/// The claim of the pod's DRA-backed extended resources through the cycle.
#[derive(Debug)]
struct ExtendedState {
    /// What the pod requests.
    pod: PodExtended,
    /// The in-memory claim (or the one an earlier attempt created); PreBind's once it
    /// created it.
    claim: Mutex<Arc<ResourceClaim>>,
    /// The UID the in-memory claim is in flight under.
    initial_uid: String,
    /// Per feasible node that needs devices for it: the claim with that node's requests
    /// and which container request maps to which device request.
    nodes: Mutex<HashMap<String, NodeExtendedClaim>>,
    /// Reserve's choice: the node's claim with its allocation.
    reserved: Mutex<Option<(ResourceClaim, Vec<ContainerExtendedResourceRequest>)>>,
    /// What a node's allocator starts from (the claim differs per node).
    allocated: Arc<AllocatedState>,
    index: Arc<SliceIndex>,
    taint_rules: Vec<TaintRule>,
}

#[derive(Debug, Clone, Default)]
struct DraState(Arc<StateInner>);

impl PreEnqueuePlugin for DynamicResources {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        if !has_claims(&pod.pod) {
            return Status::success();
        }
        match self.foreach_claim(&pod.pod, |_| {}) {
            Ok(()) => Status::success(),
            Err(e) => Status::unresolvable(e),
        }
    }
}

impl PreFilterPlugin for DynamicResources {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        let objects = self.handle.objects();
        let extended_pod = if self.extended_resource && !pod.requests.scalar.is_empty() {
            PodExtended::of(pod, &objects.device_classes.list())
        } else {
            None
        };
        if !has_claims(&pod.pod) && extended_pod.is_none() {
            state.write(DraState::default());
            return (None, Status::skip());
        }
        let claims = match self.pod_claims(&pod.pod) {
            Ok(c) => c,
            Err(e) => {
                state.write(DraState::default());
                return (None, Status::unresolvable(e));
            }
        };
        if claims.is_empty() && extended_pod.is_none() {
            state.write(DraState::default());
            return (None, Status::skip());
        }
        // The claim of the pod's extended resources: an earlier attempt's, or a new one in
        // memory.
        let extended_claim = extended_pod.as_ref().map(|_| {
            let namespaced: Vec<Arc<ResourceClaim>> = objects
                .resource_claims
                .list()
                .into_iter()
                .filter(|c| c.metadata.namespace.as_deref() == Some(pod.namespace.as_str()))
                .collect();
            extended::find_claim(&namespaced, pod)
                .unwrap_or_else(|| Arc::new(extended::in_memory_claim(pod)))
        });
        if let Some(c) = &extended_claim
            && allocation_of(c).is_none()
            && self.manager.has_pending_allocation(uid(c))
        {
            state.write(DraState::default());
            return (
                None,
                Status::unresolvable(format!(
                    "resource claim {} is in the process of being allocated",
                    kobj(c)
                )),
            );
        }
        let mut available_on = Vec::with_capacity(claims.len());
        let mut to_allocate = Vec::new();
        for (i, claim) in claims.iter().enumerate() {
            match allocation_of(claim) {
                Some(allocation) => {
                    if reserved_count(claim) >= RESERVED_FOR_MAX_SIZE
                        && !is_reserved_for(claim, &pod.uid)
                    {
                        state.write(DraState::default());
                        return (None, Status::unresolvable(ERR_REASON_IN_USE));
                    }
                    let selector = match &allocation.node_selector {
                        Some(sel) => {
                            match NodeSelector::compile(sel, "status.allocation.nodeSelector") {
                                Ok(s) => Some(s),
                                Err(e) => {
                                    state.write(DraState::default());
                                    return (None, Status::error(e));
                                }
                            }
                        }
                        None => None,
                    };
                    available_on.push(selector);
                }
                None => {
                    available_on.push(None);
                    to_allocate.push(i);
                    if self.manager.has_pending_allocation(uid(claim)) {
                        state.write(DraState::default());
                        return (
                            None,
                            Status::unresolvable(format!(
                                "resource claim {} is in the process of being allocated",
                                kobj(claim)
                            )),
                        );
                    }
                    for request in claim
                        .spec
                        .as_ref()
                        .and_then(|s| s.devices.as_ref())
                        .and_then(|d| d.requests.as_ref())
                        .into_iter()
                        .flatten()
                    {
                        let subs = request.first_available.as_deref().unwrap_or_default();
                        let check = |class: &str, request_name: &str| -> Option<Status> {
                            if class.is_empty() {
                                return Some(Status::error(format!(
                                    "request {request_name}: unsupported request type"
                                )));
                            }
                            if objects.device_classes.get(None, class).is_none() {
                                return Some(Status::unresolvable(format!(
                                    "request {request_name}: device class {class} does not exist"
                                )));
                            }
                            None
                        };
                        // Upstream's order: `exactly`, else `firstAvailable`, else a
                        // request type this release does not know.
                        let problem = if let Some(exact) = &request.exactly {
                            check(&exact.device_class_name, &request.name)
                        } else if !subs.is_empty() {
                            if self.features.prioritized_list {
                                subs.iter().find_map(|s| {
                                    check(
                                        &s.device_class_name,
                                        &format!("{}/{}", request.name, s.name),
                                    )
                                })
                            } else {
                                Some(Status::unresolvable(format!(
                                    "resource claim {}, request {}: has subrequests, but the DRAPrioritizedList feature is disabled",
                                    kobj(claim),
                                    request.name
                                )))
                            }
                        } else {
                            Some(Status::unresolvable(format!(
                                "resource claim {}, request {}: unknown request type",
                                kobj(claim),
                                request.name
                            )))
                        };
                        if let Some(status) = problem {
                            state.write(DraState::default());
                            return (None, status);
                        }
                    }
                }
            }
        }
        let mut allocator = None;
        let mut extended = None;
        if !to_allocate.is_empty() || extended_claim.is_some() {
            let allocated = self.manager.allocated_state(objects);
            let index = self.manager.slices.get(&objects.resource_slices);
            let taint_rules: Vec<TaintRule> = if self.features.device_taints && self.taint_rules {
                objects
                    .of::<DeviceTaintRule>()
                    .list()
                    .iter()
                    .map(|r| TaintRule::of(r))
                    .collect()
            } else {
                Vec::new()
            };
            if !to_allocate.is_empty() {
                let pending: Vec<Arc<ResourceClaim>> =
                    to_allocate.iter().map(|i| claims[*i].clone()).collect();
                let class_of = |name: &str| objects.device_classes.get(None, name);
                allocator = Some(
                    Allocator::new(
                        self.features,
                        &pending,
                        allocated.clone(),
                        &class_of,
                        index.clone(),
                        &self.manager.cel,
                    )
                    .with_taint_rules(taint_rules.clone()),
                );
            }
            if let (Some(claim), Some(pod_extended)) = (extended_claim, extended_pod) {
                extended = Some(ExtendedState {
                    pod: pod_extended,
                    initial_uid: uid(&claim).to_string(),
                    claim: Mutex::new(claim),
                    nodes: Mutex::default(),
                    reserved: Mutex::default(),
                    allocated,
                    index,
                    taint_rules,
                });
            }
        }
        let has_conditions = has_binding_conditions(&claims);
        if extended.is_some() {
            // Filled by Filter, read by NodeResourcesFit's Score.
            state.write(DraExtendedDevices::default());
        }
        state.write(DraState(Arc::new(StateInner {
            has_conditions,
            claims: Mutex::new(claims),
            available_on,
            to_allocate,
            allocator,
            extended,
            ..StateInner::default()
        })));
        (None, Status::success())
    }
}

impl FilterPlugin for DynamicResources {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(DraState(s)) = state.read::<DraState>() else {
            return Status::error(format!(
                "reading PreFilter{NAME} from the cycle state: not found"
            ));
        };
        if s.available_on.is_empty() && s.extended.is_none() {
            return Status::success();
        }
        let Some(n) = node.node() else {
            return Status::error("node not found");
        };
        let mut node_extended = None;
        let mut needed = std::collections::BTreeMap::new();
        if let Some(ext) = &s.extended {
            let claim = ext.claim.lock().clone();
            if extended::has_requests(&claim) {
                // An earlier attempt's claim: PostFilter deletes it, the next attempt
                // starts anew.
                return Status::unresolvable(ERR_REASON_EXTENDED_CLAIM);
            }
            for (name, (_, class)) in &ext.pod.requests {
                let allocatable = node.allocatable.scalar.get(name);
                match class {
                    Some(class) if allocatable.copied().unwrap_or(0) == 0 => {
                        needed.insert(name.clone(), class.clone());
                    }
                    _ if allocatable.is_none() => {
                        return Status::unresolvable(ERR_REASON_CANNOT_FIT_RESOURCE);
                    }
                    _ => {}
                }
            }
            // Every extended resource comes from a device plugin here (NodeResourcesFit
            // judged those), and there is no claim of the pod's own.
            if s.available_on.is_empty() && needed.is_empty() {
                return Status::success();
            }
            if !needed.is_empty() && allocation_of(&claim).is_none() {
                node_extended = Some(extended::node_claim(&claim, pod, &needed));
            }
        }
        let mut unavailable: Vec<usize> = s
            .available_on
            .iter()
            .enumerate()
            .filter(|(_, sel)| {
                sel.as_ref()
                    .is_some_and(|sel| !sel.matches(&n.labels, &n.name))
            })
            .map(|(i, _)| i)
            .collect();
        if self.features.binding_conditions && s.has_conditions {
            // An allocated claim whose binding failed or timed out: PostFilter may
            // deallocate it so other devices get a chance.
            let claims = s.claims.lock();
            for (i, claim) in claims.iter().enumerate() {
                if unavailable.contains(&i) || allocation_of(claim).is_none() {
                    continue;
                }
                let stuck = match Self::claim_ready_for_binding(claim) {
                    Err(e) => {
                        tracing::debug!(pod = %pod.key(), claim = %kobj(claim), error = %e, "claim failed binding conditions");
                        true
                    }
                    Ok(ready) => !ready && self.claim_binding_timed_out(claim),
                };
                if stuck {
                    unavailable.push(i);
                }
            }
        }
        let mut allocations = None;
        // With the extended-resource claim of this node, an allocator for the pod's claims
        // and that one.
        let node_allocator = match (&node_extended, &s.extended) {
            (Some((claim, _)), Some(ext)) => {
                let claims = s.claims.lock();
                let mut pending: Vec<Arc<ResourceClaim>> =
                    s.to_allocate.iter().map(|i| claims[*i].clone()).collect();
                drop(claims);
                pending.push(Arc::new(claim.clone()));
                let objects = self.handle.objects();
                let class_of = |name: &str| objects.device_classes.get(None, name);
                Some(
                    Allocator::new(
                        self.features,
                        &pending,
                        ext.allocated.clone(),
                        &class_of,
                        ext.index.clone(),
                        &self.manager.cel,
                    )
                    .with_taint_rules(ext.taint_rules.clone()),
                )
            }
            _ => None,
        };
        if let Some(allocator) = node_allocator.as_ref().or(s.allocator.as_ref()) {
            let deadline = self.filter_timeout.map(|t| std::time::Instant::now() + t);
            let node_ref = NodeRef {
                name: &n.name,
                labels: &n.labels,
            };
            match allocator.allocate_until(node_ref, deadline) {
                // Possibly transient (v1.36): an error, so the pod backs off and retries
                // instead of waiting for a cluster event.
                Err(Stopped::Deadline) => {
                    return Status::error(format!("node {}: {TIMED_OUT}", n.name));
                }
                Err(Stopped::Failed(e)) => {
                    tracing::debug!(pod = %pod.key(), node = %n.name, error = %e, "allocation failed");
                    return Status::error(e);
                }
                Err(Stopped::OnNode(e)) => {
                    tracing::debug!(pod = %pod.key(), node = %n.name, reason = %e, "allocation failed on node");
                    return Status::unresolvable(e);
                }
                Ok(None) => return Status::unresolvable(ERR_REASON_CANNOT_ALLOCATE),
                Ok(Some(a)) if a.len() != allocator.num_claims() => {
                    return Status::unresolvable(ERR_REASON_CANNOT_ALLOCATE);
                }
                Ok(Some(a)) => allocations = Some(a),
            }
        }
        if !unavailable.is_empty() {
            s.unavailable.lock().extend(unavailable);
            return Status::unresolvable(ERR_REASON_NOT_AVAILABLE);
        }
        if let Some(a) = allocations {
            s.node_allocations.lock().insert(n.name.clone(), a);
        }
        if let (Some((claim, mappings)), Some(ext)) = (node_extended, &s.extended) {
            ext.nodes
                .lock()
                .insert(n.name.clone(), (Arc::new(claim), mappings));
        }
        if let (Some(ext), Some(record)) = (&s.extended, state.read::<DraExtendedDevices>()) {
            self.record_device_tallies(ext, record, n, &needed);
        }
        Status::success()
    }
}

impl DynamicResources {
    /// Tells NodeResourcesFit's Score, for a feasible node, how many devices of each
    /// providing class the node has and how many are taken (v1.37 scores DRA-backed
    /// extended resources by them). A class or selector that cannot be evaluated leaves
    /// the resource out (it then scores as the node's allocatable says).
    fn record_device_tallies(
        &self,
        ext: &ExtendedState,
        record: &DraExtendedDevices,
        node: &kubesched_framework::model::Node,
        needed: &std::collections::BTreeMap<String, String>,
    ) {
        let objects = self.handle.objects();
        let node_ref = NodeRef {
            name: &node.name,
            labels: &node.labels,
        };
        for (resource, class) in needed {
            let Some(class) = objects.device_classes.get(None, class) else {
                continue;
            };
            match allocator::class_device_tally(
                &ext.index,
                &ext.allocated,
                node_ref,
                self.features,
                &class,
                &self.manager.cel,
            ) {
                Ok((allocatable, allocated)) => record.record(
                    &node.name,
                    resource,
                    DeviceTally {
                        allocatable,
                        allocated,
                    },
                ),
                Err(e) => {
                    tracing::debug!(node = %node.name, resource = %resource, error = %e, "counting the devices of an extended resource");
                }
            }
        }
    }
}

/// Upstream's `FirstAvailableDeviceRequestMaxSize`: the most subrequests a request lists.
const FIRST_AVAILABLE_MAX: i64 = 8;

/// The prioritized-list score of one allocation (v1.36, GA with DRAPrioritizedList): each
/// `firstAvailable` request earns `8 - i` for the `i`-th subrequest it got, so a node that
/// can give a pod its first choices scores higher.
fn first_available_score(claim: &ResourceClaim, allocation: &AllocationResult) -> i64 {
    let allocated: BTreeSet<&str> = allocation
        .devices
        .as_ref()
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .map(|r| r.request.as_str())
        .filter(|r| r.contains('/'))
        .collect();
    let requests = claim
        .spec
        .as_ref()
        .and_then(|s| s.devices.as_ref())
        .and_then(|d| d.requests.as_ref());
    let mut score = 0;
    for request in requests.into_iter().flatten() {
        if request.exactly.is_some() {
            continue;
        }
        for (i, sub) in request.first_available.iter().flatten().enumerate() {
            if allocated.contains(format!("{}/{}", request.name, sub.name).as_str()) {
                score += FIRST_AVAILABLE_MAX - i as i64;
            }
        }
    }
    score
}

impl ScorePlugin for DynamicResources {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        if !self.features.prioritized_list {
            return Ok(0);
        }
        let Some(DraState(s)) = state.read::<DraState>() else {
            return Ok(0);
        };
        // Every pod reaches here for every node (upstream's plugin has no PreScore to skip
        // it): a pod without claims (one `available_on` entry per claim) takes no lock.
        if s.available_on.is_empty() {
            return Ok(0);
        }
        let claims = s.claims.lock();
        let Some(n) = node.node() else {
            return Err(Status::error("node not found"));
        };
        let node_allocations = s.node_allocations.lock();
        let Some(pending) = node_allocations.get(&n.name) else {
            return Ok(0);
        };
        // Claims allocated before count with their allocation; the others with what Filter
        // found on this node.
        let mut score = 0;
        let mut next_pending = pending.iter();
        for (i, claim) in claims.iter().enumerate() {
            let allocation = if s.to_allocate.contains(&i) {
                next_pending.next()
            } else {
                claim.status.as_ref().and_then(|st| st.allocation.as_ref())
            };
            if let Some(a) = allocation {
                score += first_available_score(claim, a);
            }
        }
        Ok(score)
    }

    fn has_normalize_score(&self) -> bool {
        true
    }

    fn normalize_score(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
        scores: &mut [i64],
    ) -> Status {
        default_normalize_score(MAX_NODE_SCORE, false, scores);
        Status::success()
    }
}

#[async_trait]
impl PostFilterPlugin for DynamicResources {
    async fn post_filter(
        &self,
        _framework: &Framework,
        state: &CycleState,
        pod: &Arc<PodInfo>,
        _statuses: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status) {
        let Some(DraState(s)) = state.read::<DraState>() else {
            return (None, Status::unschedulable(MSG_NO_NEW_CLAIMS));
        };
        let claims = s.claims.lock().clone();
        if claims.is_empty() && s.extended.is_none() {
            return (None, Status::unschedulable(MSG_NO_NEW_CLAIMS));
        }
        let unavailable: Vec<usize> = s.unavailable.lock().iter().copied().collect();
        for index in unavailable {
            let Some(claim) = claims.get(index) else {
                continue;
            };
            let reserved = claim
                .status
                .as_ref()
                .and_then(|st| st.reserved_for.as_deref())
                .unwrap_or_default();
            if reserved.is_empty() || (reserved.len() == 1 && reserved[0].uid == pod.uid) {
                let mut updated = (**claim).clone();
                if let Some(st) = updated.status.as_mut() {
                    st.reserved_for = None;
                    st.allocation = None;
                    st.devices = None;
                }
                self.manager.forget_binding_timeout(claim);
                tracing::debug!(pod = %pod.key(), claim = %kobj(claim), "deallocating ResourceClaim");
                if let Err(e) = self
                    .handle
                    .client()
                    .update_resource_claim_status(&updated)
                    .await
                {
                    return (None, Status::error(e));
                }
                return (None, Status::unschedulable(MSG_DEALLOCATED));
            }
        }
        if let Some(ext) = &s.extended {
            let claim = ext.claim.lock().clone();
            if !extended::is_in_memory(&claim) {
                // An earlier attempt's claim for the extended resources: delete it.
                tracing::debug!(pod = %pod.key(), claim = %kobj(&claim), "deleting extended resource claim");
                if let Err(e) = delete_claim(self.handle.client().as_ref(), &claim).await {
                    return (None, Status::error(e));
                }
                return (None, Status::unschedulable(MSG_DELETED));
            }
        }
        (None, Status::unschedulable(MSG_STILL_NOT_SCHEDULABLE))
    }
}

impl ReservePlugin for DynamicResources {
    fn reserve(&self, state: &mut CycleState, _pod: &PodInfo, node_name: &str) -> Status {
        let Some(DraState(s)) = state.read::<DraState>() else {
            return Status::error(format!(
                "reading PreFilter{NAME} from the cycle state: not found"
            ));
        };
        let extended_node = s
            .extended
            .as_ref()
            .and_then(|e| e.nodes.lock().get(node_name).cloned());
        if s.allocator.is_none() && extended_node.is_none() {
            // Everything is allocated already (or a device plugin provides the extended
            // resources); reserving happens in PreBind.
            return Status::success();
        }
        let Some(mut allocations) = s.node_allocations.lock().get(node_name).cloned() else {
            return Status::error("claim allocation not found for node");
        };
        let want = s.to_allocate.len() + usize::from(extended_node.is_some());
        if allocations.len() != want {
            return Status::error(format!(
                "internal error, have {} allocations, {} claims to allocate",
                allocations.len(),
                want
            ));
        }
        if let (Some((claim, mappings)), Some(ext)) = (extended_node, &s.extended)
            && let Some(allocation) = allocations.pop()
        {
            let mut claim = (*claim).clone();
            claim
                .metadata
                .finalizers
                .get_or_insert_with(Vec::new)
                .push(FINALIZER.to_string());
            claim
                .status
                .get_or_insert_with(ResourceClaimStatus::default)
                .allocation = Some(allocation);
            self.manager
                .signal_pending_allocation(Arc::new(claim.clone()));
            *ext.reserved.lock() = Some((claim, mappings));
        }
        let claims = s.claims.lock().clone();
        let mut chosen = s.allocations.lock();
        for (index, allocation) in s.to_allocate.iter().zip(allocations) {
            let mut claim = (*claims[*index]).clone();
            let finalizers = claim.metadata.finalizers.get_or_insert_with(Vec::new);
            if !finalizers.iter().any(|f| f == FINALIZER) {
                finalizers.push(FINALIZER.to_string());
            }
            claim
                .status
                .get_or_insert_with(ResourceClaimStatus::default)
                .allocation = Some(allocation.clone());
            self.manager.signal_pending_allocation(Arc::new(claim));
            chosen.insert(*index, allocation);
        }
        Status::success()
    }

    fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, _node_name: &str) {
        let Some(DraState(s)) = state.read::<DraState>() else {
            return;
        };
        let claims = s.claims.lock().clone();
        for claim in claims {
            if self.manager.remove_pending_allocation(uid(&claim)) {
                self.manager.restore(
                    claim.metadata.namespace.as_deref().unwrap_or(""),
                    claim.metadata.name.as_deref().unwrap_or(""),
                );
            }
            if allocation_of(&claim).is_some() && is_reserved_for(&claim, &pod.uid) {
                let client = self.handle.client().clone();
                let pod_uid = pod.uid.clone();
                let name = kobj(&claim);
                // Unreserve cannot wait; the write goes on in the background and a
                // failure only means the next attempt finds the reservation again.
                match tokio::runtime::Handle::try_current() {
                    Ok(rt) => {
                        rt.spawn(async move {
                            if let Err(e) = client
                                .remove_resource_claim_reservation(&claim, &pod_uid)
                                .await
                            {
                                tracing::error!(claim = %name, error = %e, "unreserve");
                            }
                        });
                    }
                    Err(_) => {
                        tracing::error!(claim = %name, "unreserve: no runtime to remove the reservation");
                    }
                }
            }
        }
        if let Some(ext) = &s.extended {
            let claim = ext.claim.lock().clone();
            *ext.reserved.lock() = None;
            if self.manager.remove_pending_allocation(&ext.initial_uid) {
                self.manager.restore(
                    claim.metadata.namespace.as_deref().unwrap_or(""),
                    claim.metadata.name.as_deref().unwrap_or(""),
                );
            }
            if !extended::is_in_memory(&claim) {
                // PreBind created it: it must not outlive the attempt.
                let client = self.handle.client().clone();
                let name = kobj(&claim);
                match tokio::runtime::Handle::try_current() {
                    Ok(rt) => {
                        rt.spawn(async move {
                            if let Err(e) = delete_claim(client.as_ref(), &claim).await {
                                tracing::error!(claim = %name, error = %e, "delete extended resource claim");
                            }
                        });
                    }
                    Err(_) => {
                        tracing::error!(claim = %name, "unreserve: no runtime to delete the extended resource claim");
                    }
                }
            }
        }
    }
}

/// Deletes a claim, its allocation finalizer removed first (upstream's `deleteClaim`):
/// the update is retried with a fresh copy on conflicts; a claim already gone is fine.
async fn delete_claim(
    client: &dyn kubesched_framework::ClusterClient,
    claim: &ResourceClaim,
) -> Result<(), String> {
    let namespace = claim.metadata.namespace.as_deref().unwrap_or("");
    let name = claim.metadata.name.as_deref().unwrap_or("");
    let mut current = claim.clone();
    for attempt in 0..CONFLICT_RETRIES {
        if attempt > 0 {
            current = match client.get_resource_claim(namespace, name).await {
                Ok(c) => c,
                Err(ClientError::NotFound(_)) => return Ok(()),
                Err(e) => return Err(format!("get resourceclaim {namespace}/{name}: {e}")),
            };
        }
        if let Some(f) = current.metadata.finalizers.as_mut() {
            f.retain(|f| f != FINALIZER);
        }
        match client.update_resource_claim(&current).await {
            Ok(_) => break,
            Err(ClientError::Conflict(e)) if attempt + 1 == CONFLICT_RETRIES => {
                return Err(format!("update resourceclaim {namespace}/{name}: {e}"));
            }
            Err(ClientError::Conflict(_)) => {}
            Err(ClientError::NotFound(_)) => return Ok(()),
            Err(e) => return Err(format!("update resourceclaim {namespace}/{name}: {e}")),
        }
    }
    match client.delete_resource_claim(namespace, name).await {
        Ok(()) | Err(ClientError::NotFound(_)) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

#[async_trait]
impl PreBindPlugin for DynamicResources {
    async fn pre_bind(&self, state: &CycleState, pod: &PodInfo, node_name: &str) -> Status {
        let Some(DraState(s)) = state.read::<DraState>() else {
            return Status::skip();
        };
        let claims = s.claims.lock().clone();
        if claims.is_empty() && s.extended.is_none() {
            return Status::skip();
        }
        for (index, claim) in claims.iter().enumerate() {
            if is_reserved_for(claim, &pod.uid) {
                continue;
            }
            let allocation = s.allocations.lock().get(&index).cloned();
            let result = self.bind_claim(claim, allocation.as_ref(), pod).await;
            if allocation.is_some() {
                if let Ok(updated) = &result {
                    self.manager.assume(Arc::new(updated.clone()));
                }
                self.manager.remove_pending_allocation(uid(claim));
            }
            match result {
                Ok(updated) => s.claims.lock()[index] = Arc::new(updated),
                Err(e) => return Status::error(e),
            }
        }
        if let Some(ext) = &s.extended
            && let Err(e) = self.bind_extended_claim(ext, pod).await
        {
            return Status::error(e);
        }
        if !self.features.binding_conditions
            || !has_binding_conditions(&Self::claims_in_pre_bind(s))
        {
            return Status::success();
        }
        self.handle.client().record_event(Event {
            regarding: ObjectRef::pod(pod),
            event_type: EventType::Normal,
            reason: "BindingConditionsPending".into(),
            action: "Scheduling".into(),
            note: format!("waiting for binding conditions for device on node {node_name}"),
            related: None,
        });
        let drivers = binding_condition_drivers(&Self::claims_in_pre_bind(s));
        let started = std::time::Instant::now();
        let result = self.wait_for_binding_conditions(s).await;
        let outcome = match &result {
            Ok(()) => Some("success"),
            Err(e) if e.ends_with("binding timeout") => Some("timeout"),
            Err(e) if e.contains(" binding failed: ") => Some("failure"),
            // Not the conditions' answer (a claim gone): not counted.
            Err(_) => None,
        };
        if let Some(outcome) = outcome {
            let waited = started.elapsed().as_secs_f64();
            for driver in &drivers {
                let labels = [pod.scheduler_name.as_str(), driver.as_str(), outcome];
                self.metrics.binding_allocations.inc(&labels);
                self.metrics.binding_wait.observe(&labels, waited);
            }
        }
        match result {
            Ok(()) => Status::success(),
            Err(e) => {
                tracing::debug!(pod = %pod.key(), node = node_name, error = %e, "binding conditions");
                Status::error(e)
            }
        }
    }

    /// Work to do whenever the pod has claims (even ones already reserved for it: PreBind
    /// looks at each), as upstream's PreBindPreFlight.
    fn pre_bind_pre_flight(&self, state: &CycleState, _pod: &PodInfo, _node_name: &str) -> Status {
        match state.read::<DraState>() {
            Some(DraState(s)) if !s.claims.lock().is_empty() || s.extended.is_some() => {
                Status::success()
            }
            _ => Status::skip(),
        }
    }

    /// Claims are written apart from everything other PreBind plugins touch: v1.36's
    /// plugin lets its PreBind run beside theirs (#135393).
    fn pre_bind_allows_parallel(&self, _state: &CycleState, _pod: &PodInfo, _node: &str) -> bool {
        true
    }
}

/// Upstream's `isSchedulableAfterClaimChange`.
fn after_claim_change(
    plugin: &DynamicResources,
    pod: &PodInfo,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let Some(modified) = new.and_then(|n| n.downcast::<ResourceClaim>()) else {
        // The backend did not hand the object over: err on the side of trying.
        return Ok(QueueingHint::Queue);
    };
    let original = old.and_then(|o| o.downcast::<ResourceClaim>());
    let mut uses_claim = false;
    if plugin
        .foreach_claim(&pod.pod, |c| {
            if uid(&c) == uid(modified) {
                uses_claim = true;
            }
        })
        .is_err()
    {
        return Ok(QueueingHint::Skip);
    }
    if let Some(o) = original
        && allocation_of(o).is_some()
        && allocation_of(modified).is_none()
    {
        // Deallocated: its devices are free for anybody.
        return Ok(QueueingHint::Queue);
    }
    if !uses_claim {
        return Ok(QueueingHint::Skip);
    }
    match original {
        None => Ok(QueueingHint::Queue),
        Some(o) if o.status == modified.status => Ok(QueueingHint::Skip),
        Some(_) => Ok(QueueingHint::Queue),
    }
}

/// Upstream's `isSchedulableAfterPodChange`: the pod's generated claims got named.
fn after_pod_change(
    plugin: &DynamicResources,
    pod: &PodInfo,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let modified = new
        .and_then(EventObject::as_pod)
        .ok_or("unexpected object in isSchedulableAfterPodChange")?;
    if modified.uid != pod.uid {
        return Ok(QueueingHint::Skip);
    }
    Ok(match plugin.foreach_claim(&modified.pod, |_| {}) {
        Ok(()) => QueueingHint::Queue,
        Err(_) => QueueingHint::Skip,
    })
}

impl EnqueueExtensions for DynamicResources {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        let for_claims = Self {
            handle: self.handle.clone(),
            manager: self.manager.clone(),
            features: self.features,
            filter_timeout: self.filter_timeout,
            binding_timeout: self.binding_timeout,
            taint_rules: self.taint_rules,
            extended_resource: self.extended_resource,
            metrics: self.metrics.clone(),
        };
        let for_pods = Self {
            handle: self.handle.clone(),
            manager: self.manager.clone(),
            features: self.features,
            filter_timeout: self.filter_timeout,
            binding_timeout: self.binding_timeout,
            taint_rules: self.taint_rules,
            extended_resource: self.extended_resource,
            metrics: self.metrics.clone(),
        };
        vec![
            // A node's labels may decide which slices or allocations reach it.
            // Its allocatable says whether a device plugin or DRA provides an extended
            // resource.
            ClusterEventWithHint::new(
                EventResource::Node,
                ActionType::ADD
                    .union(ActionType::UPDATE_NODE_LABEL)
                    .union(ActionType::UPDATE_NODE_ALLOCATABLE),
            ),
            ClusterEventWithHint::with_hint(
                EventResource::ResourceClaim,
                ActionType::ADD.union(ActionType::UPDATE),
                move |pod, old, new| after_claim_change(&for_claims, pod, old, new),
            ),
            ClusterEventWithHint::with_hint(
                EventResource::TargetPod,
                ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM,
                move |pod, _old, new| after_pod_change(&for_pods, pod, new),
            ),
            ClusterEventWithHint::new(
                EventResource::DeviceClass,
                ActionType::ADD.union(ActionType::UPDATE),
            ),
            ClusterEventWithHint::new(
                EventResource::ResourceSlice,
                ActionType::ADD.union(ActionType::UPDATE),
            ),
            // A rule's taints are the devices' taints: upstream's slice tracker shows a
            // rule's change as a change of the slices it taints.
            ClusterEventWithHint::new(
                EventResource::of::<DeviceTaintRule>(),
                ActionType::ADD
                    .union(ActionType::UPDATE)
                    .union(ActionType::DELETE),
            ),
        ]
    }
}

#[cfg(test)]
mod tests;
