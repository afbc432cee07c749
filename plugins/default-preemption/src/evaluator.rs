//! The preemption evaluator, after upstream's `preemption.Evaluator` with the default
//! policy: eligibility, candidate search by dry runs on copies of node and cycle state,
//! victim selection with PDB awareness, the choice of one candidate, and the writes that
//! make room for the preemptor.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rayon::prelude::*;

use kubesched_framework::model::k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kubesched_framework::model::{LabelSelector, NodeInfo, PodInfo};
use kubesched_framework::{
    CandidateExplanation, ClientError, Code, CycleState, Event, EventType, ExtensionPoint,
    Framework, Handle, NodeToStatus, ObjectRef, PodStatusUpdate, PreemptionCriterion, Snapshot,
    Status, VictimExplanation,
};

use crate::{
    DISRUPTION_TARGET, ERR_REASON_NO_VICTIMS, NAME, NOT_ELIGIBLE_NEVER, NOT_ELIGIBLE_TERMINATING,
    PREEMPTED_ACTION, PREEMPTED_REASON, REASON_PREEMPTION_BY_SCHEDULER,
};

/// Most nodes dry-run per parallel batch when the parallelizer has threads. Results are
/// still consumed in node order, so the outcome is the same as a sequential run.
const PARALLEL_BATCH: usize = 256;
/// Fewest nodes per parallel batch: enough to keep the workers busy.
const MIN_PARALLEL_BATCH: usize = 32;
/// Nodes a worker takes at a time. A dry run costs microseconds (several Filter runs on
/// a node copy), so batches far smaller than the Filter pass's are worth spreading.
const NODES_PER_TASK: usize = 4;

/// A node where the preemptor fits once `victims` are gone.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    /// The node.
    pub name: String,
    /// The victims, most important first.
    pub victims: Vec<Arc<PodInfo>>,
    /// How many victims' eviction would violate a PodDisruptionBudget.
    pub num_pdb_violations: usize,
    /// UIDs of the victims counted in `num_pdb_violations` (empty, unallocated, when none).
    pub pdb_violating: Vec<String>,
}

/// A PodDisruptionBudget reduced to what victim selection reads.
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    namespace: String,
    selector: LabelSelector,
    disruptions_allowed: i32,
    disrupted_pods: BTreeSet<String>,
}

/// Compiles the budgets once per preemption. Budgets whose selector is absent, empty or
/// invalid match no pod (as upstream), so they are dropped here.
pub(crate) fn compile_budgets(pdbs: &[Arc<PodDisruptionBudget>]) -> Vec<Budget> {
    pdbs.iter()
        .filter_map(|pdb| {
            let spec = pdb.spec.as_ref()?;
            let selector = match LabelSelector::compile(spec.selector.as_ref(), "spec.selector") {
                Ok(s) if !s.is_empty() && !s.matches_nothing => s,
                Ok(_) => return None,
                Err(e) => {
                    tracing::debug!(
                        pdb = pdb.metadata.name.as_deref().unwrap_or_default(),
                        error = %e,
                        "ignoring PodDisruptionBudget with an invalid selector"
                    );
                    return None;
                }
            };
            let status = pdb.status.as_ref();
            Some(Budget {
                namespace: pdb.metadata.namespace.clone().unwrap_or_default(),
                selector,
                disruptions_allowed: status.and_then(|s| s.disruptions_allowed).unwrap_or(0),
                disrupted_pods: status
                    .and_then(|s| s.disrupted_pods.as_ref())
                    .map(|m| m.keys().cloned().collect())
                    .unwrap_or_default(),
            })
        })
        .collect()
}

