//! HintNode: an example of a plugin written outside kubesched's tree. A pod runs only on
//! the node its `hintNode` label names; a pod without the label runs nowhere.
//!
//! It is a Filter plugin with enqueue extensions, registered with
//! `kubesched_framework::register_plugin!` exactly like the in-tree plugins, and compiled
//! into the `kubesched` binary by its `plugin-hint-node` feature (not part of
//! `all-plugins`). It reads one pod label and the node's name; it must not depend on
//! anything but `kubesched-framework` (and the model it re-exports).
//!
//! docs/writing-a-plugin.md walks through this crate.

use kubesched_framework::prelude::*;

/// The plugin's registered name: what a KubeSchedulerConfiguration enables.
pub const NAME: &str = "HintNode";
/// The pod label that names the node the pod must run on.
pub const HINT_LABEL: &str = "hintNode";
/// Filter reason when the node is not the one the pod's label names.
pub const ERR_REASON_OTHER_NODE: &str = "node(s) didn't match the pod's hintNode label";
/// Filter reason when the pod has no `hintNode` label at all. Reasons are counted per node
/// in the FailedScheduling message (`3 node(s) ...`), hence the wording.
pub const ERR_REASON_NO_HINT: &str = "node(s) weren't hinted: the pod has no hintNode label";

/// The HintNode plugin. It keeps no state: everything it needs is on the pod and the node.
#[derive(Debug, Default, Clone, Copy)]
pub struct HintNode;

impl HintNode {
    /// Builds the plugin (it needs nothing from the handle).
    pub fn new(_handle: &Handle) -> Result<Self, PluginError> {
        Ok(Self)
    }
}

// Link-time registration: the descriptor is collected when the binary names this crate
// (`use kubesched_plugin_hint_node as _;` in crates/cli/src/plugins.rs).
kubesched_framework::register_plugin! {
    name: NAME,
    plugin: HintNode,
    factory: HintNode::new,
}

/// The node the pod asks for, if it asks.
fn hinted_node(pod: &PodInfo) -> Option<&str> {
    pod.labels.get(HINT_LABEL).map(String::as_str)
}

impl FilterPlugin for HintNode {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if node.node().is_none() {
            return Status::error("node not found");
        }
        // Unresolvable: preempting pods on this node could never make it the hinted one.
        match hinted_node(pod) {
            None => Status::unresolvable(ERR_REASON_NO_HINT),
            Some(name) if name == node.name() => Status::success(),
            Some(_) => Status::unresolvable(ERR_REASON_OTHER_NODE),
        }
    }
}

/// A new node helps only when it is the hinted one.
fn after_node_add(
    pod: &PodInfo,
    _old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let node = new
        .and_then(EventObject::as_node)
        .ok_or("expected a node as the new object")?;
    Ok(if hinted_node(pod) == Some(node.name.as_str()) {
        QueueingHint::Queue
    } else {
        QueueingHint::Skip
    })
}

/// A label change helps only when it is the rejected pod's own and it changed the hint.
fn after_pod_label_update(
    pod: &PodInfo,
    _old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let updated = new
        .and_then(EventObject::as_pod)
        .ok_or("expected a pod as the new object")?;
    Ok(
        if updated.uid == pod.uid && hinted_node(updated) != hinted_node(pod) {
            QueueingHint::Queue
        } else {
            QueueingHint::Skip
        },
    )
}

