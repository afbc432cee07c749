//! Cluster events and queueing hints: how the queue learns which changes can make a
//! rejected pod schedulable.

use std::fmt;
use std::sync::Arc;

use kubesched_model::{Node, PodInfo};

/// The kind of object an event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum EventResource {
    /// Any pod: a registration for it covers each of the three pod subtypes below (v1.37's
    /// `Pod`, #135905).
    Pod,
    /// Another pod, bound to a node (an assumed pod counts as bound).
    AssignedPod,
    /// Another pod, not yet bound: since v1.37 an unscheduled pod's creation is an
    /// `UnscheduledPod/Add` event for the pods waiting in unschedulablePods.
    UnscheduledPod,
    /// The pending pod itself: the queue reports a pod's own update as `TargetPod/<action>`,
    /// and only that pod's hints hear it (v1.37, #135905).
    TargetPod,
    /// A node.
    Node,
    /// A PersistentVolume.
    PersistentVolume,
    /// A PersistentVolumeClaim.
    PersistentVolumeClaim,
    /// A CSINode.
    CSINode,
    /// A CSIDriver.
    CSIDriver,
    /// A CSIStorageCapacity.
    CSIStorageCapacity,
    /// A StorageClass.
    StorageClass,
    /// A VolumeAttachment.
    VolumeAttachment,
    /// A Namespace.
    Namespace,
    /// A Service, ReplicaSet, StatefulSet or ReplicationController (spreading owners).
    Workload,
    /// A resource.k8s.io ResourceClaim.
    ResourceClaim,
    /// A resource.k8s.io ResourceSlice.
    ResourceSlice,
    /// A resource.k8s.io DeviceClass.
    DeviceClass,
    /// Any other kind a plugin declared (a custom resource, or a built-in kind without a
    /// name of its own here); see [`EventResource::of`].
    Kind(crate::kind::KindName),
    /// Matches every resource.
    WildCard,
}

impl EventResource {
    /// The name used in event labels.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Pod => "Pod",
            Self::AssignedPod => "AssignedPod",
            Self::UnscheduledPod => "UnscheduledPod",
            Self::TargetPod => "TargetPod",
            Self::Node => "Node",
            Self::PersistentVolume => "PersistentVolume",
            Self::PersistentVolumeClaim => "PersistentVolumeClaim",
            Self::CSINode => "CSINode",
            Self::CSIDriver => "CSIDriver",
            Self::CSIStorageCapacity => "CSIStorageCapacity",
            Self::StorageClass => "StorageClass",
            Self::VolumeAttachment => "VolumeAttachment",
            Self::Namespace => "Namespace",
            Self::Workload => "Workload",
            Self::ResourceClaim => "ResourceClaim",
            Self::ResourceSlice => "ResourceSlice",
            Self::DeviceClass => "DeviceClass",
            Self::Kind(k) => k.kind,
            Self::WildCard => "*",
        }
    }

    /// The resource the changes of kind `K` are reported as (what a plugin registers
    /// for in `events_to_register` to hear of its declared kind's changes).
    pub fn of<K: crate::kind::Kind>() -> Self {
        Self::of_kind(crate::kind::KindName {
            group: K::GROUP,
            kind: K::KIND,
        })
    }

    /// The resource a kind's change events are reported as: the built-in resources the
    /// queue has always known keep their names, every other kind is [`EventResource::Kind`].
    pub fn of_kind(name: crate::kind::KindName) -> Self {
        use EventResource as R;
        match (name.group, name.kind) {
            ("", "Namespace") => R::Namespace,
            ("", "Service" | "ReplicationController") | ("apps", "ReplicaSet" | "StatefulSet") => {
                R::Workload
            }
            ("", "PersistentVolume") => R::PersistentVolume,
            ("", "PersistentVolumeClaim") => R::PersistentVolumeClaim,
            ("storage.k8s.io", "StorageClass") => R::StorageClass,
            ("storage.k8s.io", "CSINode") => R::CSINode,
            ("storage.k8s.io", "CSIDriver") => R::CSIDriver,
            ("storage.k8s.io", "CSIStorageCapacity") => R::CSIStorageCapacity,
            ("storage.k8s.io", "VolumeAttachment") => R::VolumeAttachment,
            ("resource.k8s.io", "ResourceClaim") => R::ResourceClaim,
            ("resource.k8s.io", "ResourceSlice") => R::ResourceSlice,
            ("resource.k8s.io", "DeviceClass") => R::DeviceClass,
            _ => R::Kind(name),
        }
    }

    /// The three subtypes a `Pod` event stands for, in upstream's order (its
    /// `UnrollPodEvent`).
    pub const POD_SUBTYPES: [EventResource; 3] =
        [Self::AssignedPod, Self::UnscheduledPod, Self::TargetPod];

    /// Whether this is `Pod` or one of its subtypes.
    pub fn is_pod(&self) -> bool {
        *self == Self::Pod || Self::POD_SUBTYPES.contains(self)
    }

    /// Whether a registration for `self` covers an event about `other`: the same resource,
    /// a wildcard registration, or a `Pod` registration and an event of one of its
    /// subtypes. A subtype never covers another one, nor the broad `Pod`.
    pub fn covers(&self, other: EventResource) -> bool {
        *self == other
            || *self == Self::WildCard
            || (*self == Self::Pod && Self::POD_SUBTYPES.contains(&other))
    }
}

