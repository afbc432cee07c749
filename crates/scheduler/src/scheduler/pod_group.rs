//! The pod-group scheduling cycle (GenericWorkload, upstream v1.37's workload-aware
//! scheduling): the queued members of a `scheduling.k8s.io/v1beta1` PodGroup are tried
//! together, each against the cluster with the members placed before it assumed; the
//! profile's PlacementFeasible plugins judge the group before the first member and after
//! each one. A group that cannot meet its constraints holds nothing: every member placed
//! in the cycle is unreserved and forgotten before any of them binds, and each member goes
//! back to the queue with the group's reason (or its own, when it fit nowhere). A group
//! that can is bound whole. With the gate off this module is never entered.
//!
//! With TopologyAwareWorkloadScheduling on as well, the cycle first asks the profile's
//! PlacementGenerate plugins for candidate placements (TopologyPlacement: one per topology
//! domain), tries the group within each one (every member's Filter and Score see only the
//! placement's nodes; everything a placement held is undone before the next), and when more
//! than one is feasible lets the PlacementScore plugins pick the best (highest weighted sum,
//! ties at random). The chosen placement's members are then assumed and reserved again, as
//! upstream's cycle assumes them for binding after the search.
//!
//! kubesched assumes members in the cache (undone on failure) where upstream assumes them
//! in its snapshot only; the cycle is synchronous, so nothing outside it sees the
//! difference.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use kubesched_framework::model::PodInfo;
use kubesched_framework::workload::{
    POD_GROUP_INITIALLY_SCHEDULED, Placement, PlacementCycleState, PlacementProgress, PodGroup,
    PodGroupAssignments, PodGroupInfo, PodGroupScheduledCount, ProposedAssignment,
    REASON_SCHEDULED, REASON_SCHEDULER_ERROR, REASON_UNSCHEDULABLE, pod_group_name,
    scheduling_policy, validate_members,
};
use kubesched_framework::{Code, CycleState, Feature, Framework, QueuedPodInfo, Status};

use super::{
    CLEAR_NOMINATION, CycleError, PLUGIN_METRICS_SAMPLE_PERCENT, Scheduler, rejection_diagnosis,
    rejection_status,
};
use crate::fit_error::{Diagnosis, NO_NODES_AVAILABLE};
use crate::metrics::AttemptResult;

/// The reason a group cycle that placed no member ends with (upstream's words).
pub const NO_PODS_SCHEDULABLE: &str = "no pods were schedulable";

/// The reason of a group no generated placement can hold (upstream's words): the number
/// of placements tried and the first one's reason.
pub fn no_placement_available(placements: usize, first: &str) -> String {
    format!("0/{placements} placements are available, first placement status: {first}")
}

/// How one pod-group cycle ended, as observers (the simulator's report) see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodGroupOutcome {
    /// The namespace.
    pub namespace: String,
    /// The PodGroup's name.
    pub name: String,
    /// `minCount` (1 for a basic policy).
    pub min_count: usize,
    /// Members placed before this cycle (bound or binding).
    pub already_scheduled: usize,
    /// The members tried in this cycle, in the order tried, with the node each was placed
    /// on (None: not placed, or placed and undone because the group failed).
    pub members: Vec<(String, Option<String>)>,
    /// Whether the group was placed (its placed members go on to bind).
    pub placed: bool,
    /// The group's reason when it was not placed.
    pub message: Option<String>,
    /// With TopologyAwareWorkloadScheduling: the placements tried, in order, and the one
    /// chosen (None when the group was not placed).
    pub placements: Option<PlacementsOutcome>,
}

/// The placements one group cycle tried (TopologyAwareWorkloadScheduling).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PlacementsOutcome {
    /// Each placement generated, in the order tried, with whether the group was feasible
    /// in it and, when several were, its total PlacementScore.
    pub tried: Vec<PlacementTried>,
    /// The name of the placement the group was placed in.
    pub chosen: Option<String>,
}

/// One placement a group cycle tried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementTried {
    /// Its name (TopologyPlacement: the domain).
    pub name: String,
    /// How many nodes it has.
    pub nodes: usize,
    /// Whether the group could be placed in it.
    pub feasible: bool,
    /// Its weighted PlacementScore total, when several placements were feasible.
    pub score: Option<i64>,
}

