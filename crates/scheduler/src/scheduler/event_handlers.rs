//! The event handlers (upstream's eventhandlers.go): cluster changes from the backend
//! go into the cache, the queue and the nominator, with the queueing hints deciding which
//! pending pods they move. They never schedule; the cycle in `scheduler.rs` does.

use super::*;

impl Scheduler {
    pub(super) fn responsible_for(&self, pod: &PodInfo) -> bool {
        self.profiles.contains_key(&pod.scheduler_name)
    }

    /// `scheduler_cache_size` (the queue reports `scheduler_pending_pods` itself,
    /// after every change).
    pub(super) fn refresh_cache_gauges(&self) {
        self.metrics.cache_sizes(self.cache.sizes());
    }

    /// Takes a pod compiled ahead of its delivery (the simulator compiles each pod it loads
    /// to check it): the change that delivers this very object uses it instead of
    /// compiling the object again.
    pub fn remember_compiled(&self, pod: Arc<PodInfo>) {
        self.compiled_pods.remember(pod);
    }

    /// Applies one cluster change to the cache, the queue and the nominator, as upstream's
    /// event handlers do. Malformed objects are logged and skipped; nothing else stops.
    pub fn handle_change(&self, change: ClusterChange) {
        let event = event_label(&change);
        let started = Instant::now();
        self.apply_change(change);
        self.metrics.event_handled(&event, started.elapsed());
        self.refresh_cache_gauges();
    }

    fn apply_change(&self, change: ClusterChange) {
        match change {
            ClusterChange::PodAdded(pod) => {
                self.on_pod_added(pod.clone());
                self.tell_pod_event(None, Some(&pod));
            }
            ClusterChange::PodUpdated(old, new) => {
                self.on_pod_updated(old.clone(), new.clone());
                self.tell_pod_event(Some(&old), Some(&new));
            }
            ClusterChange::PodDeleted(pod) => {
                self.on_pod_deleted(pod.clone());
                self.tell_pod_event(Some(&pod), None);
            }
            ClusterChange::NodeAdded(node) => {
                let Some(model) = compile_node(&node) else {
                    return;
                };
                self.cache.add_node(model.clone());
                self.queue.move_all_to_active_or_backoff(
                    ClusterEvent::new(EventResource::Node, ActionType::ADD),
                    None,
                    Some(&EventObject::Node(model)),
                );
            }
            ClusterChange::NodeUpdated(old, new) => {
                let Some(new_model) = compile_node(&new) else {
                    return;
                };
                let old_model = Node::new(old.clone()).ok().map(Arc::new);
                self.cache.update_node(new_model.clone());
                let actions = node_update_actions(&old, &new);
                if !actions.is_empty() {
                    self.queue.move_all_to_active_or_backoff(
                        ClusterEvent::new(EventResource::Node, actions),
                        old_model.map(EventObject::Node).as_ref(),
                        Some(&EventObject::Node(new_model)),
                    );
                }
            }
            ClusterChange::NodeDeleted(node) => {
                let name = node.metadata.name.clone().unwrap_or_default();
                if let Err(e) = self.cache.remove_node(&name) {
                    tracing::warn!(node = %name, error = %e, "removing node from the cache");
                }
                let model = Node::new(node).ok().map(Arc::new);
                self.queue.move_all_to_active_or_backoff(
                    ClusterEvent::new(EventResource::Node, ActionType::DELETE),
                    model.map(EventObject::Node).as_ref(),
                    None,
                );
            }
            ClusterChange::Other {
                resource,
                action,
                old,
                new,
            } => {
                self.queue.move_all_to_active_or_backoff(
                    ClusterEvent::new(resource, action),
                    old.as_ref(),
                    new.as_ref(),
                );
            }
        }
    }

