//! Building blocks of upstream's workload-aware preemption (v1.37's `PodGroupEvaluator`,
//! `pkg/scheduler/framework/preemption/podgrouppreemption.go`), where the preemptor is a
//! whole PodGroup and the domain is the whole cluster.
//!
//! What is here: the preemption units (a single pod, or every pod of a PodGroup wherever it
//! runs, removed together), their order of importance (upstream's `moreImportantVictim`),
//! which units a group may preempt (lower priority only) and whether the group may preempt
//! at all (`preemptionPolicy: Never`, a lower-priority pod still terminating by preemption
//! on a member's nominated node), and the selection itself ([`select_group_victims`]:
//! every allowed unit removed, the group algorithm run once, then units reprieved most
//! important first, PodDisruptionBudget-violating ones before the others). The pod-group
//! PostFilter point that calls it from the group cycle, the reprieve's Filter runs on the
//! proposed assignments, the nominations and the actuation are not wired yet (issue 33).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kubesched_framework::model::k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::{Code, Status};

use crate::evaluator::{
    compile_budgets, split_by_pdb_violation, start_time, terminating_by_preemption,
};
use crate::{NOT_ELIGIBLE_NEVER, NOT_ELIGIBLE_TERMINATING};

/// The reason when no unit in the cluster has a lower priority than the preemptor group.
pub const ERR_REASON_NO_VICTIMS_FOR_GROUP: &str =
    "No preemption victims found for incoming preemptor";

/// One unit of preemption: a single pod, or all the bound pods of one PodGroup, which are
/// evicted together or not at all.
#[derive(Debug, Clone)]
pub struct PreemptionUnit {
    /// The unit's pods (one for a single pod), in node order.
    pub pods: Vec<Arc<PodInfo>>,
    /// The unit's priority: its PodGroup's priority, or the single pod's.
    pub priority: i32,
    /// `(namespace, name)` of the PodGroup, for a group unit.
    pub pod_group: Option<(String, String)>,
}

impl PreemptionUnit {
    /// Whether the unit is a whole PodGroup.
    pub fn is_pod_group(&self) -> bool {
        self.pod_group.is_some()
    }

    /// The earliest start time of the unit's pods in nanoseconds (`now` for pods that have
    /// not started).
    pub fn earliest_start(&self, now: i128) -> i128 {
        self.pods
            .iter()
            .map(|p| start_time(p, now))
            .min()
            .unwrap_or(now)
    }

    /// The nodes the unit's pods run on, de-duplicated, in name order.
    pub fn affected_nodes(&self) -> BTreeSet<&str> {
        self.pods
            .iter()
            .filter_map(|p| p.node_name.as_deref())
            .collect()
    }
}

/// Every preemption unit among the pods on `nodes`: each pod of a PodGroup joins its
/// group's unit (whichever node it is on), every other pod is a unit of its own.
/// `group_priority` gives a PodGroup's priority by namespace and name (upstream's
/// `PodGroupPriority`); a group it does not know takes its first pod's priority. Group
/// units come first in (namespace, name) order, then single pods in node order.
pub fn preemption_units(
    nodes: &[Arc<NodeInfo>],
    group_priority: impl Fn(&str, &str) -> Option<i32>,
) -> Vec<PreemptionUnit> {
    let mut groups: BTreeMap<(String, String), Vec<Arc<PodInfo>>> = BTreeMap::new();
    let mut singles = Vec::new();
    for node in nodes {
        for pod in node.pods.iter() {
            match &pod.pod_group_name {
                Some(group) => groups
                    .entry((pod.namespace.clone(), group.clone()))
                    .or_default()
                    .push(pod.clone()),
                None => singles.push(PreemptionUnit {
                    pods: vec![pod.clone()],
                    priority: pod.priority,
                    pod_group: None,
                }),
            }
        }
    }
    let mut units: Vec<PreemptionUnit> = groups
        .into_iter()
        .map(|(key, pods)| PreemptionUnit {
            priority: group_priority(&key.0, &key.1).unwrap_or(pods[0].priority),
            pods,
            pod_group: Some(key),
        })
        .collect();
    units.extend(singles);
    units
}

