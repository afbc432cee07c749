//! NodePorts: a pod that asks for host ports fits only nodes where none of them is taken,
//! with the wildcard semantics of `0.0.0.0` and per-protocol ports.
//!
//! PreFilter (the pod's host ports, once per cycle; Skip when it has none), Filter and
//! enqueue extensions. It reads ports through the model's `HostPort`/`HostPortInfo` and must
//! not walk container specs itself.

use kubesched_framework::events::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
};
use kubesched_framework::model::{HostPort, HostPortInfo, NodeInfo, PodInfo, any_conflict};
use kubesched_framework::{
    CycleState, EnqueueExtensions, FilterPlugin, Handle, PluginError, PreFilterPlugin,
    PreFilterResult, Remedy, Status,
};
use std::sync::Arc;

/// The plugin's registered name.
pub const NAME: &str = "NodePorts";
/// Why a node was rejected.
pub const ERR_REASON: &str = "node(s) didn't have free ports for the requested pod ports";

/// The NodePorts plugin.
#[derive(Debug, Default, Clone, Copy)]
pub struct NodePorts;

impl NodePorts {
    /// Builds the plugin (it needs nothing from the handle).
    pub fn new(_handle: &Handle) -> Result<Self, PluginError> {
        Ok(Self)
    }
}

kubesched_framework::register_plugin! {
    name: NAME,
    plugin: NodePorts,
    factory: NodePorts::new,
}

/// The host ports the pod being scheduled wants, computed by PreFilter.
#[derive(Debug, Clone)]
struct WantedPorts(Vec<HostPort>);

impl PreFilterPlugin for NodePorts {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        if pod.host_ports.is_empty() {
            return (None, Status::skip());
        }
        state.write(WantedPorts(pod.host_ports.clone()));
        (None, Status::success())
    }
}

impl FilterPlugin for NodePorts {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(WantedPorts(wanted)) = state.read::<WantedPorts>() else {
            return Status::error(format!(
                "reading PreFilter{NAME} from the cycle state: not found"
            ));
        };
        if any_conflict(&node.used_ports, wanted) {
            Status::unschedulable(ERR_REASON)
        } else {
            Status::success()
        }
    }

    fn remedies(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Vec<Remedy> {
        let wanted = match state.read::<WantedPorts>() {
            Some(WantedPorts(w)) => w,
            None => &pod.host_ports,
        };
        wanted
            .iter()
            .filter(|p| node.used_ports.conflicts(p))
            .map(|p| Remedy::HostPort {
                protocol: p.protocol.clone(),
                ip: p.ip.clone(),
                port: p.port,
            })
            .collect()
    }
}

/// Whether deleting `deleted` can free a port `pod` waits for.
fn deletion_may_help(pod: &PodInfo, deleted: &PodInfo) -> QueueingHint {
    // A pod that was never bound nor nominated held no ports.
    if deleted.node_name.is_none() && deleted.nominated_node_name.is_none() {
        return QueueingHint::Skip;
    }
    if deleted.host_ports.is_empty() {
        return QueueingHint::Skip;
    }
    let mut freed = HostPortInfo::default();
    for p in &deleted.host_ports {
        freed.add(p);
    }
    if any_conflict(&freed, &pod.host_ports) {
        QueueingHint::Queue
    } else {
        QueueingHint::Skip
    }
}

impl EnqueueExtensions for NodePorts {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        vec![
            // Ports are immutable, so pod updates never free one; only deletions do. The
            // resource is Pod, not AssignedPod: a nominated pod's deletion counts too.
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::DELETE,
                |pod: &PodInfo, old: Option<&EventObject>, _new: Option<&EventObject>| {
                    let deleted = old.and_then(EventObject::as_pod).ok_or("expected a pod")?;
                    Ok(deletion_may_help(pod, deleted))
                },
            ),
            // A new node has no ports in use; no hint needed.
            ClusterEventWithHint::new(EventResource::Node, ActionType::ADD),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesched_framework::events::ClusterEvent;
    use kubesched_framework::model::k8s_openapi::api::core::v1::ContainerPort;
    use kubesched_framework::registry;
    use kubesched_testing::{NodeBuilder, PluginHarness, PodBuilder, node_info};

    /// A pod with host ports given as (port, protocol, ip).
    fn pod_with(name: &str, ports: &[(i32, &str, &str)]) -> PodBuilder {
        ports
            .iter()
            .fold(PodBuilder::new(name), |b, (port, proto, ip)| {
                b.host_port(*port, proto, ip)
            })
    }

