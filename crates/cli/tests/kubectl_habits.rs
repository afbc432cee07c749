//! `kubesched simulate` reads like `kubectl get pods`: `-o wide|name`, `--no-headers`,
//! `-n/--namespace`, a `--status` filter, and `--explain POD` defaulting the namespace as
//! `kubesched explain` does.

mod common;

use common::{CLUSTER, input, kubesched, path};

/// One more pod, in another namespace.
const BATCH_POD: &str = "---
apiVersion: v1
kind: Pod
metadata: {name: job, namespace: batch}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]
";

/// Runs `kubesched simulate DIR --no-timing ARGS…` on [`CLUSTER`] and the batch pod:
/// (exit code, stdout, stderr).
fn simulate(test: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let dir = input(
        &format!("kubectl-{test}"),
        &[("cluster.yaml", CLUSTER), ("batch.yaml", BATCH_POD)],
    );
    let mut all = vec!["simulate", path(&dir), "--no-timing"];
    all.extend_from_slice(args);
    let run = kubesched(&all);
    (run.code, run.stdout, run.stderr)
}

fn pod_rows(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn name_output_lists_pods_as_kubectl_does() {
    let (code, stdout, stderr) = simulate("name", &["-o", "name"]);
    assert_eq!(code, Some(0), "{stderr}");
    let mut names: Vec<&str> = stdout.lines().collect();
    names.sort();
    assert_eq!(names, ["pod/big", "pod/job", "pod/small"]);
}

#[test]
fn namespace_and_status_narrow_the_listing_not_the_run() {
    let (code, stdout, stderr) = simulate("ns", &["-n", "batch"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        pod_rows(&stdout),
        ["POD STATUS NODE", "batch/job Scheduled n1"]
    );
    assert!(
        stdout.contains("Summary: 3 pods on 1 node: 2 scheduled, 1 unschedulable"),
        "the summary counts the whole run: {stdout}"
    );

    let (_, stdout, _) = simulate(
        "status",
        &["--status", "unschedulable,pending", "--no-headers"],
    );
    assert_eq!(pod_rows(&stdout), ["default/big Unschedulable -"]);

    // --fail-on judges the whole run, whatever is listed.
    let (code, _, stderr) = simulate("gate", &["-n", "batch", "--fail-on", "unschedulable"]);
    assert_eq!(code, Some(1), "{stderr}");
}

#[test]
fn wide_output_adds_nomination_and_attempts() {
    let (code, stdout, stderr) = simulate("wide", &["-o", "wide"]);
    assert_eq!(code, Some(0), "{stderr}");
    let header = stdout.lines().next().expect("a header");
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["POD", "STATUS", "NODE", "NOMINATED", "ATTEMPTS", "MESSAGE"]
    );
}

#[test]
fn a_bare_pod_name_to_explain_is_looked_up_in_the_namespace() {
    let (code, stdout, stderr) = simulate("explain-default", &["--explain", "big"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("default/big"), "{stdout}");
    assert!(stdout.contains("Insufficient cpu"), "{stdout}");

    let (code, stdout, stderr) = simulate("explain-ns", &["--explain", "job", "-n", "batch"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("batch/job"), "{stdout}");

    let (code, _, stderr) = simulate("explain-missing", &["--explain", "job"]);
    assert_eq!(code, Some(2), "job is not in default: {stderr}");
    assert!(stderr.contains("default/job"), "{stderr}");
}
