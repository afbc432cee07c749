//! DefaultPreemption: when no node fits a pod, find lower-priority pods whose eviction
//! would make room, evict them, and nominate the pod to that node.
//!
//! A PostFilter plugin with upstream kube-scheduler's preemption evaluator: eligibility,
//! dry runs on copies of nodes and cycle state (through the framework's PreFilter
//! extensions and Filter plugins), PodDisruptionBudget-aware victim selection, the
//! choice of one candidate node, and the victims' eviction through the cluster client.
//! It must not bind or touch the queue: its only writes are victim deletions (or Permit
//! rejections), `Preempted` events (with the preemptor as the related object) and cleared
//! nominations, all through the handle.
//! Deleting a victim through the cluster client marks it first with a `DisruptionTarget`
//! condition (reason `PreemptionByScheduler`), as upstream: the kube backend patches the
//! condition before the delete; the simulator's cluster sets it too and lets the victim
//! terminate for its grace period on the virtual clock.
//! "Now" (the start time of victims that have not started) is the framework's clock.
//! When the attempt is being explained (a `PreemptionExplainer` in the cycle state) it also
//! records its candidates, their victims and budget violations, and the criterion that chose
//! the node; otherwise it builds nothing.
//!
//! Scheduler extenders with a preempt verb narrow the candidates before one is chosen.
//!
//! With the SchedulerAsyncPreemption feature gate (on by default, as in v1.34) PostFilter
//! only chooses the node: the victims are evicted by a background task, and the preemptor
//! is held at PreEnqueue (`waiting for the preemption for this pod to be finished`) until
//! the last eviction is about to be sent; a pod deletion re-checks it. Without the gate the
//! victims are evicted before PostFilter returns.

mod args;
mod evaluator;
mod extenders;
pub mod pod_group;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

use kubesched_framework::events::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
};
use kubesched_framework::model::PodInfo;
use kubesched_framework::registry::PluginArgs;
use kubesched_framework::{
    Code, CycleState, EnqueueExtensions, Feature, Framework, Handle, LivePods, NodeToStatus,
    PluginError, PostFilterPlugin, PostFilterResult, PreEnqueuePlugin, PreemptionExplainer,
    PreemptionExplanation, RejectedPreemptionNode, Status, async_trait,
};
use parking_lot::Mutex;

pub use args::{
    DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE, DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE,
    DefaultPreemptionArgs,
};

/// The plugin's registered name.
pub const NAME: &str = "DefaultPreemption";
/// Put before every message this plugin returns.
pub const MESSAGE_PREFIX: &str = "preemption: ";
/// A node with no lower-priority pod to evict.
pub const ERR_REASON_NO_VICTIMS: &str = "No preemption victims found for incoming pod";
/// Nodes preemption cannot help (Filter said UnschedulableAndUnresolvable, or not tried).
pub const ERR_REASON_NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
/// The pod's `preemptionPolicy` is `Never`.
pub const NOT_ELIGIBLE_NEVER: &str = "not eligible due to preemptionPolicy=Never.";
/// The pod already preempted on its nominated node and a victim is still terminating.
pub const NOT_ELIGIBLE_TERMINATING: &str =
    "not eligible due to a terminating pod on the nominated node.";
/// No candidate could be chosen (not expected once candidates exist).
pub const NO_CANDIDATE_NODE: &str = "no candidate node for preemption";
/// The snapshot has no node at all.
pub const NO_NODES_AVAILABLE: &str = "no nodes available";
/// The reason of the event recorded on each victim.
pub const PREEMPTED_REASON: &str = "Preempted";
/// The action of the event recorded on each victim.
pub const PREEMPTED_ACTION: &str = "Preempting";
/// The pod condition type that marks a pod being disrupted.
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";
/// The `DisruptionTarget` reason the scheduler sets on its victims.
pub const REASON_PREEMPTION_BY_SCHEDULER: &str = "PreemptionByScheduler";
/// PreEnqueue's reason while a pod's asynchronous preemption is still evicting.
pub const WAITING_FOR_PREEMPTION: &str = "waiting for the preemption for this pod to be finished";

