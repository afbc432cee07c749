//! End to end through kube-rs against the test API server: pods are bound, events and
//! status conditions written, the HTTP endpoints answer, and every request made is one
//! the RBAC table grants.

use std::time::Duration;

use kubesched_live::Runner;
use kubesched_tests::apiserver::TestApiServer;
use kubesched_tests::apiserver::fixtures::{
    assert_rbac_covers, bounded, events_of, http_get, node, node_of, options, pod, requests_to,
};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_are_bound_events_written_and_endpoints_answer() {
    bounded(60, "scheduling through the test API server", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "2"));
        server.create("nodes", node("n2", "2"));
        server.create("pods", pod("small-1", "1"));
        server.create("pods", pod("small-2", "1"));
        server.create("pods", pod("huge", "8"));
        let mut other = pod("not-ours", "1");
        other["spec"]["schedulerName"] = json!("another-scheduler");
        server.create("pods", other);

        let runner = Runner::start(options(&server, false, "solo")).await.expect("start");
        let addr = runner.http_addr().expect("http endpoints");
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| node_of(s, "small-1").is_some()
                    && node_of(s, "small-2").is_some())
                .await,
            "both small pods are bound"
        );
        // Pods arriving after the start are scheduled too.
        server.create("pods", pod("late", "1"));
        assert!(server.wait_until(Duration::from_secs(20), |s| node_of(s, "late").is_some()).await);

        // The unschedulable pod gets a FailedScheduling event and a PodScheduled=False condition.
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| !events_of(s, "FailedScheduling", "huge").is_empty()
                    && s.get("pods", "default", "huge").is_some_and(|p| p["status"]["conditions"].is_array()))
                .await,
            "huge: event and condition"
        );
        let failed = &events_of(&server, "FailedScheduling", "huge")[0];
        assert_eq!(failed["type"], "Warning");
        assert_eq!(failed["action"], "Scheduling");
        assert_eq!(failed["reportingController"], "default-scheduler");
        let note = failed["note"].as_str().unwrap_or("");
        // v1.34's wording: one period at the end, after the PostFilter part. A request
        // larger than a node's allocatable is unresolvable there, so preemption cannot help.
        assert_eq!(
            note,
            "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        );
        assert_eq!(failed["regarding"]["kind"], "Pod");
        assert_eq!(failed["metadata"]["namespace"], "default");
        let huge = server.get("pods", "default", "huge").expect("huge");
        let cond = &huge["status"]["conditions"][0];
        assert_eq!(cond["type"], "PodScheduled");
        assert_eq!(cond["status"], "False");
        assert_eq!(cond["reason"], "Unschedulable");
        assert_eq!(cond["message"], failed["note"]);
        assert!(cond["lastTransitionTime"].is_string());

        // Scheduled events name the node; the binding set the PodScheduled condition.
        // Events are written in the background, each pod's after its binding.
        assert!(
            server
                .wait_until(Duration::from_secs(10), |s| ["small-1", "small-2", "late"]
                    .iter()
                    .all(|p| !events_of(s, "Scheduled", p).is_empty()))
                .await
        );
        for name in ["small-1", "small-2", "late"] {
            let ev = events_of(&server, "Scheduled", name);
            assert_eq!(ev.len(), 1, "{name}: one Scheduled event");
            let node = node_of(&server, name).expect("bound");
            assert_eq!(ev[0]["note"], format!("Successfully assigned default/{name} to {node}"));
            assert_eq!(ev[0]["type"], "Normal");
            assert_eq!(ev[0]["action"], "Binding");
            assert!(ev[0]["regarding"]["uid"].is_string());
        }
        // One bind per pod, none for the other scheduler's pod.
        assert_eq!(requests_to(&server, "POST", "/binding").len(), 3);
        assert_eq!(node_of(&server, "not-ours"), None);
        assert!(events_of(&server, "FailedScheduling", "not-ours").is_empty());

        // Endpoints.
        assert_eq!(http_get(addr, "/healthz").await, (200, "ok".to_string()));
        assert_eq!(http_get(addr, "/livez").await, (200, "ok".to_string()));
        assert_eq!(http_get(addr, "/readyz").await, (200, "ok".to_string()));
        // A binding shows in the API before the scheduler has its answer and counts it.
        let scheduled = "scheduler_schedule_attempts_total{result=\"scheduled\",profile=\"default-scheduler\"} 3";
        assert!(
            server
                .wait_until(Duration::from_secs(10), |_| runner.scheduler().metrics().encode().contains(scheduled))
                .await
        );
        let (code, metrics) = http_get(addr, "/metrics").await;
        assert_eq!(code, 200);
        for name in [
            "scheduler_schedule_attempts_total{",
            "scheduler_scheduling_attempt_duration_seconds_bucket{",
            "scheduler_pending_pods{",
            "scheduler_framework_extension_point_duration_seconds_bucket{",
            "scheduler_preemption_attempts_total",
            "\nscheduler_pod_scheduled_after_flush_total 0\n",
            "scheduler_queue_incoming_pods_total{",
            // What every component serves and dashboards key on: client-go's client
            // families and the process collector.
            "rest_client_requests_total{code=\"201\",",
            "rest_client_request_duration_seconds_bucket{host=\"127.0.0.1:",
            "rest_client_rate_limiter_duration_seconds_count{",
            "\nprocess_cpu_seconds_total ",
            "\nprocess_resident_memory_bytes ",
            "\nprocess_start_time_seconds ",
            "\nprocess_open_fds ",
            // VolumeBinding's own families, described before anything counts into them.
            "# TYPE scheduler_volume_scheduling_stage_error_total counter\n",
            "# TYPE scheduler_volume_binder_cache_requests_total counter\n",
        ] {
            assert!(metrics.contains(name), "metrics lack {name}:\n{metrics}");
        }
        assert!(metrics.contains(scheduled), "{metrics}");
        // (scheduler_plugin_execution_duration_seconds is sampled in 10 % of the cycles, as
        // upstream, so a handful of attempts may not show it.)
        assert!(!metrics.contains("# EOF"));
        // Without leader election there is no elector to report on, as upstream.
        assert!(!metrics.contains("leader_election_master_status"), "{metrics}");
        let (code, configz) = http_get(addr, "/configz").await;
        assert_eq!(code, 200);
        let configz: Value = serde_json::from_str(&configz).expect("configz is JSON");
        assert_eq!(configz["componentconfig"]["profiles"][0]["schedulerName"], "default-scheduler");
        assert_eq!(configz["componentconfig"]["podMaxBackoffSeconds"], 1);
        // The effective feature gates: v1.37's defaults (these two as in v1.34).
        assert_eq!(configz["featureGates"]["SchedulerAsyncPreemption"], true);
        assert_eq!(configz["featureGates"]["SchedulerAsyncAPICalls"], false);

        runner.stop();
        runner.wait().await.expect("clean stop");

        // Every request the scheduler made is granted by the RBAC table.
        assert_rbac_covers(&server);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_waits_for_the_first_lists() {
    bounded(30, "readiness", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "2"));
        // Hold the node list: the scheduler is not ready until it has listed nodes.
        let gate = server.hold_requests("GET", "/api/v1/nodes");
        let runner = Runner::start(options(&server, false, "solo"))
            .await
            .expect("start");
        let addr = runner.http_addr().expect("http");
        assert!(gate.wait_held(1, Duration::from_secs(10)).await);
        let (code, body) = http_get(addr, "/readyz").await;
        assert_eq!(code, 500);
        assert!(body.contains("Node"), "{body}");
        server.clear_faults();
        gate.release();
        assert!(
            server
                .wait_until(Duration::from_secs(10), |_| runner.synced())
                .await
        );
        assert_eq!(http_get(addr, "/readyz").await.0, 200);
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_keep_to_qps_and_burst() {
    bounded(60, "client rate limit", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "4"));
        for i in 0..18 {
            server.create("pods", pod(&format!("p{i}"), "100m"));
        }
        let mut o = options(&server, false, "solo");
        o.config.config.client_connection.qps = 10.0;
        o.config.config.client_connection.burst = 2;
        let runner = Runner::start(o).await.expect("start");
        assert!(
            server
                .wait_until(Duration::from_secs(30), |s| (0..18).all(|i| node_of(
                    s,
                    &format!("p{i}")
                )
                .is_some()))
                .await
        );
        // Events have a client (and a bucket) of their own, as upstream's; the rest
        // shares the scheduling client's. Each client's first request is a `/version`
        // (which one is the scheduling client's is not known: all are left out).
        let reqs: Vec<_> = server
            .requests()
            .into_iter()
            .filter(|r| !r.path.contains("/events.k8s.io/") && r.path != "/version")
            .collect();
        assert!(reqs.len() >= 20, "{}", reqs.len());
        // After a burst of 2, at most 10 per second: 20 requests take at least 1.7 s.
        let span = reqs[19].at.duration_since(reqs[0].at);
        assert!(
            span >= Duration::from_millis(1700),
            "20 requests in {span:?}"
        );
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_evicts_through_the_api() {
    bounded(60, "preemption", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "2"));
        let mut low = kubesched_tests::apiserver::fixtures::running_pod("low", "2", "n1");
        low["spec"]["priority"] = json!(0);
        low["spec"]["terminationGracePeriodSeconds"] = json!(2);
        let low = server.create("pods", low);
        let low_uid = low["metadata"]["uid"].as_str().expect("uid").to_string();
        let mut high = pod("high", "2");
        high["spec"]["priority"] = json!(1000);
        let high = server.create("pods", high);
        let high_uid = high["metadata"]["uid"].as_str().expect("uid").to_string();
        let runner = Runner::start(options(&server, false, "solo"))
            .await
            .expect("start");
        // The victim terminates for its grace period; the preemptor waits for it.
        assert!(
            server
                .wait_until(Duration::from_secs(30), |s| s
                    .get("pods", "default", "low")
                    .is_some_and(|p| p["metadata"]["deletionTimestamp"].is_string()))
                .await,
            "the victim is terminating"
        );
        assert_eq!(
            node_of(&server, "high"),
            None,
            "not bound while the victim terminates"
        );
        assert!(
            server
                .wait_until(Duration::from_secs(30), |s| node_of(s, "high").as_deref()
                    == Some("n1"))
                .await,
            "the preemptor ends up on the node"
        );
        let bindings = server.bindings();
        assert_eq!(bindings.len(), 1);
        assert!(!bindings[0].overcommitted(), "{:?}", bindings[0]);
        assert!(
            server.get("pods", "default", "low").is_none(),
            "the victim was deleted"
        );
        let deletes = requests_to(&server, "DELETE", "/pods/low");
        assert_eq!(deletes.len(), 1);
        assert!(
            !requests_to(&server, "PATCH", "/pods/low/status").is_empty(),
            "DisruptionTarget set first"
        );
        assert!(
            server
                .wait_until(Duration::from_secs(10), |s| events_of(
                    s,
                    "Preempted",
                    "low"
                )
                .len()
                    == 1)
                .await
        );
        let ev = &events_of(&server, "Preempted", "low")[0];
        assert_eq!(
            ev["note"],
            format!("Preempted by pod {high_uid} on node n1")
        );
        assert_eq!(ev["regarding"]["uid"], low_uid);
        // The preemptor was nominated to the node while the victim went away.
        let nominated = server
            .requests()
            .iter()
            .filter(|r| r.method == "PATCH" && r.path.ends_with("/pods/high/status"))
            .count();
        assert!(nominated >= 1, "nominatedNodeName patched");
        // Bound now, and the API server cleared the nomination when it bound the pod
        // (kube-apiserver v1.35+, ClearingNominatedNodeNameAfterBinding).
        let high = server.get("pods", "default", "high").expect("high");
        assert_eq!(high["spec"]["nodeName"], "n1", "{high}");
        assert!(high["status"]["nominatedNodeName"].is_null(), "{high}");
        assert_rbac_covers(&server);
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}