/// Splits pods (order kept) into those whose eviction would push a matching budget below
/// zero allowed disruptions, and the others.
pub(crate) fn split_by_pdb_violation(
    pods: &[Arc<PodInfo>],
    budgets: &[Budget],
) -> (Vec<Arc<PodInfo>>, Vec<Arc<PodInfo>>) {
    let mut allowed: Vec<i32> = budgets.iter().map(|b| b.disruptions_allowed).collect();
    let mut violating = Vec::new();
    let mut non_violating = Vec::new();
    for pod in pods {
        let mut violated = false;
        // A pod without labels matches no budget.
        if !pod.labels.is_empty() {
            for (i, b) in budgets.iter().enumerate() {
                if b.namespace != pod.namespace || !b.selector.matches(&pod.labels) {
                    continue;
                }
                // Already counted by the API server's eviction handler.
                if b.disrupted_pods.contains(&pod.name) {
                    continue;
                }
                allowed[i] -= 1;
                if allowed[i] < 0 {
                    violated = true;
                }
            }
        }
        if violated {
            violating.push(pod.clone());
        } else {
            non_violating.push(pod.clone());
        }
    }
    (violating, non_violating)
}

/// The pod's start time in nanoseconds; `now` for a pod that has not started, as upstream.
pub(crate) fn start_time(pod: &PodInfo, now: i128) -> i128 {
    pod.start_time_nanos.unwrap_or(now)
}

/// Upstream's MoreImportantPod as an ordering: higher priority first, then the pod that
/// started earlier.
fn importance(a: &PodInfo, b: &PodInfo, now: i128) -> Ordering {
    b.priority
        .cmp(&a.priority)
        .then_with(|| start_time(a, now).cmp(&start_time(b, now)))
}

/// Whether a pod is terminating because the scheduler preempted it.
pub(crate) fn terminating_by_preemption(pod: &PodInfo) -> bool {
    if !pod.terminating {
        return false;
    }
    pod.pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == DISRUPTION_TARGET))
        .is_some_and(|c| {
            c.status == "True" && c.reason.as_deref() == Some(REASON_PREEMPTION_BY_SCHEDULER)
        })
}

/// The code a node's Filter gave; nodes absent from the map without an absent status were
/// not evaluated, which upstream treats as UnschedulableAndUnresolvable.
fn code_of(statuses: &NodeToStatus, node: &str) -> Code {
    statuses
        .get(node)
        .map_or(Code::UnschedulableAndUnresolvable, Status::code)
}

/// PodEligibleToPreemptOthers: Err with the reason when the pod must not preempt.
pub(crate) fn eligible_to_preempt(
    handle: &Handle,
    snapshot: &Snapshot,
    pod: &PodInfo,
    statuses: &NodeToStatus,
) -> Result<(), &'static str> {
    if pod.preemption_never {
        return Err(NOT_ELIGIBLE_NEVER);
    }
    // The pod object may not show a nomination the scheduler made a moment ago; the
    // nominator already does.
    let nominated = pod
        .nominated_node_name
        .clone()
        .or_else(|| handle.nominator().node_of(&pod.uid));
    let Some(nominated) = nominated else {
        return Ok(());
    };
    // The nominated node cannot take the pod any more: preempting elsewhere is allowed.
    if code_of(statuses, &nominated) == Code::UnschedulableAndUnresolvable {
        return Ok(());
    }
    if let Some(node) = snapshot.get(&nominated) {
        let waiting_for_victims = node
            .pods
            .iter()
            .any(|p| p.priority < pod.priority && terminating_by_preemption(p));
        if waiting_for_victims {
            return Err(NOT_ELIGIBLE_TERMINATING);
        }
    }
    Ok(())
}

/// One node's dry run: the node copy, the cycle state as the plugins see it, and what
/// the preemption found once for all nodes.
struct Trial<'a> {
    fw: &'a Framework,
    pod: &'a PodInfo,
    /// A copy of the cycle state once a PreFilter extension changed it; the shared state
    /// until then.
    state: Cow<'a, CycleState>,
    /// Whether any PreFilter extension runs in this cycle. When none does, AddPod and
    /// RemovePod would call nothing, so the state is never copied.
    extensions: bool,
    /// Whether pods of higher or equal priority are nominated to this node. When none
    /// are, Filter with nominated pods is plain Filter, and the nominator is asked once
    /// per node instead of once per Filter run.
    nominated: bool,
}

