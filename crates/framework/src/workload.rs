//! Workload-aware (gang) scheduling, behind the `GenericWorkload` gate (beta, off in
//! v1.37): the `scheduling.k8s.io/v1beta1` kinds, how a pod names its group
//! (`spec.schedulingGroup.podGroupName`), a PodGroup's scheduling policy read and checked
//! once, and the group-level extension points the pod-group scheduling cycle runs
//! ([`PlacementFeasiblePlugin`]) with its per-placement state ([`PlacementCycleState`]).
//!
//! With TopologyAwareWorkloadScheduling (alpha, off in v1.37) the cycle also tries the
//! group in several candidate [`Placement`]s (subsets of the nodes):
//! [`PlacementGeneratePlugin`]s propose them, the members are placed within each one in
//! turn, and [`PlacementScorePlugin`]s rank the feasible ones ([`PodGroupAssignments`]);
//! the best is kept.
//!
//! Nothing here schedules: the scheduler crate runs the cycle, plugins (GangScheduling,
//! TopologyPlacement, PodGroupPodsCount, NodeResourcesFit) implement the points. With the
//! gates off nothing reads these types.

use std::sync::Arc;

use kubesched_model::{NodeInfo, PodInfo};

use crate::{CycleState, Status};

pub use k8s_openapi::api::scheduling::v1beta1::{PodGroup, Workload};

/// The PodGroup condition the scheduler writes after a group's cycle.
pub const POD_GROUP_INITIALLY_SCHEDULED: &str = "PodGroupInitiallyScheduled";
/// The condition's reason when the group was placed.
pub const REASON_SCHEDULED: &str = "Scheduled";
/// The condition's reason when the group could not be placed.
pub const REASON_UNSCHEDULABLE: &str = "Unschedulable";
/// The condition's reason when the cycle failed with an internal error.
pub const REASON_SCHEDULER_ERROR: &str = "SchedulerError";

/// The PodGroup a pod belongs to (`spec.schedulingGroup.podGroupName`), if it names one.
pub fn pod_group_name(pod: &PodInfo) -> Option<&str> {
    pod.pod_group_name.as_deref()
}

/// `namespace/name` of the group a pod belongs to.
pub fn pod_group_key(pod: &PodInfo) -> Option<String> {
    pod_group_name(pod).map(|g| format!("{}/{g}", pod.namespace))
}

/// A PodGroup's `spec.schedulingPolicy`: exactly one of `basic` and `gang`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedulingPolicy {
    /// Pods are scheduled one by one as any other pod (`basic: {}`).
    Basic,
    /// All or nothing: at least `min_count` pods placed together (`gang: {minCount}`).
    Gang {
        /// How many pods must be scheduled at once (positive).
        min_count: u32,
    },
}

impl SchedulingPolicy {
    /// The number of pods the group needs scheduled: `minCount` for a gang, 1 for basic.
    pub fn min_count(&self) -> usize {
        match self {
            Self::Basic => 1,
            Self::Gang { min_count } => *min_count as usize,
        }
    }

    /// Whether this is a gang policy.
    pub fn is_gang(&self) -> bool {
        matches!(self, Self::Gang { .. })
    }
}

/// A PodGroup the scheduler cannot use, naming the object and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("PodGroup {object}: {field}: {message}")]
pub struct PodGroupError {
    /// `namespace/name`.
    pub object: String,
    /// The field path, e.g. `spec.schedulingPolicy.gang.minCount`.
    pub field: &'static str,
    /// What is wrong.
    pub message: String,
}

/// Reads and checks a PodGroup's scheduling policy: exactly one of `basic` and `gang`, and
/// a gang's `minCount` positive (the API server's validation; a PodGroup loaded from a
/// manifest did not go through it).
pub fn scheduling_policy(pg: &PodGroup) -> Result<SchedulingPolicy, PodGroupError> {
    let object = format!(
        "{}/{}",
        pg.metadata.namespace.as_deref().unwrap_or("default"),
        pg.metadata.name.as_deref().unwrap_or("<unnamed>")
    );
    let policy = &pg.spec.scheduling_policy;
    match (&policy.basic, &policy.gang) {
        (Some(_), Some(_)) => Err(PodGroupError {
            object,
            field: "spec.schedulingPolicy",
            message: "exactly one of basic and gang may be set, both are".into(),
        }),
        (None, None) => Err(PodGroupError {
            object,
            field: "spec.schedulingPolicy",
            message: "exactly one of basic and gang must be set, neither is".into(),
        }),
        (Some(_), None) => Ok(SchedulingPolicy::Basic),
        (None, Some(gang)) => match u32::try_from(gang.min_count) {
            Ok(n) if n > 0 => Ok(SchedulingPolicy::Gang { min_count: n }),
            _ => Err(PodGroupError {
                object,
                field: "spec.schedulingPolicy.gang.minCount",
                message: format!("must be greater than 0, got {}", gang.min_count),
            }),
        },
    }
}

