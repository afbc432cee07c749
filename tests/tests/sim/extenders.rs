//! Scheduler extenders end to end on the in-memory cluster: a real HTTP extender on
//! 127.0.0.1 speaking upstream's JSON, called by the same scheduling cycle `run` uses.

use std::time::Duration;

use kubesched_sim::{PodState, SimReport};
use kubesched_tests::extender::{ExtenderServer, Reply, handler, unreachable_url};
use serde_json::{Value, json};

const NODES: &str = "
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}, status: {allocatable: {cpu: '2', memory: 4Gi, pods: '10'}}}
- {apiVersion: v1, kind: Node, metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}, status: {allocatable: {cpu: '2', memory: 4Gi, pods: '10'}}}
- {apiVersion: v1, kind: Node, metadata: {name: n3, labels: {kubernetes.io/hostname: n3}}, status: {allocatable: {cpu: '2', memory: 4Gi, pods: '10'}}}
";

fn pod(name: &str, cpu: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, uid: uid-{name}}}\nspec:\n  containers:\n  - {{name: c, image: app, resources: {{requests: {{cpu: '{cpu}'}}}}}}\n"
    )
}

fn config(extenders: &str) -> String {
    format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nextenders:\n{extenders}"
    )
}

/// How long the simulation runs.
enum Run {
    /// Until nothing is left to try.
    Settle,
    /// One second of virtual time: every pod is tried exactly once.
    OneAttempt,
}

fn simulate(manifests: &str, config: &str, explain: Option<&str>, run: Run) -> SimReport {
    simulate_with_survivors(manifests, config, explain, run).0
}

/// The report, and the names of the pods still in the cluster at the end.
fn simulate_with_survivors(
    manifests: &str,
    config: &str,
    explain: Option<&str>,
    run: Run,
) -> (SimReport, Vec<String>) {
    let loaded = kubesched_config::load_str(config, "config.yaml").expect("valid config");
    kubesched_tests::with_simulation(&loaded, 1, explain, async |mut sim| {
        let m = kubesched_tests::manifests_of(manifests);
        sim.load(m, "input.yaml");
        match run {
            Run::Settle => sim.settle().await,
            Run::OneAttempt => sim.advance_clock(Duration::from_secs(1)).await,
        }
        let survivors = sim
            .cluster()
            .pods()
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        (sim.report(), survivors)
    })
}

fn result<'a>(report: &'a SimReport, name: &str) -> &'a kubesched_sim::PodResult {
    report
        .pods
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("pod {name} in {report:?}"))
}