/// One member's result in a group cycle.
enum Member {
    /// Placed (assumed and reserved) on `host`.
    Placed {
        state: CycleState,
        assumed: Arc<PodInfo>,
        host: String,
    },
    /// Fit nowhere, or its reservation failed.
    Failed {
        status: Status,
        diagnosis: Option<Diagnosis>,
    },
    /// Not tried: the group stopped before it.
    NotTried,
}

impl Scheduler {
    /// The PodGroup a popped pod belongs to, when the gate is on and the group exists.
    /// With the gate on, the first pop also registers the pod-group metric families.
    pub(super) fn pod_group_of(&self, pod: &PodInfo) -> Option<Arc<PodGroup>> {
        if !self
            .handle
            .features()
            .enabled(kubesched_framework::Feature::GenericWorkload)
        {
            return None;
        }
        self.metrics.enable_pod_group_metrics();
        let name = pod_group_name(pod)?;
        self.handle
            .objects()
            .of::<PodGroup>()
            .get(Some(&pod.namespace), name)
    }

    /// Schedules the group of `first` (just popped) with its other queued members.
    pub(super) async fn schedule_pod_group(
        self: &Arc<Self>,
        fw: Arc<Framework>,
        first: QueuedPodInfo,
        pg: Arc<PodGroup>,
    ) {
        let start = Instant::now();
        let pod_cycle = self.queue.scheduling_cycle();
        let namespace = first.pod_info.namespace.clone();
        let name = pod_group_name(&first.pod_info)
            .unwrap_or_default()
            .to_string();
        let policy = match scheduling_policy(&pg) {
            Ok(p) => p,
            Err(e) => {
                let status = Status::unresolvable(e.to_string());
                self.handle_failure(&fw, first, status, None, CLEAR_NOMINATION, start, pod_cycle);
                self.metrics.pod_group_attempt(
                    AttemptResult::Unschedulable,
                    fw.profile_name(),
                    start.elapsed(),
                );
                return;
            }
        };

        // The other unscheduled members the scheduler knows, out of the queue, and the
        // members already placed (bound, or assumed and binding).
        let known = self.compiled_pods_in_group(&namespace, &name);
        let mut already = 0;
        let mut others = Vec::new();
        let mut scheduled = Vec::new();
        for p in &known {
            if p.uid == first.pod_info.uid {
                continue;
            }
            if p.node_name.is_some() {
                already += 1;
                scheduled.push(p.clone());
            } else if self.cache.is_assumed_pod(&p.uid) {
                already += 1;
                // The cache's copy carries the node it was assumed on.
                scheduled.extend(self.cache.get_pod(&p.uid));
            } else if !p.terminating {
                others.push(p.uid.clone());
            }
        }
        let mut queued = vec![first];
        queued.extend(self.queue.pop_specific(&others));
        // The members must agree on scheduler, priority and preemption policy (the queued
        // ones and those already placed); if not, the whole group fails with an error.
        let placed = known
            .iter()
            .filter(|p| p.node_name.is_some() || self.cache.is_assumed_pod(&p.uid));
        let preemption_policy_gate = self
            .handle
            .features()
            .enabled_by_name("PodGroupPreemptionPolicy")
            == Some(true);
        if let Err(message) = validate_members(
            &pg,
            fw.profile_name(),
            preemption_policy_gate,
            queued
                .iter()
                .map(|q| &*q.pod_info)
                .chain(placed.map(|p| &**p)),
        ) {
            let status = Status::error(message);
            let info = PodGroupInfo {
                namespace: namespace.clone(),
                name: name.clone(),
                pod_group: pg.clone(),
                policy,
                pods: queued.iter().map(|q| q.pod_info.clone()).collect(),
                scheduled: scheduled.clone(),
            };
            tracing::warn!(pod_group = %info.key(), message = %status.message(), "error scheduling pod group");
            for qpi in queued {
                self.handle_failure(
                    &fw,
                    qpi,
                    status.clone(),
                    None,
                    CLEAR_NOMINATION,
                    start,
                    pod_cycle,
                );
            }
            self.update_pod_group_condition(&info, &status);
            self.metrics.pod_group_attempt(
                AttemptResult::Error,
                fw.profile_name(),
                start.elapsed(),
            );
            return;
        }
        // Members being deleted, or placed meanwhile, are not tried.
        let mut members = Vec::with_capacity(queued.len());
        for qpi in queued {
            if qpi.pod_info.terminating || self.cache.is_assumed_pod(&qpi.pod_info.uid) {
                self.queue.done(&qpi.pod_info.uid);
            } else {
                members.push(qpi);
            }
        }
        if members.is_empty() {
            return;
        }
        // Higher priority first, then the pod that entered the queue first (by name on a tie,
        // so a simulation is deterministic).
        members.sort_by(|a, b| {
            b.pod_info
                .priority
                .cmp(&a.pod_info.priority)
                .then(
                    a.initial_attempt_timestamp
                        .cmp(&b.initial_attempt_timestamp),
                )
                .then(a.pod_info.name.cmp(&b.pod_info.name))
        });
        let info = PodGroupInfo {
            namespace: namespace.clone(),
            name: name.clone(),
            pod_group: pg.clone(),
            policy,
            pods: members.iter().map(|m| m.pod_info.clone()).collect(),
            scheduled,
        };
        tracing::debug!(pod_group = %info.key(), members = members.len(), "attempting to schedule pod group");

        let topology_aware = self
            .handle
            .features()
            .enabled(Feature::TopologyAwareWorkloadScheduling);
        let (results, status, placements) = if topology_aware {
            let (r, s, p) = self.pod_group_placement_algorithm(&fw, &info, &members, already);
            (r, s, Some(p))
        } else {
            let (r, s) = self.pod_group_algorithm(&fw, &info, &members, already);
            (r, s, None)
        };
        self.metrics.algorithm(start.elapsed());
        self.metrics.pod_group_algorithm(start.elapsed());
        self.submit_pod_group(
            fw, info, members, results, status, placements, already, start, pod_cycle,
        );
        self.refresh_cache_gauges();
    }