    fn check(name: &str, wanted: &[(i32, &str, &str)], used: &[(i32, &str, &str)], fits: bool) {
        let existing = pod_with("existing", used).node("n1").info();
        let node = node_info(NodeBuilder::new("n1"), &[existing]);
        let run = PluginHarness::new(NodePorts).run(&pod_with("p", wanted).info(), &[node]);
        let status = run.filter_of("n1").expect("filter ran");
        if fits {
            assert_eq!(status.code, "Success", "{name}");
        } else {
            assert_eq!(status.code, "Unschedulable", "{name}");
            assert_eq!(status.reasons, vec![ERR_REASON.to_string()], "{name}");
        }
    }

    #[test]
    fn filter_table() {
        check("nothing in use", &[(8080, "", "")], &[], true);
        check(
            "other port",
            &[(8080, "UDP", "127.0.0.1")],
            &[(9090, "UDP", "127.0.0.1")],
            true,
        );
        check(
            "same port and protocol on the same ip",
            &[(8080, "UDP", "127.0.0.1")],
            &[(8080, "UDP", "127.0.0.1")],
            false,
        );
        check(
            "same port, other ip",
            &[(8080, "TCP", "127.0.0.2")],
            &[(8080, "TCP", "127.0.0.1")],
            true,
        );
        check(
            "same port, other protocol",
            &[(8080, "UDP", "127.0.0.1")],
            &[(8080, "TCP", "127.0.0.1")],
            true,
        );
        check(
            "one of several ports taken",
            &[(8000, "TCP", "127.0.0.1"), (8080, "UDP", "127.0.0.1")],
            &[(8080, "UDP", "127.0.0.1")],
            false,
        );
        check(
            "wanted wildcard ip conflicts with a specific ip",
            &[(8001, "UDP", "0.0.0.0")],
            &[(8001, "UDP", "127.0.0.1")],
            false,
        );
        check(
            "empty ip is the wildcard",
            &[(8001, "TCP", "")],
            &[(8001, "TCP", "10.0.0.1")],
            false,
        );
        check(
            "used wildcard ip conflicts with a specific ip",
            &[(8001, "TCP", "127.0.0.1")],
            &[(8001, "TCP", "0.0.0.0")],
            false,
        );
        check(
            "wildcard ip, other protocol",
            &[(8001, "UDP", "127.0.0.1")],
            &[(8001, "TCP", "0.0.0.0")],
            true,
        );
        check(
            "empty protocol is TCP",
            &[(8001, "", "127.0.0.1")],
            &[(8001, "TCP", "127.0.0.1")],
            false,
        );
    }

    /// Adds an init container that asks for host port `port` (`sidecar`: restartPolicy Always).
    fn init_with_port(pod: PodBuilder, port: i32, sidecar: bool) -> PodBuilder {
        pod.init_container(&[], sidecar).with(|p| {
            let spec = p.spec.as_mut().expect("builder sets a spec");
            let init = spec
                .init_containers
                .as_mut()
                .and_then(|c| c.last_mut())
                .expect("init container added");
            init.ports = Some(vec![ContainerPort {
                container_port: port,
                host_port: Some(port),
                ..Default::default()
            }]);
        })
    }

    #[test]
    fn sidecar_ports_count_plain_init_ports_do_not() {
        let node = |name: &str, pod: PodBuilder| {
            node_info(NodeBuilder::new(name), &[pod.node(name).info()])
        };
        let wants_80 = pod_with("p", &[(80, "", "")]).info();
        let nodes = [
            node(
                "with-sidecar",
                init_with_port(PodBuilder::new("s"), 80, true),
            ),
            node("with-init", init_with_port(PodBuilder::new("i"), 80, false)),
        ];
        let run = PluginHarness::new(NodePorts).run(&wants_80, &nodes);
        assert_eq!(run.feasible(), vec!["with-init"]);

        // The same rule on the pod being scheduled: a plain init container's port is not wanted.
        let mut state = CycleState::new();
        let init_only = init_with_port(PodBuilder::new("p"), 80, false).info();
        assert!(
            NodePorts
                .pre_filter(&mut state, &init_only, &[])
                .1
                .is_skip()
        );
        let sidecar = init_with_port(PodBuilder::new("p"), 80, true).info();
        assert!(
            NodePorts
                .pre_filter(&mut state, &sidecar, &[])
                .1
                .is_success()
        );
    }

    #[test]
    fn pre_filter_skips_pods_without_host_ports() {
        let mut state = CycleState::new();
        let (_, status) = NodePorts.pre_filter(&mut state, &PodBuilder::new("p").info(), &[]);
        assert!(status.is_skip());
        let (_, status) =
            NodePorts.pre_filter(&mut state, &pod_with("p", &[(80, "", "")]).info(), &[]);
        assert!(status.is_success());
        assert_eq!(
            state.read::<WantedPorts>().map(|w| w.0.len()),
            Some(1),
            "PreFilter stores the wanted ports"
        );
    }

