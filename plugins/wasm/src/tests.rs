//! The crate's own guests, written in WebAssembly text, one per point and per failure; and
//! the third-party guests of kube-scheduler-wasm-extension (when `../shared/wasm-guests/`
//! is there) with the outcomes upstream's host tests expect.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kubesched_framework::events::{ActionType, EventResource};
use kubesched_framework::model::{ImageStateSummary, NodeInfo, PodInfo};
use kubesched_framework::{
    Code, CycleState, EnqueueExtensions, Handle, HandleControl, Plugin, PostFilterResult, Snapshot,
    Status,
};
use kubesched_testing::{NodeBuilder, PodBuilder, node_info};

use super::*;

/// A plugin over nodes installed in its handle's snapshot.
struct Rig {
    control: HandleControl,
    plugin: WasmPlugin,
    nodes: Vec<Arc<NodeInfo>>,
}

fn args(url: &str) -> WasmArgs {
    WasmArgs {
        guest_url: url.into(),
        ..WasmArgs::default()
    }
}

fn control() -> HandleControl {
    Handle::builder().build_with_control()
}

fn nodes(names: &[&str]) -> Vec<Arc<NodeInfo>> {
    names
        .iter()
        .map(|n| node_info(NodeBuilder::new(n), &[]))
        .collect()
}

impl Rig {
    fn wat(text: &str, nodes: Vec<Arc<NodeInfo>>) -> Self {
        Self::wat_with(text, WasmArgs::default(), nodes)
    }

    fn wat_with(text: &str, args: WasmArgs, nodes: Vec<Arc<NodeInfo>>) -> Self {
        let control = control();
        control.set_snapshot(Arc::new(Snapshot::new(nodes.clone())));
        let plugin = WasmPlugin::from_bytes("Guest", &args, text.as_bytes(), control.handle())
            .expect("guest loads");
        Self {
            control,
            plugin,
            nodes,
        }
    }

    fn file(name: &str, args: WasmArgs, nodes: Vec<Arc<NodeInfo>>) -> Result<Self, LoadError> {
        let control = control();
        control.set_snapshot(Arc::new(Snapshot::new(nodes.clone())));
        let plugin = WasmPlugin::new(name, &args, control.handle())?;
        Ok(Self {
            control,
            plugin,
            nodes,
        })
    }

    fn node(&self, name: &str) -> &Arc<NodeInfo> {
        self.nodes
            .iter()
            .find(|n| n.name() == name)
            .expect("node of the rig")
    }

    fn pre_filter(&self, pod: &PodInfo) -> (Option<Vec<String>>, Status) {
        let pf = self.plugin.as_pre_filter().expect("PreFilter");
        let (r, s) = pf.pre_filter(&mut CycleState::new(), pod, &self.nodes);
        (
            r.and_then(|r| r.node_names)
                .map(|n| n.into_iter().collect()),
            s,
        )
    }

    fn filter(&self, pod: &PodInfo, node: &str) -> Status {
        let f = self.plugin.as_filter().expect("Filter");
        f.filter(&CycleState::new(), pod, self.node(node))
    }

    fn score(&self, pod: &PodInfo, node: &str) -> Result<i64, Status> {
        let s = self.plugin.as_score().expect("Score");
        s.score(&CycleState::new(), pod, self.node(node))
    }

    /// PreFilter (when there), PreScore (when there), Score and NormalizeScore on every node.
    fn scores(&self, pod: &PodInfo) -> Vec<(String, i64)> {
        if let Some(pf) = self.plugin.as_pre_filter() {
            let (_, s) = pf.pre_filter(&mut CycleState::new(), pod, &self.nodes);
            assert!(s.is_success(), "{s:?}");
        }
        if let Some(ps) = self.plugin.as_pre_score() {
            let s = ps.pre_score(&mut CycleState::new(), pod, &self.nodes);
            assert!(s.is_success(), "{s:?}");
        }
        let sp = self.plugin.as_score().expect("Score");
        let mut scores: Vec<i64> = self
            .nodes
            .iter()
            .map(|n| sp.score(&CycleState::new(), pod, n).expect("scored"))
            .collect();
        if sp.has_normalize_score() {
            let s = sp.normalize_score(&CycleState::new(), pod, &self.nodes, &mut scores);
            assert!(s.is_success(), "{s:?}");
        }
        self.nodes
            .iter()
            .map(|n| n.name().to_string())
            .zip(scores)
            .collect()
    }
}

fn pod(name: &str) -> Arc<PodInfo> {
    PodBuilder::new(name).uid(&format!("uid-{name}")).info()
}

fn refused(text: &str) -> String {
    let control = control();
    match WasmPlugin::from_bytes(
        "Guest",
        &WasmArgs::default(),
        text.as_bytes(),
        control.handle(),
    ) {
        Ok(p) => panic!("guest accepted with points {:?}", p.points()),
        Err(e) => e.to_string(),
    }
}

