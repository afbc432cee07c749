//! NodeResourcesFit: a pod fits a node only when the node has room for its requests (cpu,
//! memory, ephemeral storage, extended and other scalar resources, and one more pod), and
//! feasible nodes are ranked by LeastAllocated, MostAllocated or RequestedToCapacityRatio.
//!
//! PreFilter keeps the pod's requests in the cycle state, Filter reports every resource that
//! is short, PreScore keeps the per-resource scoring requests, Score applies the strategy,
//! and the enqueue extensions say which pod and node changes may free room. It reads pods
//! and nodes only through the model and must not keep per-pod state in the plugin object.
//!
//! **Extended resources backed by DRA** (`DRAExtendedResource`, GA in v1.37): a request for
//! an extended resource that a DeviceClass names (`spec.extendedResourceName`, or the
//! implicit `deviceclass.resource.kubernetes.io/<class>`) is not checked on a node that
//! has none of it in `status.allocatable`: the DynamicResources plugin allocates devices
//! for it there. A node that advertises the resource (a device plugin) is accounted as
//! before. The classes are the object store's (the kind DynamicResources declares).

mod args;
mod scoring;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use kubesched_framework::dra_devices::DraExtendedDevices;
use kubesched_framework::events::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
};
use kubesched_framework::model::k8s_openapi::api::resource::v1::DeviceClass;
use kubesched_framework::model::resource::is_extended_resource_name;
use kubesched_framework::model::{NodeInfo, NodeNumbers, PodInfo, Resource};
use kubesched_framework::registry::PluginArgs;
use kubesched_framework::{
    Code, CycleState, EnqueueExtensions, FilterPlugin, Handle, PluginError, PreFilterPlugin,
    PreFilterResult, PreScorePlugin, Remedy, ScorePlugin, Status,
};

pub use args::{
    MAX_CUSTOM_PRIORITY_SCORE, NodeResourcesFitArgs, RequestedToCapacityRatioParam, ResourceSpec,
    ScoringStrategy, ScoringStrategyType, UtilizationShapePoint, default_resources,
};
use scoring::Scorer;

/// The plugin's registered name.
pub const NAME: &str = "NodeResourcesFit";
/// The node has fewer free pod slots than one.
pub const REASON_TOO_MANY_PODS: &str = "Too many pods";
/// Not enough cpu left.
pub const REASON_INSUFFICIENT_CPU: &str = "Insufficient cpu";
/// Not enough memory left.
pub const REASON_INSUFFICIENT_MEMORY: &str = "Insufficient memory";
/// Not enough ephemeral storage left.
pub const REASON_INSUFFICIENT_EPHEMERAL_STORAGE: &str = "Insufficient ephemeral-storage";
/// The prefix of the reason for any other resource: `Insufficient <resource name>`.
pub const REASON_INSUFFICIENT_PREFIX: &str = "Insufficient ";
/// The implicit extended resource name of every DeviceClass: this prefix and the class name.
pub const DEVICE_CLASS_RESOURCE_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// Whether `name` can be an extended resource backed by DRA: an extended resource name or
/// a class's implicit name (upstream's `IsDRAExtendedResourceName`).
pub fn is_dra_extended_resource_name(name: &str) -> bool {
    is_extended_resource_name(name) || name.starts_with(DEVICE_CLASS_RESOURCE_PREFIX)
}

/// The class's `spec.extendedResourceName`.
fn class_extended_resource_name(class: &DeviceClass) -> Option<&str> {
    class
        .spec
        .as_ref()
        .and_then(|s| s.extended_resource_name.as_deref())
}

/// Whether a DeviceClass among `classes` provides the extended resource `name`: one naming
/// it in `spec.extendedResourceName`, or the class `<class>` of the implicit name.
pub fn backed_by_device_class(classes: &[std::sync::Arc<DeviceClass>], name: &str) -> bool {
    classes.iter().any(|c| {
        class_extended_resource_name(c) == Some(name)
            || name
                .strip_prefix(DEVICE_CLASS_RESOURCE_PREFIX)
                .is_some_and(|class| c.metadata.name.as_deref() == Some(class))
    })
}