impl Trial<'_> {
    /// Removes a pod from the node copy and tells the PreFilter extensions.
    fn remove(&mut self, victim: &Arc<PodInfo>, node: &mut NodeInfo) -> Result<(), Status> {
        if node.remove_pod(&victim.uid).is_none() {
            return Err(Status::error(format!(
                "no corresponding pod {} in pods of node {}",
                victim.name,
                node.name()
            )));
        }
        if !self.extensions {
            return Ok(());
        }
        let s = self.fw.run_pre_filter_extension_remove_pod(
            self.state.to_mut(),
            self.pod,
            victim,
            node,
        );
        if s.is_success() { Ok(()) } else { Err(s) }
    }

    /// Puts a pod back on the node copy and tells the PreFilter extensions.
    fn add(&mut self, victim: &Arc<PodInfo>, node: &mut NodeInfo) -> Result<(), Status> {
        node.add_pod(victim.clone());
        if !self.extensions {
            return Ok(());
        }
        let s =
            self.fw
                .run_pre_filter_extension_add_pod(self.state.to_mut(), self.pod, victim, node);
        if s.is_success() { Ok(()) } else { Err(s) }
    }

    /// Filter with nominated pods on the node copy.
    fn filter(&self, node: &NodeInfo) -> Status {
        if self.nominated {
            self.fw
                .run_filter_plugins_with_nominated_pods(&self.state, self.pod, node)
        } else {
            self.fw.run_filter_plugins(&self.state, self.pod, node)
        }
    }
}

/// Whether any PreFilter plugin that did not Skip in this cycle has AddPod/RemovePod.
pub(crate) fn has_active_pre_filter_extensions(fw: &Framework, state: &CycleState) -> bool {
    fw.plugin_names_at(ExtensionPoint::PreFilter)
        .iter()
        .filter(|name| !state.skip_filter_plugins.contains(name.as_str()))
        .filter_map(|name| fw.plugin(name))
        .any(|p| {
            p.as_pre_filter()
                .and_then(|pf| pf.pre_filter_extensions())
                .is_some()
        })
}

/// Whether a pod of priority ≥ the preemptor's (other than itself) is nominated to the
/// node: then Filter must also see the node with those pods on it.
fn has_relevant_nominations(fw: &Framework, state: &CycleState, pod: &PodInfo, node: &str) -> bool {
    fw.nominations(state).is_some_and(|view| {
        view.pods_for_node(node)
            .iter()
            .any(|p| p.priority >= pod.priority && p.uid != pod.uid)
    })
}

/// SelectVictimsOnNode: the fewest pods to evict from `node` (a copy) so that the
/// preemptor fits, with the UIDs of those whose eviction violates a budget.
fn select_victims(
    trial: &mut Trial<'_>,
    node: &mut NodeInfo,
    budgets: &[Budget],
    now: i128,
) -> Result<(Vec<Arc<PodInfo>>, Vec<String>), Status> {
    let pod = trial.pod;
    // First remove every lower-priority pod and see whether the pod fits at all.
    let mut potential: Vec<Arc<PodInfo>> = node
        .pods
        .iter()
        .filter(|p| p.priority < pod.priority)
        .cloned()
        .collect();
    if potential.is_empty() {
        return Err(Status::unresolvable(ERR_REASON_NO_VICTIMS));
    }
    for v in &potential {
        trial.remove(v, node)?;
    }
    // Affinity of the pod to one of the victims is deliberately not considered, as
    // upstream: the pod must fit with all of them gone.
    let s = trial.filter(node);
    if !s.is_success() {
        return Err(s);
    }
    // Reprieve as many as possible: budget-violating ones first, then the others, each
    // group from the most important pod down.
    potential.sort_by(|a, b| importance(a, b, now));
    let (violating, non_violating) = split_by_pdb_violation(&potential, budgets);
    let mut victims = Vec::new();
    let mut violating_uids: Vec<String> = Vec::new();
    let reprieve = |p: &Arc<PodInfo>,
                    trial: &mut Trial<'_>,
                    node: &mut NodeInfo,
                    victims: &mut Vec<Arc<PodInfo>>|
     -> Result<bool, Status> {
        trial.add(p, node)?;
        let fits = trial.filter(node).is_success();
        if !fits {
            trial.remove(p, node)?;
            victims.push(p.clone());
        }
        Ok(fits)
    };
    for p in &violating {
        if !reprieve(p, trial, node, &mut victims)? {
            violating_uids.push(p.uid.clone());
        }
    }
    for p in &non_violating {
        reprieve(p, trial, node, &mut victims)?;
    }
    if !violating.is_empty() && !non_violating.is_empty() {
        victims.sort_by(|a, b| importance(a, b, now));
    }
    Ok((victims, violating_uids))
}

