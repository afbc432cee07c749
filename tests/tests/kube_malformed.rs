//! Malformed objects in a list or a watch stream are logged (with the object and the
//! field) and skipped, and a broken or cut line in a watch stream makes the watcher list
//! again, so the event in it is not lost, while the other pods keep being scheduled. Objects that decode but have parts kubesched cannot compile
//! never leave the cache: a bound pod still counts on its node, and a pending pod is told
//! which field stops it.

use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use kubesched_live::Runner;
use kubesched_tests::apiserver::TestApiServer;
use kubesched_tests::apiserver::fixtures::{
    bounded, events_of, node, node_of, options, pod, requests_to, running_pod,
};
use serde_json::json;

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Captures this test binary's logs (warnings and above).
fn logs() -> Buffer {
    static LOGS: OnceLock<Buffer> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buf = Buffer::default();
        let writer = buf.clone();
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("warn"))
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .init();
        buf
    })
    .clone()
}

fn log_text(buf: &Buffer) -> String {
    String::from_utf8_lossy(&buf.0.lock().expect("log buffer")).into_owned()
}

fn log_line_with<'a>(text: &'a str, needles: &[&str]) -> Option<&'a str> {
    text.lines().find(|l| needles.iter().all(|n| l.contains(n)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_objects_are_logged_and_skipped() {
    let logs = logs();
    bounded(60, "malformed objects", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "8"));
        server.create("pods", pod("good-1", "1"));
        let mut broken = pod("broken-list", "1");
        broken["spec"]["containers"] = json!("not a list");
        server.create("pods", broken);
        server.create("pods", pod("bad-quantity", "lots"));
        let runner = Runner::start(options(&server, false, "solo"))
            .await
            .expect("start");
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| node_of(s, "good-1").is_some())
                .await
        );

        // In the watch stream: a malformed object, then a line that is not JSON at all.
        assert!(
            server
                .wait_until(Duration::from_secs(10), |s| s.open_watches("pods") == 1)
                .await
        );
        let mut broken = pod("broken-watch", "1");
        broken["spec"]["containers"][0]["ports"] = json!({"containerPort": "eighty"});
        server.create("pods", broken);
        server.inject_watch_line("pods", "{this is not json");
        server.create("pods", pod("good-2", "1"));
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| node_of(s, "good-2").is_some())
                .await
        );

        let text = log_text(&logs);
        let line = log_line_with(&text, &["skipping malformed object", "default/broken-list"])
            .unwrap_or_else(|| panic!("no log for broken-list:\n{text}"));
        assert!(line.contains("spec.containers"), "{line}");
        let line = log_line_with(
            &text,
            &["skipping malformed object", "default/broken-watch"],
        )
        .unwrap_or_else(|| panic!("no log for broken-watch:\n{text}"));
        assert!(line.contains("spec.containers[0].ports"), "{line}");
        // A quantity kubesched cannot read: the pod is refused with the field named.
        assert!(
            server
                .wait_until(Duration::from_secs(10), |s| !events_of(
                    s,
                    "FailedScheduling",
                    "bad-quantity"
                )
                .is_empty())
                .await
        );
        let note = events_of(&server, "FailedScheduling", "bad-quantity")[0]["note"].clone();
        assert!(
            note.as_str()
                .unwrap_or("")
                .contains("spec.containers[0].resources[cpu]"),
            "{note}"
        );
        assert!(
            log_line_with(&text, &["watch error"]).is_some(),
            "no log for the broken line:\n{text}"
        );
        // broken-list in the first list, broken-watch in the stream, then both again in
        // the list the broken line made the watcher take.
        assert_eq!(runner.watch_stats().malformed.load(Ordering::Relaxed), 4);
        assert_eq!(runner.watch_stats().undecodable.load(Ordering::Relaxed), 1);

        // The broken pods were never tried.
        for name in ["broken-list", "broken-watch", "bad-quantity"] {
            assert_eq!(node_of(&server, name), None);
            assert!(requests_to(&server, "POST", &format!("/pods/{name}/binding")).is_empty());
        }
        assert_eq!(requests_to(&server, "POST", "/binding").len(), 2);
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_watch_event_is_not_lost() {
    bounded(60, "a cut watch event", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "8"));
        let runner = Runner::start(options(&server, false, "solo"))
            .await
            .expect("start");
        assert!(
            server
                .wait_until(Duration::from_secs(10), |s| runner.synced()
                    && s.open_watches("pods") == 1)
                .await
        );
        let lists_before = runner.watch_stats().lists.load(Ordering::Relaxed);
        // The ADDED event of this pod reaches the scheduler cut in half: only listing
        // again can tell it the pod exists.
        server.cut_next_watch_event("pods");
        server.create("pods", pod("torn", "1"));
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| node_of(s, "torn").is_some())
                .await,
            "the pod of the cut event is scheduled"
        );
        assert_eq!(runner.watch_stats().undecodable.load(Ordering::Relaxed), 1);
        assert!(
            runner.watch_stats().lists.load(Ordering::Relaxed) > lists_before,
            "listed again"
        );
        // The watch goes on afterwards: a later pod arrives by the stream.
        server.create("pods", pod("after", "1"));
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| node_of(s, "after").is_some())
                .await
        );
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}

