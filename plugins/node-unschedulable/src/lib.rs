//! NodeUnschedulable: a cordoned node (`spec.unschedulable: true`) takes no new pods, unless
//! the pod tolerates the `node.kubernetes.io/unschedulable:NoSchedule` taint.
//!
//! Filter and enqueue extensions only; it keeps no per-pod state and must not read anything
//! but the pod and the node it is asked about.

use kubesched_framework::events::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
};
use kubesched_framework::model::{NodeInfo, PodInfo, Taint, TaintEffect, tolerated};
use kubesched_framework::{
    CycleState, EnqueueExtensions, FilterPlugin, Handle, PluginError, Remedy, Status,
};

/// The plugin's registered name.
pub const NAME: &str = "NodeUnschedulable";
/// Why a cordoned node was rejected.
pub const ERR_REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";
/// Why a node the snapshot knows nothing about was rejected.
pub const ERR_REASON_UNKNOWN_CONDITION: &str = "node(s) had unknown conditions";
/// The taint key a pod tolerates to run on cordoned nodes.
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// The NodeUnschedulable plugin.
#[derive(Debug, Clone)]
pub struct NodeUnschedulable {
    // Built once so Filter compares tolerations without allocating.
    taint: Taint,
}

impl Default for NodeUnschedulable {
    fn default() -> Self {
        Self {
            taint: unschedulable_taint(),
        }
    }
}

impl NodeUnschedulable {
    /// Builds the plugin (it needs nothing from the handle).
    pub fn new(_handle: &Handle) -> Result<Self, PluginError> {
        Ok(Self::default())
    }
}

kubesched_framework::register_plugin! {
    name: NAME,
    plugin: NodeUnschedulable,
    factory: NodeUnschedulable::new,
}

