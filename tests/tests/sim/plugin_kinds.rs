//! A plugin built on a custom resource, in both modes: `GateKeeper` (defined here, compiled
//! into the sim test binary only) declares the `Gate` kind (`tests.kubesched.io/v1`, namespaced,
//! with a status) and admits a pod labelled `gate: NAME` only once the Gate `NAME` of its
//! namespace is open. The Gate's changes requeue the pods waiting for it (a queueing hint on
//! the kind's events), and PostBind counts the admitted pods in the Gate's status through an
//! `ObjectWriter`. In simulate the Gates load from manifests; against the test API server
//! the watcher starts from the declaration and the status is written back through the
//! `status` subresource.

use std::sync::Arc;
use std::time::Duration;

use kubesched_framework::events::{ActionType, ClusterEventWithHint, EventResource, QueueingHint};
use kubesched_framework::model::k8s_openapi::{
    self, apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::{
    CycleState, EnqueueExtensions, Handle, KindWrite, ObjectKind, ObjectWriter, PluginError,
    PostBindPlugin, PreFilterPlugin, PreFilterResult, Status, Store,
};
use kubesched_live::Runner;
use kubesched_sim::{Simulation, SimulationOptions};
use kubesched_tests::apiserver::fixtures::{assert_rbac_covers, bounded, node, node_of, pod};
use kubesched_tests::apiserver::{self, TestApiServer};
use serde_json::{Value, json};

/// The custom resource.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Gate {
    metadata: ObjectMeta,
    #[serde(default)]
    spec: GateSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<GateStatus>,
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct GateSpec {
    #[serde(default)]
    open: bool,
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct GateStatus {
    #[serde(default)]
    admitted: i64,
}

impl k8s_openapi::Resource for Gate {
    const API_VERSION: &'static str = "tests.kubesched.io/v1";
    const GROUP: &'static str = "tests.kubesched.io";
    const KIND: &'static str = "Gate";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "gates";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for Gate {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

const NAME: &str = "GateKeeper";
const GATE_LABEL: &str = "gate";

struct GateKeeper {
    gates: Arc<Store<Gate>>,
    writer: ObjectWriter<Gate>,
    handle: Handle,
}

impl GateKeeper {
    fn new(handle: &Handle) -> Result<Self, PluginError> {
        Ok(Self {
            gates: handle.objects().of::<Gate>(),
            writer: handle.object_writer::<Gate>(),
            handle: handle.clone(),
        })
    }
}

kubesched_framework::register_plugin! {
    name: NAME,
    plugin: GateKeeper,
    kinds: [Gate],
    writes: [KindWrite::owned::<Gate>()],
    factory: GateKeeper::new,
}

fn gate_of(pod: &PodInfo) -> Option<&str> {
    pod.labels.get(GATE_LABEL).map(String::as_str)
}

impl PreFilterPlugin for GateKeeper {
    fn pre_filter(
        &self,
        _state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        let Some(name) = gate_of(pod) else {
            return (None, Status::default());
        };
        let open = self
            .gates
            .get(Some(&pod.namespace), name)
            .is_some_and(|g| g.spec.open);
        if open {
            (None, Status::default())
        } else {
            let reason = format!("gate {}/{name} is closed", pod.namespace);
            (None, Status::unresolvable(reason))
        }
    }
}

impl PostBindPlugin for GateKeeper {
    fn post_bind(&self, _state: &CycleState, pod: &PodInfo, _node_name: &str) {
        let Some(name) = gate_of(pod).map(str::to_string) else {
            return;
        };
        let namespace = pod.namespace.clone();
        let admitted = self
            .gates
            .get(Some(&namespace), &name)
            .and_then(|g| g.status.as_ref().map(|s| s.admitted))
            .unwrap_or(0);
        let writer = self.writer.clone();
        self.handle.spawn_background(async move {
            let patch = json!({"status": {"admitted": admitted + 1}});
            if let Err(e) = writer.patch_status(Some(&namespace), &name, patch).await {
                tracing::warn!(error = %e, "gate status");
            }
        });
    }
}

impl EnqueueExtensions for GateKeeper {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        vec![ClusterEventWithHint::with_hint(
            EventResource::of::<Gate>(),
            ActionType::ADD.union(ActionType::UPDATE),
            |pod, _old, new| {
                let Some(gate) = new.and_then(|o| o.downcast::<Gate>()) else {
                    return Ok(QueueingHint::Skip);
                };
                let same = gate.metadata.namespace.as_deref() == Some(pod.namespace.as_str())
                    && gate.metadata.name.as_deref() == gate_of(pod);
                Ok(if same && gate.spec.open {
                    QueueingHint::Queue
                } else {
                    QueueingHint::Skip
                })
            },
        )]
    }
}

const CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: GateKeeper
";

fn gate(name: &str, open: bool) -> Value {
    json!({
        "apiVersion": "tests.kubesched.io/v1", "kind": "Gate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"open": open},
    })
}

fn gated_pod(name: &str, gate: &str) -> Value {
    let mut p = pod(name, "1");
    p["metadata"]["labels"] = json!({GATE_LABEL: gate});
    p
}

#[test]
fn the_declaration_is_registered() {
    let desc = kubesched_framework::registry::find(NAME).expect("registered");
    assert_eq!(desc.kinds, &[ObjectKind::of::<Gate>()]);
    assert_eq!(desc.kinds[0].resource(), "gates.tests.kubesched.io");
    assert!(desc.kinds[0].namespaced);
    let rules = kubesched_live::access::rules_for([desc]);
    let grants = |resource: &str, verb: &str| {
        kubesched_live::access::grants(&rules, "tests.kubesched.io", resource, verb)
    };
    assert!(grants("gates", "list") && grants("gates", "watch") && grants("gates", "create"));
    assert!(grants("gates/status", "patch") && grants("gates/status", "update"));
    assert!(!grants("gates", "delete"));
    assert_eq!(
        EventResource::of::<Gate>(),
        EventResource::Kind(ObjectKind::of::<Gate>().name())
    );
}

#[test]
fn the_kube_backend_names_no_plugin() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/live/src");
    let mut names: Vec<&str> = kubesched_framework::registry::plugins()
        .iter()
        .map(|d| d.name)
        .collect();
    names.retain(|n| *n != NAME);
    assert!(
        names.len() > 10,
        "every in-tree plugin is linked: {names:?}"
    );
    for entry in std::fs::read_dir(&dir).expect("crates/live/src") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("readable");
        for name in &names {
            assert!(
                !text.contains(&format!("\"{name}\"")),
                "{} names the plugin {name}",
                path.display()
            );
        }
    }
}

