//! Watch behaviour end to end: a dropped stream resumes from its resourceVersion without
//! losing or repeating a pod, a compacted version (410 Gone) makes the watcher list again
//! and the relist reconciles (a pod deleted meanwhile leaves no phantom usage), lists are
//! paginated, and bookmarks move the resume point.

use std::sync::atomic::Ordering;
use std::time::Duration;

use kubesched_live::Runner;
use kubesched_tests::apiserver::fixtures::{
    bounded, node, node_of, options, pod, requests_to, running_pod,
};
use kubesched_tests::apiserver::{RequestRecord, TestApiServer};

fn query_param(r: &RequestRecord, key: &str) -> Option<String> {
    r.query
        .split('&')
        .find_map(|p| p.strip_prefix(&format!("{key}=")).map(str::to_string))
}

fn pod_watches(server: &TestApiServer) -> Vec<RequestRecord> {
    requests_to(server, "GET", "/api/v1/pods")
        .into_iter()
        .filter(|r| r.query.contains("watch=true"))
        .collect()
}

fn pod_lists(server: &TestApiServer) -> Vec<RequestRecord> {
    requests_to(server, "GET", "/api/v1/pods")
        .into_iter()
        .filter(|r| !r.query.contains("watch=true"))
        .collect()
}

async fn all_bound(server: &TestApiServer, names: &[&str]) -> bool {
    server
        .wait_until(Duration::from_secs(20), |s| {
            names.iter().all(|n| node_of(s, n).is_some())
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_watch_resumes_without_loss_or_duplication() {
    bounded(60, "watch resumption", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "8"));
        for n in ["a1", "a2"] {
            server.create("pods", pod(n, "1"));
        }
        let runner = Runner::start(options(&server, false, "solo"))
            .await
            .expect("start");
        assert!(all_bound(&server, &["a1", "a2"]).await);

        for (round, abrupt) in [(1, true), (2, false)] {
            assert!(
                server
                    .wait_until(Duration::from_secs(10), |s| s.open_watches("pods") == 1)
                    .await
            );
            // Hold the re-watch so that changes happen while the scheduler is away.
            let gate = server.hold_requests("GET", "/api/v1/pods");
            assert_eq!(server.drop_watches("pods", abrupt), 1);
            let new = [format!("r{round}-1"), format!("r{round}-2")];
            for n in &new {
                server.create("pods", pod(n, "1"));
            }
            server.delete("pods", "default", if round == 1 { "a1" } else { "a2" });
            assert!(
                gate.wait_held(1, Duration::from_secs(10)).await,
                "the watcher comes back"
            );
            server.clear_faults();
            gate.release();
            let names: Vec<&str> = new.iter().map(String::as_str).collect();
            assert!(
                all_bound(&server, &names).await,
                "round {round}: new pods bound"
            );
        }
        // Exactly one bind per pod, one list in all: every return was a resumed watch.
        assert_eq!(requests_to(&server, "POST", "/binding").len(), 6);
        assert_eq!(pod_lists(&server).len(), 1);
        let watches = pod_watches(&server);
        assert_eq!(watches.len(), 3);
        for w in &watches {
            let rv: u64 = query_param(w, "resourceVersion")
                .and_then(|v| v.parse().ok())
                .expect("watch from a version");
            assert!(rv > 100, "{w:?}");
            assert_eq!(
                query_param(w, "allowWatchBookmarks").as_deref(),
                Some("true")
            );
            assert_eq!(
                query_param(w, "fieldSelector").as_deref(),
                Some("status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed")
            );
        }
        // The cache holds the four live pods, the deleted ones are gone.
        assert!(
            server
                .wait_until(Duration::from_secs(5), |_| runner
                    .scheduler()
                    .cache()
                    .pod_count()
                    == 4)
                .await
        );
        assert_eq!(
            runner
                .watch_stats()
                .deleted_on_relist
                .load(Ordering::Relaxed),
            0
        );
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gone_relists_and_reconciles_missed_deletions() {
    bounded(60, "410 relist", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "2"));
        server.create("pods", pod("first", "2"));
        let runner = Runner::start(options(&server, false, "solo"))
            .await
            .expect("start");
        assert!(all_bound(&server, &["first"]).await);
        assert!(
            server
                .wait_until(Duration::from_secs(10), |s| s.open_watches("pods") == 1)
                .await
        );

        // While the watch is down: the pod that fills the node is deleted and the history
        // compacted, so its deletion can only be learnt by listing again.
        let gate = server.hold_requests("GET", "/api/v1/pods");
        server.drop_watches("pods", true);
        server.delete("pods", "default", "first");
        server.create("pods", pod("second", "2"));
        server.compact();
        assert!(gate.wait_held(1, Duration::from_secs(10)).await);
        server.clear_faults();
        gate.release();

        // "second" needs the whole node: it binds only if "first" left the cache.
        assert!(
            all_bound(&server, &["second"]).await,
            "no phantom usage after the relist"
        );
        assert_eq!(pod_lists(&server).len(), 2, "listed again after 410");
        assert!(
            runner
                .watch_stats()
                .deleted_on_relist
                .load(Ordering::Relaxed)
                >= 1
        );
        assert!(
            server
                .wait_until(Duration::from_secs(5), |_| runner
                    .scheduler()
                    .cache()
                    .pod_count()
                    == 1)
                .await
        );
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_deleted_before_its_binding_was_seen_frees_its_node() {
    bounded(60, "deleted before the binding was seen", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "2"));
        server.create("pods", pod("first", "2"));
        let binding = server.hold_requests("POST", "/binding");
        let runner = Runner::start(options(&server, false, "solo"))
            .await
            .expect("start");
        assert!(
            binding.wait_held(1, Duration::from_secs(20)).await,
            "first is assumed and its bind in flight"
        );
        // The pod watch goes away before the binding lands, so the scheduler never sees
        // `first` bound: the last state it knows is the pending one.
        let rewatch = server.hold_requests("GET", "/api/v1/pods");
        assert_eq!(server.drop_watches("pods", true), 1);
        assert!(
            rewatch.wait_held(1, Duration::from_secs(10)).await,
            "the watcher comes back"
        );
        server.clear_faults();
        binding.release();
        assert!(
            server
                .wait_for_requests(1, Duration::from_secs(10), |r| r.method == "POST"
                    && r.path.ends_with("/pods/first/binding"))
                .await
                .is_some_and(|b| b[0].status == Some(201)),
            "first is bound"
        );
        // While the watch is away, first goes and second (which needs the whole node)
        // comes; the compaction forces a relist.
        server.delete("pods", "default", "first");
        server.create("pods", pod("second", "2"));
        server.compact();
        rewatch.release();
        assert!(
            all_bound(&server, &["second"]).await,
            "the node first was assumed on is free again"
        );
        assert_eq!(runner.scheduler().cache().pod_count(), 1);
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_are_paginated() {
    bounded(60, "paginated lists", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "4"));
        server.create("nodes", node("n2", "4"));
        for i in 0..5 {
            server.create("pods", running_pod(&format!("run-{i}"), "1", "n1"));
        }
        server.create("pods", pod("pending", "2"));
        let mut o = options(&server, false, "solo");
        o.tuning.watch_page_size = 2;
        let runner = Runner::start(o).await.expect("start");
        // n1 has 4 CPUs and runs 5 × 1 CPU (overcommitted): only n2 fits, which the
        // scheduler knows only if every page was read.
        assert!(all_bound(&server, &["pending"]).await);
        assert_eq!(node_of(&server, "pending").as_deref(), Some("n2"));
        let lists = pod_lists(&server);
        assert_eq!(lists.len(), 3, "{lists:?}");
        assert!(
            lists
                .iter()
                .all(|r| query_param(r, "limit").as_deref() == Some("2"))
        );
        assert_eq!(
            lists
                .iter()
                .filter(|r| query_param(r, "continue").is_some())
                .count(),
            2
        );
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookmarks_move_the_resume_point() {
    bounded(60, "bookmarks", async {
        let server = TestApiServer::start().await;
        server.set_bookmark_interval(Duration::from_millis(100));
        server.create("nodes", node("n1", "4"));
        server.create("pods", pod("p", "1"));
        let runner = Runner::start(options(&server, false, "solo"))
            .await
            .expect("start");
        assert!(all_bound(&server, &["p"]).await);
        assert!(
            server
                .wait_until(Duration::from_secs(10), |s| s.open_watches("pods") == 1)
                .await
        );
        // Changes to other kinds move the global version past the last pod event.
        for i in 0..3 {
            server.create("nodes", node(&format!("extra-{i}"), "1"));
        }
        let after = server.resource_version();
        tokio::time::sleep(Duration::from_millis(500)).await;
        server.drop_watches("pods", false);
        assert!(
            server
                .wait_until(Duration::from_secs(10), |s| pod_watches(s).len() == 2)
                .await
        );
        let resumed = pod_watches(&server).pop().expect("second watch");
        let rv: u64 = query_param(&resumed, "resourceVersion")
            .and_then(|v| v.parse().ok())
            .expect("version");
        assert!(rv >= after, "resumed from {rv}, bookmarks were at {after}");
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_pod_frees_its_node() {
    bounded(60, "finished pods", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "2"));
        server.create("pods", running_pod("job", "2", "n1"));
        server.create("pods", pod("waiting", "2"));
        let runner = Runner::start(options(&server, false, "solo"))
            .await
            .expect("start");
        assert!(
            server
                .wait_until(Duration::from_secs(10), |_| runner.synced())
                .await
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(node_of(&server, "waiting"), None, "the node is full");
        // The job finishes: it leaves the watch's selection, which the API server reports
        // as a deletion, and its resources are free.
        server.modify("pods", "default", "job", |p| {
            p["status"]["phase"] = serde_json::json!("Succeeded")
        });
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| node_of(s, "waiting").is_some())
                .await
        );
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_kinds_fill_the_object_store() {
    bounded(60, "object store", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "2"));
        server.create("namespaces", serde_json::json!({"metadata": {"name": "team-a", "labels": {"team": "a"}}}));
        server.create(
            "poddisruptionbudgets",
            serde_json::json!({"metadata": {"name": "pdb", "namespace": "default"}, "spec": {"minAvailable": 1}}),
        );
        server.create(
            "services",
            serde_json::json!({"metadata": {"name": "svc", "namespace": "default"}, "spec": {"selector": {"app": "x"}}}),
        );
        let runner = Runner::start(options(&server, false, "solo")).await.expect("start");
        let objects = runner.scheduler().handle().objects().clone();
        assert!(
            server
                .wait_until(Duration::from_secs(10), |_| objects.namespaces.len() == 1
                    && objects.pod_disruption_budgets.len() == 1
                    && objects.services.len() == 1)
                .await
        );
        assert_eq!(objects.namespace_labels("team-a").get("team").map(String::as_str), Some("a"));
        server.modify("namespaces", "", "team-a", |n| n["metadata"]["labels"]["team"] = serde_json::json!("b"));
        server.delete("services", "default", "svc");
        assert!(
            server
                .wait_until(Duration::from_secs(10), |_| objects.services.is_empty()
                    && objects.namespace_labels("team-a").get("team").map(String::as_str) == Some("b"))
                .await
        );
        // The volume plugins linked into this test binary need claims and attachments.
        server.create(
            "volumeattachments",
            serde_json::json!({"metadata": {"name": "va"}, "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "n1", "source": {"persistentVolumeName": "pv"}}}),
        );
        assert!(
            server
                .wait_until(Duration::from_secs(10), |_| objects.volume_attachments.len() == 1)
                .await
        );
        assert!(!requests_to(&server, "GET", "/api/v1/persistentvolumeclaims").is_empty());
        assert!(!requests_to(&server, "GET", "/apis/storage.k8s.io/v1/csistoragecapacities").is_empty());
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}
