//! Coscheduling against the test API server, with the PodGroup custom resource served: the
//! kube backend watches PodGroups because the plugin declares them, a gang of three is
//! bound whole once its last pod exists, and the scheduler writes the group's phase back
//! through the status subresource, with only the access RBAC grants. A gang that fits only
//! in part is never bound in part: PostFilter rejects it as a whole until a node is added.

use std::time::Duration;

use kubesched_framework::ObjectKind;
use kubesched_live::Runner;
use kubesched_plugin_coscheduling::{POD_GROUP_LABEL, PodGroup, group_rejected};
use kubesched_tests::apiserver::fixtures::{
    assert_rbac_covers, bounded, events, node, node_of, options, pod,
};
use kubesched_tests::apiserver::{self, TestApiServer};
use serde_json::{Value, json};

// The opt-in plugin, linked into this test binary only.
use kubesched_plugin_coscheduling as _;

const CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
leaderElection:
  leaderElect: false
clientConnection:
  qps: 500
  burst: 500
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
      disabled:
      - name: PrioritySort
";

fn member(name: &str, group: &str) -> Value {
    member_of_size(name, group, "1")
}

fn member_of_size(name: &str, group: &str, cpu: &str) -> Value {
    let mut p = pod(name, cpu);
    p["metadata"]["labels"] = json!({ POD_GROUP_LABEL: group });
    p
}