fn names(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = v
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|n| n.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[test]
fn filter_with_node_names_composes_the_fit_error_from_failed_and_unresolvable_nodes() {
    let ext = ExtenderServer::start(vec![(
        "filter",
        handler(|_| {
            Reply::Json(json!({
                "NodeNames": [],
                "FailedNodes": {"n1": "gpu busy", "n3": "gpu busy"},
                "FailedAndUnresolvableNodes": {"n2": "no gpu", "n3": "no gpu"},
                "Error": ""
            }))
        }),
    )]);
    let cfg = config(&format!(
        "- urlPrefix: {}\n  filterVerb: filter\n  nodeCacheCapable: true\n",
        ext.url()
    ));
    let report = simulate(
        &format!("{NODES}{}", pod("p", "1")),
        &cfg,
        None,
        Run::Settle,
    );
    let p = result(&report, "p");
    assert_eq!(p.status, PodState::Unschedulable);
    // n3 is in both maps: unresolvable wins. Only n1 is left for preemption, and it has
    // nothing to evict.
    assert_eq!(
        p.message.as_deref(),
        Some(
            "0/3 nodes are available: 1 gpu busy, 2 no gpu. no new claims to deallocate, preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
        )
    );
    let req = &ext.requests("filter")[0];
    assert_eq!(names(&req["NodeNames"]), ["n1", "n2", "n3"]);
    assert!(req["Nodes"].is_null(), "{req}");
    assert_eq!(req["Pod"]["metadata"]["name"], "p");
    assert_eq!(
        req["Pod"]["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        "1"
    );
}

#[test]
fn filter_with_full_nodes_narrows_the_feasible_nodes() {
    let ext = ExtenderServer::start(vec![(
        "filter",
        handler(|args| {
            let keep: Vec<Value> = args["Nodes"]["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|n| n["metadata"]["name"] == "n2")
                .cloned()
                .collect();
            Reply::Json(
                json!({"Nodes": {"metadata": {}, "items": keep}, "FailedNodes": {"n1": "not n2", "n3": "not n2"}}),
            )
        }),
    )]);
    let cfg = config(&format!(
        "- urlPrefix: {}\n  filterVerb: filter\n",
        ext.url()
    ));
    let report = simulate(
        &format!("{NODES}{}{}", pod("a", "1"), pod("b", "1")),
        &cfg,
        None,
        Run::Settle,
    );
    assert_eq!(result(&report, "a").node.as_deref(), Some("n2"));
    assert_eq!(result(&report, "b").node.as_deref(), Some("n2"));
    let req = &ext.requests("filter")[0];
    assert!(req["NodeNames"].is_null(), "{req}");
    let items = req["Nodes"]["items"].as_array().expect("full nodes");
    assert_eq!(items.len(), 3);
    assert_eq!(items[0]["status"]["allocatable"]["cpu"], "2");
    assert_eq!(req["Nodes"]["metadata"], json!({}));
}

#[test]
fn nodes_an_extender_rejects_are_counted_with_the_plugins_reasons() {
    // n1 is full for the Filter plugins; the extender sees n2 and n3 only and rejects both.
    let ext = ExtenderServer::start(vec![(
        "filter",
        handler(|args| {
            let sent = names(&args["NodeNames"]);
            let failed: serde_json::Map<String, Value> = sent
                .iter()
                .map(|n| (n.clone(), json!("license server says no")))
                .collect();
            Reply::Json(json!({"NodeNames": [], "FailedNodes": failed}))
        }),
    )]);
    let cfg = config(&format!(
        "- urlPrefix: {}\n  filterVerb: filter\n  nodeCacheCapable: true\n",
        ext.url()
    ));
    let manifests = format!(
        "{NODES}---\napiVersion: v1\nkind: Pod\nmetadata: {{name: filler, namespace: default}}\nspec:\n  nodeName: n1\n  priority: 100\n  containers:\n  - {{name: c, image: app, resources: {{requests: {{cpu: '2'}}}}}}\n{}",
        pod("p", "1")
    );
    let report = simulate(&manifests, &cfg, None, Run::OneAttempt);
    let p = result(&report, "p");
    assert_eq!(p.status, PodState::Unschedulable);
    let msg = p.message.as_deref().unwrap_or_default();
    assert!(
        msg.starts_with(
            "0/3 nodes are available: 1 Insufficient cpu, 2 license server says no. no new claims to deallocate, preemption: "
        ),
        "{msg}"
    );
    assert_eq!(names(&ext.requests("filter")[0]["NodeNames"]), ["n2", "n3"]);
}

#[test]
fn prioritize_scores_are_weighted_and_added_to_the_plugin_totals() {
    let a = ExtenderServer::start(vec![(
        "prioritize",
        handler(|_| Reply::Json(json!([{"Host": "n1", "Score": 10}, {"Host": "n2", "Score": 0}]))),
    )]);
    let b = ExtenderServer::start(vec![(
        "prioritize",
        handler(|_| Reply::Json(json!([{"Host": "n2", "Score": 5}]))),
    )]);
    let broken = ExtenderServer::start(vec![("prioritize", handler(|_| Reply::Status(500)))]);
    let cfg = config(&format!(
        "- urlPrefix: {}\n  prioritizeVerb: prioritize\n  weight: 1\n- urlPrefix: {}\n  prioritizeVerb: prioritize\n  weight: 3\n- urlPrefix: {}\n  prioritizeVerb: prioritize\n  weight: 100\n",
        a.url(),
        b.url(),
        broken.url()
    ));
    let report = simulate(
        &format!("{NODES}{}", pod("p", "1")),
        &cfg,
        Some("default/p"),
        Run::Settle,
    );
    // n1: 10 × 1 × 10 = 100; n2: 5 × 3 × 10 = 150; the broken extender adds nothing.
    assert_eq!(result(&report, "p").node.as_deref(), Some("n2"));
    let e = &report.explanations[0];
    let n = |name: &str| e.nodes.iter().find(|n| n.node == name).expect("node");
    let plugin_total = |name: &str| n(name).scores.iter().map(|s| s.weighted).sum::<i64>();
    assert_eq!(n("n1").total_score, Some(plugin_total("n1") + 100));
    assert_eq!(n("n2").total_score, Some(plugin_total("n2") + 150));
    assert_eq!(n("n3").total_score, Some(plugin_total("n3")));
    let on_n2 = &n("n2").extenders;
    assert_eq!(on_n2.len(), 3, "{on_n2:?}");
    assert_eq!(on_n2[1].extender, b.url());
    assert_eq!(
        (on_n2[1].score, on_n2[1].weight, on_n2[1].weighted),
        (Some(5), Some(3), Some(150))
    );
    assert!(
        on_n2[2]
            .score_error
            .as_deref()
            .is_some_and(|e| e.contains("code 500")),
        "{on_n2:?}"
    );
    // Full node objects were sent: none of these extenders caches nodes.
    assert_eq!(
        a.requests("prioritize")[0]["Nodes"]["items"]
            .as_array()
            .map(Vec::len),
        Some(3)
    );
}

#[test]
fn an_ignorable_extender_that_is_down_is_skipped() {
    let cfg = config(&format!(
        "- urlPrefix: {}\n  filterVerb: filter\n  ignorable: true\n",
        unreachable_url()
    ));
    let report = simulate(
        &format!("{NODES}{}", pod("p", "1")),
        &cfg,
        None,
        Run::Settle,
    );
    assert_eq!(result(&report, "p").status, PodState::Scheduled);
}

#[test]
fn a_required_extender_that_is_down_fails_the_attempt_with_its_error() {
    let url = unreachable_url();
    let cfg = config(&format!("- urlPrefix: {url}/\n  filterVerb: filter\n"));
    let report = simulate(
        &format!("{NODES}{}", pod("p", "1")),
        &cfg,
        None,
        Run::OneAttempt,
    );
    let p = result(&report, "p");
    // An error, not a verdict: kube-scheduler's SchedulerError, counted apart.
    assert_eq!(p.status, PodState::Error);
    assert_eq!(p.attempts, 1);
    assert_eq!(
        (report.summary.errors, report.summary.unschedulable),
        (1, 0)
    );
    let msg = p.message.as_deref().unwrap_or_default();
    assert!(
        msg.starts_with(&format!("Post \"{url}/filter\": ")),
        "{msg}"
    );
}

#[test]
fn a_required_extender_that_times_out_fails_the_attempt() {
    let ext = ExtenderServer::start(vec![(
        "filter",
        handler(|_| {
            Reply::Delayed(
                Duration::from_secs(5),
                Box::new(Reply::Json(json!({"NodeNames": ["n1"]}))),
            )
        }),
    )]);
    let cfg = config(&format!(
        "- urlPrefix: {}\n  filterVerb: filter\n  nodeCacheCapable: true\n  httpTimeout: 200ms\n",
        ext.url()
    ));
    let started = std::time::Instant::now();
    let report = simulate(
        &format!("{NODES}{}", pod("p", "1")),
        &cfg,
        None,
        Run::OneAttempt,
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the timeout cut the call short"
    );
    let p = result(&report, "p");
    assert_eq!(p.status, PodState::Error);
    assert_eq!(
        p.message.as_deref(),
        Some(
            format!(
                "Post \"{}/filter\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
                ext.url()
            )
            .as_str()
        )
    );
}

#[test]
fn managed_resources_limit_the_pods_an_extender_sees_and_ignored_ones_skip_resource_fit() {
    let ext = ExtenderServer::start(vec![(
        "filter",
        handler(|_| {
            Reply::Json(
                json!({"NodeNames": ["n3"], "FailedNodes": {"n1": "no free gpu", "n2": "no free gpu"}}),
            )
        }),
    )]);
    let cfg = config(&format!(
        "- urlPrefix: {}\n  filterVerb: filter\n  nodeCacheCapable: true\n  managedResources:\n  - name: example.com/gpu\n    ignoredByScheduler: true\n",
        ext.url()
    ));
    // No node advertises example.com/gpu: only the extender knows where one is free.
    let gpu_pod = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: trainer, namespace: default}\nspec:\n  containers:\n  - {name: c, image: app, resources: {requests: {cpu: '1'}, limits: {example.com/gpu: '1'}}}\n";
    let report = simulate(
        &format!("{NODES}{}{gpu_pod}", pod("web", "1")),
        &cfg,
        None,
        Run::Settle,
    );
    assert_eq!(result(&report, "trainer").node.as_deref(), Some("n3"));
    assert_eq!(result(&report, "web").status, PodState::Scheduled);
    let seen: Vec<Value> = ext
        .requests("filter")
        .iter()
        .map(|r| r["Pod"]["metadata"]["name"].clone())
        .collect();
    assert_eq!(seen, [json!("trainer")]);
}

#[test]
fn a_managed_resource_not_ignored_by_the_scheduler_is_still_checked_by_resource_fit() {
    let ext = ExtenderServer::start(vec![(
        "filter",
        handler(|args| Reply::Json(json!({"NodeNames": args["NodeNames"]}))),
    )]);
    let cfg = config(&format!(
        "- urlPrefix: {}\n  filterVerb: filter\n  nodeCacheCapable: true\n  managedResources:\n  - name: example.com/gpu\n",
        ext.url()
    ));
    let gpu_pod = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: trainer, namespace: default}\nspec:\n  containers:\n  - {name: c, image: app, resources: {requests: {example.com/gpu: '1'}, limits: {example.com/gpu: '1'}}}\n";
    let report = simulate(&format!("{NODES}{gpu_pod}"), &cfg, None, Run::OneAttempt);
    let msg = result(&report, "trainer")
        .message
        .clone()
        .unwrap_or_default();
    assert!(
        msg.starts_with("0/3 nodes are available: 3 Insufficient example.com/gpu."),
        "{msg}"
    );
    // The plugins left nothing for the extender to filter.
    assert_eq!(ext.request_count(), 0);
}

#[test]
fn an_extender_with_a_bind_verb_binds_instead_of_default_binder() {
    let ext = ExtenderServer::start(vec![(
        "bind",
        handler(|_| Reply::Json(json!({"Error": ""}))),
    )]);
    let cfg = config(&format!("- urlPrefix: {}\n  bindVerb: bind\n", ext.url()));
    let report = simulate(
        &format!("{NODES}{}", pod("p", "1")),
        &cfg,
        None,
        Run::Settle,
    );
    let p = result(&report, "p");
    assert_eq!(p.status, PodState::Scheduled);
    let binds = ext.requests("bind");
    assert_eq!(binds.len(), 1);
    assert_eq!(
        binds[0],
        json!({"PodName": "p", "PodNamespace": "default", "PodUID": "uid-p", "Node": p.node.clone().unwrap_or_default()})
    );
}

#[test]
fn an_extender_bind_error_fails_the_binding() {
    let ext = ExtenderServer::start(vec![(
        "bind",
        handler(|_| Reply::Json(json!({"Error": "quota exceeded"}))),
    )]);
    let cfg = config(&format!("- urlPrefix: {}\n  bindVerb: bind\n", ext.url()));
    let report = simulate(
        &format!("{NODES}{}", pod("p", "1")),
        &cfg,
        None,
        Run::OneAttempt,
    );
    let p = result(&report, "p");
    // A failed binding is an error (SchedulerError upstream), not a verdict.
    assert_eq!(p.status, PodState::Error);
    assert_eq!(p.node, None);
    assert_eq!(p.message.as_deref(), Some("quota exceeded"));
}

#[test]
fn an_ignorable_binder_that_fails_leaves_binding_to_default_binder() {
    let cfg = config(&format!(
        "- urlPrefix: {}\n  bindVerb: bind\n  ignorable: true\n",
        unreachable_url()
    ));
    let report = simulate(
        &format!("{NODES}{}", pod("p", "1")),
        &cfg,
        None,
        Run::Settle,
    );
    assert_eq!(result(&report, "p").status, PodState::Scheduled);
}

fn bound_pod(name: &str, node: &str, priority: i32) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, uid: uid-{name}}}\nspec:\n  nodeName: {node}\n  priority: {priority}\n  containers:\n  - {{name: c, image: app, resources: {{requests: {{cpu: '2'}}}}}}\nstatus: {{startTime: '2024-01-01T00:00:00Z'}}\n"
    )
}

