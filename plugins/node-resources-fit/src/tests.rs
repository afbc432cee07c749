//! Table tests of every extension point, ported in spirit from upstream's fit, least/most
//! allocated and requested-to-capacity-ratio tests, and snapshots of representative runs.

use super::*;
use kubesched_framework::events::ClusterEvent;
use kubesched_framework::registry;
use kubesched_testing::{NodeBuilder, PluginHarness, PodBuilder, node_info, node_infos};
use serde_json::json;

fn plugin(args: serde_json::Value) -> NodeResourcesFit {
    let decoded = (registry::ArgsCodec::of::<NodeResourcesFitArgs>().decode)(
        Some(&args),
        &kubesched_framework::FeatureGates::defaults(),
    )
    .expect("valid args");
    NodeResourcesFit::new(
        decoded.get::<NodeResourcesFitArgs>().expect("typed"),
        &Handle::default(),
    )
    .expect("builds")
}

fn default_plugin() -> NodeResourcesFit {
    NodeResourcesFit::new(&NodeResourcesFitArgs::default(), &Handle::default()).expect("builds")
}

// ---------------------------------------------------------------- Filter

/// Upstream's small test node: 10 millicores, 20 bytes, 32 pods, 5 `example.com/aaa`,
/// 20 bytes of ephemeral storage, 5 `hugepages-2Mi`.
fn small_node() -> NodeBuilder {
    NodeBuilder::new("n1").capacity(&[
        ("cpu", "10m"),
        ("memory", "20"),
        ("pods", "32"),
        ("example.com/aaa", "5"),
        ("ephemeral-storage", "20"),
        ("hugepages-2Mi", "5"),
    ])
}