/// One resource the node is short of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsufficientResource {
    /// The resource, e.g. `cpu`, `pods`, `example.com/gpu`.
    pub resource: Cow<'static, str>,
    /// The reason Filter reports, e.g. `Insufficient cpu`.
    pub reason: Cow<'static, str>,
    /// What the pod asks for.
    pub requested: i64,
    /// What the node's pods already use.
    pub used: i64,
    /// The node's allocatable amount.
    pub capacity: i64,
    /// The request exceeds the whole node: evicting pods (preemption) cannot help.
    pub unresolvable: bool,
}

/// What a node offers, as [`insufficient_resources`] reads it: the compact numbers (cpu,
/// memory, ephemeral storage, pods) and the full sums' scalar resources, which are only
/// read when the pod requests one.
#[derive(Debug, Clone, Copy)]
pub struct NodeRoom<'a> {
    /// Allocatable and requested cpu, memory, ephemeral storage; allowed pods.
    pub numbers: &'a NodeNumbers,
    /// Pods on the node.
    pub pods: usize,
    /// Allocatable scalar resources.
    pub allocatable_scalar: &'a BTreeMap<String, i64>,
    /// Requested scalar resources.
    pub used_scalar: &'a BTreeMap<String, i64>,
}

impl<'a> NodeRoom<'a> {
    /// The room of a node with its pods.
    pub fn of(node: &'a NodeInfo) -> Self {
        Self {
            numbers: node.numbers(),
            pods: node.pod_count(),
            allocatable_scalar: &node.allocatable.scalar,
            used_scalar: &node.requested.scalar,
        }
    }
}

/// Every resource a node with `room` lacks for a pod requesting `request`, in upstream's
/// order (pods, cpu, memory, ephemeral storage, then scalar resources by name). `ignored`
/// extended resources are not checked, nor resources in `dra_backed` the node has none of
/// in its allocatable (DynamicResources provides them there).
pub fn insufficient_resources(
    request: &Resource,
    room: NodeRoom<'_>,
    ignored: impl Fn(&str) -> bool,
    dra_backed: &BTreeSet<String>,
) -> Vec<InsufficientResource> {
    let mut out = Vec::new();
    let (n, pods) = (room.numbers, room.pods);
    let allowed = n.allowed_pod_number;
    if pods as i64 + 1 > allowed {
        out.push(InsufficientResource {
            resource: Cow::Borrowed("pods"),
            reason: Cow::Borrowed(REASON_TOO_MANY_PODS),
            requested: 1,
            used: pods as i64,
            capacity: allowed,
            unresolvable: false,
        });
    }
    if request.milli_cpu == 0
        && request.memory == 0
        && request.ephemeral_storage == 0
        && request.scalar.is_empty()
    {
        return out;
    }
    let fixed = [
        (
            "cpu",
            REASON_INSUFFICIENT_CPU,
            request.milli_cpu,
            n.requested_milli_cpu,
            n.allocatable_milli_cpu,
        ),
        (
            "memory",
            REASON_INSUFFICIENT_MEMORY,
            request.memory,
            n.requested_memory,
            n.allocatable_memory,
        ),
        (
            "ephemeral-storage",
            REASON_INSUFFICIENT_EPHEMERAL_STORAGE,
            request.ephemeral_storage,
            n.requested_ephemeral_storage,
            n.allocatable_ephemeral_storage,
        ),
    ];
    for (resource, reason, want, in_use, capacity) in fixed {
        if want > 0 && want > capacity - in_use {
            out.push(InsufficientResource {
                resource: Cow::Borrowed(resource),
                reason: Cow::Borrowed(reason),
                requested: want,
                used: in_use,
                capacity,
                unresolvable: want > capacity,
            });
        }
    }
    for (name, &want) in &request.scalar {
        if want == 0 || (is_extended_resource_name(name) && ignored(name)) {
            continue;
        }
        let capacity = room.allocatable_scalar.get(name).copied().unwrap_or(0);
        if capacity <= 0 && dra_backed.contains(name) {
            continue;
        }
        let in_use = room.used_scalar.get(name).copied().unwrap_or(0);
        if want > capacity - in_use {
            out.push(InsufficientResource {
                resource: Cow::Owned(name.clone()),
                reason: Cow::Owned(format!("{REASON_INSUFFICIENT_PREFIX}{name}")),
                requested: want,
                used: in_use,
                capacity,
                unresolvable: want > capacity,
            });
        }
    }
    out
}

