//! NodeResourcesBalancedAllocation: favours nodes whose resources the pod would leave more
//! evenly used than it found them. A node's balance is (1 − standard deviation of the
//! requested/allocatable fractions of the configured resources) × 100, truncated, with
//! upstream's float arithmetic; since v1.36 (#135573) the score is the change the pod makes
//! to it, mapped onto 50..=100 (75: no change). Through v1.35 it was the balance with the
//! pod alone.
//!
//! PreScore keeps the pod's requests of the configured resources (Skip for a pod that
//! requests none of them) and Score reads the node's sums. It must not filter nodes and
//! keeps no per-pod state in the plugin object.

use std::sync::Arc;

use kubesched_framework::model::resource::{CPU, CpuMemoryRequests, MEMORY, ScoredResource};
use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::registry::PluginArgs;
use kubesched_framework::{
    CycleState, Handle, MAX_NODE_SCORE, PluginError, PreScorePlugin, ScorePlugin, Status,
};
use serde::{Deserialize, Deserializer, Serialize};

/// The plugin's registered name.
pub const NAME: &str = "NodeResourcesBalancedAllocation";

/// A resource whose usage is balanced against the others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceSpec {
    /// The resource name, e.g. `cpu`.
    #[serde(default)]
    pub name: String,
    /// Must be 1; an absent or zero weight means 1 (upstream's default).
    #[serde(default = "one", deserialize_with = "weight_or_one")]
    pub weight: i64,
}

impl ResourceSpec {
    /// A resource with weight 1.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            weight: 1,
        }
    }
}

fn one() -> i64 {
    1
}

fn weight_or_one<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    Ok(match Option::<i64>::deserialize(d)? {
        None | Some(0) => 1,
        Some(w) => w,
    })
}

/// cpu and memory, the resources balanced when none are configured.
pub fn default_resources() -> Vec<ResourceSpec> {
    vec![ResourceSpec::new(CPU), ResourceSpec::new(MEMORY)]
}

fn resources_or_default<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ResourceSpec>, D::Error> {
    let list = Option::<Vec<ResourceSpec>>::deserialize(d)?.unwrap_or_default();
    Ok(if list.is_empty() {
        default_resources()
    } else {
        list
    })
}

/// Arguments of NodeResourcesBalancedAllocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeResourcesBalancedAllocationArgs {
    /// The resources balanced; cpu and memory when empty.
    #[serde(
        default = "default_resources",
        deserialize_with = "resources_or_default"
    )]
    pub resources: Vec<ResourceSpec>,
}

impl Default for NodeResourcesBalancedAllocationArgs {
    fn default() -> Self {
        Self {
            resources: default_resources(),
        }
    }
}

impl PluginArgs for NodeResourcesBalancedAllocationArgs {
    const KIND: &'static str = "NodeResourcesBalancedAllocationArgs";

    fn validate(&self, _gates: &kubesched_framework::FeatureGates) -> Result<(), String> {
        let mut errs = Vec::new();
        for (i, r) in self.resources.iter().enumerate() {
            if self.resources[..i].iter().any(|o| o.name == r.name) {
                errs.push(format!(
                    "resources[{i}].name: Duplicate value: {:?}",
                    r.name
                ));
            }
            if r.weight != 1 {
                errs.push(format!(
                    "resources[{i}].weight: Invalid value: {}: must be 1",
                    r.weight
                ));
            }
        }
        match errs.len() {
            0 => Ok(()),
            1 => Err(errs.concat()),
            _ => Err(format!("[{}]", errs.join(", "))),
        }
    }
}

/// The NodeResourcesBalancedAllocation plugin.
#[derive(Debug, Clone)]
pub struct BalancedAllocation {
    resources: Vec<ResourceSpec>,
    /// `resources` resolved, in the same order.
    kinds: Vec<ScoredResource>,
}

impl BalancedAllocation {
    /// Builds the plugin from its args (validated again, as upstream does).
    pub fn new(
        args: &NodeResourcesBalancedAllocationArgs,
        handle: &Handle,
    ) -> Result<Self, PluginError> {
        args.validate(handle.features()).map_err(|e| {
            PluginError(format!(
                "{NAME}: invalid {}: {e}",
                NodeResourcesBalancedAllocationArgs::KIND
            ))
        })?;
        Ok(Self {
            resources: args.resources.clone(),
            kinds: args
                .resources
                .iter()
                .map(|r| ScoredResource::new(&r.name))
                .collect(),
        })
    }

    /// The pod's plain requests (no scoring defaults) of each configured resource.
    fn pod_requests(&self, pod: &PodInfo) -> Vec<i64> {
        self.resources
            .iter()
            .map(|r| pod.requests.get(&r.name))
            .collect()
    }