fn simulation() -> Simulation {
    let loaded = kubesched_config::load_str(CONFIG, "config.yaml").expect("valid config");
    Simulation::new(
        &loaded,
        SimulationOptions {
            seed: Some(1),
            explain: None,
            progress: None,
        },
    )
    .expect("simulation")
}

/// The fixtures' object with its type, as a manifest has it.
fn typed(mut doc: Value, kind: &str) -> Value {
    doc["apiVersion"] = json!("v1");
    doc["kind"] = json!(kind);
    doc
}

fn manifests(docs: &[Value]) -> kubesched_sim::Manifests {
    let text = json!({"apiVersion": "v1", "kind": "List", "items": docs}).to_string();
    kubesched_tests::manifests_of(&text)
}

#[tokio::test(flavor = "current_thread")]
async fn simulate_loads_the_kind_requeues_on_its_events_and_shows_the_writes() {
    let mut sim = simulation();
    sim.load(
        manifests(&[
            typed(node("n1", "4"), "Node"),
            gate("g1", false),
            typed(gated_pod("p1", "g1"), "Pod"),
            typed(gated_pod("p2", "nowhere"), "Pod"),
        ]),
        "input.yaml",
    );
    sim.settle().await;
    let report = sim.report();
    let state = |r: &kubesched_sim::SimReport, name: &str| {
        let p = r.pods.iter().find(|p| p.name == name).expect("reported");
        (p.status, p.message.clone().unwrap_or_default())
    };
    let (status, message) = state(&report, "p1");
    assert_eq!(status, kubesched_sim::PodState::Unschedulable);
    assert!(message.contains("gate default/g1 is closed"), "{message}");
    let gates = sim.cluster().objects().of::<Gate>();
    assert_eq!(gates.len(), 1);

    // The gate opens: its update event requeues p1 (and only p1: p2 waits for another gate).
    sim.add_other("Gate", gate("g1", true), "update.yaml");
    sim.advance_clock(Duration::from_secs(2)).await;
    sim.settle().await;
    let report = sim.report();
    assert_eq!(state(&report, "p1").0, kubesched_sim::PodState::Scheduled);
    assert_eq!(
        state(&report, "p2").0,
        kubesched_sim::PodState::Unschedulable
    );
    // PostBind's status write landed in the in-memory store.
    let g1 = gates.get(Some("default"), "g1").expect("g1");
    assert_eq!(g1.status.as_ref().map(|s| s.admitted), Some(1));
}

