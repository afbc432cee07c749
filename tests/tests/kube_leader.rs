//! Leader election end to end: only the leader schedules; a leader whose renewals fail
//! steps down and stops with an error; and with real processes, SIGTERM releases the lease
//! (the other candidate takes over at once) while a killed leader is replaced only once
//! its lease expires.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kubesched_live::{RunError, Runner};
use kubesched_tests::apiserver::TestApiServer;
use kubesched_tests::apiserver::fixtures::{
    assert_rbac_covers, bounded, http_get, lease_holder, node, node_of, options, options_for, pod,
};

const CHILD_KUBECONFIG: &str = "KUBESCHED_TEST_CHILD_KUBECONFIG";
const CHILD_IDENTITY: &str = "KUBESCHED_TEST_CHILD_IDENTITY";

/// Not a test on its own: the body of the scheduler processes the process test starts
/// (this test binary run again with the variables set). Exits 0 after a clean shutdown.
#[test]
fn child_scheduler_process() {
    let (Ok(kubeconfig), Ok(identity)) = (
        std::env::var(CHILD_KUBECONFIG),
        std::env::var(CHILD_IDENTITY),
    ) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let options = options_for(kubeconfig.into(), true, &identity);
    let result = runtime.block_on(kubesched_live::run(
        options,
        kubesched_live::shutdown_signal(),
    ));
    std::process::exit(match result {
        Ok(()) => 0,
        Err(RunError::LeaderLost) => 3,
        Err(_) => 4,
    });
}

fn spawn_child(kubeconfig: &std::path::Path, identity: &str) -> Child {
    Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "child_scheduler_process",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_KUBECONFIG, kubeconfig)
        .env(CHILD_IDENTITY, identity)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("starting a scheduler process")
}

fn sigterm(child: &Child) {
    let status = Command::new("sh")
        .args(["-c", &format!("kill -TERM {}", child.id())])
        .status()
        .expect("kill");
    assert!(status.success());
}