/// The imports the crate's own guests use.
const IMPORTS: &str = r#"
  (import "k8s.io/scheduler" "currentNodeName" (func $node_name (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "result.status_reason" (func $reason (param i32 i32)))
  (import "k8s.io/scheduler" "result.node_names" (func $node_names (param i32 i32)))
  (import "k8s.io/scheduler" "result.nominated_node_name" (func $nominated (param i32 i32)))
  (import "k8s.io/scheduler" "result.normalized_score_list" (func $normalized (param i32 i32)))
  (import "k8s.io/scheduler" "result.cluster_events" (func $events (param i32 i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "node name ends in 0")
  (data (i32.const 32) "n1\00n3\00")
  (data (i32.const 48) "n2")
  (data (i32.const 64) "{\22n1\22:100,\22n2\22:0}")
  (data (i32.const 96) "\68\00\00\00\06\00\00\00")
  (data (i32.const 104) "panic!")
  (data (i32.const 112) "\01\00\00\00\01\00\00\00")
  ;; The current node's name at 1024, its length returned (0 when none or longer than 256).
  (func $current (result i32)
    (local $len i32)
    (local.set $len (call $node_name (i32.const 1024) (i32.const 256)))
    (if (i32.gt_u (local.get $len) (i32.const 256)) (then (return (i32.const 0))))
    (local.get $len))
  ;; The last character of the current node's name (0 when there is no name).
  (func $last (result i32)
    (local $len i32)
    (local.set $len (call $current))
    (if (i32.eqz (local.get $len)) (then (return (i32.const 0))))
    (i32.load8_u (i32.add (i32.const 1023) (local.get $len))))
"#;

fn module(body: &str) -> String {
    format!("(module {IMPORTS} {body})")
}

/// The Filter the benchmark compares with its native twin: a node whose name ends in `0` is
/// rejected.
pub const FILTER_ENDS_IN_ZERO: &str = r#"
  (func (export "filter") (result i32)
    (if (i32.eq (call $last) (i32.const 48))
      (then (call $reason (i32.const 0) (i32.const 19)) (return (i32.const 2))))
    (i32.const 0))
"#;

#[test]
fn filter_rejects_with_the_guests_reason() {
    let rig = Rig::wat(&module(FILTER_ENDS_IN_ZERO), nodes(&["n1", "n10"]));
    assert_eq!(
        rig.plugin.points().to_vec().len(),
        2,
        "{:?}",
        rig.plugin.points()
    );
    let p = pod("p");
    assert!(rig.filter(&p, "n1").is_success());
    let s = rig.filter(&p, "n10");
    assert_eq!(s.code(), Code::Unschedulable);
    assert_eq!(s.reasons(), ["node name ends in 0"]);
}

#[test]
fn score_packs_the_score_in_the_high_word() {
    let body = r#"
      (func (export "score") (result i64)
        (i64.shl
          (i64.extend_i32_u (i32.mul (i32.sub (call $last) (i32.const 48)) (i32.const 10)))
          (i64.const 32)))
    "#;
    let rig = Rig::wat(&module(body), nodes(&["n3", "n7"]));
    let p = pod("p");
    assert_eq!(rig.score(&p, "n3"), Ok(30));
    assert_eq!(rig.score(&p, "n7"), Ok(70));
    assert!(rig.plugin.as_pre_score().is_none());
}

#[test]
fn a_score_with_a_failing_code_is_an_error_status() {
    // score 5, code 2 (Unschedulable): a Score that is not Success fails.
    let body = r#"(func (export "score") (result i64) (i64.const 0x0000000500000002))"#;
    let rig = Rig::wat(&module(body), nodes(&["n1"]));
    let s = rig.score(&pod("p"), "n1").expect_err("not success");
    assert_eq!(s.code(), Code::Unschedulable);
}

#[test]
fn prescore_state_reaches_score_in_the_same_instance() {
    let body = r#"
      (global $seen (mut i32) (i32.const 0))
      (func (export "prescore") (result i32) (global.set $seen (i32.const 7)) (i32.const 0))
      (func (export "score") (result i64)
        (i64.shl (i64.extend_i32_u (global.get $seen)) (i64.const 32)))
    "#;
    let rig = Rig::wat(&module(body), nodes(&["n1", "n2"]));
    assert_eq!(rig.scores(&pod("p")), [("n1".into(), 7), ("n2".into(), 7)]);
}

#[test]
fn prefilter_narrows_the_nodes() {
    let body = r#"
      (func (export "prefilter") (result i32)
        (call $node_names (i32.const 32) (i32.const 6)) (i32.const 0))
      (func (export "filter") (result i32) (i32.const 0))
    "#;
    let rig = Rig::wat(&module(body), nodes(&["n1", "n2", "n3"]));
    let (names, s) = rig.pre_filter(&pod("p"));
    assert!(s.is_success());
    assert_eq!(names, Some(vec!["n1".to_string(), "n3".to_string()]));
}

#[test]
fn prefilter_alone_is_a_plugin() {
    let body = r#"(func (export "prefilter") (result i32) (i32.const 0))"#;
    let rig = Rig::wat(&module(body), nodes(&["n1"]));
    assert!(rig.plugin.as_pre_filter().is_some());
    assert!(rig.plugin.as_filter().is_none());
}

#[test]
fn normalize_score_replaces_the_scores() {
    let body = r#"
      (func (export "score") (result i64) (i64.const 0x0000000100000000))
      (func (export "normalizescore") (result i32)
        (call $normalized (i32.const 64) (i32.const 17)) (i32.const 0))
    "#;
    let rig = Rig::wat(&module(body), nodes(&["n1", "n2"]));
    assert_eq!(
        rig.scores(&pod("p")),
        [("n1".into(), 100), ("n2".into(), 0)]
    );
}

#[test]
fn reserve_permit_and_the_binding_cycle() {
    let body = r#"
      (global $reserved (mut i32) (i32.const 0))
      (func (export "reserve") (result i32) (global.set $reserved (i32.const 1)) (i32.const 0))
      (func (export "unreserve") (global.set $reserved (i32.const 0)))
      ;; Wait (4) for 1500 ms.
      (func (export "permit") (result i64) (i64.const 0x00000004000005dc))
      (func (export "prebind") (result i32) (i32.const 0))
      ;; Bind succeeds only in the instance that reserved.
      (func (export "bind") (result i32)
        (if (result i32) (global.get $reserved) (then (i32.const 0)) (else (i32.const 1))))
      (func (export "postbind"))
    "#;
    let rig = Rig::wat(&module(body), nodes(&["n1"]));
    let p = pod("p");
    let r = rig.plugin.as_reserve().expect("Reserve");
    assert!(r.reserve(&mut CycleState::new(), &p, "n1").is_success());
    let (s, wait) = rig
        .plugin
        .as_permit()
        .expect("Permit")
        .permit(&CycleState::new(), &p, "n1");
    assert_eq!((s.code(), wait), (Code::Wait, Duration::from_millis(1500)));
    let state = CycleState::new();
    let block = |f: std::pin::Pin<Box<dyn std::future::Future<Output = Status> + Send + '_>>| {
        futures_lite_block_on(f)
    };
    assert!(
        block(
            rig.plugin
                .as_pre_bind()
                .expect("PreBind")
                .pre_bind(&state, &p, "n1")
        )
        .is_success()
    );
    assert!(block(rig.plugin.as_bind().expect("Bind").bind(&state, &p, "n1")).is_success());
    rig.plugin
        .as_post_bind()
        .expect("PostBind")
        .post_bind(&state, &p, "n1");
    // A pod whose cycle never reserved binds on a fresh instance: the guest refuses it.
    let q = pod("q");
    let s = block(rig.plugin.as_bind().expect("Bind").bind(&state, &q, "n1"));
    assert_eq!(s.code(), Code::Error);
    r.unreserve(&mut CycleState::new(), &q, "n1");
}

/// Polls a future that never waits (the guest calls are synchronous).
fn futures_lite_block_on<T>(
    f: std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + '_>>,
) -> T {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    rt.block_on(f)
}

/// PostFilter of a guest that sets `name` (when given) and returns `mode << 32 | code`.
fn post_filter_of(name: Option<&str>, mode: u32, code: u32) -> (Option<PostFilterResult>, Status) {
    let set_name = match name {
        // "n2" is at offset 48; an empty name is a zero-length result.
        Some("n2") => "(call $nominated (i32.const 48) (i32.const 2))",
        Some(_) => "(call $nominated (i32.const 48) (i32.const 0))",
        None => "",
    };
    let result = (u64::from(mode) << 32) | u64::from(code);
    let body = format!(
        r#"
      (func (export "filter") (result i32) (i32.const 2))
      (func (export "postfilter") (result i64) {set_name} (i64.const {result}))
    "#
    );
    let rig = Rig::wat(&module(&body), nodes(&["n1", "n2"]));
    let framework = kubesched_framework::Framework::from_instances(
        kubesched_framework::ProfileSpec::default(),
        rig.control.handle().clone(),
        Arc::new(kubesched_framework::metrics::NoMetrics),
        Default::default(),
        Default::default(),
    )
    .expect("empty framework");
    let statuses = kubesched_framework::NodeToStatus::default();
    let pf = rig.plugin.as_post_filter().expect("PostFilter");
    futures_lite_block_on(pf.post_filter(&framework, &CycleState::new(), &pod("p"), &statuses))
}

#[test]
fn postfilter_follows_the_guests_nominating_mode() {
    // (what, name set, mode, code, result, status code): Noop (0) leaves the nomination as
    // it is whatever the name; Override (1) sets it, or clears it without a name.
    let nominate = |n: Option<&str>| {
        Some(PostFilterResult {
            nominated_node_name: n.map(str::to_string),
        })
    };
    type Row<'a> = (
        &'a str,
        Option<&'a str>,
        u32,
        u32,
        Option<PostFilterResult>,
        Code,
    );
    let rows: [Row<'_>; 6] = [
        (
            "override names n2",
            Some("n2"),
            1,
            0,
            nominate(Some("n2")),
            Code::Success,
        ),
        (
            "override with no name clears",
            None,
            1,
            0,
            nominate(None),
            Code::Success,
        ),
        (
            "override with an empty name clears",
            Some(""),
            1,
            0,
            nominate(None),
            Code::Success,
        ),
        (
            "noop ignores the name",
            Some("n2"),
            0,
            0,
            None,
            Code::Success,
        ),
        ("noop and no name", None, 0, 2, None, Code::Unschedulable),
        (
            "override while unschedulable",
            Some("n2"),
            1,
            2,
            nominate(Some("n2")),
            Code::Unschedulable,
        ),
    ];
    for (what, name, mode, code, want, want_code) in rows {
        let (result, status) = post_filter_of(name, mode, code);
        assert_eq!(result, want, "{what}");
        assert_eq!(status.code(), want_code, "{what}: {status:?}");
    }
}

#[test]
fn postfilter_with_an_unknown_mode_is_an_error() {
    let (result, status) = post_filter_of(Some("n2"), 7, 0);
    assert_eq!(result, None);
    assert_eq!(status.code(), Code::Error);
    assert!(
        status.message().contains("unknown nominating mode 7"),
        "{status:?}"
    );
}

/// A cluster client that keeps the events it is given (every write is accepted).
#[derive(Default)]
struct EventLog(parking_lot::Mutex<Vec<kubesched_framework::Event>>);

#[async_trait::async_trait]
impl kubesched_framework::ClusterClient for EventLog {
    async fn bind(&self, _: &PodInfo, _: &str) -> Result<(), kubesched_framework::ClientError> {
        Ok(())
    }
    async fn delete_pod(&self, _: &PodInfo) -> Result<(), kubesched_framework::ClientError> {
        Ok(())
    }
    async fn update_pod_status(
        &self,
        _: &PodInfo,
        _: &kubesched_framework::PodStatusUpdate,
    ) -> Result<(), kubesched_framework::ClientError> {
        Ok(())
    }
    fn record_event(&self, event: kubesched_framework::Event) {
        self.0.lock().push(event);
    }
    async fn update_persistent_volume(
        &self,
        pv: &k8s_openapi::api::core::v1::PersistentVolume,
    ) -> Result<k8s_openapi::api::core::v1::PersistentVolume, kubesched_framework::ClientError>
    {
        Ok(pv.clone())
    }
    async fn update_persistent_volume_claim(
        &self,
        pvc: &k8s_openapi::api::core::v1::PersistentVolumeClaim,
    ) -> Result<k8s_openapi::api::core::v1::PersistentVolumeClaim, kubesched_framework::ClientError>
    {
        Ok(pvc.clone())
    }
}

/// A Filter guest that sends `event` (JSON) through `handle.eventrecorder.eventf` and admits
/// the node; returns the events the scheduler's client was given.
fn events_of(event: &serde_json::Value) -> Vec<kubesched_framework::Event> {
    let json = event.to_string();
    let escaped: String = json.bytes().map(|b| format!("\\{b:02x}")).collect();
    let text = format!(
        r#"(module
          (import "k8s.io/scheduler" "handle.eventrecorder.eventf" (func $eventf (param i32 i32)))
          (memory (export "memory") 1)
          (data (i32.const 0) "{escaped}")
          (func (export "filter") (result i32)
            (call $eventf (i32.const 0) (i32.const {len}))
            (i32.const 0)))"#,
        len = json.len()
    );
    let log = Arc::new(EventLog::default());
    let control = Handle::builder().client(log.clone()).build_with_control();
    let ns = nodes(&["n1"]);
    control.set_snapshot(Arc::new(Snapshot::new(ns.clone())));
    let plugin = WasmPlugin::from_bytes(
        "Guest",
        &WasmArgs::default(),
        text.as_bytes(),
        control.handle(),
    )
    .expect("guest loads");
    let status = plugin
        .as_filter()
        .expect("Filter")
        .filter(&CycleState::new(), &pod("p"), &ns[0]);
    assert!(status.is_success(), "{status:?}");
    std::mem::take(&mut *log.0.lock())
}

#[test]
fn eventf_records_an_event_through_the_schedulers_client() {
    let events = events_of(&serde_json::json!({
        "RegardingReference": {"Kind": "Pod", "APIVersion": "v1", "Name": "p",
                               "Namespace": "default", "UID": "uid-p", "ResourceVersion": "7"},
        "RelatedReference": {"Kind": "Node", "APIVersion": "v1", "Name": "n1"},
        "Eventtype": "Warning",
        "Reason": "TooHot",
        "Action": "Filter",
        "Note": "node n1 runs hot"
    }));
    assert_eq!(
        events,
        vec![kubesched_framework::Event {
            regarding: kubesched_framework::ObjectRef {
                kind: "Pod".into(),
                namespace: "default".into(),
                name: "p".into(),
                uid: "uid-p".into(),
            },
            event_type: kubesched_framework::EventType::Warning,
            reason: "TooHot".into(),
            action: "Filter".into(),
            note: "node n1 runs hot".into(),
            related: Some(kubesched_framework::ObjectRef {
                kind: "Node".into(),
                namespace: String::new(),
                name: "n1".into(),
                uid: String::new(),
            }),
        }]
    );
}

#[test]
fn eventf_drops_what_the_events_recorder_drops() {
    // An empty related reference (what the SDK sends for nil) is no related object.
    let normal = events_of(&serde_json::json!({
        "RegardingReference": {"Kind": "Pod", "Name": "p", "Namespace": "default"},
        "RelatedReference": {},
        "Eventtype": "Normal", "Reason": "Seen", "Action": "Filter", "Note": ""
    }));
    assert_eq!(normal.len(), 1);
    assert_eq!(normal[0].related, None);
    // nodenumber's PreScore sends the type "PreScore": not Normal or Warning, not recorded.
    let odd_type = events_of(&serde_json::json!({
        "RegardingReference": {"Kind": "Pod", "Name": "p"},
        "Eventtype": "PreScore", "Reason": "match lastNumber", "Action": "Continue"
    }));
    assert!(odd_type.is_empty(), "{odd_type:?}");
    let about_nothing = events_of(&serde_json::json!({
        "Eventtype": "Normal", "Reason": "Seen", "Action": "Filter"
    }));
    assert!(about_nothing.is_empty(), "{about_nothing:?}");
}

#[test]
fn enqueue_registers_the_guests_events() {
    let body = r#"
      (func (export "enqueue") (call $events (i32.const 112) (i32.const 8)))
      (func (export "filter") (result i32) (i32.const 0))
    "#;
    let rig = Rig::wat(&module(body), nodes(&["n1"]));
    let events = rig
        .plugin
        .as_enqueue_extensions()
        .expect("enqueue")
        .events_to_register();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].event.resource, EventResource::Node);
    assert_eq!(events[0].event.action, ActionType::ADD);
}

