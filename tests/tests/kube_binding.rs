//! Binding end to end: a 409 (the pod was bound by someone else meanwhile) is not retried
//! and the cache follows the API; server errors are retried with backoff and their
//! FailedScheduling events aggregated; a pod deleted while its bind is in flight is
//! neither retried nor left behind.

use std::time::Duration;

use kubesched_live::Runner;
use kubesched_tests::apiserver::TestApiServer;
use kubesched_tests::apiserver::fixtures::{
    bounded, events_of, node, node_of, options, pod, requests_to,
};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflict_on_bind_follows_the_api() {
    bounded(60, "409 on bind", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "2"));
        server.create("nodes", node("n2", "2"));
        let mut p = pod("contested", "2");
        // Only n1 is attractive to us: n2 is tainted.
        server.modify("nodes", "", "n2", |n| {
            n["spec"]["taints"] = json!([{"key": "other", "value": "x", "effect": "NoSchedule"}]);
        });
        p["spec"]["priority"] = json!(0);
        server.create("pods", p);
        let gate = server.hold_requests("POST", "/binding");
        let runner = Runner::start(options(&server, false, "solo")).await.expect("start");
        assert!(gate.wait_held(1, Duration::from_secs(20)).await, "our bind is in flight");
        // Another scheduler binds the pod to n2 first.
        server.modify("pods", "default", "contested", |p| p["spec"]["nodeName"] = json!("n2"));
        server.clear_faults();
        gate.release();

        let binds = || requests_to(&server, "POST", "/binding");
        assert!(server.wait_until(Duration::from_secs(10), |_| binds().len() == 1 && binds()[0].status == Some(409)).await);
        // The cache follows the API: the pod is on n2, n1 is free again.
        assert!(
            server
                .wait_until(Duration::from_secs(10), |_| {
                    let dump = runner.scheduler().cache().pod_count();
                    dump == 1
                        && runner
                            .scheduler()
                            .cache()
                            .get_pod(server.get("pods", "default", "contested").expect("pod")["metadata"]["uid"].as_str().unwrap_or(""))
                            .is_some_and(|p| p.node_name.as_deref() == Some("n2"))
                })
                .await,
            "the cache has the pod where the API says it is"
        );
        server.create("pods", pod("next", "2"));
        assert!(server.wait_until(Duration::from_secs(20), |s| node_of(s, "next").is_some()).await);
        assert_eq!(node_of(&server, "next").as_deref(), Some("n1"), "no phantom usage on n1");
        // The 409 was reported once (events are written in the background).
        assert!(
            server
                .wait_until(Duration::from_secs(10), |s| events_of(s, "FailedScheduling", "contested").len() == 1)
                .await
        );
        // Never retried: one bind for "contested", one for "next"; the bound pod keeps the
        // status the API server gave it. A retry would come after the 1 s initial backoff,
        // so 1.5 s of quiet is the negative check (it can only pass vacuously, never fail
        // because the machine is slow).
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(binds().len(), 2);
        assert_eq!(node_of(&server, "contested").as_deref(), Some("n2"));
        let contested = server.get("pods", "default", "contested").expect("pod");
        assert!(contested["status"]["conditions"].as_array().is_none_or(|c| c.iter().all(|c| c["reason"] != "SchedulerError")));
        assert_eq!(events_of(&server, "FailedScheduling", "contested").len(), 1);
        assert!(runner.scheduler().queue().pending_pods().is_empty());
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_on_bind_are_retried_and_their_events_aggregated() {
    bounded(60, "500s on bind", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "2"));
        server.create("pods", pod("flaky", "1"));
        server.fail_requests("POST", "/binding", 3, 500);
        let runner = Runner::start(options(&server, false, "solo"))
            .await
            .expect("start");
        assert!(
            server
                .wait_until(Duration::from_secs(30), |s| node_of(s, "flaky").is_some())
                .await
        );
        // The binding's effect shows before its answer is logged: wait for the answers.
        let binds = server
            .wait_for_requests(4, Duration::from_secs(10), |r| {
                r.method == "POST" && r.path.ends_with("/binding")
            })
            .await
            .expect("four binding requests answered");
        assert_eq!(
            binds.iter().map(|r| r.status).collect::<Vec<_>>(),
            [500, 500, 500, 201].map(Some)
        );
        // Three identical failures: one event created, turned into a series on the second.
        assert!(
            server
                .wait_until(Duration::from_secs(5), |s| events_of(
                    s,
                    "Scheduled",
                    "flaky"
                )
                .len()
                    == 1)
                .await
        );
        let failed = events_of(&server, "FailedScheduling", "flaky");
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert_eq!(failed[0]["series"]["count"], 2);
        assert!(
            failed[0]["note"]
                .as_str()
                .unwrap_or("")
                .contains("injected failure (500)"),
            "{}",
            failed[0]["note"]
        );
        let event_writes = |method: &str| {
            server
                .requests()
                .iter()
                .filter(|r| r.method == method && r.path.contains("/apis/events.k8s.io/v1/"))
                .count()
        };
        assert_eq!(
            event_writes("POST"),
            2,
            "one FailedScheduling and one Scheduled event created"
        );
        assert_eq!(event_writes("PATCH"), 1, "the series patched once");
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_deleted_during_its_bind_is_not_retried() {
    bounded(60, "deleted during bind", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "2"));
        server.create("pods", pod("doomed", "2"));
        let gate = server.hold_requests("POST", "/binding");
        let runner = Runner::start(options(&server, false, "solo"))
            .await
            .expect("start");
        assert!(gate.wait_held(1, Duration::from_secs(20)).await);
        server.delete("pods", "default", "doomed");
        server.clear_faults();
        gate.release();
        let binds = || requests_to(&server, "POST", "/binding");
        assert!(
            server
                .wait_until(Duration::from_secs(10), |_| binds().len() == 1
                    && binds()[0].status == Some(404))
                .await
        );
        // The node is free for the next pod, and the deleted one is not tried again.
        server.create("pods", pod("next", "2"));
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| node_of(s, "next").is_some())
                .await
        );
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(binds().len(), 2, "{:?}", binds());
        assert!(runner.scheduler().queue().pending_pods().is_empty());
        assert_eq!(runner.scheduler().cache().pod_count(), 1);
        // No status patch for a pod that is gone.
        assert!(requests_to(&server, "PATCH", "/pods/doomed/status").is_empty());
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}