/// What the dry run learned.
#[derive(Debug, Default)]
pub(crate) struct DryRun {
    /// Candidates without budget violations first, then the others, each in node order.
    pub candidates: Vec<Candidate>,
    /// Why each node that yielded no candidate was refused.
    pub statuses: BTreeMap<String, Status>,
    /// Internal errors met on the way, in node order.
    pub errors: Vec<String>,
    /// Potential nodes whose dry run was looked at before enough candidates were found.
    pub tried: usize,
}

/// What every dry run of one preemption shares.
pub(crate) struct DryRunInput<'a> {
    /// The framework whose plugins judge the hypothetical nodes.
    pub fw: &'a Framework,
    /// The cycle state after PreFilter; each node works on its own copy.
    pub state: &'a CycleState,
    /// The preemptor.
    pub pod: &'a PodInfo,
    /// The disruption budgets.
    pub budgets: &'a [Budget],
    /// Now, in nanoseconds, for victims that have not started.
    pub now: i128,
    /// Whether a PreFilter extension runs in this cycle
    /// ([`has_active_pre_filter_extensions`]).
    pub extensions: bool,
}

fn check_node(input: &DryRunInput<'_>, node: &NodeInfo) -> Result<Candidate, Status> {
    // Nothing to evict: answered before anything is copied.
    if !node.pods.iter().any(|p| p.priority < input.pod.priority) {
        return Err(Status::unresolvable(ERR_REASON_NO_VICTIMS));
    }
    let mut node_copy = node.clone();
    let mut trial = Trial {
        fw: input.fw,
        pod: input.pod,
        state: Cow::Borrowed(input.state),
        extensions: input.extensions,
        nominated: has_relevant_nominations(input.fw, input.state, input.pod, node.name()),
    };
    let (victims, pdb_violating) =
        select_victims(&mut trial, &mut node_copy, input.budgets, input.now)?;
    if victims.is_empty() {
        return Err(Status::error(format!(
            "expected at least one victim pod on node {:?}",
            node.name()
        )));
    }
    Ok(Candidate {
        name: node.name().to_string(),
        victims,
        num_pdb_violations: pdb_violating.len(),
        pdb_violating,
    })
}