/// A pod's preemption policy as upstream names it (`PreemptLowerPriority` unless `Never`).
fn preemption_policy_of(pod: &PodInfo) -> &'static str {
    if pod.preemption_never {
        "Never"
    } else {
        "PreemptLowerPriority"
    }
}

/// Upstream v1.37's checks before a pod-group cycle (`validatePodGroup`): every member,
/// the queued ones in order and then those already scheduled, has the first member's
/// `spec.schedulerName` (`scheduler_name`), the PodGroup's priority (`spec.priority`, 0
/// when unset) and one preemption policy: the PodGroup's (`spec.preemptionPolicy`,
/// `PreemptLowerPriority` when unset) with PodGroupPreemptionPolicy on, else the first
/// member's. The error is upstream's message for the first member that differs; the cycle
/// fails with it as an error, for every member.
pub fn validate_members<'a>(
    pod_group: &PodGroup,
    scheduler_name: &str,
    pod_group_preemption_policy: bool,
    members: impl IntoIterator<Item = &'a PodInfo>,
) -> Result<(), String> {
    let priority = pod_group.spec.priority.unwrap_or(0);
    let mut policy: Option<String> = pod_group_preemption_policy.then(|| {
        pod_group
            .spec
            .preemption_policy
            .clone()
            .unwrap_or_else(|| "PreemptLowerPriority".to_string())
    });
    for pod in members {
        if pod.scheduler_name != scheduler_name {
            return Err(format!(
                "all pods in a single pod group should have the same .spec.schedulerName set, got: {:?} and {:?}",
                pod.scheduler_name, scheduler_name
            ));
        }
        if pod.priority != priority {
            return Err(format!(
                "all pods in a single pod group should have the same priority as the pod group's priority, got {} and {priority}",
                pod.priority
            ));
        }
        let own = preemption_policy_of(pod);
        match &policy {
            Some(p) if p != own && pod_group_preemption_policy => {
                return Err(format!(
                    "all pods in a single pod group should have the same preemption policy as the pod group's preemption policy, got {own} and {p}"
                ));
            }
            Some(p) if p != own => {
                return Err(format!(
                    "all pods in a single pod group should have the same preemption policy, got {own} and {p}"
                ));
            }
            Some(_) => {}
            None => policy = Some(own.to_string()),
        }
    }
    Ok(())
}

/// One pod group as a group cycle sees it: the object, its checked policy, and the
/// members the cycle tries to place, in the order it tries them.
#[derive(Debug, Clone)]
pub struct PodGroupInfo {
    /// The namespace.
    pub namespace: String,
    /// The PodGroup's name.
    pub name: String,
    /// The PodGroup object.
    pub pod_group: Arc<PodGroup>,
    /// Its scheduling policy.
    pub policy: SchedulingPolicy,
    /// The unscheduled members of this cycle.
    pub pods: Vec<Arc<PodInfo>>,
    /// The members placed before this cycle (bound, or assumed and binding), each with
    /// the node it is on in `node_name`.
    pub scheduled: Vec<Arc<PodInfo>>,
}

impl PodGroupInfo {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// How far a group cycle has got, as PlacementFeasible plugins are told after each member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlacementProgress {
    /// Members not evaluated yet in this cycle.
    pub remaining: usize,
    /// Members placed: already assigned (bound or assumed) before the cycle, plus the ones
    /// placed in it so far.
    pub scheduled: usize,
}

/// How many members of a pod's group are scheduled, the pod itself included, when the
/// pod reaches Permit (upstream's `PodGroupState.ScheduledPodsCount()`: members bound, or
/// assumed in this or an earlier cycle). The pod-group cycle writes it into each placed
/// member's [`CycleState`] before that member's Permit, counting the members placed
/// before it in the cycle as upstream's cycle, which assumes and permits them one by one,
/// does; GangScheduling's Permit reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodGroupScheduledCount(pub usize);

/// State of one placement of a group cycle (upstream's placement cycle state): plugins keep
/// what they learn while the members of one placement are evaluated. A new one per
/// placement: one implicit placement (all nodes) per cycle, or, with
/// TopologyAwareWorkloadScheduling, one per generated [`Placement`], handed back to the
/// PlacementScore plugins with that placement's [`PodGroupAssignments`].
#[derive(Default, Clone)]
pub struct PlacementCycleState {
    state: CycleState,
}

