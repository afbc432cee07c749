//! The scheduler: the scheduling cycle and the binding cycle (upstream's schedule_one.go);
//! the event handlers that feed it are in `scheduler/event_handlers.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kubesched_cache::Cache;
use kubesched_framework::events::{ActionType, ClusterEvent, EventObject, EventResource};
use kubesched_framework::model::{Node, NodeInfo, PodInfo, PodObject};
use kubesched_framework::{
    Code, CycleState, EXTENDER_NAME, Event, EventType, Feature, Framework, Handle, HandleControl,
    NodeToStatus, ObjectRef, PodScheduledCondition, PodStatusUpdate, PreemptionExplainer,
    QueuedPodInfo, ScoreTable, Snapshot, Status,
};
use kubesched_queue::SchedulingQueue;
use parking_lot::Mutex;

use crate::changes::{ClusterChange, node_update_actions};
use crate::compiled_pods::CompiledPods;
use crate::explain::{Explanation, ExtenderExplanation, NodeExplanation, PluginScoreExplanation};
use crate::extender::cycle::{self as extenders, FilterTrace};
use crate::fit_error::{Diagnosis, FitError, NO_NODES_AVAILABLE};
use crate::metrics::{AttemptResult, BINDING, SchedulerMetrics};

/// Below this many nodes every node is evaluated.
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// The adaptive percentage never drops below this.
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: usize = 5;
/// Share of cycles (in percent) whose per-plugin durations are recorded.
pub const PLUGIN_METRICS_SAMPLE_PERCENT: u32 = 10;
/// Longest event note upstream allows (`validation.NoteLengthLimit`).
pub const NOTE_LENGTH_LIMIT: usize = 1024;

/// The nomination outcome of a failure that is not PostFilter's: clear the pod's
/// nominatedNodeName (upstream's `clearNominatedNode`). v1.34 had stopped clearing it
/// (kubernetes#133276); v1.35 brought the clearing back after scheduling and binding
/// failures (kubernetes#135007), also when a profile has no PostFilter plugins. The
/// status patch clears it only where the pod, as the attempt saw it, had one.
const CLEAR_NOMINATION: Option<Option<String>> = Some(None);

mod event_handlers;
mod pod_group;
pub use pod_group::{NO_PODS_SCHEDULABLE, PodGroupOutcome};

/// Nodes Filter rejected: each one's index in the filtered list, with its status.
type Rejected = Vec<(usize, Status)>;

/// How many feasible nodes to look for: all of them under 100 nodes or at 100 %, else the
/// adaptive percentage (50 − nodes/125, floor 5 %), never fewer than 100.
pub fn num_feasible_nodes_to_find(percentage: i32, num_all_nodes: usize) -> usize {
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND {
        return num_all_nodes;
    }
    let mut pct = percentage.max(0) as usize;
    if pct == 0 {
        pct = 50usize
            .saturating_sub(num_all_nodes / 125)
            .max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND);
    }
    let n = num_all_nodes * pct / 100;
    n.max(MIN_FEASIBLE_NODES_TO_FIND).min(num_all_nodes)
}

/// Settings of the scheduling loop.
#[derive(Debug, Clone, Default)]
pub struct SchedulerOptions {
    /// Global percentageOfNodesToScore (0 = adaptive).
    pub percentage_of_nodes_to_score: i32,
    /// Seed of the tie-breaking RNG; None seeds from the OS.
    pub seed: Option<u64>,
}

/// The final outcome of one scheduling attempt, as observers see it.
#[derive(Debug, Clone)]
pub enum AttemptOutcome {
    /// Bound to the node.
    Scheduled {
        /// The node.
        node: String,
    },
    /// Rejected; the message is the FailedScheduling message.
    Unschedulable {
        /// The message.
        message: String,
        /// The node the pod is nominated to after this attempt (PostFilter's choice, or
        /// an earlier nomination it kept).
        nominated_node: Option<String>,
    },
    /// An internal error.
    Error {
        /// The message.
        message: String,
        /// The node the pod is nominated to after this attempt.
        nominated_node: Option<String>,
    },
}

/// The backend's latest copy of each pod (its informer view).
pub trait PodLister: Send + Sync {
    /// The pod `namespace/name` as last observed, if it still exists.
    fn get(&self, namespace: &str, name: &str) -> Option<PodObject>;
}

/// Receives the outcome of every attempt (the simulator records them; tests assert them).
pub trait AttemptObserver: Send + Sync {
    /// One attempt of `pod` ended with `outcome`, `latency` after it was popped.
    fn attempt(&self, pod: &PodInfo, outcome: &AttemptOutcome, latency: Duration);
    /// Whether this pod's attempts are explained, and how much of them.
    fn explanation_scope(&self, _pod: &PodInfo) -> Option<ExplanationScope> {
        None
    }
    /// The explanation of one attempt, when asked for (after PostFilter, so it includes
    /// what preemption considered).
    fn explanation(&self, _pod: &PodInfo, _explanation: Explanation) {}
    /// One pod-group cycle ended (GenericWorkload); its members' attempts are reported
    /// one by one as well.
    fn pod_group_attempt(&self, _outcome: &PodGroupOutcome) {}
}

/// How much of an attempt an [`AttemptObserver`] wants explained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExplanationScope {
    /// Every node's Filter verdict and every feasible node's scores, computed again for
    /// the explanation past where the attempt stopped (what `--explain` shows).
    AllNodes,
    /// What the attempt itself computed: the verdicts of the nodes it examined and the
    /// scores it gave, the nodes past the point where enough feasible ones were found
    /// counted, not shown. It costs little over the attempt, so a run can explain every
    /// pod. An attempt that finds no node, or one with extenders (which the attempt keeps
    /// no traces of), is explained whole.
    Examined,
}

/// What the attempt's Filter pass saw, kept for an [`ExplanationScope::Examined`]
/// explanation.
#[derive(Default)]
struct ExaminedNodes {
    /// Nodes Filter rejected, with why.
    rejected: Vec<(Arc<NodeInfo>, Status)>,
    /// The nodes PreFilter narrowed the pass to, and the status of the others.
    narrowed: Option<(BTreeSet<String>, Status)>,
    /// Whether the attempt took the node an earlier preemption nominated without a pass
    /// over the others (then it is explained whole: the others were never looked at).
    nominated_only: bool,
}

struct ScheduleResult {
    suggested_host: String,
}

enum CycleError {
    Fit(Box<FitError>),
    NoNodes,
    Internal(Status),
}