impl EnqueueExtensions for HintNode {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        vec![
            ClusterEventWithHint::with_hint(EventResource::Node, ActionType::ADD, after_node_add),
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::UPDATE_POD_LABEL,
                after_pod_label_update,
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesched_framework::registry;
    use kubesched_testing::{NodeBuilder, PluginHarness, PodBuilder, node_info, node_infos};

    /// One table row: the pod, the node it is filtered against, and the expected reason
    /// (None for Success).
    fn check(pod: PodBuilder, node: &str, want: Option<&str>) {
        let pod = pod.info();
        let run = PluginHarness::new(HintNode).run(&pod, &[node_info(NodeBuilder::new(node), &[])]);
        let status = run.filter_of(node).expect("filter ran");
        match want {
            None => assert_eq!(status.code, "Success", "{} on {node}", pod.name),
            Some(reason) => {
                assert_eq!(
                    status.code, "UnschedulableAndUnresolvable",
                    "{} on {node}",
                    pod.name
                );
                assert_eq!(status.reasons, [reason], "{} on {node}", pod.name);
            }
        }
    }

    #[test]
    fn filter_table() {
        let hinted = |node: &str| PodBuilder::new("hinted").label(HINT_LABEL, node);
        check(hinted("n1"), "n1", None);
        check(hinted("n2"), "n1", Some(ERR_REASON_OTHER_NODE));
        check(PodBuilder::new("no-label"), "n1", Some(ERR_REASON_NO_HINT));
        check(
            PodBuilder::new("other-label").label("hint", "n1"),
            "n1",
            Some(ERR_REASON_NO_HINT),
        );
        // An empty hint names no node.
        check(hinted(""), "n1", Some(ERR_REASON_OTHER_NODE));
        // Names are compared exactly.
        check(hinted("N1"), "n1", Some(ERR_REASON_OTHER_NODE));
    }

    #[test]
    fn hints_table() {
        let events = HintNode.events_to_register();
        let labels: Vec<String> = events.iter().map(|e| e.event.label()).collect();
        assert_eq!(labels, ["NodeAdd", "PodUpdatePodLabel"]);
        let node_hint = events[0].hint.as_ref().expect("node hint");
        let pod_hint = events[1].hint.as_ref().expect("pod hint");

        let pod = PodBuilder::new("p").label(HINT_LABEL, "n2").info();
        let node = |n: &str| EventObject::Node(NodeBuilder::new(n).model());
        assert_eq!(
            node_hint(&pod, None, Some(&node("n2"))),
            Ok(QueueingHint::Queue)
        );
        assert_eq!(
            node_hint(&pod, None, Some(&node("n1"))),
            Ok(QueueingHint::Skip)
        );

        let updated = |name: &str, hint: &str| {
            EventObject::Pod(PodBuilder::new(name).label(HINT_LABEL, hint).info())
        };
        assert_eq!(
            pod_hint(&pod, None, Some(&updated("p", "n3"))),
            Ok(QueueingHint::Queue)
        );
        assert_eq!(
            pod_hint(&pod, None, Some(&updated("p", "n2"))),
            Ok(QueueingHint::Skip)
        );
        assert_eq!(
            pod_hint(&pod, None, Some(&updated("q", "n3"))),
            Ok(QueueingHint::Skip)
        );
        assert!(pod_hint(&pod, None, None).is_err());
    }

    #[test]
    fn registered_like_in_tree_plugins() {
        let desc = registry::find(NAME).expect("registered");
        assert_eq!(desc.crate_name, "kubesched-plugin-hint-node");
        assert_eq!(registry::feature_for(NAME), "plugin-hint-node");
        assert_eq!(
            kubesched_framework::implemented_points(&HintNode),
            desc.extension_points().to_vec()
        );
    }

    #[test]
    fn snapshot() {
        let nodes = node_infos(
            vec![
                NodeBuilder::new("n1"),
                NodeBuilder::new("n2"),
                NodeBuilder::new("n3"),
            ],
            &[],
        );
        let harness = PluginHarness::from_registry(NAME, None, Handle::builder())
            .expect("builds from the registry");
        let hinted = harness.run(
            &PodBuilder::new("hinted").label(HINT_LABEL, "n2").info(),
            &nodes,
        );
        let unlabelled = harness.run(&PodBuilder::new("unlabelled").info(), &nodes);
        insta::assert_yaml_snapshot!("hinted", hinted);
        insta::assert_yaml_snapshot!("unlabelled", unlabelled);
    }
}