#[test]
fn without_enqueue_every_event_is_registered() {
    let rig = Rig::wat(&module(FILTER_ENDS_IN_ZERO), nodes(&["n1"]));
    let events = rig.plugin.events_to_register();
    assert_eq!(events.len(), 6);
    assert!(events.iter().all(|e| e.event.action == ActionType::ALL));
}

// ---- failures: contained in the call, or refused at start ----

#[test]
fn a_trap_fails_only_its_call_and_the_next_call_works() {
    // "bad" (three letters) panics; other nodes pass.
    let body = r#"
      (func (export "filter") (result i32)
        (if (i32.eq (call $current) (i32.const 3))
          (then
            (drop (call $fd_write (i32.const 1) (i32.const 96) (i32.const 1) (i32.const 200)))
            (unreachable)))
        (i32.const 0))
    "#;
    let rig = Rig::wat(&module(body), nodes(&["bad", "good"]));
    let p = pod("p");
    let s = rig.filter(&p, "bad");
    assert_eq!(s.code(), Code::Error);
    assert_eq!(s.plugin(), Some("Guest"));
    assert_eq!(
        s.message(),
        "wasm: filter error: panic!\nwasm error: unreachable"
    );
    assert!(rig.filter(&p, "good").is_success());
}

#[test]
fn an_endless_loop_is_stopped_at_its_deadline() {
    let body = r#"(func (export "filter") (result i32) (loop $l (br $l)) (i32.const 0))"#;
    let args = WasmArgs {
        call_timeout_millis: Some(50),
        ..WasmArgs::default()
    };
    let rig = Rig::wat_with(&module(body), args, nodes(&["n1"]));
    let started = std::time::Instant::now();
    let s = rig.filter(&pod("p"), "n1");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(s.code(), Code::Error);
    assert!(
        s.message().contains("ran past its deadline of 50 ms"),
        "{}",
        s.message()
    );
    assert_eq!(s.plugin(), Some("Guest"));
}

