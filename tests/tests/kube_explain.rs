//! `kubesched explain` against the test API server: the cluster is read once, page by page,
//! with `list` requests only (no write of any kind reaches the server), and the pod's
//! profile runs as a dry run on the copy: a pending pod gets its verdicts, a bound pod the
//! answer to "would it go there again?".

use kubesched_sim::{PodState, Scenario, SimReport, WhatIf, explain_pod};
use kubesched_tests::apiserver::TestApiServer;
use kubesched_tests::apiserver::fixtures::{assert_rbac_covers, bounded, node, pod, running_pod};
use serde_json::json;

async fn explain(
    server: &TestApiServer,
    target: &str,
    page_size: u32,
) -> Result<SimReport, String> {
    let kubeconfig = server.write_kubeconfig();
    let client = kubesched_live::read::connect(Some(&kubeconfig))
        .await
        .map_err(|e| e.to_string())?;
    let read = kubesched_live::read::read_cluster(&client, page_size)
        .await
        .map_err(|e| e.to_string())?;
    // The same path as the binary: the objects become one List manifest.
    let text = json!({"apiVersion": "v1", "kind": "List", "items": read.objects}).to_string();
    let mut manifests = kubesched_sim::Manifests::default();
    let mut problems = Vec::new();
    kubesched_sim::load_text(&text, "the cluster", &mut manifests, &mut problems);
    assert!(problems.is_empty(), "{problems:?}");
    let scenario = Scenario {
        config: kubesched_config::default_config(),
        manifests,
        problems,
        seed: 0,
        explain: None,
        file_hint: "the cluster".into(),
    };
    explain_pod(&scenario, target, None)
        .await
        .map_err(|e| e.to_string())
}