/// One scheduler: profiles, cache, queue and the loop that joins them.
pub struct Scheduler {
    profiles: BTreeMap<String, Arc<Framework>>,
    cache: Arc<Cache>,
    queue: Arc<SchedulingQueue>,
    /// The handle shared by every framework, with the setters only the scheduler calls.
    handle: HandleControl,
    metrics: Arc<SchedulerMetrics>,
    options: SchedulerOptions,
    next_start_node_index: AtomicUsize,
    /// Nodes the scheduling cycles ran Filter on (see [`Scheduler::nodes_filtered`]).
    nodes_filtered: AtomicU64,
    rng: Mutex<fastrand::Rng>,
    observer: Mutex<Option<Arc<dyn AttemptObserver>>>,
    /// The explanation of the attempt in progress, completed after PostFilter.
    explaining: Mutex<Option<Explanation>>,
    /// The nodes of the placement a pod-group cycle is trying (TopologyAwareWorkloadScheduling):
    /// while set, each member's Filter and Score see only these nodes.
    placement: Mutex<Option<Arc<std::collections::HashSet<String>>>>,
    pod_lister: Mutex<Option<Arc<dyn PodLister>>>,
    in_flight_bindings: Arc<AtomicUsize>,
    compiled_pods: Arc<CompiledPods>,
    /// Scheduling errors seen, so a repeated one warns once per power of ten.
    repeated_errors: crate::repeated::RepeatedErrors,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("profiles", &self.profiles.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Scheduler {
    /// Joins the parts. All frameworks must share `handle`'s handle.
    pub fn new(
        profiles: BTreeMap<String, Arc<Framework>>,
        cache: Arc<Cache>,
        queue: Arc<SchedulingQueue>,
        handle: HandleControl,
        metrics: Arc<SchedulerMetrics>,
        options: SchedulerOptions,
    ) -> Self {
        Self::with_compiled_pods(
            profiles,
            cache,
            queue,
            handle,
            metrics,
            options,
            Arc::new(CompiledPods::default()),
        )
    }

    /// Joins the parts, with the pod view the handle's [`LivePods`](kubesched_framework::LivePods) reads.
    pub(crate) fn with_compiled_pods(
        profiles: BTreeMap<String, Arc<Framework>>,
        cache: Arc<Cache>,
        queue: Arc<SchedulingQueue>,
        handle: HandleControl,
        metrics: Arc<SchedulerMetrics>,
        options: SchedulerOptions,
        compiled_pods: Arc<CompiledPods>,
    ) -> Self {
        let rng = match options.seed {
            Some(s) => fastrand::Rng::with_seed(s),
            None => fastrand::Rng::new(),
        };
        Self {
            profiles,
            cache,
            queue,
            handle,
            metrics,
            options,
            next_start_node_index: AtomicUsize::new(0),
            nodes_filtered: AtomicU64::new(0),
            rng: Mutex::new(rng),
            observer: Mutex::new(None),
            explaining: Mutex::new(None),
            placement: Mutex::new(None),
            pod_lister: Mutex::new(None),
            in_flight_bindings: Arc::new(AtomicUsize::new(0)),
            compiled_pods,
            repeated_errors: Default::default(),
        }
    }

    /// Sets the observer of attempts.
    pub fn set_observer(&self, observer: Arc<dyn AttemptObserver>) {
        *self.observer.lock() = Some(observer);
    }

    /// Sets the backend's pod view, read before a failed pod goes back to the queue.
    pub fn set_pod_lister(&self, lister: Arc<dyn PodLister>) {
        *self.pod_lister.lock() = Some(lister);
    }

    /// The informer's current copy of a pod whose attempt failed, which is what goes back
    /// to the queue (as upstream re-reads its lister): an update that arrived during the
    /// cycle (labels, tolerations, ...) is then not lost. None when the backend no longer
    /// has the pod (deleted, or replaced under the same name) or sees it bound (by a bind
    /// that answered with an error, or by someone else): it does not go back then.
    fn latest_pending(&self, pod: &Arc<PodInfo>) -> Option<Arc<PodInfo>> {
        let Some(lister) = self.pod_lister.lock().clone() else {
            // No backend view: the objects the event handlers last saw are the view.
            return Some(
                self.compiled_pods
                    .latest(&pod.uid)
                    .unwrap_or_else(|| pod.clone()),
            );
        };
        match lister.get(&pod.namespace, &pod.name) {
            Some(live) if live.key() == pod.uid => {
                if live.is_assigned() {
                    tracing::info!(pod = %pod.key(), "pod has been assigned to a node; not adding it back to the queue");
                    None
                } else {
                    // A copy that does not compile is retried as it was popped.
                    Some(
                        self.compiled_pods
                            .previous(&live)
                            .unwrap_or_else(|| pod.clone()),
                    )
                }
            }
            _ => {
                tracing::info!(pod = %pod.key(), "pod no longer exists; not adding it back to the queue");
                None
            }
        }
    }

    /// The cache.
    pub fn cache(&self) -> &Arc<Cache> {
        &self.cache
    }

    /// The queue.
    pub fn queue(&self) -> &Arc<SchedulingQueue> {
        &self.queue
    }

    /// The handle shared by all profiles.
    pub fn handle(&self) -> &Handle {
        self.handle.handle()
    }

    /// The metrics.
    pub fn metrics(&self) -> &Arc<SchedulerMetrics> {
        &self.metrics
    }

    /// How many nodes the scheduling cycles have run the Filter plugins on since the
    /// scheduler was built: every node of every Filter pass, the nominated-node pass
    /// included, and the nodes a parallel chunk evaluated past the point where enough
    /// feasible nodes were found. Preemption's dry runs and explanations are not counted.
    /// The bench divides it by wall time ("nodes examined per second").
    pub fn nodes_filtered(&self) -> u64 {
        self.nodes_filtered.load(Ordering::Relaxed)
    }

    /// The profiles by scheduler name.
    pub fn profiles(&self) -> &BTreeMap<String, Arc<Framework>> {
        &self.profiles
    }

    /// Binding cycles still running.
    pub fn in_flight_bindings(&self) -> usize {
        self.in_flight_bindings.load(Ordering::SeqCst)
    }

    /// Takes the snapshot out of the handle, brings it up to date with the cache and puts
    /// it back; copies only the nodes that changed.
    fn update_snapshot(&self) -> Result<(), Status> {
        let mut snap = self.handle.snapshot();
        self.handle.set_snapshot(Arc::new(Snapshot::default()));
        let result = self.cache.update_snapshot(Arc::make_mut(&mut snap));
        self.handle.set_snapshot(snap);
        result.map_err(|e| Status::error(format!("updating the snapshot: {e}")))
    }

    /// Pops the next pod (waiting for one) and schedules it. Returns false when the queue
    /// was closed.
    pub async fn schedule_one(self: &Arc<Self>) -> bool {
        let Some(qpi) = self.queue.pop_wait().await else {
            return false;
        };
        self.schedule_queued(qpi).await;
        true
    }

    /// Pops the next pod if one is ready and schedules it; false when none was ready.
    pub async fn schedule_next_ready(self: &Arc<Self>) -> bool {
        let Some(qpi) = self.queue.pop() else {
            return false;
        };
        self.schedule_queued(qpi).await;
        true
    }

    async fn schedule_queued(self: &Arc<Self>, qpi: QueuedPodInfo) {
        let pod = qpi.pod_info.clone();
        let Some(fw) = self.profiles.get(&pod.scheduler_name).cloned() else {
            tracing::error!(pod = %pod.key(), scheduler = %pod.scheduler_name, "profile not found for scheduler name");
            self.queue.done(&pod.uid);
            return;
        };
        if pod.terminating {
            self.handle.client().record_event(Event {
                regarding: ObjectRef::pod(&pod),
                event_type: EventType::Warning,
                reason: "FailedScheduling".into(),
                action: "Scheduling".into(),
                note: format!("skip schedule deleting pod: {}/{}", pod.namespace, pod.name),
                related: None,
            });
            self.queue.done(&pod.uid);
            return;
        }
        if self.cache.is_assumed_pod(&pod.uid) {
            self.queue.done(&pod.uid);
            return;
        }
        if let Some(pg) = self.pod_group_of(&pod) {
            self.schedule_pod_group(fw, qpi, pg).await;
            return;
        }
        let start = Instant::now();
        let pod_cycle = self.queue.scheduling_cycle();
        let mut state = CycleState::new();
        state.record_plugin_metrics = self.rng.lock().u32(0..100) < PLUGIN_METRICS_SAMPLE_PERCENT;

        match self.scheduling_cycle(&fw, &mut state, &pod).await {
            Ok(result) => {
                self.metrics.algorithm(start.elapsed());
                self.after_schedule(fw, state, qpi, result, start, pod_cycle)
                    .await;
            }
            Err((status, diagnosis_plugins, nominated)) => {
                self.metrics.algorithm(start.elapsed());
                self.handle_failure(
                    &fw,
                    qpi,
                    status,
                    diagnosis_plugins,
                    nominated,
                    start,
                    pod_cycle,
                );
            }
        }
        self.refresh_cache_gauges();
    }

    /// Filter and score; on success the chosen node. On failure the status to report,
    /// the rejecting plugins, and the node to nominate (from PostFilter).
    async fn scheduling_cycle(
        &self,
        fw: &Arc<Framework>,
        state: &mut CycleState,
        pod: &Arc<PodInfo>,
    ) -> Result<ScheduleResult, (Status, Option<Diagnosis>, Option<Option<String>>)> {
        // The whole synchronous cycle runs on the worker pool, so the Filter and Score
        // passes inside it start from a pool thread: one hand-off per cycle instead of a
        // sleep and wake-up of this thread for every parallel pass.
        let outcome = self
            .handle
            .parallelizer()
            .install(|| self.schedule_pod(fw, state, pod));
        let mut explanation = self.explaining.lock().take();
        let result = match outcome {
            Ok(r) => Ok(r),
            Err(CycleError::NoNodes) => Err((
                Status::unresolvable(NO_NODES_AVAILABLE),
                None,
                CLEAR_NOMINATION,
            )),
            Err(CycleError::Internal(s)) => Err((s, None, CLEAR_NOMINATION)),
            Err(CycleError::Fit(mut fit)) => {
                // Without PostFilter plugins no preemption can have nominated the pod:
                // cleared, as upstream (kubernetes#135007). With them, PostFilter's result
                // decides (none: left as it is).
                let mut nominated = CLEAR_NOMINATION;
                if fw.has_post_filter_plugins() {
                    self.metrics.preemption_attempt();
                    let explainer = explanation.as_ref().map(|_| {
                        let explainer = PreemptionExplainer::default();
                        state.write(explainer.clone());
                        explainer
                    });
                    let (result, status) = fw
                        .run_post_filter_plugins(state, pod, &fit.diagnosis.node_to_status)
                        .await;
                    if let (Some(e), Some(explainer)) = (explanation.as_mut(), explainer) {
                        e.preemption = explainer.take().into_iter().next();
                        state.delete::<PreemptionExplainer>();
                    }
                    fit.diagnosis.post_filter_msg = status.message();
                    if status.code() == Code::Error {
                        tracing::error!(pod = %pod.key(), status = %status, "running PostFilter plugins");
                    }
                    nominated = result.map(|r| r.nominated_node_name);
                }
                let status = Status::unschedulable(fit.message());
                Err((status, Some(fit.diagnosis), nominated))
            }
        };
        if let Some(e) = explanation
            && let Some(o) = self.observer.lock().clone()
        {
            o.explanation(pod, e);
        }
        result
    }

    fn schedule_pod(
        &self,
        fw: &Arc<Framework>,
        state: &mut CycleState,
        pod: &Arc<PodInfo>,
    ) -> Result<ScheduleResult, CycleError> {
        self.update_snapshot().map_err(CycleError::Internal)?;
        let placement = self.placement.lock().clone();
        let Some(keep) = placement else {
            return self.schedule_pod_on_snapshot(fw, state, pod);
        };
        // Within a placement the cycle, plugins included, sees only its nodes, as upstream's
        // snapshot does after AssumePlacement; the whole snapshot comes back afterwards, so
        // the next update starts from it.
        let full = self.handle.snapshot();
        self.handle
            .set_snapshot(Arc::new(full.restricted_to(&keep)));
        let out = self.schedule_pod_on_snapshot(fw, state, pod);
        self.handle.set_snapshot(full);
        out
    }

    fn schedule_pod_on_snapshot(
        &self,
        fw: &Arc<Framework>,
        state: &mut CycleState,
        pod: &Arc<PodInfo>,
    ) -> Result<ScheduleResult, CycleError> {
        let snapshot = self.handle.snapshot();
        if snapshot.num_nodes() == 0 {
            return Err(CycleError::NoNodes);
        }
        let scope = self
            .observer
            .lock()
            .as_ref()
            .and_then(|o| o.explanation_scope(pod));
        let scope = match scope {
            Some(ExplanationScope::Examined) if !self.handle.extenders().is_empty() => {
                Some(ExplanationScope::AllNodes)
            }
            other => other,
        };
        let mut examined = (scope == Some(ExplanationScope::Examined)).then(ExaminedNodes::default);
        let (feasible, diagnosis) =
            self.find_nodes_that_fit(fw, state, pod, &snapshot, examined.as_mut())?;
        if examined
            .as_ref()
            .is_some_and(|e| e.nominated_only || feasible.is_empty())
        {
            examined = None;
            self.explain(fw, state, pod, &snapshot, &diagnosis);
        } else if scope == Some(ExplanationScope::AllNodes) {
            self.explain(fw, state, pod, &snapshot, &diagnosis);
        }
        if feasible.is_empty() {
            return Err(CycleError::Fit(Box::new(FitError {
                num_all_nodes: snapshot.num_nodes(),
                diagnosis,
            })));
        }
        if feasible.len() == 1 {
            if let Some(examined) = examined {
                // The attempt does not score a lone feasible node; its explanation does,
                // on a copy of the cycle state, as a whole one would.
                let mut score_state = state.clone();
                let table = self
                    .prioritize(fw, &mut score_state, pod, &feasible, true)
                    .ok()
                    .and_then(|(_, table)| table);
                self.explain_examined(
                    fw,
                    state,
                    pod,
                    &snapshot,
                    &feasible,
                    examined,
                    table.as_ref(),
                );
            }
            return Ok(ScheduleResult {
                suggested_host: feasible[0].name().to_string(),
            });
        }
        let (totals, table) = self.prioritize(fw, state, pod, &feasible, examined.is_some())?;
        if let Some(examined) = examined {
            self.explain_examined(
                fw,
                state,
                pod,
                &snapshot,
                &feasible,
                examined,
                table.as_ref(),
            );
        }
        let host = self.select_host(&feasible, &totals);
        Ok(ScheduleResult {
            suggested_host: host,
        })
    }

    fn prioritize(
        &self,
        fw: &Arc<Framework>,
        state: &mut CycleState,
        pod: &Arc<PodInfo>,
        nodes: &[Arc<NodeInfo>],
        keep_table: bool,
    ) -> Result<(Vec<i64>, Option<ScoreTable>), CycleError> {
        let exts = self.handle.extenders();
        if !fw.has_score_plugins() && exts.is_empty() {
            return Ok((vec![1; nodes.len()], None));
        }
        let s = fw.run_pre_score_plugins(state, pod, nodes);
        if !s.is_success() {
            return Err(CycleError::Internal(s));
        }
        let mut table: ScoreTable = fw
            .run_score_plugins(state, pod, nodes)
            .map_err(CycleError::Internal)?;
        let mut totals = if keep_table {
            table.totals.clone()
        } else {
            std::mem::take(&mut table.totals)
        };
        if !exts.is_empty() {
            let scores = extenders::prioritize(exts, pod, nodes, &self.metrics);
            extenders::add_to_totals(&scores, &mut totals);
        }
        Ok((totals, keep_table.then_some(table)))
    }

    /// The highest total; ties broken uniformly at random (reservoir sampling over the
    /// nodes in order, so a seeded RNG makes the choice reproducible).
    fn select_host(&self, nodes: &[Arc<NodeInfo>], totals: &[i64]) -> String {
        let mut rng = self.rng.lock();
        let mut best = 0;
        let mut best_score = i64::MIN;
        let mut ties = 0u64;
        for (i, &score) in totals.iter().enumerate() {
            if score > best_score {
                best_score = score;
                best = i;
                ties = 1;
            } else if score == best_score {
                ties += 1;
                if rng.u64(0..ties) == 0 {
                    best = i;
                }
            }
        }
        nodes[best].name().to_string()
    }

    fn find_nodes_that_fit(
        &self,
        fw: &Arc<Framework>,
        state: &mut CycleState,
        pod: &Arc<PodInfo>,
        snapshot: &Arc<Snapshot>,
        mut examined: Option<&mut ExaminedNodes>,
    ) -> Result<(Vec<Arc<NodeInfo>>, Diagnosis), CycleError> {
        let all = snapshot.list();
        let mut diagnosis = Diagnosis::default();
        if let Some(status) = unreadable_parts_status(fw, pod) {
            // Refused as the plugin that needs the part refuses it at PreFilter upstream.
            diagnosis.pre_filter_msg = status.message();
            diagnosis.add_plugin_status(&status);
            diagnosis.node_to_status.absent = Some(status);
            return Ok((Vec::new(), diagnosis));
        }
        let pre = fw.run_pre_filter_plugins(state, pod, all);
        diagnosis.unschedulable_plugins = pre.unschedulable_plugins.clone();
        if !pre.status.is_success() {
            if !pre.status.is_rejected() {
                return Err(CycleError::Internal(pre.status));
            }
            diagnosis.pre_filter_msg = pre.status.message();
            diagnosis.add_plugin_status(&pre.status);
            diagnosis.node_to_status.absent = Some(pre.status);
            return Ok((Vec::new(), diagnosis));
        }

        // A node nominated by an earlier preemption is likely the only fit: try it first.
        if let Some(nominated) = pod.nominated_node_name.as_deref()
            && let Some(node) = snapshot.get(nominated)
        {
            {
                let mut d = diagnosis.clone();
                let (feasible, _) = self.filter_nodes(
                    fw,
                    state,
                    pod,
                    &mut d,
                    std::slice::from_ref(node),
                    usize::MAX,
                )?;
                // An extender error here only means the node is not taken at once: the
                // full pass below asks again (upstream logs it and goes on).
                let pass = extenders::filter(self.handle.extenders(), pod, feasible);
                if let Some(s) = &pass.error {
                    tracing::warn!(pod = %pod.key(), node = nominated, error = %s.message(), "evaluation failed on nominated node");
                }
                let feasible = if pass.error.is_some() {
                    Vec::new()
                } else {
                    pass.feasible
                };
                if !feasible.is_empty() {
                    if let Some(examined) = examined {
                        examined.nominated_only = true;
                    }
                    return Ok((feasible, diagnosis));
                }
            }
        }

        let narrowed: Vec<Arc<NodeInfo>>;
        let nodes: &[Arc<NodeInfo>] = match pre.result.as_ref().and_then(|r| r.node_names.as_ref())
        {
            None => all,
            Some(names) => {
                narrowed = all
                    .iter()
                    .filter(|n| names.contains(n.name()))
                    .cloned()
                    .collect();
                let plugins: Vec<&str> = pre
                    .unschedulable_plugins
                    .iter()
                    .map(String::as_str)
                    .collect();
                let absent = Status::unresolvable(format!(
                    "node(s) didn't satisfy plugin(s) [{}]",
                    plugins.join(" ")
                ));
                if let Some(examined) = examined.as_deref_mut() {
                    examined.narrowed = Some((names.clone(), absent.clone()));
                }
                diagnosis.node_to_status.absent = Some(absent);
                &narrowed
            }
        };
        let start = self.next_start_node_index.load(Ordering::Relaxed);
        let (feasible, rejected) =
            self.filter_nodes(fw, state, pod, &mut diagnosis, nodes, start)?;
        fw.record_filter_evaluations(state, feasible.len(), rejected.iter().map(|(_, s)| s));
        if let Some(examined) = examined {
            examined.rejected = rejected
                .iter()
                .map(|(i, status)| (nodes[*i].clone(), status.clone()))
                .collect();
        }
        let processed = feasible.len() + rejected.len();
        if !all.is_empty() {
            self.next_start_node_index
                .store((start + processed) % all.len(), Ordering::Relaxed);
        }
        let mut extender_statuses = Vec::new();
        let feasible = if self.handle.extenders().is_empty() {
            feasible
        } else {
            let before = feasible.len();
            let pass = extenders::filter(self.handle.extenders(), pod, feasible);
            if let Some(s) = pass.error {
                return Err(CycleError::Internal(s));
            }
            if pass.feasible.len() != before {
                // Extenders register no events: any cluster event may help the pod.
                diagnosis
                    .unschedulable_plugins
                    .insert(EXTENDER_NAME.to_string());
            }
            extender_statuses = pass.statuses;
            pass.feasible
        };
        // Per-node statuses only matter when no node fits (PostFilter and the failure
        // message read them); a pod that fits skips building the map.
        if feasible.is_empty() {
            let absent = diagnosis.node_to_status.absent.take();
            let statuses = &mut diagnosis.node_to_status;
            *statuses = NodeToStatus::for_snapshot(Arc::clone(snapshot));
            statuses.absent = absent;
            // Positions in `nodes` are the snapshot's own unless PreFilter narrowed them.
            let by_position = std::ptr::eq(nodes, all);
            for (i, status) in rejected {
                if by_position {
                    statuses.set_at(i, status);
                } else {
                    statuses.set(nodes[i].name(), status);
                }
            }
            for (node, status) in extender_statuses {
                statuses.set(&node, status);
            }
        }
        Ok((feasible, diagnosis))
    }

    /// Whether any extender filters nodes.
    fn has_extender_filters(&self) -> bool {
        self.handle.extenders().iter().any(|e| e.is_filter())
    }

    /// Whether nodes are scored at all: Score plugins, or a prioritizing extender.
    fn has_scoring(&self, fw: &Framework) -> bool {
        fw.has_score_plugins() || self.handle.extenders().iter().any(|e| e.is_prioritizer())
    }

    /// Filters `nodes` starting at `start` (rotating), in parallel chunks, stopping once
    /// enough feasible nodes are found. Results are taken in node order so a run is
    /// reproducible whatever the thread timing. Returns the feasible nodes and each
    /// rejected node's index in `nodes` with its status; rejecting plugins go into the
    /// diagnosis.
    fn filter_nodes(
        &self,
        fw: &Arc<Framework>,
        state: &CycleState,
        pod: &Arc<PodInfo>,
        diagnosis: &mut Diagnosis,
        nodes: &[Arc<NodeInfo>],
        start: usize,
    ) -> Result<(Vec<Arc<NodeInfo>>, Rejected), CycleError> {
        let n = nodes.len();
        let mut rejected = Vec::new();
        if n == 0 {
            return Ok((Vec::new(), rejected));
        }
        let pct = fw
            .percentage_of_nodes_to_score()
            .unwrap_or(self.options.percentage_of_nodes_to_score);
        let mut to_find = num_feasible_nodes_to_find(pct, n);
        if !self.has_extender_filters() && !self.has_scoring(fw) {
            to_find = 1;
        }
        let start = if start == usize::MAX { 0 } else { start % n };
        let mut feasible = Vec::with_capacity(to_find.min(n));
        if !fw.has_filter_plugins() {
            for i in 0..to_find.min(n) {
                feasible.push(nodes[(start + i) % n].clone());
            }
            return Ok((feasible, rejected));
        }
        let par = self.handle.parallelizer();
        let mut offset = 0;
        while offset < n && feasible.len() < to_find {
            // Sequentially, one node at a time stops exactly when enough are found. In
            // parallel, a chunk about the size of what is still missing keeps the workers
            // busy while wasting little work past the stopping point.
            let len = if par.is_parallel() {
                (to_find - feasible.len()).max(64).min(n - offset)
            } else {
                1
            };
            let statuses = if state.record_plugin_metrics {
                // Sampled cycle: each worker keeps its plugin timings until its share of
                // the pass is done, instead of locking a shared histogram per node.
                par.map_init(
                    len,
                    || fw.filter_timings(),
                    |timings, k| {
                        let node = &nodes[(start + offset + k) % n];
                        fw.run_filter_plugins_with_nominated_pods_into(state, pod, node, timings)
                    },
                )
            } else {
                par.map(len, |k| {
                    let node = &nodes[(start + offset + k) % n];
                    fw.run_filter_plugins_with_nominated_pods(state, pod, node)
                })
            };
            self.nodes_filtered.fetch_add(len as u64, Ordering::Relaxed);
            for (k, status) in statuses.into_iter().enumerate() {
                if feasible.len() >= to_find {
                    break;
                }
                let i = (start + offset + k) % n;
                if status.is_success() {
                    feasible.push(nodes[i].clone());
                } else if status.code() == Code::Error {
                    return Err(CycleError::Internal(status));
                } else {
                    diagnosis.add_plugin_status(&status);
                    rejected.push((i, status));
                }
            }
            offset += len;
        }
        Ok((feasible, rejected))
    }

    /// Full per-node Filter and Score results for an observer that asked for them.
    fn explain(
        &self,
        fw: &Arc<Framework>,
        state: &CycleState,
        pod: &Arc<PodInfo>,
        snapshot: &Arc<Snapshot>,
        diagnosis: &Diagnosis,
    ) {
        let all = snapshot.list();
        let mut nodes: Vec<NodeExplanation> = Vec::with_capacity(all.len());
        let mut feasible = Vec::new();
        for node in all {
            let status = if diagnosis.pre_filter_msg.is_empty() {
                fw.run_filter_plugins_with_nominated_pods(state, pod, node)
            } else {
                diagnosis
                    .node_to_status
                    .absent
                    .clone()
                    .unwrap_or_else(Status::success)
            };
            let mut explained = NodeExplanation::from_status(node.name(), &status);
            if status.is_success() {
                feasible.push(node.clone());
            } else if status.is_rejected() && diagnosis.pre_filter_msg.is_empty() {
                explained.remedies = fw.filter_remedies(state, pod, node);
            }
            nodes.push(explained);
        }
        let position: HashMap<String, usize> = nodes
            .iter()
            .enumerate()
            .map(|(i, e)| (e.node.clone(), i))
            .collect();
        let exts = self.handle.extenders();
        let mut extender_failed = false;
        if !feasible.is_empty() && !exts.is_empty() {
            let names: Vec<String> = feasible.iter().map(|n| n.name().to_string()).collect();
            let pass = extenders::filter(exts, pod, feasible);
            explain_extender_filter(&mut nodes, &position, names, &pass.traces);
            extender_failed = pass.error.is_some();
            feasible = pass.feasible;
        }
        if !feasible.is_empty() && !extender_failed && (fw.has_score_plugins() || !exts.is_empty())
        {
            let mut score_state = state.clone();
            let table = fw
                .run_pre_score_plugins(&mut score_state, pod, &feasible)
                .is_success()
                .then(|| fw.run_score_plugins(&score_state, pod, &feasible).ok())
                .flatten();
            if let Some(table) = &table {
                explain_scores(&mut nodes, &position, &feasible, table);
                if !exts.is_empty() {
                    let scores = extenders::prioritize(exts, pod, &feasible, &self.metrics);
                    explain_extender_scores(&mut nodes, &position, &feasible, &scores);
                }
            }
        }
        // Sent by the scheduling cycle once PostFilter has added what preemption considered.
        *self.explaining.lock() = Some(Explanation {
            pod: pod.key(),
            profile: fw.profile_name().to_string(),
            attempt: None,
            nodes,
            unexamined: 0,
            preemption: None,
        });
    }

    /// An [`ExplanationScope::Examined`] explanation of an attempt that found `feasible`:
    /// the nodes in snapshot order, each with the verdict the attempt's Filter pass gave
    /// and the scores it gave (`table`, aligned with `feasible`, when it scored).
    #[allow(clippy::too_many_arguments)]
    fn explain_examined(
        &self,
        fw: &Arc<Framework>,
        state: &CycleState,
        pod: &Arc<PodInfo>,
        snapshot: &Arc<Snapshot>,
        feasible: &[Arc<NodeInfo>],
        examined: ExaminedNodes,
        table: Option<&ScoreTable>,
    ) {
        let mut verdicts: HashMap<&str, Option<&Status>> =
            HashMap::with_capacity(feasible.len() + examined.rejected.len());
        for node in feasible {
            verdicts.insert(node.name(), None);
        }
        for (node, status) in &examined.rejected {
            verdicts.insert(node.name(), Some(status));
        }
        let success = Status::success();
        let mut nodes = Vec::with_capacity(verdicts.len());
        let mut unexamined = 0;
        for node in snapshot.list() {
            let status = match verdicts.get(node.name()) {
                Some(Some(status)) => *status,
                Some(None) => &success,
                None => match &examined.narrowed {
                    Some((names, absent)) if !names.contains(node.name()) => absent,
                    _ => {
                        unexamined += 1;
                        continue;
                    }
                },
            };
            let mut explained = NodeExplanation::from_status(node.name(), status);
            if status.is_rejected() && verdicts.contains_key(node.name()) {
                explained.remedies = fw.filter_remedies(state, pod, node);
            }
            nodes.push(explained);
        }
        if let Some(table) = table {
            let position: HashMap<String, usize> = nodes
                .iter()
                .enumerate()
                .map(|(i, e)| (e.node.clone(), i))
                .collect();
            explain_scores(&mut nodes, &position, feasible, table);
        }
        *self.explaining.lock() = Some(Explanation {
            pod: pod.key(),
            profile: fw.profile_name().to_string(),
            attempt: None,
            nodes,
            unexamined,
            preemption: None,
        });
    }

    async fn after_schedule(
        self: &Arc<Self>,
        fw: Arc<Framework>,
        mut state: CycleState,
        qpi: QueuedPodInfo,
        result: ScheduleResult,
        start: Instant,
        pod_cycle: u64,
    ) {
        let host = result.suggested_host;
        let mut assumed = (*qpi.pod_info).clone();
        assumed.node_name = Some(host.clone());
        let assumed = Arc::new(assumed);
        if let Err(e) = self.cache.assume_pod(assumed.clone()) {
            let s = Status::error(format!("assuming pod: {e}"));
            self.handle_failure(&fw, qpi, s, None, CLEAR_NOMINATION, start, pod_cycle);
            return;
        }
        self.handle.nominator().remove(&assumed.uid);

        let reserve = fw.run_reserve_plugins_reserve(&mut state, &assumed, &host);
        if !reserve.is_success() {
            fw.run_reserve_plugins_unreserve(&mut state, &assumed, &host);
            let _ = self.cache.forget_pod(&assumed.uid);
            let diag = rejection_diagnosis(&host, &reserve);
            let s = rejection_status(reserve, &host);
            self.handle_failure(&fw, qpi, s, diag, CLEAR_NOMINATION, start, pod_cycle);
            return;
        }
        self.permit_and_bind(fw, state, qpi, assumed, host, start, pod_cycle);
    }

    /// After Reserve: the Permit plugins, then the binding cycle on its own task; a Permit
    /// rejection undoes the reservation and fails the pod.
    #[allow(clippy::too_many_arguments)]
    fn permit_and_bind(
        self: &Arc<Self>,
        fw: Arc<Framework>,
        mut state: CycleState,
        qpi: QueuedPodInfo,
        assumed: Arc<PodInfo>,
        host: String,
        start: Instant,
        pod_cycle: u64,
    ) {
        let permit = fw.run_permit_plugins(&state, &assumed, &host);
        if !permit.is_success() && !permit.is_wait() {
            fw.run_reserve_plugins_unreserve(&mut state, &assumed, &host);
            let _ = self.cache.forget_pod(&assumed.uid);
            let diag = rejection_diagnosis(&host, &permit);
            let s = rejection_status(permit, &host);
            self.handle_failure(&fw, qpi, s, diag, CLEAR_NOMINATION, start, pod_cycle);
            return;
        }

        // The binding cycle runs on its own task so the loop never waits for the API.
        let this = self.clone();
        self.in_flight_bindings.fetch_add(1, Ordering::SeqCst);
        self.metrics.goroutine_started(BINDING);
        tokio::spawn(async move {
            this.binding_cycle(fw, state, qpi, assumed, host, start, pod_cycle)
                .await;
            this.metrics.goroutine_finished(BINDING);
            this.in_flight_bindings.fetch_sub(1, Ordering::SeqCst);
        });
    }

    #[allow(clippy::too_many_arguments)]
    async fn binding_cycle(
        &self,
        fw: Arc<Framework>,
        mut state: CycleState,
        mut qpi: QueuedPodInfo,
        assumed: Arc<PodInfo>,
        host: String,
        start: Instant,
        pod_cycle: u64,
    ) {
        // Whether PreBindPreFlight said some PreBind plugin has work: only such pods are
        // registered for in-memory preemption during PreBind, as upstream's.
        let mut pre_bind_has_work = false;
        if self
            .handle
            .features()
            .enabled(Feature::NominatedNodeNameForExpectation)
        {
            let flight = fw.run_pre_bind_pre_flights(&mut state, &assumed, &host);
            if flight.code() == Code::Error || flight.is_rejected() {
                self.binding_failed(fw, state, qpi, assumed, host, flight, start, pod_cycle);
                return;
            }
            pre_bind_has_work = flight.is_success();
            if flight.is_success() || fw.will_wait_on_permit(&assumed) {
                // Autoscalers read where the pod is about to go while Permit or PreBind
                // take their time; a failure to say so does not stop the binding.
                let update = PodStatusUpdate {
                    condition: None,
                    nominated_node_name: (assumed.nominated_node_name.as_deref()
                        != Some(host.as_str()))
                    .then(|| Some(host.clone())),
                };
                if update.nominated_node_name.is_some() {
                    match self
                        .handle
                        .client()
                        .update_pod_status(&assumed, &update)
                        .await
                    {
                        Ok(()) => {
                            // Should the binding fail, the clearing compares against the
                            // pod as written now, so the expectation does not outlive it
                            // (KEP-5278: cleared on binding failure).
                            let mut written = (*qpi.pod_info).clone();
                            written.nominated_node_name = Some(host.clone());
                            qpi.pod_info = Arc::new(written);
                        }
                        Err(e) => {
                            tracing::error!(pod = %assumed.key(), node = %host, error = %e, "failed to update the nominated node name in the binding cycle");
                        }
                    }
                }
            }
        }
        let permit = fw.wait_on_permit(&assumed).await;
        let status = if !permit.is_success() {
            permit
        } else {
            self.queue.done(&assumed.uid);
            let pre_bind = if pre_bind_has_work {
                // Preemption may cancel the binding while PreBind runs (v1.36, #135502):
                // the cycle then fails as a PreBind error would, and the victim backs off.
                let mut registration = self.handle.pods_in_pre_bind().add(&assumed.uid);
                tokio::select! {
                    s = fw.run_pre_bind_plugins(&state, &assumed, &host) => s,
                    Ok(cause) = &mut registration.cancelled => Status::error(cause),
                }
            } else {
                fw.run_pre_bind_plugins(&state, &assumed, &host).await
            };
            if !pre_bind.is_success() {
                pre_bind
            } else {
                let bind = match extenders::bind(self.handle.extenders(), &assumed, &host).await {
                    Some(Ok(())) => {
                        // The extender bound it through its own client; a backend the
                        // extender cannot reach records the binding now.
                        if let Err(e) = self
                            .handle
                            .client()
                            .bound_by_extender(&assumed, &host)
                            .await
                        {
                            tracing::warn!(pod = %assumed.key(), node = %host, error = %e, "recording the extender's binding");
                        }
                        Status::success()
                    }
                    Some(Err(e)) => Status::error(e),
                    None => fw.run_bind_plugins(&state, &assumed, &host).await,
                };
                if let Err(e) = self.cache.finish_binding(&assumed.uid) {
                    tracing::warn!(pod = %assumed.key(), error = %e, "finishing binding in the cache");
                }
                if bind.is_skip() {
                    Status::error("no Bind plugin bound the pod").with_plugin("")
                } else {
                    bind
                }
            }
        };
        if status.is_success() {
            self.handle.client().record_event(Event {
                regarding: ObjectRef::pod(&assumed),
                event_type: EventType::Normal,
                reason: "Scheduled".into(),
                action: "Binding".into(),
                note: format!(
                    "Successfully assigned {}/{} to {}",
                    assumed.namespace, assumed.name, host
                ),
                related: None,
            });
            self.metrics
                .attempt(AttemptResult::Scheduled, fw.profile_name(), start.elapsed());
            self.metrics.pod_scheduled_after(qpi.attempts);
            if qpi.flushed_from_unschedulable {
                self.metrics.pod_scheduled_after_flush();
            }
            if let Some(first) = qpi.initial_attempt_timestamp {
                let now = self.handle.clock().now();
                self.metrics
                    .pod_scheduled_sli(qpi.attempts, now.saturating_duration_since(first));
            }
            fw.run_post_bind_plugins(&state, &assumed, &host);
            if let Some(o) = self.observer.lock().clone() {
                o.attempt(
                    &assumed,
                    &AttemptOutcome::Scheduled { node: host.clone() },
                    start.elapsed(),
                );
            }
            tracing::debug!(pod = %assumed.key(), node = %host, "bound pod");
            return;
        }
        self.binding_failed(fw, state, qpi, assumed, host, status, start, pod_cycle);
    }

    /// A binding cycle failed: release what was reserved and give the pod back to the
    /// queue, as upstream's handleBindingCycleError.
    #[allow(clippy::too_many_arguments)]
    fn binding_failed(
        &self,
        fw: Arc<Framework>,
        mut state: CycleState,
        qpi: QueuedPodInfo,
        assumed: Arc<PodInfo>,
        host: String,
        status: Status,
        start: Instant,
        pod_cycle: u64,
    ) {
        fw.run_reserve_plugins_unreserve(&mut state, &assumed, &host);
        let forgotten = self.cache.forget_pod(&assumed.uid).is_ok();
        let rejected = status.is_rejected();
        let diag = rejected
            .then(|| rejection_diagnosis(&host, &status))
            .flatten();
        let s = rejection_status(status, &host);
        let event = ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE);
        let freed = EventObject::Pod(assumed.clone());
        if forgotten && !rejected {
            // The resources the assumed pod held are free again for everyone, the pod too.
            self.queue
                .move_all_to_active_or_backoff(event, Some(&freed), None);
        }
        self.handle_failure(&fw, qpi, s, diag, CLEAR_NOMINATION, start, pod_cycle);
        if forgotten && rejected {
            // As upstream, after the failure is handled and never for the pod itself: it was
            // rejected, so the room it frees cannot help it.
            self.queue.move_all_to_active_or_backoff_except(
                event,
                Some(&freed),
                None,
                &assumed.uid,
            );
        }
    }

    /// Records the failure and gives the pod back to the queue, as upstream's
    /// handleSchedulingFailure: event, PodScheduled condition, nominated node.
    #[allow(clippy::too_many_arguments)]
    fn handle_failure(
        &self,
        fw: &Arc<Framework>,
        mut qpi: QueuedPodInfo,
        status: Status,
        diagnosis: Option<Diagnosis>,
        nominated: Option<Option<String>>,
        start: Instant,
        pod_cycle: u64,
    ) {
        let rejected = status.is_rejected();
        let reason = if rejected {
            "Unschedulable"
        } else {
            "SchedulerError"
        };
        let result = if rejected {
            AttemptResult::Unschedulable
        } else {
            AttemptResult::Error
        };
        self.metrics
            .attempt(result, fw.profile_name(), start.elapsed());
        let message = status.message();
        if let Some(d) = &diagnosis {
            qpi.unschedulable_plugins = d.unschedulable_plugins.clone();
            qpi.pending_plugins = d.pending_plugins.clone();
        }
        if rejected {
            tracing::debug!(pod = %qpi.pod_info.key(), %message, "unable to schedule pod; no fit; waiting");
        } else {
            match self.repeated_errors.note(&message) {
                Some(1) => {
                    tracing::warn!(pod = %qpi.pod_info.key(), %message, "error scheduling pod; retrying")
                }
                Some(seen) => {
                    tracing::warn!(pod = %qpi.pod_info.key(), %message, seen, "error scheduling pod; retrying (the same error, seen this many times so far)")
                }
                None => {
                    tracing::debug!(pod = %qpi.pod_info.key(), %message, "error scheduling pod; retrying")
                }
            }
        }
        let pod = qpi.pod_info.clone();
        let latest = self.latest_pending(&pod);
        let pending = latest.is_some();
        match &latest {
            Some(latest) => {
                qpi.pod_info = latest.clone();
                if let Err(e) = self.queue.add_unschedulable_if_not_present(qpi, pod_cycle) {
                    tracing::debug!(pod = %pod.key(), error = %e, "requeueing pod");
                }
            }
            None => self.queue.done(&pod.uid),
        }
        // The nominator follows the outcome at once, as upstream's AddNominatedPod: a node
        // from PostFilter nominates, an explicit clear removes, and without either the
        // pod keeps what its (latest) status says. A pod that left is never nominated.
        let nominator = self.handle.nominator();
        match (&latest, &nominated) {
            (Some(latest), Some(Some(node))) => nominator.add(latest.clone(), Some(node)),
            (Some(latest), None) => nominator.add(latest.clone(), None),
            (None, _) | (Some(_), Some(None)) => nominator.remove(&pod.uid),
        }
        let nominated_after = match &nominated {
            Some(n) => n.clone(),
            None => self
                .handle
                .nominator()
                .node_of(&pod.uid)
                .or_else(|| pod.nominated_node_name.clone()),
        };
        let note = truncate_message(&message);
        self.handle.client().record_event(Event {
            regarding: ObjectRef::pod(&pod),
            event_type: EventType::Warning,
            reason: "FailedScheduling".into(),
            action: "Scheduling".into(),
            note,
            related: None,
        });
        let nominated_update = match nominated {
            Some(n) if n.as_deref() != pod.nominated_node_name.as_deref() => Some(n),
            _ => None,
        };
        let update = PodStatusUpdate {
            condition: Some(PodScheduledCondition {
                status: "False".into(),
                reason: reason.into(),
                message: message.clone(),
            }),
            nominated_node_name: nominated_update,
        };
        let client = self.handle.client().clone();
        let pod_for_update = pod.clone();
        // A pod that is gone or bound keeps the status the API server gave it.
        tokio::spawn(async move {
            if !pending {
                return;
            }
            if let Err(e) = client.update_pod_status(&pod_for_update, &update).await {
                tracing::warn!(pod = %pod_for_update.key(), error = %e, "updating pod status");
            }
        });
        if let Some(o) = self.observer.lock().clone() {
            let outcome = if rejected {
                AttemptOutcome::Unschedulable {
                    message,
                    nominated_node: nominated_after,
                }
            } else {
                AttemptOutcome::Error {
                    message,
                    nominated_node: nominated_after,
                }
            };
            o.attempt(&pod, &outcome, start.elapsed());
        }
    }
}

/// Each extender's filter verdict on the nodes it was sent, in the order extenders ran.
/// `sent` are the nodes the Filter plugins accepted.
/// Fills in the scores of `feasible` (aligned with `table`) on their explanations.
fn explain_scores(
    nodes: &mut [NodeExplanation],
    position: &HashMap<String, usize>,
    feasible: &[Arc<NodeInfo>],
    table: &ScoreTable,
) {
    for (i, node) in feasible.iter().enumerate() {
        let Some(e) = position.get(node.name()).map(|&k| &mut nodes[k]) else {
            continue;
        };
        e.total_score = Some(table.totals[i]);
        e.scores = table
            .plugins
            .iter()
            .map(|p| PluginScoreExplanation {
                plugin: p.plugin.clone(),
                raw: p.raw[i],
                normalized: p.normalized[i],
                weight: p.weight,
                weighted: p.normalized[i] * p.weight,
            })
            .collect();
    }
}

fn explain_extender_filter(
    nodes: &mut [NodeExplanation],
    position: &HashMap<String, usize>,
    mut sent: Vec<String>,
    traces: &[(String, FilterTrace)],
) {
    for (extender, trace) in traces {
        let mut passed = Vec::new();
        for name in &sent {
            let Some(e) = position.get(name).map(|&k| &mut nodes[k]) else {
                continue;
            };
            let (verdict, reason, code) = match trace {
                FilterTrace::NotInterested => ("NotInterested", None, None),
                FilterTrace::Failed {
                    error,
                    ignored: true,
                } => ("IgnoredError", Some(error.clone()), None),
                FilterTrace::Failed { error, .. } => ("Error", Some(error.clone()), None),
                FilterTrace::Answered(o) => {
                    if o.nodes.iter().any(|n| n.name() == name) {
                        ("Passed", None, None)
                    } else if let Some(m) = o.failed_and_unresolvable.get(name) {
                        (
                            "FailedAndUnresolvable",
                            Some(m.clone()),
                            Some(Code::UnschedulableAndUnresolvable),
                        )
                    } else {
                        (
                            "Failed",
                            o.failed.get(name).cloned(),
                            Some(Code::Unschedulable),
                        )
                    }
                }
            };
            if matches!(
                trace,
                FilterTrace::NotInterested | FilterTrace::Failed { ignored: true, .. }
            ) || verdict == "Passed"
            {
                passed.push(name.clone());
            }
            if let Some(code) = code {
                e.feasible = false;
                e.rejected_by = Some(EXTENDER_NAME.to_string());
                e.code = Some(code.as_str().to_string());
                e.reasons = reason.clone().into_iter().collect();
            }
            e.extenders.push(ExtenderExplanation {
                extender: extender.clone(),
                filter: Some(verdict.to_string()),
                reason,
                ..Default::default()
            });
        }
        sent = passed;
    }
}

/// Each extender's score on the nodes that passed, added to the nodes' totals.
fn explain_extender_scores(
    nodes: &mut [NodeExplanation],
    position: &HashMap<String, usize>,
    feasible: &[Arc<NodeInfo>],
    scores: &[extenders::ExtenderScores],
) {
    for s in scores {
        for (i, node) in feasible.iter().enumerate() {
            let Some(e) = position.get(node.name()).map(|&k| &mut nodes[k]) else {
                continue;
            };
            let at = match e.extenders.iter().position(|x| x.extender == s.extender) {
                Some(at) => at,
                None => {
                    e.extenders.push(ExtenderExplanation {
                        extender: s.extender.clone(),
                        ..Default::default()
                    });
                    e.extenders.len() - 1
                }
            };
            let x = &mut e.extenders[at];
            match &s.result {
                Ok((raw, weight)) => {
                    x.weight = Some(*weight);
                    if let Some(r) = raw[i] {
                        let w = extenders::ExtenderScores::weighted(r, *weight);
                        x.score = Some(r);
                        x.weighted = Some(w);
                        e.total_score = Some(e.total_score.unwrap_or(0).wrapping_add(w));
                    }
                }
                Err(err) => x.score_error = Some(err.clone()),
            }
        }
    }
}

/// The plugin that needs a pod field: the one upstream fails at when the field does not
/// parse (InterPodAffinity's PreFilter says "parsing pod", PodTopologySpread's PreFilter
/// and NodeAffinity's PreScore give errors); None for a field no plugin reads.
pub fn plugin_reading_field(field: &str) -> Option<&'static str> {
    const OWNERS: &[(&str, &str)] = &[
        ("spec.affinity.podAffinity", "InterPodAffinity"),
        ("spec.affinity.podAntiAffinity", "InterPodAffinity"),
        ("spec.topologySpreadConstraints", "PodTopologySpread"),
        ("spec.affinity.nodeAffinity", "NodeAffinity"),
        ("spec.containers", "NodeResourcesFit"),
        ("spec.initContainers", "NodeResourcesFit"),
        ("spec.resources", "NodeResourcesFit"),
        ("spec.overhead", "NodeResourcesFit"),
    ];
    OWNERS
        .iter()
        .find(|(prefix, _)| field.starts_with(prefix))
        .map(|(_, plugin)| *plugin)
}

