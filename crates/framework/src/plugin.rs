//! The plugin traits, one per extension point.
//!
//! # Lifecycle of a plugin
//!
//! 1. At start-up the [`Framework`](crate::Framework) of each profile looks the plugin's
//!    name up in the [registry](crate::registry), decodes its args and calls its factory
//!    once with a [`Handle`](crate::Handle). One object serves every extension point it
//!    implements. The trait impls below are its only declaration of them:
//!    [`register_plugin!`](crate::register_plugin) derives the `as_*` methods of [`Plugin`]
//!    and the registry's point set from those impls, so the two cannot disagree.
//! 2. For each pod, the scheduling cycle calls PreFilter, Filter (in parallel over nodes),
//!    PostFilter (only when no node fits), PreScore, Score and NormalizeScore, then Reserve
//!    and Permit on the chosen node. Per-pod data goes in the [`CycleState`], never in the
//!    plugin object, which is shared by all cycles.
//! 3. The binding cycle, on its own task, calls PreBind, Bind and PostBind. A failure at
//!    any point after Reserve calls Unreserve of every Reserve plugin, in reverse order.
//! 4. [`EnqueueExtensions`] tells the queue which cluster events may make a pod this plugin
//!    rejected schedulable again.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kubesched_model::{NodeInfo, PodInfo};

use crate::events::ClusterEventWithHint;
use crate::{CycleState, Framework, NodeToStatus, Status};

/// A pod waiting in the scheduling queue, with its queueing history.
#[derive(Debug, Clone)]
pub struct QueuedPodInfo {
    /// The pod.
    pub pod_info: Arc<PodInfo>,
    /// When the pod was last added to the queue (for ordering).
    pub timestamp: std::time::Instant,
    /// Scheduling attempts so far.
    pub attempts: u32,
    /// When the pod first entered the queue (for latency metrics).
    pub initial_attempt_timestamp: Option<std::time::Instant>,
    /// Plugins that rejected the pod in its last attempt.
    pub unschedulable_plugins: BTreeSet<String>,
    /// Plugins that answered Pending in its last attempt.
    pub pending_plugins: BTreeSet<String>,
    /// Whether a PreEnqueue plugin holds the pod back.
    pub gated: bool,
    /// The PreEnqueue plugin that holds it back.
    pub gating_plugin: Option<String>,
    /// Whether the pod last left unschedulablePods only because it waited there too long
    /// (the periodic flush), not for an event: if it then schedules, some event it needed
    /// went unnoticed (`scheduler_pod_scheduled_after_flush_total`).
    pub flushed_from_unschedulable: bool,
}

impl QueuedPodInfo {
    /// A pod entering the queue now.
    pub fn new(pod_info: Arc<PodInfo>, now: std::time::Instant) -> Self {
        Self {
            pod_info,
            timestamp: now,
            attempts: 0,
            initial_attempt_timestamp: None,
            unschedulable_plugins: BTreeSet::new(),
            pending_plugins: BTreeSet::new(),
            gated: false,
            gating_plugin: None,
            flushed_from_unschedulable: false,
        }
    }
}

/// Which extension points exist, in the order a pod meets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[allow(missing_docs)]
pub enum ExtensionPoint {
    QueueSort,
    PreEnqueue,
    PreFilter,
    Filter,
    PostFilter,
    PreScore,
    Score,
    Reserve,
    Permit,
    PreBind,
    Bind,
    PostBind,
    /// A pod-group cycle's candidate placements (TopologyAwareWorkloadScheduling).
    PlacementGenerate,
    /// A pod-group cycle's scores of its feasible placements (TopologyAwareWorkloadScheduling).
    PlacementScore,
    /// Not an extension point of the config file: the plugin registers cluster events.
    EnqueueExtensions,
}

impl ExtensionPoint {
    /// Every point that a profile configures, in upstream's order.
    pub const CONFIGURABLE: [ExtensionPoint; 14] = [
        Self::QueueSort,
        Self::PreEnqueue,
        Self::PreFilter,
        Self::Filter,
        Self::PostFilter,
        Self::PreScore,
        Self::Score,
        Self::Reserve,
        Self::Permit,
        Self::PreBind,
        Self::Bind,
        Self::PostBind,
        Self::PlacementGenerate,
        Self::PlacementScore,
    ];

