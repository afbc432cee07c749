//! Table tests of PreScore and Score, ported in spirit from upstream's balanced allocation
//! tests, args tests, and snapshots of representative runs.

use super::*;
use kubesched_framework::registry::{self, ArgsCodec};
use kubesched_testing::{NodeBuilder, PluginHarness, PodBuilder, node_infos};
use serde_json::json;

fn decode(v: Option<serde_json::Value>) -> Result<NodeResourcesBalancedAllocationArgs, String> {
    let decoded = (ArgsCodec::of::<NodeResourcesBalancedAllocationArgs>().decode)(
        v.as_ref(),
        &kubesched_framework::FeatureGates::defaults(),
    )
    .map_err(|e| e.to_string())?;
    Ok(decoded
        .get::<NodeResourcesBalancedAllocationArgs>()
        .expect("typed")
        .clone())
}

fn plugin(resources: &[&str]) -> BalancedAllocation {
    let args = NodeResourcesBalancedAllocationArgs {
        resources: resources.iter().map(|r| ResourceSpec::new(r)).collect(),
    };
    BalancedAllocation::new(&args, &Handle::default()).expect("builds")
}

/// Node `a`: 4 cpu, 10Gi memory, 10Gi storage, 4 gpus, running a pod that uses 1 cpu, 1Gi
/// and a gpu; node `b`: 6 cpu, 10Gi memory, 10Gi storage, empty, no gpus.
fn nodes() -> Vec<Arc<NodeInfo>> {
    let existing = PodBuilder::new("existing")
        .container(&[("cpu", "1"), ("memory", "1Gi"), ("example.com/gpu", "1")])
        .node("a")
        .info();
    node_infos(
        vec![
            NodeBuilder::new("a").capacity(&[
                ("cpu", "4"),
                ("memory", "10Gi"),
                ("ephemeral-storage", "10Gi"),
                ("example.com/gpu", "4"),
                ("pods", "110"),
            ]),
            NodeBuilder::new("b").capacity(&[
                ("cpu", "6"),
                ("memory", "10Gi"),
                ("ephemeral-storage", "10Gi"),
                ("pods", "110"),
            ]),
        ],
        &[existing],
    )
}

fn scores(plugin: &BalancedAllocation, pod: PodBuilder, nodes: &[Arc<NodeInfo>]) -> Vec<i64> {
    let pod = pod.info();
    let mut state = CycleState::new();
    assert!(plugin.pre_score(&mut state, &pod, nodes).is_success());
    nodes
        .iter()
        .map(|n| plugin.score(&state, &pod, n).expect("scores"))
        .collect()
}

