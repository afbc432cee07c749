//! Binding end to end: a 409 (the pod was bound by someone else meanwhile) is not retried
//! and the cache follows the API; transient server errors (500, 503) are retried within the
//! Bind call with client-go's backoff (v1.37), and once those retries run out the pod goes
//! back through the queue's backoff with its FailedScheduling events aggregated; other
//! errors (403, 422) are not retried within the call (429, 503 and 504 are retried below it,
//! by the HTTP layer); a pod deleted while its bind is in flight is
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
async fn transient_bind_errors_are_retried_within_the_binding_cycle() {
    bounded(60, "500s on bind, retried", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "2"));
        server.create("pods", pod("flaky", "1"));
        // Three transient answers (v1.37, kubernetes#138855): the fourth and last call of
        // the one Bind succeeds. 500s, as a 503 is retried by the HTTP layer already.
        server.fail_requests("POST", "/binding", 3, 500);
        let runner = Runner::start(options(&server, false, "solo"))
            .await
            .expect("start");
        let binds = server
            .wait_for_requests(4, Duration::from_secs(20), |r| {
                r.method == "POST" && r.path.ends_with("/binding")
            })
            .await
            .expect("four binding requests answered");
        assert_eq!(
            binds.iter().map(|r| r.status).collect::<Vec<_>>(),
            [500, 500, 500, 201].map(Some)
        );
        // client-go's DefaultBackoff between the calls: 10 ms, 50 ms, 250 ms (and up to a
        // tenth more); lower bounds only, a slow machine cannot make them fail.
        for (pair, least) in binds.windows(2).zip([10, 50, 250]) {
            let waited = pair[1].at.duration_since(pair[0].at);
            assert!(
                waited >= Duration::from_millis(least),
                "waited {waited:?}, want {least} ms"
            );
        }
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
        assert_eq!(node_of(&server, "flaky").as_deref(), Some("n1"));
        // One binding cycle: no failure reported, no status patch with SchedulerError.
        assert!(events_of(&server, "FailedScheduling", "flaky").is_empty());
        assert!(requests_to(&server, "PATCH", "/pods/flaky/status").is_empty());
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bind_failing_every_retry_fails_the_cycle_and_the_events_are_aggregated() {
    bounded(60, "500s on bind", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "2"));
        server.create("pods", pod("flaky", "1"));
        // Two binding cycles' worth of 500s (four calls each), then the API recovers.
        server.fail_requests("POST", "/binding", 8, 500);
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
            .wait_for_requests(9, Duration::from_secs(10), |r| {
                r.method == "POST" && r.path.ends_with("/binding")
            })
            .await
            .expect("nine binding requests answered");
        let mut want = vec![Some(500); 8];
        want.push(Some(201));
        assert_eq!(binds.iter().map(|r| r.status).collect::<Vec<_>>(), want);
        // Between the cycles the pod waited out its backoff (1 s in these tests' profile).
        assert!(binds[4].at.duration_since(binds[3].at) >= Duration::from_secs(1));
        assert!(binds[8].at.duration_since(binds[7].at) >= Duration::from_secs(1));
        // Two identical failures: one event created, turned into a series on the second.
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
async fn other_bind_errors_are_not_retried_within_the_cycle() {
    bounded(60, "403 and 422 on bind", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "2"));
        server.create("pods", pod("refused", "1"));
        // Neither is upstream's transient kind: each ends its binding cycle at once.
        server.fail_requests("POST", "/binding", 1, 403);
        server.fail_requests("POST", "/binding", 1, 422);
        let runner = Runner::start(options(&server, false, "solo"))
            .await
            .expect("start");
        let binds = server
            .wait_for_requests(3, Duration::from_secs(20), |r| {
                r.method == "POST" && r.path.ends_with("/binding")
            })
            .await
            .expect("three binding requests answered");
        assert_eq!(
            binds.iter().map(|r| r.status).collect::<Vec<_>>(),
            [403, 422, 201].map(Some)
        );
        // Each failure went back through the queue's backoff (1 s in these tests' profile).
        assert!(binds[1].at.duration_since(binds[0].at) >= Duration::from_secs(1));
        assert!(binds[2].at.duration_since(binds[1].at) >= Duration::from_secs(1));
        assert_eq!(node_of(&server, "refused").as_deref(), Some("n1"));
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