const TWO_NODES: &str = "
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}, status: {allocatable: {cpu: '2', memory: 4Gi, pods: '10'}}}
- {apiVersion: v1, kind: Node, metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}, status: {allocatable: {cpu: '2', memory: 4Gi, pods: '10'}}}
";

fn preemptor() -> &'static str {
    "---\napiVersion: v1\nkind: Pod\nmetadata: {name: urgent, namespace: default, uid: uid-urgent}\nspec:\n  priority: 1000\n  containers:\n  - {name: c, image: app, resources: {requests: {cpu: '2'}}}\n"
}

#[test]
fn the_preempt_verb_narrows_the_candidates_by_uid() {
    // Both nodes are equally good candidates; the extender decides which one is used.
    for (keep, evicted) in [("n2", "low-2"), ("n1", "low-1")] {
        let ext = ExtenderServer::start(vec![(
            "preempt",
            handler(move |args| {
                let victims = args["NodeNameToMetaVictims"][keep].clone();
                Reply::Json(json!({ "NodeNameToMetaVictims": { keep: victims } }))
            }),
        )]);
        let cfg = config(&format!(
            "- urlPrefix: {}\n  preemptVerb: preempt\n  nodeCacheCapable: true\n",
            ext.url()
        ));
        let manifests = format!(
            "{TWO_NODES}{}{}{}",
            bound_pod("low-1", "n1", 10),
            bound_pod("low-2", "n2", 10),
            preemptor()
        );
        let (report, survivors) = simulate_with_survivors(&manifests, &cfg, None, Run::Settle);
        assert_eq!(result(&report, "urgent").node.as_deref(), Some(keep));
        assert!(
            !survivors.iter().any(|p| p == evicted),
            "{evicted} was evicted: {survivors:?}"
        );
        assert_eq!(survivors.len(), 2, "{survivors:?}");
        let req = &ext.requests("preempt")[0];
        assert!(req["NodeNameToVictims"].is_null(), "{req}");
        assert_eq!(
            req["NodeNameToMetaVictims"],
            json!({
                "n1": {"Pods": [{"UID": "uid-low-1"}], "NumPDBViolations": 0},
                "n2": {"Pods": [{"UID": "uid-low-2"}], "NumPDBViolations": 0}
            })
        );
        assert_eq!(req["Pod"]["metadata"]["name"], "urgent");
    }
}