/// The PodScheduled condition of a pod, as the API server holds it.
fn pod_scheduled(server: &TestApiServer, name: &str) -> Option<serde_json::Value> {
    server.get("pods", "default", name).and_then(|p| {
        p.pointer("/status/conditions")
            .and_then(|c| c.as_array())
            .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled").cloned())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_with_parts_that_do_not_compile_stay_in_the_cache() {
    bounded(60, "lenient compilation", async {
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "2"));
        server.create("nodes", node("n2", "2"));
        // Bound, with a node affinity the API accepts but that no integer reads: it must
        // still fill n1.
        let mut full = running_pod("full", "2", "n1");
        full["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["five"]}]}]
        }}});
        server.create("pods", full);
        let runner = Runner::start(options(&server, false, "solo"))
            .await
            .expect("start");
        server.create("pods", pod("next", "2"));
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| node_of(s, "next").is_some())
                .await
        );
        assert_eq!(node_of(&server, "next").as_deref(), Some("n2"), "n1 is full");

        // Pending with a preferred term that does not compile: refused, the field named.
        let mut preferred = pod("preferred", "100m");
        preferred["spec"]["affinity"] = json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "preference": {"matchExpressions": [{"key": "gen", "operator": "Lt", "values": ["?"]}]}}
        ]}});
        server.create("pods", preferred);
        // Pending with a required term that does not compile: it matches no node, as upstream.
        let mut required = pod("required", "100m");
        required["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["x"]}]}]
        }}});
        server.create("pods", required);
        // Pending with an anti-affinity selector that does not compile.
        let mut anti = pod("anti", "100m");
        anti["spec"]["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": []}]},
        }]}});
        server.create("pods", anti);
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| {
                    // Events go through their own client, after the condition: wait for both.
                    ["preferred", "required", "anti"].iter().all(|p| {
                        pod_scheduled(s, p).is_some() && !events_of(s, "FailedScheduling", p).is_empty()
                    })
                })
                .await,
            "every pending pod gets its condition and its FailedScheduling event"
        );
        let expect = [
            (
                "preferred",
                "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0]",
            ),
            ("required", "node(s) didn't match Pod's node affinity/selector"),
            (
                "anti",
                "parsing pod: spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0]",
            ),
        ];
        for (name, words) in expect {
            let cond = pod_scheduled(&server, name).expect("condition");
            assert_eq!(cond["status"], "False", "{name}: {cond}");
            assert_eq!(cond["reason"], "Unschedulable", "{name}: {cond}");
            let message = cond["message"].as_str().unwrap_or("");
            assert!(message.starts_with("0/2 nodes are available: "), "{name}: {message}");
            assert!(message.contains(words), "{name}: {message}");
            let events = events_of(&server, "FailedScheduling", name);
            assert!(!events.is_empty(), "{name}: no FailedScheduling event");
            assert!(events[0]["note"].as_str().unwrap_or("").contains(words), "{name}: {}", events[0]);
            assert_eq!(node_of(&server, name), None);
        }
        // The cache still holds the bound pod: n1 shows its 2 CPUs in use.
        let dump = runner.scheduler().cache().dump();
        let n1 = dump.nodes.iter().find(|n| n.name == "n1").expect("n1 in the cache");
        assert_eq!(n1.pods, ["default/full"]);
        assert_eq!(n1.requested.milli_cpu, 2000);
        runner.stop();
        runner.wait().await.expect("clean stop");
    })
    .await;
}
