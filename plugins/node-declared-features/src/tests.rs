use super::*;
use kubesched_framework::events::ClusterEvent;
use kubesched_framework::model::k8s_openapi::api::core::v1 as api;
use kubesched_framework::registry;
use kubesched_testing::{NodeBuilder, PluginHarness, PodBuilder, node_info};

const RESTART_ALL: &str = "RestartAllContainersOnContainerExits";
const USERNS_HOSTNET: &str = "UserNamespacesHostNetworkSupport";
const BIND_OPTIONS: &str = "VolumeBindMountOptions";

/// A restart rule with this action on the pod's first container (or a new init container).
fn restart_rule(pod: PodBuilder, action: &str, init: bool) -> PodBuilder {
    let rule = api::ContainerRestartRule {
        action: action.to_string(),
        exit_codes: Some(api::ContainerRestartRuleOnExitCodes {
            operator: "In".into(),
            values: Some(vec![42]),
        }),
    };
    pod.with(move |p| {
        let spec = p.spec.get_or_insert_with(Default::default);
        let container = if init {
            spec.init_containers
                .get_or_insert_with(Vec::new)
                .push(api::Container {
                    name: "init".into(),
                    ..Default::default()
                });
            spec.init_containers.as_mut().and_then(|c| c.last_mut())
        } else {
            if spec.containers.is_empty() {
                spec.containers.push(api::Container {
                    name: "main".into(),
                    ..Default::default()
                });
            }
            spec.containers.first_mut()
        };
        let c = container.expect("a container");
        c.restart_policy = Some("Never".into());
        c.restart_policy_rules
            .get_or_insert_with(Vec::new)
            .push(rule);
    })
}

fn networking(pod: PodBuilder, host_network: Option<bool>, host_users: Option<bool>) -> PodBuilder {
    pod.with(move |p| {
        let spec = p.spec.get_or_insert_with(Default::default);
        spec.host_network = host_network;
        spec.host_users = host_users;
    })
}

/// Which container kind gets the mount.
#[derive(Clone, Copy)]
enum Where {
    Container,
    Init,
    Ephemeral,
}

fn bind_mount(pod: PodBuilder, at: Where, options: &[&str]) -> PodBuilder {
    let mount = api::VolumeMount {
        name: "data".into(),
        mount_path: "/data".into(),
        bind_mount_options: Some(options.iter().map(|o| o.to_string()).collect()),
        ..Default::default()
    };
    pod.with(move |p| {
        let spec = p.spec.get_or_insert_with(Default::default);
        match at {
            Where::Container => {
                if spec.containers.is_empty() {
                    spec.containers.push(api::Container {
                        name: "main".into(),
                        ..Default::default()
                    });
                }
                spec.containers[0]
                    .volume_mounts
                    .get_or_insert_with(Vec::new)
                    .push(mount);
            }
            Where::Init => spec
                .init_containers
                .get_or_insert_with(Vec::new)
                .push(api::Container {
                    name: "init".into(),
                    volume_mounts: Some(vec![mount]),
                    ..Default::default()
                }),
            Where::Ephemeral => spec.ephemeral_containers.get_or_insert_with(Vec::new).push(
                api::EphemeralContainer {
                    name: "debug".into(),
                    volume_mounts: Some(vec![mount]),
                    ..Default::default()
                },
            ),
        }
    })
}

fn declaring(name: &str, features: &[&str]) -> NodeBuilder {
    let features: Vec<String> = features.iter().map(|f| f.to_string()).collect();
    NodeBuilder::new(name).with(move |n| {
        n.status
            .get_or_insert_with(Default::default)
            .declared_features = Some(features);
    })
}

fn inferred(pod: PodBuilder) -> Vec<&'static str> {
    NodeDeclaredFeatures::default()
        .requirements(&pod.info())
        .names()
        .collect()
}

#[test]
fn registry_matches_v1_37() {
    let names: Vec<&str> = REGISTRY.iter().map(|f| f.name).collect();
    assert_eq!(
        names,
        [
            "DRANodeAllocatableResources",
            "DRAOptionalNodeOperations",
            "ExtendWebSocketsToKubelet",
            "InPlacePodLevelResourcesVerticalScaling",
            "InPlacePodVerticalScalingInitContainers",
            "InPlacePodVerticalScalingMemoryBackedVolumes",
            RESTART_ALL,
            USERNS_HOSTNET,
            BIND_OPTIONS,
        ]
    );
    // Only three infer anything at scheduling time, and none has a version bound yet.
    let at_scheduling: Vec<&str> = REGISTRY
        .iter()
        .filter(|f| f.needed_to_schedule.is_some())
        .map(|f| f.name)
        .collect();
    assert_eq!(at_scheduling, [RESTART_ALL, USERNS_HOSTNET, BIND_OPTIONS]);
    assert!(REGISTRY.iter().all(|f| f.max_version.is_none()));
}