    /// The name, as in config files and metrics.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::QueueSort => "QueueSort",
            Self::PreEnqueue => "PreEnqueue",
            Self::PreFilter => "PreFilter",
            Self::Filter => "Filter",
            Self::PostFilter => "PostFilter",
            Self::PreScore => "PreScore",
            Self::Score => "Score",
            Self::Reserve => "Reserve",
            Self::Permit => "Permit",
            Self::PreBind => "PreBind",
            Self::Bind => "Bind",
            Self::PostBind => "PostBind",
            Self::PlacementGenerate => "PlacementGenerate",
            Self::PlacementScore => "PlacementScore",
            Self::EnqueueExtensions => "EnqueueExtensions",
        }
    }

    /// The camelCase key of a profile's `plugins` block.
    pub fn config_key(&self) -> &'static str {
        match self {
            Self::QueueSort => "queueSort",
            Self::PreEnqueue => "preEnqueue",
            Self::PreFilter => "preFilter",
            Self::Filter => "filter",
            Self::PostFilter => "postFilter",
            Self::PreScore => "preScore",
            Self::Score => "score",
            Self::Reserve => "reserve",
            Self::Permit => "permit",
            Self::PreBind => "preBind",
            Self::Bind => "bind",
            Self::PostBind => "postBind",
            Self::PlacementGenerate => "placementGenerate",
            Self::PlacementScore => "placementScore",
            Self::EnqueueExtensions => "enqueueExtensions",
        }
    }
}

/// A set of extension points, in the order a pod meets them. `Copy` and const-buildable,
/// so the registry can hold one per plugin.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PointSet(u16);

impl PointSet {
    /// No point.
    pub const EMPTY: Self = Self(0);

    /// Every point, [`ExtensionPoint::EnqueueExtensions`] included, in order.
    pub const ALL: [ExtensionPoint; 15] = [
        ExtensionPoint::QueueSort,
        ExtensionPoint::PreEnqueue,
        ExtensionPoint::PreFilter,
        ExtensionPoint::Filter,
        ExtensionPoint::PostFilter,
        ExtensionPoint::PreScore,
        ExtensionPoint::Score,
        ExtensionPoint::Reserve,
        ExtensionPoint::Permit,
        ExtensionPoint::PreBind,
        ExtensionPoint::Bind,
        ExtensionPoint::PostBind,
        ExtensionPoint::PlacementGenerate,
        ExtensionPoint::PlacementScore,
        ExtensionPoint::EnqueueExtensions,
    ];

    /// This set and `point`.
    #[must_use]
    pub const fn with(self, point: ExtensionPoint) -> Self {
        Self(self.0 | (1 << point as u16))
    }

    /// Whether `point` is in the set.
    pub const fn contains(self, point: ExtensionPoint) -> bool {
        self.0 & (1 << point as u16) != 0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The points, in the order a pod meets them.
    pub fn iter(self) -> impl Iterator<Item = ExtensionPoint> {
        Self::ALL.into_iter().filter(move |p| self.contains(*p))
    }

    /// The points as a vector, in order.
    pub fn to_vec(self) -> Vec<ExtensionPoint> {
        self.iter().collect()
    }
}

impl FromIterator<ExtensionPoint> for PointSet {
    fn from_iter<I: IntoIterator<Item = ExtensionPoint>>(iter: I) -> Self {
        iter.into_iter().fold(Self::EMPTY, Self::with)
    }
}

impl std::fmt::Debug for PointSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A scheduling plugin. One object serves every point it implements.
pub trait Plugin: Send + Sync + 'static {
    /// The registered name, e.g. `NodeResourcesFit`.
    fn name(&self) -> &str;

