//! The in-memory cluster: holds the objects, applies the scheduler's writes, and emits
//! the same changes a watcher would. It also plays the kubelet where the scheduler can see
//! it: a bound pod starts at once (`status.startTime` from the virtual clock), and a
//! preemption victim terminates gracefully, holding its room for its
//! `terminationGracePeriodSeconds` of virtual time before it disappears.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kubesched_framework::clock::{Clock, FakeClock};
use kubesched_framework::events::{ActionType, EventObject, EventResource};
use kubesched_framework::model::{PodInfo, PodObject};
use kubesched_framework::{
    ClientError, ClusterClient, Event, ObjectKind, ObjectStore, ObjectWrite, PodStatusUpdate,
    async_trait,
};
use kubesched_scheduler::{ClusterChange, PodLister};
use parking_lot::Mutex;

use crate::claims;
use crate::volumes::{VolumeController, VolumeIndex};

#[derive(Default)]
struct State {
    pods: BTreeMap<String, PodObject>,
    nodes: BTreeMap<String, Arc<api::Node>>,
    changes: VecDeque<ClusterChange>,
    events: Vec<Event>,
    /// The last version of each pod the scheduler deleted (preemption victims).
    evicted: BTreeMap<String, PodObject>,
    binds: u64,
    failing_binds: u32,
    /// Pods terminating gracefully, by key: when each one is gone.
    terminating: BTreeMap<String, Instant>,
    /// The last resourceVersion given to an object the cluster wrote.
    resource_version: u64,
    /// What the PV controller has to look at before the next changes are delivered.
    volumes: VolumeIndex,
}

/// The grace period of a pod that sets none (the API server's default).
pub const DEFAULT_TERMINATION_GRACE_PERIOD: Duration = Duration::from_secs(30);
/// The condition type set on a preemption victim before it is deleted.
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";
/// The condition's reason when the scheduler preempts.
pub const PREEMPTION_BY_SCHEDULER: &str = "PreemptionByScheduler";

/// An in-memory cluster. Pods are keyed by `namespace/name`.
#[derive(Default)]
pub struct SimCluster {
    state: Mutex<State>,
    objects: Arc<ObjectStore>,
    /// The virtual clock: pods start and terminate on it.
    clock: FakeClock,
}

impl std::fmt::Debug for SimCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.state.lock();
        f.debug_struct("SimCluster")
            .field("pods", &s.pods.len())
            .field("nodes", &s.nodes.len())
            .finish()
    }
}