struct FilterCase {
    name: &'static str,
    pod: PodBuilder,
    existing: Vec<PodBuilder>,
    node: NodeBuilder,
    args: serde_json::Value,
    /// None: fits. Some((code, reasons)).
    want: Option<(Code, Vec<&'static str>)>,
}

fn case(name: &'static str, pod: PodBuilder, existing: &[&[(&str, &str)]]) -> FilterCase {
    FilterCase {
        name,
        pod,
        existing: existing
            .iter()
            .enumerate()
            .map(|(i, r)| PodBuilder::new(&format!("existing-{i}")).container(r))
            .collect(),
        node: small_node(),
        args: json!({}),
        want: None,
    }
}

impl FilterCase {
    fn rejects(mut self, code: Code, reasons: &[&'static str]) -> Self {
        self.want = Some((code, reasons.to_vec()));
        self
    }
    fn unschedulable(self, reasons: &[&'static str]) -> Self {
        self.rejects(Code::Unschedulable, reasons)
    }
    fn unresolvable(self, reasons: &[&'static str]) -> Self {
        self.rejects(Code::UnschedulableAndUnresolvable, reasons)
    }
    fn args(mut self, args: serde_json::Value) -> Self {
        self.args = args;
        self
    }
    fn node(mut self, node: NodeBuilder) -> Self {
        self.node = node;
        self
    }

    fn check(self) {
        let existing: Vec<_> = self
            .existing
            .into_iter()
            .map(|p| p.node("n1").info())
            .collect();
        let node = node_info(self.node, &existing);
        let run = PluginHarness::new(plugin(self.args)).run(&self.pod.info(), &[node]);
        let status = run.filter_of("n1").expect("filter ran");
        match self.want {
            None => assert_eq!(
                status.code, "Success",
                "{}: {:?}",
                self.name, status.reasons
            ),
            Some((code, reasons)) => {
                assert_eq!(status.code, code.as_str(), "{}", self.name);
                assert_eq!(status.reasons, reasons, "{}", self.name);
            }
        }
    }
}

fn pod(requests: &[(&str, &str)]) -> PodBuilder {
    PodBuilder::new("p").container(requests)
}

const CPU_MEM_1: &[(&str, &str)] = &[("cpu", "1m"), ("memory", "1")];

#[test]
fn filter_table() {
    let cases = [
        case(
            "no resources requested always fits",
            PodBuilder::new("p"),
            &[&[("cpu", "10m"), ("memory", "20")]],
        ),
        case(
            "too many resources fails",
            pod(CPU_MEM_1),
            &[&[("cpu", "10m"), ("memory", "20")]],
        )
        .unschedulable(&[REASON_INSUFFICIENT_CPU, REASON_INSUFFICIENT_MEMORY]),
        case(
            "init container cpu above the free cpu",
            pod(CPU_MEM_1).init_container(&[("cpu", "3m"), ("memory", "1")], false),
            &[&[("cpu", "8m"), ("memory", "19")]],
        )
        .unschedulable(&[REASON_INSUFFICIENT_CPU]),
        case(
            "highest of several init containers counts",
            pod(CPU_MEM_1)
                .init_container(&[("cpu", "3m"), ("memory", "1")], false)
                .init_container(&[("cpu", "2m"), ("memory", "1")], false),
            &[&[("cpu", "8m"), ("memory", "19")]],
        )
        .unschedulable(&[REASON_INSUFFICIENT_CPU]),
        case(
            "init container memory above the free memory",
            pod(CPU_MEM_1).init_container(&[("cpu", "1m"), ("memory", "3")], false),
            &[&[("cpu", "9m"), ("memory", "19")]],
        )
        .unschedulable(&[REASON_INSUFFICIENT_MEMORY]),
        case(
            "init container fits beside the existing pods",
            pod(CPU_MEM_1).init_container(&[("cpu", "1m"), ("memory", "1")], false),
            &[&[("cpu", "9m"), ("memory", "19")]],
        ),
        case(
            "both resources fit",
            pod(CPU_MEM_1),
            &[&[("cpu", "5m"), ("memory", "5")]],
        ),
        case(
            "cpu short, memory fits",
            pod(&[("cpu", "2m"), ("memory", "1")]),
            &[&[("cpu", "9m"), ("memory", "5")]],
        )
        .unschedulable(&[REASON_INSUFFICIENT_CPU]),
        case(
            "memory short, cpu fits",
            pod(&[("cpu", "1m"), ("memory", "2")]),
            &[&[("cpu", "5m"), ("memory", "19")]],
        )
        .unschedulable(&[REASON_INSUFFICIENT_MEMORY]),
        case(
            "exactly the free amount fits",
            pod(&[("cpu", "5m"), ("memory", "1")]),
            &[&[("cpu", "5m"), ("memory", "19")]],
        ),
        case(
            "sidecar runs beside the main containers",
            pod(&[("cpu", "5m")]).init_container(&[("cpu", "3m")], true),
            &[&[("cpu", "3m")]],
        )
        .unschedulable(&[REASON_INSUFFICIENT_CPU]),
        case(
            "pod overhead is added to the requests",
            pod(CPU_MEM_1).overhead(&[("cpu", "3m"), ("memory", "15")]),
            &[&[("cpu", "5m"), ("memory", "5")]],
        )
        .unschedulable(&[REASON_INSUFFICIENT_MEMORY]),
        case(
            "request above the whole node cannot be helped by preemption",
            pod(&[("cpu", "11m"), ("memory", "1")]),
            &[],
        )
        .unresolvable(&[REASON_INSUFFICIENT_CPU]),
        case(
            "one unresolvable resource makes the node unresolvable",
            pod(&[("cpu", "2m"), ("memory", "21")]),
            &[&[("cpu", "9m")]],
        )
        .unresolvable(&[REASON_INSUFFICIENT_CPU, REASON_INSUFFICIENT_MEMORY]),
        case(
            "ephemeral storage short",
            pod(&[("ephemeral-storage", "10")]),
            &[&[("ephemeral-storage", "15")]],
        )
        .unschedulable(&[REASON_INSUFFICIENT_EPHEMERAL_STORAGE]),
        case(
            "ephemeral storage above the node",
            pod(&[("ephemeral-storage", "25")]),
            &[],
        )
        .unresolvable(&[REASON_INSUFFICIENT_EPHEMERAL_STORAGE]),
        case(
            "extended resource fits",
            pod(&[("example.com/aaa", "1")]),
            &[&[("example.com/aaa", "4")]],
        ),
        case(
            "extended resource short",
            pod(&[("example.com/aaa", "1")]),
            &[&[("example.com/aaa", "5")]],
        )
        .unschedulable(&["Insufficient example.com/aaa"]),
        case(
            "extended resource short through an init container",
            PodBuilder::new("p").init_container(&[("example.com/aaa", "3")], false),
            &[&[("example.com/aaa", "3")]],
        )
        .unschedulable(&["Insufficient example.com/aaa"]),
        case(
            "extended resource the node does not have",
            pod(&[("example.com/bbb", "1")]),
            &[],
        )
        .unresolvable(&["Insufficient example.com/bbb"]),
        case(
            "zero request of a missing extended resource is not checked",
            pod(&[("example.com/bbb", "0")]),
            &[],
        ),
        case(
            "ignoredResources skips an extended resource",
            pod(&[("example.com/bbb", "1")]),
            &[],
        )
        .args(json!({"ignoredResources": ["example.com/bbb"]})),
        case(
            "ignoredResourceGroups skips the whole group",
            pod(&[("example.com/bbb", "1"), ("example.com/ccc", "1")]),
            &[],
        )
        .args(json!({"ignoredResourceGroups": ["example.com"]})),
        case(
            "ignoredResourceGroups leaves other groups checked",
            pod(&[("example.com/bbb", "1"), ("example.org/ccc", "1")]),
            &[],
        )
        .args(json!({"ignoredResourceGroups": ["example.com"]}))
        .unresolvable(&["Insufficient example.org/ccc"]),
        case(
            "kubernetes.io resources are checked and never ignored",
            pod(&[("kubernetes.io/something", "1")]),
            &[],
        )
        .args(json!({"ignoredResources": ["kubernetes.io/something"]}))
        .unresolvable(&["Insufficient kubernetes.io/something"]),
        case(
            "hugepages are checked",
            pod(&[("hugepages-2Mi", "3")]),
            &[&[("hugepages-2Mi", "3")]],
        )
        .unschedulable(&["Insufficient hugepages-2Mi"]),
        case("too many pods", PodBuilder::new("p"), &[&[], &[]])
            .node(NodeBuilder::new("n1").capacity(&[("cpu", "10m"), ("pods", "2")]))
            .unschedulable(&[REASON_TOO_MANY_PODS]),
        case(
            "too many pods is reported first",
            pod(&[("cpu", "5m")]),
            &[&[("cpu", "6m")]],
        )
        .node(NodeBuilder::new("n1").capacity(&[("cpu", "10m"), ("pods", "1")]))
        .unschedulable(&[REASON_TOO_MANY_PODS, REASON_INSUFFICIENT_CPU]),
        case(
            "a node without a pods capacity admits no pod",
            PodBuilder::new("p"),
            &[],
        )
        .node(NodeBuilder::new("n1"))
        .unschedulable(&[REASON_TOO_MANY_PODS]),
        case(
            "scalar resources are reported by name",
            pod(&[("example.com/zzz", "1"), ("example.com/aaa", "9")]),
            &[],
        )
        .unresolvable(&[
            "Insufficient example.com/aaa",
            "Insufficient example.com/zzz",
        ]),
    ];
    for c in cases {
        c.check();
    }
}

#[test]
fn pod_level_requests_count_hugepages() {
    // PodLevelResources: `spec.resources.requests` replace the containers' sum for the
    // resources upstream supports there. v1.37 counts hugepages among them (v1.34 read only
    // cpu and memory, so this pod fitted on its containers' 1Mi).
    let pod_level = |amounts: &[(&str, &str)]| {
        let amounts: Vec<(String, String)> = amounts
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        pod(&[("hugepages-2Mi", "1Mi")]).with(move |p| {
            let spec = p.spec.get_or_insert_with(Default::default);
            spec.resources = Some(kubesched_framework::model::k8s_openapi::api::core::v1::ResourceRequirements {
                requests: Some(
                    amounts
                        .into_iter()
                        .map(|(k, v)| (k, kubesched_framework::model::k8s_openapi::apimachinery::pkg::api::resource::Quantity(v)))
                        .collect(),
                ),
                ..Default::default()
            });
        })
    };
    let node = || {
        NodeBuilder::new("n1").capacity(&[
            ("cpu", "4"),
            ("memory", "8Gi"),
            ("pods", "10"),
            ("hugepages-2Mi", "5Mi"),
        ])
    };
    let cases = vec![
        case(
            "10Mi of hugepages-2Mi at pod level do not fit in 5Mi",
            pod_level(&[("hugepages-2Mi", "10Mi")]),
            &[],
        )
        .node(node())
        .unresolvable(&["Insufficient hugepages-2Mi"]),
        case(
            "4Mi at pod level fit in 5Mi",
            pod_level(&[("hugepages-2Mi", "4Mi")]),
            &[],
        )
        .node(node()),
        case(
            "pod-level cpu replaces the containers' sum",
            pod_level(&[("cpu", "5")]),
            &[],
        )
        .node(node())
        // More than the node has at all: no preemption can help.
        .unresolvable(&["Insufficient cpu"]),
    ];
    for c in cases {
        c.check();
    }
}

#[test]
fn pre_filter_keeps_the_pod_requests() {
    let mut state = CycleState::new();
    let p = pod(&[("cpu", "2"), ("memory", "1Gi")]).info();
    let (result, status) = default_plugin().pre_filter(&mut state, &p, &[]);
    assert!(result.is_none());
    assert!(status.is_success());
    let kept = state.read::<PreFilterState>().expect("written");
    assert_eq!(kept.0.milli_cpu, 2000);
    assert_eq!(kept.0.memory, 1 << 30);
}

#[test]
fn filter_without_pre_filter_is_an_error() {
    let status = default_plugin().filter(
        &CycleState::new(),
        &pod(CPU_MEM_1).info(),
        &node_info(small_node(), &[]),
    );
    assert!(status.is_error());
}

#[test]
fn fits_checks_every_resource() {
    let node = node_info(small_node(), &[]);
    let short = fits(
        &pod(&[("cpu", "11m"), ("example.com/bbb", "2")]).info(),
        &node,
    );
    let summary: Vec<(&str, i64, i64, i64, bool)> = short
        .iter()
        .map(|r| {
            (
                r.resource.as_ref(),
                r.requested,
                r.used,
                r.capacity,
                r.unresolvable,
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![("cpu", 11, 0, 10, true), ("example.com/bbb", 2, 0, 0, true)]
    );
}

// ---------------------------------------------------------------- Score

/// Node `a`: 4 cpu, 10Gi, with a pod using 1 cpu / 1Gi; node `b`: 6 cpu, 10Gi, empty.
fn score_nodes() -> Vec<Arc<NodeInfo>> {
    let existing = PodBuilder::new("existing")
        .container(&[("cpu", "1"), ("memory", "1Gi"), ("example.com/gpu", "1")])
        .node("a")
        .info();
    node_infos(
        vec![
            NodeBuilder::new("a").capacity(&[
                ("cpu", "4"),
                ("memory", "10Gi"),
                ("pods", "110"),
                ("ephemeral-storage", "100Gi"),
                ("example.com/gpu", "4"),
            ]),
            NodeBuilder::new("b").capacity(&[
                ("cpu", "6"),
                ("memory", "10Gi"),
                ("pods", "110"),
                ("ephemeral-storage", "100Gi"),
            ]),
        ],
        &[existing],
    )
}

/// PreScore and Score on both nodes, without Filter (as upstream's score tests do).
fn scores(args: serde_json::Value, pod: PodBuilder) -> Vec<i64> {
    let plugin = plugin(args);
    let (pod, nodes) = (pod.info(), score_nodes());
    let mut state = CycleState::new();
    assert!(plugin.pre_score(&mut state, &pod, &nodes).is_success());
    nodes
        .iter()
        .map(|n| plugin.score(&state, &pod, n).expect("scores"))
        .collect()
}

fn strategy(kind: &str, resources: serde_json::Value) -> serde_json::Value {
    json!({"scoringStrategy": {"type": kind, "resources": resources}})
}

fn ratio(shape: &[(i32, i32)], resources: serde_json::Value) -> serde_json::Value {
    let shape: Vec<_> = shape
        .iter()
        .map(|(u, s)| json!({"utilization": u, "score": s}))
        .collect();
    json!({"scoringStrategy": {
        "type": "RequestedToCapacityRatio",
        "resources": resources,
        "requestedToCapacityRatio": {"shape": shape},
    }})
}

#[test]
fn score_table() {
    let pod = || PodBuilder::new("p").container(&[("cpu", "1"), ("memory", "2Gi")]);
    let gpu_pod = || {
        PodBuilder::new("p").container(&[("cpu", "1"), ("memory", "2Gi"), ("example.com/gpu", "1")])
    };
    let cpu_mem = json!([]);
    let weighted = json!([{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}]);
    let with_gpu = json!([
        {"name": "cpu", "weight": 1},
        {"name": "memory", "weight": 1},
        {"name": "example.com/gpu", "weight": 2},
    ]);
    let with_storage = json!([
        {"name": "cpu", "weight": 1},
        {"name": "memory", "weight": 1},
        {"name": "ephemeral-storage", "weight": 1},
    ]);
    // a: cpu 2000/4000, memory 3Gi/10Gi; b: cpu 1000/6000, memory 2Gi/10Gi.
    let cases = [
        (
            "LeastAllocated by default",
            json!({}),
            pod(),
            // a: (50 + 70) / 2; b: (83 + 80) / 2
            [60, 81],
        ),
        (
            "LeastAllocated, weighted",
            strategy("LeastAllocated", weighted.clone()),
            pod(),
            // a: (50*3 + 70) / 4; b: (83*3 + 80) / 4
            [55, 82],
        ),
        (
            "LeastAllocated counts non-zero defaults for a pod without requests",
            json!({}),
            PodBuilder::new("p").container(&[]),
            // a: cpu 1100/4000 -> 72, memory 1Gi+200Mi of 10Gi -> 88; b: 100m/6 -> 98, 200Mi -> 98
            [80, 98],
        ),
        (
            "MostAllocated",
            strategy("MostAllocated", cpu_mem.clone()),
            pod(),
            // a: (50 + 30) / 2; b: (16 + 20) / 2
            [40, 18],
        ),
        (
            "MostAllocated, weighted",
            strategy("MostAllocated", weighted.clone()),
            pod(),
            // a: (50*3 + 30) / 4; b: (16*3 + 20) / 4
            [45, 17],
        ),
        (
            "RequestedToCapacityRatio, increasing shape",
            ratio(&[(0, 0), (100, 10)], cpu_mem.clone()),
            pod(),
            // a: round((50 + 30) / 2); b: round((16 + 20) / 2)
            [40, 18],
        ),
        (
            "RequestedToCapacityRatio, decreasing shape",
            ratio(&[(0, 10), (100, 0)], cpu_mem.clone()),
            pod(),
            // a: round((50 + 70) / 2); b: round((84 + 80) / 2)
            [60, 82],
        ),
        (
            "RequestedToCapacityRatio rounds the weighted mean",
            ratio(&[(0, 0), (100, 10)], weighted.clone()),
            pod(),
            // a: round((50*3 + 30) / 4) = round(45); b: round((16*3 + 20) / 4) = round(17)
            [45, 17],
        ),
        (
            "RequestedToCapacityRatio, three-point shape",
            ratio(&[(0, 0), (40, 8), (100, 2)], cpu_mem.clone()),
            pod(),
            // a: cpu f(50)=80-10=70, memory f(30)=60; b: cpu f(16)=32, memory f(20)=40
            [65, 36],
        ),
        (
            "RequestedToCapacityRatio leaves zero-scoring resources out of the mean",
            ratio(&[(0, 0), (100, 10)], with_storage.clone()),
            pod(),
            // ephemeral storage at 0 % scores 0 and is left out
            [40, 18],
        ),
        (
            "LeastAllocated keeps zero-scoring resources in the mean",
            strategy("LeastAllocated", with_storage),
            pod(),
            // a: (50 + 70 + 100) / 3; b: (83 + 80 + 100) / 3
            [73, 87],
        ),
        (
            "extended resource scored only on nodes that have it",
            strategy("LeastAllocated", with_gpu.clone()),
            gpu_pod(),
            // a: (50 + 70 + 50*2) / 4; b has no gpu: (83 + 80) / 2
            [55, 81],
        ),
        (
            "extended resource not requested is left out",
            strategy("LeastAllocated", with_gpu),
            pod(),
            [60, 81],
        ),
    ];
    for (name, args, pod, want) in cases {
        assert_eq!(scores(args, pod), want, "{name}");
    }
}

#[test]
fn score_without_pre_score_computes_the_requests() {
    let plugin = plugin(strategy("MostAllocated", json!([])));
    let p = PodBuilder::new("p")
        .container(&[("cpu", "1"), ("memory", "2Gi")])
        .info();
    let nodes = score_nodes();
    let mut state = CycleState::new();
    let without: Vec<_> = nodes
        .iter()
        .map(|n| plugin.score(&state, &p, n).expect("scores"))
        .collect();
    assert!(plugin.pre_score(&mut state, &p, &nodes).is_success());
    assert_eq!(
        state.read::<PreScoreState>().map(|s| s.0.clone()),
        Some(vec![1000, 2 << 30])
    );
    let with: Vec<_> = nodes
        .iter()
        .map(|n| plugin.score(&state, &p, n).expect("scores"))
        .collect();
    assert_eq!(without, with);
    assert_eq!(with, vec![40, 18]);
}

// ---------------------------------------------------------------- DRA-backed extended resources

/// A store with the DeviceClass `gpu` naming `example.com/gpu`.
fn gpu_class_store() -> Arc<kubesched_framework::ObjectStore> {
    let objects = Arc::new(kubesched_framework::ObjectStore::default());
    objects.device_classes.upsert(
        serde_json::from_value::<DeviceClass>(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"extendedResourceName": "example.com/gpu"},
        }))
        .expect("class decodes"),
    );
    objects
}

fn dra_plugin(gates: kubesched_framework::features::FeatureGates) -> NodeResourcesFit {
    let handle = Handle::builder()
        .objects(gpu_class_store())
        .features(gates)
        .build();
    NodeResourcesFit::new(&NodeResourcesFitArgs::default(), &handle).expect("builds")
}

fn dra_filter(
    plugin: NodeResourcesFit,
    pod: PodBuilder,
    node: NodeBuilder,
) -> (String, Vec<String>) {
    let existing = vec![
        PodBuilder::new("existing")
            .container(&[("example.com/gpu", "1")])
            .node("n1")
            .info(),
    ];
    let node = node_info(node, &existing);
    let run = PluginHarness::new(plugin).run(&pod.info(), &[node]);
    let status = run.filter_of("n1").expect("filter ran");
    (status.code.clone(), status.reasons.clone())
}

#[test]
fn extended_resources_backed_by_dra_are_left_to_dynamic_resources() {
    use kubesched_framework::features::{FeatureGates, Version};
    let on = || FeatureGates::default();
    let plain = || NodeBuilder::new("n1").capacity(&[("cpu", "10"), ("pods", "10")]);
    let success = ("Success".to_string(), Vec::<String>::new());
    // No device plugin on the node: the class's devices provide the resource.
    assert_eq!(
        dra_filter(dra_plugin(on()), pod(&[("example.com/gpu", "2")]), plain()),
        success
    );
    // The implicit name of the class works too.
    assert_eq!(
        dra_filter(
            dra_plugin(on()),
            pod(&[("deviceclass.resource.kubernetes.io/gpu", "1")]),
            plain()
        ),
        success
    );
    // A node advertising the resource (a device plugin) is accounted as before.
    let advertised =
        NodeBuilder::new("n1").capacity(&[("cpu", "10"), ("pods", "10"), ("example.com/gpu", "1")]);
    assert_eq!(
        dra_filter(
            dra_plugin(on()),
            pod(&[("example.com/gpu", "1")]),
            advertised
        ),
        (
            "Unschedulable".to_string(),
            vec!["Insufficient example.com/gpu".to_string()]
        )
    );
    // A resource no class names is checked.
    assert_eq!(
        dra_filter(dra_plugin(on()), pod(&[("example.com/fpga", "1")]), plain()),
        (
            "UnschedulableAndUnresolvable".to_string(),
            vec!["Insufficient example.com/fpga".to_string()]
        )
    );
    // Before v1.36 the gate is off by default: the request is checked as any other.
    let old = FeatureGates::parse_at(Version::V1_35, []).expect("gates");
    assert_eq!(
        dra_filter(dra_plugin(old), pod(&[("example.com/gpu", "1")]), plain()),
        (
            "UnschedulableAndUnresolvable".to_string(),
            vec!["Insufficient example.com/gpu".to_string()]
        )
    );
}

#[test]
fn device_class_events_requeue_pods_requesting_what_the_class_names() {
    let plugin = dra_plugin(kubesched_framework::features::FeatureGates::default());
    let events = plugin.events_to_register();
    let class_event = events
        .iter()
        .find(|e| e.event.resource == EventResource::DeviceClass)
        .expect("device class events with the gate on");
    let class = |name: &str, ern: Option<&str>| {
        let mut v = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                           "metadata": {"name": name}, "spec": {}});
        if let Some(e) = ern {
            v["spec"]["extendedResourceName"] = json!(e);
        }
        EventObject::Object(Arc::new(
            serde_json::from_value::<DeviceClass>(v).expect("class decodes"),
        ))
    };
    let gpu_pod = pod(&[("example.com/gpu", "1")]).info();
    let implicit_pod = pod(&[("deviceclass.resource.kubernetes.io/big", "1")]).info();
    let hint = |p: &PodInfo, old: Option<&EventObject>, new: &EventObject| {
        (class_event.hint.as_ref().expect("has a hint"))(p, old, Some(new)).expect("hint")
    };
    let named = class("big", Some("example.com/gpu"));
    assert_eq!(hint(&gpu_pod, None, &named), QueueingHint::Queue);
    assert_eq!(hint(&implicit_pod, None, &named), QueueingHint::Queue);
    assert_eq!(hint(&gpu_pod, Some(&named), &named), QueueingHint::Skip);
    assert_eq!(
        hint(&gpu_pod, Some(&class("big", None)), &named),
        QueueingHint::Queue
    );
    assert_eq!(
        hint(&gpu_pod, None, &class("other", None)),
        QueueingHint::Skip
    );
    // With the gate off the plugin does not listen to classes.
    let old = kubesched_framework::features::FeatureGates::parse_at(
        kubesched_framework::features::Version::V1_35,
        [],
    )
    .expect("gates");
    assert!(
        dra_plugin(old)
            .events_to_register()
            .iter()
            .all(|e| e.event.resource != EventResource::DeviceClass)
    );
}

// ---------------------------------------------------------------- Enqueue extensions

#[test]
fn registers_pod_and_node_events() {
    let events: Vec<ClusterEvent> = default_plugin()
        .events_to_register()
        .iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(
        events,
        vec![
            ClusterEvent::new(EventResource::Pod, ActionType::DELETE),
            // v1.37 (#135905): a bound pod's shrinking and the pod's own, apart.
            ClusterEvent::new(
                EventResource::AssignedPod,
                ActionType::UPDATE_POD_SCALE_DOWN
            ),
            ClusterEvent::new(EventResource::TargetPod, ActionType::UPDATE_POD_SCALE_DOWN),
            ClusterEvent::new(
                EventResource::Node,
                ActionType::ADD.union(ActionType::UPDATE_NODE_ALLOCATABLE)
            ),
            // DRAExtendedResource (on in v1.37): classes may name extended resources.
            ClusterEvent::new(
                EventResource::DeviceClass,
                ActionType::ADD.union(ActionType::UPDATE)
            ),
        ]
    );
}

#[test]
fn pod_event_hint_table() {
    let events = default_plugin().events_to_register();
    let hint = events[0].hint.as_ref().expect("has a hint");
    let target = PodBuilder::new("target")
        .container(&[("cpu", "1"), ("example.com/gpu", "1")])
        .info();
    let other = |reqs: &[(&str, &str)]| PodBuilder::new("other").container(reqs);
    let obj = |b: PodBuilder| EventObject::Pod(b.info());
    let q = QueueingHint::Queue;
    let s = QueueingHint::Skip;
    // (name, old, new (None: deleted), want)
    let cases = [
        ("bound pod deleted", other(&[]).node("n1"), None, q),
        (
            "nominated pod deleted",
            other(&[]).nominated_node("n1"),
            None,
            q,
        ),
        ("unscheduled pod deleted", other(&[]), None, s),
        (
            "the target itself scaled down",
            PodBuilder::new("target").container(&[("cpu", "2")]),
            Some(PodBuilder::new("target").container(&[("cpu", "1")])),
            q,
        ),
        (
            // Upstream looks only at what the target still requests: memory it gave up
            // entirely cannot make it fit anywhere.
            "the target itself gave up memory it no longer requests",
            PodBuilder::new("target").container(&[
                ("cpu", "1"),
                ("example.com/gpu", "1"),
                ("memory", "1Gi"),
            ]),
            Some(PodBuilder::new("target").container(&[("cpu", "1"), ("example.com/gpu", "1")])),
            s,
        ),
        (
            "unscheduled pod scaled down",
            other(&[("cpu", "2")]),
            Some(other(&[("cpu", "1")])),
            s,
        ),
        (
            "bound pod gave back cpu the target wants",
            other(&[("cpu", "2")]).node("n1"),
            Some(other(&[("cpu", "1")]).node("n1")),
            q,
        ),
        (
            "bound pod gave back an extended resource the target wants",
            other(&[("example.com/gpu", "2")]).node("n1"),
            Some(other(&[("example.com/gpu", "1")]).node("n1")),
            q,
        ),
        (
            "bound pod gave back memory the target does not want",
            other(&[("memory", "2Gi")]).node("n1"),
            Some(other(&[("memory", "1Gi")]).node("n1")),
            s,
        ),
        (
            "bound pod grew",
            other(&[("cpu", "1")]).node("n1"),
            Some(other(&[("cpu", "2")]).node("n1")),
            s,
        ),
    ];
    for (name, old, new, want) in cases {
        let new = new.map(obj);
        assert_eq!(
            hint(&target, Some(&obj(old)), new.as_ref()),
            Ok(want),
            "{name}"
        );
    }
    assert!(hint(&target, None, None).is_err());
}

#[test]
fn node_event_hint_table() {
    let events = default_plugin().events_to_register();
    let hint = events[3].hint.as_ref().expect("has a hint");
    let target = PodBuilder::new("target")
        .container(&[("cpu", "2"), ("example.com/gpu", "1")])
        .info();
    let node = |amounts: &[(&str, &str)]| {
        EventObject::Node(NodeBuilder::new("n1").capacity(amounts).model())
    };
    let roomy: &[(&str, &str)] = &[("cpu", "4"), ("pods", "10"), ("example.com/gpu", "1")];
    let q = QueueingHint::Queue;
    let s = QueueingHint::Skip;
    // (name, old (None: added), new, want)
    type Amounts<'a> = &'a [(&'a str, &'a str)];
    let cases: Vec<(&str, Option<Amounts<'_>>, Amounts<'_>, QueueingHint)> = vec![
        ("roomy node added", None, roomy, q),
        (
            "node too small for the pod added",
            None,
            &[("cpu", "1"), ("pods", "10"), ("example.com/gpu", "1")],
            s,
        ),
        (
            "node without the extended resource added",
            None,
            &[("cpu", "4"), ("pods", "10")],
            s,
        ),
        (
            "node admitting no pods added",
            None,
            &[("cpu", "4"), ("example.com/gpu", "1")],
            s,
        ),
        (
            "cpu grew and now fits",
            Some(&[("cpu", "1"), ("pods", "10"), ("example.com/gpu", "1")]),
            roomy,
            q,
        ),
        (
            "extended resource appeared",
            Some(&[("cpu", "4"), ("pods", "10")]),
            roomy,
            q,
        ),
        (
            "pod slots grew",
            Some(&[("cpu", "4"), ("pods", "5"), ("example.com/gpu", "1")]),
            roomy,
            q,
        ),
        (
            "only memory grew, the pod wants none",
            Some(&[("cpu", "4"), ("pods", "10"), ("example.com/gpu", "1")]),
            &[
                ("cpu", "4"),
                ("memory", "1Gi"),
                ("pods", "10"),
                ("example.com/gpu", "1"),
            ],
            s,
        ),
        (
            "cpu shrank but still fits",
            Some(&[("cpu", "8"), ("pods", "10"), ("example.com/gpu", "1")]),
            roomy,
            s,
        ),
        (
            "cpu grew but still too small",
            Some(&[("cpu", "1"), ("pods", "10"), ("example.com/gpu", "1")]),
            &[("cpu", "1500m"), ("pods", "10"), ("example.com/gpu", "1")],
            s,
        ),
    ];
    for (name, old, new, want) in cases {
        let old = old.map(node);
        assert_eq!(
            hint(&target, old.as_ref(), Some(&node(new))),
            Ok(want),
            "{name}"
        );
    }
    assert!(hint(&target, None, None).is_err());
}

// ---------------------------------------------------------------- Registration

#[test]
fn registered_with_its_points_and_args() {
    let desc = registry::find(NAME).expect("registered");
    assert_eq!(
        desc.extension_points().to_vec(),
        kubesched_framework::implemented_points(&default_plugin()).as_slice()
    );
    assert_eq!(desc.args.kind, Some("NodeResourcesFitArgs"));
    let err = PluginHarness::from_registry(
        NAME,
        Some(json!({"scoringStrategy": {"type": "MostAllocated",
            "resources": [{"name": "cpu", "weight": 200}]}})),
        Handle::builder(),
    )
    .err()
    .expect("refused");
    assert!(err.contains("scoringStrategy.resources[0].weight"), "{err}");
}

#[test]
fn new_refuses_invalid_args_built_in_code() {
    let mut args = NodeResourcesFitArgs::default();
    args.scoring_strategy.kind = ScoringStrategyType::RequestedToCapacityRatio;
    let err = NodeResourcesFit::new(&args, &Handle::default()).expect_err("no shape");
    assert!(err.0.contains("requestedToCapacityRatio"), "{err}");
}

// ---------------------------------------------------------------- Snapshots

#[test]
fn snapshot_filter() {
    let used = |name: &str, node: &str, reqs: &[(&str, &str)]| {
        PodBuilder::new(name).container(reqs).node(node).info()
    };
    let capacity: &[(&str, &str)] = &[
        ("cpu", "4"),
        ("memory", "8Gi"),
        ("pods", "3"),
        ("example.com/gpu", "2"),
    ];
    let nodes = node_infos(
        vec![
            NodeBuilder::new("roomy").capacity(capacity),
            NodeBuilder::new("busy").capacity(capacity),
            NodeBuilder::new("no-gpu").capacity(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "3")]),
            NodeBuilder::new("full").capacity(capacity),
            NodeBuilder::new("tiny").capacity(&[("cpu", "1"), ("memory", "1Gi"), ("pods", "3")]),
        ],
        &[
            used("busy-1", "busy", &[("cpu", "3"), ("memory", "7Gi")]),
            used("full-1", "full", &[]),
            used("full-2", "full", &[]),
            used("full-3", "full", &[("example.com/gpu", "2")]),
        ],
    );
    let pod = PodBuilder::new("p")
        .container(&[
            ("cpu", "1500m"),
            ("memory", "2Gi"),
            ("example.com/gpu", "1"),
        ])
        .info();
    let run = PluginHarness::from_registry(NAME, None, Handle::builder())
        .expect("registered")
        .run(&pod, &nodes);
    insta::assert_yaml_snapshot!(run);
}