/// DryRunPreemption over `potential` nodes starting at `offset`, stopping once at least one
/// candidate without budget violations is known and `wanted` candidates are found.
pub(crate) fn dry_run(
    input: &DryRunInput<'_>,
    potential: &[Arc<NodeInfo>],
    offset: usize,
    wanted: usize,
) -> DryRun {
    let n = potential.len();
    let mut out = DryRun::default();
    let mut non_violating: Vec<Candidate> = Vec::new();
    let mut violating: Vec<Candidate> = Vec::new();
    let par = input.fw.handle().parallelizer();
    let mut done = 0;
    'nodes: while done < n {
        // A batch about the size of what is still missing: every node usually yields a
        // candidate, so a bigger one would dry-run nodes whose results are thrown away.
        let missing = wanted.saturating_sub(non_violating.len() + violating.len());
        let batch = if par.is_parallel() {
            missing.clamp(MIN_PARALLEL_BATCH, PARALLEL_BATCH)
        } else {
            1
        };
        let len = batch.min(n - done);
        let start = done;
        let one = |k: usize| {
            let i = (offset + start + k) % n;
            (i, check_node(input, &potential[i]))
        };
        let results: Vec<_> = if par.is_parallel() {
            par.install(|| {
                (0..len)
                    .into_par_iter()
                    .with_min_len(NODES_PER_TASK)
                    .map(one)
                    .collect()
            })
        } else {
            (0..len).map(one).collect()
        };
        for (i, result) in results {
            out.tried += 1;
            match result {
                Ok(c) => {
                    let list = if c.num_pdb_violations == 0 {
                        &mut non_violating
                    } else {
                        &mut violating
                    };
                    if list.len() < wanted {
                        list.push(c);
                    }
                    if !non_violating.is_empty() && non_violating.len() + violating.len() >= wanted
                    {
                        break 'nodes;
                    }
                }
                Err(s) => {
                    if s.is_error() {
                        out.errors.push(s.message());
                    }
                    out.statuses.insert(potential[i].name().to_string(), s);
                }
            }
        }
        done += len;
    }
    out.candidates = non_violating;
    out.candidates.extend(violating);
    out
}

/// The nodes preemption might help: those Filter found Unschedulable, in snapshot order.
pub(crate) fn potential_nodes(snapshot: &Snapshot, statuses: &NodeToStatus) -> Vec<Arc<NodeInfo>> {
    snapshot
        .list()
        .iter()
        .enumerate()
        .filter(|&(i, _)| {
            statuses
                .get_at(snapshot, i)
                .is_some_and(|s| s.code() == Code::Unschedulable)
        })
        .map(|(_, n)| Arc::clone(n))
        .collect()
}

/// pickOneNodeForPreemption: the index of the chosen candidate. Criteria in order: fewest
/// budget violations, lowest highest-victim priority, lowest sum of priorities, fewest
/// victims, latest start of the highest-priority victims; then the first.
pub(crate) fn pick_one(candidates: &[Candidate], now: i128) -> Option<usize> {
    pick(candidates, now, None).map(|(i, _)| i)
}

/// [`pick_one`] for an explanation: the chosen index, the criterion that settled the choice,
/// and for each candidate the criterion on which it lost (None for the chosen one).
pub(crate) fn pick_one_explained(
    candidates: &[Candidate],
    now: i128,
) -> Option<(usize, PreemptionCriterion, Vec<Option<PreemptionCriterion>>)> {
    let mut lost_on = vec![None; candidates.len()];
    let (i, decided_by) = pick(candidates, now, Some(&mut lost_on))?;
    Some((i, decided_by, lost_on))
}