#[test]
fn inference_table() {
    let p = || PodBuilder::new("p").container(&[("cpu", "100m")]);
    let cases: Vec<(&str, PodBuilder, Vec<&str>)> = vec![
        ("a plain pod needs nothing", p(), vec![]),
        (
            "restart-all rule on a container",
            restart_rule(p(), features::RESTART_ALL_CONTAINERS_ACTION, false),
            vec![RESTART_ALL],
        ),
        (
            "restart-all rule on an init container",
            restart_rule(p(), features::RESTART_ALL_CONTAINERS_ACTION, true),
            vec![RESTART_ALL],
        ),
        (
            "a rule that restarts only its container",
            restart_rule(p(), "Restart", false),
            vec![],
        ),
        (
            "host network in a user namespace",
            networking(p(), Some(true), Some(false)),
            vec![USERNS_HOSTNET],
        ),
        (
            "host network with host users",
            networking(p(), Some(true), Some(true)),
            vec![],
        ),
        (
            "host network, hostUsers unset",
            networking(p(), Some(true), None),
            vec![],
        ),
        (
            "a user namespace without host network",
            networking(p(), Some(false), Some(false)),
            vec![],
        ),
        (
            "bind mount options on a container",
            bind_mount(p(), Where::Container, &["noexec"]),
            vec![BIND_OPTIONS],
        ),
        (
            "bind mount options on an init container",
            bind_mount(p(), Where::Init, &["nodev", "nosuid"]),
            vec![BIND_OPTIONS],
        ),
        (
            "bind mount options on an ephemeral container",
            bind_mount(p(), Where::Ephemeral, &["nosuid"]),
            vec![BIND_OPTIONS],
        ),
        (
            "an empty bind mount option list",
            bind_mount(p(), Where::Container, &[]),
            vec![],
        ),
        (
            "several features at once, in name order",
            bind_mount(
                networking(
                    restart_rule(p(), features::RESTART_ALL_CONTAINERS_ACTION, false),
                    Some(true),
                    Some(false),
                ),
                Where::Container,
                &["noexec"],
            ),
            vec![RESTART_ALL, USERNS_HOSTNET, BIND_OPTIONS],
        ),
    ];
    for (name, pod, want) in cases {
        assert_eq!(inferred(pod), want, "{name}");
    }
}

#[test]
fn prefilter_skips_pods_that_need_nothing() {
    let harness = PluginHarness::new(NodeDeclaredFeatures::default());
    let run = harness.run(
        &PodBuilder::new("plain").info(),
        &[node_info(NodeBuilder::new("n1"), &[])],
    );
    assert_eq!(run.pre_filter.as_ref().expect("ran").code, "Skip");
    assert!(run.filter_of("n1").is_none(), "Filter is skipped too");
}

fn check(name: &str, pod: PodBuilder, node: NodeBuilder, want: Option<&str>) {
    let info = node_info(node, &[]);
    let node_name = info.name().to_string();
    let run = PluginHarness::new(NodeDeclaredFeatures::default()).run(&pod.info(), &[info]);
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
    let needs_restart_all = || {
        restart_rule(
            PodBuilder::new("p"),
            features::RESTART_ALL_CONTAINERS_ACTION,
            false,
        )
    };
    let needs_two = || networking(needs_restart_all(), Some(true), Some(false));
    let rejected = Some(ERR_REASON_UNSATISFIED_REQUIREMENTS);
    check(
        "node declaring nothing",
        needs_restart_all(),
        NodeBuilder::new("n1"),
        rejected,
    );
    check(
        "node declaring another feature",
        needs_restart_all(),
        declaring("n1", &[BIND_OPTIONS]),
        rejected,
    );
    check(
        "node declaring exactly the feature",
        needs_restart_all(),
        declaring("n1", &[RESTART_ALL]),
        None,
    );
    check(
        "node declaring a superset, unknown names included",
        needs_restart_all(),
        declaring("n1", &["FutureFeature", RESTART_ALL, USERNS_HOSTNET]),
        None,
    );
    check(
        "node declaring the features out of order",
        needs_two(),
        declaring("n1", &[USERNS_HOSTNET, RESTART_ALL]),
        None,
    );
    check(
        "node declaring one of two needed features",
        needs_two(),
        declaring("n1", &[RESTART_ALL]),
        rejected,
    );
}

#[test]
fn filter_without_prefilter_state_is_an_error() {
    let status = NodeDeclaredFeatures::default().filter(
        &CycleState::new(),
        &PodBuilder::new("p").info(),
        &node_info(NodeBuilder::new("n1"), &[]),
    );
    assert_eq!(status.code(), kubesched_framework::Code::Error);
}

#[test]
fn gate_off_skips_everything() {
    let plugin = NodeDeclaredFeatures::with(false, Version::V1_35);
    let pod = restart_rule(
        PodBuilder::new("p"),
        features::RESTART_ALL_CONTAINERS_ACTION,
        false,
    );
    let run =
        PluginHarness::new(plugin).run(&pod.info(), &[node_info(NodeBuilder::new("n1"), &[])]);
    assert_eq!(run.pre_filter.expect("ran").code, "Skip");
    assert!(plugin.events_to_register().is_empty());
}