/// `namespace/name` of a pod.
pub fn pod_key(pod: &api::Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

impl SimCluster {
    /// An empty cluster on its own virtual clock.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty cluster on `clock` (the simulation's, shared with its scheduler).
    pub fn with_clock(clock: FakeClock) -> Self {
        Self {
            clock,
            ..Self::default()
        }
    }

    /// When the next terminating pod is gone, if any pod is terminating.
    pub fn next_termination(&self) -> Option<Instant> {
        self.state.lock().terminating.values().min().copied()
    }

    /// Removes the terminating pods whose grace period is over on the virtual clock (as
    /// the kubelet and the API server would); returns how many went.
    pub fn finish_terminations(&self) -> usize {
        let now = self.clock.now();
        let mut s = self.state.lock();
        let done: Vec<String> = s
            .terminating
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in &done {
            s.terminating.remove(key);
            if let Some(old) = s.pods.remove(key) {
                s.changes.push_back(ClusterChange::PodDeleted(old));
            }
        }
        done.len()
    }

    /// Keys of the pods terminating now, sorted.
    pub fn terminating_pods(&self) -> Vec<String> {
        self.state.lock().terminating.keys().cloned().collect()
    }

    /// The virtual wall-clock time as an API timestamp.
    fn now_time(&self) -> Time {
        // Through seconds and nanoseconds: jiff's `From<SystemTime>` needs its `std` feature,
        // which only workspace-wide feature unification turns on.
        let since_epoch = self
            .clock
            .wall_now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let seconds = i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX);
        let nanos = i32::try_from(since_epoch.subsec_nanos()).unwrap_or(0);
        Time(Timestamp::new(seconds, nanos).unwrap_or(Timestamp::UNIX_EPOCH))
    }

    /// The store of other objects (namespaces, services, ...).
    pub fn objects(&self) -> &Arc<ObjectStore> {
        &self.objects
    }

    /// Adds or replaces a node.
    pub fn apply_node(&self, node: api::Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let node = Arc::new(node);
        let mut s = self.state.lock();
        let change = match s.nodes.insert(name, node.clone()) {
            Some(old) => ClusterChange::NodeUpdated(old, node),
            None => ClusterChange::NodeAdded(node),
        };
        s.changes.push_back(change);
    }

    /// Deletes a node.
    pub fn delete_node(&self, name: &str) -> bool {
        let mut s = self.state.lock();
        match s.nodes.remove(name) {
            Some(old) => {
                s.changes.push_back(ClusterChange::NodeDeleted(old));
                true
            }
            None => false,
        }
    }

    /// Adds or replaces a pod. As the resource-claim controller would, the claims of its
    /// `resourceClaimTemplateName` entries are created first.
    pub fn apply_pod(&self, pod: impl Into<PodObject>) {
        let mut pod: PodObject = pod.into();
        let mut claim_changes = None;
        // The facts are read without decoding: a dump's packed pod with a namespace and
        // no claims is stored as it came.
        if !pod.has_namespace() || pod.has_resource_claims() {
            let packed = pod.packed_len() > 0;
            let mut object = pod.into_object();
            if object.metadata.namespace.is_none() {
                Arc::make_mut(&mut object).metadata.namespace = Some("default".into());
            }
            if object
                .spec
                .as_ref()
                .is_some_and(|s| s.resource_claims.is_some())
            {
                claim_changes = claims::generate_claims(Arc::make_mut(&mut object), &self.objects);
            }
            pod = if packed {
                PodObject::packed(&object)
            } else {
                PodObject::new(object)
            };
        }
        let key = pod.name_key().to_string();
        let mut s = self.state.lock();
        s.changes.extend(claim_changes.into_iter().flatten());
        let change = match s.pods.insert(key, pod.clone()) {
            Some(old) => ClusterChange::PodUpdated(old, pod),
            None => {
                if pod.has_volumes() {
                    self.create_ephemeral_claims(&mut s, &pod.read());
                }
                ClusterChange::PodAdded(pod)
            }
        };
        s.changes.push_back(change);
    }

    /// The ephemeral volume controller: a new pod's generic ephemeral volumes get their
    /// claims, `<pod>-<volume>`, owned by the pod, from the volume's claim template.
    fn create_ephemeral_claims(&self, s: &mut State, pod: &api::Pod) {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
        let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
        for v in volumes.into_iter().flatten() {
            let Some(template) = v
                .ephemeral
                .as_ref()
                .and_then(|e| e.volume_claim_template.as_ref())
            else {
                continue;
            };
            let name = format!("{pod_name}-{}", v.name);
            if self
                .objects
                .persistent_volume_claims
                .get(Some(&ns), &name)
                .is_some()
            {
                continue;
            }
            let meta = template.metadata.clone().unwrap_or_default();
            s.resource_version += 1;
            let claim = api::PersistentVolumeClaim {
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(ns.clone()),
                    uid: Some(format!("{pod_uid}-{}", v.name)),
                    labels: meta.labels,
                    annotations: meta.annotations,
                    resource_version: Some(s.resource_version.to_string()),
                    owner_references: Some(vec![
                        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                            api_version: "v1".into(),
                            kind: "Pod".into(),
                            name: pod_name.clone(),
                            uid: pod_uid.clone(),
                            controller: Some(true),
                            block_owner_deletion: Some(true),
                        },
                    ]),
                    ..Default::default()
                },
                spec: Some(template.spec.clone()),
                status: Some(api::PersistentVolumeClaimStatus {
                    phase: Some("Pending".into()),
                    ..Default::default()
                }),
            };
            let event = EventObject::object(Arc::new(claim.clone()));
            self.objects.persistent_volume_claims.upsert(claim);
            let change = ClusterChange::Other {
                resource: EventResource::PersistentVolumeClaim,
                action: ActionType::ADD,
                old: None,
                new: Some(event),
            };
            s.volumes.observe(&change);
            s.changes.push_back(change);
        }
    }

    /// Creates the template claims pods still wait for (after a template was added).
    pub fn run_claim_controller(&self) {
        let mut s = self.state.lock();
        let waiting: Vec<(String, PodObject)> = s
            .pods
            .iter()
            .filter(|(_, p)| {
                p.has_resource_claims()
                    && p.read()
                        .spec
                        .as_ref()
                        .and_then(|sp| sp.resource_claims.as_ref())
                        .is_some_and(|c| c.iter().any(|e| e.resource_claim_template_name.is_some()))
            })
            .map(|(k, p)| (k.clone(), p.clone()))
            .collect();
        for (key, old) in waiting {
            let mut new = api::Pod::clone(&old.read());
            if let Some(changes) = claims::generate_claims(&mut new, &self.objects) {
                let new = old.successor(new);
                s.pods.insert(key, new.clone());
                s.changes.extend(changes);
                s.changes.push_back(ClusterChange::PodUpdated(old, new));
            }
        }
    }

    /// Writes a claim back with a new resourceVersion and reports the change.
    fn store_claim(&self, old: Arc<ResourceClaim>, mut new: ResourceClaim) -> ResourceClaim {
        new.metadata.resource_version = Some(claims::next_version(&old));
        self.objects.resource_claims.upsert(new.clone());
        self.state.lock().changes.push_back(ClusterChange::Other {
            resource: EventResource::ResourceClaim,
            action: ActionType::UPDATE,
            old: Some(EventObject::Object(old)),
            new: Some(EventObject::Object(Arc::new(new.clone()))),
        });
        new
    }

    /// Takes a claim out of the store and reports its deletion.
    fn remove_claim(&self, claim: Arc<ResourceClaim>) {
        let ns = claim.metadata.namespace.as_deref();
        let name = claim.metadata.name.as_deref().unwrap_or("");
        self.objects.resource_claims.remove(ns, name);
        self.state.lock().changes.push_back(ClusterChange::Other {
            resource: EventResource::ResourceClaim,
            action: ActionType::DELETE,
            old: Some(EventObject::Object(claim)),
            new: None,
        });
    }

    /// The stored claim `claim` is a copy of, if that copy is current.
    fn current_claim(&self, claim: &ResourceClaim) -> Result<Arc<ResourceClaim>, ClientError> {
        let name = claim.metadata.name.as_deref().unwrap_or("");
        let Some(stored) = self
            .objects
            .resource_claims
            .get(claim.metadata.namespace.as_deref(), name)
        else {
            return Err(ClientError::NotFound(format!(
                "resourceclaims.resource.k8s.io {name:?} not found"
            )));
        };
        if claim.metadata.resource_version.is_some()
            && stored.metadata.resource_version != claim.metadata.resource_version
        {
            return Err(ClientError::Conflict(claims::conflict_message(name)));
        }
        Ok(stored)
    }

    /// Deletes a pod by `namespace/name`. As the resource-claim controller would, the
    /// claims generated for it go away and other claims drop its reservation (and their
    /// allocation when nobody is left).
    pub fn delete_pod_by_key(&self, key: &str) -> bool {
        let mut s = self.state.lock();
        s.terminating.remove(key);
        match s.pods.remove(key) {
            Some(old) => {
                s.changes.push_back(ClusterChange::PodDeleted(old.clone()));
                drop(s);
                self.release_claims_of(&old.read());
                true
            }
            None => false,
        }
    }

    fn release_claims_of(&self, pod: &api::Pod) {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or("");
        let uid = pod
            .metadata
            .uid
            .clone()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| format!("{ns}/{name}"));
        // The claim the scheduler made for the pod's DRA-backed extended resources is the
        // pod's (its controller owner): the garbage collector removes it with the pod.
        let extended = pod
            .status
            .as_ref()
            .and_then(|s| s.extended_resource_claim_status.as_ref())
            .map(|s| s.resource_claim_name.clone());
        if let Some(claim_name) = extended
            && let Some(claim) = self.objects.resource_claims.get(Some(ns), &claim_name)
            && claim
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.uid == uid)
        {
            self.remove_claim(claim);
        }
        let Some(entries) = pod.spec.as_ref().and_then(|s| s.resource_claims.as_ref()) else {
            return;
        };
        let statuses = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.clone())
            .unwrap_or_default();
        for entry in entries {
            let (claim_name, generated) = match &entry.resource_claim_name {
                Some(n) => (Some(n.clone()), false),
                None => (
                    statuses
                        .iter()
                        .find(|s| s.name == entry.name)
                        .and_then(|s| s.resource_claim_name.clone()),
                    true,
                ),
            };
            let Some(claim_name) = claim_name else {
                continue;
            };
            let Some(claim) = self.objects.resource_claims.get(Some(ns), &claim_name) else {
                continue;
            };
            let owned = claim
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.uid == uid);
            if generated && owned {
                self.remove_claim(claim);
                continue;
            }
            let mut new = (*claim).clone();
            if let Some(st) = new.status.as_mut() {
                if let Some(r) = st.reserved_for.as_mut() {
                    r.retain(|c| c.uid != uid);
                }
                if st.reserved_for.as_ref().is_none_or(Vec::is_empty) {
                    st.reserved_for = None;
                    st.allocation = None;
                }
            }
            if new != *claim {
                self.store_claim(claim, new);
            }
        }
    }

    /// Records a change of another kind (the object store was updated by the caller).
    pub fn push_change(&self, change: ClusterChange) {
        let mut s = self.state.lock();
        s.volumes.observe(&change);
        s.changes.push_back(change);
    }

    /// Takes every change not yet delivered, oldest first, after the PV controller caught
    /// up with storage objects added from outside.
    pub fn drain_changes(&self) -> Vec<ClusterChange> {
        let mut s = self.state.lock();
        if s.volumes.has_work() {
            self.sync_volumes(&mut s);
        }
        s.changes.drain(..).collect()
    }

    /// Whether changes wait to be delivered.
    pub fn has_changes(&self) -> bool {
        let s = self.state.lock();
        s.volumes.has_work() || !s.changes.is_empty()
    }

    /// Records a written volume object as a cluster change and lets the PV controller and the
    /// provisioners react to it before the writer looks again.
    fn record_volume_change(&self, s: &mut State, change: ClusterChange) {
        s.volumes.observe(&change);
        s.changes.push_back(change);
        self.sync_volumes(s);
    }

    /// Runs the PV controller (see [`crate::volumes`]) over the current objects.
    fn sync_volumes(&self, s: &mut State) {
        let State {
            nodes,
            changes,
            resource_version,
            volumes,
            ..
        } = s;
        VolumeController {
            objects: &self.objects,
            nodes,
            resource_version,
            changes,
            index: volumes,
        }
        .sync();
    }

    /// The PersistentVolume, if the cluster has it.
    pub fn persistent_volume(&self, name: &str) -> Option<Arc<api::PersistentVolume>> {
        self.objects.persistent_volumes.get(None, name)
    }

    /// The claim `namespace/name`, if the cluster has it.
    pub fn persistent_volume_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<Arc<api::PersistentVolumeClaim>> {
        self.objects
            .persistent_volume_claims
            .get(Some(namespace), name)
    }

    /// Every pod, sorted by key. A dump's pods come packed: read each with
    /// [`PodObject::read`] so they stay so.
    pub fn pods(&self) -> Vec<PodObject> {
        self.state.lock().pods.values().cloned().collect()
    }

    /// One pod.
    pub fn pod(&self, key: &str) -> Option<PodObject> {
        self.state.lock().pods.get(key).cloned()
    }

    /// One node.
    pub fn node(&self, name: &str) -> Option<Arc<api::Node>> {
        self.state.lock().nodes.get(name).cloned()
    }

    /// Every node, sorted by name.
    pub fn nodes(&self) -> Vec<Arc<api::Node>> {
        let mut nodes: Vec<_> = self.state.lock().nodes.values().cloned().collect();
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        nodes
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.state.lock().nodes.len()
    }

    /// The last version of a pod the scheduler deleted (a preemption victim), by key.
    pub fn evicted_pod(&self, key: &str) -> Option<PodObject> {
        self.state.lock().evicted.get(key).cloned()
    }

    /// Every recorded event, oldest first.
    pub fn events(&self) -> Vec<Event> {
        self.state.lock().events.clone()
    }

    /// Number of successful binds.
    pub fn binds(&self) -> u64 {
        self.state.lock().binds
    }

    /// Makes the next `n` binds fail with a server error (for failure tests).
    pub fn fail_next_binds(&self, n: u32) {
        self.state.lock().failing_binds = n;
    }
}