fn unschedulable_taint() -> Taint {
    Taint {
        key: TAINT_NODE_UNSCHEDULABLE.to_string(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    }
}

impl FilterPlugin for NodeUnschedulable {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        // The flags NodeInfo copies from the node: the node object itself stays untouched.
        if !node.has_node() {
            return Status::unresolvable(ERR_REASON_UNKNOWN_CONDITION);
        }
        if node.node_unschedulable() && !tolerated(&self.taint, &pod.tolerations) {
            return Status::unresolvable(ERR_REASON_UNSCHEDULABLE);
        }
        Status::success()
    }

    fn remedies(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Vec<Remedy> {
        match node.node() {
            Some(n) if n.unschedulable && !tolerated(&self.taint, &pod.tolerations) => {
                vec![Remedy::Uncordon]
            }
            _ => Vec::new(),
        }
    }
}

impl EnqueueExtensions for NodeUnschedulable {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        // With queueing hints there is no pre-check that could drop a Node/Add, so the label
        // updates upstream registers without hints are not needed here.
        let node_hint = |_pod: &PodInfo, old: Option<&EventObject>, new: Option<&EventObject>| {
            let new = new
                .and_then(EventObject::as_node)
                .ok_or("expected a node")?;
            let old = old.and_then(EventObject::as_node);
            // Queue when a node is uncordoned, or added already schedulable.
            let now_schedulable = !new.unschedulable && old.is_none_or(|o| o.unschedulable);
            Ok(if now_schedulable {
                QueueingHint::Queue
            } else {
                QueueingHint::Skip
            })
        };
        let taint = unschedulable_taint();
        let toleration_hint =
            move |pod: &PodInfo, _old: Option<&EventObject>, new: Option<&EventObject>| {
                let new = new.and_then(EventObject::as_pod).ok_or("expected a pod")?;
                // Only the rejected pod's own new toleration can change this plugin's answer;
                // a pod that already tolerated the taint was never rejected here.
                Ok(
                    if new.uid == pod.uid && tolerated(&taint, &new.tolerations) {
                        QueueingHint::Queue
                    } else {
                        QueueingHint::Skip
                    },
                )
            };
        vec![
            ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD.union(ActionType::UPDATE_NODE_TAINT),
                node_hint,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::TargetPod,
                ActionType::UPDATE_POD_TOLERATION,
                toleration_hint,
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesched_framework::events::ClusterEvent;
    use kubesched_framework::registry;
    use kubesched_testing::{NodeBuilder, PluginHarness, PodBuilder, node_info};

    fn check(name: &str, pod: PodBuilder, node: NodeBuilder, want: Option<&str>) {
        let info = node_info(node, &[]);
        let node_name = info.name().to_string();
        let run = PluginHarness::new(NodeUnschedulable::default()).run(&pod.info(), &[info]);
        let status = run.filter_of(&node_name).expect("filter ran");
        match want {
            None => assert_eq!(status.code, "Success", "{name}"),
            Some(reason) => {
                assert_eq!(status.code, "UnschedulableAndUnresolvable", "{name}");
                assert_eq!(status.reasons, vec![reason.to_string()], "{name}");
            }
        }
    }

    #[test]
    fn filter_table() {
        let cordoned = || NodeBuilder::new("n1").unschedulable();
        check(
            "schedulable node admits any pod",
            PodBuilder::new("p"),
            NodeBuilder::new("n1"),
            None,
        );
        check(
            "cordoned node rejects a pod without tolerations",
            PodBuilder::new("p"),
            cordoned(),
            Some(ERR_REASON_UNSCHEDULABLE),
        );
        check(
            "exact toleration",
            PodBuilder::new("p").toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", "", "NoSchedule"),
            cordoned(),
            None,
        );
        check(
            "toleration for every effect",
            PodBuilder::new("p").toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", "", ""),
            cordoned(),
            None,
        );
        check(
            "wildcard toleration",
            PodBuilder::new("p").toleration("", "Exists", "", ""),
            cordoned(),
            None,
        );
        check(
            "toleration with the wrong effect",
            PodBuilder::new("p").toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", "", "NoExecute"),
            cordoned(),
            Some(ERR_REASON_UNSCHEDULABLE),
        );
        check(
            "toleration of another key",
            PodBuilder::new("p").toleration("gpu", "Exists", "", "NoSchedule"),
            cordoned(),
            Some(ERR_REASON_UNSCHEDULABLE),
        );
        check(
            "Equal toleration with a value does not match the empty taint value",
            PodBuilder::new("p").toleration(TAINT_NODE_UNSCHEDULABLE, "Equal", "yes", "NoSchedule"),
            cordoned(),
            Some(ERR_REASON_UNSCHEDULABLE),
        );
    }

    #[test]
    fn filter_rejects_a_node_the_snapshot_lacks() {
        let status = NodeUnschedulable::default().filter(
            &CycleState::new(),
            &PodBuilder::new("p").info(),
            &NodeInfo::default(),
        );
        assert_eq!(
            status.code(),
            kubesched_framework::Code::UnschedulableAndUnresolvable
        );
        assert_eq!(status.reasons(), [ERR_REASON_UNKNOWN_CONDITION]);
    }

    #[test]
    fn registers_node_and_toleration_events() {
        let events: Vec<ClusterEvent> = NodeUnschedulable::default()
            .events_to_register()
            .iter()
            .map(|e| e.event)
            .collect();
        assert_eq!(
            events,
            vec![
                ClusterEvent::new(
                    EventResource::Node,
                    ActionType::ADD.union(ActionType::UPDATE_NODE_TAINT)
                ),
                ClusterEvent::new(EventResource::TargetPod, ActionType::UPDATE_POD_TOLERATION),
            ]
        );
    }

    #[test]
    fn node_hint_table() {
        let events = NodeUnschedulable::default().events_to_register();
        let hint = events[0].hint.as_ref().expect("has a hint");
        let pod = PodBuilder::new("p").info();
        let node = |cordoned: bool| {
            let b = NodeBuilder::new("n1");
            EventObject::Node(if cordoned { b.unschedulable() } else { b }.model())
        };
        // (name, old node: None = added / Some(cordoned), new node cordoned, want)
        let cases = [
            ("schedulable node added", None, false, QueueingHint::Queue),
            ("cordoned node added", None, true, QueueingHint::Skip),
            ("node uncordoned", Some(true), false, QueueingHint::Queue),
            ("node cordoned", Some(false), true, QueueingHint::Skip),
            (
                "schedulable node updated",
                Some(false),
                false,
                QueueingHint::Skip,
            ),
            (
                "cordoned node updated",
                Some(true),
                true,
                QueueingHint::Skip,
            ),
        ];
        for (name, old, new, want) in cases {
            let old = old.map(node);
            let got = hint(&pod, old.as_ref(), Some(&node(new)));
            assert_eq!(got, Ok(want), "{name}");
        }
        assert!(
            hint(&pod, None, None).is_err(),
            "a missing node is an error"
        );
    }

    #[test]
    fn toleration_hint_table() {
        let events = NodeUnschedulable::default().events_to_register();
        let hint = events[1].hint.as_ref().expect("has a hint");
        let target = PodBuilder::new("p").info();
        let tolerating = |name: &str| {
            PodBuilder::new(name).toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", "", "")
        };
        let cases = [
            (
                "the pod now tolerates the taint",
                tolerating("p"),
                QueueingHint::Queue,
            ),
            (
                "the pod got an unrelated toleration",
                PodBuilder::new("p").toleration("gpu", "Exists", "", ""),
                QueueingHint::Skip,
            ),
            (
                "another pod got the toleration",
                tolerating("q"),
                QueueingHint::Skip,
            ),
        ];
        for (name, new, want) in cases {
            let new = new.info();
            let old = EventObject::Pod(PodBuilder::new(&new.name).info());
            let got = hint(&target, Some(&old), Some(&EventObject::Pod(new)));
            assert_eq!(got, Ok(want), "{name}");
        }
    }

    #[test]
    fn registered_with_its_points() {
        let desc = registry::find(NAME).expect("registered");
        assert_eq!(
            desc.extension_points().to_vec(),
            kubesched_framework::implemented_points(&NodeUnschedulable::default()).as_slice()
        );
    }

    #[test]
    fn snapshot() {
        let nodes = [
            node_info(NodeBuilder::new("ready"), &[]),
            node_info(NodeBuilder::new("cordoned").unschedulable(), &[]),
        ];
        let harness = PluginHarness::new(NodeUnschedulable::default());
        let plain = harness.run(&PodBuilder::new("plain").info(), &nodes);
        let tolerating = harness.run(
            &PodBuilder::new("tolerating")
                .toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", "", "NoSchedule")
                .info(),
            &nodes,
        );
        insta::assert_yaml_snapshot!([plain, tolerating]);
    }

    #[test]
    fn remedy_for_a_cordoned_node_is_to_uncordon_it() {
        let h = PluginHarness::new(NodeUnschedulable::default());
        let cordoned = || node_info(NodeBuilder::new("n1").unschedulable(), &[]);
        let got = h.remedies(&PodBuilder::new("p").info(), &[cordoned()]);
        assert_eq!(
            got,
            vec![(
                "n1".to_string(),
                vec!["node is cordoned: uncordon it".to_string()]
            )]
        );
        let tolerant = PodBuilder::new("p")
            .toleration(
                "node.kubernetes.io/unschedulable",
                "Exists",
                "",
                "NoSchedule",
            )
            .info();
        assert!(h.remedies(&tolerant, &[cordoned()]).is_empty());
    }
}