#[test]
fn score_table() {
    let pod = |reqs: &[(&str, &str)]| PodBuilder::new("p").container(reqs);
    let cpu_mem = plugin(&["cpu", "memory"]);
    let three = plugin(&["cpu", "memory", "ephemeral-storage"]);
    let gpu = plugin(&["cpu", "memory", "example.com/gpu"]);
    let cases = [
        (
            "two resources: half the difference of the fractions",
            &cpu_mem,
            pod(&[("cpu", "1"), ("memory", "2Gi")]),
            // a: 0.5 vs 0.3 -> 1 - 0.1; b: 1/6 vs 0.2 -> 1 - 1/60
            [90, 98],
            // a was 0.25 vs 0.1 (92): 50 + (50 + 90 - 92) / 2; b was empty (100)
            [74, 74],
        ),
        (
            "fraction above one counts as one",
            &cpu_mem,
            pod(&[("cpu", "5"), ("memory", "5Gi")]),
            // a: 1 vs 0.6 -> 0.8; b: 5/6 vs 0.5 -> 1 - 1/6
            [80, 83],
            [69, 66],
        ),
        (
            "three resources: population standard deviation",
            &three,
            pod(&[
                ("cpu", "1"),
                ("memory", "2Gi"),
                ("ephemeral-storage", "5Gi"),
            ]),
            // a: 0.5, 0.3, 0.5 -> std 0.0943; b: 1/6, 0.2, 0.5 -> std 0.1499
            [90, 85],
            // a was 0.25, 0.1, 0 (89)
            [75, 67],
        ),
        (
            "extended resource balanced only where the node has it",
            &gpu,
            pod(&[("cpu", "1"), ("memory", "2Gi"), ("example.com/gpu", "1")]),
            // a: 0.5, 0.3, 0.5 as above; b has no gpu: 1/6 vs 0.2
            [90, 98],
            // a was 0.25, 0.1, 0.25 (92): the gpu counts before the pod too
            [74, 74],
        ),
        (
            "extended resource not requested is left out",
            &gpu,
            pod(&[("cpu", "1"), ("memory", "2Gi")]),
            [90, 98],
            [74, 74],
        ),
        (
            "one resource is always balanced",
            &plugin(&["cpu"]),
            pod(&[("cpu", "1")]),
            [100, 100],
            // Always balanced: no change.
            [75, 75],
        ),
        (
            "plain requests, no scoring defaults: memory counts as zero",
            &cpu_mem,
            pod(&[("cpu", "2")]),
            // a: cpu 3/4 vs memory 1/10 -> 1 - 0.325; b: 2/6 vs 0 -> 1 - 1/6
            [67, 83],
            [62, 66],
        ),
    ];
    // Each row: the balance the pod leaves (v1.35's whole score) and v1.36+'s score, the
    // change it makes mapped onto 50..=100 (#135573).
    for (name, plugin, pod, balance_with_pod, want) in cases {
        let info = pod.clone().info();
        let requests = plugin.pod_requests(&info);
        let balance: Vec<i64> = nodes()
            .iter()
            .map(|n| plugin.balance(n, &requests, true))
            .collect();
        assert_eq!(balance, balance_with_pod, "{name}: balance with the pod");
        assert_eq!(scores(plugin, pod, &nodes()), want, "{name}");
    }
}

#[test]
fn upstream_differently_sized_nodes() {
    // 3 cpu and 5000 bytes on a 4-cpu and a 6-cpu node, both with 10000 bytes of memory.
    let nodes = node_infos(
        vec![
            NodeBuilder::new("small").capacity(&[("cpu", "4"), ("memory", "10000")]),
            NodeBuilder::new("large").capacity(&[("cpu", "6"), ("memory", "10000")]),
        ],
        &[],
    );
    let pod = PodBuilder::new("p").container(&[("cpu", "3"), ("memory", "5000")]);
    // small: 0.75 vs 0.5 -> 87.5 truncated; large: 0.5 vs 0.5 -> 100 (v1.35's scores);
    // both were empty (100), so v1.36+ scores the change: 50 + (50 + 87 - 100) / 2 = 68
    // and 75, upstream's v1.37 expectations for this case.
    let p = plugin(&["cpu", "memory"]);
    let requests = p.pod_requests(&pod.clone().info());
    let balance: Vec<i64> = nodes
        .iter()
        .map(|n| p.balance(n, &requests, true))
        .collect();
    assert_eq!(balance, [87, 100]);
    assert_eq!(scores(&p, pod, &nodes), [68, 75]);
}

#[test]
fn pre_score_skips_pods_requesting_none_of_the_resources() {
    let p = plugin(&["cpu", "memory"]);
    let mut state = CycleState::new();
    let best_effort = PodBuilder::new("p").container(&[]).info();
    assert!(p.pre_score(&mut state, &best_effort, &nodes()).is_skip());
    let gpu_only = PodBuilder::new("p")
        .container(&[("example.com/gpu", "1")])
        .info();
    assert!(p.pre_score(&mut state, &gpu_only, &nodes()).is_skip());
    // Without PreScore, Score gives such a pod 0 everywhere.
    for n in nodes() {
        assert_eq!(p.score(&CycleState::new(), &best_effort, &n), Ok(0));
    }
}

