//! The in-memory cluster: holds the objects, applies the scheduler's writes, and emits
//! the same changes a watcher would.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use k8s_openapi::api::core::v1 as api;
use kubesched_framework::model::PodInfo;
use kubesched_framework::{
    ClientError, ClusterClient, Event, ObjectStore, PodStatusUpdate, async_trait,
};
use kubesched_scheduler::{ClusterChange, PodLister};
use parking_lot::Mutex;

#[derive(Default)]
struct State {
    pods: BTreeMap<String, Arc<api::Pod>>,
    nodes: BTreeMap<String, Arc<api::Node>>,
    changes: VecDeque<ClusterChange>,
    events: Vec<Event>,
    binds: u64,
    failing_binds: u32,
}

/// An in-memory cluster. Pods are keyed by `namespace/name`.
#[derive(Default)]
pub struct SimCluster {
    state: Mutex<State>,
    objects: Arc<ObjectStore>,
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
    /// An empty cluster.
    pub fn new() -> Self {
        Self::default()
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

    /// Adds or replaces a pod.
    pub fn apply_pod(&self, mut pod: api::Pod) {
        if pod.metadata.namespace.is_none() {
            pod.metadata.namespace = Some("default".into());
        }
        let key = pod_key(&pod);
        let pod = Arc::new(pod);
        let mut s = self.state.lock();
        let change = match s.pods.insert(key, pod.clone()) {
            Some(old) => ClusterChange::PodUpdated(old, pod),
            None => ClusterChange::PodAdded(pod),
        };
        s.changes.push_back(change);
    }

    /// Deletes a pod by `namespace/name`.
    pub fn delete_pod_by_key(&self, key: &str) -> bool {
        let mut s = self.state.lock();
        match s.pods.remove(key) {
            Some(old) => {
                s.changes.push_back(ClusterChange::PodDeleted(old));
                true
            }
            None => false,
        }
    }

    /// Records a change of another kind (the object store was updated by the caller).
    pub fn push_change(&self, change: ClusterChange) {
        self.state.lock().changes.push_back(change);
    }

    /// Takes every change not yet delivered, oldest first.
    pub fn drain_changes(&self) -> Vec<ClusterChange> {
        self.state.lock().changes.drain(..).collect()
    }

    /// Whether changes wait to be delivered.
    pub fn has_changes(&self) -> bool {
        !self.state.lock().changes.is_empty()
    }

    /// Every pod, sorted by key.
    pub fn pods(&self) -> Vec<Arc<api::Pod>> {
        self.state.lock().pods.values().cloned().collect()
    }

    /// One pod.
    pub fn pod(&self, key: &str) -> Option<Arc<api::Pod>> {
        self.state.lock().pods.get(key).cloned()
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.state.lock().nodes.len()
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
    fn get(&self, namespace: &str, name: &str) -> Option<Arc<api::Pod>> {
        self.pod(&format!("{namespace}/{name}"))
    }
}

#[async_trait]
impl ClusterClient for SimCluster {
    async fn bind(&self, pod: &PodInfo, node_name: &str) -> Result<(), ClientError> {
        let key = pod.key();
        let mut s = self.state.lock();
        if s.failing_binds > 0 {
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
        let status = new.status.get_or_insert_with(Default::default);
        set_condition(status, "PodScheduled", "True", None, None);
        let new = Arc::new(new);
        s.pods.insert(key, new.clone());
        s.changes.push_back(ClusterChange::PodUpdated(old, new));
        s.binds += 1;
        Ok(())
    }

    async fn delete_pod(&self, pod: &PodInfo) -> Result<(), ClientError> {
        if self.delete_pod_by_key(&pod.key()) {
            Ok(())
        } else {
            Err(ClientError::NotFound(format!(
                "pods {:?} not found",
                pod.name
            )))
        }
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
        let new = Arc::new(new);
        s.pods.insert(key, new.clone());
        s.changes.push_back(ClusterChange::PodUpdated(old, new));
        Ok(())
    }

    fn record_event(&self, event: Event) {
        self.state.lock().events.push(event);
    }
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