    /// The live members of a group (any state), sorted by name.
    fn compiled_pods_in_group(&self, namespace: &str, group: &str) -> Vec<Arc<PodInfo>> {
        use kubesched_framework::LivePods;
        self.compiled_pods.in_pod_group(namespace, group)
    }

    /// Tries the members in order, each with the earlier ones assumed; returns each
    /// member's result and the group's status (Success: bind the placed members;
    /// Unschedulable: nothing is held any more; Error).
    fn pod_group_algorithm(
        &self,
        fw: &Arc<Framework>,
        info: &PodGroupInfo,
        members: &[QueuedPodInfo],
        already: usize,
    ) -> (Vec<Member>, Status) {
        let (mut results, status, _) = self.try_members(fw, info, members, already);
        if !status.is_success() {
            // Nothing of the group is held.
            undo_members(self, fw, &mut results);
        }
        (results, status)
    }

    /// The members tried in order within the current placement (all nodes unless one is
    /// set), each with the earlier ones assumed and reserved, PlacementFeasible asked
    /// before the first and after each; the members placed stay held whatever the verdict.
    fn try_members(
        &self,
        fw: &Arc<Framework>,
        info: &PodGroupInfo,
        members: &[QueuedPodInfo],
        already: usize,
    ) -> (Vec<Member>, Status, PlacementCycleState) {
        let mut results: Vec<Member> = members.iter().map(|_| Member::NotTried).collect();
        let mut placement = PlacementCycleState::new();
        let mut progress = PlacementProgress {
            remaining: members.len(),
            scheduled: already,
        };
        let mut verdict = placement_feasible(fw, &mut placement, info, progress);
        let mut any_placed = false;
        if !stops(&verdict) {
            for (i, qpi) in members.iter().enumerate() {
                let result = self.place_member(fw, qpi);
                let placed = matches!(result, Member::Placed { .. });
                if let Member::Failed { status, .. } = &result
                    && status.code() == Code::Error
                {
                    let cause = status.message();
                    results[i] = result;
                    verdict = Status::error(format!(
                        "failed to schedule other pod from a pod group: {cause}"
                    ));
                    break;
                }
                results[i] = result;
                progress.remaining -= 1;
                if placed {
                    progress.scheduled += 1;
                    any_placed = true;
                }
                verdict = placement_feasible(fw, &mut placement, info, progress);
                if stops(&verdict) {
                    break;
                }
            }
        }
        let status = match verdict.code() {
            Code::Success | Code::Skip if any_placed => Status::success(),
            Code::Success | Code::Skip => Status::unschedulable(NO_PODS_SCHEDULABLE),
            // Waiting when the members ran out is final: the group cannot be placed now.
            Code::Wait => carry_plugin(Status::unschedulable(verdict.message()), &verdict),
            Code::Error => verdict,
            _ => carry_plugin(Status::unschedulable(verdict.message()), &verdict),
        };
        (results, status, placement)
    }