/// The cluster's pods are the scheduler's informer view: a pod that failed goes back to the
/// queue as the cluster has it now, as on a real cluster.
impl PodLister for SimCluster {
    fn get(&self, namespace: &str, name: &str) -> Option<PodObject> {
        self.pod(&format!("{namespace}/{name}"))
    }
}

impl SimCluster {
    /// The `binding` subresource: sets the pod's node as the API server would.
    fn apply_binding(
        &self,
        pod: &PodInfo,
        node_name: &str,
        inject_failures: bool,
    ) -> Result<(), ClientError> {
        let key = pod.key();
        let mut s = self.state.lock();
        if inject_failures && s.failing_binds > 0 {
            s.failing_binds -= 1;
            return Err(ClientError::Other(format!(
                "simulated server error binding {key}"
            )));
        }
        let Some(old) = s.pods.get(&key).cloned() else {
            return Err(ClientError::NotFound(format!(
                "pods {:?} not found",
                pod.name
            )));
        };
        if old.metadata.uid.as_deref().is_some_and(|u| u != pod.uid) && old.metadata.uid.is_some() {
            return Err(ClientError::Conflict(format!(
                "pod {key} was replaced (UID changed)"
            )));
        }
        if let Some(current) = old.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            return Err(ClientError::Conflict(format!(
                "pod {} is already assigned to node {current:?}",
                pod.name
            )));
        }
        if !s.nodes.contains_key(node_name) {
            return Err(ClientError::NotFound(format!(
                "nodes {node_name:?} not found"
            )));
        }
        let mut new = (*old).clone();
        new.spec.get_or_insert_with(Default::default).node_name = Some(node_name.to_string());
        let started = self.now_time();
        let status = new.status.get_or_insert_with(Default::default);
        set_condition(status, "PodScheduled", "True", None, None);
        // As kube-apiserver v1.35+ (ClearingNominatedNodeNameAfterBinding): binding clears
        // the nomination.
        status.nominated_node_name = None;
        // The kubelet starts it at once: the preemption tie-break reads this.
        status.start_time.get_or_insert(started);
        let new = old.successor(new);
        s.pods.insert(key, new.clone());
        s.changes.push_back(ClusterChange::PodUpdated(old, new));
        s.binds += 1;
        Ok(())
    }
}