async fn wait_exit(child: &mut Child, within: Duration) -> Option<i32> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().expect("waiting for the child") {
            return status.code();
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_schedules_and_a_lost_lease_stops_it() {
    bounded(60, "in-process leader election", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "16"));
        let a = Runner::start(options(&server, true, "a")).await.expect("start a");
        assert!(server.wait_until(Duration::from_secs(10), |s| lease_holder(s) == "a").await);
        let b = Runner::start(options(&server, true, "b")).await.expect("start b");
        for i in 0..4 {
            server.create("pods", pod(&format!("p{i}"), "1"));
        }
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| (0..4).all(|i| node_of(s, &format!("p{i}")).is_some()))
                .await
        );
        assert!(a.is_leader());
        assert!(!b.is_leader());
        // The follower started after the leader and syncs on its own time (slowly on a
        // loaded machine); what matters is that it syncs while it does not lead.
        assert!(
            server.wait_until(Duration::from_secs(10), |_| b.synced()).await,
            "the follower keeps its caches warm"
        );
        assert!(!b.is_leader());
        let b_metrics = b.scheduler().metrics().encode();
        assert!(!b_metrics.contains("result=\"scheduled\""), "the follower scheduled:\n{b_metrics}");
        // Dashboards tell leader from follower by client-go's gauge, named as kube-scheduler
        // names its elector.
        for (runner, status) in [(&a, 1), (&b, 0)] {
            let (code, text) = http_get(runner.http_addr().expect("served"), "/metrics").await;
            assert_eq!(code, 200);
            let line = format!("leader_election_master_status{{name=\"kube-scheduler\"}} {status}");
            assert!(text.contains(&line), "{line} in:\n{text}");
        }
        // The attempt is counted once the bind has returned, just after the API saw it.
        let scheduled = "scheduler_schedule_attempts_total{result=\"scheduled\",profile=\"default-scheduler\"} 4";
        assert!(
            server.wait_until(Duration::from_secs(5), |_| a.scheduler().metrics().encode().contains(scheduled)).await,
            "{}",
            a.scheduler().metrics().encode()
        );

        // Renewals fail: the leader gives up within renewDeadline and stops with an error.
        server.fail_requests("PUT", "/leases/", 10_000, 500);
        let lost_at = Instant::now();
        let result = tokio::time::timeout(Duration::from_secs(10), a.wait()).await.expect("a stops");
        assert!(matches!(result, Err(RunError::LeaderLost)), "{result:?}");
        assert!(lost_at.elapsed() < Duration::from_secs(5));
        // Once the API server accepts writes again, the follower takes over.
        server.clear_faults();
        assert!(server.wait_until(Duration::from_secs(10), |s| lease_holder(s) == "b").await);
        server.create("pods", pod("after", "1"));
        assert!(server.wait_until(Duration::from_secs(20), |s| node_of(s, "after").is_some()).await);
        assert!(b.is_leader());
        b.stop();
        b.wait().await.expect("clean stop");
        assert_eq!(lease_holder(&server), "", "released on shutdown");
        assert_rbac_covers(&server);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_hand_over_on_sigterm_at_once_and_after_a_kill_on_expiry() {
    bounded(90, "scheduler processes", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "16"));
        let kubeconfig = server.write_kubeconfig();

        let mut a = spawn_child(&kubeconfig, "proc-a");
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| lease_holder(s) == "proc-a")
                .await,
            "a leads"
        );
        let mut b = spawn_child(&kubeconfig, "proc-b");
        server.create("pods", pod("p1", "1"));
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| node_of(s, "p1").is_some())
                .await
        );
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert_eq!(lease_holder(&server), "proc-a", "b waits while a renews");

        // SIGTERM: a stops cleanly and releases; b takes over well before the lease
        // duration (2 s) would have let it.
        sigterm(&a);
        assert_eq!(
            wait_exit(&mut a, Duration::from_secs(15)).await,
            Some(0),
            "a exits 0"
        );
        let exited = Instant::now();
        assert!(
            server
                .wait_until(Duration::from_secs(10), |s| lease_holder(s) == "proc-b")
                .await,
            "b leads"
        );
        assert!(
            exited.elapsed() < Duration::from_millis(1500),
            "took {:?}",
            exited.elapsed()
        );
        server.create("pods", pod("p2", "1"));
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| node_of(s, "p2").is_some())
                .await
        );

        // SIGKILL: nothing is released; c takes over only once b's lease has expired.
        b.kill().expect("kill b");
        let _ = b.wait();
        let mut c = spawn_child(&kubeconfig, "proc-c");
        let started = Instant::now();
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| lease_holder(s) == "proc-c")
                .await,
            "c leads"
        );
        assert!(
            started.elapsed() >= Duration::from_millis(1500),
            "took over after {:?}",
            started.elapsed()
        );
        server.create("pods", pod("p3", "1"));
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| node_of(s, "p3").is_some())
                .await
        );
        let lease = server
            .get("leases", "kube-system", "kubesched-test")
            .expect("lease");
        assert_eq!(lease["spec"]["leaseTransitions"], 2, "{lease}");

        sigterm(&c);
        assert_eq!(wait_exit(&mut c, Duration::from_secs(15)).await, Some(0));
        assert_eq!(lease_holder(&server), "");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_the_binding_in_flight_finish_then_releases() {
    bounded(60, "graceful shutdown", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "4"));
        server.create("pods", pod("slow", "1"));
        let gate = server.hold_requests("POST", "/binding");
        let runner = Runner::start(options(&server, true, "a"))
            .await
            .expect("start");
        assert!(
            gate.wait_held(1, Duration::from_secs(20)).await,
            "the bind is in flight"
        );
        runner.stop();
        // Pods arriving now are not taken any more.
        server.create("pods", pod("too-late", "1"));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            lease_holder(&server),
            "a",
            "the lease is kept while the bind runs"
        );
        server.clear_faults();
        gate.release();
        runner.wait().await.expect("clean stop");
        assert_eq!(
            node_of(&server, "slow").as_deref(),
            Some("n1"),
            "the bind in flight finished"
        );
        assert_eq!(node_of(&server, "too-late"), None);
        assert_eq!(lease_holder(&server), "", "released after the bindings");
    })
    .await;
}