    /// TopologyAwareWorkloadScheduling's cycle: the PlacementGenerate plugins' candidates
    /// (one placement of every node when the profile has none), the group tried within
    /// each, the best feasible one chosen by PlacementScore and its members held again.
    fn pod_group_placement_algorithm(
        &self,
        fw: &Arc<Framework>,
        info: &PodGroupInfo,
        members: &[QueuedPodInfo],
        already: usize,
    ) -> (Vec<Member>, Status, PlacementsOutcome) {
        let not_tried = || members.iter().map(|_| Member::NotTried).collect::<Vec<_>>();
        let mut outcome = PlacementsOutcome::default();
        if let Err(status) = self.update_snapshot() {
            return (not_tried(), status, outcome);
        }
        let all = Placement::new("", self.handle.snapshot().list().to_vec());
        let mut group_state = CycleState::new();
        let placements = match fw.run_placement_generate_plugins(&mut group_state, info, all) {
            Ok(p) => p,
            Err(status) => return (not_tried(), status, outcome),
        };
        tracing::debug!(pod_group = %info.key(), placements = placements.len(), "generated placements");
        let total = placements.len();
        let mut first_failure: Option<(Vec<Member>, Status)> = None;
        let mut feasible: Vec<(Arc<Placement>, Vec<Member>, PlacementCycleState)> = Vec::new();
        for placement in placements {
            tracing::trace!(pod_group = %info.key(), placement = %placement.name, "trying placement");
            let keep: HashSet<String> = placement
                .nodes
                .iter()
                .map(|n| n.name().to_string())
                .collect();
            *self.placement.lock() = Some(Arc::new(keep));
            let (mut results, status, state) = self.try_members(fw, info, members, already);
            *self.placement.lock() = None;
            // Each placement starts from the cluster as it was: nothing of this one is held.
            undo_members(self, fw, &mut results);
            outcome.tried.push(PlacementTried {
                name: placement.name.clone(),
                nodes: placement.nodes.len(),
                feasible: status.is_success(),
                score: None,
            });
            if status.is_error() {
                return (results, status, outcome);
            }
            if status.is_success() {
                feasible.push((Arc::new(placement), results, state));
            } else if first_failure.is_none() {
                first_failure = Some((results, status));
            }
        }
        if feasible.is_empty() {
            let (results, first) = first_failure.unwrap_or_else(|| {
                (
                    not_tried(),
                    Status::unschedulable("no placements were generated"),
                )
            });
            let status = carry_plugin(
                Status::unschedulable(no_placement_available(total, &first.message())),
                &first,
            );
            return (results, status, outcome);
        }
        let best = if feasible.len() == 1 {
            0
        } else {
            let assignments: Vec<PodGroupAssignments> = feasible
                .iter()
                .map(|(placement, results, _)| PodGroupAssignments {
                    placement: placement.clone(),
                    proposed: results
                        .iter()
                        .filter_map(|r| match r {
                            Member::Placed { assumed, host, .. } => Some(ProposedAssignment {
                                pod: assumed.clone(),
                                node_name: host.clone(),
                            }),
                            _ => None,
                        })
                        .collect(),
                })
                .collect();
            let states: Vec<PlacementCycleState> =
                feasible.iter().map(|(_, _, st)| st.clone()).collect();
            if let Err(status) = self.update_snapshot() {
                return (not_tried(), status, outcome);
            }
            let table = match fw.run_placement_score_plugins(info, &assignments, &states) {
                Ok(t) => t,
                Err(status) => return (not_tried(), status, outcome),
            };
            for ((placement, _, _), total) in feasible.iter().zip(&table.totals) {
                if let Some(t) = outcome.tried.iter_mut().find(|t| t.name == placement.name) {
                    t.score = Some(*total);
                }
                tracing::trace!(pod_group = %info.key(), placement = %placement.name, score = total, "scored placement");
            }
            self.pick_best(&table.totals)
        };
        let (placement, mut results, _) = feasible.swap_remove(best);
        tracing::debug!(pod_group = %info.key(), placement = %placement.name, "chose placement");
        outcome.chosen = Some(placement.name.clone());
        self.hold_again(fw, &mut results);
        (results, Status::success(), outcome)
    }