impl PlacementCycleState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }
}

impl std::ops::Deref for PlacementCycleState {
    type Target = CycleState;
    fn deref(&self) -> &CycleState {
        &self.state
    }
}

impl std::ops::DerefMut for PlacementCycleState {
    fn deref_mut(&mut self) -> &mut CycleState {
        &mut self.state
    }
}

/// Decides, before a group's first member and after each one, whether the group can still
/// meet its constraints (GangScheduling: `minCount`). Not a configurable point: every
/// plugin of the profile implementing it takes part, as upstream's framework collects them.
///
/// Answers: Success (satisfied, go on), Wait (not satisfied yet, go on; the group fails if
/// the cycle ends so), Unschedulable (cannot be satisfied: stop, nothing of the group is
/// held), Error (stop).
pub trait PlacementFeasiblePlugin: Send + Sync {
    /// The verdict for `group` after `progress`.
    fn placement_feasible(
        &self,
        state: &mut PlacementCycleState,
        group: &PodGroupInfo,
        progress: PlacementProgress,
    ) -> Status;
}

/// A candidate placement of a group cycle: a named subset of the cluster's nodes (e.g.
/// the nodes of one zone) the members are tried on, every other node left out.
#[derive(Debug, Clone)]
pub struct Placement {
    /// Its name (TopologyPlacement: the topology domain, e.g. `zone-a`).
    pub name: String,
    /// Its nodes, in the cluster's order.
    pub nodes: Vec<Arc<NodeInfo>>,
}

impl Placement {
    /// A placement of `nodes`.
    pub fn new(name: impl Into<String>, nodes: Vec<Arc<NodeInfo>>) -> Self {
        Self {
            name: name.into(),
            nodes,
        }
    }

    /// Whether the node named `name` is in the placement.
    pub fn contains(&self, name: &str) -> bool {
        self.nodes.iter().any(|n| n.name() == name)
    }
}

/// Proposes candidate placements for a group (TopologyAwareWorkloadScheduling). Enabled
/// at `placementGenerate` (multiPoint enables it where it is implemented). The cycle
/// starts from one parent placement of every node; each plugin, in profile order, splits
/// every placement the ones before it made, so the candidates of two plugins are the
/// intersections of theirs.
///
/// Answers: the placements (none: the group cannot be placed now), or a non-success
/// status that ends the cycle with it (Unschedulable, or Error).
pub trait PlacementGeneratePlugin: Send + Sync {
    /// The candidate placements of `group` within `parent`. `state` lives for the whole
    /// group cycle.
    fn generate_placements(
        &self,
        state: &mut CycleState,
        group: &PodGroupInfo,
        parent: &Placement,
    ) -> Result<Vec<Placement>, Status>;
}

/// One member the cycle placed within a placement, and where.
#[derive(Debug, Clone)]
pub struct ProposedAssignment {
    /// The member.
    pub pod: Arc<PodInfo>,
    /// The node it would go to.
    pub node_name: String,
}

/// A feasible placement and what the cycle did with the group in it, as PlacementScore
/// plugins see it.
#[derive(Debug, Clone)]
pub struct PodGroupAssignments {
    /// The placement.
    pub placement: Arc<Placement>,
    /// The members of this cycle placed within it, in the order placed.
    pub proposed: Vec<ProposedAssignment>,
}

/// Ranks a group's feasible placements (TopologyAwareWorkloadScheduling): called only when
/// more than one placement is feasible. Enabled at `placementScore` with a weight (0
/// means 1). Scores are normalised by the plugin when it implements
/// [`normalize_placement_scores`](Self::normalize_placement_scores), must then lie in
/// 0..=100, and are summed with the weights; the highest total wins, ties broken at random.
pub trait PlacementScorePlugin: Send + Sync {
    /// The score of one feasible placement; an error ends the cycle.
    fn score_placement(
        &self,
        state: &PlacementCycleState,
        group: &PodGroupInfo,
        assignments: &PodGroupAssignments,
    ) -> Result<i64, Status>;

    /// Whether the plugin normalises its scores.
    fn has_normalize_placement_score(&self) -> bool {
        false
    }