/// What a pod lacks on a node, checking every resource (upstream's `Fits`).
pub fn fits(pod: &PodInfo, node: &NodeInfo) -> Vec<InsufficientResource> {
    insufficient_resources(
        &pod.requests,
        NodeRoom::of(node),
        |_| false,
        &BTreeSet::new(),
    )
}

/// The NodeResourcesFit plugin.
#[derive(Debug, Clone)]
pub struct NodeResourcesFit {
    ignored_resources: HashSet<String>,
    ignored_resource_groups: HashSet<String>,
    scorer: Scorer,
    /// `DRAExtendedResource`: extended resources DeviceClasses name may come from DRA.
    dra_extended_resource: bool,
    handle: Handle,
}

impl NodeResourcesFit {
    /// Builds the plugin from its args (validated again, as upstream does).
    pub fn new(args: &NodeResourcesFitArgs, handle: &Handle) -> Result<Self, PluginError> {
        args.validate(handle.features()).map_err(|e| {
            PluginError(format!(
                "{NAME}: invalid {}: {e}",
                NodeResourcesFitArgs::KIND
            ))
        })?;
        Ok(Self {
            ignored_resources: args.ignored_resources.iter().cloned().collect(),
            ignored_resource_groups: args.ignored_resource_groups.iter().cloned().collect(),
            scorer: Scorer::new(&args.scoring_strategy),
            dra_extended_resource: handle
                .features()
                .enabled_by_name("DRAExtendedResource")
                .unwrap_or(false),
            handle: handle.clone(),
        })
    }

    /// The pod's requested extended resources a DeviceClass provides (none with the gate
    /// off).
    fn dra_backed(&self, pod: &PodInfo) -> BTreeSet<String> {
        if !self.dra_extended_resource {
            return BTreeSet::new();
        }
        let mut names = pod
            .requests
            .scalar
            .iter()
            .filter(|(name, q)| **q != 0 && is_dra_extended_resource_name(name))
            .map(|(name, _)| name)
            .peekable();
        if names.peek().is_none() {
            return BTreeSet::new();
        }
        let classes = self.handle.objects().device_classes.list();
        names
            .filter(|name| backed_by_device_class(&classes, name))
            .cloned()
            .collect()
    }

    fn ignored(&self, name: &str) -> bool {
        if self.ignored_resources.contains(name) {
            return true;
        }
        !self.ignored_resource_groups.is_empty()
            && name
                .split_once('/')
                .is_some_and(|(group, _)| self.ignored_resource_groups.contains(group))
    }
}

kubesched_framework::register_plugin! {
    name: NAME,
    plugin: NodeResourcesFit,
    args: NodeResourcesFitArgs,
    factory: NodeResourcesFit::new,
}

/// The pod's requests and those of its extended resources DRA may provide, kept by
/// PreFilter for Filter.
#[derive(Debug, Clone)]
struct PreFilterState(Resource, BTreeSet<String>);

/// The pod's scoring request of each configured resource, kept by PreScore for Score.
#[derive(Debug, Clone)]
struct PreScoreState(Vec<i64>);

impl PreFilterPlugin for NodeResourcesFit {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        state.write(PreFilterState(pod.requests.clone(), self.dra_backed(pod)));
        (None, Status::success())
    }
}