#[async_trait]
impl ClusterClient for SimCluster {
    async fn bind(&self, pod: &PodInfo, node_name: &str) -> Result<(), ClientError> {
        self.apply_binding(pod, node_name, true)
    }

    /// The extender bound the pod against an API server this cluster is not: the
    /// binding it made is applied here, so a what-if sees the pod on its node.
    async fn bound_by_extender(&self, pod: &PodInfo, node_name: &str) -> Result<(), ClientError> {
        self.apply_binding(pod, node_name, false)
    }

    /// The scheduler deletes only preemption victims: as on a real cluster the victim is
    /// marked `DisruptionTarget`, and a pod running on a node terminates gracefully (it
    /// keeps its room until its grace period has passed on the virtual clock); a pod not on
    /// a node, or with a grace period of 0, goes at once.
    async fn delete_pod(&self, pod: &PodInfo) -> Result<(), ClientError> {
        let key = pod.key();
        let now = self.now_time();
        let mut s = self.state.lock();
        let Some(old) = s.pods.get(&key).cloned() else {
            return Err(ClientError::NotFound(format!(
                "pods {:?} not found",
                pod.name
            )));
        };
        if old.metadata.uid.as_deref().is_some_and(|u| u != pod.uid) {
            return Err(ClientError::Conflict(format!(
                "pod {key} was replaced (UID changed)"
            )));
        }
        // Remembered for the report: where it ran and what it was nominated to.
        s.evicted.insert(key.clone(), old.clone());
        if s.terminating.contains_key(&key) {
            return Ok(());
        }
        let spec = old.spec.as_ref();
        let on_node = spec
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        let grace = spec
            .and_then(|s| s.termination_grace_period_seconds)
            .map_or(DEFAULT_TERMINATION_GRACE_PERIOD, |g| {
                Duration::from_secs(u64::try_from(g).unwrap_or(0))
            });
        if !on_node || grace.is_zero() {
            s.pods.remove(&key);
            s.changes.push_back(ClusterChange::PodDeleted(old));
            return Ok(());
        }
        let mut new = (*old).clone();
        let status = new.status.get_or_insert_with(Default::default);
        let conditions = status.conditions.get_or_insert_with(Default::default);
        conditions.retain(|c| c.type_ != DISRUPTION_TARGET);
        conditions.push(api::PodCondition {
            type_: DISRUPTION_TARGET.into(),
            status: "True".into(),
            reason: Some(PREEMPTION_BY_SCHEDULER.into()),
            message: Some(format!(
                "{}: preempting to accommodate a higher priority pod",
                spec.and_then(|s| s.scheduler_name.as_deref())
                    .unwrap_or(kubesched_framework::model::DEFAULT_SCHEDULER_NAME)
            )),
            last_transition_time: Some(now.clone()),
            ..Default::default()
        });
        let grace_seconds = i64::try_from(grace.as_secs()).unwrap_or(i64::MAX);
        new.metadata.deletion_grace_period_seconds = Some(grace_seconds);
        // As the API server does: the time by which the pod should be gone.
        new.metadata.deletion_timestamp = Some(Time(
            now.0
                .checked_add(jiff_seconds(grace_seconds))
                .unwrap_or(now.0),
        ));
        let new = old.successor(new);
        s.pods.insert(key.clone(), new.clone());
        s.terminating.insert(key, self.clock.now() + grace);
        s.changes.push_back(ClusterChange::PodUpdated(old, new));
        Ok(())
    }