/// Upstream's `moreImportantVictim` as an ordering (`Less`: `a` is more important):
/// higher priority first; at equal priority a PodGroup before a single pod; two single
/// pods by earlier start; two groups by more pods, then by earlier earliest start.
pub fn unit_importance(a: &PreemptionUnit, b: &PreemptionUnit, now: i128) -> Ordering {
    b.priority
        .cmp(&a.priority)
        .then_with(|| b.is_pod_group().cmp(&a.is_pod_group()))
        .then_with(|| {
            if a.is_pod_group() {
                b.pods.len().cmp(&a.pods.len())
            } else {
                Ordering::Equal
            }
        })
        .then_with(|| a.earliest_start(now).cmp(&b.earliest_start(now)))
}

/// Whether a group of `preemptor_priority` may preempt `unit`: only a strictly lower
/// priority (upstream's `isPreemptionAllowed`).
pub fn preemption_allowed(unit: &PreemptionUnit, preemptor_priority: i32) -> bool {
    unit.priority < preemptor_priority
}

/// Upstream's `preemptorEligibleToPreemptOthers` for a group: Err with the reason when
/// its preemption policy is Never, or when a node that one of `members` is nominated to
/// still has a lower-priority pod terminating by preemption. `pod_priority` gives a
/// pod's effective priority (its PodGroup's, or its own).
pub fn group_eligible_to_preempt(
    members: &[Arc<PodInfo>],
    preemption_never: bool,
    priority: i32,
    node: impl Fn(&str) -> Option<Arc<NodeInfo>>,
    pod_priority: impl Fn(&PodInfo) -> i32,
) -> Result<(), &'static str> {
    if preemption_never {
        return Err(NOT_ELIGIBLE_NEVER);
    }
    let nominated: BTreeSet<&str> = members
        .iter()
        .filter_map(|m| m.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty())
        .collect();
    for name in nominated {
        if let Some(info) = node(name) {
            let waiting = info
                .pods
                .iter()
                .any(|p| pod_priority(p) < priority && terminating_by_preemption(p));
            if waiting {
                return Err(NOT_ELIGIBLE_TERMINATING);
            }
        }
    }
    Ok(())
}

/// What [`select_group_victims`] chose.
#[derive(Debug)]
pub struct GroupVictims<T> {
    /// What the group algorithm proposed with every potential victim gone (the members'
    /// nodes, to nominate them to).
    pub assignments: T,
    /// The units to evict, most important first.
    pub victims: Vec<PreemptionUnit>,
    /// How many of them violate a PodDisruptionBudget.
    pub num_pdb_violations: usize,
}

/// Splits units (order kept) into those whose eviction would violate a budget and the
/// others; a unit violates when any of its pods does, every pod counting against the
/// budgets it matches.
fn split_units_by_pdb_violation(
    units: Vec<PreemptionUnit>,
    pdbs: &[Arc<PodDisruptionBudget>],
) -> (Vec<PreemptionUnit>, Vec<PreemptionUnit>) {
    let budgets = compile_budgets(pdbs);
    let flat: Vec<Arc<PodInfo>> = units.iter().flat_map(|u| u.pods.iter().cloned()).collect();
    let (violating_pods, _) = split_by_pdb_violation(&flat, &budgets);
    let violating_uids: BTreeSet<&str> = violating_pods.iter().map(|p| p.uid.as_str()).collect();
    units.into_iter().partition(|u| {
        u.pods
            .iter()
            .any(|p| violating_uids.contains(p.uid.as_str()))
    })
}