/// Seed of the offset at which dry runs start; fixed so runs are reproducible.
const DEFAULT_OFFSET_SEED: u64 = 0x6b75_6265_7363_6864;

/// The DefaultPreemption plugin.
pub struct DefaultPreemption {
    args: DefaultPreemptionArgs,
    /// Picks where in the list of potential nodes a dry run starts, so that preemption
    /// does not always fall on the first nodes.
    offsets: Mutex<fastrand::Rng>,
    /// SchedulerAsyncPreemption.
    async_preemption: bool,
    /// Preemptors whose victims are still being evicted in the background, by UID, with
    /// the UID of the last victim once only that one is left (v1.35, #134294).
    preempting: Arc<Mutex<HashMap<String, Option<String>>>>,
    /// Where PreEnqueue looks the last victim up.
    live_pods: Arc<dyn LivePods>,
}

impl std::fmt::Debug for DefaultPreemption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefaultPreemption")
            .field("args", &self.args)
            .field("async_preemption", &self.async_preemption)
            .field("preempting", &self.preempting)
            .finish_non_exhaustive()
    }
}

impl DefaultPreemption {
    /// Builds the plugin; the args are validated again so direct construction is safe.
    pub fn new(args: &DefaultPreemptionArgs, handle: &Handle) -> Result<Self, PluginError> {
        args.validate(handle.features()).map_err(PluginError)?;
        Ok(Self {
            args: args.clone(),
            offsets: Mutex::new(fastrand::Rng::with_seed(DEFAULT_OFFSET_SEED)),
            async_preemption: handle.features().enabled(Feature::SchedulerAsyncPreemption),
            preempting: Arc::default(),
            live_pods: handle.live_pods().clone(),
        })
    }

    /// Whether this pod's preemption is still going on (upstream's
    /// `IsPodRunningPreemption`): its victims are being evicted, or only the last one is
    /// left and it is neither gone nor being deleted yet.
    pub fn is_preempting(&self, uid: &str) -> bool {
        let last = match self.preempting.lock().get(uid) {
            None => return false,
            Some(None) => return true,
            Some(Some(last)) => last.clone(),
        };
        self.live_pods
            .by_uid(&last)
            .is_some_and(|victim| !victim.terminating)
    }

    /// prepareCandidateAsync: evicts the victims on a background task. The preemptor is
    /// held at PreEnqueue until its preemption is done; while the last victim is being
    /// deleted PreEnqueue looks that victim up, so the victim's deletion event (which
    /// may come before the task ends) finds the preemptor free to go.
    fn prepare_candidate_async(
        &self,
        handle: &Handle,
        candidate: evaluator::Candidate,
        preemptor: Arc<PodInfo>,
    ) {
        let preempting = Arc::clone(&self.preempting);
        preempting.lock().insert(preemptor.uid.clone(), None);
        let task_handle = handle.clone();
        handle.spawn_background(async move {
            let handle = task_handle;
            tracing::debug!(
                preemptor = %preemptor.key(),
                node = %candidate.name,
                victims = candidate.victims.len(),
                "starting the preemption asynchronously"
            );
            evaluator::clear_lower_nominations(&handle, &candidate.name, &preemptor).await;
            let mut failed = false;
            let (last, rest) = match candidate.victims.split_last() {
                Some((last, rest)) => (Some(last), rest),
                None => (None, &[][..]),
            };
            for victim in rest {
                if evaluator::preempt_victim(&handle, &candidate.name, victim, &preemptor)
                    .await
                    .is_err()
                {
                    failed = true;
                    break;
                }
            }
            // A failure spares the last victim (v1.36, #135495): the preemption has failed.
            if !failed && let Some(last) = last {
                if let Some(entry) = preempting.lock().get_mut(&preemptor.uid) {
                    *entry = Some(last.uid.clone());
                }
                if evaluator::preempt_victim(&handle, &candidate.name, last, &preemptor)
                    .await
                    .is_err()
                {
                    failed = true;
                }
            }
            preempting.lock().remove(&preemptor.uid);
            if failed {
                // The pod could wait in unschedulablePods for an event that never comes.
                handle.activate(std::slice::from_ref(&preemptor.uid));
            }
        });
    }