    async fn update_pod_status(
        &self,
        pod: &PodInfo,
        update: &PodStatusUpdate,
    ) -> Result<(), ClientError> {
        let key = pod.key();
        let mut s = self.state.lock();
        let Some(old) = s.pods.get(&key).cloned() else {
            return Err(ClientError::NotFound(format!(
                "pods {:?} not found",
                pod.name
            )));
        };
        let mut new = (*old).clone();
        let status = new.status.get_or_insert_with(Default::default);
        if let Some(c) = &update.condition {
            set_condition(
                status,
                "PodScheduled",
                &c.status,
                Some(&c.reason),
                Some(&c.message),
            );
        }
        if let Some(n) = &update.nominated_node_name {
            status.nominated_node_name = n.clone();
        }
        if new == *old {
            return Ok(());
        }
        let new = old.successor(new);
        s.pods.insert(key, new.clone());
        s.changes.push_back(ClusterChange::PodUpdated(old, new));
        Ok(())
    }

    fn record_event(&self, event: Event) {
        self.state.lock().events.push(event);
    }

    async fn write_object(
        &self,
        kind: &ObjectKind,
        write: &ObjectWrite,
    ) -> Result<serde_json::Value, ClientError> {
        let (old, new, stored) = write.apply(&self.objects, kind)?;
        // As a watcher would see it: plugins that registered the kind's events hear of it.
        self.state.lock().changes.push_back(ClusterChange::Other {
            resource: kind.event_resource(),
            action: if old.is_some() {
                ActionType::UPDATE
            } else {
                ActionType::ADD
            },
            old,
            new: Some(new),
        });
        Ok(stored)
    }