#[test]
fn memory_growth_past_the_limit_fails_the_call() {
    let body = r#"
      (func (export "filter") (result i32)
        (loop $l (br_if $l (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
        (i32.const 0))
    "#;
    let args = WasmArgs {
        memory_limit_bytes: Some(4 << 20),
        ..WasmArgs::default()
    };
    let rig = Rig::wat_with(&module(body), args, nodes(&["n1"]));
    let s = rig.filter(&pod("p"), "n1");
    assert_eq!(s.code(), Code::Error);
    assert!(
        s.message()
            .contains("memory would grow past its limit of 4194304 bytes"),
        "{}",
        s.message()
    );
}

#[test]
fn a_point_without_its_pair_is_refused() {
    let want = "wasm: guest <bytes>: wasm: filter, score, reserve, permit or bind must be exported";
    assert_eq!(
        refused(
            r#"(module (memory (export "memory") 1) (func (export "prescore") (result i32) (unreachable)))"#
        ),
        want
    );
    assert_eq!(
        refused(
            r#"(module (memory (export "memory") 1) (func (export "normalizescore") (result i32) (unreachable)))"#
        ),
        want
    );
    // Reserve with Permit is not one of upstream's combinations.
    assert_eq!(
        refused(&module(
            r#"(func (export "reserve") (result i32) (i32.const 0)) (func (export "permit") (result i64) (i64.const 0))"#
        )),
        want
    );
}

#[test]
fn not_a_plugin_is_refused() {
    assert_eq!(
        refused(r#"(module (memory (export "memory") 1))"#),
        "wasm: guest <bytes>: wasm: guest does not export any plugin functions"
    );
    assert_eq!(
        refused(r#"(module (func (export "filter") (result i32) (i32.const 0)))"#),
        "wasm: guest <bytes>: wasm: guest doesn't export memory[memory]"
    );
    assert_eq!(
        refused(
            r#"(module (memory (export "memory") 1) (func (export "filter") (result i64) (i64.const 0)))"#
        ),
        "wasm: guest <bytes>: wasm: guest exports the wrong signature for func[filter]. should be () -> (i32)"
    );
    assert!(
        refused("\0asm\x01\0\0\0garbage")
            .starts_with("wasm: guest <bytes>: wasm: error compiling guest")
    );
}

#[test]
fn a_start_that_traps_is_refused() {
    let body = r#"
      (func (export "_start")
        (drop (call $fd_write (i32.const 1) (i32.const 96) (i32.const 1) (i32.const 200)))
        (unreachable))
      (func (export "filter") (result i32) (i32.const 0))
    "#;
    assert_eq!(
        refused(&module(body)),
        "failed to create a guest pool: wasm: instantiate error: panic!\nwasm error: unreachable"
    );
}

#[test]
fn an_unknown_import_is_refused() {
    let text = r#"(module (import "env" "nope" (func)) (memory (export "memory") 1) (func (export "filter") (result i32) (i32.const 0)))"#;
    assert!(refused(text).contains("env::nope"), "{}", refused(text));
}

#[test]
fn args_decode_and_urls_resolve() {
    let a = WasmArgs::from_json(&serde_json::json!({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "guestURL": "file://x.wasm", "guestConfig": "{}"
    }))
    .expect("decodes");
    assert_eq!(
        (a.guest_url.as_str(), a.guest_config.as_str()),
        ("file://x.wasm", "{}")
    );
    let control = control();
    let err = |url: &str| {
        WasmPlugin::new("P", &args(url), control.handle())
            .expect_err("refused")
            .to_string()
    };
    assert_eq!(err(""), "wasm: guestURL is required");
    assert_eq!(
        err("c:\\foo.wasm"),
        "wasm: error reading guestURL c:\\foo.wasm: unsupported URL scheme: c"
    );
    assert!(err("https://example.invalid/g.wasm").contains("not fetched"));
    assert!(
        err("file:///no/such/guest.wasm")
            .starts_with("wasm: error reading guestURL file:///no/such/guest.wasm")
    );
}

// ---- the third-party guests ----

/// `<workspace>/../shared/wasm-guests/<rel>`, or None (with a note) when absent.
fn third_party(rel: &str) -> Option<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/wasm-guests");
    let path = root.join(rel);
    if path.is_file() {
        Some(path.display().to_string())
    } else {
        eprintln!(
            "skipped: third-party guest {} is absent (kube-scheduler-wasm-extension's guests go in ../shared/wasm-guests/)",
            path.display()
        );
        None
    }
}

fn guest(rel: &str, args: WasmArgs, nodes: Vec<Arc<NodeInfo>>) -> Option<Rig> {
    let url = third_party(rel)?;
    Some(
        Rig::file(
            "Guest",
            WasmArgs {
                guest_url: url,
                ..args
            },
            nodes,
        )
        .expect("guest loads"),
    )
}

fn test_args(mode: &str) -> WasmArgs {
    WasmArgs {
        args: vec!["test".into(), mode.into()],
        ..WasmArgs::default()
    }
}

#[test]
fn nodenumber_scores_the_node_with_the_pods_last_digit() {
    let Some(rig) = guest(
        "examples/nodenumber/main.wasm",
        WasmArgs::default(),
        nodes(&["node1", "node2", "node-a"]),
    ) else {
        return;
    };
    assert_eq!(
        rig.scores(&pod("pod1")),
        [
            ("node1".into(), 10),
            ("node2".into(), 0),
            ("node-a".into(), 0)
        ]
    );
    // A pod without a number matches every node.
    assert_eq!(
        rig.scores(&pod("pod")),
        [
            ("node1".into(), 10),
            ("node2".into(), 10),
            ("node-a".into(), 10)
        ]
    );
    // It registers Node/Add only.
    let events = rig.plugin.events_to_register();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].event.resource, EventResource::Node);
    assert_eq!(events[0].event.action, ActionType::ADD);
}

#[test]
fn nodenumber_reverse_from_guest_config() {
    let args = WasmArgs {
        guest_config: r#"{"reverse": true}"#.into(),
        ..WasmArgs::default()
    };
    let Some(rig) = guest(
        "examples/nodenumber/main.wasm",
        args,
        nodes(&["node1", "node2"]),
    ) else {
        return;
    };
    assert_eq!(
        rig.scores(&pod("pod1")),
        [("node1".into(), 0), ("node2".into(), 10)]
    );
}

#[test]
fn the_other_nodenumber_builds_score_alike() {
    for rel in [
        "internal/e2e/scheduler_perf/wasm/nodenumber/main.wasm",
        "examples/advanced/main.wasm",
    ] {
        let Some(rig) = guest(rel, WasmArgs::default(), nodes(&["node1", "node2"])) else {
            continue;
        };
        let scores = rig.scores(&pod("pod2"));
        assert_eq!(scores[0].0, "node1");
        assert!(scores[1].1 >= scores[0].1, "{rel}: {scores:?}");
    }
}

#[test]
fn imagelocality_scores_nodes_that_have_the_image() {
    // Upstream's e2e case: three nodes with three images of 100 MB each, two of them with
    // the pod's image; one scheduling cycle per node, as its RunAll does.
    let size = 100_000_000;
    let node = |name: &str, image: &str| {
        let mut b = NodeBuilder::new(name);
        for v in 1..=3 {
            b = b.image(&[&format!("{image}:v{v}")], size);
        }
        b
    };
    let built = [
        node("no-image-node1", "unrelated-image"),
        node("image-node1", "test-image"),
        node("image-node2", "test-image"),
    ];
    let infos: Vec<Arc<NodeInfo>> = built
        .into_iter()
        .map(|b| {
            let mut info = (*node_info(b, &[])).clone();
            let images: Vec<String> = info
                .node()
                .map(|n| {
                    n.images
                        .iter()
                        .flat_map(|(names, _)| names.clone())
                        .collect()
                })
                .unwrap_or_default();
            for name in images {
                let num_nodes = if name.starts_with("test-image") { 2 } else { 1 };
                info.image_states
                    .insert(name, ImageStateSummary { size, num_nodes });
            }
            Arc::new(info)
        })
        .collect();
    let Some(rig) = guest(
        "examples/imagelocality/main.wasm",
        WasmArgs::default(),
        infos,
    ) else {
        return;
    };
    let p = PodBuilder::new("happy8-meta")
        .uid("uid-happy8")
        .image("test-image:v1")
        .info();
    let one_cycle = |node: &str| {
        rig.pre_filter(&p);
        rig.score(&p, node).expect("scored")
    };
    assert_eq!(one_cycle("no-image-node1"), 0);
    assert_eq!(one_cycle("image-node1"), 4);
}

#[test]
fn testdata_filter_compares_the_pods_node_name() {
    let Some(rig) = guest(
        "guest/testdata/filter/main.wasm",
        test_args("filter"),
        nodes(&["good-node", "bad-node"]),
    ) else {
        return;
    };
    let p = PodBuilder::new("p").uid("uid-p").node("good-node").info();
    rig.pre_filter(&p);
    assert!(rig.filter(&p, "good-node").is_success());
    let s = rig.filter(&p, "bad-node");
    assert_eq!(s.code(), Code::Unschedulable);
    assert_eq!(s.message(), "good-node != bad-node");
}

#[test]
fn testdata_prefilter_returns_the_pods_node_name() {
    let Some(rig) = guest(
        "guest/testdata/filter/main.wasm",
        test_args("preFilter"),
        nodes(&["good-node", "bad-node"]),
    ) else {
        return;
    };
    let p = PodBuilder::new("p").uid("uid-p").node("good-node").info();
    let (names, s) = rig.pre_filter(&p);
    assert!(s.is_success());
    assert_eq!(names, Some(vec!["good-node".to_string()]));
}

#[test]
fn testdata_score_and_normalize() {
    let Some(rig) = guest(
        "guest/testdata/score/main.wasm",
        test_args("score"),
        nodes(&["good-node", "bad-node"]),
    ) else {
        return;
    };
    let p = PodBuilder::new("p").uid("uid-p").node("good-node").info();
    assert_eq!(
        rig.scores(&p),
        [("good-node".into(), 100), ("bad-node".into(), 0)]
    );
    let Some(rig) = guest(
        "guest/testdata/score/main.wasm",
        test_args("scoreExtensions"),
        nodes(&["good-node", "bad-node"]),
    ) else {
        return;
    };
    let sp = rig.plugin.as_score().expect("Score");
    let mut scores = vec![1, 2];
    let s = sp.normalize_score(&CycleState::new(), &p, &rig.nodes, &mut scores);
    assert!(s.is_success(), "{s:?}");
    assert_eq!(scores, [100, 200]);
}

#[test]
fn testdata_prescore_sees_the_filtered_nodes() {
    let Some(rig) = guest(
        "guest/testdata/score/main.wasm",
        test_args("preScore"),
        nodes(&["a", "b"]),
    ) else {
        return;
    };
    // The guest returns the number of nodes as its status code: 2 is Unschedulable.
    let s = rig.plugin.as_pre_score().expect("PreScore").pre_score(
        &mut CycleState::new(),
        &pod("p"),
        &rig.nodes,
    );
    assert_eq!(s.code(), Code::Unschedulable);
}

#[test]
fn upstream_error_guests_fail_as_upstream_says() {
    let Some(url) = third_party("scheduler/test/testdata/error/panic_on_filter.wasm") else {
        return;
    };
    let rig = Rig::file("Guest", args(&url), nodes(&["n1"])).expect("loads");
    let s = rig.filter(&pod("p"), "n1");
    assert_eq!(s.code(), Code::Error);
    assert!(
        s.message()
            .starts_with("wasm: filter error: panic!\nwasm error: unreachable"),
        "{}",
        s.message()
    );

    for (file, want) in [
        (
            "prescore_without_score.wasm",
            "wasm: filter, score, reserve, permit or bind must be exported",
        ),
        (
            "scoreextensions_without_score.wasm",
            "wasm: filter, score, reserve, permit or bind must be exported",
        ),
        (
            "not_plugin.wasm",
            "wasm: guest does not export any plugin functions",
        ),
        (
            "panic_on_start.wasm",
            "failed to create a guest pool: wasm: instantiate error: panic!",
        ),
    ] {
        let Some(url) = third_party(&format!("scheduler/test/testdata/error/{file}")) else {
            continue;
        };
        let err = Rig::file("Guest", args(&url), nodes(&["n1"]))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains(want), "{file}: {err}");
        if !file.starts_with("panic_on_start") {
            assert!(err.contains(file), "names the file: {err}");
        }
    }
}

#[test]
fn upstream_panic_guests_fail_their_point() {
    let p = pod("p");
    let check = |file: &str, run: &dyn Fn(&Rig) -> Status, export: &str| {
        let Some(url) = third_party(&format!("scheduler/test/testdata/error/{file}")) else {
            return;
        };
        let rig = Rig::file("Guest", args(&url), nodes(&["n1"])).expect("loads");
        let s = run(&rig);
        assert_eq!(s.code(), Code::Error, "{file}");
        assert!(
            s.message()
                .starts_with(&format!("wasm: {export} error: panic!")),
            "{file}: {}",
            s.message()
        );
    };
    check(
        "panic_on_prefilter.wasm",
        &|r| r.pre_filter(&p).1,
        "prefilter",
    );
    check(
        "panic_on_score.wasm",
        &|r| r.score(&p, "n1").expect_err("fails"),
        "score",
    );
    check(
        "panic_on_prescore.wasm",
        &|r| {
            r.plugin.as_pre_score().expect("PreScore").pre_score(
                &mut CycleState::new(),
                &p,
                &r.nodes,
            )
        },
        "prescore",
    );
    check(
        "panic_on_reserve.wasm",
        &|r| {
            r.plugin
                .as_reserve()
                .expect("Reserve")
                .reserve(&mut CycleState::new(), &p, "n1")
        },
        "reserve",
    );
    check(
        "panic_on_permit.wasm",
        &|r| {
            r.plugin
                .as_permit()
                .expect("Permit")
                .permit(&CycleState::new(), &p, "n1")
                .0
        },
        "permit",
    );
    check(
        "panic_on_bind.wasm",
        &|r| {
            futures_lite_block_on(r.plugin.as_bind().expect("Bind").bind(
                &CycleState::new(),
                &p,
                "n1",
            ))
        },
        "bind",
    );
}

#[test]
fn upstream_all_noop_is_refused_for_its_postfilter_signature() {
    // Its postfilter returns i32 where upstream's host wants i64, so upstream refuses it too.
    let Some(url) = third_party("scheduler/test/testdata/test/all_noop.wasm") else {
        return;
    };
    let err = Rig::file("Guest", args(&url), nodes(&["n1"]))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.ends_with(
            "wasm: guest exports the wrong signature for func[postfilter]. should be () -> (i64)"
        ),
        "{err}"
    );
}