fn phase(server: &TestApiServer, name: &str) -> Option<String> {
    server.get("podgroups", "default", name).and_then(|g| {
        g.pointer("/status/phase")
            .and_then(Value::as_str)
            .map(String::from)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_is_bound_whole_and_its_phase_written_back() {
    // RUST_LOG=kubesched_plugin_coscheduling=debug shows the phase writes.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    bounded(60, "Coscheduling against the test API server", async {
        apiserver::serve_kind(ObjectKind::of::<PodGroup>());
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "4"));
        server.create("nodes", node("n2", "4"));
        server.create(
            "podgroups",
            json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                   "metadata": {"name": "gang", "namespace": "default"},
                   "spec": {"minMember": 3}}),
        );
        server.create("pods", member("gang-0", "gang"));
        server.create("pods", member("gang-1", "gang"));

        let loaded = kubesched_config::load_str(CONFIG, "config.yaml").expect("valid config");
        let mut opts = options(&server, false, "coscheduling");
        opts.config = loaded;
        let runner = Runner::start(opts).await.expect("start");

        // Two of three: held back, and the group is Pending.
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| phase(s, "gang").as_deref()
                    == Some("Pending"))
                .await,
            "the group is Pending: {:?}",
            server.get("podgroups", "default", "gang")
        );
        assert_eq!(node_of(&server, "gang-0"), None);
        assert_eq!(node_of(&server, "gang-1"), None);

        // The third pod makes the group whole: all three are bound.
        server.create("pods", member("gang-2", "gang"));
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| (0..3).all(|i| node_of(
                    s,
                    &format!("gang-{i}")
                )
                .is_some()))
                .await,
            "the whole gang is bound"
        );
        assert!(
            server
                .wait_until(Duration::from_secs(10), |s| phase(s, "gang").as_deref()
                    == Some("Scheduled")
                    && s.get("podgroups", "default", "gang").and_then(|g| g
                        .pointer("/status/scheduled")
                        .and_then(Value::as_i64))
                        == Some(3))
                .await,
            "the group is Scheduled with 3 pods bound: {:?}",
            server.get("podgroups", "default", "gang")
        );
        let group = server
            .get("podgroups", "default", "gang")
            .expect("the group");
        assert!(
            group.pointer("/status/scheduleStartTime").is_some(),
            "{group}"
        );

        // The kubelet's part, by hand: the pods run, then finish. The plugin counts them
        // from the pod events and moves the group on, as upstream's PodGroup controller.
        let status_is = |s: &TestApiServer, phase_name: &str, field: &str, n: i64| {
            phase(s, "gang").as_deref() == Some(phase_name)
                && s.get("podgroups", "default", "gang").and_then(|g| {
                    g.pointer(&format!("/status/{field}"))
                        .and_then(Value::as_i64)
                }) == Some(n)
        };
        let set_phases = |pod_phase: &str| {
            for i in 0..3 {
                server.modify("pods", "default", &format!("gang-{i}"), |p| {
                    p["status"]["phase"] = json!(pod_phase);
                });
            }
        };
        set_phases("Running");
        assert!(
            server
                .wait_until(Duration::from_secs(10), |s| status_is(
                    s, "Running", "running", 3
                ))
                .await,
            "the group is Running with 3 pods running: {:?}",
            server.get("podgroups", "default", "gang")
        );
        // Finished pods leave the scheduler's pod watch (upstream's field selector), as
        // if deleted: they stop counting as running, and the plugin cannot count them as
        // succeeded (that needs a watch of finished pods, a controller's).
        set_phases("Succeeded");
        assert!(
            server
                .wait_until(Duration::from_secs(10), |s| status_is(
                    s, "Running", "running", 0
                ))
                .await,
            "no pod runs any more: {:?}",
            server.get("podgroups", "default", "gang")
        );

        runner.stop_handle().stop();
        runner.wait().await.expect("clean stop");
        assert_rbac_covers(&server);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_that_fits_in_part_is_not_bound_until_it_fits_whole() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    bounded(
        60,
        "a gang rejected whole against the test API server",
        async {
            apiserver::serve_kind(ObjectKind::of::<PodGroup>());
            let server = TestApiServer::start().await;
            // Two nodes of 4 CPUs; three 3-CPU pods that must be placed together.
            server.create("nodes", node("n1", "4"));
            server.create("nodes", node("n2", "4"));
            server.create(
                "podgroups",
                json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                   "metadata": {"name": "big", "namespace": "default"},
                   "spec": {"minMember": 3}}),
            );
            for i in 0..3 {
                server.create("pods", member_of_size(&format!("big-{i}"), "big", "3"));
            }
            let loaded = kubesched_config::load_str(CONFIG, "config.yaml").expect("valid config");
            let mut opts = options(&server, false, "coscheduling-whole");
            opts.config = loaded;
            let runner = Runner::start(opts).await.expect("start");

            // Two pods fit, the third does not: PostFilter rejects the group, the two placed
            // pods are released from Permit, and none is bound, try after try.
            let rejected = |s: &TestApiServer| {
                events(s, "FailedScheduling").iter().any(|e| {
                    let pod = e["regarding"]["name"].as_str().unwrap_or_default();
                    e["note"]
                        .as_str()
                        .is_some_and(|n| n.ends_with(&group_rejected("default/big", pod)))
                })
            };
            assert!(
                server.wait_until(Duration::from_secs(20), rejected).await,
                "the group is rejected: {:#?}",
                events(&server, "FailedScheduling")
            );
            // A few more tries (backoff is 1 s): still none bound.
            tokio::time::sleep(Duration::from_secs(3)).await;
            for i in 0..3 {
                assert_eq!(node_of(&server, &format!("big-{i}")), None, "big-{i}");
            }
            assert!(events(&server, "Scheduled").is_empty());

            // Room for the third: the whole group is bound.
            server.create("nodes", node("n3", "4"));
            assert!(
                server
                    .wait_until(Duration::from_secs(20), |s| {
                        (0..3).all(|i| node_of(s, &format!("big-{i}")).is_some())
                    })
                    .await,
                "the whole gang is bound once it fits"
            );
            let mut nodes: Vec<String> = (0..3)
                .filter_map(|i| node_of(&server, &format!("big-{i}")))
                .collect();
            nodes.sort();
            assert_eq!(nodes, ["n1", "n2", "n3"], "one 3-CPU pod per 4-CPU node");

            runner.stop_handle().stop();
            runner.wait().await.expect("clean stop");
        },
    )
    .await;
}