    async fn update_persistent_volume(
        &self,
        pv: &api::PersistentVolume,
    ) -> Result<api::PersistentVolume, ClientError> {
        let name = pv.metadata.name.clone().unwrap_or_default();
        let mut s = self.state.lock();
        let old = self.objects.persistent_volumes.get(None, &name);
        let new = replaced(
            &mut s,
            "persistentvolumes",
            &name,
            old.as_deref(),
            pv,
            |o| o.status.clone(),
            |n, st| n.status = st,
        )?;
        self.objects.persistent_volumes.upsert(new.clone());
        let change = volume_update(EventResource::PersistentVolume, old, &new);
        // The PV controller answers at once: the binding completes before PreBind looks.
        self.record_volume_change(&mut s, change);
        Ok(new)
    }

    async fn update_persistent_volume_claim(
        &self,
        pvc: &api::PersistentVolumeClaim,
    ) -> Result<api::PersistentVolumeClaim, ClientError> {
        let ns = pvc.metadata.namespace.clone().unwrap_or_default();
        let name = pvc.metadata.name.clone().unwrap_or_default();
        let mut s = self.state.lock();
        let old = self.objects.persistent_volume_claims.get(Some(&ns), &name);
        let new = replaced(
            &mut s,
            "persistentvolumeclaims",
            &name,
            old.as_deref(),
            pvc,
            |o| o.status.clone(),
            |n, st| n.status = st,
        )?;
        self.objects.persistent_volume_claims.upsert(new.clone());
        let change = volume_update(EventResource::PersistentVolumeClaim, old, &new);
        // The provisioner and the PV controller answer at once.
        self.record_volume_change(&mut s, change);
        Ok(new)
    }