/// Upstream's `selectVictimsOnDomain` for a preemptor group over the whole cluster:
/// keeps the units of lower priority than `preemptor_priority` (none: UnschedulableAndUnresolvable
/// `No preemption victims found for incoming preemptor`), lets `schedule_without` remove
/// them all and run the group algorithm (its failure status is returned as is, so no
/// victim is chosen when the group does not fit even with all of them gone), then offers
/// each unit to `reprieve` (true: the group's proposed assignments still pass Filter with
/// the unit back, and it stays), PDB-violating units first, each list most important first.
/// The units not reprieved are the victims.
pub fn select_group_victims<T>(
    units: Vec<PreemptionUnit>,
    preemptor_priority: i32,
    pdbs: &[Arc<PodDisruptionBudget>],
    now: i128,
    schedule_without: impl FnOnce(&[PreemptionUnit]) -> Result<T, Status>,
    mut reprieve: impl FnMut(&T, &PreemptionUnit) -> Result<bool, Status>,
) -> Result<GroupVictims<T>, Status> {
    let mut potential: Vec<PreemptionUnit> = units
        .into_iter()
        .filter(|u| preemption_allowed(u, preemptor_priority))
        .collect();
    if potential.is_empty() {
        return Err(Status::new(
            Code::UnschedulableAndUnresolvable,
            [ERR_REASON_NO_VICTIMS_FOR_GROUP],
        ));
    }
    let assignments = schedule_without(&potential)?;
    potential.sort_by(|a, b| unit_importance(a, b, now));
    let (violating, non_violating) = split_units_by_pdb_violation(potential, pdbs);
    let mut victims = Vec::new();
    let mut num_pdb_violations = 0;
    for unit in violating {
        if !reprieve(&assignments, &unit)? {
            victims.push(unit);
            num_pdb_violations += 1;
        }
    }
    for unit in non_violating {
        if !reprieve(&assignments, &unit)? {
            victims.push(unit);
        }
    }
    victims.sort_by(|a, b| unit_importance(a, b, now));
    tracing::debug!(
        victims = victims.len(),
        num_pdb_violations,
        "selected the victims of a pod group's preemption"
    );
    Ok(GroupVictims {
        assignments,
        victims,
        num_pdb_violations,
    })
}

#[cfg(test)]
mod tests {
    use kubesched_framework::model::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kubesched_framework::model::k8s_openapi::jiff::Timestamp;
    use kubesched_testing::{NodeBuilder, PodBuilder, node_infos};

    use super::*;

    fn node(name: &str) -> NodeBuilder {
        NodeBuilder::new(name).capacity(&[("cpu", "4"), ("memory", "1Gi"), ("pods", "10")])
    }

    fn bound(name: &str, priority: i32, node: &str, started: i64) -> PodBuilder {
        PodBuilder::new(name)
            .priority(priority)
            .node(node)
            .with(move |p| {
                p.status.get_or_insert_with(Default::default).start_time =
                    Some(Time(Timestamp::from_second(started).expect("valid")));
            })
    }

    fn names(unit: &PreemptionUnit) -> Vec<&str> {
        unit.pods.iter().map(|p| p.name.as_str()).collect()
    }

