//! Scheduler extenders as the scheduling loop and plugins see them: upstream's
//! `framework.Extender` contract. The HTTP implementation lives in `kubesched-scheduler`;
//! plugins (DefaultPreemption) reach the configured extenders through
//! [`Handle::extenders`](crate::Handle::extenders).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use kubesched_model::{NodeInfo, PodInfo};

use crate::Snapshot;

/// The name put among a pod's rejecting plugins when an extender filtered nodes out.
/// Extenders register no cluster events, so such a pod moves on any event.
pub const EXTENDER_NAME: &str = "Extender";

/// Why a call to an extender failed; the text is what upstream's error says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ExtenderError(pub String);

impl ExtenderError {
    /// An error with this text.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// Node name → why the extender rejected it.
pub type FailedNodesMap = BTreeMap<String, String>;

/// What one filter call answered.
#[derive(Debug, Clone, Default)]
pub struct ExtenderFilterOutcome {
    /// The nodes that pass, a subset of the nodes sent, in the extender's order.
    pub nodes: Vec<Arc<NodeInfo>>,
    /// Nodes that fail; preemption may help them.
    pub failed: FailedNodesMap,
    /// Nodes that fail whatever is preempted. A node in both maps counts as unresolvable.
    pub failed_and_unresolvable: FailedNodesMap,
}

/// One node's score from an extender (0..=10 for a well-behaved extender).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPriority {
    /// The node.
    pub host: String,
    /// The score.
    pub score: i64,
}

/// The pods to evict on one node, and how many of those evictions break a
/// PodDisruptionBudget.
#[derive(Debug, Clone, Default)]
pub struct Victims {
    /// The victims, most important first.
    pub pods: Vec<Arc<PodInfo>>,
    /// Evictions that violate a PodDisruptionBudget.
    pub num_pdb_violations: i64,
}

/// An external process consulted at Filter, Score, preemption and Bind.
///
/// The scheduling cycle calls [`Extender::filter`] and [`Extender::prioritize`] from its
/// synchronous code on the worker pool; implementations block until the answer arrives
/// (bounded by their timeout) and must not need the caller's async runtime to make
/// progress. Preemption and binding run in async code and use the async calls.
#[async_trait]
pub trait Extender: Send + Sync + std::fmt::Debug {
    /// The extender's name (upstream uses its URL prefix).
    fn name(&self) -> &str;
    /// Errors of this extender are skipped instead of failing the attempt.
    fn is_ignorable(&self) -> bool;
    /// Whether the extender wants to see this pod (with managed resources: only pods that
    /// request or limit one of them).
    fn is_interested(&self, pod: &PodInfo) -> bool;
    /// Whether a filter verb is configured.
    fn is_filter(&self) -> bool;
    /// Whether a prioritize verb is configured.
    fn is_prioritizer(&self) -> bool;
    /// Whether a bind verb is configured.
    fn is_binder(&self) -> bool;
    /// Whether a preempt verb is configured.
    fn supports_preemption(&self) -> bool;
    /// Filters `nodes` for `pod`.
    fn filter(
        &self,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> Result<ExtenderFilterOutcome, ExtenderError>;
    /// Scores `nodes` for `pod`; returns the scores and the weight to multiply them by.
    fn prioritize(
        &self,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> Result<(Vec<HostPriority>, i64), ExtenderError>;
    /// Binds the pod to the node (the extender talks to the API server itself).
    async fn bind(&self, pod: &PodInfo, node_name: &str) -> Result<(), ExtenderError>;
    /// Narrows preemption candidates: returns the nodes (and victims) the extender accepts.
    /// Victims it names are looked up by UID among the pods of `snapshot`'s nodes.
    async fn process_preemption(
        &self,
        pod: &PodInfo,
        victims: &BTreeMap<String, Victims>,
        snapshot: &Snapshot,
    ) -> Result<BTreeMap<String, Victims>, ExtenderError>;
}
