//! Leadership and connections under load: with upstream's default client settings (qps 50,
//! burst 100) and a backlog of pending pods whose bindings are slow, the leader keeps
//! renewing its Lease (it has its own client and rate limit) and the scheduler's TCP
//! connections to the API server stay bounded, also across a restart of the API server.

use std::sync::atomic::Ordering;
use std::time::Duration;

use kubesched_live::Runner;
use kubesched_live::run::{EVENTS_MAX_IN_FLIGHT, LEASE_MAX_IN_FLIGHT, MAX_IN_FLIGHT};
use kubesched_tests::apiserver::TestApiServer;
use kubesched_tests::apiserver::fixtures::{
    LEASE_NAME, LEASE_NAMESPACE, bounded, lease_holder, node, options, pod, requests_to,
};

/// Pending pods in the backlog (`KUBESCHED_LOAD_PODS` for a bigger run).
fn backlog() -> usize {
    std::env::var("KUBESCHED_LOAD_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600)
}

fn loaded_config() -> kubesched_config::LoadedConfig {
    let text = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 2
clientConnection:
  qps: 50
  burst: 100
leaderElection:
  leaderElect: true
  leaseDuration: 4s
  renewDeadline: 3s
  retryPeriod: 500ms
  resourceName: {LEASE_NAME}
  resourceNamespace: {LEASE_NAMESPACE}
"
    );
    kubesched_config::load_str(&text, "load.yaml").expect("valid configuration")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_renews_and_connections_stay_bounded_under_a_backlog() {
    bounded(240, "leadership under load", async {
        let server = TestApiServer::start().await;
        for i in 0..50 {
            server.create("nodes", node(&format!("n{i:02}"), "64"));
        }
        let pods = backlog();
        for i in 0..pods {
            server.create("pods", pod(&format!("p{i:04}"), "100m"));
        }
        // Slow bindings: without a bound, ~100 would wait at once.
        server.delay_at_random("POST", "/binding", 0.5, Duration::from_secs(2));
        let mut o = options(&server, true, "leader");
        o.config = loaded_config();
        let runner = Runner::start(o).await.expect("start");
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| lease_holder(s) == "leader")
                .await
        );
        let bound = |s: &TestApiServer| s.bindings().len();
        // Halfway through, the API server goes away for a second and comes back.
        assert!(
            server
                .wait_until(Duration::from_secs(120), |s| bound(s) >= pods / 2)
                .await,
            "half bound: {}",
            bound(&server)
        );
        server.restart(Duration::from_secs(1)).await;
        assert!(
            server
                .wait_until(Duration::from_secs(180), |s| bound(s) == pods)
                .await,
            "all bound: {}",
            bound(&server)
        );
        assert!(runner.is_leader(), "never lost the lease");

        // Renewals kept coming every retryPeriod or so, never a renewDeadline apart (the
        // restart's second aside, which the deadline also covers).
        let renewals: Vec<_> = requests_to(&server, "PUT", &format!("/leases/{LEASE_NAME}"))
            .into_iter()
            .filter(|r| r.status == Some(200))
            .map(|r| r.at)
            .collect();
        let longest = renewals
            .windows(2)
            .map(|w| w[1].duration_since(w[0]))
            .max()
            .unwrap_or_default();
        assert!(renewals.len() >= 10, "{} renewals", renewals.len());
        assert!(longest < Duration::from_secs(3), "longest gap between renewals {longest:?}");

        // Two watches (pods, nodes) stream on their own connections; everything else
        // shares the bounded pools: at most one connection per slot in use, plus one per
        // slot for the connect an HTTP/1.1 pool races against a connection coming free
        // (it is kept idle when it loses).
        let bound_connections = 2 + 2 * (MAX_IN_FLIGHT + EVENTS_MAX_IN_FLIGHT + LEASE_MAX_IN_FLIGHT);
        let peak = server.connections().peak.load(Ordering::SeqCst);
        let accepted = server.connections().accepted.load(Ordering::SeqCst);
        eprintln!(
            "{pods} pods bound; {} renewals, longest gap {longest:?}; peak {peak} connections ({accepted} accepted, bound {bound_connections})",
            renewals.len()
        );
        assert!(peak <= bound_connections, "peak {peak} > {bound_connections}");
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}

/// Over HTTPS, the API server offers HTTP/2 by ALPN (as kube-apiserver does) and each of the
/// scheduler's clients multiplexes its requests and watches on one connection, as
/// client-go's do: with slow bindings and a restart of the API server, the connections
/// stay at one per client (scheduling, events, lease).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_https_each_client_multiplexes_on_one_connection() {
    bounded(240, "HTTP/2 under load", async {
        let server = TestApiServer::start_tls().await;
        for i in 0..20 {
            server.create("nodes", node(&format!("n{i:02}"), "64"));
        }
        let pods = backlog() / 2;
        for i in 0..pods {
            server.create("pods", pod(&format!("p{i:04}"), "100m"));
        }
        server.delay_at_random("POST", "/binding", 0.5, Duration::from_secs(2));
        let mut o = options(&server, true, "leader");
        o.config = loaded_config();
        let runner = Runner::start(o).await.expect("start");
        let bound = |s: &TestApiServer| s.bindings().len();
        assert!(
            server
                .wait_until(Duration::from_secs(120), |s| bound(s) >= pods / 2)
                .await,
            "half bound: {}",
            bound(&server)
        );
        let before_restart = server.connections().peak.load(Ordering::SeqCst);
        server.restart(Duration::from_secs(1)).await;
        server.reset_peak_connections();
        assert!(
            server
                .wait_until(Duration::from_secs(180), |s| bound(s) == pods)
                .await,
            "all bound: {}",
            bound(&server)
        );
        assert!(runner.is_leader(), "never lost the lease");
        let after_restart = server.connections().peak.load(Ordering::SeqCst);
        let accepted = server.connections().accepted.load(Ordering::SeqCst);
        eprintln!(
            "{pods} pods bound over HTTPS; peak connections {before_restart} before the restart, \
             {after_restart} after ({accepted} accepted)"
        );
        assert!(
            before_restart <= 3,
            "peak {before_restart} connections before the restart"
        );
        assert!(
            after_restart <= 3,
            "peak {after_restart} connections after the restart"
        );
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}
