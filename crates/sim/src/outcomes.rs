//! What a simulation concludes, as the report carries it: where each pod ended
//! ([`PodState`]) and the answers of the capacity what-ifs and of `kubesched explain`.
//! Data only: the questions are asked in `whatif.rs`, which re-runs simulations, and the
//! report reads these without depending on the runner.

use serde::Serialize;

/// Where a pod ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PodState {
    /// Bound to a node.
    Scheduled,
    /// Its last attempt found no node (a plugin's or an extender's verdict).
    Unschedulable,
    /// Its last attempt failed with an error rather than a verdict (an extender that is
    /// down, a plugin error): kube-scheduler's `SchedulerError` reason. It is retried with
    /// backoff, as upstream retries it.
    Error,
    /// Never attempted (gated, or waiting).
    Pending,
    /// Evicted by preemption to make room for a higher-priority pod.
    Preempted,
    /// Evicted by preemption, its termination grace period still running.
    Terminating,
    /// An API server would refuse it (a negative request, a bad operator): not
    /// scheduled, not retried; the message names the field.
    Invalid,
}

impl PodState {
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            Self::Scheduled => "Scheduled",
            Self::Unschedulable => "Unschedulable",
            Self::Error => "Error",
            Self::Pending => "Pending",
            Self::Preempted => "Preempted",
            Self::Terminating => "Terminating",
            Self::Invalid => "Invalid",
        }
    }
}

/// The answer to a what-if, attached to the report of the run that gives it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "question", rename_all = "kebab-case")]
pub enum WhatIf {
    /// `--add-nodes`.
    AddNodes(AddNodesAnswer),
    /// `--drain`.
    Drain(DrainAnswer),
    /// `--scale-workload`.
    ScaleWorkload(ScaleAnswer),
    /// `kubesched explain`: one pod scheduled as a dry run on a cluster read once.
    Explain(ExplainAnswer),
    /// `--consolidate`.
    Consolidate(ConsolidateAnswer),
}

/// Where one pod would go if it were scheduled now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExplainAnswer {
    /// `namespace/name`.
    pub pod: String,
    /// The profile it was scheduled with.
    pub profile: String,
    /// The node it runs on now, for a bound pod.
    pub bound_to: Option<String>,
    /// How the dry run ended, and where.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// For a bound pod: whether it would go to the same node again.
    pub same_node: Option<bool>,
}

/// How many copies of the template nodes it takes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AddNodesAnswer {
    /// The template nodes' names; one copy adds one of each.
    pub templates: Vec<String>,
    /// The most copies tried.
    pub max: usize,
    /// The smallest number of copies with which every pending pod schedules without
    /// evicting anyone, or null when even `max` copies are not enough.
    pub nodes_to_add: Option<usize>,
    /// The nodes added in the run this report shows (`nodes_to_add` copies, else `max`).
    pub added_nodes: Vec<String>,
    /// Every count tried, in the order tried.
    pub tried: Vec<Trial>,
    /// Pods that still fail (or running pods still evicted) in the run this report shows.
    pub still_failing: Vec<PodOutcome>,
}

/// One re-run of the simulation with some copies added.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Trial {
    /// Copies added.
    pub copies: usize,
    /// Pending pods that did not schedule.
    pub unschedulable: usize,
    /// Running pods that preemption evicted.
    pub preempted: usize,
}

/// Where a pod ended in the answering run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PodOutcome {
    /// `namespace/name`.
    pub pod: String,
    /// Scheduled, Unschedulable, Pending, Preempted or Terminating.
    pub status: PodState,
    /// The node, or null.
    pub node: Option<String>,
    /// The FailedScheduling message (or the Preempted event's), or null.
    pub message: Option<String>,
}

/// Where a drained node's pods would go.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DrainAnswer {
    /// The drained (cordoned) nodes.
    pub nodes: Vec<String>,
    /// Pods a drain evicts, each with where its replacement went.
    pub evicted: Vec<DrainedPod>,
    /// Pods a drain leaves alone or refuses to evict, and why.
    pub not_evicted: Vec<SkippedPod>,
    /// The PodDisruptionBudgets covering evicted pods.
    pub budgets: Vec<BudgetCheck>,
    /// Whether every evicted pod's replacement found a node.
    pub all_rescheduled: bool,
}

/// Which nodes the cluster can do without (`--consolidate`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConsolidateAnswer {
    /// Nodes in the cluster.
    pub nodes: usize,
    /// The nodes that can be removed together, in the order they were found: drained all
    /// at once, every evicted pod's replacement finds a node, no pod that ran stops running,
    /// no PodDisruptionBudget blocks an eviction and no pod without a controller is lost.
    pub removable: Vec<String>,
    /// Each node tried, in the order tried (emptiest first), and the verdict.
    pub tried: Vec<ConsolidateTrial>,
}

/// One node `--consolidate` tried to add to the removable set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConsolidateTrial {
    /// The node.
    pub node: String,
    /// Whether it joined the removable set.
    pub removable: bool,
    /// Why not, when it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One evicted pod and its replacement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DrainedPod {
    /// `namespace/name` (the replacement carries the same name).
    pub pod: String,
    /// The drained node it ran on.
    pub from: String,
    /// Its controller, `Kind/name`.
    pub owner: String,
    /// Where the replacement went.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// Where a pod went: its status, node and message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// Scheduled, Unschedulable, ...
    pub status: PodState,
    /// The node, or null.
    pub to: Option<String>,
    /// The FailedScheduling message, or null.
    pub message: Option<String>,
}

/// A pod on a drained node that a drain does not evict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedPod {
    /// `namespace/name`.
    pub pod: String,
    /// The node.
    pub node: String,
    /// Why it is not evicted.
    pub reason: String,
}

/// A PodDisruptionBudget that covers evicted pods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BudgetCheck {
    /// `namespace/name`.
    pub budget: String,
    /// Evictions it allows now.
    pub disruptions_allowed: i32,
    /// Where that number comes from: `status` (the disruption controller's, which the
    /// eviction API reads) or `spec` (computed from the dump's pods when it has no status).
    pub source: &'static str,
    /// The evicted pods it covers.
    pub pods: Vec<String>,
    /// What it does to the drain.
    pub verdict: String,
}

/// Where the new replicas of a workload would go.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScaleAnswer {
    /// `Deployment`, `StatefulSet` or `ReplicaSet`.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Pods of the workload in the dump.
    pub current: usize,
    /// The replicas asked for.
    pub replicas: usize,
    /// The new pods and where they went.
    pub added: Vec<PodOutcome>,
    /// Claims made from a StatefulSet's volumeClaimTemplates, `namespace/name`.
    pub claims: Vec<String>,
}
