//! Conditions a CI job can fail a run on (`kubesched simulate --fail-on`): each one is a
//! question about the finished report, answered with what made it hold.

use std::fmt::Write as _;

use crate::report::{AttemptResult, PodResult, PodState, SimReport};
use crate::whatif::WhatIf;

/// A condition on a finished run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Gate {
    /// A pod ends Unschedulable (its last attempt failed, an error included) or Invalid (an
    /// API server would refuse it); or `--add-nodes` found no count within its maximum.
    Unschedulable,
    /// A pod ends unbound, whatever the reason: Unschedulable, Invalid, Pending (never
    /// attempted), or evicted by preemption; or `--add-nodes` found no count within its
    /// maximum.
    Pending,
    /// Preemption evicted a pod (Preempted or Terminating at the end).
    Evictions,
    /// The input had problems (a document that does not parse, an object an API server
    /// would refuse, ...).
    Problems,
    /// A pod's last attempt ended in an error (an extender that is down, a plugin error).
    Errors,
}

impl Gate {
    /// Its name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unschedulable => "unschedulable",
            Self::Pending => "pending",
            Self::Evictions => "evictions",
            Self::Problems => "problems",
            Self::Errors => "errors",
        }
    }
}

/// At most this many names in a gate's answer; the rest are counted.
const NAMES_SHOWN: usize = 5;

/// `n pods <what>: a, b, c and 2 more`.
fn listed<'a>(what: &str, pods: impl Iterator<Item = &'a PodResult>) -> Option<String> {
    let keys: Vec<String> = pods.map(PodResult::key).collect();
    if keys.is_empty() {
        return None;
    }
    let noun = if keys.len() == 1 { "pod" } else { "pods" };
    let mut out = format!("{} {noun} {what}: ", keys.len());
    out.push_str(&keys[..keys.len().min(NAMES_SHOWN)].join(", "));
    if keys.len() > NAMES_SHOWN {
        let _ = write!(out, " and {} more", keys.len() - NAMES_SHOWN);
    }
    Some(out)
}

