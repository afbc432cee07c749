//! NodeName: a pod that names a node in `spec.nodeName` fits only that node.
//!
//! Filter and enqueue extensions only; it keeps no state and must not read anything but
//! the pod and the node it is asked about.

use kubesched_framework::events::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
};
use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::{
    CycleState, EnqueueExtensions, FilterPlugin, Handle, PluginError, Remedy, Status,
};

/// The plugin's registered name.
pub const NAME: &str = "NodeName";
/// Why a node was rejected.
pub const ERR_REASON: &str = "node(s) didn't match the requested node name";

/// The NodeName plugin.
#[derive(Debug, Default, Clone, Copy)]
pub struct NodeName;

impl NodeName {
    /// Builds the plugin (it needs nothing from the handle).
    pub fn new(_handle: &Handle) -> Result<Self, PluginError> {
        Ok(Self)
    }
}

kubesched_framework::register_plugin! {
    name: NAME,
    plugin: NodeName,
    factory: NodeName::new,
}

/// Whether the pod may run on a node with this name.
fn fits(pod: &PodInfo, node_name: &str) -> bool {
    pod.node_name.as_deref().is_none_or(|n| n == node_name)
}

impl FilterPlugin for NodeName {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if !node.has_node() {
            return Status::error("node not found");
        }
        // A pod without spec.nodeName fits every node: the node's name (two pointers away
        // from NodeInfo) is read only when there is a name to compare.
        if pod.node_name.is_none() || fits(pod, node.name()) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON)
        }
    }

    fn remedies(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Vec<Remedy> {
        match &pod.node_name {
            Some(wanted) if !fits(pod, node.name()) => vec![Remedy::NodeName {
                wanted: wanted.clone(),
            }],
            _ => Vec::new(),
        }
    }
}

impl EnqueueExtensions for NodeName {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        // Only a new node with the requested name can help.
        vec![ClusterEventWithHint::with_hint(
            EventResource::Node,
            ActionType::ADD,
            |pod: &PodInfo, _old: Option<&EventObject>, new: Option<&EventObject>| {
                let node = new
                    .and_then(EventObject::as_node)
                    .ok_or("expected a node")?;
                Ok(if fits(pod, &node.name) {
                    QueueingHint::Queue
                } else {
                    QueueingHint::Skip
                })
            },
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesched_testing::{NodeBuilder, PluginHarness, PodBuilder, node_info};

    fn check(pod: PodBuilder, node: &str, want: Option<&str>) {
        let run = PluginHarness::new(NodeName)
            .run(&pod.info(), &[node_info(NodeBuilder::new(node), &[])]);
        let status = run.filter_of(node).expect("filter ran");
        match want {
            None => assert_eq!(status.code, "Success"),
            Some(reason) => {
                assert_eq!(status.code, "UnschedulableAndUnresolvable");
                assert_eq!(status.reasons, vec![reason.to_string()]);
            }
        }
    }

    #[test]
    fn filter_table() {
        check(PodBuilder::new("no-node-name"), "n1", None);
        check(PodBuilder::new("same").node("n1"), "n1", None);
        check(PodBuilder::new("other").node("n2"), "n1", Some(ERR_REASON));
    }

    #[test]
    fn hint_queues_only_for_the_named_node() {
        let pod = PodBuilder::new("p").node("n2").info();
        let events = NodeName.events_to_register();
        let hint = events[0].hint.as_ref().expect("has a hint");
        let node = |n: &str| EventObject::Node(NodeBuilder::new(n).model());
        assert_eq!(hint(&pod, None, Some(&node("n2"))), Ok(QueueingHint::Queue));
        assert_eq!(hint(&pod, None, Some(&node("n1"))), Ok(QueueingHint::Skip));
    }

    #[test]
    fn snapshot() {
        let nodes = [
            node_info(NodeBuilder::new("n1"), &[]),
            node_info(NodeBuilder::new("n2"), &[]),
        ];
        let run = PluginHarness::new(NodeName).run(&PodBuilder::new("p").node("n2").info(), &nodes);
        insta::assert_yaml_snapshot!(run);
    }

    #[test]
    fn remedy_names_the_requested_node() {
        let got = PluginHarness::new(NodeName).remedies(
            &PodBuilder::new("p").node("wanted").info(),
            &[node_info(NodeBuilder::new("other"), &[])],
        );
        assert_eq!(
            got,
            vec![(
                "other".to_string(),
                vec!["pod is pinned to node wanted by spec.nodeName".to_string()]
            )]
        );
    }
}