    /// The plugins that observe pod changes (see `PodEventsPlugin`), every profile's.
    fn tell_pod_event(&self, old: Option<&PodObject>, new: Option<&PodObject>) {
        for fw in self.profiles.values() {
            // Only an observer makes a packed object decoded.
            if fw.has_pod_event_plugins() {
                fw.run_pod_event_plugins(old.map(|p| &**p), new.map(|p| &**p));
            }
        }
    }

    fn on_pod_added(&self, pod: PodObject) {
        if pod.is_terminal() {
            return;
        }
        let Some(info) = self.compiled_pods.compile(&pod) else {
            return;
        };
        let workloads = self.handle.features().enabled(Feature::GenericWorkload);
        let group_member =
            workloads && kubesched_framework::workload::pod_group_name(&info).is_some();
        let assigned = pod.is_assigned();
        if assigned {
            if let Err(e) = self.cache.add_pod(info.clone()) {
                tracing::warn!(pod = %info.key(), error = %e, "adding pod to the cache");
            }
            self.queue.assigned_pod_added(&info);
        } else if self.responsible_for(&info) {
            self.queue.add(info.clone());
        }
        if !assigned && workloads && self.responsible_for(&info) {
            // v1.37 (#135905): a new unscheduled pod is an UnscheduledPod/Add event for the
            // pods in unschedulablePods (it may complete a gang); only plugins registered
            // for UnscheduledPod (or the broad Pod) hear it, and never the pod itself.
            // Upstream sends it only with gang scheduling on (GangScheduling until v1.36,
            // GenericWorkload since): otherwise a new pod wakes nobody, as in v1.34.
            self.queue.move_all_to_active_or_backoff_except(
                ClusterEvent::new(EventResource::UnscheduledPod, ActionType::ADD),
                None,
                Some(&EventObject::Pod(info.clone())),
                &info.uid,
            );
        } else if group_member {
            // A new bound member may complete its group: the pods GangScheduling holds
            // hear of it (upstream's AssignedPod/Add).
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent::new(EventResource::AssignedPod, ActionType::ADD),
                None,
                Some(&EventObject::Pod(info)),
            );
        }
    }

    fn on_pod_updated(&self, old: PodObject, new: PodObject) {
        // A pod that finished disappears from the scheduler's view, as upstream's informer
        // (which lists non-terminal pods only) sees it.
        if new.is_terminal() {
            if !old.is_terminal() {
                self.on_pod_deleted(old);
            } else {
                self.compiled_pods.forget(&new);
            }
            return;
        }
        // The old object's compiled form, taken before the new object replaces it.
        let old_compiled = self.compiled_pods.previous(&old);
        let Some(new_info) = self
            .compiled_pods
            .compile_update(&new, old_compiled.as_ref())
        else {
            return;
        };
        match (old.is_assigned(), new.is_assigned()) {
            (true, true) => {
                let Some(old_info) = old_compiled else {
                    let _ = self.cache.add_pod(new_info);
                    return;
                };
                if let Err(e) = self.cache.update_pod(&old_info, new_info.clone()) {
                    tracing::warn!(pod = %new_info.key(), error = %e, "updating pod in the cache");
                }
                self.queue.assigned_pod_updated(&old_info, &new_info);
            }
            (false, true) => {
                // Bound: it leaves the queue and enters the cache (confirming an assumed pod).
                if let Some(old_info) = old_compiled {
                    self.queue.delete(&old_info);
                }
                if let Err(e) = self.cache.add_pod(new_info.clone()) {
                    tracing::warn!(pod = %new_info.key(), error = %e, "adding bound pod to the cache");
                }
                self.queue.assigned_pod_added(&new_info);
            }
            (_, false) => {
                if !self.responsible_for(&new_info) {
                    return;
                }
                // An assumed pod is being bound; its bind shows up as its next update.
                if self.cache.is_assumed_pod(&new_info.uid) {
                    return;
                }
                // Every update reaches the queue, status-only ones too (as upstream's
                // SchedulingQueue.Update): the queued pod must carry its latest object, so
                // that a preemptor's next attempt sees its nominatedNodeName and tries that
                // node first. Whether the update moves the pod is the plugins' hints' call.
                match old_compiled {
                    Some(o) => self.queue.update(&o, new_info),
                    None => self.queue.add(new_info),
                }
            }
        }
    }

    fn on_pod_deleted(&self, pod: PodObject) {
        let info = self.compiled_pods.previous(&pod);
        self.compiled_pods.forget(&pod);
        let Some(info) = info else {
            return;
        };
        if pod.is_assigned() {
            if let Err(e) = self.cache.remove_pod(&info) {
                tracing::debug!(pod = %info.key(), error = %e, "removing pod from the cache");
            }
            self.queue.move_all_to_active_or_backoff(
                ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
                Some(&EventObject::Pod(info.clone())),
                None,
            );
        } else {
            self.queue.delete(&info);
            // Deleted before we saw our own binding (the watch was away and the relist
            // found it gone, so the last state known is the unbound one): the cache still
            // holds it as assumed on its node. Upstream keeps such a pod until its assumed
            // state expires, which by default is never; we free the node now, and tell the
            // pods that wait for room.
            if let Some(assumed) = self.cache.get_pod(&info.uid) {
                match self.cache.remove_pod(&assumed) {
                    Ok(()) => {
                        tracing::debug!(pod = %info.key(), node = assumed.node_name.as_deref().unwrap_or(""), "deleted before its binding was seen; removed from the cache");
                        self.queue.move_all_to_active_or_backoff(
                            ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
                            Some(&EventObject::Pod(assumed.clone())),
                            None,
                        );
                    }
                    Err(e) => {
                        tracing::debug!(pod = %info.key(), error = %e, "removing an assumed pod from the cache");
                    }
                }
            }
        }
        // A pod waiting at Permit is rejected when it is deleted.
        self.handle
            .waiting_pods()
            .reject(&info.uid, "", "pod was deleted while waiting at Permit");
    }
}

