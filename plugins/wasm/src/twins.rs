//! Native twins of two guests, for `kubesched bench`'s comparison of a wasm plugin with the
//! same logic compiled in (feature `bench-twins`; not part of any default build):
//!
//! * [`NativeNodeNumber`]: kube-scheduler-wasm-extension's NodeNumber example, as its
//!   scheduler_perf compares it with a native plugin. PreScore keeps the last digit of the
//!   pod's name; Score gives 10 to a node whose name ends in that digit (and to every node
//!   when the pod's name has no digit at its end), 0 to the others.
//! * [`NativeNoZeroNodes`]: `examples/wasm/no-zero-nodes.wat`. Filter rejects a node whose
//!   name ends in `0`.

use std::sync::Arc;

use kubesched_framework::events::{ActionType, ClusterEventWithHint, EventResource};
use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::{
    CycleState, EnqueueExtensions, FilterPlugin, Handle, PluginError, PreScorePlugin, ScorePlugin,
    Status,
};

/// The registered name of the NodeNumber twin.
pub const NATIVE_NODE_NUMBER: &str = "NativeNodeNumber";
/// The registered name of the NoZeroNodes twin.
pub const NATIVE_NO_ZERO_NODES: &str = "NativeNoZeroNodes";
/// NoZeroNodes' reason, the guest's words.
pub const ENDS_IN_ZERO: &str = "node name ends in 0";

/// The last character of `s` as a digit.
fn last_digit(s: &str) -> Option<u8> {
    s.bytes()
        .last()
        .filter(u8::is_ascii_digit)
        .map(|b| b - b'0')
}

/// NodeNumber in Rust.
#[derive(Debug, Default, Clone, Copy)]
pub struct NativeNodeNumber;

impl NativeNodeNumber {
    /// Builds the plugin (it needs nothing from the handle).
    pub fn new(_handle: &Handle) -> Result<Self, PluginError> {
        Ok(Self)
    }
}

kubesched_framework::register_plugin! {
    name: NATIVE_NODE_NUMBER,
    plugin: NativeNodeNumber,
    factory: NativeNodeNumber::new,
}

/// What PreScore keeps: the pod's last digit.
#[derive(Debug, Clone, Copy)]
struct PodNumber(u8);

impl PreScorePlugin for NativeNodeNumber {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, _nodes: &[Arc<NodeInfo>]) -> Status {
        if let Some(n) = last_digit(&pod.name) {
            state.write(PodNumber(n));
        }
        Status::success()
    }
}

impl ScorePlugin for NativeNodeNumber {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let matches = match state.read::<PodNumber>() {
            Some(PodNumber(n)) => last_digit(node.name()) == Some(*n),
            None => true,
        };
        Ok(if matches { 10 } else { 0 })
    }
}

impl EnqueueExtensions for NativeNodeNumber {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        vec![ClusterEventWithHint::new(
            EventResource::Node,
            ActionType::ADD,
        )]
    }
}

/// NoZeroNodes in Rust.
#[derive(Debug, Default, Clone, Copy)]
pub struct NativeNoZeroNodes;

impl NativeNoZeroNodes {
    /// Builds the plugin (it needs nothing from the handle).
    pub fn new(_handle: &Handle) -> Result<Self, PluginError> {
        Ok(Self)
    }
}

kubesched_framework::register_plugin! {
    name: NATIVE_NO_ZERO_NODES,
    plugin: NativeNoZeroNodes,
    factory: NativeNoZeroNodes::new,
}

impl FilterPlugin for NativeNoZeroNodes {
    fn filter(&self, _state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        if node.name().ends_with('0') {
            Status::unschedulable(ENDS_IN_ZERO)
        } else {
            Status::success()
        }
    }
}

impl EnqueueExtensions for NativeNoZeroNodes {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        // As the guest, which has no `enqueue`: every event of the resources upstream lists.
        crate::plugin::all_cluster_events()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesched_testing::{NodeBuilder, PodBuilder, node_info};

    #[test]
    fn the_twins_decide_as_their_guests() {
        let nodes: Vec<Arc<NodeInfo>> = ["node-1", "node-2", "node-10"]
            .iter()
            .map(|n| node_info(NodeBuilder::new(n), &[]))
            .collect();
        let score_all = |pod: &str| -> Vec<i64> {
            let p = PodBuilder::new(pod).info();
            let mut state = CycleState::new();
            assert!(
                NativeNodeNumber
                    .pre_score(&mut state, &p, &nodes)
                    .is_success()
            );
            nodes
                .iter()
                .map(|n| NativeNodeNumber.score(&state, &p, n).expect("scored"))
                .collect()
        };
        assert_eq!(score_all("pod-2"), [0, 10, 0]);
        assert_eq!(score_all("pod-0"), [0, 0, 10]);
        assert_eq!(
            score_all("web"),
            [10, 10, 10],
            "no digit: every node matches"
        );
        let p = PodBuilder::new("pod-1").info();
        let verdicts: Vec<bool> = nodes
            .iter()
            .map(|n| {
                NativeNoZeroNodes
                    .filter(&CycleState::new(), &p, n)
                    .is_success()
            })
            .collect();
        assert_eq!(verdicts, [true, true, false]);
    }
}
