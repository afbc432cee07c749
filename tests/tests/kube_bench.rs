//! `kubesched bench --kubeconfig` against the test API server, scaled down to seconds:
//! the benchmark drives a real run of the cluster-mode scheduler through the API, reports
//! sane numbers, finds exactly one write request per scheduled pod besides its event (the
//! binding) on the happy path, and leaves nothing behind.

use std::path::Path;
use std::time::Duration;

use kubesched_kube_bench::{KubeBenchOptions, run_workload, to_markdown};
use kubesched_sim::Workload;
use kubesched_tests::apiserver::TestApiServer;
use kubesched_tests::apiserver::fixtures::bounded;

fn workload(file: &str) -> Workload {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../benchmarks")
        .join(file);
    Workload::from_file(&path).expect("benchmark workload")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduling_basic_through_the_api_server() {
    bounded(120, "kube bench", async {
        let server = TestApiServer::start().await;
        let mut options = KubeBenchOptions::new(server.write_kubeconfig());
        // 500 nodes, 500 initial and 1000 measured pods, scaled to 20, 20 and 40.
        options.scale = 0.04;
        options.timeout = Duration::from_secs(60);
        let r = run_workload(&workload("SchedulingBasic-500Nodes.yaml"), &options)
            .await
            .expect("the benchmark runs");
        eprintln!("{}", to_markdown(std::slice::from_ref(&r)));

        assert_eq!((r.nodes, r.initial_pods, r.measured_pods), (20, 20, 40));
        assert_eq!(server.bindings().len(), 60, "every pod was bound once");
        assert!(
            r.pods_per_second > 0.0 && r.pods_per_second.is_finite(),
            "{r:?}"
        );
        assert!(r.measured_seconds > 0.0, "{r:?}");
        assert!(
            r.latency_ms.p50 > 0.0 && r.latency_ms.p50 <= r.latency_ms.p99,
            "{r:?}"
        );
        assert!(r.synced_seconds > 0.0 && r.synced_seconds < 60.0, "{r:?}");
        let first_bind = r.first_bind_seconds.expect("initial pods were bound");
        assert!(first_bind >= r.synced_seconds, "{r:?}");
        if cfg!(target_os = "linux") {
            let cpu = r.scheduler_cpu_seconds.expect("thread CPU times on Linux");
            assert!(cpu > 0.0 && cpu < r.measured_seconds * 4.0, "{r:?}");
            assert!(r.cpu_seconds_per_10k_pods.is_some_and(|c| c > 0.0), "{r:?}");
        }

        // The happy path: one binding per pod and no other write but events.
        let binding = r
            .requests
            .iter()
            .find(|q| q.verb == "create" && q.resource == "pods/binding")
            .expect("bindings counted");
        assert_eq!(binding.requests, 40, "{:?}", r.requests);
        assert_eq!(r.writes_per_pod, 1.0, "{:?}", r.requests);
        assert!(
            !r.requests.iter().any(|q| q.resource == "pods/status"),
            "no status patch: {:?}",
            r.requests
        );
        assert!(
            !r.requests
                .iter()
                .any(|q| q.verb == "get" && q.resource == "pods"),
            "no GET per pod: {:?}",
            r.requests
        );

        // The same from the API server's side, for every client and the whole run (the
        // initial pods too): each pod changed once, by its binding; nothing patched,
        // updated or read back a pod one by one.
        let seen = server.requests();
        let count = |verb: &str, resource: &str| {
            seen.iter()
                .filter(|q| {
                    q.rbac
                        .as_ref()
                        .is_some_and(|(_, res, v)| v == verb && res == resource)
                })
                .count()
        };
        assert_eq!(count("create", "pods/binding"), 60, "one binding per pod");
        for (verb, resource) in [
            ("patch", "pods"),
            ("patch", "pods/status"),
            ("update", "pods"),
            ("update", "pods/status"),
            ("get", "pods"),
        ] {
            assert_eq!(count(verb, resource), 0, "{verb} {resource}");
        }

        // Nothing is left behind.
        assert!(server.list("pods").is_empty(), "pods left");
        assert!(server.list("nodes").is_empty(), "nodes left");
        let namespaces: Vec<String> = server
            .list("namespaces")
            .iter()
            .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        assert!(
            !namespaces.iter().any(|n| n.starts_with("namespace-")),
            "{namespaces:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unschedulable_initial_pods_settle_and_the_measured_ones_bind() {
    bounded(120, "kube bench, unschedulable", async {
        let server = TestApiServer::start().await;
        let mut options = KubeBenchOptions::new(server.write_kubeconfig());
        options.scale = 0.02;
        options.timeout = Duration::from_secs(60);
        let r = run_workload(&workload("Unschedulable-500Nodes.yaml"), &options)
            .await
            .expect("the benchmark runs");
        // The initial pods fit nowhere: nothing was bound before the measured pods came.
        assert_eq!(r.first_bind_seconds, None, "{r:?}");
        assert_eq!(r.measured_pods, 20);
        assert_eq!(server.bindings().len(), 20);
        assert!(server.list("pods").is_empty(), "pods left");
    })
    .await;
}