impl ClusterEvent {
    /// A `Pod` event unrolled into one event per pod subtype with the same action (upstream's
    /// `UnrollPodEvent`); any other event is returned as it is.
    pub fn unroll_pod(self) -> Vec<ClusterEvent> {
        if self.resource != EventResource::Pod {
            return vec![self];
        }
        EventResource::POD_SUBTYPES
            .iter()
            .map(|r| ClusterEvent::new(*r, self.action))
            .collect()
    }
}

/// What happened, as a bit set so a registration can name several actions.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct ActionType(pub u32);

impl ActionType {
    /// Created.
    pub const ADD: Self = Self(1);
    /// Deleted.
    pub const DELETE: Self = Self(1 << 1);
    /// A node's allocatable changed.
    pub const UPDATE_NODE_ALLOCATABLE: Self = Self(1 << 2);
    /// A node's labels changed.
    pub const UPDATE_NODE_LABEL: Self = Self(1 << 3);
    /// A node's taints (or unschedulable flag) changed.
    pub const UPDATE_NODE_TAINT: Self = Self(1 << 4);
    /// A node's conditions changed.
    pub const UPDATE_NODE_CONDITION: Self = Self(1 << 5);
    /// A node's annotations changed.
    pub const UPDATE_NODE_ANNOTATION: Self = Self(1 << 6);
    /// A pod's labels changed.
    pub const UPDATE_POD_LABEL: Self = Self(1 << 7);
    /// A pod's requests went down.
    pub const UPDATE_POD_SCALE_DOWN: Self = Self(1 << 8);
    /// A pod's tolerations changed.
    pub const UPDATE_POD_TOLERATION: Self = Self(1 << 9);
    /// A pod's last scheduling gate was removed.
    pub const UPDATE_POD_SCHEDULING_GATES_ELIMINATED: Self = Self(1 << 10);
    /// Any other update.
    pub const UPDATE_OTHER: Self = Self(1 << 11);
    /// A pod's `status.resourceClaimStatuses` changed (its generated claims were named).
    pub const UPDATE_POD_GENERATED_RESOURCE_CLAIM: Self = Self(1 << 12);
    /// A node's `status.declaredFeatures` changed (upstream's `UpdateNodeDeclaredFeature`).
    pub const UPDATE_NODE_DECLARED_FEATURE: Self = Self(1 << 13);
    /// Every kind of update.
    pub const UPDATE: Self = Self(((1 << 14) - 1) & !0b11);
    /// Everything.
    pub const ALL: Self = Self((1 << 14) - 1);

    /// Whether any bit is shared.
    pub fn intersects(&self, other: ActionType) -> bool {
        self.0 & other.0 != 0
    }

    /// The union.
    pub fn union(self, other: ActionType) -> Self {
        Self(self.0 | other.0)
    }

    /// Whether no bit is set.
    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    const NAMES: [(ActionType, &'static str); 14] = [
        (Self::ADD, "Add"),
        (Self::DELETE, "Delete"),
        (Self::UPDATE_NODE_ALLOCATABLE, "UpdateNodeAllocatable"),
        (Self::UPDATE_NODE_LABEL, "UpdateNodeLabel"),
        (Self::UPDATE_NODE_TAINT, "UpdateNodeTaint"),
        (Self::UPDATE_NODE_CONDITION, "UpdateNodeCondition"),
        (Self::UPDATE_NODE_ANNOTATION, "UpdateNodeAnnotation"),
        (Self::UPDATE_POD_LABEL, "UpdatePodLabel"),
        (Self::UPDATE_POD_SCALE_DOWN, "UpdatePodScaleDown"),
        (Self::UPDATE_POD_TOLERATION, "UpdatePodToleration"),
        (
            Self::UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
            "UpdatePodSchedulingGatesEliminated",
        ),
        (Self::UPDATE_OTHER, "Update"),
        (
            Self::UPDATE_POD_GENERATED_RESOURCE_CLAIM,
            "UpdatePodGeneratedResourceClaim",
        ),
        (
            Self::UPDATE_NODE_DECLARED_FEATURE,
            "UpdateNodeDeclaredFeature",
        ),
    ];
}

impl fmt::Debug for ActionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for ActionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Self::ALL {
            return f.write_str("*");
        }
        if *self == Self::UPDATE {
            return f.write_str("Update");
        }
        let names: Vec<&str> = Self::NAMES
            .iter()
            .filter(|(a, _)| self.intersects(*a))
            .map(|(_, n)| *n)
            .collect();
        f.write_str(&names.join("|"))
    }
}