    #[test]
    fn filter_without_pre_filter_is_an_error() {
        let status = NodePorts.filter(
            &CycleState::new(),
            &pod_with("p", &[(80, "", "")]).info(),
            &node_info(NodeBuilder::new("n1"), &[]),
        );
        assert!(status.is_error());
    }

    #[test]
    fn registers_pod_delete_and_node_add() {
        let events = NodePorts.events_to_register();
        let kinds: Vec<ClusterEvent> = events.iter().map(|e| e.event).collect();
        assert_eq!(
            kinds,
            vec![
                ClusterEvent::new(EventResource::Pod, ActionType::DELETE),
                ClusterEvent::new(EventResource::Node, ActionType::ADD),
            ]
        );
        assert!(events[0].hint.is_some());
        assert!(events[1].hint.is_none(), "a new node always may help");
    }

    #[test]
    fn pod_deleted_hint_table() {
        let events = NodePorts.events_to_register();
        let hint = events[0].hint.as_ref().expect("has a hint");
        let target = pod_with("p", &[(8080, "TCP", ""), (53, "UDP", "10.0.0.1")]).info();
        let cases = [
            (
                "bound pod held a wanted port",
                pod_with("d", &[(8080, "TCP", "")]).node("n1"),
                QueueingHint::Queue,
            ),
            (
                "nominated pod held a wanted port",
                pod_with("d", &[(8080, "TCP", "")]).nominated_node("n1"),
                QueueingHint::Queue,
            ),
            (
                "wildcard port freed for a specific ip",
                pod_with("d", &[(53, "UDP", "")]).node("n1"),
                QueueingHint::Queue,
            ),
            (
                "unscheduled pod held nothing",
                pod_with("d", &[(8080, "TCP", "")]),
                QueueingHint::Skip,
            ),
            (
                "bound pod without host ports",
                PodBuilder::new("d").node("n1"),
                QueueingHint::Skip,
            ),
            (
                "bound pod with unrelated ports",
                pod_with("d", &[(8080, "UDP", ""), (53, "UDP", "10.0.0.2")]).node("n1"),
                QueueingHint::Skip,
            ),
        ];
        for (name, deleted, want) in cases {
            let old = EventObject::Pod(deleted.info());
            assert_eq!(hint(&target, Some(&old), None), Ok(want), "{name}");
        }
        assert!(
            hint(&target, None, None).is_err(),
            "a missing pod is an error"
        );
    }

    #[test]
    fn registered_with_its_points() {
        let desc = registry::find(NAME).expect("registered");
        assert_eq!(
            desc.extension_points().to_vec(),
            kubesched_framework::implemented_points(&NodePorts).as_slice()
        );
    }

    #[test]
    fn snapshot() {
        let nodes = [
            node_info(NodeBuilder::new("free"), &[]),
            node_info(
                NodeBuilder::new("web-taken"),
                &[pod_with("web", &[(80, "TCP", "")]).node("web-taken").info()],
            ),
            node_info(
                NodeBuilder::new("dns-on-other-ip"),
                &[pod_with("dns", &[(53, "UDP", "10.0.0.9")])
                    .node("dns-on-other-ip")
                    .info()],
            ),
            node_info(
                NodeBuilder::new("dns-wildcard"),
                &[pod_with("dns", &[(53, "UDP", "")])
                    .node("dns-wildcard")
                    .info()],
            ),
        ];
        let harness = PluginHarness::new(NodePorts);
        let with_ports = harness.run(
            &pod_with("p", &[(80, "TCP", ""), (53, "UDP", "10.0.0.1")]).info(),
            &nodes,
        );
        let without_ports = harness.run(&PodBuilder::new("plain").info(), &nodes);
        insta::assert_yaml_snapshot!([with_ports, without_ports]);
    }

    #[test]
    fn remedies_list_each_taken_port() {
        let existing = pod_with("existing", &[(8080, "TCP", ""), (53, "UDP", "10.0.0.1")])
            .node("n1")
            .info();
        let node = node_info(NodeBuilder::new("n1"), &[existing]);
        let pod = pod_with(
            "p",
            &[
                (8080, "TCP", "127.0.0.1"),
                (53, "UDP", ""),
                (9090, "TCP", ""),
            ],
        );
        let got = PluginHarness::new(NodePorts).remedies(&pod.info(), &[node]);
        assert_eq!(
            got,
            vec![(
                "n1".to_string(),
                vec![
                    "host port TCP/127.0.0.1:8080 is already in use".to_string(),
                    "host port UDP/0.0.0.0:53 is already in use".to_string(),
                ]
            )]
        );
    }
}