impl SimReport {
    /// Whether `gate` holds for this run, and if so why, in words naming the pods (or the
    /// problems, or the what-if answer) that make it hold.
    pub fn gate(&self, gate: Gate) -> Option<String> {
        // The what-if's own answer, which the pods of the run shown may not make obvious
        // (its still-failing pods can be running pods that preemption evicted).
        let add_nodes_short = match &self.what_if {
            Some(WhatIf::AddNodes(a)) if a.nodes_to_add.is_none() => Some(format!(
                "--add-nodes: more than {} cop{} of {} needed",
                a.max,
                if a.max == 1 { "y" } else { "ies" },
                a.templates.join(" + ")
            )),
            _ => None,
        };
        let pods = match gate {
            Gate::Unschedulable => listed(
                "unschedulable",
                self.pods.iter().filter(|p| {
                    matches!(
                        p.status,
                        PodState::Unschedulable | PodState::Error | PodState::Invalid
                    )
                }),
            ),
            Gate::Pending => listed(
                "not bound",
                self.pods.iter().filter(|p| p.status != PodState::Scheduled),
            ),
            Gate::Evictions => listed(
                "evicted by preemption",
                self.pods
                    .iter()
                    .filter(|p| matches!(p.status, PodState::Preempted | PodState::Terminating)),
            ),
            Gate::Errors => listed(
                "whose last attempt failed with an error",
                self.pods.iter().filter(|p| {
                    p.status != PodState::Scheduled
                        && p.history
                            .last()
                            .is_some_and(|a| a.result == AttemptResult::Error)
                }),
            ),
            Gate::Problems => {
                return match self.problems.as_slice() {
                    [] => None,
                    [one] => Some(format!("1 input problem: {one}")),
                    [first, rest @ ..] => Some(format!(
                        "{} input problems, the first: {first}",
                        rest.len() + 1
                    )),
                };
            }
        };
        match (gate, add_nodes_short, pods) {
            (Gate::Unschedulable | Gate::Pending, Some(short), Some(pods)) => {
                Some(format!("{short}; {pods}"))
            }
            (Gate::Unschedulable | Gate::Pending, Some(short), None) => Some(short),
            (_, _, pods) => pods,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::InputProblem;
    use crate::report::Attempt;
    use crate::whatif::AddNodesAnswer;

    fn pod(name: &str, status: PodState, last: Option<AttemptResult>) -> PodResult {
        PodResult {
            namespace: "default".into(),
            name: name.into(),
            node: None,
            status,
            message: None,
            attempts: u32::from(last.is_some()),
            nominated_node: None,
            victims: Vec::new(),
            preempted_by: None,
            history: last
                .map(|result| Attempt {
                    attempt: 1,
                    result,
                    node: None,
                    nominated_node: None,
                    message: "m".into(),
                })
                .into_iter()
                .collect(),
        }
    }

    fn report(pods: Vec<PodResult>) -> SimReport {
        SimReport {
            pods,
            ..SimReport::default()
        }
    }

    fn holding(r: &SimReport) -> Vec<&'static str> {
        [
            Gate::Unschedulable,
            Gate::Pending,
            Gate::Evictions,
            Gate::Problems,
            Gate::Errors,
        ]
        .into_iter()
        .filter(|&g| r.gate(g).is_some())
        .map(Gate::as_str)
        .collect()
    }

    #[test]
    fn each_pod_state_holds_its_gates() {
        use AttemptResult as A;
        use PodState as S;
        let rows: [(PodState, Option<AttemptResult>, &[&str]); 7] = [
            (S::Scheduled, Some(A::Scheduled), &[]),
            (
                S::Unschedulable,
                Some(A::Unschedulable),
                &["unschedulable", "pending"],
            ),
            (
                S::Error,
                Some(A::Error),
                &["unschedulable", "pending", "errors"],
            ),
            (S::Invalid, None, &["unschedulable", "pending"]),
            (S::Pending, None, &["pending"]),
            (S::Preempted, Some(A::Scheduled), &["pending", "evictions"]),
            (
                S::Terminating,
                Some(A::Scheduled),
                &["pending", "evictions"],
            ),
        ];
        for (status, last, want) in rows {
            let r = report(vec![pod("p", status, last)]);
            assert_eq!(holding(&r), want, "{status:?} after {last:?}");
        }
    }

    #[test]
    fn answers_name_the_pods_and_problems() {
        let mut r = report(
            (1..=7)
                .map(|i| pod(&format!("p{i}"), PodState::Pending, None))
                .collect(),
        );
        assert_eq!(
            r.gate(Gate::Pending).as_deref(),
            Some(
                "7 pods not bound: default/p1, default/p2, default/p3, default/p4, default/p5 and 2 more"
            )
        );
        r.problems
            .push(InputProblem::file("bad.yaml", "invalid YAML"));
        r.problems.push(InputProblem::file("worse.yaml", "gone"));
        let problems = r.gate(Gate::Problems).expect("problems");
        assert!(
            problems.starts_with("2 input problems, the first: bad.yaml"),
            "{problems}"
        );
    }

    #[test]
    fn add_nodes_short_of_its_maximum_holds_unschedulable_and_pending() {
        let mut r = report(vec![pod(
            "p",
            PodState::Scheduled,
            Some(AttemptResult::Scheduled),
        )]);
        r.what_if = Some(WhatIf::AddNodes(AddNodesAnswer {
            templates: vec!["big".into()],
            max: 1,
            nodes_to_add: None,
            added_nodes: vec!["big-1".into()],
            tried: Vec::new(),
            still_failing: Vec::new(),
        }));
        assert_eq!(
            r.gate(Gate::Unschedulable).as_deref(),
            Some("--add-nodes: more than 1 copy of big needed")
        );
        assert_eq!(holding(&r), ["unschedulable", "pending"]);
    }
}