/// A change in the cluster: which resource, what action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct ClusterEvent {
    /// The object kind.
    pub resource: EventResource,
    /// The action(s).
    pub action: ActionType,
}

impl ClusterEvent {
    /// An event.
    pub const fn new(resource: EventResource, action: ActionType) -> Self {
        Self { resource, action }
    }

    /// Whether a registration (`self`) covers an event that happened.
    pub fn covers(&self, happened: &ClusterEvent) -> bool {
        self.resource.covers(happened.resource) && self.action.intersects(happened.action)
    }

    /// The label used in metrics and logs, e.g. `NodeAdd`.
    pub fn label(&self) -> String {
        format!("{}{}", self.resource.as_str(), self.action)
    }
}

/// Queue-internal events that are not cluster changes.
pub mod internal {
    /// A pod stayed in unschedulablePods longer than the maximum.
    pub const UNSCHEDULABLE_TIMEOUT: &str = "UnschedulableTimeout";
    /// A pod finished its backoff.
    pub const BACKOFF_COMPLETE: &str = "BackoffComplete";
    /// A pod was activated by a plugin.
    pub const FORCE_ACTIVATE: &str = "ForceActivate";
    /// A pod entered the queue for the first time.
    pub const POD_ADD: &str = "PodAdd";
    /// A pending pod was updated.
    pub const POD_UPDATE: &str = "PodUpdate";
    /// A scheduling attempt failed.
    pub const SCHEDULE_ATTEMPT_FAILURE: &str = "ScheduleAttemptFailure";
    /// activeQ was empty and a pod was taken from backoffQ (SchedulerPopFromBackoffQ).
    pub const POP_FROM_BACKOFF_Q: &str = "PopFromBackoffQ";
}

/// The objects of an event, as queueing hints see them.
#[derive(Debug, Clone)]
pub enum EventObject {
    /// A pod.
    Pod(Arc<PodInfo>),
    /// A node.
    Node(Arc<Node>),
    /// An object of another kind as the API sent it (e.g. a `PersistentVolumeClaim`);
    /// hints look at it with [`EventObject::downcast`].
    Object(Arc<dyn std::any::Any + Send + Sync>),
    /// Another kind whose object was not passed along; hints read the object store.
    Other,
}

impl EventObject {
    /// The pod, if this is one.
    pub fn as_pod(&self) -> Option<&Arc<PodInfo>> {
        match self {
            Self::Pod(p) => Some(p),
            _ => None,
        }
    }

    /// The node, if this is one.
    pub fn as_node(&self) -> Option<&Arc<Node>> {
        match self {
            Self::Node(n) => Some(n),
            _ => None,
        }
    }

    /// An object of another kind.
    pub fn object<K: Send + Sync + 'static>(obj: Arc<K>) -> Self {
        Self::Object(obj)
    }

    /// The object, if this is one of kind `K`.
    pub fn downcast<K: 'static>(&self) -> Option<&K> {
        match self {
            Self::Object(o) => o.downcast_ref::<K>(),
            _ => None,
        }
    }
}

/// A queueing hint's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum QueueingHint {
    /// The event cannot make the pod schedulable.
    Skip,
    /// The event may make the pod schedulable: retry it.
    Queue,
}

/// A hint function: given the pod that was rejected and the event's old and new objects,
/// may the event make the pod schedulable? An `Err` is treated as Queue.
pub type QueueingHintFn = Arc<
    dyn Fn(&PodInfo, Option<&EventObject>, Option<&EventObject>) -> Result<QueueingHint, String>
        + Send
        + Sync,
>;

/// An event a plugin registers, with an optional hint (no hint means always Queue).
#[derive(Clone)]
pub struct ClusterEventWithHint {
    /// The event.
    pub event: ClusterEvent,
    /// The hint.
    pub hint: Option<QueueingHintFn>,
}

impl fmt::Debug for ClusterEventWithHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterEventWithHint")
            .field("event", &self.event)
            .field("hint", &self.hint.is_some())
            .finish()
    }
}

impl ClusterEventWithHint {
    /// An event without a hint.
    pub fn new(resource: EventResource, action: ActionType) -> Self {
        Self {
            event: ClusterEvent::new(resource, action),
            hint: None,
        }
    }