    /// The index of the highest total; ties broken uniformly at random by the scheduler's
    /// seeded RNG (upstream draws a random number per placement for the same effect).
    fn pick_best(&self, totals: &[i64]) -> usize {
        let mut rng = self.rng.lock();
        let mut best = 0;
        let mut ties = 0u64;
        for (i, &t) in totals.iter().enumerate() {
            if i == 0 || t > totals[best] {
                best = i;
                ties = 1;
            } else if t == totals[best] {
                ties += 1;
                if rng.u64(0..ties) == 0 {
                    best = i;
                }
            }
        }
        best
    }

    /// Assumes and reserves the chosen placement's members again on their nodes, in
    /// order; a member whose Reserve now fails is undone and fails alone (upstream rejects
    /// such a member and lets the others go on).
    fn hold_again(&self, fw: &Arc<Framework>, results: &mut [Member]) {
        for result in results.iter_mut() {
            let Member::Placed {
                state,
                assumed,
                host,
            } = result
            else {
                continue;
            };
            if let Err(e) = self.cache.assume_pod(assumed.clone()) {
                *result = Member::Failed {
                    status: Status::error(format!("assuming pod: {e}")),
                    diagnosis: None,
                };
                continue;
            }
            let reserve = fw.run_reserve_plugins_reserve(state, assumed, host);
            if !reserve.is_success() {
                fw.run_reserve_plugins_unreserve(state, assumed, host);
                let _ = self.cache.forget_pod(&assumed.uid);
                let diagnosis = rejection_diagnosis(host, &reserve);
                *result = Member::Failed {
                    status: rejection_status(reserve, host),
                    diagnosis,
                };
            }
        }
    }

    /// Filter and Score for one member against the current cluster (earlier members
    /// assumed), then assume and Reserve on success. No PostFilter: preemption for groups
    /// is upstream's workload-aware preemption, which kubesched does not do.
    fn place_member(&self, fw: &Arc<Framework>, qpi: &QueuedPodInfo) -> Member {
        let pod = &qpi.pod_info;
        let mut state = CycleState::new();
        state.record_plugin_metrics = self.rng.lock().u32(0..100) < PLUGIN_METRICS_SAMPLE_PERCENT;
        let outcome = self
            .handle
            .parallelizer()
            .install(|| self.schedule_pod(fw, &mut state, pod));
        if let Some(e) = self.explaining.lock().take()
            && let Some(o) = self.observer.lock().clone()
        {
            o.explanation(pod, e);
        }
        let host = match outcome {
            Ok(r) => r.suggested_host,
            Err(CycleError::NoNodes) => {
                return Member::Failed {
                    status: Status::unresolvable(NO_NODES_AVAILABLE),
                    diagnosis: None,
                };
            }
            Err(CycleError::Internal(status)) => {
                return Member::Failed {
                    status,
                    diagnosis: None,
                };
            }
            Err(CycleError::Fit(fit)) => {
                return Member::Failed {
                    status: Status::unschedulable(fit.message()),
                    diagnosis: Some(fit.diagnosis),
                };
            }
        };
        let mut assumed = (**pod).clone();
        assumed.node_name = Some(host.clone());
        let assumed = Arc::new(assumed);
        if let Err(e) = self.cache.assume_pod(assumed.clone()) {
            return Member::Failed {
                status: Status::error(format!("assuming pod: {e}")),
                diagnosis: None,
            };
        }
        self.handle.nominator().remove(&assumed.uid);
        let reserve = fw.run_reserve_plugins_reserve(&mut state, &assumed, &host);
        if !reserve.is_success() {
            fw.run_reserve_plugins_unreserve(&mut state, &assumed, &host);
            let _ = self.cache.forget_pod(&assumed.uid);
            let diagnosis = rejection_diagnosis(&host, &reserve);
            return Member::Failed {
                status: rejection_status(reserve, &host),
                diagnosis,
            };
        }
        Member::Placed {
            state,
            assumed,
            host,
        }
    }