    /// Normalises the scores of every feasible placement at once (aligned with the
    /// placements); a non-success status ends the cycle.
    fn normalize_placement_scores(&self, _group: &PodGroupInfo, _scores: &mut [i64]) -> Status {
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::scheduling::v1beta1::{
        BasicSchedulingPolicy, GangSchedulingPolicy, PodGroupSchedulingPolicy, PodGroupSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn group(basic: bool, gang: Option<i32>) -> PodGroup {
        PodGroup {
            metadata: ObjectMeta {
                name: Some("train".into()),
                namespace: Some("ml".into()),
                ..Default::default()
            },
            spec: PodGroupSpec {
                scheduling_policy: PodGroupSchedulingPolicy {
                    basic: basic.then(BasicSchedulingPolicy::default),
                    gang: gang.map(|min_count| GangSchedulingPolicy { min_count }),
                },
                ..Default::default()
            },
            status: None,
        }
    }

    fn member(name: &str, scheduler: &str, priority: i32, never: bool) -> PodInfo {
        let mut pod = k8s_openapi::api::core::v1::Pod::default();
        pod.metadata.name = Some(name.into());
        pod.metadata.namespace = Some("ml".into());
        let spec = pod.spec.get_or_insert_with(Default::default);
        spec.scheduler_name = Some(scheduler.into());
        spec.priority = Some(priority);
        spec.preemption_policy = never.then(|| "Never".to_string());
        PodInfo::new(Arc::new(pod)).expect("pod")
    }

    /// Name, PodGroup, PodGroupPreemptionPolicy on, members, expected error.
    type ValidationRow = (
        &'static str,
        PodGroup,
        bool,
        Vec<PodInfo>,
        Option<&'static str>,
    );

    #[test]
    fn members_must_agree_as_upstream_checks_them() {
        const SCHED: &str = "default-scheduler";
        let with = |priority: Option<i32>, policy: Option<&str>| {
            let mut pg = group(false, Some(2));
            pg.spec.priority = priority;
            pg.spec.preemption_policy = policy.map(str::to_string);
            pg
        };
        let a = member("a", SCHED, 0, false);
        let rows: Vec<ValidationRow> = vec![
            (
                "alike",
                with(None, None),
                false,
                vec![a.clone(), member("b", SCHED, 0, false)],
                None,
            ),
            (
                "another scheduler",
                with(None, None),
                false,
                vec![a.clone(), member("b", "batch", 0, false)],
                Some(
                    r#"all pods in a single pod group should have the same .spec.schedulerName set, got: "batch" and "default-scheduler""#,
                ),
            ),
            (
                "priority unlike the group's",
                with(Some(1000), None),
                false,
                vec![
                    member("a", SCHED, 1000, false),
                    member("b", SCHED, 0, false),
                ],
                Some(
                    "all pods in a single pod group should have the same priority as the pod group's priority, got 0 and 1000",
                ),
            ),
            (
                "the group's priority unset is 0",
                with(None, None),
                false,
                vec![member("a", SCHED, 5, false)],
                Some(
                    "all pods in a single pod group should have the same priority as the pod group's priority, got 5 and 0",
                ),
            ),
            (
                "policies differ, gate off: the first member's",
                with(None, None),
                false,
                vec![member("a", SCHED, 0, true), a.clone()],
                Some(
                    "all pods in a single pod group should have the same preemption policy, got PreemptLowerPriority and Never",
                ),
            ),
            (
                "all Never, gate off",
                with(None, None),
                false,
                vec![member("a", SCHED, 0, true), member("b", SCHED, 0, true)],
                None,
            ),
            (
                "gate on: the group's policy rules",
                with(None, Some("Never")),
                true,
                vec![a.clone()],
                Some(
                    "all pods in a single pod group should have the same preemption policy as the pod group's preemption policy, got PreemptLowerPriority and Never",
                ),
            ),
            (
                "gate on, the default matches",
                with(None, None),
                true,
                vec![a.clone()],
                None,
            ),
        ];
        for (name, pg, gate, members, want) in rows {
            let got = validate_members(&pg, SCHED, gate, members.iter());
            assert_eq!(got.err().as_deref(), want, "{name}");
        }
    }

    #[test]
    fn policies_are_checked() {
        assert_eq!(
            scheduling_policy(&group(true, None)),
            Ok(SchedulingPolicy::Basic)
        );
        assert_eq!(
            scheduling_policy(&group(false, Some(3))).map(|p| p.min_count()),
            Ok(3)
        );
        let both = scheduling_policy(&group(true, Some(2))).expect_err("both");
        assert_eq!(both.field, "spec.schedulingPolicy");
        assert_eq!(
            both.to_string(),
            "PodGroup ml/train: spec.schedulingPolicy: exactly one of basic and gang may be set, both are"
        );
        let neither = scheduling_policy(&group(false, None)).expect_err("neither");
        assert_eq!(neither.field, "spec.schedulingPolicy");
        let zero = scheduling_policy(&group(false, Some(0))).expect_err("zero");
        assert_eq!(zero.field, "spec.schedulingPolicy.gang.minCount");
        assert!(zero.to_string().ends_with("must be greater than 0, got 0"));
    }
}
