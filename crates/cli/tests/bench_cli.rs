//! `kubesched bench` end to end: the suite runs each workload in a child process of the
//! binary and collects its result.

use std::path::PathBuf;
use std::process::Command;

fn kubesched() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubesched"));
    // The workload folder is found relative to the workspace root.
    cmd.current_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."));
    cmd
}

#[test]
fn bench_runs_the_selected_workloads_in_child_processes() {
    let out = kubesched()
        .args([
            "bench",
            "--filter",
            "SchedulingBasic/",
            "--scale",
            "0.002",
            "--output",
            "json",
        ])
        .output()
        .expect("run kubesched");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let results: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON list");
    let names: Vec<&str> = results
        .as_array()
        .expect("a list")
        .iter()
        .map(|r| r["workload"].as_str().unwrap_or(""))
        .collect();
    // Every size of the workload, smallest first.
    assert_eq!(
        names,
        [
            "SchedulingBasic/500Nodes",
            "SchedulingBasic/5000Nodes",
            "SchedulingBasic/15000Nodes",
            "SchedulingBasic/50000Nodes"
        ]
    );
    for r in results.as_array().into_iter().flatten() {
        assert!(r["measured_pods"].as_u64().is_some_and(|n| n > 0), "{r}");
        assert!(
            r["pods_per_second"].as_f64().is_some_and(|v| v > 0.0),
            "{r}"
        );
        assert!(r["latency_ms"]["p99"].as_f64().is_some(), "{r}");
        assert_eq!(r["scale"], 0.002, "{r}");
        if cfg!(target_os = "linux") {
            assert!(r["peak_rss_bytes"].as_u64().is_some_and(|b| b > 0), "{r}");
        }
    }
    // Without a terminal, one line per finished workload goes to standard error.
    assert!(stderr.contains("SchedulingBasic/5000Nodes: "), "{stderr}");
}

#[test]
fn bench_markdown_has_a_row_per_workload() {
    let out = kubesched()
        .args([
            "bench",
            "--filter",
            "Unschedulable/500Nodes",
            "--scale",
            "0.01",
            "--no-breakdown",
        ])
        .output()
        .expect("run kubesched");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("| Unsched"))
        .collect();
    assert_eq!(rows.len(), 1, "{stdout}");
    assert!(
        rows[0].starts_with("| Unschedulable/500Nodes (scale 0.01) | 5 | 10 |"),
        "{stdout}"
    );
    assert!(!stdout.contains("sampled plugin time"), "{stdout}");
}

#[test]
fn bench_fails_when_no_workload_matches() {
    let out = kubesched()
        .args(["bench", "--filter", "NoSuchWorkload"])
        .output()
        .expect("run kubesched");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no workload in benchmarks matches \"NoSuchWorkload\""),
        "{stderr}"
    );
}

#[test]
fn a_scale_outside_zero_to_one_is_refused_before_any_workload_runs() {
    for scale in ["2", "0", "-0.5", "lots"] {
        let out = kubesched()
            .args(["bench", &format!("--scale={scale}")])
            .output()
            .expect("run kubesched");
        assert_eq!(out.status.code(), Some(2), "--scale {scale}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--scale"), "{stderr}");
        assert!(
            !stderr.contains("failed"),
            "no workload may have started: {stderr}"
        );
    }
}

/// An upstream scheduler_perf configuration, as upstream writes one: test cases with a
/// workload template, params per workload, thresholds, a default pod template beside it.
const UPSTREAM_CONFIG: &str = r#"
- name: SchedulingBasic
  defaultPodTemplatePath: templates/pod-default.yaml
  workloadTemplate:
  - opcode: createNodes
    countParam: $initNodes
  - opcode: createPods
    countParam: $initPods
  - opcode: createPods
    countParam: $measurePods
    collectMetrics: true
  workloads:
  - name: 5Nodes
    labels: [integration-test, fast]
    params:
      initNodes: 5
      initPods: 5
      measurePods: 10
    threshold: 1
- name: Churn
  workloadTemplate:
  - opcode: createNodes
    count: 5
  - opcode: churn
    mode: recreate
  workloads:
  - name: 5Nodes
    params: {}
"#;

