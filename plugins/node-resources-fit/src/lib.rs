//! NodeResourcesFit: a pod fits a node only when the node has room for its requests (cpu,
//! memory, ephemeral storage, extended and other scalar resources, and one more pod), and
//! feasible nodes are ranked by LeastAllocated, MostAllocated or RequestedToCapacityRatio.
//!
//! PreFilter keeps the pod's requests in the cycle state, Filter reports every resource that
//! is short, PreScore keeps the per-resource scoring requests, Score applies the strategy,
//! and the enqueue extensions say which pod and node changes may free room. It reads pods
//! and nodes only through the model and must not keep per-pod state in the plugin object.

mod args;
mod scoring;

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use kubesched_framework::events::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
};
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
/// extended resources are not checked.
pub fn insufficient_resources(
    request: &Resource,
    room: NodeRoom<'_>,
    ignored: impl Fn(&str) -> bool,
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
    insufficient_resources(&pod.requests, NodeRoom::of(node), |_| false)
}

/// The NodeResourcesFit plugin.
#[derive(Debug, Clone)]
pub struct NodeResourcesFit {
    ignored_resources: HashSet<String>,
    ignored_resource_groups: HashSet<String>,
    scorer: Scorer,
}

impl NodeResourcesFit {
    /// Builds the plugin from its args (validated again, as upstream does).
    pub fn new(args: &NodeResourcesFitArgs, _handle: &Handle) -> Result<Self, PluginError> {
        args.validate().map_err(|e| {
            PluginError(format!(
                "{NAME}: invalid {}: {e}",
                NodeResourcesFitArgs::KIND
            ))
        })?;
        Ok(Self {
            ignored_resources: args.ignored_resources.iter().cloned().collect(),
            ignored_resource_groups: args.ignored_resource_groups.iter().cloned().collect(),
            scorer: Scorer::new(&args.scoring_strategy),
        })
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

/// The pod's requests, kept by PreFilter for Filter.
#[derive(Debug, Clone)]
struct PreFilterState(Resource);

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
        state.write(PreFilterState(pod.requests.clone()));
        (None, Status::success())
    }
}

impl FilterPlugin for NodeResourcesFit {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(PreFilterState(request)) = state.read::<PreFilterState>() else {
            return Status::error(format!(
                "error reading \"PreFilter{NAME}\" from cycleState: not found"
            ));
        };
        let short = insufficient_resources(request, NodeRoom::of(node), |name| self.ignored(name));
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
        let request = match state.read::<PreFilterState>() {
            Some(PreFilterState(r)) => r,
            None => &pod.requests,
        };
        insufficient_resources(request, NodeRoom::of(node), |name| self.ignored(name))
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
        self.scorer
            .score(node, requests)
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

/// Whether a node going from `original` to `modified` allocatable grew anything the pod asks for.
fn requested_resources_grew(pod: &PodInfo, original: &Resource, modified: &Resource) -> bool {
    if modified.allowed_pod_number > original.allowed_pod_number {
        return true;
    }
    let want = &pod.requests;
    (want.milli_cpu > 0 && modified.milli_cpu > original.milli_cpu)
        || (want.memory > 0 && modified.memory > original.memory)
        || (want.ephemeral_storage > 0 && modified.ephemeral_storage > original.ephemeral_storage)
        || want
            .scalar
            .iter()
            .any(|(name, &q)| q != 0 && modified.get(name) > original.get(name))
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
    pod: &PodInfo,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
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
    if !insufficient_resources(&pod.requests, room, |_| false).is_empty() {
        return Ok(QueueingHint::Skip);
    }
    let Some(original) = old.and_then(EventObject::as_node) else {
        return Ok(QueueingHint::Queue);
    };
    Ok(
        if requested_resources_grew(pod, &original.allocatable, &modified.allocatable) {
            QueueingHint::Queue
        } else {
            QueueingHint::Skip
        },
    )
}

impl EnqueueExtensions for NodeResourcesFit {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        vec![
            // A pod leaving or shrinking (in-place resize) frees room.
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::DELETE.union(ActionType::UPDATE_POD_SCALE_DOWN),
                pod_event_hint,
            ),
            // A new node, or more allocatable on one. With queueing hints there is no
            // pre-check that could drop a Node/Add, so label and taint updates are not needed.
            ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD.union(ActionType::UPDATE_NODE_ALLOCATABLE),
                node_event_hint,
            ),
        ]
    }
}

#[cfg(test)]
mod tests;