#[test]
fn upstream_global_guests_return_their_globals() {
    let p = pod("p");
    for (file, point) in [
        ("filter_from_global.wasm", "filter"),
        ("score_from_global.wasm", "score"),
        ("prefilter_from_global.wasm", "prefilter"),
    ] {
        let Some(rig) = guest(
            &format!("scheduler/test/testdata/test/{file}"),
            WasmArgs::default(),
            nodes(&["n1"]),
        ) else {
            return;
        };
        // Their globals start at Success and a zero score.
        match point {
            "filter" => assert!(rig.filter(&p, "n1").is_success()),
            "score" => assert_eq!(rig.score(&p, "n1"), Ok(0)),
            _ => assert!(rig.pre_filter(&p).1.is_success()),
        }
        let _ = &rig.control;
    }
}

/// The per-call cost of a Filter guest against the same logic natively (node name ends in
/// `0`), over 1,000 nodes. Printed; the figures in docs/benchmarks.md come from
/// `cargo test -p kubesched-plugin-wasm --release filter_guest_overhead -- --nocapture`.
#[test]
fn filter_guest_overhead() {
    let names: Vec<String> = (0..1000).map(|i| format!("node-{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let rig = Rig::wat(&module(FILTER_ENDS_IN_ZERO), nodes(&refs));
    let p = pod("p");
    let f = rig.plugin.as_filter().expect("Filter");
    let state = CycleState::new();
    let native = |n: &NodeInfo| {
        if n.name().ends_with('0') {
            Status::unschedulable("node name ends in 0")
        } else {
            Status::success()
        }
    };
    let rounds = if cfg!(debug_assertions) { 2 } else { 200 };
    let time = |run: &dyn Fn(&NodeInfo) -> Status| {
        let started = std::time::Instant::now();
        let mut rejected = 0usize;
        for _ in 0..rounds {
            for n in &rig.nodes {
                rejected += usize::from(!run(n).is_success());
            }
        }
        assert_eq!(rejected, rounds * 100);
        started.elapsed().as_nanos() as f64 / (rounds * rig.nodes.len()) as f64
    };
    let native_ns = time(&native);
    let wasm_ns = time(&|n| f.filter(&state, &p, n));
    eprintln!(
        "Filter per node: native {native_ns:.0} ns, wasm guest {wasm_ns:.0} ns, overhead {:.0} ns",
        wasm_ns - native_ns
    );
    assert!(native_ns >= 0.0 && wasm_ns > 0.0);
}