/// The rejection of a pod with parts kubesched could not compile that a plugin of this
/// profile needs: UnschedulableAndUnresolvable (so only an update of the pod or the
/// periodic flush brings it back), naming each field, from the first plugin concerned.
fn unreadable_parts_status(fw: &Framework, pod: &PodInfo) -> Option<Status> {
    let mut plugin = None;
    let mut parts = Vec::new();
    for problem in &pod.problems {
        let Some(owner) = plugin_reading_field(&problem.field) else {
            continue;
        };
        if fw.plugin(owner).is_none() {
            continue;
        }
        plugin.get_or_insert(owner);
        parts.push(format!("{}: {}", problem.field, problem.message));
    }
    let plugin = plugin?;
    Some(Status::unresolvable(format!("parsing pod: {}", parts.join("; "))).with_plugin(plugin))
}

#[derive(Clone, Copy)]
enum PodAction {
    Add,
    Update,
    Delete,
}

/// A rejection at Reserve, Permit or binding counts one node: the chosen one.
fn rejection_diagnosis(host: &str, status: &Status) -> Option<Diagnosis> {
    if !status.is_rejected() {
        return None;
    }
    let mut d = Diagnosis::default();
    d.add_plugin_status(status);
    d.node_to_status.set(host, status.clone());
    Some(d)
}