    /// The QueueSort side, if implemented.
    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        None
    }
    /// The PreEnqueue side, if implemented.
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        None
    }
    /// The PreFilter side, if implemented.
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        None
    }
    /// The Filter side, if implemented.
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        None
    }
    /// The PostFilter side, if implemented.
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        None
    }
    /// The PreScore side, if implemented.
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        None
    }
    /// The Score side, if implemented.
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        None
    }
    /// The Reserve side, if implemented.
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        None
    }
    /// The Permit side, if implemented.
    fn as_permit(&self) -> Option<&dyn PermitPlugin> {
        None
    }
    /// The PreBind side, if implemented.
    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        None
    }
    /// The Bind side, if implemented.
    fn as_bind(&self) -> Option<&dyn BindPlugin> {
        None
    }
    /// The PostBind side, if implemented.
    fn as_post_bind(&self) -> Option<&dyn PostBindPlugin> {
        None
    }
    /// The cluster events that may make a pod this plugin rejected schedulable.
    fn as_enqueue_extensions(&self) -> Option<&dyn EnqueueExtensions> {
        None
    }
    /// The pod-event side, if implemented.
    fn as_pod_events(&self) -> Option<&dyn PodEventsPlugin> {
        None
    }
    /// The plugin as a group-cycle PlacementFeasible plugin (GenericWorkload), if it is one.
    fn as_placement_feasible(&self) -> Option<&dyn crate::workload::PlacementFeasiblePlugin> {
        None
    }
    /// The PlacementGenerate side (TopologyAwareWorkloadScheduling), if implemented.
    fn as_placement_generate(&self) -> Option<&dyn crate::workload::PlacementGeneratePlugin> {
        None
    }
    /// The PlacementScore side (TopologyAwareWorkloadScheduling), if implemented.
    fn as_placement_score(&self) -> Option<&dyn crate::workload::PlacementScorePlugin> {
        None
    }
}

/// Orders the active queue. All profiles share one.
pub trait QueueSortPlugin: Send + Sync {
    /// Whether `a` goes before `b`.
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool;
}

/// Decides whether a pod may enter the active queue at all.
pub trait PreEnqueuePlugin: Send + Sync {
    /// Success lets the pod in; a rejection keeps it gated.
    fn pre_enqueue(&self, pod: &PodInfo) -> Status;
}

/// Which nodes PreFilter already knows are the only candidates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreFilterResult {
    /// None: every node. Some: only these.
    pub node_names: Option<BTreeSet<String>>,
}

impl PreFilterResult {
    /// Every node.
    pub fn all_nodes() -> Self {
        Self { node_names: None }
    }

    /// Only these nodes.
    pub fn nodes(names: impl IntoIterator<Item = String>) -> Self {
        Self {
            node_names: Some(names.into_iter().collect()),
        }
    }

    /// Whether every node is a candidate.
    pub fn all(&self) -> bool {
        self.node_names.is_none()
    }

    /// The intersection with another result.
    pub fn merge(&self, other: &PreFilterResult) -> PreFilterResult {
        match (&self.node_names, &other.node_names) {
            (None, None) => Self::all_nodes(),
            (Some(a), None) | (None, Some(a)) => Self {
                node_names: Some(a.clone()),
            },
            (Some(a), Some(b)) => Self {
                node_names: Some(a.intersection(b).cloned().collect()),
            },
        }
    }
}

/// Per-cycle precomputation before Filter, and narrowing of candidate nodes.
pub trait PreFilterPlugin: Send + Sync {
    /// Computes the cycle's state for `pod`. Skip disables this plugin's Filter for the pod.
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status);

    /// Incremental updates of the state when pods are added or removed hypothetically
    /// (nominated pods, preemption victims). None when the state does not depend on pods.
    fn pre_filter_extensions(&self) -> Option<&dyn PreFilterExtensions> {
        None
    }
}

/// Keeps PreFilter state exact when pods are added or removed after PreFilter ran.
pub trait PreFilterExtensions: Send + Sync {
    /// `pod_to_add` is now on `node`.
    fn add_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &PodInfo,
        pod_to_add: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status;

    /// `pod_to_remove` is no longer on `node`.
    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &PodInfo,
        pod_to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status;
}

/// Decides whether a pod can run on a node.
pub trait FilterPlugin: Send + Sync {
    /// Success when the pod fits on `node`.
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status;

    /// Explain mode only: what would make this plugin accept `node` after [`filter`]
    /// rejected it, computed from the same cycle state. Called by `--explain` and
    /// `kubesched explain` after the verdicts, never while scheduling. Default: nothing
    /// known (the rejection's reasons still show).
    ///
    /// [`filter`]: FilterPlugin::filter
    fn remedies(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        _node: &NodeInfo,
    ) -> Vec<crate::Remedy> {
        Vec::new()
    }
}

/// What PostFilter decided, e.g. the node a preemptor is nominated to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PostFilterResult {
    /// The nominated node, if any.
    pub nominated_node_name: Option<String>,
}

/// Runs when no node fits: preemption lives here.
#[async_trait]
pub trait PostFilterPlugin: Send + Sync {
    /// Tries to make the pod schedulable. The framework is passed so the plugin can run
    /// Filter plugins on hypothetical node states.
    async fn post_filter(
        &self,
        framework: &Framework,
        state: &CycleState,
        pod: &Arc<PodInfo>,
        statuses: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status);
}