#[test]
fn built_from_the_gates_in_effect() {
    let harness = PluginHarness::new(NodeDeclaredFeatures::default());
    let built = NodeDeclaredFeatures::new(harness.handle()).expect("builds");
    assert!(built.enabled, "GA and locked on in v1.37");
    assert_eq!(built.target, Version::CURRENT);
}

#[test]
fn registers_node_and_pod_events() {
    let events: Vec<ClusterEvent> = NodeDeclaredFeatures::default()
        .events_to_register()
        .iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(
        events,
        vec![
            ClusterEvent::new(
                EventResource::Node,
                ActionType::ADD.union(ActionType::UPDATE_NODE_DECLARED_FEATURE)
            ),
            ClusterEvent::new(EventResource::TargetPod, ActionType::UPDATE),
        ]
    );
}

/// (name, old node: None = added / Some(its declared list, None = no field), new node's
/// list, want).
type NodeCase<'a> = (
    &'a str,
    Option<Option<&'a [&'a str]>>,
    Option<&'a [&'a str]>,
    QueueingHint,
);

#[test]
fn node_hint_table() {
    let events = NodeDeclaredFeatures::default().events_to_register();
    let hint = events[0].hint.as_ref().expect("has a hint");
    let pod = PodBuilder::new("p").info();
    let node = |features: Option<&[&str]>| {
        let b = match features {
            Some(f) => declaring("n1", f),
            None => NodeBuilder::new("n1"),
        };
        EventObject::Node(b.model())
    };
    let cases: [NodeCase<'_>; 5] = [
        (
            "node added",
            None,
            Some(&[RESTART_ALL]),
            QueueingHint::Queue,
        ),
        (
            "node added declaring nothing",
            None,
            None,
            QueueingHint::Queue,
        ),
        (
            "a feature declared",
            Some(Some(&[])),
            Some(&[RESTART_ALL]),
            QueueingHint::Queue,
        ),
        (
            "a feature withdrawn",
            Some(Some(&[RESTART_ALL, BIND_OPTIONS])),
            Some(&[RESTART_ALL]),
            QueueingHint::Queue,
        ),
        (
            "list unchanged",
            Some(Some(&[RESTART_ALL])),
            Some(&[RESTART_ALL]),
            QueueingHint::Skip,
        ),
    ];
    for (name, old, new, want) in cases {
        let old = old.map(node);
        assert_eq!(
            hint(&pod, old.as_ref(), Some(&node(new))),
            Ok(want),
            "{name}"
        );
    }
    assert!(
        hint(&pod, None, None).is_err(),
        "a missing node is an error"
    );
}

#[test]
fn pod_hint_table() {
    let events = NodeDeclaredFeatures::default().events_to_register();
    let hint = events[1].hint.as_ref().expect("has a hint");
    let target = PodBuilder::new("p").uid("p-uid").info();
    let plain = |name: &str| PodBuilder::new(name).uid(&format!("{name}-uid"));
    let needing =
        |name: &str| restart_rule(plain(name), features::RESTART_ALL_CONTAINERS_ACTION, false);
    let cases = [
        (
            "the pod's requirements changed",
            needing("p"),
            plain("p"),
            QueueingHint::Queue,
        ),
        (
            "the pod changed without changing its requirements",
            needing("p").label("team", "a"),
            needing("p"),
            QueueingHint::Skip,
        ),
        (
            "another pod's requirements changed",
            needing("q"),
            plain("q"),
            QueueingHint::Skip,
        ),
    ];
    for (name, old, new, want) in cases {
        let old = EventObject::Pod(old.info());
        let new = EventObject::Pod(new.info());
        assert_eq!(hint(&target, Some(&old), Some(&new)), Ok(want), "{name}");
    }
}

#[test]
fn registered_with_its_points() {
    let desc = registry::find(NAME).expect("registered");
    assert_eq!(
        desc.extension_points().to_vec(),
        kubesched_framework::implemented_points(&NodeDeclaredFeatures::default()).as_slice()
    );
}

#[test]
fn snapshot() {
    let nodes = [
        node_info(NodeBuilder::new("old-kubelet"), &[]),
        node_info(declaring("restart-all", &[RESTART_ALL]), &[]),
        node_info(declaring("both", &[RESTART_ALL, USERNS_HOSTNET]), &[]),
    ];
    let harness = PluginHarness::new(NodeDeclaredFeatures::default());
    let plain = harness.run(&PodBuilder::new("plain").info(), &nodes);
    let restart_all = harness.run(
        &restart_rule(
            PodBuilder::new("restart-all"),
            features::RESTART_ALL_CONTAINERS_ACTION,
            false,
        )
        .info(),
        &nodes,
    );
    let host_network_userns = harness.run(
        &networking(
            PodBuilder::new("host-network-userns"),
            Some(true),
            Some(false),
        )
        .info(),
        &nodes,
    );
    insta::assert_yaml_snapshot!([plain, restart_all, host_network_userns]);
}