impl FilterPlugin for NodeResourcesFit {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(PreFilterState(request, dra_backed)) = state.read::<PreFilterState>() else {
            return Status::error(format!(
                "error reading \"PreFilter{NAME}\" from cycleState: not found"
            ));
        };
        let short = insufficient_resources(
            request,
            NodeRoom::of(node),
            |name| self.ignored(name),
            dra_backed,
        );
        if short.is_empty() {
            return Status::success();
        }
        let code = if short.iter().any(|r| r.unresolvable) {
            Code::UnschedulableAndUnresolvable
        } else {
            Code::Unschedulable
        };
        Status::new(code, short.into_iter().map(|r| r.reason.into_owned()))
    }

    fn remedies(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Vec<Remedy> {
        let computed;
        let (request, dra_backed) = match state.read::<PreFilterState>() {
            Some(PreFilterState(r, d)) => (r, d),
            None => {
                computed = self.dra_backed(pod);
                (&pod.requests, &computed)
            }
        };
        insufficient_resources(
            request,
            NodeRoom::of(node),
            |name| self.ignored(name),
            dra_backed,
        )
        .into_iter()
        .map(|r| Remedy::more_resource(&r.resource, r.requested, r.used, r.capacity))
        .collect()
    }
}

impl PreScorePlugin for NodeResourcesFit {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, _nodes: &[Arc<NodeInfo>]) -> Status {
        state.write(PreScoreState(self.scorer.pod_requests(pod)));
        Status::success()
    }
}

impl ScorePlugin for NodeResourcesFit {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let computed;
        let requests = match state.read::<PreScoreState>() {
            Some(PreScoreState(r)) => r.as_slice(),
            // Upstream tolerates a skipped PreScore by computing the requests here.
            None => {
                computed = self.scorer.pod_requests(pod);
                computed.as_slice()
            }
        };
        let dra = match (
            state.read::<PreFilterState>(),
            state.read::<DraExtendedDevices>(),
        ) {
            (Some(PreFilterState(_, backed)), Some(devices)) if !backed.is_empty() => {
                Some((backed, devices))
            }
            _ => None,
        };
        self.scorer
            .score(node, requests, dra)
            .ok_or_else(|| Status::error("resources not found"))
    }
}

/// Whether an update that shrank `modified` (from `original`) lowered a request `target`
/// makes: a bound pod freeing room, or the target itself asking for less. As upstream, the
/// target's own update counts only for the resources it still requests.
fn scaled_down_for(target: &PodInfo, original: &PodInfo, modified: &PodInfo) -> bool {
    if modified.uid != target.uid && modified.node_name.is_none() {
        return false;
    }
    let (want, before, after) = (&target.requests, &original.requests, &modified.requests);
    (want.milli_cpu > 0 && before.milli_cpu > after.milli_cpu)
        || (want.memory > 0 && before.memory > after.memory)
        || (want.ephemeral_storage > 0 && before.ephemeral_storage > after.ephemeral_storage)
        || want
            .scalar
            .iter()
            .any(|(name, &q)| q != 0 && before.get(name) > after.get(name))
}

/// Whether a node going from `original` to `modified` allocatable grew anything the pod
/// asks for, or now leaves a resource in `dra_backed` to DRA.
fn requested_resources_grew(
    pod: &PodInfo,
    original: &Resource,
    modified: &Resource,
    dra_backed: &BTreeSet<String>,
) -> bool {
    if modified.allowed_pod_number > original.allowed_pod_number {
        return true;
    }
    let want = &pod.requests;
    (want.milli_cpu > 0 && modified.milli_cpu > original.milli_cpu)
        || (want.memory > 0 && modified.memory > original.memory)
        || (want.ephemeral_storage > 0 && modified.ephemeral_storage > original.ephemeral_storage)
        || want.scalar.iter().any(|(name, &q)| {
            q != 0
                && (modified.get(name) > original.get(name)
                    || (modified.get(name) <= 0 && dra_backed.contains(name)))
        })
}