    /// Acts on a group cycle's results: placed members of a placed group go on to Permit
    /// and binding; every other member goes back to the queue with its own reason (it fit
    /// nowhere) or the group's; the PodGroup's `PodGroupInitiallyScheduled` condition
    /// follows.
    #[allow(clippy::too_many_arguments)]
    fn submit_pod_group(
        self: &Arc<Self>,
        fw: Arc<Framework>,
        info: PodGroupInfo,
        members: Vec<QueuedPodInfo>,
        results: Vec<Member>,
        status: Status,
        placements: Option<PlacementsOutcome>,
        already: usize,
        start: Instant,
        pod_cycle: u64,
    ) {
        let group_diagnosis = || {
            let mut d = Diagnosis::default();
            d.add_plugin_status(&status);
            Some(d)
        };
        let mut outcome = PodGroupOutcome {
            namespace: info.namespace.clone(),
            name: info.name.clone(),
            min_count: info.policy.min_count(),
            already_scheduled: already,
            members: Vec::with_capacity(members.len()),
            placed: status.is_success(),
            message: (!status.is_success()).then(|| status.message()),
            placements,
        };
        // Members scheduled so far, as each placed member's Permit is told: the ones placed
        // before this cycle, then one more per member placed in it, in the order placed.
        let mut scheduled = already;
        for (qpi, result) in members.into_iter().zip(results) {
            let key = qpi.pod_info.key();
            match result {
                Member::Placed {
                    mut state,
                    assumed,
                    host,
                } if status.is_success() => {
                    outcome.members.push((key, Some(host.clone())));
                    scheduled += 1;
                    state.write(PodGroupScheduledCount(scheduled));
                    self.permit_and_bind(fw.clone(), state, qpi, assumed, host, start, pod_cycle);
                }
                Member::Failed {
                    status: own,
                    diagnosis,
                } if !status.is_error() || own.is_error() => {
                    outcome.members.push((key, None));
                    self.handle_failure(
                        &fw,
                        qpi,
                        own,
                        diagnosis,
                        CLEAR_NOMINATION,
                        start,
                        pod_cycle,
                    );
                }
                _ => {
                    outcome.members.push((key, None));
                    self.handle_failure(
                        &fw,
                        qpi,
                        status.clone(),
                        group_diagnosis(),
                        CLEAR_NOMINATION,
                        start,
                        pod_cycle,
                    );
                }
            }
        }
        let result = if status.is_success() {
            tracing::debug!(pod_group = %info.key(), "scheduled pod group");
            AttemptResult::Scheduled
        } else if status.is_rejected() {
            tracing::debug!(pod_group = %info.key(), message = %status.message(), "unable to schedule pod group");
            AttemptResult::Unschedulable
        } else {
            tracing::warn!(pod_group = %info.key(), message = %status.message(), "error scheduling pod group");
            AttemptResult::Error
        };
        self.metrics
            .pod_group_attempt(result, fw.profile_name(), start.elapsed());
        self.update_pod_group_condition(&info, &status);
        if let Some(o) = self.observer.lock().clone() {
            o.pod_group_attempt(&outcome);
        }
    }