#[test]
fn bench_runs_upstream_scheduler_perf_files_unchanged() {
    let dir = std::env::temp_dir().join(format!("kubesched-perf-cli-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("templates")).expect("tmp");
    std::fs::write(dir.join("performance-config.yaml"), UPSTREAM_CONFIG).expect("write");
    std::fs::write(
        dir.join("templates/pod-default.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  generateName: pod-\nspec:\n  containers:\n  - image: registry.k8s.io/pause:3.10.1\n    name: pause\n    ports:\n    - containerPort: 80\n    resources:\n      limits: {cpu: 100m, memory: 500Mi}\n      requests: {cpu: 100m, memory: 500Mi}\n",
    )
    .expect("write");
    let config = dir.join("performance-config.yaml");
    let out = kubesched()
        .args(["bench", "--scheduler-perf"])
        .arg(&config)
        .args(["--output", "json"])
        .output()
        .expect("run kubesched");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let rows = rows.as_array().expect("a list");
    assert_eq!(rows.len(), 2, "{rows:#?}");
    assert_eq!(rows[0]["name"], "SchedulingBasic/5Nodes");
    assert_eq!(rows[0]["threshold"], 1.0);
    assert_eq!(rows[0]["result"]["measured_pods"], 10, "{:#}", rows[0]);
    assert_eq!(rows[0]["result"]["nodes"], 5);
    assert_eq!(rows[1]["name"], "Churn/5Nodes");
    assert_eq!(
        rows[1]["notRun"],
        "workloadTemplate[1]: opcode churn is not supported by kubesched"
    );

    let table = kubesched()
        .args(["bench", "--scheduler-perf"])
        .arg(&config)
        .output()
        .expect("run kubesched");
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("| SchedulingBasic/5Nodes | integration-test, fast |"),
        "{text}"
    );
    assert!(text.contains("Not run:\n- Churn/5Nodes: "), "{text}");
}

/// Upstream's podgroup suites as upstream writes them: a feature gate per test case,
/// PodGroups created from a Go template by index, pods naming their group through
/// `DivideInt`, the pod count as groups times `countMultiplierParam`.
const UPSTREAM_GANG_CONFIG: &str = r#"
- name: Gangs
  featureGates:
    GenericWorkload: true
  workloadTemplate:
  - opcode: createNodes
    countParam: $initNodes
  - opcode: createNamespaces
    prefix: gang-ns
    count: 1
  - opcode: createPodGroups
    countParam: $groups
    namespace: gang-ns-0
    templatePath: templates/podgroup.yaml
    templateParams:
      minCount: $minCount
  - opcode: waitForPodGroups
    countParam: $groups
    namespace: gang-ns-0
  - opcode: createPods
    countParam: $groups
    countMultiplierParam: $podsPerGroup
    namespace: gang-ns-0
    podTemplatePath: templates/gang-pod.yaml
    collectMetrics: true
    templateParams:
      podsPerGroup: $podsPerGroup
  workloads:
  - name: 4Nodes_3Gangs
    params: {initNodes: 4, groups: 3, podsPerGroup: 3, minCount: 3}
  - name: 4Nodes_2GangsShortOfMinCount
    params: {initNodes: 4, groups: 2, podsPerGroup: 3, minCount: 4}
"#;

#[test]
fn bench_runs_upstream_pod_group_suites_with_their_gates() {
    let dir = std::env::temp_dir().join(format!("kubesched-perf-gang-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("templates")).expect("tmp");
    std::fs::write(dir.join("performance-config.yaml"), UPSTREAM_GANG_CONFIG).expect("write");
    std::fs::write(
        dir.join("templates/podgroup.yaml"),
        "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata:\n  name: gang-{{.Index}}\nspec:\n  schedulingPolicy:\n    gang:\n      minCount: {{.minCount}}\n",
    )
    .expect("write");
    std::fs::write(
        dir.join("templates/gang-pod.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: member-{{.Index}}\nspec:\n  schedulingGroup:\n    podGroupName: gang-{{DivideInt .Index .podsPerGroup}}\n  containers:\n  - image: registry.k8s.io/pause:3.10.1\n    name: pause\n    resources:\n      requests: {cpu: 100m, memory: 100Mi}\n",
    )
    .expect("write");
    let out = kubesched()
        .args(["bench", "--scheduler-perf"])
        .arg(dir.join("performance-config.yaml"))
        .args(["--output", "json"])
        .output()
        .expect("run kubesched");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let rows = rows.as_array().expect("a list");
    assert_eq!(rows.len(), 2, "{rows:#?}\n{stderr}");
    assert_eq!(rows[0]["name"], "Gangs/4Nodes_3Gangs");
    assert_eq!(rows[0]["result"]["measured_pods"], 9, "{:#}", rows[0]);
    // A gang one pod short of its minCount holds nothing: no measured pod is scheduled,
    // which only happens when the test case's GenericWorkload gate is in effect.
    assert_eq!(
        rows[1]["notRun"],
        "workload Gangs/4Nodes_2GangsShortOfMinCount: only 0 of 6 measured pods were scheduled",
        "{:#}",
        rows[1]
    );
    assert!(!out.status.success(), "a workload that fails fails the run");
}