#[test]
fn the_preempt_verb_gets_whole_victims_without_node_cache_and_can_veto_preemption() {
    let ext = ExtenderServer::start(vec![(
        "preempt",
        handler(|_| Reply::Json(json!({"NodeNameToMetaVictims": {}}))),
    )]);
    let cfg = config(&format!(
        "- urlPrefix: {}\n  preemptVerb: preempt\n",
        ext.url()
    ));
    let manifests = format!(
        "{TWO_NODES}{}{}{}",
        bound_pod("low-1", "n1", 10),
        bound_pod("low-2", "n2", 10),
        preemptor()
    );
    let (report, survivors) = simulate_with_survivors(&manifests, &cfg, None, Run::OneAttempt);
    let urgent = result(&report, "urgent");
    assert_eq!(urgent.status, PodState::Unschedulable);
    assert_eq!(
        urgent.message.as_deref(),
        Some(
            "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: no candidate node for preemption"
        )
    );
    assert_eq!(
        survivors,
        ["low-1", "low-2", "urgent"],
        "no victim was evicted"
    );
    let req = &ext.requests("preempt")[0];
    assert!(req["NodeNameToMetaVictims"].is_null(), "{req}");
    let victims = &req["NodeNameToVictims"]["n1"];
    assert_eq!(victims["NumPDBViolations"], 0);
    assert_eq!(victims["Pods"][0]["metadata"]["name"], "low-1");
    assert_eq!(victims["Pods"][0]["spec"]["nodeName"], "n1");
}