async fn cluster() -> TestApiServer {
    let server = TestApiServer::start().await;
    server.create("nodes", node("n1", "2"));
    server.create("nodes", node("n2", "4"));
    let mut tainted = node("gpu", "8");
    tainted["spec"]["taints"] = json!([{"key": "gpu", "value": "true", "effect": "NoSchedule"}]);
    server.create("nodes", tainted);
    server.create("pods", running_pod("web", "1", "n1"));
    server.create("pods", running_pod("db", "1", "n2"));
    server.create("pods", running_pod("cache", "1", "n2"));
    server.create("pods", pod("big", "6"));
    server.create("pods", pod("small", "500m"));
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_reads_with_list_only_and_writes_nothing() {
    bounded(60, "explain through the test API server", async {
        let server = cluster().await;
        let before = server.resource_version();
        let report = explain(&server, "default/big", 2).await.expect("explained");

        let Some(WhatIf::Explain(answer)) = &report.what_if else {
            panic!("no explain answer: {:?}", report.what_if);
        };
        assert_eq!(answer.bound_to, None);
        assert_eq!(answer.outcome.status, PodState::Unschedulable);
        // Six CPUs is more than n1 and n2 have at all, so preemption cannot help there.
        assert_eq!(
            answer.outcome.message.as_deref(),
            Some(
                "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu. no new claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
            )
        );
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).expect("JSON");
        let errors = kubesched_tests::schema::report_schema_errors(&json);
        assert!(errors.is_empty(), "{errors:#?}");
        assert_eq!(json["what_if"]["question"], "explain");
        // Only the pod asked about was scheduled: the other pending pod is left out.
        assert_eq!(report.pods.len(), 1, "{:?}", report.pods);
        let explanation = &report.explanations[0];
        let verdicts: Vec<(&str, Option<&str>)> = explanation
            .nodes
            .iter()
            .map(|n| (n.node.as_str(), n.rejected_by.as_deref()))
            .collect();
        assert_eq!(verdicts.len(), 3);
        assert!(verdicts.contains(&("gpu", Some("TaintToleration"))), "{verdicts:?}");
        assert!(verdicts.contains(&("n1", Some("NodeResourcesFit"))), "{verdicts:?}");

        // What would change that, per node, from the plugins' own verdicts: the tainted
        // node wants a toleration (and has room), n1 and n2 are too small for 6 CPUs.
        let remedies = |node: &str| -> Vec<String> {
            let n = explanation.nodes.iter().find(|n| n.node == node).expect(node);
            n.remedies.iter().map(|r| format!("{}: {}", r.plugin, r.text)).collect()
        };
        assert_eq!(
            remedies("gpu"),
            ["TaintToleration: add a toleration for gpu=true:NoSchedule"]
        );
        assert_eq!(
            remedies("n1"),
            ["NodeResourcesFit: needs 5000m more cpu (requests 6000m, 1000m free of 2000m)"]
        );
        assert!(json["explanations"][0]["nodes"][0]["remedies"][0]["kind"].is_string());
        // The whole table as an operator reads it (README shows it).
        insta::assert_snapshot!("explain_big_table", report.to_table(false));

        // Nothing was written: every request is a GET that RBAC calls `list`, nothing
        // changed on the server, no binding was made.
        let requests = server.requests();
        assert!(!requests.is_empty());
        for r in &requests {
            assert_eq!(r.method, "GET", "{} {}", r.method, r.path);
            let verb = r.rbac.as_ref().map(|(_, _, v)| v.as_str());
            assert_eq!(verb, Some("list"), "{} {}?{}", r.method, r.path, r.query);
        }
        assert_rbac_covers(&server);
        assert_eq!(server.resource_version(), before, "the server's state changed");
        assert!(server.bindings().is_empty());
        assert!(server.get("pods", "default", "big").expect("big")["spec"]["nodeName"].is_null());
        // Pagination: five pods two at a time take three pages.
        let pod_pages: Vec<_> = requests.iter().filter(|r| r.path == "/api/v1/pods").collect();
        assert_eq!(pod_pages.len(), 3, "{pod_pages:#?}");
        assert!(pod_pages.iter().all(|r| r.query.contains("limit=2")));
        assert!(pod_pages[1..].iter().all(|r| r.query.contains("continue=")));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_pod_is_asked_whether_it_would_go_there_again() {
    bounded(60, "explain a bound pod", async {
        let server = cluster().await;
        // web runs on n1 (2 CPUs, used by web alone); n2 has 2 of its 4 CPUs in use. Taken
        // off n1, web scores best there again (least allocated after placement).
        let report = explain(&server, "default/web", 500)
            .await
            .expect("explained");
        let Some(WhatIf::Explain(answer)) = &report.what_if else {
            panic!("no explain answer");
        };
        assert_eq!(answer.bound_to.as_deref(), Some("n1"));
        assert_eq!(answer.outcome.status, PodState::Scheduled);
        assert_eq!(
            answer.same_node,
            Some(answer.outcome.to.as_deref() == Some("n1"))
        );
        let table = report.to_table(false);
        assert!(
            table.contains("Dry run of default/web (profile default-scheduler):"),
            "{table}"
        );
        assert!(
            table.contains("runs on n1; it would go there again"),
            "{table}"
        );
        assert!(server.bindings().is_empty());

        let err = explain(&server, "default/nope", 500)
            .await
            .expect_err("no such pod");
        assert_eq!(
            err,
            "pod default/nope not found (finished pods are not read)"
        );
    })
    .await;
}

/// `kubesched simulate --kubeconfig FILE --context NAME [PODS.yaml]`: the cluster of that
/// context is read once (lists only) and its pending pods, with the files' pods on top,
/// are scheduled offline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_cluster_is_simulated_with_more_pods_on_top() {
    bounded(60, "simulate --kubeconfig", async {
        let server = cluster().await;
        // Two contexts: the current one names a server nobody listens on, so only
        // --context reaches the test API server.
        let real = std::fs::read_to_string(server.write_kubeconfig()).expect("kubeconfig");
        let dead = real
            .replace("- name: test\n  cluster:", "- name: dead\n  cluster:\n    server: http://127.0.0.1:9\n- name: test\n  cluster:")
            .replace(
                "contexts:\n",
                "contexts:\n- name: elsewhere\n  context:\n    cluster: dead\n    user: test\n",
            )
            .replace("current-context: test", "current-context: elsewhere");
        let kubeconfig = server.dir().join("two-contexts");
        std::fs::write(&kubeconfig, dead).expect("write");
        let current = kubesched_live::read::connect_in(Some(&kubeconfig), None)
            .await
            .expect("a client (no connection is made yet)");
        assert!(
            kubesched_live::read::read_cluster(&current, 500).await.is_err(),
            "the current context's server is not there"
        );
        let client = kubesched_live::read::connect_in(Some(&kubeconfig), Some("test"))
            .await
            .expect("the test context");
        let read = kubesched_live::read::read_cluster(&client, 500)
            .await
            .expect("read");
        let extra = server.dir().join("new-pods.yaml");
        std::fs::write(
            &extra,
            "apiVersion: v1\nkind: Pod\nmetadata: {name: batch, namespace: default}\nspec:\n  containers: [{name: c, image: x, resources: {requests: {cpu: '1'}}}]\n",
        )
        .expect("write");
        let text = read.to_list_json();
        let (manifests, problems) =
            kubesched_sim::load_after(Some(("the cluster", &text)), std::slice::from_ref(&extra));
        assert!(problems.is_empty(), "{problems:?}");
        let mut sim = kubesched_sim::Simulation::new(
            &kubesched_config::default_config(),
            kubesched_sim::SimulationOptions {
                seed: Some(0),
                explain: None,
                progress: None,
            },
        )
        .expect("a simulation");
        sim.load(manifests, "the cluster");
        sim.settle().await;
        let report = sim.report();
        let state = |name: &str| {
            report
                .pods
                .iter()
                .find(|p| p.name == name)
                .map(|p| (p.status, p.node.clone()))
                .unwrap_or_else(|| panic!("{name} is in the report: {:?}", report.pods))
        };
        assert_eq!(state("small").0, PodState::Scheduled, "the cluster's pending pod");
        assert_eq!(state("batch").0, PodState::Scheduled, "the file's pod");
        // The cluster's running pods hold their CPU: the 6-CPU pod fits nowhere.
        assert_eq!(state("big"), (PodState::Unschedulable, None));
        // Nothing was written to the cluster.
        let pods = server.list("pods");
        assert!(
            pods.iter().all(|p| p["metadata"]["name"] != "batch"),
            "the file's pod never reached the API server"
        );
    })
    .await;
}

/// `kubesched snapshot`: the cluster read once (GET/list only) and written as a YAML `List`
/// that `simulate` loads whole, every object of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_is_a_dump_simulate_loads_whole() {
    bounded(60, "snapshot", async {
        let server = cluster().await;
        let client = kubesched_live::read::connect(Some(&server.write_kubeconfig()))
            .await
            .expect("client");
        let read = kubesched_live::read::read_cluster(&client, 2)
            .await
            .expect("read");
        let yaml = read.to_list_yaml().expect("yaml");
        // Keys in kubectl's order: apiVersion, items, kind.
        assert!(yaml.starts_with("apiVersion: v1\nitems:\n"), "{yaml}");
        assert!(yaml.ends_with("kind: List\n"), "{yaml}");
        let mut manifests = kubesched_sim::Manifests::default();
        let mut problems = Vec::new();
        kubesched_sim::load_text(&yaml, "snapshot.yaml", &mut manifests, &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(manifests.nodes.len(), 3);
        assert_eq!(manifests.pods.len(), 5);
        for r in server.requests() {
            assert_eq!(r.method, "GET", "{} {}", r.method, r.path);
        }
    })
    .await;
}