    #[test]
    fn a_pod_group_is_one_unit_across_nodes() {
        let pods = vec![
            bound("g-0", 10, "a", 1).pod_group("low").info(),
            bound("solo", 10, "a", 1).info(),
            bound("g-1", 10, "b", 2).pod_group("low").info(),
        ];
        let nodes = node_infos(vec![node("a"), node("b")], &pods);
        let units = preemption_units(&nodes, |_, _| Some(5));
        assert_eq!(units.len(), 2);
        assert_eq!(names(&units[0]), ["g-0", "g-1"]);
        assert_eq!(
            units[0].pod_group,
            Some(("default".to_string(), "low".to_string()))
        );
        assert_eq!(units[0].priority, 5, "the PodGroup's priority");
        assert_eq!(
            units[0].affected_nodes().into_iter().collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(names(&units[1]), ["solo"]);
        assert!(!units[1].is_pod_group());
    }

    #[test]
    fn importance_orders_priority_then_groups_then_size_then_start() {
        let pods = vec![
            bound("high", 20, "a", 9).info(),
            bound("old", 10, "a", 1).info(),
            bound("new", 10, "a", 5).info(),
            bound("small-0", 10, "a", 3).pod_group("small").info(),
            bound("big-0", 10, "a", 8).pod_group("big").info(),
            bound("big-1", 10, "b", 8).pod_group("big").info(),
            bound("late-0", 10, "b", 7).pod_group("late").info(),
            bound("early-0", 10, "b", 2).pod_group("early").info(),
        ];
        let nodes = node_infos(vec![node("a"), node("b")], &pods);
        let mut units = preemption_units(&nodes, |_, _| None);
        units.sort_by(|a, b| unit_importance(a, b, 100_000_000_000_000));
        let order: Vec<&str> = units.iter().map(|u| u.pods[0].name.as_str()).collect();
        assert_eq!(
            order,
            [
                "high", "big-0", "early-0", "small-0", "late-0", "old", "new"
            ]
        );
    }

    #[test]
    fn only_lower_priority_units_may_be_preempted() {
        let pods = vec![
            bound("equal", 10, "a", 1).info(),
            bound("lower", 9, "a", 1).info(),
        ];
        let nodes = node_infos(vec![node("a")], &pods);
        let units = preemption_units(&nodes, |_, _| None);
        let allowed: Vec<&str> = units
            .iter()
            .filter(|u| preemption_allowed(u, 10))
            .map(|u| u.pods[0].name.as_str())
            .collect();
        assert_eq!(allowed, ["lower"]);
    }

    #[test]
    fn eligibility_never_and_terminating_victim_on_nominated_node() {
        let member = PodBuilder::new("m-0")
            .priority(10)
            .pod_group("high")
            .with(|p| {
                p.status
                    .get_or_insert_with(Default::default)
                    .nominated_node_name = Some("a".into());
            })
            .info();
        let victim = bound("v", 5, "a", 1)
            .with(|p| {
                p.metadata.deletion_timestamp =
                    Some(Time(Timestamp::from_second(50).expect("valid")));
                p.status
                    .get_or_insert_with(Default::default)
                    .conditions
                    .get_or_insert_with(Vec::new)
                    .push(
                        kubesched_framework::model::k8s_openapi::api::core::v1::PodCondition {
                            type_: crate::DISRUPTION_TARGET.into(),
                            status: "True".into(),
                            reason: Some(crate::REASON_PREEMPTION_BY_SCHEDULER.into()),
                            ..Default::default()
                        },
                    );
            })
            .info();
        let nodes = node_infos(vec![node("a")], &[victim]);
        let lookup = |n: &str| nodes.iter().find(|i| i.name() == n).cloned();
        let members = [member];
        assert_eq!(
            group_eligible_to_preempt(&members, true, 10, lookup, |p| p.priority),
            Err(NOT_ELIGIBLE_NEVER)
        );
        assert_eq!(
            group_eligible_to_preempt(&members, false, 10, lookup, |p| p.priority),
            Err(NOT_ELIGIBLE_TERMINATING)
        );
        // The terminating pod is not of lower priority: no wait.
        assert_eq!(
            group_eligible_to_preempt(&members, false, 5, lookup, |p| p.priority),
            Ok(())
        );
    }

    const NOW: i128 = 100_000_000_000_000;

    /// The crate tests' budget, shared for the pod-group selection.
    fn pdb(labels: &[(&str, &str)], allowed: i32) -> Arc<PodDisruptionBudget> {
        Arc::new(crate::tests::pdb("budget", labels, allowed))
    }

    /// A group that needs `need` pod slots freed: the dry run succeeds when the removed
    /// units free that many; a unit is reprieved while what stays removed still does.
    fn run(
        units: Vec<PreemptionUnit>,
        priority: i32,
        pdbs: &[Arc<PodDisruptionBudget>],
        need: usize,
        offered: &mut Vec<String>,
    ) -> Result<GroupVictims<usize>, Status> {
        select_group_victims(
            units,
            priority,
            pdbs,
            NOW,
            |removed| {
                let freed: usize = removed.iter().map(|u| u.pods.len()).sum();
                if freed >= need {
                    Ok(freed)
                } else {
                    Err(Status::unschedulable("not enough room"))
                }
            },
            {
                let mut freed = None;
                move |total: &usize, unit: &PreemptionUnit| {
                    let f = freed.get_or_insert(*total);
                    offered.push(unit.pods[0].name.clone());
                    if *f - unit.pods.len() >= need {
                        *f -= unit.pods.len();
                        Ok(true)
                    } else {
                        Ok(false)
                    }
                }
            },
        )
    }

    fn victim_pods(r: &GroupVictims<usize>) -> Vec<&str> {
        r.victims
            .iter()
            .flat_map(|u| u.pods.iter().map(|p| p.name.as_str()))
            .collect()
    }

    #[test]
    fn a_lower_priority_gang_is_preempted_whole_with_its_pods_on_other_nodes() {
        let pods = vec![
            bound("low-0", 5, "a", 1).pod_group("low").info(),
            bound("low-1", 5, "b", 1).pod_group("low").info(),
            bound("equal", 10, "a", 1).info(),
        ];
        let nodes = node_infos(vec![node("a"), node("b")], &pods);
        let units = preemption_units(&nodes, |_, _| Some(5));
        let mut offered = Vec::new();
        let r = run(units, 10, &[], 1, &mut offered).expect("fits without the gang");
        assert_eq!(victim_pods(&r), ["low-0", "low-1"]);
        assert_eq!(
            offered,
            ["low-0"],
            "the equal-priority pod is never a candidate"
        );
        assert_eq!(r.num_pdb_violations, 0);
    }

    #[test]
    fn equal_priority_only_means_no_victims() {
        let pods = vec![bound("equal", 10, "a", 1).pod_group("peer").info()];
        let nodes = node_infos(vec![node("a")], &pods);
        let units = preemption_units(&nodes, |_, _| Some(10));
        let err = run(units, 10, &[], 1, &mut Vec::new()).expect_err("no victims");
        assert_eq!(err.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(err.message(), ERR_REASON_NO_VICTIMS_FOR_GROUP);
    }

    #[test]
    fn not_enough_room_without_all_victims_chooses_none() {
        let pods = vec![
            bound("low-0", 5, "a", 1).info(),
            bound("low-1", 5, "a", 2).info(),
        ];
        let nodes = node_infos(vec![node("a")], &pods);
        let units = preemption_units(&nodes, |_, _| None);
        let mut offered = Vec::new();
        let err = run(units, 10, &[], 3, &mut offered).expect_err("does not fit");
        assert_eq!(err.code(), Code::Unschedulable);
        assert_eq!(err.message(), "not enough room");
        assert!(offered.is_empty(), "nothing reprieved or chosen");
    }

    #[test]
    fn pdb_violating_units_are_reprieved_first_then_most_important_first() {
        let pods = vec![
            bound("protected", 5, "a", 9).label("app", "db").info(),
            bound("old", 5, "a", 1).info(),
            bound("new", 5, "a", 5).info(),
        ];
        let nodes = node_infos(vec![node("a")], &pods);
        let units = preemption_units(&nodes, |_, _| None);
        let mut offered = Vec::new();
        let r = run(units, 10, &[pdb(&[("app", "db")], 0)], 1, &mut offered).expect("fits");
        assert_eq!(offered, ["protected", "old", "new"]);
        // Two of three stay: the protected one and the older of the others.
        assert_eq!(victim_pods(&r), ["new"]);
        assert_eq!(r.num_pdb_violations, 0);

        let mut offered = Vec::new();
        let units = preemption_units(&nodes, |_, _| None);
        let r = run(units, 10, &[pdb(&[("app", "db")], 0)], 3, &mut offered).expect("fits");
        assert_eq!(victim_pods(&r), ["old", "new", "protected"]);
        assert_eq!(r.num_pdb_violations, 1);
    }
}