    async fn get_resource_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<ResourceClaim, ClientError> {
        self.objects
            .resource_claims
            .get(Some(namespace), name)
            .map(|c| (*c).clone())
            .ok_or_else(|| {
                ClientError::NotFound(format!("resourceclaims.resource.k8s.io {name:?} not found"))
            })
    }

    async fn update_resource_claim(
        &self,
        claim: &ResourceClaim,
    ) -> Result<ResourceClaim, ClientError> {
        let stored = self.current_claim(claim)?;
        let mut new = claim.clone();
        // The main resource does not change the status.
        new.status = stored.status.clone();
        Ok(self.store_claim(stored, new))
    }

    async fn update_resource_claim_status(
        &self,
        claim: &ResourceClaim,
    ) -> Result<ResourceClaim, ClientError> {
        let stored = self.current_claim(claim)?;
        let mut new = (*stored).clone();
        new.status = claim.status.clone();
        Ok(self.store_claim(stored, new))
    }

    async fn create_resource_claim(
        &self,
        claim: &ResourceClaim,
    ) -> Result<ResourceClaim, ClientError> {
        let mut new = claim.clone();
        let ns = new
            .metadata
            .namespace
            .get_or_insert_with(|| "default".into())
            .clone();
        let name = match new.metadata.name.clone().filter(|n| !n.is_empty()) {
            Some(n) => n,
            None => {
                let Some(prefix) = new.metadata.generate_name.clone().filter(|p| !p.is_empty())
                else {
                    return Err(ClientError::Other(
                        "ResourceClaim is invalid: metadata.name: Required value: name or generateName is required".into(),
                    ));
                };
                let mut s = self.state.lock();
                s.resource_version += 1;
                generated_name(&prefix, s.resource_version)
            }
        };
        if self.objects.resource_claims.get(Some(&ns), &name).is_some() {
            return Err(ClientError::Conflict(format!(
                "resourceclaims.resource.k8s.io {name:?} already exists"
            )));
        }
        new.metadata.name = Some(name);
        new.metadata.uid = None;
        new.metadata.resource_version = None;
        new.metadata.creation_timestamp = Some(Time(
            Timestamp::from_second(
                i64::try_from(
                    self.clock
                        .wall_now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs()),
                )
                .unwrap_or(0),
            )
            .unwrap_or(Timestamp::UNIX_EPOCH),
        ));
        claims::fill_identity(&mut new);
        self.objects.resource_claims.upsert(new.clone());
        self.state.lock().changes.push_back(ClusterChange::Other {
            resource: EventResource::ResourceClaim,
            action: ActionType::ADD,
            old: None,
            new: Some(EventObject::Object(Arc::new(new.clone()))),
        });
        Ok(new)
    }

    async fn delete_resource_claim(&self, namespace: &str, name: &str) -> Result<(), ClientError> {
        let Some(claim) = self.objects.resource_claims.get(Some(namespace), name) else {
            return Err(ClientError::NotFound(format!(
                "resourceclaims.resource.k8s.io {name:?} not found"
            )));
        };
        if claim
            .metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| !f.is_empty())
        {
            // As the API server: a claim with finalizers is only marked for deletion.
            if claim.metadata.deletion_timestamp.is_none() {
                let mut new = (*claim).clone();
                new.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
                self.store_claim(claim, new);
            }
            return Ok(());
        }
        self.remove_claim(claim);
        Ok(())
    }

    async fn patch_pod_extended_resource_claim_status(
        &self,
        pod: &PodInfo,
        status: &api::PodExtendedResourceClaimStatus,
    ) -> Result<(), ClientError> {
        let key = pod.key();
        let mut s = self.state.lock();
        let Some(old) = s.pods.get(&key).cloned() else {
            return Err(ClientError::NotFound(format!(
                "pods {:?} not found",
                pod.name
            )));
        };
        let mut new = (*old).clone();
        new.status
            .get_or_insert_with(Default::default)
            .extended_resource_claim_status = Some(status.clone());
        if new == *old {
            return Ok(());
        }
        let new = old.successor(new);
        s.pods.insert(key, new.clone());
        s.changes.push_back(ClusterChange::PodUpdated(old, new));
        Ok(())
    }

    async fn remove_resource_claim_reservation(
        &self,
        claim: &ResourceClaim,
        pod_uid: &str,
    ) -> Result<(), ClientError> {
        let mut unversioned = claim.clone();
        unversioned.metadata.resource_version = None;
        let stored = self.current_claim(&unversioned)?;
        let mut new = (*stored).clone();
        if let Some(r) = new.status.as_mut().and_then(|s| s.reserved_for.as_mut()) {
            r.retain(|c| c.uid != pod_uid);
        }
        if new != *stored {
            self.store_claim(stored, new);
        }
        Ok(())
    }
}