/// Upstream's label of a cluster event in `scheduler_event_handling_duration_seconds`.
fn event_label(change: &ClusterChange) -> std::borrow::Cow<'static, str> {
    let pod = |assigned: bool, action: PodAction| -> &'static str {
        match (assigned, action) {
            (true, PodAction::Add) => "AssignedPodAdd",
            (true, PodAction::Update) => "AssignedPodUpdate",
            (true, PodAction::Delete) => "AssignedPodDelete",
            (false, PodAction::Add) => "UnscheduledPodAdd",
            (false, PodAction::Update) => "UnscheduledPodUpdate",
            (false, PodAction::Delete) => "UnscheduledPodDelete",
        }
    };
    let label = match change {
        ClusterChange::PodAdded(p) => pod(p.is_assigned(), PodAction::Add),
        // A pod that got bound leaves the unscheduled pods and joins the assigned ones.
        ClusterChange::PodUpdated(old, new) if !old.is_assigned() && new.is_assigned() => {
            pod(true, PodAction::Add)
        }
        ClusterChange::PodUpdated(_, new) => pod(new.is_assigned(), PodAction::Update),
        ClusterChange::PodDeleted(p) => pod(p.is_assigned(), PodAction::Delete),
        ClusterChange::NodeAdded(_) => "NodeAdd",
        ClusterChange::NodeUpdated(..) => "NodeUpdate",
        ClusterChange::NodeDeleted(_) => "NodeDelete",
        ClusterChange::Other {
            resource, action, ..
        } => return ClusterEvent::new(*resource, *action).label().into(),
    };
    label.into()
}

fn compile_node(node: &Arc<k8s_openapi::api::core::v1::Node>) -> Option<Arc<Node>> {
    match Node::new(node.clone()) {
        Ok(n) => Some(Arc::new(n)),
        Err(e) => {
            tracing::warn!(error = %e, "skipping malformed node");
            None
        }
    }
}