    /// The score (v1.36+, #135573): how the pod changes the node's balance, not only the
    /// balance it leaves. Each balance is `(1 − std) × 100` and lies in 50..=100 (the
    /// standard deviation of fractions in 0..=1 is at most ½); the change maps onto the
    /// same range: 75 for no change, 100 from fully unbalanced to balanced, 50 the other
    /// way, in upstream's integer arithmetic.
    fn score_node(&self, node: &NodeInfo, pod_requests: &[i64]) -> i64 {
        // Each resource's allocatable and requested amounts (the pod's included) read once
        // for both balances: the node's numbers are the cost of Score, not the arithmetic.
        const INLINE: usize = 8;
        let read = |(kind, &request): (&ScoredResource, &i64)| {
            kind.allocatable_and_requested(node, CpuMemoryRequests::Plain, request)
        };
        let mut inline = [(0i64, 0i64); INLINE];
        let spilled: Vec<(i64, i64)>;
        let amounts: &[(i64, i64)] = if self.kinds.len() <= INLINE {
            let mut n = 0;
            for (slot, amount) in inline
                .iter_mut()
                .zip(self.kinds.iter().zip(pod_requests).map(read))
            {
                *slot = amount;
                n += 1;
            }
            &inline[..n]
        } else {
            spilled = self.kinds.iter().zip(pod_requests).map(read).collect();
            &spilled
        };
        let half = MAX_NODE_SCORE / 2;
        let with_pod = balance(amounts, pod_requests, true);
        let without_pod = balance(amounts, pod_requests, false);
        half + (half + with_pod - without_pod) / 2
    }

    /// One balance of `node`, for tests.
    #[cfg(test)]
    fn balance(&self, node: &NodeInfo, pod_requests: &[i64], with_pod: bool) -> i64 {
        let amounts: Vec<(i64, i64)> = self
            .kinds
            .iter()
            .zip(pod_requests)
            .map(|(kind, &request)| {
                kind.allocatable_and_requested(node, CpuMemoryRequests::Plain, request)
            })
            .collect();
        balance(&amounts, pod_requests, with_pod)
    }
}

/// `(1 − std of the requested/allocatable fractions) × 100`, truncated, with the pod's
/// requests added or not, from each resource's `(allocatable, requested with the pod)`.
/// The resources taken are the same either way (a scalar resource the pod does not request
/// stays out of both). With the pod, this was the whole score through v1.35.
fn balance(amounts: &[(i64, i64)], pod_requests: &[i64], with_pod: bool) -> i64 {
    // Two passes over the fractions instead of collecting them: the same float operations
    // in the same order as upstream, without allocating per node.
    let fractions = || {
        amounts
            .iter()
            .zip(pod_requests)
            .filter_map(|(&(allocatable, requested), &request)| {
                let requested = if with_pod {
                    requested
                } else {
                    requested - request
                };
                (allocatable != 0).then(|| (requested as f64 / allocatable as f64).min(1.0))
            })
    };
    let (mut count, mut total) = (0usize, 0.0f64);
    let (mut first, mut second) = (0.0f64, 0.0f64);
    for f in fractions() {
        match count {
            0 => first = f,
            1 => second = f,
            _ => {}
        }
        count += 1;
        total += f;
    }
    // With two resources the deviation is half their difference; with more, the
    // population standard deviation; with fewer, zero.
    let std = match count {
        2 => ((first - second) / 2.0).abs(),
        n if n > 2 => {
            let mean = total / n as f64;
            let sum = fractions().fold(0.0, |acc, f| acc + (f - mean) * (f - mean));
            (sum / n as f64).sqrt()
        }
        _ => 0.0,
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

kubesched_framework::register_plugin! {
    name: NAME,
    plugin: BalancedAllocation,
    args: NodeResourcesBalancedAllocationArgs,
    factory: BalancedAllocation::new,
}

/// The pod's requests of the configured resources, kept by PreScore for Score.
#[derive(Debug, Clone)]
struct PreScoreState(Vec<i64>);

impl PreScorePlugin for BalancedAllocation {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, _nodes: &[Arc<NodeInfo>]) -> Status {
        let requests = self.pod_requests(pod);
        // A pod requesting none of the resources would not change any balance; scoring it
        // would pile best-effort pods onto the already balanced nodes.
        if requests.iter().all(|&r| r == 0) {
            return Status::skip();
        }
        state.write(PreScoreState(requests));
        Status::success()
    }
}

impl ScorePlugin for BalancedAllocation {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        if let Some(PreScoreState(requests)) = state.read::<PreScoreState>() {
            return Ok(self.score_node(node, requests));
        }
        // PreScore did not run: compute here, as upstream does.
        let requests = self.pod_requests(pod);
        if requests.iter().all(|&r| r == 0) {
            return Ok(0);
        }
        Ok(self.score_node(node, &requests))
    }
}

#[cfg(test)]
mod tests;
