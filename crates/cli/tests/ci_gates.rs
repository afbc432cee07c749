//! `kubesched simulate` as a CI step: the exit status says whether the input could be read
//! (2 when not), whether a `--fail-on` condition holds (1), and `-o json|yaml --no-timing`
//! prints the same bytes on every run.

mod common;

use std::path::Path;

use common::{CLUSTER, input, kubesched, path};

const BROKEN: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: [broken\n";

#[test]
fn a_path_that_cannot_be_read_exits_2_naming_it() {
    let dir = input("missing", &[("cluster.yaml", CLUSTER)]);
    let missing = dir.join("no-such-dump.yaml");
    let run = kubesched(&["simulate", path(&dir), path(&missing)]);
    assert_eq!(run.code, Some(2), "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains(path(&missing)), "{}", run.stderr);
    assert!(
        run.stdout.is_empty(),
        "nothing is simulated: {}",
        run.stdout
    );
    let run = kubesched(&[
        "simulate",
        path(&dir),
        "--add-nodes",
        path(&dir.join("no-template.yaml")),
    ]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("no-template.yaml"), "{}", run.stderr);
    if cfg!(unix) {
        let run = kubesched(&["simulate", "/dev/null"]);
        assert_eq!(run.code, Some(2), "{}", run.stderr);
        assert!(
            run.stderr.contains("/dev/null") && run.stderr.contains("not a regular file"),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn fail_on_unschedulable_exits_1_only_when_asked() {
    let dir = input("unschedulable", &[("cluster.yaml", CLUSTER)]);
    let run = kubesched(&["simulate", path(&dir), "--no-timing"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let run = kubesched(&[
        "simulate",
        path(&dir),
        "--no-timing",
        "--fail-on",
        "problems,unschedulable",
    ]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("--fail-on unschedulable: 1 pod unschedulable: default/big"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("--fail-on problems"), "{}", run.stderr);
    // The report is printed all the same.
    assert!(run.stdout.contains("default/big"), "{}", run.stdout);
    let run = kubesched(&["simulate", path(&dir), "--fail-on", "evictions,errors"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
}

#[test]
fn fail_on_problems_exits_1_for_a_broken_document() {
    let dir = input(
        "problems",
        &[("cluster.yaml", CLUSTER), ("broken.yaml", BROKEN)],
    );
    let run = kubesched(&["simulate", path(&dir), "--no-timing"]);
    assert_eq!(
        run.code,
        Some(0),
        "a bad document is a problem: {}",
        run.stderr
    );
    assert!(run.stdout.contains("broken.yaml"), "{}", run.stdout);
    let run = kubesched(&["simulate", path(&dir), "--fail-on", "problems"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains("--fail-on problems: 1 input problem: ")
            && run.stderr.contains("broken.yaml"),
        "{}",
        run.stderr
    );
}

#[test]
fn explain_of_a_pod_not_in_the_input_exits_2() {
    let dir = input("explain", &[("cluster.yaml", CLUSTER)]);
    let run = kubesched(&["simulate", path(&dir), "--explain", "default/nope"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("default/nope"), "{}", run.stderr);
    let run = kubesched(&["simulate", path(&dir), "--explain", "default/big"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stdout.contains("Explanation for default/big"),
        "{}",
        run.stdout
    );
}

#[test]
fn add_nodes_short_of_its_maximum_fails_on_unschedulable_and_pending() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/what-if");
    let args = |extra: &[&'static str]| -> Vec<String> {
        let mut a: Vec<String> = [
            "simulate".to_string(),
            root.join("cluster").display().to_string(),
            root.join("pending.yaml").display().to_string(),
            "--add-nodes".into(),
            root.join("new-node.yaml").display().to_string(),
            "--max".into(),
            "1".into(),
            "--no-timing".into(),
        ]
        .into();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let run_with = |extra: &[&'static str]| {
        let a = args(extra);
        kubesched(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let run = run_with(&[]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stdout.contains("nodes to add: more than 1"),
        "{}",
        run.stdout
    );
    for condition in ["unschedulable", "pending"] {
        let run = run_with(&["--fail-on", condition]);
        assert_eq!(run.code, Some(1), "{condition}: {}", run.stderr);
        assert!(
            run.stderr.contains(&format!(
                "--fail-on {condition}: --add-nodes: more than 1 copy of pool-b needed"
            )),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn json_and_yaml_without_timing_are_byte_stable_and_typed() {
    let dir = input("stable", &[("cluster.yaml", CLUSTER)]);
    for format in ["json", "yaml"] {
        let args = ["simulate", path(&dir), "-o", format, "--no-timing"];
        let (first, second) = (kubesched(&args), kubesched(&args));
        assert_eq!(first.code, Some(0), "{}", first.stderr);
        assert_eq!(first.stdout, second.stdout, "{format}");
        for field in ["duration_seconds", "pods_per_second", "latency_ms"] {
            assert!(!first.stdout.contains(field), "{field}: {}", first.stdout);
        }
        if format == "json" {
            let json: serde_json::Value = serde_json::from_str(&first.stdout).expect("JSON");
            assert_eq!(json["apiVersion"], "kubesched.io/v1alpha1");
            assert_eq!(json["kind"], "SimulationReport");
        } else {
            assert!(
                first
                    .stdout
                    .starts_with("apiVersion: kubesched.io/v1alpha1\nkind: SimulationReport\n"),
                "{}",
                first.stdout
            );
        }
    }
}

#[test]
fn simulate_help_documents_the_exit_status() {
    let run = kubesched(&["simulate", "--help"]);
    assert_eq!(run.code, Some(0));
    // Wrapped to the terminal's width: compare with the line breaks taken out.
    let help = run.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    for text in [
        "--fail-on",
        "Exit status of `simulate`: 0: the run finished",
        "1: a --fail-on condition holds",
        "2: the command line or its input is wrong",
        "3: the simulation could not finish",
        "unschedulable",
        "evictions",
    ] {
        assert!(help.contains(text), "{text}: {help}");
    }
}

#[test]
fn a_report_page_leaves_the_printed_report_as_it_is() {
    let dir = input("report", &[("cluster.yaml", CLUSTER)]);
    let page = dir.join("report.html");
    for format in ["json", "yaml", "table"] {
        let plain = [
            "simulate",
            path(&dir),
            "-o",
            format,
            "--no-timing",
            "--explain",
            "default/big",
        ];
        let mut with_page = plain.to_vec();
        with_page.extend(["--report", path(&page)]);
        let (without, with) = (kubesched(&plain), kubesched(&with_page));
        assert_eq!(with.code, Some(0), "{}", with.stderr);
        // The explanation asked for is printed whole, the page's others are not printed.
        assert_eq!(with.stdout, without.stdout, "{format}");
        assert!(with.stdout.contains("Insufficient cpu"), "{}", with.stdout);
        if format == "json" {
            let json: serde_json::Value = serde_json::from_str(&with.stdout).expect("JSON");
            let explained = json["explanations"].as_array().expect("explanations");
            assert!(!explained.is_empty());
            assert!(
                explained.iter().all(|e| e["pod"] == "default/big"),
                "{explained:?}"
            );
        }
        let html = std::fs::read_to_string(&page).expect("the page is written");
        for section in ["id=\"pod-default_big\"", "id=\"pod-default_small\""] {
            assert!(
                html.contains(section),
                "{section}: every pod is explained on the page"
            );
        }
        std::fs::remove_file(&page).expect("removed");
    }
    let run = kubesched(&[
        "simulate",
        path(&dir),
        "--report",
        path(&dir.join("no-such-folder/report.html")),
    ]);
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    assert!(run.stderr.contains("writing the report"), "{}", run.stderr);
}

/// Two 4-CPU nodes and a gang of three 1-CPU pods whose PodGroup asks for four.
const SHORT_GANG: &str = "kind: Workload
name: ShortGang
featureGates: {GenericWorkload: true}
ops:
- createNodes:
    count: 2
    template:
      metadata: {name: node}
      status:
        allocatable: {cpu: \"4\", memory: 8Gi, pods: \"110\"}
- createPods:
    count: 3
    namespace: jobs
    podGroups: {size: 3, minCount: 4}
    template:
      metadata: {name: member}
      spec:
        containers:
        - {name: c, image: app, resources: {requests: {cpu: \"1\"}}}
";

#[test]
fn a_workloads_feature_gates_hold_unless_the_flag_sets_the_gate() {
    let dir = input("workload-gates", &[("gang.yaml", SHORT_GANG)]);
    let workload = dir.join("gang.yaml");
    // The workload turns GenericWorkload on: the gang, one member short, holds nothing.
    let run = kubesched(&["simulate", "--workload", path(&workload), "--no-timing"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stdout
            .contains("waiting for minCount pods from a gang to appear in scheduling queue"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("0 scheduled"), "{}", run.stdout);
    // The flag wins over the file: with the gate off the pods are scheduled one by one.
    let run = kubesched(&[
        "simulate",
        "--workload",
        path(&workload),
        "--feature-gates",
        "GenericWorkload=false",
        "--no-timing",
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.stdout.contains("3 scheduled"), "{}", run.stdout);
    // A gate the release does not have is refused, naming the file and the field.
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        SHORT_GANG.replace("GenericWorkload: true", "NoSuchGate: true"),
    )
    .expect("write");
    let run = kubesched(&["simulate", "--workload", path(&bad), "--no-timing"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr.contains("bad.yaml") && run.stderr.contains("featureGates"),
        "{}",
        run.stderr
    );
}
