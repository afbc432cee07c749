//! GangScheduling: upstream v1.37's workload-aware gang plugin, for pods that name a
//! `scheduling.k8s.io/v1beta1` PodGroup in `spec.schedulingGroup.podGroupName`
//! (GenericWorkload; in the default profile only when the gate is on).
//!
//! PreEnqueue holds a pod until its PodGroup exists and, for a gang policy, until at least
//! `minCount` pods of the group are known; PlacementFeasible tells the scheduler's
//! pod-group cycle whether `minCount` is met, can still be met, or cannot be met any more
//! (which ends the cycle with nothing of the group held). Permit, which v1.37 keeps beside
//! PlacementFeasible as a last barrier before binding (upstream removed it in v1.38,
//! #141182), holds a gang's members until `minCount` of them are scheduled and then lets
//! them all go to binding together. It reads PodGroups and pods and writes nothing: the
//! cycle that places a group whole, and the PodGroup's `PodGroupInitiallyScheduled`
//! condition, belong to the scheduler.

use std::sync::Arc;
use std::time::Duration;

use kubesched_framework::events::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
};
use kubesched_framework::model::PodInfo;
use kubesched_framework::workload::{
    PlacementCycleState, PlacementFeasiblePlugin, PlacementProgress, PodGroup, PodGroupInfo,
    PodGroupScheduledCount, pod_group_name, scheduling_policy,
};
use kubesched_framework::{
    Code, CycleState, EnqueueExtensions, Handle, KindWrite, PermitPlugin, PluginError,
    PreEnqueuePlugin, Status, Store,
};

/// The plugin's registered name.
pub const NAME: &str = "GangScheduling";

/// PreEnqueue's reason while a gang has fewer than `minCount` pods.
pub const WAITING_FOR_MIN_COUNT: &str =
    "waiting for minCount pods from a gang to appear in scheduling queue";

/// PreEnqueue's reason while the pod's PodGroup does not exist (upstream's words, with
/// its doubled "s").
pub fn waiting_for_pod_group(group: &str) -> String {
    format!("waiting for pods's pod group {group:?} to appear in scheduling queue")
}

/// Permit's reason while fewer than `minCount` members of a gang are scheduled.
pub const WAITING_FOR_MIN_COUNT_SCHEDULED: &str =
    "waiting for minCount pods from a gang to be scheduled";

/// How long a gang member waits at Permit for the rest of its gang (upstream's five
/// minutes); the member is rejected when it runs out.
pub const PERMIT_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// Permit's error when the pod's PodGroup is gone (upstream wraps its lister's NotFound).
pub fn pod_group_lookup_failed(namespace: &str, group: &str) -> String {
    format!(
        "failed to get podGroup {namespace}/{group}: podgroup.scheduling.k8s.io {group:?} not found"
    )
}

/// PlacementFeasible's reason when the group cannot reach `minCount` any more.
pub fn cannot_be_satisfied(min_count: usize, scheduled: usize, remaining: usize) -> String {
    format!(
        "minCount ({min_count}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"
    )
}

/// PlacementFeasible's reason while the group may still reach `minCount`.
pub fn not_yet_satisfied(min_count: usize, scheduled: usize, remaining: usize) -> String {
    format!(
        "minCount ({min_count}) is not yet satisfied: {scheduled} scheduled, {remaining} remaining"
    )
}

/// The GangScheduling plugin.
pub struct GangScheduling {
    handle: Handle,
    groups: Arc<Store<PodGroup>>,
}

impl std::fmt::Debug for GangScheduling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GangScheduling")
            .field("pod_groups", &self.groups.len())
            .finish()
    }
}

impl GangScheduling {
    /// Builds the plugin over the handle's PodGroups and live pods.
    pub fn new(handle: &Handle) -> Result<Self, PluginError> {
        Ok(Self {
            handle: handle.clone(),
            groups: handle.objects().of::<PodGroup>(),
        })
    }
}