#[test]
fn explain_shows_each_extenders_verdict_and_score() {
    let ext = ExtenderServer::start(vec![
        (
            "filter",
            handler(|_| {
                Reply::Json(json!({"NodeNames": ["n2", "n3"], "FailedNodes": {"n1": "busy"}}))
            }),
        ),
        (
            "prioritize",
            handler(|_| {
                Reply::Json(json!([{"Host": "n2", "Score": 7}, {"Host": "n3", "Score": 1}]))
            }),
        ),
    ]);
    let cfg = config(&format!(
        "- urlPrefix: {}\n  filterVerb: filter\n  prioritizeVerb: prioritize\n  weight: 2\n  nodeCacheCapable: true\n",
        ext.url()
    ));
    let report = simulate(
        &format!("{NODES}{}", pod("p", "1")),
        &cfg,
        Some("default/p"),
        Run::Settle,
    );
    assert_eq!(result(&report, "p").node.as_deref(), Some("n2"));
    let e = &report.explanations[0];
    let n1 = e.nodes.iter().find(|n| n.node == "n1").expect("n1");
    assert!(!n1.feasible);
    assert_eq!(n1.rejected_by.as_deref(), Some("Extender"));
    assert_eq!(n1.reasons, ["busy"]);
    assert_eq!(n1.extenders[0].filter.as_deref(), Some("Failed"));
    let n2 = e.nodes.iter().find(|n| n.node == "n2").expect("n2");
    assert!(n2.feasible);
    assert_eq!(n2.extenders[0].filter.as_deref(), Some("Passed"));
    assert_eq!(n2.extenders[0].weighted, Some(140));
    let table = report.to_table(false);
    assert!(
        table.contains(&format!("    extender {}: Failed: busy", ext.url())),
        "{table}"
    );
    assert!(
        table.contains(&format!(
            "    extender {}: Passed, score 7 x weight 2 x 10 = 140",
            ext.url()
        )),
        "{table}"
    );
}