#[test]
fn score_without_pre_score_computes_the_requests() {
    let p = plugin(&["cpu", "memory"]);
    let pod = PodBuilder::new("p")
        .container(&[("cpu", "1"), ("memory", "2Gi")])
        .info();
    let got: Vec<i64> = nodes()
        .iter()
        .map(|n| p.score(&CycleState::new(), &pod, n).expect("scores"))
        .collect();
    // v1.36+ (the balance the pod leaves was [90, 98]; see score_table).
    assert_eq!(got, [74, 74]);
}

#[test]
fn args_defaults_and_round_trip() {
    let args = decode(None).expect("decodes");
    assert_eq!(args, NodeResourcesBalancedAllocationArgs::default());
    assert_eq!(args.resources, default_resources());
    assert_eq!(
        decode(Some(json!({"resources": []}))).expect("decodes"),
        args
    );
    assert_eq!(
        decode(Some(json!({"resources": null}))).expect("decodes"),
        args
    );

    let yaml = "\
resources:
- name: cpu
  weight: 1
- name: memory
  weight: 1
- name: example.com/gpu
  weight: 1
";
    let value: serde_json::Value = serde_saphyr::from_str(yaml).expect("yaml");
    let args = decode(Some(value.clone())).expect("decodes");
    assert_eq!(args.resources.len(), 3);
    assert_eq!(serde_json::to_value(&args).expect("encodes"), value);
    // An absent or zero weight defaults to 1.
    let args = decode(Some(
        json!({"resources": [{"name": "cpu"}, {"name": "memory", "weight": 0}]}),
    ))
    .expect("decodes");
    assert_eq!(args, NodeResourcesBalancedAllocationArgs::default());

    let decoded = (ArgsCodec::of::<NodeResourcesBalancedAllocationArgs>().decode)(
        None,
        &kubesched_framework::FeatureGates::defaults(),
    )
    .expect("decodes");
    insta::assert_yaml_snapshot!(decoded.effective);
}

#[test]
fn args_refused_with_the_field_named() {
    let cases = [
        (
            json!({"resources": [{"name": "cpu", "weight": 2}]}),
            "resources[0].weight: Invalid value: 2: must be 1",
        ),
        (
            json!({"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "cpu"}]}),
            "resources[2].name: Duplicate value: \"cpu\"",
        ),
        (
            json!({"resources": [{"name": "cpu", "weight": 3}, {"name": "cpu"}]}),
            "[resources[0].weight: Invalid value: 3: must be 1, resources[1].name: Duplicate \
             value: \"cpu\"]",
        ),
        (json!({"resource": []}), "unknown field `resource`"),
    ];
    for (value, want) in cases {
        let err = decode(Some(value.clone())).expect_err(&value.to_string());
        assert!(err.contains(want), "{value}: got {err}");
        assert!(err.contains("NodeResourcesBalancedAllocationArgs"), "{err}");
    }
}

#[test]
fn registered_with_its_points_and_args() {
    let desc = registry::find(NAME).expect("registered");
    assert_eq!(
        desc.extension_points().to_vec(),
        kubesched_framework::implemented_points(&plugin(&["cpu"])).as_slice()
    );
    assert_eq!(desc.args.kind, Some("NodeResourcesBalancedAllocationArgs"));
}

#[test]
fn snapshot() {
    let harness = PluginHarness::from_registry(NAME, None, Handle::builder()).expect("registered");
    let balanced = harness.run(
        &PodBuilder::new("p")
            .container(&[("cpu", "1"), ("memory", "2Gi")])
            .info(),
        &nodes(),
    );
    let cpu_heavy = harness.run(
        &PodBuilder::new("cpu-heavy")
            .container(&[("cpu", "3")])
            .info(),
        &nodes(),
    );
    let best_effort = harness.run(
        &PodBuilder::new("best-effort").container(&[]).info(),
        &nodes(),
    );
    // v1.36+ scores (#135573): the change in balance, so 74/74 and 56/62 where v1.35 gave
    // the balance left, 90/98 and 55/75.
    insta::assert_yaml_snapshot!([balanced, cpu_heavy, best_effort]);
}