/// Per-cycle precomputation before Score.
pub trait PreScorePlugin: Send + Sync {
    /// Skip disables this plugin's Score for the pod.
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Status;
}

/// Ranks feasible nodes.
pub trait ScorePlugin: Send + Sync {
    /// The raw score of `node`.
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status>;

    /// Whether `normalize_score` does anything (skips a pass when not).
    fn has_normalize_score(&self) -> bool {
        false
    }

    /// Rescales `scores` (aligned with `nodes`) into `0..=MAX_NODE_SCORE`.
    fn normalize_score(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
        _scores: &mut [i64],
    ) -> Status {
        Status::success()
    }
}

/// Holds resources for a pod on its node until binding ends.
pub trait ReservePlugin: Send + Sync {
    /// Reserves; a failure rejects the pod on this node.
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node_name: &str) -> Status;
    /// Releases what `reserve` took. Must be idempotent.
    fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, node_name: &str);
}

/// Approves, rejects or delays the binding of a pod.
pub trait PermitPlugin: Send + Sync {
    /// Success, a rejection, or Wait with the longest time to wait.
    fn permit(&self, state: &CycleState, pod: &PodInfo, node_name: &str) -> (Status, Duration);
}

/// Work that must succeed before binding (e.g. provisioning volumes).
#[async_trait]
pub trait PreBindPlugin: Send + Sync {
    /// Skip when there is nothing to do for this pod.
    async fn pre_bind(&self, state: &CycleState, pod: &PodInfo, node_name: &str) -> Status;

    /// Whether PreBind will have work for this pod on this node (upstream's
    /// PreBindPreFlight, asked first when NominatedNodeNameForExpectation is on): Success
    /// if it will, Skip if not (PreBind is then not called for the pod), Error if it
    /// cannot tell. Any other code is an error. The default says it will: at worst a
    /// `nominatedNodeName` the pod did not need.
    fn pre_bind_pre_flight(&self, _state: &CycleState, _pod: &PodInfo, _node_name: &str) -> Status {
        Status::success()
    }

    /// Whether this plugin's PreBind may run at the same time as its neighbours in the
    /// PreBind list that allow it too (upstream's `PreBindPreFlightResult.AllowParallel`,
    /// v1.36, #135393), asked right after a pre-flight that said Success. The default,
    /// false, keeps the plugin on its own: everything before it has finished when it
    /// starts, and nothing after it starts before it has finished.
    fn pre_bind_allows_parallel(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        _node_name: &str,
    ) -> bool {
        false
    }
}

/// Binds a pod to a node.
#[async_trait]
pub trait BindPlugin: Send + Sync {
    /// Skip lets the next Bind plugin try.
    async fn bind(&self, state: &CycleState, pod: &PodInfo, node_name: &str) -> Status;
}

/// Told after a successful bind.
pub trait PostBindPlugin: Send + Sync {
    /// Informational only.
    fn post_bind(&self, state: &CycleState, pod: &PodInfo, node_name: &str);
}

/// Told of every pod change the scheduler's event handlers receive (pods of any scheduler,
/// bound or not, including the update that makes a pod finish and its deletion), after the
/// cache and the queue took it in. Not an extension point of the scheduling cycle: for
/// plugins that keep state derived from pods outside the cycle (Coscheduling keeps its
/// PodGroups' running/succeeded/failed counts with it). Runs on the event handler's thread:
/// it must be quick and must not block; slow work goes to [`Handle::spawn_background`].
///
/// [`Handle::spawn_background`]: crate::Handle::spawn_background
pub trait PodEventsPlugin: Send + Sync {
    /// `old` is None for an added pod, `new` None for a deleted one.
    fn on_pod_event(
        &self,
        old: Option<&k8s_openapi::api::core::v1::Pod>,
        new: Option<&k8s_openapi::api::core::v1::Pod>,
    );
}

/// Which cluster events may make a pod this plugin rejected schedulable.
pub trait EnqueueExtensions: Send + Sync {
    /// The events, each with an optional hint.
    fn events_to_register(&self) -> Vec<ClusterEventWithHint>;
}

/// The highest score a Score plugin may give after normalisation.
pub const MAX_NODE_SCORE: i64 = 100;
/// The lowest.
pub const MIN_NODE_SCORE: i64 = 0;
/// The highest total extender score before it is scaled to node scores.
pub const MAX_EXTENDER_PRIORITY: i64 = 10;