/// A name the API server would make from `prefix` (`metadata.generateName`): five
/// characters from its alphabet, here derived from a counter so runs are reproducible.
fn generated_name(prefix: &str, mut n: u64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    // Spread consecutive counters over the alphabet (a multiplicative hash).
    n = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut name = prefix.to_string();
    for _ in 0..5 {
        name.push(ALPHABET[(n % ALPHABET.len() as u64) as usize] as char);
        n /= ALPHABET.len() as u64;
    }
    name
}

/// The update event of a PersistentVolume or PersistentVolumeClaim the simulator wrote.
fn volume_update<K: Clone + Send + Sync + 'static>(
    resource: EventResource,
    old: Option<Arc<K>>,
    new: &K,
) -> ClusterChange {
    ClusterChange::Other {
        resource,
        action: ActionType::UPDATE,
        old: old.map(EventObject::object),
        new: Some(EventObject::object(Arc::new(new.clone()))),
    }
}

/// An update (PUT) of an object as the API server does it: NotFound when it does not exist,
/// Conflict when the resourceVersion given is not the current one; the status stays (it has
/// its own subresource) and the object gets a new resourceVersion.
#[allow(clippy::too_many_arguments)]
fn replaced<
    K: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta> + Clone,
    S,
>(
    s: &mut State,
    resource: &str,
    name: &str,
    old: Option<&K>,
    new: &K,
    status_of: impl Fn(&K) -> S,
    set_status: impl Fn(&mut K, S),
) -> Result<K, ClientError> {
    let Some(old) = old else {
        return Err(ClientError::NotFound(format!(
            "{resource} {name:?} not found"
        )));
    };
    let current = old.metadata().resource_version.clone();
    if let Some(given) = new.metadata().resource_version.as_deref()
        && !given.is_empty()
        && current.as_deref() != Some(given)
    {
        return Err(ClientError::Conflict(format!(
            "Operation cannot be fulfilled on {resource} {name:?}: the object has been modified; please apply your changes to the latest version and try again"
        )));
    }
    let mut out = new.clone();
    set_status(&mut out, status_of(old));
    let current = current.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    s.resource_version = s.resource_version.max(current) + 1;
    out.metadata_mut().resource_version = Some(s.resource_version.to_string());
    out.metadata_mut().uid = old.metadata().uid.clone();
    Ok(out)
}

fn jiff_seconds(seconds: i64) -> k8s_openapi::jiff::SignedDuration {
    k8s_openapi::jiff::SignedDuration::from_secs(seconds)
}

fn set_condition(
    status: &mut api::PodStatus,
    type_: &str,
    value: &str,
    reason: Option<&str>,
    message: Option<&str>,
) {
    let conditions = status.conditions.get_or_insert_with(Default::default);
    let cond = api::PodCondition {
        type_: type_.to_string(),
        status: value.to_string(),
        reason: reason.map(str::to_string),
        message: message.map(str::to_string),
        ..Default::default()
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            c.status = cond.status;
            c.reason = cond.reason;
            c.message = cond.message;
        }
        None => conditions.push(cond),
    }
}