fn pick(
    candidates: &[Candidate],
    now: i128,
    mut lost_on: Option<&mut [Option<PreemptionCriterion>]>,
) -> Option<(usize, PreemptionCriterion)> {
    if candidates.is_empty() {
        return None;
    }
    if candidates.len() == 1 {
        return Some((0, PreemptionCriterion::OnlyCandidate));
    }
    let highest_priority = |c: &Candidate| c.victims.first().map_or(0, |p| p.priority);
    // Each scores a candidate; the highest score stays in the running. Same order as
    // PreemptionCriterion::ORDER.
    let criteria: [&dyn Fn(&Candidate) -> i128; 5] = [
        &|c| -(c.num_pdb_violations as i128),
        &|c| -i128::from(highest_priority(c)),
        // Shifted so every term is >= 0: a few negative-priority victims must not look
        // better than fewer of the same priority.
        &|c| {
            -c.victims
                .iter()
                .map(|p| i128::from(p.priority) + i128::from(i32::MAX) + 1)
                .sum::<i128>()
        },
        &|c| -(c.victims.len() as i128),
        &|c| earliest_start_of_highest_priority(c, now),
    ];
    let mut remaining: Vec<usize> = (0..candidates.len()).collect();
    for (criterion, score) in PreemptionCriterion::ORDER.into_iter().zip(criteria) {
        let best = remaining
            .iter()
            .map(|&i| score(&candidates[i]))
            .max()
            .unwrap_or(i128::MIN);
        remaining.retain(|&i| {
            let stays = score(&candidates[i]) == best;
            if !stays && let Some(lost) = lost_on.as_deref_mut() {
                lost[i] = Some(criterion);
            }
            stays
        });
        if remaining.len() == 1 {
            return Some((remaining[0], criterion));
        }
    }
    let first = remaining[0];
    if let Some(lost) = lost_on {
        for &i in &remaining[1..] {
            lost[i] = Some(PreemptionCriterion::FirstCandidate);
        }
    }
    Some((first, PreemptionCriterion::FirstCandidate))
}

/// A candidate as an explanation shows it.
pub(crate) fn explain_candidate(
    c: &Candidate,
    eliminated_by: Option<PreemptionCriterion>,
) -> CandidateExplanation {
    let started = |p: &PodInfo| {
        p.pod
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0)
    };
    let highest = c.victims.first().map_or(0, |p| p.priority);
    let max = c.victims.iter().map(|p| p.priority).max();
    CandidateExplanation {
        node: c.name.clone(),
        victims: c
            .victims
            .iter()
            .map(|p| VictimExplanation {
                pod: p.key(),
                priority: p.priority,
                start_time: started(p).map(|t| t.to_string()),
                violates_pdb: c.pdb_violating.contains(&p.uid),
            })
            .collect(),
        pdb_violations: c.num_pdb_violations,
        highest_priority: highest,
        priority_sum: c.victims.iter().map(|p| i64::from(p.priority)).sum(),
        // A victim that has not started counts as starting now: later than any that has.
        earliest_start_of_highest_priority: c
            .victims
            .iter()
            .filter(|p| Some(p.priority) == max)
            .filter_map(|p| started(p))
            .min()
            .map(|t| t.to_string()),
        eliminated_by,
    }
}

/// The earliest start time among the candidate's highest-priority victims.
fn earliest_start_of_highest_priority(c: &Candidate, now: i128) -> i128 {
    let Some(max) = c.victims.iter().map(|p| p.priority).max() else {
        return i128::MIN;
    };
    c.victims
        .iter()
        .filter(|p| p.priority == max)
        .map(|p| start_time(p, now))
        .min()
        .unwrap_or(i128::MIN)
}

/// FitError's text for the dry run: `0/N nodes are available: <counts>.`, nodes without a
/// status of their own counted under `absent_reason`.
pub(crate) fn fit_error_message(
    num_all_nodes: usize,
    statuses: &BTreeMap<String, Status>,
    absent_reason: &str,
) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for s in statuses.values() {
        for r in s.reasons() {
            *counts.entry(r.as_str()).or_insert(0) += 1;
        }
    }
    if statuses.len() < num_all_nodes {
        *counts.entry(absent_reason).or_insert(0) += num_all_nodes - statuses.len();
    }
    // Sorted as whole strings, count first, as upstream does.
    let mut parts: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    let mut msg = format!("0/{num_all_nodes} nodes are available:");
    if !parts.is_empty() {
        msg.push_str(&format!(" {}.", parts.join(", ")));
    }
    msg
}

/// Go's error aggregate text: one error alone, several de-duplicated in brackets.
pub(crate) fn aggregate(errors: &[String]) -> String {
    let mut seen = BTreeSet::new();
    let unique: Vec<&str> = errors
        .iter()
        .filter(|e| seen.insert(e.as_str()))
        .map(String::as_str)
        .collect();
    if unique.len() == 1 {
        unique[0].to_string()
    } else {
        format!("[{}]", unique.join(", "))
    }
}