kubesched_framework::register_plugin! {
    name: NAME,
    plugin: GangScheduling,
    kinds: [PodGroup],
    // The scheduler writes the PodGroupInitiallyScheduled condition of the groups this
    // plugin admits.
    writes: [KindWrite::status::<PodGroup>()],
    factory: GangScheduling::new,
}

impl PreEnqueuePlugin for GangScheduling {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        let Some(group) = pod_group_name(pod) else {
            return Status::success();
        };
        let Some(pg) = self.groups.get(Some(&pod.namespace), group) else {
            return Status::unresolvable(waiting_for_pod_group(group));
        };
        let policy = match scheduling_policy(&pg) {
            Ok(p) => p,
            Err(e) => return Status::unresolvable(e.to_string()),
        };
        if !policy.is_gang() {
            return Status::success();
        }
        let known = self
            .handle
            .live_pods()
            .in_pod_group(&pod.namespace, group)
            .iter()
            .filter(|p| !p.terminating)
            .count()
            // The pod itself may not be in the live view yet (PreEnqueue runs as it arrives).
            .max(1);
        if known < policy.min_count() {
            return Status::unresolvable(WAITING_FOR_MIN_COUNT);
        }
        Status::success()
    }
}

impl PlacementFeasiblePlugin for GangScheduling {
    fn placement_feasible(
        &self,
        _state: &mut PlacementCycleState,
        group: &PodGroupInfo,
        progress: PlacementProgress,
    ) -> Status {
        let min = group.policy.min_count();
        let PlacementProgress {
            remaining,
            scheduled,
        } = progress;
        if remaining + scheduled < min {
            Status::unschedulable(cannot_be_satisfied(min, scheduled, remaining))
        } else if scheduled < min {
            Status::new(Code::Wait, [not_yet_satisfied(min, scheduled, remaining)])
        } else {
            Status::success()
        }
    }
}

impl GangScheduling {
    /// The members of the pod's group scheduled now, the pod included, when the pod did
    /// not come through a pod-group cycle (which counts them for it): those bound, and
    /// those held at Permit.
    fn scheduled_outside_group_cycle(&self, pod: &PodInfo, group: &str) -> usize {
        let waiting = self.handle.waiting_pods();
        let others = self
            .handle
            .live_pods()
            .in_pod_group(&pod.namespace, group)
            .iter()
            .filter(|p| p.uid != pod.uid && !p.terminating)
            .filter(|p| p.node_name.is_some() || waiting.get(&p.uid).is_some())
            .count();
        others + 1
    }
}

impl PermitPlugin for GangScheduling {
    fn permit(&self, state: &CycleState, pod: &PodInfo, _node_name: &str) -> (Status, Duration) {
        let Some(group) = pod_group_name(pod) else {
            return (Status::success(), Duration::ZERO);
        };
        let Some(pg) = self.groups.get(Some(&pod.namespace), group) else {
            return (
                Status::error(pod_group_lookup_failed(&pod.namespace, group)),
                Duration::ZERO,
            );
        };
        let Ok(policy) = scheduling_policy(&pg) else {
            // Only a gang policy holds pods here; PreEnqueue reports a malformed one.
            return (Status::success(), Duration::ZERO);
        };
        if !policy.is_gang() {
            return (Status::success(), Duration::ZERO);
        }
        let scheduled = match state.read::<PodGroupScheduledCount>() {
            Some(PodGroupScheduledCount(n)) => *n,
            None => self.scheduled_outside_group_cycle(pod, group),
        };
        let members = || {
            self.handle
                .live_pods()
                .in_pod_group(&pod.namespace, group)
                .into_iter()
                .filter(|p| p.uid != pod.uid)
        };
        if scheduled < policy.min_count() {
            // The members not scheduled yet may have been waiting for this one.
            let waiting = self.handle.waiting_pods();
            let unscheduled: Vec<String> = members()
                .filter(|p| p.node_name.is_none() && waiting.get(&p.uid).is_none())
                .map(|p| p.uid.clone())
                .collect();
            if !unscheduled.is_empty() {
                self.handle.activate(&unscheduled);
            }
            tracing::debug!(pod = %pod.key(), pod_group = group, scheduled, "quorum is not met for a gang; waiting for another pod to allow");
            return (
                Status::new(Code::Wait, [WAITING_FOR_MIN_COUNT_SCHEDULED]),
                PERMIT_TIMEOUT,
            );
        }
        // Quorum: this pod goes on, and so do the members waiting for it.
        let mut allowed = 0;
        for member in members() {
            if let Some(waiting) = self.handle.waiting_pods().get(&member.uid) {
                waiting.allow(NAME);
                allowed += 1;
            }
        }
        tracing::debug!(pod = %pod.key(), pod_group = group, allowed, "quorum is met for a gang; allowing the members waiting at permit");
        (Status::success(), Duration::ZERO)
    }
}

