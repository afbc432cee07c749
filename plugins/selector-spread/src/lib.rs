//! SelectorSpread: spreads the pods of one Service, ReplicationController, ReplicaSet or
//! StatefulSet over nodes and zones by scoring down nodes (and zones) that already run
//! many of them, as upstream had it before PodTopologySpread's system defaults replaced it.
//!
//! PreScore, Score and NormalizeScore only; not in the default profile, available by
//! configuration. It reads Services and controllers through the handle's object store
//! once per cycle and counts only the scored node's own pods in Score.

mod selector;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

use kubesched_framework::model::topology::region_and_zone;
use kubesched_framework::model::{LabelSelector, NodeInfo, PodInfo};
use kubesched_framework::{
    CycleState, Handle, MAX_NODE_SCORE, PluginError, PreScorePlugin, ScorePlugin, Status,
};

/// The plugin's registered name.
pub const NAME: &str = "SelectorSpread";

/// Share of the score given to zone spreading when nodes have zones; the rest goes to
/// node spreading.
pub const ZONE_WEIGHTING: f64 = 2.0 / 3.0;

/// The SelectorSpread plugin.
#[derive(Debug, Clone)]
pub struct SelectorSpread {
    handle: Handle,
}

impl SelectorSpread {
    /// Builds the plugin.
    pub fn new(handle: &Handle) -> Result<Self, PluginError> {
        Ok(Self {
            handle: handle.clone(),
        })
    }
}

// The kinds it reads (the backends watch and load them) and the writes it makes (RBAC).
use kubesched_framework::model::k8s_openapi::api::apps::v1 as appsv1;
use kubesched_framework::model::k8s_openapi::api::core::v1 as corev1;
kubesched_framework::register_plugin! {
    name: NAME,
    plugin: SelectorSpread,
    kinds: [
        corev1::Service,
        corev1::ReplicationController,
        appsv1::ReplicaSet,
        appsv1::StatefulSet,
    ],
    factory: SelectorSpread::new,
}

/// The pod's group selector, computed once per cycle.
#[derive(Debug, Clone)]
struct PreScoreState {
    selector: Arc<LabelSelector>,
}

impl PreScorePlugin for SelectorSpread {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, _nodes: &[Arc<NodeInfo>]) -> Status {
        // Pods that declare topology spread constraints are PodTopologySpread's business.
        if !pod.topology_spread_constraints.is_empty() {
            return Status::skip();
        }
        state.write(PreScoreState {
            selector: Arc::new(selector::default_selector(pod, self.handle.objects())),
        });
        Status::success()
    }
}

impl ScorePlugin for SelectorSpread {
    /// The number of the pod's group members on the node (normalised later).
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let s = state
            .read::<PreScoreState>()
            .ok_or_else(|| Status::missing_state(NAME, "PreScore"))?;
        Ok(node.count_matching_pods(&pod.namespace, &s.selector))
    }

    fn has_normalize_score(&self) -> bool {
        true
    }

    /// Fewer group members on the node, and in its zone, score higher; zones weigh 2/3
    /// when any node has one.
    fn normalize_score(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        scores: &mut [i64],
    ) -> Status {
        let zone_of = |i: usize| {
            nodes
                .get(i)
                .and_then(|n| n.node())
                .and_then(|n| region_and_zone(&n.labels))
        };
        let mut by_zone: HashMap<(&str, &str), i64> = HashMap::new();
        let mut max_by_node = 0;
        for (i, &score) in scores.iter().enumerate() {
            max_by_node = max_by_node.max(score);
            if let Some(z) = zone_of(i) {
                *by_zone.entry(z).or_insert(0) += score;
            }
        }
        let max_by_zone = by_zone.values().copied().max().unwrap_or(0);
        let max = MAX_NODE_SCORE as f64;
        for (i, score) in scores.iter_mut().enumerate() {
            let mut f = max;
            if max_by_node > 0 {
                f = max * ((max_by_node - *score) as f64 / max_by_node as f64);
            }
            if let Some(z) = zone_of(i) {
                let mut zone_score = max;
                if max_by_zone > 0 {
                    let in_zone = by_zone.get(&z).copied().unwrap_or(0);
                    zone_score = max * ((max_by_zone - in_zone) as f64 / max_by_zone as f64);
                }
                f = f * (1.0 - ZONE_WEIGHTING) + ZONE_WEIGHTING * zone_score;
            }
            // Truncation, as upstream's float-to-int conversion.
            *score = f as i64;
        }
        Status::success()
    }
}