/// The scheduler's count of attempts that ended with this result.
fn attempts(runner: &Runner, result: &str) -> u64 {
    let prefix = format!("scheduler_schedule_attempts_total{{result=\"{result}\",");
    runner
        .scheduler()
        .metrics()
        .encode()
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// The simulate scenario of gang.rs's live-lock test: [`CONFIG`] with Coscheduling's wait
/// at Permit set to 10 s.
fn livelock_config() -> String {
    format!(
        "{CONFIG}  pluginConfig:\n  - name: Coscheduling\n    args: {{permitWaitingTimeSeconds: 10}}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_that_never_fits_is_not_retried_without_end() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    bounded(
        60,
        "a gang that never fits, against the test API server",
        async {
            apiserver::serve_kind(ObjectKind::of::<PodGroup>());
            let server = TestApiServer::start().await;
            server.create("nodes", node("n1", "4"));
            server.create("nodes", node("n2", "4"));
            for (name, min) in [("big", 3), ("small", 2)] {
                server.create(
                    "podgroups",
                    json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                   "metadata": {"name": name, "namespace": "default"},
                   "spec": {"minMember": min}}),
                );
            }
            for i in 0..3 {
                server.create("pods", member_of_size(&format!("big-{i}"), "big", "3"));
            }
            for i in 0..2 {
                server.create("pods", member_of_size(&format!("small-{i}"), "small", "1"));
            }
            let loaded = kubesched_config::load_str(&livelock_config(), "config.yaml")
                .expect("valid config");
            let mut opts = options(&server, false, "coscheduling-never");
            opts.config = loaded;
            let runner = Runner::start(opts).await.expect("start");
            let bound =
                |s: &TestApiServer, names: &[&str]| names.iter().all(|n| node_of(s, n).is_some());
            assert!(
                server
                    .wait_until(Duration::from_secs(20), |s| bound(
                        s,
                        &["small-0", "small-1"]
                    ))
                    .await,
                "the small gang is bound"
            );
            let rejected = |s: &TestApiServer| {
                events(s, "FailedScheduling").iter().any(|e| {
                    let pod = e["regarding"]["name"].as_str().unwrap_or_default();
                    e["note"]
                        .as_str()
                        .is_some_and(|n| n.ends_with(&group_rejected("default/big", pod)))
                })
            };
            assert!(
                server.wait_until(Duration::from_secs(20), rejected).await,
                "big is rejected"
            );
            // The window, measured by events: two 2-CPU pods, created now (each one's arrival
            // also wakes the gang), until both are bound. Wherever the small gang went, both
            // fit only if no pod of the given-up gang holds 3 CPUs: before the fix, one was
            // placed again alone and held its node for the whole Permit wait. A higher
            // priority keeps them clear of the room the gang's pods are nominated to.
            for i in 0..2 {
                let mut probe = pod(&format!("probe-{i}"), "2");
                probe["spec"]["priority"] = json!(1000);
                server.create("pods", probe);
            }
            assert!(
                server
                    .wait_until(Duration::from_secs(30), |s| bound(
                        s,
                        &["probe-0", "probe-1"]
                    ))
                    .await,
                "the probes are bound: {:#?} {:#?}",
                (0..3)
                    .map(|i| server
                        .get("pods", "default", &format!("big-{i}"))
                        .map(|p| p["status"].clone()))
                    .collect::<Vec<_>>(),
                events(&server, "FailedScheduling")
                    .iter()
                    .map(|e| format!("{}: {}", e["regarding"]["name"], e["note"]))
                    .collect::<Vec<_>>()
            );
            let big_failures: Vec<String> = events(&server, "FailedScheduling")
                .iter()
                .filter(|e| {
                    e["regarding"]["name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("big-"))
                })
                .map(|e| e["note"].as_str().unwrap_or_default().to_string())
                .collect();
            // A round at the start and one per probe's arrival at most, each with the
            // retry the rejection itself causes: a handful, not thousands.
            assert!(
                big_failures.len() <= 30,
                "{} failures of big: {big_failures:#?}",
                big_failures.len()
            );
            assert!(attempts(&runner, "unschedulable") <= 40);
            assert!(
                big_failures
                    .iter()
                    .all(|n| !n.contains("rejected due to timeout")),
                "a pod of big held its node through a Permit wait: {big_failures:#?}"
            );
            for i in 0..3 {
                assert_eq!(node_of(&server, &format!("big-{i}")), None, "big-{i}");
            }
            // A failed binding cycle clears the nomination it wrote (KEP-5278, #135007),
            // and Coscheduling's PostFilter nominates nothing: once no pod of big waits at
            // Permit (at most its 10 s), none keeps a nominated node holding room.
            let nominations = |s: &TestApiServer| {
                (0..3)
                    .filter_map(|i| s.get("pods", "default", &format!("big-{i}")))
                    .filter_map(|p| {
                        p["status"]["nominatedNodeName"]
                            .as_str()
                            .map(str::to_string)
                    })
                    .filter(|n| !n.is_empty())
                    .collect::<Vec<_>>()
            };
            assert!(
                server
                    .wait_until(Duration::from_secs(25), |s| nominations(s).is_empty())
                    .await,
                "big still nominated: {:?}",
                nominations(&server)
            );
            runner.stop_handle().stop();
            runner.wait().await.expect("clean stop");
        },
    )
    .await;
}