#[test]
fn snapshot_scores_per_strategy() {
    let pod = PodBuilder::new("p")
        .container(&[("cpu", "1"), ("memory", "2Gi")])
        .info();
    let runs: Vec<_> = [
        json!({}),
        strategy("MostAllocated", json!([])),
        ratio(&[(0, 0), (50, 10), (100, 5)], json!([])),
    ]
    .into_iter()
    .map(|args| {
        PluginHarness::from_registry(NAME, Some(args), Handle::builder())
            .expect("registered")
            .run(&pod, &score_nodes())
    })
    .collect();
    insta::assert_yaml_snapshot!(runs);
}

// ---------------------------------------------------------------- Remedies (explain)

#[test]
fn remedies_name_every_short_resource_with_its_amounts() {
    let node = || {
        NodeBuilder::new("n1").capacity(&[
            ("cpu", "4"),
            ("memory", "8Gi"),
            ("pods", "2"),
            ("example.com/gpu", "1"),
        ])
    };
    let existing = PodBuilder::new("busy")
        .node("n1")
        .container(&[("cpu", "3"), ("memory", "6Gi"), ("example.com/gpu", "1")])
        .info();
    let h = PluginHarness::new(default_plugin());
    let pod = pod(&[
        ("cpu", "2500m"),
        ("memory", "1Gi"),
        ("example.com/gpu", "1"),
    ])
    .info();
    let got = h.remedies(&pod, &[node_info(node(), std::slice::from_ref(&existing))]);
    assert_eq!(
        got,
        vec![(
            "n1".to_string(),
            vec![
                "needs 1500m more cpu (requests 2500m, 1000m free of 4000m)".to_string(),
                "needs 1 more example.com/gpu (requests 1, 0 free of 1)".to_string(),
            ]
        )]
    );
    // A full node: the pod slot is the remedy, whatever the requests.
    let other = PodBuilder::new("other").node("n1").info();
    let empty = PodBuilder::new("empty").info();
    let got = h.remedies(&empty, &[node_info(node(), &[existing, other])]);
    assert_eq!(
        got[0].1,
        vec!["needs 1 more pod slot (2 of 2 in use)".to_string()]
    );
    // A node that fits gets nothing.
    assert!(h.remedies(&empty, &[node_info(node(), &[])]).is_empty());
}