/// prepareCandidate: evicts the victims (rejecting those waiting at Permit instead), records
/// a `Preempted` event on each, and clears the nomination of lower-priority pods nominated
/// to the node, since they may no longer fit there.
pub(crate) async fn prepare_candidate(
    handle: &Handle,
    candidate: &Candidate,
    preemptor: &PodInfo,
) -> Result<(), Status> {
    for victim in &candidate.victims {
        preempt_victim(handle, &candidate.name, victim, preemptor).await?;
    }
    clear_lower_nominations(handle, &candidate.name, preemptor).await;
    Ok(())
}

/// Evicts one victim: a pod waiting at Permit is preempted there and one in PreBind has
/// its binding cancelled (either goes back to the queue's backoff, nothing is deleted),
/// any other is deleted through the client (which marks it `DisruptionTarget` first);
/// then a `Preempted` event.
pub(crate) async fn preempt_victim(
    handle: &Handle,
    node: &str,
    victim: &PodInfo,
    preemptor: &PodInfo,
) -> Result<(), Status> {
    if victim.terminating {
        // Graceful deletion already started: nothing to send.
        return Ok(());
    }
    let client = handle.client();
    // A victim waiting at Permit, or in PreBind (v1.36), is stopped in memory and goes
    // back to the queue's backoff; PreBind that already ended falls back to deletion.
    let preempted_in_memory = match handle.waiting_pods().get(&victim.uid) {
        Some(w) => w.preempt(NAME, "preempted"),
        None => handle
            .pods_in_pre_bind()
            .get(&victim.uid)
            .is_some_and(|p| p.cancel(&format!("preempted by {NAME}"))),
    };
    if !preempted_in_memory {
        match client.delete_pod(victim).await {
            Ok(()) => {}
            Err(ClientError::NotFound(_)) => {
                tracing::debug!(victim = %victim.key(), "preemption victim is already deleted");
                return Ok(());
            }
            Err(e) => {
                tracing::error!(
                    victim = %victim.key(),
                    preemptor = %preemptor.key(),
                    error = %e,
                    "deleting preemption victim"
                );
                return Err(Status::error(e));
            }
        }
    }
    tracing::debug!(
        preemptor = %preemptor.key(),
        victim = %victim.key(),
        node = %node,
        "preempted victim"
    );
    client.record_event(Event {
        regarding: ObjectRef::pod(victim),
        event_type: EventType::Normal,
        reason: PREEMPTED_REASON.into(),
        action: PREEMPTED_ACTION.into(),
        note: if preempted_in_memory {
            format!(
                "Preempted by pod {} on node {node} (in kube-scheduler memory).",
                preemptor.uid
            )
        } else {
            format!("Preempted by pod {} on node {node}", preemptor.uid)
        },
        related: Some(ObjectRef::pod(preemptor)),
    });
    Ok(())
}

/// Lower-priority pods nominated to `node` may no longer fit there: their nomination is
/// cleared (in memory and in status) so they look elsewhere.
pub(crate) async fn clear_lower_nominations(handle: &Handle, node: &str, preemptor: &PodInfo) {
    let nominator = handle.nominator();
    let lower: Vec<Arc<PodInfo>> = nominator
        .pods_for_node(node)
        .into_iter()
        .filter(|p| p.priority < preemptor.priority)
        .collect();
    for p in lower {
        nominator.remove(&p.uid);
        let update = PodStatusUpdate {
            condition: None,
            nominated_node_name: Some(None),
        };
        // Not critical: the pod keeps a stale nomination at worst.
        if let Err(e) = handle.client().update_pod_status(&p, &update).await {
            tracing::warn!(pod = %p.key(), error = %e, "clearing nominatedNodeName");
        }
    }
}