fn pod_event_hint(
    pod: &PodInfo,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let original = old.and_then(EventObject::as_pod);
    let Some(modified) = new.and_then(EventObject::as_pod) else {
        let deleted = original.ok_or("expected a pod")?;
        // Only a pod that held room on a node (bound, or nominated to one) frees any.
        return Ok(
            if deleted.node_name.is_none() && deleted.nominated_node_name.is_none() {
                QueueingHint::Skip
            } else {
                QueueingHint::Queue
            },
        );
    };
    let original = original.ok_or("expected the pod before the update")?;
    Ok(if scaled_down_for(pod, original, modified) {
        QueueingHint::Queue
    } else {
        QueueingHint::Skip
    })
}

fn node_event_hint(
    plugin: &NodeResourcesFit,
    pod: &PodInfo,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let dra_backed = plugin.dra_backed(pod);
    let modified = new
        .and_then(EventObject::as_node)
        .ok_or("expected a node")?;
    // Would the pod fit the node if it were empty? If not, no change to it can help.
    let numbers = NodeNumbers::empty_node(&modified.allocatable);
    let room = NodeRoom {
        numbers: &numbers,
        pods: 0,
        allocatable_scalar: &modified.allocatable.scalar,
        used_scalar: &BTreeMap::new(),
    };
    if !insufficient_resources(&pod.requests, room, |_| false, &dra_backed).is_empty() {
        return Ok(QueueingHint::Skip);
    }
    let Some(original) = old.and_then(EventObject::as_node) else {
        return Ok(QueueingHint::Queue);
    };
    Ok(
        if requested_resources_grew(
            pod,
            &original.allocatable,
            &modified.allocatable,
            &dra_backed,
        ) {
            QueueingHint::Queue
        } else {
            QueueingHint::Skip
        },
    )
}

/// Upstream's `isSchedulableAfterDeviceClassEvent`: a class now names (explicitly, or by
/// its implicit name when added) an extended resource the pod requests.
fn device_class_hint(
    pod: &PodInfo,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let Some(modified) = new.and_then(|n| n.downcast::<DeviceClass>()) else {
        return Ok(QueueingHint::Queue);
    };
    let requests = |name: &str| pod.requests.scalar.contains_key(name);
    match old.and_then(|o| o.downcast::<DeviceClass>()) {
        Some(original) => {
            if class_extended_resource_name(original) == class_extended_resource_name(modified) {
                return Ok(QueueingHint::Skip);
            }
        }
        None => {
            let implicit = format!(
                "{DEVICE_CLASS_RESOURCE_PREFIX}{}",
                modified.metadata.name.as_deref().unwrap_or("")
            );
            if requests(&implicit) {
                return Ok(QueueingHint::Queue);
            }
        }
    }
    Ok(match class_extended_resource_name(modified) {
        Some(name) if requests(name) => QueueingHint::Queue,
        _ => QueueingHint::Skip,
    })
}

impl EnqueueExtensions for NodeResourcesFit {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        let plugin = self.clone();
        let mut events = vec![
            // A pod leaving (bound, or nominated somewhere) frees room.
            ClusterEventWithHint::with_hint(EventResource::Pod, ActionType::DELETE, pod_event_hint),
            // A bound pod shrinking (in-place resize) frees room; the pod's own shrinking
            // lowers what it needs (v1.37 registers the two apart, #135905).
            ClusterEventWithHint::with_hint(
                EventResource::AssignedPod,
                ActionType::UPDATE_POD_SCALE_DOWN,
                pod_event_hint,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::TargetPod,
                ActionType::UPDATE_POD_SCALE_DOWN,
                pod_event_hint,
            ),
            // A new node, or more allocatable on one. With queueing hints there is no
            // pre-check that could drop a Node/Add, so label and taint updates are not needed.
            ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD.union(ActionType::UPDATE_NODE_ALLOCATABLE),
                move |pod, old, new| node_event_hint(&plugin, pod, old, new),
            ),
        ];
        if self.dra_extended_resource {
            // A class may come to name an extended resource the pod waits for.
            events.push(ClusterEventWithHint::with_hint(
                EventResource::DeviceClass,
                ActionType::ADD.union(ActionType::UPDATE),
                device_class_hint,
            ));
        }
        events
    }
}

#[cfg(test)]
mod tests;