fn lease_settings(name: &str, identity: &str) -> kubesched_live::lease::LeaseSettings {
    kubesched_live::lease::LeaseSettings {
        name: name.to_string(),
        namespace: "kube-system".to_string(),
        identity: identity.to_string(),
        lease_duration: Duration::from_secs(1),
        renew_deadline: Duration::from_millis(800),
        retry_period: Duration::from_millis(100),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn candidates_racing_for_a_lease_get_one_winner() {
    use kubesched_live::lease::LeaderElector;
    use kubesched_live::run::{build_client, client_config};
    bounded(60, "lease races", async {
        let server = TestApiServer::start().await;
        let config = client_config(Some(&server.write_kubeconfig())).await.expect("config");
        let client = build_client(config, 1000.0, 1000).expect("client");
        for round in 0..5 {
            let name = format!("race-{round}");
            // A free lease: both try to create it; the API server lets one.
            let mut x = LeaderElector::new(client.clone(), lease_settings(&name, "x"));
            let mut y = LeaderElector::new(client.clone(), lease_settings(&name, "y"));
            let (rx, ry) = tokio::join!(x.try_acquire_or_renew(), y.try_acquire_or_renew());
            assert!(rx ^ ry, "round {round}: exactly one winner ({rx}, {ry})");

            // An expired lease held by someone gone: both see it expire, both update it
            // from the same resourceVersion; the loser gets 409 Conflict.
            let stale = format!("stale-{round}");
            server.create(
                "leases",
                serde_json::json!({
                    "metadata": {"name": stale, "namespace": "kube-system"},
                    "spec": {"holderIdentity": "gone", "leaseDurationSeconds": 1, "leaseTransitions": 4},
                }),
            );
            let mut x = LeaderElector::new(client.clone(), lease_settings(&stale, "x"));
            let mut y = LeaderElector::new(client.clone(), lease_settings(&stale, "y"));
            assert!(!x.try_acquire_or_renew().await, "held and not yet expired for x");
            assert!(!y.try_acquire_or_renew().await, "held and not yet expired for y");
            tokio::time::sleep(Duration::from_millis(1100)).await;
            // Hold both updates until both candidates have read the same version.
            let gate = server.hold_requests("PUT", &format!("/leases/{stale}"));
            let open = async {
                assert!(gate.wait_held(2, Duration::from_secs(10)).await, "both update");
                server.clear_faults();
                gate.release();
            };
            let (rx, ry, ()) = tokio::join!(x.try_acquire_or_renew(), y.try_acquire_or_renew(), open);
            assert!(rx ^ ry, "round {round}: exactly one takes over ({rx}, {ry})");
            let lease = server.get("leases", "kube-system", &stale).expect("lease");
            assert_eq!(lease["spec"]["leaseTransitions"], 5);
            let winner = if rx { "x" } else { "y" };
            assert_eq!(lease["spec"]["holderIdentity"], winner);
            // The winner renews; the loser keeps out.
            let (w, l) = if rx { (&mut x, &mut y) } else { (&mut y, &mut x) };
            assert!(w.try_acquire_or_renew().await);
            assert!(!l.try_acquire_or_renew().await);
            assert!(w.release().await);
            assert!(l.try_acquire_or_renew().await, "a released lease is free at once");
        }
        let conflicts = server
            .requests()
            .iter()
            .filter(|r| r.path.contains("/leases") && r.status == Some(409))
            .count();
        assert!(conflicts >= 5, "{conflicts} conflicts");
    })
    .await;
}