/// Whether `pod` and `group` (namespace, name) are the same group.
fn same_group(pod: &PodInfo, namespace: Option<&str>, group: Option<&str>) -> bool {
    namespace == Some(pod.namespace.as_str()) && group.is_some() && group == pod_group_name(pod)
}

/// A new pod (pending or bound) of the same group may complete the gang.
fn after_pod_added(
    pod: &PodInfo,
    _old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let added = new
        .and_then(EventObject::as_pod)
        .ok_or("expected a pod as the new object")?;
    Ok(
        if same_group(pod, Some(&added.namespace), pod_group_name(added)) {
            QueueingHint::Queue
        } else {
            QueueingHint::Skip
        },
    )
}

/// The pod's PodGroup appeared.
fn after_pod_group_added(
    pod: &PodInfo,
    _old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let pg = new
        .and_then(|o| o.downcast::<PodGroup>())
        .ok_or("expected a PodGroup as the new object")?;
    Ok(
        if same_group(
            pod,
            pg.metadata.namespace.as_deref(),
            pg.metadata.name.as_deref(),
        ) {
            QueueingHint::Queue
        } else {
            QueueingHint::Skip
        },
    )
}

/// The pod's PodGroup lowered its gang `minCount`, or an update left a policy that is not
/// a gang on either side (v1.37 queues the pod then, as an update it does not expect; v1.38
/// skips it); a gang's `minCount` that stays or grows does not help.
fn after_pod_group_updated(
    pod: &PodInfo,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let new = new
        .and_then(|o| o.downcast::<PodGroup>())
        .ok_or("expected a PodGroup as the new object")?;
    let old = old
        .and_then(|o| o.downcast::<PodGroup>())
        .ok_or("expected a PodGroup as the old object")?;
    if !same_group(
        pod,
        new.metadata.namespace.as_deref(),
        new.metadata.name.as_deref(),
    ) {
        return Ok(QueueingHint::Skip);
    }
    let (Some(was), Some(now)) = (
        &old.spec.scheduling_policy.gang,
        &new.spec.scheduling_policy.gang,
    ) else {
        tracing::debug!(pod = %pod.key(), "pod group was updated but it's not a gang policy, this is unexpected, enqueuing pod");
        return Ok(QueueingHint::Queue);
    };
    Ok(if now.min_count < was.min_count {
        QueueingHint::Queue
    } else {
        QueueingHint::Skip
    })
}

impl EnqueueExtensions for GangScheduling {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        vec![
            // `schedulingGroup` is immutable: no pod update can make a member.
            ClusterEventWithHint::with_hint(
                EventResource::UnscheduledPod,
                ActionType::ADD,
                after_pod_added,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::AssignedPod,
                ActionType::ADD,
                after_pod_added,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::of::<PodGroup>(),
                ActionType::ADD,
                after_pod_group_added,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::of::<PodGroup>(),
                ActionType::UPDATE,
                after_pod_group_updated,
            ),
        ]
    }
}

#[cfg(test)]
mod tests;