    /// Writes the PodGroup's `PodGroupInitiallyScheduled` condition (True once placed,
    /// never back to False after that), in the background.
    fn update_pod_group_condition(&self, info: &PodGroupInfo, status: &Status) {
        let (value, reason) = if status.is_success() {
            ("True", REASON_SCHEDULED)
        } else if status.is_rejected() {
            ("False", REASON_UNSCHEDULABLE)
        } else {
            ("False", REASON_SCHEDULER_ERROR)
        };
        let store = self.handle.objects().of::<PodGroup>();
        let Some(pg) = store.get(Some(&info.namespace), &info.name) else {
            return;
        };
        let conditions = pg
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default();
        let existing = conditions
            .iter()
            .find(|c| c.type_ == POD_GROUP_INITIALLY_SCHEDULED);
        if existing.is_some_and(|c| c.status == "True") && value != "True" {
            return;
        }
        let message = if status.is_success() {
            String::new()
        } else {
            status.message()
        };
        if existing.is_some_and(|c| c.status == value && c.reason == reason && c.message == message)
        {
            return;
        }
        // Whole seconds of the handle's wall clock (a simulation's clock is fake).
        let now = self
            .handle
            .clock()
            .wall_now()
            .duration_since(std::time::SystemTime::UNIX_EPOCH)
            .ok()
            .and_then(|d| i64::try_from(d.as_secs()).ok())
            .and_then(|s| k8s_openapi::jiff::Timestamp::from_second(s).ok())
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let transition = match existing {
            Some(c) if c.status == value => c.last_transition_time.clone(),
            _ => k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now),
        };
        let mut list: Vec<_> = conditions
            .iter()
            .filter(|c| c.type_ != POD_GROUP_INITIALLY_SCHEDULED)
            .cloned()
            .collect();
        list.push(k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
            type_: POD_GROUP_INITIALLY_SCHEDULED.into(),
            status: value.into(),
            reason: reason.into(),
            message,
            observed_generation: pg.metadata.generation,
            last_transition_time: transition,
        });
        let patch = serde_json::json!({"status": {"conditions": list}});
        let writer = self.handle.object_writer::<PodGroup>();
        let namespace = info.namespace.clone();
        let name = info.name.clone();
        let write = async move {
            if let Err(e) = writer.patch_status(Some(&namespace), &name, patch).await {
                tracing::warn!(pod_group = %format!("{namespace}/{name}"), error = %e, "updating the PodGroup's status");
            }
        };
        if !self.handle.spawn_background(write) {
            tracing::debug!(pod_group = %info.key(), "no runtime to write the PodGroup's status");
        }
    }
}

/// Undoes every member a try placed (unreserve, then forget), the last one first; their
/// results keep the node and state, for a placement chosen later.
fn undo_members(sched: &Scheduler, fw: &Arc<Framework>, results: &mut [Member]) {
    for result in results.iter_mut().rev() {
        if let Member::Placed {
            state,
            assumed,
            host,
        } = result
        {
            fw.run_reserve_plugins_unreserve(state, assumed, host);
            if let Err(e) = sched.cache.forget_pod(&assumed.uid) {
                tracing::warn!(pod = %assumed.key(), error = %e, "forgetting a pod of a pod group placement");
            }
        }
    }
}

/// The profile's PlacementFeasible verdict on `info` after `progress`; an error is
/// upstream's `failed to evaluate placement feasibility: …`.
fn placement_feasible(
    fw: &Framework,
    placement: &mut PlacementCycleState,
    info: &PodGroupInfo,
    progress: PlacementProgress,
) -> Status {
    let verdict = fw.run_placement_feasible_plugins(placement, info, progress);
    if verdict.code() != Code::Error {
        return verdict;
    }
    carry_plugin(
        Status::error(format!(
            "failed to evaluate placement feasibility: {}",
            verdict.message()
        )),
        &verdict,
    )
}

/// Whether a PlacementFeasible verdict ends the cycle (cannot be satisfied, or an error).
fn stops(verdict: &Status) -> bool {
    matches!(
        verdict.code(),
        Code::Unschedulable | Code::UnschedulableAndUnresolvable | Code::Error
    )
}

/// `status` with the plugin `from` named, so the members' requeue follows its events.
fn carry_plugin(status: Status, from: &Status) -> Status {
    match from.plugin() {
        Some(p) => status.with_plugin(p),
        None => status,
    }
}