#[test]
fn a_malformed_object_of_the_kind_is_reported_with_its_field() {
    let mut m = kubesched_sim::Manifests::default();
    let mut problems = Vec::new();
    kubesched_sim::load_text(
        "apiVersion: tests.kubesched.io/v1\nkind: Gate\nmetadata: {name: bad, namespace: default}\nspec: {open: maybe}\n",
        "gates.yaml",
        &mut m,
        &mut problems,
    );
    assert!(problems.is_empty(), "{problems:?}");
    let mut sim = simulation();
    sim.load(m, "gates.yaml");
    let problem = sim
        .problems()
        .iter()
        .find(|p| p.file == "gates.yaml")
        .expect("reported");
    assert_eq!(problem.field.as_deref(), Some("spec.open"), "{problem}");
    assert_eq!(problem.object.as_deref(), Some("Gate default/bad"));
    assert_eq!(sim.cluster().objects().of::<Gate>().len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_watches_the_kind_requeues_on_its_events_and_writes_the_status() {
    bounded(60, "a CRD-backed plugin against the test API server", async {
        apiserver::serve_kind(ObjectKind::of::<Gate>());
        let server = TestApiServer::start().await;
        server.create("nodes", node("n1", "4"));
        server.create("gates", gate("g1", false));
        // A malformed Gate is skipped; the watcher goes on.
        server.create(
            "gates",
            json!({"apiVersion": "tests.kubesched.io/v1", "kind": "Gate",
                   "metadata": {"name": "bad", "namespace": "default"},
                   "spec": {"open": "maybe"}}),
        );
        server.create("pods", gated_pod("p1", "g1"));

        let loaded = kubesched_config::load_str(
            &format!(
                "{CONFIG}leaderElection:\n  leaderElect: false\nclientConnection:\n  qps: 500\n  burst: 500\n"
            ),
            "config.yaml",
        )
        .expect("valid config");
        let mut options =
            kubesched_tests::apiserver::fixtures::options(&server, false, "gatekeeper");
        options.config = loaded;
        let runner = Runner::start(options).await.expect("start");
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(node_of(&server, "p1"), None, "the gate is closed");

        let mut open = gate("g1", true);
        open["metadata"]["resourceVersion"] = server
            .get("gates", "default", "g1")
            .expect("g1")
            .pointer("/metadata/resourceVersion")
            .cloned()
            .expect("a resourceVersion");
        server.apply("gates", open);
        assert!(
            server
                .wait_until(Duration::from_secs(20), |s| node_of(s, "p1").is_some())
                .await,
            "p1 is bound once its gate opens"
        );
        assert!(
            server
                .wait_until(Duration::from_secs(10), |s| {
                    s.get("gates", "default", "g1")
                        .and_then(|g| g.pointer("/status/admitted").and_then(Value::as_i64))
                        == Some(1)
                })
                .await,
            "PostBind wrote the gate's status: {:?}",
            server.get("gates", "default", "g1")
        );
        runner.stop_handle().stop();
        runner.wait().await.expect("clean stop");
        assert_rbac_covers(&server);
    })
    .await;
}