    /// Reseeds the dry-run start offsets (simulations and tests use this to vary or pin
    /// them).
    pub fn with_offset_seed(self, seed: u64) -> Self {
        *self.offsets.lock() = fastrand::Rng::with_seed(seed);
        self
    }

    /// The args in effect.
    pub fn args(&self) -> &DefaultPreemptionArgs {
        &self.args
    }

    /// A random start offset and the number of candidates to look for among `n` nodes.
    fn offset_and_num_candidates(&self, n: usize) -> (usize, usize) {
        let offset = if n == 0 {
            0
        } else {
            self.offsets.lock().usize(0..n)
        };
        (offset, self.args.num_candidates(n))
    }

    /// Upstream's Evaluator.Preempt, without the message prefix. `explained` is filled in
    /// when the attempt is being explained.
    async fn preempt(
        &self,
        fw: &Framework,
        state: &CycleState,
        pod: &Arc<PodInfo>,
        statuses: &NodeToStatus,
        mut explained: Option<&mut PreemptionExplanation>,
    ) -> (Option<PostFilterResult>, Status) {
        let handle = fw.handle();
        let snapshot = handle.snapshot();
        if let Err(msg) = evaluator::eligible_to_preempt(handle, &snapshot, pod, statuses) {
            tracing::debug!(pod = %pod.key(), reason = msg, "pod is not eligible for preemption");
            if let Some(e) = explained {
                e.not_eligible = Some(msg.to_string());
            }
            return (None, Status::unschedulable(msg));
        }
        let num_all_nodes = snapshot.num_nodes();
        if num_all_nodes == 0 {
            return (None, Status::error(NO_NODES_AVAILABLE));
        }
        let potential = evaluator::potential_nodes(&snapshot, statuses);
        if let Some(e) = explained.as_deref_mut() {
            e.not_helpful = num_all_nodes - potential.len();
        }
        // The framework's clock: a simulation's victims started on its virtual clock.
        let now = nanos_since_epoch(handle.clock().wall_now());
        let dry = if potential.is_empty() {
            tracing::debug!(pod = %pod.key(), "preemption will not help schedule pod on any node");
            evaluator::DryRun::default()
        } else {
            let budgets =
                evaluator::compile_budgets(&handle.objects().pod_disruption_budgets.list());
            let (offset, wanted) = self.offset_and_num_candidates(potential.len());
            let input = evaluator::DryRunInput {
                fw,
                state,
                pod,
                budgets: &budgets,
                now,
                extensions: evaluator::has_active_pre_filter_extensions(fw, state),
            };
            evaluator::dry_run(&input, &potential, offset, wanted)
        };
        if let Some(e) = explained.as_deref_mut() {
            e.not_tried = potential.len().saturating_sub(dry.tried);
            e.rejected = dry
                .statuses
                .iter()
                .map(|(node, s)| RejectedPreemptionNode {
                    node: node.clone(),
                    reasons: s.reasons().to_vec(),
                })
                .collect();
        }
        if dry.candidates.is_empty() {
            if !dry.errors.is_empty() {
                return (None, Status::error(evaluator::aggregate(&dry.errors)));
            }
            let msg =
                evaluator::fit_error_message(num_all_nodes, &dry.statuses, ERR_REASON_NOT_HELPFUL);
            // A result without a node clears the pod's earlier nomination.
            return (
                Some(PostFilterResult {
                    nominated_node_name: None,
                }),
                Status::unschedulable(msg),
            );
        }
        let candidates =
            match extenders::call_extenders(handle, &snapshot, pod, dry.candidates).await {
                Ok(c) => c,
                Err(s) => return (None, s),
            };
        let best = match explained {
            Some(e) => {
                let picked = evaluator::pick_one_explained(&candidates, now);
                let lost_on = picked.as_ref().map(|(_, _, l)| l.as_slice()).unwrap_or(&[]);
                e.candidates = candidates
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        evaluator::explain_candidate(c, lost_on.get(i).copied().flatten())
                    })
                    .collect();
                picked.map(|(i, decided_by, _)| {
                    e.chosen = candidates.get(i).map(|c| c.name.clone());
                    e.decided_by = Some(decided_by);
                    i
                })
            }
            None if candidates.len() == 1 => Some(0),
            None => evaluator::pick_one(&candidates, now),
        };
        let Some(best) = best.and_then(|i| candidates.get(i)) else {
            return (None, Status::unschedulable(NO_CANDIDATE_NODE));
        };
        tracing::debug!(
            pod = %pod.key(),
            node = %best.name,
            victims = best.victims.len(),
            "the target node for the preemption is determined"
        );
        fw.metrics().preemption_victims(best.victims.len());
        if self.async_preemption {
            self.prepare_candidate_async(handle, best.clone(), pod.clone());
        } else if let Err(s) = evaluator::prepare_candidate(handle, best, pod).await {
            return (None, s);
        }
        (
            Some(PostFilterResult {
                nominated_node_name: Some(best.name.clone()),
            }),
            Status::success(),
        )
    }
}