    /// An event with a hint.
    pub fn with_hint(
        resource: EventResource,
        action: ActionType,
        hint: impl Fn(
            &PodInfo,
            Option<&EventObject>,
            Option<&EventObject>,
        ) -> Result<QueueingHint, String>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        Self {
            event: ClusterEvent::new(resource, action),
            hint: Some(Arc::new(hint)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage() {
        let reg = ClusterEvent::new(
            EventResource::Node,
            ActionType::ADD.union(ActionType::UPDATE_NODE_TAINT),
        );
        assert!(reg.covers(&ClusterEvent::new(EventResource::Node, ActionType::ADD)));
        assert!(!reg.covers(&ClusterEvent::new(
            EventResource::Node,
            ActionType::UPDATE_NODE_LABEL
        )));
        assert!(!reg.covers(&ClusterEvent::new(
            EventResource::AssignedPod,
            ActionType::ADD
        )));
        let pods = ClusterEvent::new(EventResource::Pod, ActionType::DELETE);
        assert!(pods.covers(&ClusterEvent::new(
            EventResource::AssignedPod,
            ActionType::DELETE
        )));
        assert_eq!(
            ClusterEvent::new(EventResource::Node, ActionType::ADD).label(),
            "NodeAdd"
        );
        assert!(ActionType::UPDATE.intersects(ActionType::UPDATE_NODE_TAINT));
        assert!(!ActionType::UPDATE.intersects(ActionType::ADD));
    }

    /// v1.37's pod subtypes (#135905): `Pod` and the wildcard cover every subtype, a
    /// subtype covers only itself.
    #[test]
    fn pod_subtype_matching() {
        use EventResource as R;
        let ev = ClusterEvent::new;
        let cases = [
            (
                "wildcard registration, any pod event",
                ev(R::WildCard, ActionType::ALL),
                ev(R::TargetPod, ActionType::UPDATE_POD_LABEL),
                true,
            ),
            (
                "Pod covers AssignedPod",
                ev(R::Pod, ActionType::UPDATE_POD_LABEL),
                ev(R::AssignedPod, ActionType::UPDATE_POD_LABEL),
                true,
            ),
            (
                "Pod covers UnscheduledPod",
                ev(R::Pod, ActionType::ADD),
                ev(R::UnscheduledPod, ActionType::ADD),
                true,
            ),
            (
                "Pod covers TargetPod",
                ev(R::Pod, ActionType::UPDATE_POD_TOLERATION),
                ev(R::TargetPod, ActionType::UPDATE_POD_TOLERATION),
                true,
            ),
            (
                "Pod with another action",
                ev(R::Pod, ActionType::DELETE),
                ev(R::TargetPod, ActionType::UPDATE_POD_TOLERATION),
                false,
            ),
            (
                "AssignedPod is not UnscheduledPod",
                ev(R::AssignedPod, ActionType::ADD),
                ev(R::UnscheduledPod, ActionType::ADD),
                false,
            ),
            (
                "AssignedPod is not TargetPod",
                ev(R::AssignedPod, ActionType::UPDATE),
                ev(R::TargetPod, ActionType::UPDATE_POD_LABEL),
                false,
            ),
            (
                "TargetPod is not AssignedPod",
                ev(R::TargetPod, ActionType::UPDATE),
                ev(R::AssignedPod, ActionType::UPDATE_POD_LABEL),
                false,
            ),
            (
                "UnscheduledPod is not TargetPod",
                ev(R::UnscheduledPod, ActionType::UPDATE),
                ev(R::TargetPod, ActionType::UPDATE_POD_LABEL),
                false,
            ),
            (
                "a subtype does not cover the broad Pod",
                ev(R::UnscheduledPod, ActionType::ADD),
                ev(R::Pod, ActionType::ADD),
                false,
            ),
            (
                "a subtype does not cover a wildcard event",
                ev(R::TargetPod, ActionType::UPDATE),
                ev(R::WildCard, ActionType::UPDATE),
                false,
            ),
        ];
        for (name, registered, happened, want) in cases {
            assert_eq!(registered.covers(&happened), want, "{name}");
        }
        assert_eq!(
            ClusterEvent::new(R::TargetPod, ActionType::UPDATE_POD_TOLERATION).label(),
            "TargetPodUpdatePodToleration"
        );
    }

    #[test]
    fn unrolls_pod_events() {
        for action in [ActionType::ADD, ActionType::DELETE, ActionType::UPDATE] {
            let got = ClusterEvent::new(EventResource::Pod, action).unroll_pod();
            let want: Vec<_> = [
                EventResource::AssignedPod,
                EventResource::UnscheduledPod,
                EventResource::TargetPod,
            ]
            .into_iter()
            .map(|r| ClusterEvent::new(r, action))
            .collect();
            assert_eq!(got, want);
        }
        let node = ClusterEvent::new(EventResource::Node, ActionType::ADD);
        assert_eq!(node.unroll_pod(), vec![node]);
        assert!(EventResource::TargetPod.is_pod() && !EventResource::Node.is_pod());
    }
}