#[test]
fn remedies_skip_ignored_resources_as_filter_does() {
    let h = PluginHarness::new(plugin(json!({"ignoredResources": ["example.com/aaa"]})));
    let p = pod(&[("cpu", "20m"), ("example.com/aaa", "10")]).info();
    let got = h.remedies(&p, &[node_info(small_node(), &[])]);
    assert_eq!(
        got[0].1,
        vec!["needs 10m more cpu (requests 20m, 10m free of 10m)".to_string()]
    );
}

/// v1.37: an extended resource DRA provides, named in `scoringStrategy.resources`, scores
/// on a node without a device plugin by the node's devices of the class (what
/// DynamicResources' Filter counted), not by the node's allocatable, which lacks it (and
/// so left it out of the average before).
#[test]
fn dra_backed_extended_resources_score_by_the_nodes_devices() {
    use kubesched_framework::dra_devices::{DeviceTally, DraExtendedDevices};
    let decoded = (registry::ArgsCodec::of::<NodeResourcesFitArgs>().decode)(Some(&json!({
        "scoringStrategy": {
            "type": "LeastAllocated",
            "resources": [{"name": "cpu", "weight": 1}, {"name": "example.com/gpu", "weight": 1}],
        },
    })), &kubesched_framework::FeatureGates::defaults())
    .expect("valid args");
    let handle = Handle::builder()
        .objects(gpu_class_store())
        .features(kubesched_framework::features::FeatureGates::default())
        .build();
    let plugin = NodeResourcesFit::new(
        decoded.get::<NodeResourcesFitArgs>().expect("typed"),
        &handle,
    )
    .expect("builds");
    let pod = PodBuilder::new("p")
        .container(&[("cpu", "1"), ("example.com/gpu", "1")])
        .info();
    let nodes = node_infos(
        ["busy", "idle", "unknown"]
            .into_iter()
            .map(|n| {
                NodeBuilder::new(n).capacity(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "10")])
            })
            .collect(),
        &[],
    );
    let score_all = |devices: Option<DraExtendedDevices>| {
        let mut state = CycleState::new();
        let _ = plugin.pre_filter(&mut state, &pod, &nodes);
        if let Some(d) = devices {
            state.write(d);
        }
        assert!(plugin.pre_score(&mut state, &pod, &nodes).is_success());
        nodes
            .iter()
            .map(|n| plugin.score(&state, &pod, n).expect("scores"))
            .collect::<Vec<_>>()
    };
    let devices = DraExtendedDevices::default();
    let tally = |allocatable, allocated| DeviceTally {
        allocatable,
        allocated,
    };
    devices.record("busy", "example.com/gpu", tally(4, 3));
    devices.record("idle", "example.com/gpu", tally(4, 0));
    // cpu: (4000 - 1000) * 100 / 4000 = 75 everywhere. gpu: busy (4 - 4) → 0, idle
    // (4 - 1) * 100 / 4 → 75; a node DRA recorded nothing for leaves it out.
    assert_eq!(score_all(Some(devices)), vec![37, 75, 75]);
    // Without DynamicResources' record (no DRA-backed request seen): as the allocatable.
    assert_eq!(score_all(None), vec![75, 75, 75]);
}
