//! NodeDeclaredFeatures (KEP-5328): a pod that needs a node feature still under development
//! (inferred from its spec) fits only nodes whose `status.declaredFeatures` lists it, so a
//! mixed-version cluster does not place it on a kubelet that would mishandle it.
//!
//! PreFilter (the pod's requirements, once per cycle; Skip when it needs nothing), Filter
//! and enqueue extensions. It owns the registry of declared features and what each one
//! requires of a pod ([`features`]); it must not discover node features (the kubelet
//! declares them) nor judge pod updates (the admission plugin does). Behaviour follows
//! upstream v1.37's `pkg/scheduler/framework/plugins/nodedeclaredfeatures` and the
//! component-helpers library it uses.

pub mod features;

use std::sync::Arc;

use kubesched_framework::events::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
};
use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::{
    CycleState, EnqueueExtensions, Feature, FilterPlugin, Handle, PluginError, PreFilterPlugin,
    PreFilterResult, Status, Version,
};

pub use features::{REGISTRY, Requirements};

/// The plugin's registered name.
pub const NAME: &str = "NodeDeclaredFeatures";
/// Why a node was rejected (upstream's `errReasonUnsatisfiedRequirements`, v1.37).
pub const ERR_REASON_UNSATISFIED_REQUIREMENTS: &str =
    "node(s) didn't match Pod's required features";

/// The NodeDeclaredFeatures plugin.
#[derive(Debug, Clone, Copy)]
pub struct NodeDeclaredFeatures {
    /// The NodeDeclaredFeatures gate: off, the plugin skips every pod and registers no
    /// events (upstream builds it disabled).
    enabled: bool,
    /// The release requirements are inferred for: the emulated version (upstream uses its
    /// binary version; the two differ only under `--emulated-version`, and no v1.37
    /// feature has an upper version bound, so the answer is the same).
    target: Version,
}

impl Default for NodeDeclaredFeatures {
    fn default() -> Self {
        Self::with(true, Version::CURRENT)
    }
}

impl NodeDeclaredFeatures {
    /// Builds the plugin; it reads only the feature gates (and their release) from the
    /// handle.
    pub fn new(handle: &Handle) -> Result<Self, PluginError> {
        let gates = handle.features();
        Ok(Self::with(
            gates.enabled(Feature::NodeDeclaredFeatures),
            gates.version(),
        ))
    }

    /// The plugin with the gate and target release as given.
    pub fn with(enabled: bool, target: Version) -> Self {
        Self { enabled, target }
    }

    /// What scheduling `pod` needs.
    pub fn requirements(&self, pod: &PodInfo) -> Requirements {
        match &pod.pod.spec {
            Some(spec) => Requirements::infer(spec, self.target),
            None => Requirements::default(),
        }
    }
}

kubesched_framework::register_plugin! {
    name: NAME,
    plugin: NodeDeclaredFeatures,
    factory: NodeDeclaredFeatures::new,
}

/// The pod's requirements, computed by PreFilter.
#[derive(Debug, Clone, Copy)]
struct Required(Requirements);

impl PreFilterPlugin for NodeDeclaredFeatures {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        if !self.enabled {
            return (None, Status::skip());
        }
        let reqs = self.requirements(pod);
        if reqs.is_empty() {
            return (None, Status::skip());
        }
        state.write(Required(reqs));
        (None, Status::success())
    }
}

impl FilterPlugin for NodeDeclaredFeatures {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        if !self.enabled {
            return Status::success();
        }
        let Some(Required(reqs)) = state.read::<Required>() else {
            return Status::error(format!(
                "reading PreFilter{NAME} from the cycle state: not found"
            ));
        };
        // A node the snapshot has no object for declares nothing.
        let declared = node.node().map_or(&[][..], |n| &n.declared_features[..]);
        if reqs.satisfied_by(declared) {
            Status::success()
        } else {
            // No eviction can give a node a feature: preemption would not help.
            Status::unresolvable(ERR_REASON_UNSATISFIED_REQUIREMENTS)
        }
    }
}

impl EnqueueExtensions for NodeDeclaredFeatures {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        if !self.enabled {
            return Vec::new();
        }
        let node_hint = |pod: &PodInfo, old: Option<&EventObject>, new: Option<&EventObject>| {
            let new = new
                .and_then(EventObject::as_node)
                .ok_or("expected a node")?;
            let declared = |n: &kubesched_framework::model::Node| {
                n.node
                    .status
                    .as_ref()
                    .and_then(|s| s.declared_features.clone())
                    .unwrap_or_default()
            };
            // As upstream: an added node, or a change of the list as the node sent it.
            match old.and_then(EventObject::as_node) {
                Some(old) if declared(old) == declared(new) => {
                    tracing::trace!(pod = %pod.name, node = %new.name, "declared features unchanged");
                    Ok(QueueingHint::Skip)
                }
                _ => {
                    tracing::debug!(pod = %pod.name, node = %new.name, "declared features changed");
                    Ok(QueueingHint::Queue)
                }
            }
        };
        let this = *self;
        let pod_hint =
            move |pod: &PodInfo, old: Option<&EventObject>, new: Option<&EventObject>| {
                let new = new.and_then(EventObject::as_pod).ok_or("expected a pod")?;
                let old = old.and_then(EventObject::as_pod).ok_or("expected a pod")?;
                // Upstream registers the target pod's own updates only.
                if new.uid != pod.uid {
                    return Ok(QueueingHint::Skip);
                }
                Ok(if this.requirements(old) == this.requirements(new) {
                    QueueingHint::Skip
                } else {
                    tracing::debug!(pod = %pod.name, "the pod's feature requirements changed");
                    QueueingHint::Queue
                })
            };
        vec![
            ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD.union(ActionType::UPDATE_NODE_DECLARED_FEATURE),
                node_hint,
            ),
            ClusterEventWithHint::with_hint(EventResource::TargetPod, ActionType::UPDATE, pod_hint),
        ]
    }
}

#[cfg(test)]
mod tests;
