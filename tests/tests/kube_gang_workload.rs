//! GenericWorkload's gang scheduling against the test API server: the kube backend watches
//! `scheduling.k8s.io/v1beta1` PodGroups because GangScheduling is in the default profile
//! with the gate on; a gang that fits is bound whole once its last member exists and its
//! PodGroup reads `PodGroupInitiallyScheduled=True`; a gang that cannot reach its minCount
//! binds nothing, holds no node, and its PodGroup reads `False/Unschedulable` with
//! upstream's PlacementFeasible words. All with only the access RBAC grants.

use std::time::Duration;

use kubesched_live::Runner;
use kubesched_tests::apiserver::fixtures::{
    assert_rbac_covers, bounded, node, node_of, options, pod,
};
use kubesched_tests::apiserver::{self, TestApiServer};
use serde_json::{Value, json};

const CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
leaderElection:
  leaderElect: false
clientConnection:
  qps: 500
  burst: 500
";

fn member(name: &str, group: &str, cpu: &str) -> Value {
    let mut p = pod(name, cpu);
    p["spec"]["schedulingGroup"] = json!({"podGroupName": group});
    p
}

fn pod_group(name: &str, min_count: i32) -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
           "metadata": {"name": name, "namespace": "default"},
           "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}})
}

/// The PodGroupInitiallyScheduled condition's status, reason and message.
fn condition(server: &TestApiServer, name: &str) -> Option<(String, String, String)> {
    let g = server.get("podgroups", "default", name)?;
    let c = g
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PodGroupInitiallyScheduled")?
        .clone();
    let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    Some((text("status"), text("reason"), text("message")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_is_bound_whole_and_one_that_cannot_reach_min_count_holds_nothing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    bounded(
        60,
        "GenericWorkload gangs against the test API server",
        async {
            let server = TestApiServer::start().await;
            // Three nodes of 4 CPUs.
            for n in ["n1", "n2", "n3"] {
                server.create("nodes", node(n, "4"));
            }
            server.create("podgroups", pod_group("fits", 3));
            server.create("pods", member("fits-0", "fits", "3"));
            server.create("pods", member("fits-1", "fits", "3"));

            let gates =
                kubesched_config::FeatureGates::parse(["GenericWorkload=true"]).expect("gates");
            let loaded = kubesched_config::load_str_with_gates(CONFIG, "config.yaml", &gates)
                .expect("valid config");
            let mut opts = options(&server, false, "gang-workload");
            opts.config = loaded;
            let runner = Runner::start(opts).await.expect("start");

            // The third member makes the gang whole: all three are bound, the group says so.
            server.create("pods", member("fits-2", "fits", "3"));
            assert!(
                server
                    .wait_until(Duration::from_secs(20), |s| (0..3).all(|i| node_of(
                        s,
                        &format!("fits-{i}")
                    )
                    .is_some()))
                    .await,
                "the whole gang is bound"
            );
            assert!(
                server
                    .wait_until(Duration::from_secs(10), |s| condition(s, "fits")
                        .is_some_and(
                            |(status, reason, _)| status == "True" && reason == "Scheduled"
                        ))
                    .await,
                "PodGroupInitiallyScheduled=True: {:?}",
                server.get("podgroups", "default", "fits")
            );

            // Three nodes with 1 CPU left each and a gang of two 1-CPU members plus one of 2
            // CPUs that fits nowhere: minCount 3 cannot be met, so neither 1-CPU member binds.
            server.create("podgroups", pod_group("short", 3));
            server.create("pods", member("short-0", "short", "1"));
            server.create("pods", member("short-1", "short", "1"));
            server.create("pods", member("short-2", "short", "2"));
            assert!(
                server
                    .wait_until(Duration::from_secs(20), |s| condition(s, "short")
                        .is_some_and(
                            |(status, reason, _)| status == "False" && reason == "Unschedulable"
                        ))
                    .await,
                "PodGroupInitiallyScheduled=False: {:?}",
                server.get("podgroups", "default", "short")
            );
            let (_, _, message) = condition(&server, "short").expect("condition");
            assert!(
                message.starts_with("minCount (3) cannot be satisfied: "),
                "{message}"
            );
            for i in 0..3 {
                assert_eq!(node_of(&server, &format!("short-{i}")), None, "short-{i}");
            }
            // Nothing of it holds a node: a lone 1-CPU pod still fits on each of the three.
            for i in 0..3 {
                server.create("pods", pod(&format!("solo-{i}"), "1"));
            }
            assert!(
                server
                    .wait_until(Duration::from_secs(20), |s| (0..3).all(|i| node_of(
                        s,
                        &format!("solo-{i}")
                    )
                    .is_some()))
                    .await,
                "the room the failed gang tried is free"
            );

            runner.stop_handle().stop();
            runner.wait().await.expect("clean stop");
            assert_rbac_covers(&server);
        },
    )
    .await;
}

#[test]
fn the_test_api_server_serves_pod_groups() {
    assert!(
        apiserver::RESOURCES
            .iter()
            .any(|r| r.api_version() == "scheduling.k8s.io/v1beta1" && r.plural == "podgroups")
    );
}
