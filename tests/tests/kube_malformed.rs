//! Malformed objects in a list or a watch stream are logged (with the object and the
//! field) and skipped, and a broken line in a watch stream is survived, while the other
//! pods keep being scheduled.

use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use kubesched_cluster::Runner;
use kubesched_tests::apiserver::TestApiServer;
use kubesched_tests::apiserver::fixtures::{bounded, node, node_of, options, pod, requests_to};
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
        assert!(
            log_line_with(&text, &["skipping malformed pod", "bad-quantity"]).is_some(),
            "no log for bad-quantity:\n{text}"
        );
        assert!(
            log_line_with(&text, &["watch error"]).is_some(),
            "no log for the broken line:\n{text}"
        );
        assert_eq!(runner.watch_stats().malformed.load(Ordering::Relaxed), 2);

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