/// The status reported for a failure after a node was chosen: rejections get the
/// FailedScheduling form over the one node, errors keep their message.
fn rejection_status(status: Status, host: &str) -> Status {
    match rejection_diagnosis(host, &status) {
        Some(d) => {
            let code = status.code();
            let fit = FitError {
                num_all_nodes: 1,
                diagnosis: d,
            };
            let mut s = Status::new(code, [fit.message()]);
            if let Some(p) = status.plugin() {
                s = s.with_plugin(p);
            }
            s
        }
        None => status,
    }
}

/// Cuts a message to the event note limit the way upstream does.
pub fn truncate_message(message: &str) -> String {
    if message.len() <= NOTE_LENGTH_LIMIT {
        return message.to_string();
    }
    let suffix = " ...";
    let mut cut = NOTE_LENGTH_LIMIT - suffix.len();
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{suffix}", &message[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feasible_node_count_follows_upstream() {
        assert_eq!(num_feasible_nodes_to_find(0, 10), 10);
        assert_eq!(num_feasible_nodes_to_find(0, 99), 99);
        assert_eq!(num_feasible_nodes_to_find(0, 100), 100);
        // 50 - 500/125 = 46 % of 500.
        assert_eq!(num_feasible_nodes_to_find(0, 500), 230);
        // 50 - 5000/125 = 10 % of 5000.
        assert_eq!(num_feasible_nodes_to_find(0, 5000), 500);
        // floor of 5 %.
        assert_eq!(num_feasible_nodes_to_find(0, 6000), 300);
        assert_eq!(num_feasible_nodes_to_find(0, 10000), 500);
        // never fewer than 100.
        assert_eq!(num_feasible_nodes_to_find(1, 1000), 100);
        assert_eq!(num_feasible_nodes_to_find(100, 1000), 1000);
        assert_eq!(num_feasible_nodes_to_find(30, 1000), 300);
    }

    #[test]
    fn truncates_long_messages() {
        let long = "x".repeat(2000);
        let t = truncate_message(&long);
        assert_eq!(t.len(), NOTE_LENGTH_LIMIT);
        assert!(t.ends_with(" ..."));
        assert_eq!(truncate_message("short"), "short");
    }
}