/// A wall-clock time in nanoseconds since the Unix epoch (the start time given to victims
/// that have not started).
fn nanos_since_epoch(t: std::time::SystemTime) -> i128 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
}

// The kinds it reads (the backends watch and load them) and the writes it makes (RBAC).
use kubesched_framework::model::k8s_openapi::api::policy::v1 as policyv1;
kubesched_framework::register_plugin! {
    name: NAME,
    plugin: DefaultPreemption,
    args: DefaultPreemptionArgs,
    kinds: [policyv1::PodDisruptionBudget],
    factory: DefaultPreemption::new,
}

impl PreEnqueuePlugin for DefaultPreemption {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        if self.async_preemption && self.is_preempting(&pod.uid) {
            return Status::unresolvable(WAITING_FOR_PREEMPTION);
        }
        Status::success()
    }
}

/// Never a reason to requeue by itself: registering pod deletions only makes the queue
/// re-run PreEnqueue for the pods this plugin holds back.
fn after_pod_deletion(
    _pod: &PodInfo,
    _old: Option<&EventObject>,
    _new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    Ok(QueueingHint::Skip)
}

impl EnqueueExtensions for DefaultPreemption {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        if !self.async_preemption {
            // PreEnqueue never holds a pod back then.
            return Vec::new();
        }
        vec![ClusterEventWithHint::with_hint(
            EventResource::Pod,
            ActionType::DELETE,
            after_pod_deletion,
        )]
    }
}

#[async_trait]
impl PostFilterPlugin for DefaultPreemption {
    async fn post_filter(
        &self,
        framework: &Framework,
        state: &CycleState,
        pod: &Arc<PodInfo>,
        statuses: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status) {
        // Only an explained attempt carries an explainer; the others build nothing extra.
        let explainer = PreemptionExplainer::requested(state).cloned();
        let mut explained = explainer.as_ref().map(|_| PreemptionExplanation {
            plugin: NAME.to_string(),
            ..Default::default()
        });
        let (result, status) = self
            .preempt(framework, state, pod, statuses, explained.as_mut())
            .await;
        if let (Some(explainer), Some(e)) = (explainer, explained) {
            explainer.record(e);
        }
        let msg = status.message();
        if msg.is_empty() {
            return (result, status);
        }
        let msg = format!("{MESSAGE_PREFIX}{msg}");
        let status = match status.code() {
            Code::Error => Status::error(msg),
            code => Status::new(code, [msg]),
        };
        (result, status)
    }
}