#[test]
fn extender_answers_are_read_with_go_field_name_rules() {
    // Go's decoder matches field names case-insensitively and ignores unknown fields.
    let ext = ExtenderServer::start(vec![(
        "filter",
        handler(|_| {
            Reply::Json(
                json!({"nodenames": ["n3"], "failedNodes": {"n1": "x", "n2": "x"}, "extra": true}),
            )
        }),
    )]);
    let cfg = config(&format!(
        "- urlPrefix: {}\n  filterVerb: filter\n  nodeCacheCapable: true\n",
        ext.url()
    ));
    let report = simulate(
        &format!("{NODES}{}", pod("p", "1")),
        &cfg,
        None,
        Run::Settle,
    );
    assert_eq!(result(&report, "p").node.as_deref(), Some("n3"));
}

#[test]
fn an_extender_claiming_a_node_it_was_not_sent_is_an_error() {
    let ext = ExtenderServer::start(vec![(
        "filter",
        handler(|_| Reply::Json(json!({"NodeNames": ["elsewhere"]}))),
    )]);
    let cfg = config(&format!(
        "- urlPrefix: {}\n  filterVerb: filter\n  nodeCacheCapable: true\n",
        ext.url()
    ));
    let report = simulate(
        &format!("{NODES}{}", pod("p", "1")),
        &cfg,
        None,
        Run::OneAttempt,
    );
    assert_eq!(
        result(&report, "p").message.as_deref(),
        Some(
            format!(
                "extender {:?} claims a filtered node \"elsewhere\" which is not found in the input node list",
                ext.url()
            )
            .as_str()
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_mode_consults_the_same_extenders_against_an_api_server() {
    use kubesched_live::Runner;
    use kubesched_tests::apiserver::TestApiServer;
    use kubesched_tests::apiserver::fixtures::{bounded, http_get, node, node_of, options, pod};

    bounded(
        60,
        "scheduling with an extender through the test API server",
        async {
            let ext = ExtenderServer::start(vec![
                (
                    "filter",
                    handler(|_| {
                        Reply::Json(json!({"NodeNames": ["n2", "n3"], "FailedNodes": {"n1": "no"}}))
                    }),
                ),
                (
                    "prioritize",
                    handler(|_| Reply::Json(json!([{"Host": "n3", "Score": 10}]))),
                ),
            ]);
            let server = TestApiServer::start().await;
            for n in ["n1", "n2", "n3"] {
                server.create("nodes", node(n, "4"));
            }
            server.create("pods", pod("p", "1"));
            let mut o = options(&server, false, "solo");
            o.config = kubesched_config::load_str(
                &format!(
                    "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
extenders:
- urlPrefix: {}
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: 10
  nodeCacheCapable: true
",
                    ext.url()
                ),
                "config.yaml",
            )
            .expect("valid config");
            let runner = Runner::start(o).await.expect("start");
            assert!(
                server
                    .wait_until(Duration::from_secs(20), |s| node_of(s, "p").is_some())
                    .await,
                "p is bound"
            );
            assert_eq!(node_of(&server, "p").as_deref(), Some("n3"));
            assert_eq!(
                names(&ext.requests("filter")[0]["NodeNames"]),
                ["n1", "n2", "n3"]
            );
            assert_eq!(
                names(&ext.requests("prioritize")[0]["NodeNames"]),
                ["n2", "n3"]
            );
            let addr = runner.http_addr().expect("http endpoints");
            let (_, metrics) = http_get(addr, "/metrics").await;
            assert!(
                metrics.contains("scheduler_goroutines{operation=\"prioritizing_extender\"} 0"),
                "{metrics}"
            );
            runner.stop();
            runner.wait().await.expect("clean stop");
        },
    )
    .await;
}

fn tls_filter(client_auth: bool) -> ExtenderServer {
    ExtenderServer::start_tls(
        vec![(
            "filter",
            handler(|_| {
                Reply::Json(json!({"NodeNames": ["n2"], "FailedNodes": {"n1": "no", "n3": "no"}}))
            }),
        )],
        client_auth,
    )
}

/// Schedules one pod through an HTTPS filter extender with the given TLS lines; the node
/// it went to, or the message of its one attempt.
fn through_tls(ext: &ExtenderServer, tls: &str) -> Result<String, String> {
    let cfg = config(&format!(
        "- urlPrefix: {}\n  filterVerb: filter\n  nodeCacheCapable: true\n  enableHTTPS: true\n{tls}",
        ext.https_url()
    ));
    let report = simulate(
        &format!("{NODES}{}", pod("p", "1")),
        &cfg,
        None,
        Run::OneAttempt,
    );
    let p = result(&report, "p");
    p.node
        .clone()
        .ok_or_else(|| p.message.clone().unwrap_or_default())
}

fn fixture(name: &str) -> String {
    kubesched_tests::extender::tls_fixture(name)
        .display()
        .to_string()
}

fn base64_of(name: &str) -> String {
    use base64::Engine as _;
    let bytes = std::fs::read(kubesched_tests::extender::tls_fixture(name)).expect("fixture");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[test]
fn https_with_the_ca_inline_and_a_server_name_verifies_the_extender() {
    let ext = tls_filter(false);
    let tls = format!(
        "  tlsConfig:\n    caData: {}\n    serverName: extender.test\n",
        base64_of("ca.crt")
    );
    assert_eq!(through_tls(&ext, &tls), Ok("n2".to_string()));
}

#[test]
fn https_without_a_ca_skips_verification_as_upstream() {
    let ext = tls_filter(false);
    assert_eq!(through_tls(&ext, ""), Ok("n2".to_string()));
}

#[test]
fn https_with_a_ca_rejects_a_certificate_for_another_name() {
    let ext = tls_filter(false);
    // The certificate names extender.test, the URL 127.0.0.1.
    let tls = format!("  tlsConfig:\n    caFile: {}\n", fixture("ca.crt"));
    let err = through_tls(&ext, &tls).expect_err("verification fails");
    assert!(
        err.starts_with(&format!("Post \"{}/filter\": ", ext.https_url())),
        "{err}"
    );
    assert!(err.contains("certificate"), "{err}");
}

#[test]
fn https_with_a_client_certificate_from_files() {
    let ext = tls_filter(true);
    let tls = format!(
        "  tlsConfig:\n    caFile: {}\n    certFile: {}\n    keyFile: {}\n    serverName: extender.test\n",
        fixture("ca.crt"),
        fixture("client.crt"),
        fixture("client.key")
    );
    assert_eq!(through_tls(&ext, &tls), Ok("n2".to_string()));
    // Without the client certificate the extender hangs up during the handshake.
    let tls = format!(
        "  tlsConfig:\n    caFile: {}\n    serverName: extender.test\n",
        fixture("ca.crt")
    );
    let err = through_tls(&ext, &tls).expect_err("client certificate required");
    assert!(
        err.starts_with(&format!("Post \"{}/filter\": ", ext.https_url())),
        "{err}"
    );
}

#[test]
fn a_pod_an_extender_rejected_is_tried_again_on_a_cluster_event() {
    // The extender refuses every node until a fourth node exists, and then takes it.
    let ext = ExtenderServer::start(vec![(
        "filter",
        handler(|args| {
            let sent = names(&args["NodeNames"]);
            if sent.iter().any(|n| n == "n4") {
                Reply::Json(json!({"NodeNames": ["n4"]}))
            } else {
                let failed: serde_json::Map<String, Value> = sent
                    .iter()
                    .map(|n| (n.clone(), json!("wait for n4")))
                    .collect();
                Reply::Json(json!({"NodeNames": [], "FailedNodes": failed}))
            }
        }),
    )]);
    let cfg = config(&format!(
        "- urlPrefix: {}\n  filterVerb: filter\n  nodeCacheCapable: true\n",
        ext.url()
    ));
    let loaded = kubesched_config::load_str(&cfg, "config.yaml").expect("valid config");
    let (before, after) = kubesched_tests::with_simulation(&loaded, 1, None, async |mut sim| {
        let mut m = kubesched_sim::Manifests::default();
        let mut problems = Vec::new();
        kubesched_sim::load_text(
            &format!("{NODES}{}", pod("p", "1")),
            "input.yaml",
            &mut m,
            &mut problems,
        );
        sim.load(m, "input.yaml");
        sim.settle().await;
        let before = sim.report();
        let n4: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
            "metadata": {"name": "n4", "labels": {"kubernetes.io/hostname": "n4"}},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}}
        }))
        .expect("node");
        sim.add_node(n4, "later.yaml");
        sim.settle().await;
        (before, sim.report())
    });
    let p = result(&before, "p");
    assert_eq!(p.status, PodState::Unschedulable);
    // Only the extender rejected the pod, so no plugin's hint can turn an event away: any
    // event sends it back to be tried after its backoff. The first is the pod's own status
    // update (its PodScheduled condition), as upstream's queue takes every update; the
    // second attempt writes the same condition, so no update, no third attempt.
    assert_eq!(p.attempts, 2, "its own condition update, then nothing");
    // A new node is such an event too.
    assert_eq!(result(&after, "p").node.as_deref(), Some("n4"));
}
