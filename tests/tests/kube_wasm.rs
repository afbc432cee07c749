//! WebAssembly plugins in cluster mode (`kubesched run`'s code against the test API server;
//! `--features plugin-wasm`, see tests/Cargo.toml): upstream kube-scheduler-wasm-extension's
//! NodeNumber guest binds pod-N to node-N, the WAT Filter of examples/wasm keeps pods off
//! node-10, a guest's `eventf` becomes an Event in the API server, and PostFilter guests
//! write the pod's `status.nominatedNodeName` as their nominating mode says (Override with a
//! node sets it, Override without one clears it, Noop leaves it). NodeNumber is read from
//! `../shared/wasm-guests/` (third-party, never copied here); without it the test says so and
//! checks the rest.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kubesched_live::Runner;
use kubesched_tests::apiserver::TestApiServer;
use kubesched_tests::apiserver::fixtures::{
    assert_rbac_covers, bounded, events, events_of, node, node_of, options, pod,
};
use serde_json::{Value, json};

// The opt-in plugin host, linked into this test binary only.
use kubesched_plugin_wasm as _;

/// Upstream's NodeNumber example guest, when `../shared/wasm-guests/` is there (the note
/// that it is not goes to the test's output).
#[allow(clippy::print_stderr)]
fn node_number_guest() -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/wasm-guests/examples/nodenumber/main.wasm");
    if path.is_file() {
        Some(path)
    } else {
        eprintln!(
            "skipped NodeNumber: third-party guest {} is absent (kube-scheduler-wasm-extension's guests go in ../shared/wasm-guests/); the WAT guests are still checked",
            path.display()
        );
        None
    }
}

/// WebAssembly text with `text` as a data segment at 0, each byte escaped.
fn wat_bytes(text: &str) -> String {
    text.bytes().map(|b| format!("\\{b:02x}")).collect()
}

/// A PreFilter-only guest that records one Normal event about pod-1 each cycle through
/// `handle.eventrecorder.eventf`, in the JSON upstream's guest SDK sends.
fn eventer_guest() -> String {
    let event = json!({
        "RegardingReference": {"Kind": "Pod", "APIVersion": "v1", "Name": "pod-1",
                               "Namespace": "default"},
        "RelatedReference": {},
        "Eventtype": "Normal",
        "Reason": "WasmSeen",
        "Action": "PreFilter",
        "Note": "seen by the guest"
    })
    .to_string();
    format!(
        r#"(module
  (import "k8s.io/scheduler" "handle.eventrecorder.eventf" (func $eventf (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "{data}")
  (func (export "prefilter") (result i32)
    (call $eventf (i32.const 0) (i32.const {len}))
    (i32.const 0)))"#,
        data = wat_bytes(&event),
        len = event.len()
    )
}

/// A guest whose Filter rejects every node and whose PostFilter returns `name` as the
/// nominated node in `mode` (0 Noop, 1 Override), with Unschedulable.
fn nominator_guest(mode: u64, name: &str) -> String {
    format!(
        r#"(module
  (import "k8s.io/scheduler" "result.status_reason" (func $reason (param i32 i32)))
  (import "k8s.io/scheduler" "result.nominated_node_name" (func $nominated (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "held by the guest")
  (data (i32.const 32) "{name}")
  (func (export "filter") (result i32)
    (call $reason (i32.const 0) (i32.const 17))
    (i32.const 2))
  (func (export "postfilter") (result i64)
    (call $nominated (i32.const 32) (i32.const {len}))
    (i64.const {result})))"#,
        len = name.len(),
        result = (mode << 32) | 2,
    )
}

/// The nominating profiles: (scheduler name, plugin name, guest file, mode, node). They
/// leave DefaultPreemption out, whose failed preemption would clear the nomination itself.
const NOMINATORS: [(&str, &str, &str, u64, &str); 3] = [
    ("wasm-nominator", "Nominator", "nominator.wat", 1, "node-2"),
    ("wasm-clearer", "Clearer", "clearer.wat", 1, ""),
    ("wasm-noop", "Noop", "noop.wat", 0, "node-4"),
];

fn config(node_number: Option<&Path>, dir: &Path) -> String {
    let no_zero = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/wasm/no-zero-nodes.wat");
    let (nn_enabled, nn_config) = match node_number {
        Some(path) => (
            "\n      - name: NodeNumber\n        weight: 10",
            format!(
                "\n  - name: NodeNumber\n    args:\n      guestURL: {}",
                path.display()
            ),
        ),
        None => ("", String::new()),
    };
    format!(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
leaderElection:
  leaderElect: false
clientConnection:
  qps: 500
  burst: 500
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:{nn_enabled}
      - name: NoZeroNodes
      - name: WasmEvents
  pluginConfig:{nn_config}
  - name: NoZeroNodes
    args:
      guestURL: {no_zero}
  - name: WasmEvents
    args:
      guestURL: {events}
{nominators}",
        no_zero = no_zero.display(),
        events = dir.join("events.wat").display(),
        nominators = NOMINATORS
            .iter()
            .map(|(scheduler, plugin, file, _, _)| format!(
                "- schedulerName: {scheduler}
  plugins:
    multiPoint:
      enabled:
      - name: {plugin}
    postFilter:
      disabled:
      - name: DefaultPreemption
  pluginConfig:
  - name: {plugin}
    args:
      guestURL: {}
",
                dir.join(file).display()
            ))
            .collect::<String>(),
    )
}

fn nominated(server: &TestApiServer, name: &str) -> Option<String> {
    server.get("pods", "default", name).and_then(|p| {
        p.pointer("/status/nominatedNodeName")
            .and_then(Value::as_str)
            .map(str::to_string)
    })
}

/// The pod's PodScheduled condition is False (its failed attempt's status is written).
fn unschedulable(server: &TestApiServer, name: &str) -> bool {
    server
        .get("pods", "default", name)
        .and_then(|p| p.pointer("/status/conditions").cloned())
        .and_then(|c| c.as_array().cloned())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "PodScheduled" && c["status"] == "False")
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wasm_guests_schedule_record_events_and_nominate_in_cluster_mode() {
    bounded(90, "wasm guests against the test API server", async {
        let dir = std::env::temp_dir().join(format!("kubesched-kube-wasm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temporary folder");
        std::fs::write(dir.join("events.wat"), eventer_guest()).expect("events guest");
        for (_, _, file, mode, name) in NOMINATORS {
            std::fs::write(dir.join(file), nominator_guest(mode, name)).expect("a guest file");
        }
        let node_number = node_number_guest();

        let server = TestApiServer::start().await;
        for n in ["node-1", "node-2", "node-3", "node-4", "node-10"] {
            server.create("nodes", node(n, "4"));
        }
        let pods = ["pod-3", "pod-1", "pod-4", "pod-2", "pod-0"];
        for p in pods {
            server.create("pods", pod(p, "100m"));
        }
        // held-1 has no nomination yet; held-2 and held-3 were nominated to node-3 before.
        for (name, scheduler, before) in [
            ("held-1", "wasm-nominator", None),
            ("held-2", "wasm-clearer", Some("node-3")),
            ("held-3", "wasm-noop", Some("node-3")),
        ] {
            let mut held = pod(name, "100m");
            held["spec"]["schedulerName"] = json!(scheduler);
            if let Some(node) = before {
                held["status"]["nominatedNodeName"] = json!(node);
            }
            server.create("pods", held);
        }

        let text = config(node_number.as_deref(), &dir);
        let loaded = kubesched_config::load_str(&text, "kube-wasm.yaml").expect("valid config");
        let mut opts = options(&server, false, "kube-wasm");
        opts.config = loaded;
        let runner = Runner::start(opts).await.expect("start");

        assert!(
            server
                .wait_until(Duration::from_secs(30), |s| pods
                    .iter()
                    .all(|p| node_of(s, p).is_some()))
                .await,
            "every pod of the default profile is bound: {:?}",
            pods.iter()
                .map(|p| (p, node_of(&server, p)))
                .collect::<Vec<_>>()
        );
        // NoZeroNodes (the WAT Filter) rejects node-10 for every pod.
        assert_ne!(node_of(&server, "pod-0").as_deref(), Some("node-10"));
        if node_number.is_some() {
            // NodeNumber scores node-N 10 (times weight 10) for pod-N.
            for n in 1..=4 {
                assert_eq!(
                    node_of(&server, &format!("pod-{n}")),
                    Some(format!("node-{n}")),
                    "pod-{n}"
                );
            }
        }

        // The PreFilter guest's eventf: a Normal event about pod-1, through the events API.
        assert!(
            server
                .wait_until(Duration::from_secs(10), |s| !events(s, "WasmSeen")
                    .is_empty())
                .await,
            "the guest's event is recorded"
        );
        let seen = events_of(&server, "WasmSeen", "pod-1");
        let e = seen.first().expect("an event about pod-1");
        assert_eq!(e["type"], "Normal", "{e}");
        assert_eq!(e["action"], "PreFilter", "{e}");
        assert_eq!(e["note"], "seen by the guest", "{e}");
        assert_eq!(e["regarding"]["kind"], "Pod", "{e}");

        // The nominating guest: rejected everywhere, nominated to node-2 (Override).
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| nominated(s, "held-1")
                    .as_deref()
                    == Some("node-2"))
                .await,
            "held-1 is nominated to node-2: {:?}",
            server.get("pods", "default", "held-1")
        );
        assert_eq!(node_of(&server, "held-1"), None);
        let failed = events_of(&server, "FailedScheduling", "held-1");
        assert!(
            failed.iter().any(|e| e["note"]
                .as_str()
                .is_some_and(|n| n.contains("held by the guest"))),
            "{failed:?}"
        );

        // Override without a name clears the nomination.
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| nominated(s, "held-2")
                    .is_none())
                .await,
            "held-2's nomination is cleared: {:?}",
            server.get("pods", "default", "held-2")
        );
        // Noop leaves it, whatever name the guest set: once the attempt's status is
        // written (PodScheduled False), the nomination is still node-3.
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| unschedulable(s, "held-3"))
                .await,
            "held-3 is marked unschedulable: {:?}",
            server.get("pods", "default", "held-3")
        );
        assert_eq!(nominated(&server, "held-3").as_deref(), Some("node-3"));

        runner.stop_handle().stop();
        runner.wait().await.expect("clean stop");
        assert_rbac_covers(&server);
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await;
}
