//! Table tests ported in spirit from upstream's default_preemption_test.go: PostFilter end
//! to end through a framework with a resource-fit-like test plugin, victim selection,
//! candidate choice, preparation side effects, args and registration.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kubesched_framework::clock::FakeClock;
use kubesched_framework::model::k8s_openapi::api::core::v1::PodCondition;
use kubesched_framework::model::k8s_openapi::api::policy::v1::{
    PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
};
use kubesched_framework::model::k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    ObjectMeta, Time,
};
use kubesched_framework::model::k8s_openapi::jiff::Timestamp;
use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::{
    ClientError, ClusterClient, Code, CycleState, Event, ExtensionPoint, FilterPlugin, Framework,
    Handle, NodeToStatus, Nominator, ObjectStore, Plugin, PluginRef, PodStatusUpdate,
    PostFilterResult, PreFilterExtensions, PreFilterPlugin, PreFilterResult, PreemptionCriterion,
    PreemptionExplainer, PreemptionExplanation, ProfileSpec, Snapshot, Status, async_trait,
    metrics::NoMetrics, registry,
};
use kubesched_framework::{Feature, FeatureGates};
use kubesched_testing::{NodeBuilder, PodBuilder, node_infos, selector};
use serde::Serialize;

use super::*;
use crate::evaluator::{
    Candidate, aggregate, fit_error_message, pick_one, pick_one_explained, split_by_pdb_violation,
};

const LOW: i32 = 0;
const MID: i32 = 100;
const HIGH: i32 = 1000;
const VERY_HIGH: i32 = 10000;

const FIT: &str = "TestFit";
const PERMIT: &str = "TestPermit";
const ERROR_LABEL: &str = "error";

/// What TestFit's PreFilter computed; Filter refuses to run without it, so a dry run
/// that forgot the cycle state fails loudly.
#[derive(Debug, Clone)]
struct FitState {
    milli_cpu: i64,
    memory: i64,
}

/// A small NodeResourcesFit: pod count, CPU and memory, with PreFilter extensions that
/// fail on nodes labelled `error=true`.
struct TestFit;

impl Plugin for TestFit {
    fn name(&self) -> &str {
        FIT
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for TestFit {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        state.write(FitState {
            milli_cpu: pod.requests.milli_cpu,
            memory: pod.requests.memory,
        });
        (None, Status::success())
    }
    fn pre_filter_extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}

fn fails_on(node: &NodeInfo) -> bool {
    node.node()
        .is_some_and(|n| n.labels.get(ERROR_LABEL).is_some_and(|v| v == "true"))
}

impl PreFilterExtensions for TestFit {
    fn add_pod(
        &self,
        _state: &mut CycleState,
        pod: &PodInfo,
        _pod_to_add: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        if fails_on(node) {
            return Status::error(format!("failed to add pod: {}", pod.name));
        }
        Status::success()
    }
    fn remove_pod(
        &self,
        _state: &mut CycleState,
        pod: &PodInfo,
        _pod_to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        if fails_on(node) {
            return Status::error(format!("failed to remove pod: {}", pod.name));
        }
        Status::success()
    }
}

impl FilterPlugin for TestFit {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(want) = state.read::<FitState>() else {
            return Status::error("TestFit: no PreFilter state");
        };
        let mut reasons = Vec::new();
        if node.pods.len() as i64 + 1 > node.allocatable.allowed_pod_number {
            reasons.push("Too many pods");
        }
        if want.milli_cpu > 0
            && node.requested.milli_cpu + want.milli_cpu > node.allocatable.milli_cpu
        {
            reasons.push("Insufficient cpu");
        }
        if want.memory > 0 && node.requested.memory + want.memory > node.allocatable.memory {
            reasons.push("Insufficient memory");
        }
        if reasons.is_empty() {
            Status::success()
        } else {
            Status::new(Code::Unschedulable, reasons)
        }
    }
}

/// A client that records every write and can refuse deletes, or hold the second one.
#[derive(Default)]
struct Recorder {
    deleted: Mutex<Vec<String>>,
    updates: Mutex<Vec<(String, PodStatusUpdate)>>,
    events: Mutex<Vec<Event>>,
    refuse_delete: Option<ClientError>,
    hold_second_delete: Option<DeleteHold>,
}

/// Where a test holds the second deletion: told when it starts, released when it says.
#[derive(Default)]
struct DeleteHold {
    started: tokio::sync::Notify,
    release: tokio::sync::Notify,
}

#[async_trait]
impl ClusterClient for Recorder {
    async fn bind(&self, _: &PodInfo, _: &str) -> Result<(), ClientError> {
        Ok(())
    }
    async fn delete_pod(&self, pod: &PodInfo) -> Result<(), ClientError> {
        if let Some(e) = &self.refuse_delete {
            return Err(e.clone());
        }
        let count = {
            let mut deleted = self.deleted.lock().unwrap();
            deleted.push(pod.name.clone());
            deleted.len()
        };
        if let Some(hold) = &self.hold_second_delete
            && count == 2
        {
            hold.started.notify_one();
            hold.release.notified().await;
        }
        Ok(())
    }
    async fn update_pod_status(
        &self,
        pod: &PodInfo,
        update: &PodStatusUpdate,
    ) -> Result<(), ClientError> {
        self.updates
            .lock()
            .unwrap()
            .push((pod.name.clone(), update.clone()));
        Ok(())
    }
    fn record_event(&self, event: Event) {
        self.events.lock().unwrap().push(event);
    }
    async fn update_persistent_volume(
        &self,
        pv: &kubesched_framework::model::k8s_openapi::api::core::v1::PersistentVolume,
    ) -> Result<kubesched_framework::model::k8s_openapi::api::core::v1::PersistentVolume, ClientError>
    {
        Ok(pv.clone())
    }
    async fn update_persistent_volume_claim(
        &self,
        pvc: &kubesched_framework::model::k8s_openapi::api::core::v1::PersistentVolumeClaim,
    ) -> Result<
        kubesched_framework::model::k8s_openapi::api::core::v1::PersistentVolumeClaim,
        ClientError,
    > {
        Ok(pvc.clone())
    }
}

fn framework(handle: Handle, plugin: DefaultPreemption) -> Framework {
    let plugins = BTreeMap::from([
        (ExtensionPoint::PreFilter, vec![PluginRef::new(FIT)]),
        (ExtensionPoint::Filter, vec![PluginRef::new(FIT)]),
        (ExtensionPoint::PreEnqueue, vec![PluginRef::new(NAME)]),
        (ExtensionPoint::PostFilter, vec![PluginRef::new(NAME)]),
    ]);
    let instances: BTreeMap<String, Arc<dyn Plugin>> = BTreeMap::from([
        (FIT.to_string(), Arc::new(TestFit) as Arc<dyn Plugin>),
        (NAME.to_string(), Arc::new(plugin) as Arc<dyn Plugin>),
    ]);
    let spec = ProfileSpec {
        scheduler_name: "default-scheduler".into(),
        plugins,
        ..Default::default()
    };
    Framework::from_instances(
        spec,
        handle,
        Arc::new(NoMetrics),
        instances,
        BTreeMap::new(),
    )
    .expect("valid test profile")
}

fn pod(name: &str, priority: i32) -> PodBuilder {
    PodBuilder::new(name).priority(priority)
}

fn bound(name: &str, priority: i32, node: &str) -> PodBuilder {
    pod(name, priority).node(node)
}

fn node(name: &str, cpu: &str, pods: &str) -> NodeBuilder {
    NodeBuilder::new(name).capacity(&[("cpu", cpu), ("memory", "1Gi"), ("pods", pods)])
}

fn started_at(b: PodBuilder, second: i64) -> PodBuilder {
    b.with(|p| {
        p.status.get_or_insert_with(Default::default).start_time =
            Some(Time(Timestamp::from_second(second).expect("valid")));
    })
}

fn terminating(b: PodBuilder, by_preemption: bool) -> PodBuilder {
    b.with(|p| {
        p.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        if by_preemption {
            p.status
                .get_or_insert_with(Default::default)
                .conditions
                .get_or_insert_with(Default::default)
                .push(PodCondition {
                    type_: DISRUPTION_TARGET.into(),
                    status: "True".into(),
                    reason: Some(REASON_PREEMPTION_BY_SCHEDULER.into()),
                    ..Default::default()
                });
        }
    })
}

pub(crate) fn pdb(name: &str, labels: &[(&str, &str)], allowed: i32) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            selector: Some(selector(labels)),
            ..Default::default()
        }),
        status: Some(PodDisruptionBudgetStatus {
            disruptions_allowed: Some(allowed),
            ..Default::default()
        }),
    }
}

/// One scenario: the cluster, and how the preemptor's Filter statuses are made.
struct Env {
    nodes: Vec<NodeBuilder>,
    pods: Vec<PodBuilder>,
    pdbs: Vec<PodDisruptionBudget>,
    nominated: Vec<(PodBuilder, &'static str)>,
    waiting: Vec<&'static str>,
    /// Pods running PreBind (their binding may be cancelled).
    in_pre_bind: Vec<&'static str>,
    /// Nodes whose Filter status is replaced by UnschedulableAndUnresolvable.
    unresolvable: Vec<&'static str>,
    /// Use these statuses instead of running Filter.
    statuses: Option<NodeToStatus>,
    args: DefaultPreemptionArgs,
    parallelism: usize,
    seed: u64,
    refuse_delete: Option<ClientError>,
    /// The framework's clock (the machine's when None).
    clock: Option<FakeClock>,
    /// Ask the plugin to explain itself, as `simulate --explain` does.
    explain: bool,
    /// SchedulerAsyncPreemption (off here unless a test is about it: victims are then
    /// evicted before PostFilter returns, which most tests look at).
    async_preemption: bool,
}

impl Env {
    fn new(nodes: Vec<NodeBuilder>, pods: Vec<PodBuilder>) -> Self {
        Self {
            nodes,
            pods,
            pdbs: Vec::new(),
            nominated: Vec::new(),
            waiting: Vec::new(),
            in_pre_bind: Vec::new(),
            unresolvable: Vec::new(),
            statuses: None,
            args: DefaultPreemptionArgs::default(),
            parallelism: 1,
            seed: 1,
            refuse_delete: None,
            clock: None,
            explain: false,
            async_preemption: false,
        }
    }
}

/// Everything one PostFilter call did, in a form tests compare and insta records.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct Outcome {
    /// None: no result; Some(None): clear the nomination; Some(Some(n)): nominate n.
    nominated: Option<Option<String>>,
    code: String,
    message: String,
    deleted: Vec<String>,
    events: Vec<String>,
    /// Pods whose nominatedNodeName was cleared.
    cleared: Vec<String>,
    /// Waiting pods that were rejected, with the plugin and message.
    rejected_waiting: Vec<String>,
    /// Pods in PreBind whose binding was cancelled, with the cause.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    cancelled_in_pre_bind: Vec<String>,
    /// Pods the nominator still holds after the call, as `pod@node`.
    nominations: Vec<String>,
    /// What the plugin recorded, when asked to explain.
    #[serde(skip_serializing_if = "Option::is_none")]
    explanation: Option<PreemptionExplanation>,
    /// Victims deleted before PostFilter returned (all of them unless asynchronous).
    #[serde(skip)]
    deleted_during_post_filter: Vec<String>,
    /// Why PreEnqueue held the preemptor back right after PostFilter, if it did.
    #[serde(skip)]
    held_at_pre_enqueue: Option<String>,
}

async fn run(env: Env, preemptor: PodBuilder) -> Outcome {
    let preemptor = preemptor.info();
    let pods: Vec<Arc<PodInfo>> = env.pods.into_iter().map(PodBuilder::info).collect();
    let snapshot = Arc::new(Snapshot::new(node_infos(env.nodes, &pods)));
    let objects = ObjectStore::default();
    for p in env.pdbs {
        objects.pod_disruption_budgets.upsert(p);
    }
    let nominator = Arc::new(Nominator::new());
    let mut nominated_pods = Vec::new();
    for (p, n) in env.nominated {
        let p = p.info();
        nominator.add(p.clone(), Some(n));
        nominated_pods.push(p);
    }
    let recorder = Arc::new(Recorder {
        refuse_delete: env.refuse_delete,
        ..Default::default()
    });
    let mut builder = Handle::builder()
        .snapshot(snapshot.clone())
        .client(recorder.clone())
        .objects(Arc::new(objects))
        .nominator(nominator.clone())
        .parallelism(env.parallelism)
        .features(
            FeatureGates::defaults()
                .with(Feature::SchedulerAsyncPreemption, env.async_preemption)
                .expect("not locked"),
        );
    if let Some(clock) = env.clock {
        builder = builder.clock(Arc::new(clock));
    }
    let handle = builder.build();
    let waiting: Vec<_> = env
        .waiting
        .iter()
        .map(|name| {
            let p = pods
                .iter()
                .find(|p| p.name == *name)
                .expect("waiting pod exists")
                .clone();
            handle.waiting_pods().add(
                p,
                HashMap::from([(PERMIT.to_string(), Duration::from_secs(600))]),
            )
        })
        .collect();
    let mut in_pre_bind: Vec<_> = env
        .in_pre_bind
        .iter()
        .map(|name| {
            let p = pods.iter().find(|p| p.name == *name).expect("pod exists");
            (p.name.clone(), handle.pods_in_pre_bind().add(&p.uid))
        })
        .collect();
    let plugin = DefaultPreemption::new(&env.args, &handle)
        .expect("valid args")
        .with_offset_seed(env.seed);
    let fw = framework(handle.clone(), plugin);
    let mut state = CycleState::new();
    let pre = fw.run_pre_filter_plugins(&mut state, &preemptor, snapshot.list());
    assert!(pre.status.is_success(), "PreFilter: {:?}", pre.status);
    let statuses = env.statuses.unwrap_or_else(|| {
        let mut m = NodeToStatus::for_snapshot(snapshot.clone());
        for (i, n) in snapshot.list().iter().enumerate() {
            let s = fw.run_filter_plugins_with_nominated_pods(&state, &preemptor, n);
            if env.unresolvable.contains(&n.name()) {
                m.set_at(i, Status::unresolvable("unresolvable"));
            } else if !s.is_success() {
                m.set_at(i, s);
            }
        }
        m
    });
    if env.explain {
        state.write(PreemptionExplainer::default());
    }
    let (result, status) = fw
        .run_post_filter_plugins(&state, &preemptor, &statuses)
        .await;
    let explanation =
        PreemptionExplainer::requested(&state).and_then(|x| x.take().into_iter().next());
    let deleted_during_post_filter = recorder.deleted.lock().unwrap().clone();
    let held = fw.run_pre_enqueue_plugins(&preemptor);
    let held_at_pre_enqueue =
        (!held.is_success()).then(|| format!("{}: {}", held.code().as_str(), held.message()));
    // Asynchronous preemption: let the background evictions run to the end.
    while handle.background_tasks() > 0 {
        tokio::task::yield_now().await;
    }
    let mut rejected_waiting = Vec::new();
    for wp in waiting {
        let s = tokio::time::timeout(Duration::from_millis(50), wp.wait()).await;
        if let Ok(s) = s {
            rejected_waiting.push(format!(
                "{} by {}: {} ({})",
                wp.pod().name,
                s.plugin().unwrap_or_default(),
                s.message(),
                s.code().as_str()
            ));
        }
    }
    let cancelled_in_pre_bind = in_pre_bind
        .iter_mut()
        .filter_map(|(name, r)| r.cancelled.try_recv().ok().map(|c| format!("{name}: {c}")))
        .collect();
    let mut nominations: Vec<String> = nominated_pods
        .iter()
        .filter_map(|p| nominator.node_of(&p.uid).map(|n| format!("{}@{n}", p.name)))
        .collect();
    nominations.sort();
    Outcome {
        deleted_during_post_filter,
        held_at_pre_enqueue,
        nominated: result.map(|r: PostFilterResult| r.nominated_node_name),
        cancelled_in_pre_bind,
        code: status.code().as_str().to_string(),
        message: status.message(),
        deleted: recorder.deleted.lock().unwrap().clone(),
        events: recorder
            .events
            .lock()
            .unwrap()
            .iter()
            .map(|e| {
                format!(
                    "{} {:?} {}/{}: {}",
                    e.regarding.name, e.event_type, e.reason, e.action, e.note
                )
            })
            .collect(),
        cleared: recorder
            .updates
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, u)| u.nominated_node_name == Some(None))
            .map(|(n, _)| n.clone())
            .collect(),
        rejected_waiting,
        nominations,
        explanation,
    }
}

fn nominated(node: &str) -> Option<Option<String>> {
    Some(Some(node.to_string()))
}

fn cleared() -> Option<Option<String>> {
    Some(None)
}

fn unschedulable(msg: &str) -> (String, String) {
    ("Unschedulable".into(), format!("{MESSAGE_PREFIX}{msg}"))
}

struct Case {
    name: &'static str,
    env: Env,
    pod: PodBuilder,
    want_nominated: Option<Option<String>>,
    /// (code, message); Success has an empty message.
    want_status: (String, String),
    want_deleted: Vec<&'static str>,
}

fn success() -> (String, String) {
    ("Success".into(), String::new())
}

async fn check(case: Case) {
    let out = run(case.env, case.pod).await;
    assert_eq!(out.nominated, case.want_nominated, "{}: result", case.name);
    assert_eq!(
        (out.code.clone(), out.message.clone()),
        case.want_status,
        "{}: status",
        case.name
    );
    assert_eq!(out.deleted, case.want_deleted, "{}: deleted", case.name);
}

#[tokio::test]
async fn post_filter_table() {
    let one_pod = |n: &str| node(n, "1", "1");
    let small_cpu = |n: &str| node(n, "200m", "110");
    let cases = vec![
        Case {
            name: "higher priority pod can be made schedulable",
            env: Env::new(vec![one_pod("node1")], vec![bound("p1", LOW, "node1")]),
            pod: pod("p", HIGH),
            want_nominated: nominated("node1"),
            want_status: success(),
            want_deleted: vec!["p1"],
        },
        Case {
            name: "tied priority is still unschedulable",
            env: Env::new(vec![one_pod("node1")], vec![bound("p1", LOW, "node1")]),
            pod: pod("p", LOW),
            want_nominated: cleared(),
            want_status: unschedulable(
                "0/1 nodes are available: 1 No preemption victims found for incoming pod.",
            ),
            want_deleted: vec![],
        },
        Case {
            name: "UnschedulableAndUnresolvable nodes are skipped",
            env: Env {
                unresolvable: vec!["node1"],
                ..Env::new(vec![one_pod("node1")], vec![bound("p1", LOW, "node1")])
            },
            pod: pod("p", HIGH),
            want_nominated: cleared(),
            want_status: unschedulable(
                "0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
            ),
            want_deleted: vec![],
        },
        Case {
            name: "nodes absent from the statuses count as UnschedulableAndUnresolvable",
            env: Env {
                statuses: Some(NodeToStatus::default()),
                ..Env::new(vec![one_pod("node1")], vec![bound("p1", LOW, "node1")])
            },
            pod: pod("p", HIGH),
            want_nominated: cleared(),
            want_status: unschedulable(
                "0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
            ),
            want_deleted: vec![],
        },
        Case {
            name: "an Unschedulable absent status makes every node a candidate",
            env: Env {
                statuses: Some({
                    let mut m = NodeToStatus::default();
                    m.absent = Some(Status::unschedulable("rejected at PreFilter"));
                    m
                }),
                ..Env::new(vec![one_pod("node1")], vec![bound("p1", LOW, "node1")])
            },
            pod: pod("p", HIGH),
            want_nominated: nominated("node1"),
            want_status: success(),
            want_deleted: vec!["p1"],
        },
        Case {
            name: "pod can be made schedulable on one node only",
            env: Env::new(
                vec![one_pod("node1"), one_pod("node2")],
                vec![bound("p1", HIGH, "node1"), bound("p2", LOW, "node2")],
            ),
            pod: pod("p", MID),
            want_nominated: nominated("node2"),
            want_status: success(),
            want_deleted: vec!["p2"],
        },
        Case {
            name: "equal PDB violations: the node with the lowest highest-priority victim",
            env: Env {
                pdbs: vec![
                    pdb("violating", &[("pdb", "violating")], 0),
                    pdb("non-violating", &[("pdb", "non-violating")], i32::MAX),
                ],
                // node1 holds two pods for one slot (the snapshot does not check).
                ..Env::new(
                    vec![one_pod("node1"), one_pod("node2")],
                    vec![
                        bound("p1", HIGH, "node1").label("pdb", "non-violating"),
                        bound("p2", LOW, "node1").label("pdb", "violating"),
                        bound("p3", MID, "node2").label("pdb", "violating"),
                    ],
                )
            },
            pod: pod("p", VERY_HIGH),
            // Each node violates the budget once; node1 would lose HIGH p1 too.
            want_nominated: nominated("node2"),
            want_status: success(),
            want_deleted: vec!["p3"],
        },
        Case {
            name: "not enough CPU even without the lower-priority pods",
            env: Env::new(
                vec![small_cpu("node1"), small_cpu("node2")],
                vec![bound("p1", LOW, "node1"), bound("p2", LOW, "node2")],
            ),
            pod: pod("p", HIGH).container(&[("cpu", "300m")]),
            want_nominated: cleared(),
            want_status: unschedulable("0/2 nodes are available: 2 Insufficient cpu."),
            want_deleted: vec![],
        },
        Case {
            name: "mixed reasons: no lower-priority pod, and not enough CPU",
            env: Env::new(
                vec![
                    node("node1", "1", "1"),
                    node("node2", "200m", "1"),
                    node("node3", "1", "1"),
                ],
                vec![
                    bound("p1", HIGH, "node1"),
                    bound("p2", LOW, "node2"),
                    bound("p3", HIGH, "node3"),
                ],
            ),
            pod: pod("p", HIGH).container(&[("cpu", "300m")]),
            want_nominated: cleared(),
            want_status: unschedulable(
                "0/3 nodes are available: 1 Insufficient cpu, 2 No preemption victims found for incoming pod.",
            ),
            want_deleted: vec![],
        },
        Case {
            name: "mixed reasons with unresolvable and never-evaluated nodes",
            env: Env {
                unresolvable: vec!["node4"],
                statuses: None,
                ..Env::new(
                    vec![
                        small_cpu("node1"),
                        small_cpu("node2"),
                        // node3 passes Filter so it is absent from the statuses.
                        node("node3", "1", "110"),
                        small_cpu("node4"),
                    ],
                    vec![bound("p1", LOW, "node1"), bound("p2", LOW, "node2")],
                )
            },
            pod: pod("p", HIGH).container(&[("cpu", "300m")]),
            want_nominated: cleared(),
            want_status: unschedulable(
                "0/4 nodes are available: 2 Insufficient cpu, 2 Preemption is not helpful for scheduling.",
            ),
            want_deleted: vec![],
        },
        Case {
            name: "a PreFilter extension error on the only node is an error",
            env: Env::new(
                vec![one_pod("node1").label(ERROR_LABEL, "true")],
                vec![bound("p1", LOW, "node1")],
            ),
            pod: pod("p", HIGH),
            want_nominated: None,
            want_status: (
                "Error".into(),
                format!(
                    "{MESSAGE_PREFIX}running RemovePod on PreFilter plugin \"{FIT}\": failed to remove pod: p"
                ),
            ),
            want_deleted: vec![],
        },
        Case {
            name: "a node failing with an error does not stop another from being chosen",
            env: Env::new(
                vec![
                    one_pod("node1").label(ERROR_LABEL, "true"),
                    one_pod("node2"),
                ],
                vec![bound("p1", LOW, "node1"), bound("p2", LOW, "node2")],
            ),
            pod: pod("p", HIGH),
            want_nominated: nominated("node2"),
            want_status: success(),
            want_deleted: vec!["p2"],
        },
        Case {
            name: "preemptionPolicy Never is not eligible",
            env: Env::new(vec![one_pod("node1")], vec![bound("p1", LOW, "node1")]),
            pod: pod("p", HIGH).preemption_never(),
            want_nominated: None,
            want_status: unschedulable(NOT_ELIGIBLE_NEVER),
            want_deleted: vec![],
        },
        Case {
            name: "a victim still terminating on the nominated node makes the pod wait",
            env: Env::new(
                vec![node("node1", "1", "2"), one_pod("node2")],
                vec![
                    terminating(bound("old-victim", LOW, "node1"), true),
                    bound("p1", MID, "node1"),
                    bound("p2", LOW, "node2"),
                ],
            ),
            pod: pod("p", HIGH).nominated_node("node1"),
            want_nominated: None,
            want_status: unschedulable(NOT_ELIGIBLE_TERMINATING),
            want_deleted: vec![],
        },
        Case {
            name: "a pod terminating for another reason does not block preemption",
            env: Env::new(
                vec![node("node1", "1", "2"), one_pod("node2")],
                vec![
                    terminating(bound("leaving", MID, "node1"), false),
                    bound("p1", MID, "node1"),
                    bound("p2", LOW, "node2"),
                ],
            ),
            pod: pod("p", HIGH).nominated_node("node1"),
            want_nominated: nominated("node2"),
            want_status: success(),
            want_deleted: vec!["p2"],
        },
        Case {
            name: "a nominated node that became unresolvable allows preempting elsewhere",
            env: Env {
                unresolvable: vec!["node1"],
                ..Env::new(
                    vec![node("node1", "1", "2"), one_pod("node2")],
                    vec![
                        terminating(bound("old-victim", LOW, "node1"), true),
                        bound("p1", MID, "node1"),
                        bound("p2", LOW, "node2"),
                    ],
                )
            },
            pod: pod("p", HIGH).nominated_node("node1"),
            want_nominated: nominated("node2"),
            want_status: success(),
            want_deleted: vec!["p2"],
        },
        Case {
            name: "only as many victims as needed: higher-priority ones are reprieved",
            env: Env::new(
                vec![node("node1", "1", "3")],
                vec![
                    bound("p1", LOW, "node1"),
                    bound("p2", MID, "node1"),
                    bound("p3", MID + 1, "node1"),
                ],
            ),
            pod: pod("p", HIGH),
            want_nominated: nominated("node1"),
            want_status: success(),
            want_deleted: vec!["p1"],
        },
        Case {
            name: "CPU needs two victims, the least important ones",
            env: Env::new(
                vec![node("node1", "1", "110")],
                vec![
                    bound("p1", LOW, "node1").container(&[("cpu", "300m")]),
                    bound("p2", MID, "node1").container(&[("cpu", "300m")]),
                    bound("p3", MID + 1, "node1").container(&[("cpu", "300m")]),
                ],
            ),
            pod: pod("p", HIGH).container(&[("cpu", "600m")]),
            want_nominated: nominated("node1"),
            want_status: success(),
            want_deleted: vec!["p2", "p1"],
        },
        Case {
            name: "a node whose victims violate no PDB is preferred",
            env: Env {
                pdbs: vec![pdb("guard", &[("app", "guarded")], 0)],
                ..Env::new(
                    vec![one_pod("node1"), one_pod("node2")],
                    vec![
                        bound("p1", LOW, "node1").label("app", "guarded"),
                        bound("p2", MID, "node2").label("app", "free"),
                    ],
                )
            },
            pod: pod("p", HIGH),
            want_nominated: nominated("node2"),
            want_status: success(),
            want_deleted: vec!["p2"],
        },
        Case {
            name: "within a node the PDB-violating pod is reprieved first",
            env: Env {
                pdbs: vec![pdb("guard", &[("app", "guarded")], 0)],
                ..Env::new(
                    vec![node("node1", "1", "2")],
                    vec![
                        bound("p1", LOW, "node1").label("app", "free"),
                        bound("p2", LOW, "node1").label("app", "guarded"),
                    ],
                )
            },
            pod: pod("p", HIGH),
            want_nominated: nominated("node1"),
            want_status: success(),
            want_deleted: vec!["p1"],
        },
        Case {
            name: "a higher-priority pod nominated to the node keeps its room",
            env: Env {
                nominated: vec![(pod("n1", VERY_HIGH), "node1")],
                ..Env::new(
                    vec![one_pod("node1"), one_pod("node2")],
                    vec![bound("p1", LOW, "node1"), bound("p2", MID, "node2")],
                )
            },
            // Without the nomination node1 (LOW victim) would win; with it node1 is full
            // even after p1 goes, so node2 is chosen.
            pod: pod("p", HIGH),
            want_nominated: nominated("node2"),
            want_status: success(),
            want_deleted: vec!["p2"],
        },
    ];
    for case in cases {
        check(case).await;
    }
}

#[tokio::test]
async fn victims_get_an_event_and_lower_nominations_are_cleared() {
    let env = Env {
        nominated: vec![
            (pod("lower", LOW), "node1"),
            (pod("higher", VERY_HIGH), "node2"),
            (pod("equal", HIGH), "node1"),
        ],
        ..Env::new(
            vec![node("node1", "1", "3"), node("node2", "1", "1")],
            vec![
                bound("v1", LOW, "node1"),
                bound("v2", LOW, "node1"),
                bound("v3", LOW, "node2"),
            ],
        )
    };
    let out = run(env, pod("p", HIGH).uid("uid-p")).await;
    assert_eq!(out.nominated, nominated("node1"));
    // node1 holds v1, v2 and the equal-priority nomination: one victim frees a slot.
    assert_eq!(out.deleted.len(), 1);
    assert_eq!(
        out.events,
        vec![format!(
            "{} Normal Preempted/Preempting: Preempted by pod uid-p on node node1",
            out.deleted[0]
        )]
    );
    assert_eq!(out.cleared, vec!["lower".to_string()]);
    assert_eq!(
        out.nominations,
        vec!["equal@node1".to_string(), "higher@node2".to_string()]
    );
}

#[tokio::test]
async fn waiting_victims_are_preempted_in_memory_terminating_ones_left_alone() {
    let env = Env {
        waiting: vec!["waiting"],
        ..Env::new(
            vec![node("node1", "1", "110")],
            vec![
                bound("waiting", LOW, "node1").container(&[("cpu", "400m")]),
                terminating(
                    bound("going", LOW, "node1").container(&[("cpu", "400m")]),
                    false,
                ),
                bound("stays", MID, "node1").container(&[("cpu", "200m")]),
            ],
        )
    };
    let out = run(env, pod("p", HIGH).container(&[("cpu", "800m")])).await;
    assert_eq!(out.nominated, nominated("node1"));
    assert_eq!(out.code, "Success");
    // Both LOW pods are victims; the terminating one needs no call, the waiting one is
    // preempted at Permit instead of deleted: an error, not a rejection, so it goes to
    // backoffQ (v1.36, kubernetes#135719).
    assert!(out.deleted.is_empty(), "{:?}", out.deleted);
    assert_eq!(
        out.rejected_waiting,
        vec![format!("waiting by {NAME}: preempted (Error)")]
    );
    assert_eq!(out.events.len(), 1);
    assert!(out.events[0].starts_with("waiting Normal Preempted/Preempting"));
}

/// v1.36 (#135502): a victim in PreBind has its binding cancelled instead of being
/// deleted; the event says it happened in the scheduler's memory.
#[tokio::test]
async fn victims_in_pre_bind_are_cancelled_not_deleted() {
    let env = Env {
        in_pre_bind: vec!["binding"],
        waiting: vec!["waiting"],
        ..Env::new(
            vec![node("node1", "1", "110")],
            vec![
                bound("binding", LOW, "node1").container(&[("cpu", "400m")]),
                bound("waiting", LOW, "node1").container(&[("cpu", "400m")]),
            ],
        )
    };
    let out = run(
        env,
        pod("p", HIGH).uid("uid-p").container(&[("cpu", "800m")]),
    )
    .await;
    assert_eq!(out.nominated, nominated("node1"));
    assert!(out.deleted.is_empty(), "{:?}", out.deleted);
    assert_eq!(
        out.cancelled_in_pre_bind,
        vec![format!("binding: preempted by {NAME}")]
    );
    let mut events = out.events.clone();
    events.sort();
    assert_eq!(
        events,
        [
            "binding Normal Preempted/Preempting: Preempted by pod uid-p on node node1 (in kube-scheduler memory).",
            "waiting Normal Preempted/Preempting: Preempted by pod uid-p on node node1 (in kube-scheduler memory).",
        ]
    );
}

#[tokio::test]
async fn delete_failures() {
    let base = || {
        Env::new(
            vec![node("node1", "1", "1")],
            vec![bound("p1", LOW, "node1")],
        )
    };
    let out = run(
        Env {
            refuse_delete: Some(ClientError::NotFound("pods \"p1\" not found".into())),
            ..base()
        },
        pod("p", HIGH),
    )
    .await;
    // Already gone: nothing to do, no event, and the pod is still nominated.
    assert_eq!(out.nominated, nominated("node1"));
    assert_eq!(out.code, "Success");
    assert!(out.events.is_empty());

    let out = run(
        Env {
            refuse_delete: Some(ClientError::Other("boom".into())),
            ..base()
        },
        pod("p", HIGH),
    )
    .await;
    assert_eq!(out.nominated, None);
    assert_eq!(out.code, "Error");
    assert_eq!(out.message, format!("{MESSAGE_PREFIX}boom"));
}

#[tokio::test]
async fn dry_run_stops_after_enough_candidates_and_is_reproducible() {
    let nodes = || {
        (0..6)
            .map(|i| node(&format!("node{i}"), "1", "1"))
            .collect::<Vec<_>>()
    };
    // Identical nodes: the candidate found first (from the random offset) wins the final
    // tie, so the chosen node depends on the seed and only on it.
    let pods = || {
        (0..6)
            .map(|i| bound(&format!("p{i}"), LOW, &format!("node{i}")))
            .collect::<Vec<_>>()
    };
    let args = DefaultPreemptionArgs {
        min_candidate_nodes_percentage: 0,
        min_candidate_nodes_absolute: 1,
    };
    let mut chosen = std::collections::BTreeSet::new();
    for seed in 0..20 {
        let a = run(
            Env {
                args: args.clone(),
                seed,
                ..Env::new(nodes(), pods())
            },
            pod("p", HIGH),
        )
        .await;
        let b = run(
            Env {
                args: args.clone(),
                seed,
                ..Env::new(nodes(), pods())
            },
            pod("p", HIGH),
        )
        .await;
        assert_eq!(a, b, "seed {seed} is reproducible");
        assert_eq!(a.deleted.len(), 1);
        chosen.insert(a.nominated.clone());
    }
    assert!(chosen.len() > 1, "offsets vary with the seed: {chosen:?}");
}

#[tokio::test]
async fn parallel_dry_run_matches_sequential() {
    // Enough potential nodes for the parallelizer to batch them; candidates differ in
    // their victims' priority so the choice is not a tie.
    let build = |parallelism: usize| {
        let nodes = (0..300)
            .map(|i| node(&format!("node{i:03}"), "1", "1"))
            .collect();
        let pods = (0..300)
            .map(|i| bound(&format!("p{i:03}"), (i % 97) - 50, &format!("node{i:03}")))
            .collect();
        Env {
            parallelism,
            seed: 7,
            ..Env::new(nodes, pods)
        }
    };
    let seq = run(build(1), pod("p", HIGH)).await;
    let par = run(build(4), pod("p", HIGH)).await;
    assert_eq!(seq, par);
    assert_eq!(seq.code, "Success");
}

fn candidate(name: &str, victims: &[(i32, Option<i64>)], violations: usize) -> Candidate {
    Candidate {
        name: name.into(),
        victims: victims
            .iter()
            .enumerate()
            .map(|(i, (prio, start))| {
                let b = pod(&format!("{name}-v{i}"), *prio);
                match start {
                    Some(s) => started_at(b, *s).info(),
                    None => b.info(),
                }
            })
            .collect(),
        num_pdb_violations: violations,
        pdb_violating: Vec::new(),
    }
}

#[test]
fn pick_one_node_table() {
    let now = 1_000_000_000_000_000_000;
    let cases: Vec<(&str, Vec<Candidate>, &str)> = vec![
        (
            "fewest PDB violations first",
            vec![
                candidate("a", &[(LOW, None)], 1),
                candidate("b", &[(HIGH, None)], 0),
            ],
            "b",
        ),
        (
            "lowest highest-priority victim",
            vec![
                candidate("a", &[(MID, None), (LOW, None)], 0),
                candidate("b", &[(LOW, None), (LOW, None), (LOW, None)], 0),
            ],
            "b",
        ),
        (
            "lowest sum of priorities",
            vec![
                candidate("a", &[(MID, None), (MID, None)], 0),
                candidate("b", &[(MID, None), (LOW, None)], 0),
            ],
            "b",
        ),
        (
            "negative priorities do not make more victims look cheaper",
            vec![
                candidate("a", &[(-100, None), (-100, None)], 0),
                candidate("b", &[(-100, None)], 0),
            ],
            "b",
        ),
        (
            "fewest victims",
            vec![
                candidate("a", &[(MID, None), (0, None)], 0),
                candidate("b", &[(MID, None)], 0),
                candidate("c", &[(MID, None), (-0, None)], 0),
            ],
            "b",
        ),
        (
            "latest start among the highest-priority victims",
            vec![
                candidate("a", &[(MID, Some(10)), (MID, Some(50))], 0),
                candidate("b", &[(MID, Some(20)), (MID, Some(30))], 0),
                candidate("c", &[(MID, Some(5)), (MID, Some(90))], 0),
            ],
            "b",
        ),
        (
            "a victim that has not started counts as starting now",
            vec![
                candidate("a", &[(MID, Some(10))], 0),
                candidate("b", &[(MID, None)], 0),
            ],
            "b",
        ),
        (
            "full tie: the first candidate",
            vec![
                candidate("a", &[(MID, Some(10))], 0),
                candidate("b", &[(MID, Some(10))], 0),
            ],
            "a",
        ),
    ];
    for (name, cands, want) in cases {
        let i = pick_one(&cands, now).expect("a candidate");
        assert_eq!(cands[i].name, want, "{name}");
        // The explained choice is the same choice.
        let (j, _, _) = pick_one_explained(&cands, now).expect("a candidate");
        assert_eq!(i, j, "{name}");
    }
    assert_eq!(pick_one(&[], now), None);
    assert!(pick_one_explained(&[], now).is_none());
}

#[test]
fn explained_choice_names_the_deciding_criterion_and_where_each_candidate_lost() {
    use kubesched_framework::PreemptionCriterion as C;
    let now = 1_000_000_000_000_000_000;
    // name, candidates, the deciding criterion, where each candidate lost.
    type Row = (&'static str, Vec<Candidate>, C, Vec<Option<C>>);
    let cases: Vec<Row> = vec![
        (
            "one candidate",
            vec![candidate("a", &[(LOW, None)], 0)],
            C::OnlyCandidate,
            vec![None],
        ),
        (
            "budget violations first, then the highest victim",
            vec![
                candidate("a", &[(LOW, None)], 1),
                candidate("b", &[(MID, None)], 0),
                candidate("c", &[(LOW, None)], 0),
            ],
            C::LowestHighestPriority,
            vec![
                Some(C::FewestPdbViolations),
                Some(C::LowestHighestPriority),
                None,
            ],
        ),
        (
            "sum of priorities",
            vec![
                candidate("a", &[(MID, None), (MID, None)], 0),
                candidate("b", &[(MID, None), (LOW, None)], 0),
            ],
            C::LowestPrioritySum,
            vec![Some(C::LowestPrioritySum), None],
        ),
        // Fewest victims never decides: with every priority shifted to >= 0 by 2^31, a
        // candidate with more victims always has the larger sum (as upstream).
        (
            "more victims lose on the sum already",
            vec![
                candidate("a", &[(MID, None), (-MID, None)], 0),
                candidate("b", &[(MID, None)], 0),
            ],
            C::LowestPrioritySum,
            vec![Some(C::LowestPrioritySum), None],
        ),
        (
            "start time",
            vec![
                candidate("a", &[(MID, Some(10))], 0),
                candidate("b", &[(MID, Some(20))], 0),
            ],
            C::LatestStartTime,
            vec![Some(C::LatestStartTime), None],
        ),
        (
            "full tie",
            vec![
                candidate("a", &[(MID, Some(10))], 0),
                candidate("b", &[(MID, Some(10))], 0),
            ],
            C::FirstCandidate,
            vec![None, Some(C::FirstCandidate)],
        ),
    ];
    for (name, cands, decided, lost) in cases {
        let (_, got_decided, got_lost) = pick_one_explained(&cands, now).expect("a candidate");
        assert_eq!((got_decided, got_lost), (decided, lost), "{name}");
    }
}

#[test]
fn explained_candidate_marks_budget_violating_victims() {
    let mut c = candidate("a", &[(MID, Some(20)), (LOW, Some(10)), (LOW, None)], 1);
    c.pdb_violating = vec![c.victims[1].uid.clone()];
    let e = evaluator::explain_candidate(&c, None);
    assert_eq!(
        e.victims.iter().map(|v| v.violates_pdb).collect::<Vec<_>>(),
        [false, true, false]
    );
    assert_eq!((e.highest_priority, e.priority_sum), (MID, i64::from(MID)));
    assert_eq!(e.pdb_violations, 1);
    assert!(e.earliest_start_of_highest_priority.is_some());
    assert_eq!(e.victims[2].start_time, None);
}

#[test]
fn pdb_split_table() {
    let p = |name: &str, labels: &[(&str, &str)]| pod(name, LOW).labels(labels).info();
    let budgets = |pdbs: Vec<PodDisruptionBudget>| {
        let arcs: Vec<Arc<PodDisruptionBudget>> = pdbs.into_iter().map(Arc::new).collect();
        evaluator::compile_budgets(&arcs)
    };
    let names = |v: Vec<Arc<PodInfo>>| v.iter().map(|p| p.name.clone()).collect::<Vec<_>>();

    // One disruption allowed: the first matching pod uses it, the second violates.
    let pods = vec![
        p("a", &[("app", "x")]),
        p("b", &[("app", "x")]),
        p("c", &[]),
    ];
    let (v, nv) = split_by_pdb_violation(&pods, &budgets(vec![pdb("one", &[("app", "x")], 1)]));
    assert_eq!(
        (names(v), names(nv)),
        (vec!["b".into()], vec!["a".into(), "c".into()])
    );

    // A pod already in disruptedPods is not counted again.
    let mut budget = pdb("one", &[("app", "x")], 0);
    budget.status.as_mut().expect("status").disrupted_pods = Some(BTreeMap::from([(
        "a".to_string(),
        Time(Timestamp::UNIX_EPOCH),
    )]));
    let (v, nv) = split_by_pdb_violation(&pods, &budgets(vec![budget]));
    assert_eq!(
        (names(v), names(nv)),
        (vec!["b".into()], vec!["a".into(), "c".into()])
    );

    // Other namespaces, empty and absent selectors match nothing.
    let mut other_ns = pdb("other", &[("app", "x")], 0);
    other_ns.metadata.namespace = Some("elsewhere".into());
    let mut empty = pdb("empty", &[], 0);
    empty.spec.as_mut().expect("spec").selector = Some(Default::default());
    let mut absent = pdb("absent", &[], 0);
    absent.spec.as_mut().expect("spec").selector = None;
    let (v, nv) = split_by_pdb_violation(&pods, &budgets(vec![other_ns, empty, absent]));
    assert!(v.is_empty());
    assert_eq!(nv.len(), 3);
}

#[test]
fn messages() {
    let statuses = BTreeMap::from([
        ("a".to_string(), Status::unschedulable("Insufficient cpu")),
        (
            "b".to_string(),
            Status::new(Code::Unschedulable, ["Insufficient cpu", "Too many pods"]),
        ),
        ("c".to_string(), Status::unresolvable(ERR_REASON_NO_VICTIMS)),
    ]);
    assert_eq!(
        fit_error_message(13, &statuses, ERR_REASON_NOT_HELPFUL),
        "0/13 nodes are available: 1 No preemption victims found for incoming pod, 1 Too many pods, 10 Preemption is not helpful for scheduling, 2 Insufficient cpu."
    );
    assert_eq!(
        fit_error_message(1, &BTreeMap::new(), ERR_REASON_NOT_HELPFUL),
        "0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    );
    assert_eq!(aggregate(&["x".into()]), "x");
    assert_eq!(aggregate(&["x".into(), "y".into(), "x".into()]), "[x, y]");
}

#[test]
fn num_candidates_table() {
    let args = |pct, abs| DefaultPreemptionArgs {
        min_candidate_nodes_percentage: pct,
        min_candidate_nodes_absolute: abs,
    };
    // (args, potential nodes, wanted)
    let cases = [
        (args(10, 100), 10, 10),
        (args(10, 100), 5000, 500),
        (args(10, 100), 500, 100),
        (args(40, 0), 5, 2),
        (args(0, 3), 10, 3),
        (args(100, 0), 7, 7),
        (args(10, 1), 0, 0),
    ];
    for (a, n, want) in cases {
        assert_eq!(a.num_candidates(n), want, "{a:?} over {n}");
    }
}

#[test]
fn not_eligible_messages_are_upstreams() {
    assert_eq!(
        NOT_ELIGIBLE_NEVER,
        "not eligible due to preemptionPolicy=Never."
    );
    assert_eq!(
        NOT_ELIGIBLE_TERMINATING,
        "not eligible due to a terminating pod on the nominated node."
    );
    assert!(evaluator::terminating_by_preemption(
        &terminating(pod("x", LOW), true).info()
    ));
    assert!(!evaluator::terminating_by_preemption(
        &terminating(pod("x", LOW), false).info()
    ));
}

fn decode(value: Option<serde_json::Value>) -> Result<serde_json::Value, String> {
    let desc = registry::find(NAME).expect("registered");
    (desc.args.decode)(
        value.as_ref(),
        &kubesched_framework::FeatureGates::defaults(),
    )
    .map(|d| d.effective.expect("typed args"))
    .map_err(|e| e.message)
}

#[test]
fn registered_once_with_its_points_and_args() {
    let desc = registry::find(NAME).expect("registered");
    assert_eq!(
        desc.extension_points().to_vec(),
        &[
            ExtensionPoint::PreEnqueue,
            ExtensionPoint::PostFilter,
            ExtensionPoint::EnqueueExtensions
        ]
    );
    assert_eq!(desc.args.kind, Some("DefaultPreemptionArgs"));
    let plugin = DefaultPreemption::new(&DefaultPreemptionArgs::default(), &Handle::default())
        .expect("default args are valid");
    assert_eq!(
        kubesched_framework::implemented_points(&plugin),
        vec![
            ExtensionPoint::PreEnqueue,
            ExtensionPoint::PostFilter,
            ExtensionPoint::EnqueueExtensions
        ]
    );
    // PostFilter never rejects a pod on its own: the only event (with the async gate,
    // on by default) re-checks pods PreEnqueue holds back, and its hint always skips.
    let events = plugin
        .as_enqueue_extensions()
        .expect("registered")
        .events_to_register();
    assert_eq!(events.len(), 1);
    let hint = events[0].hint.as_ref().expect("a hint");
    let p = PodBuilder::new("p").info();
    assert_eq!(
        hint(
            &p,
            Some(&kubesched_framework::events::EventObject::Pod(p.clone())),
            None
        ),
        Ok(kubesched_framework::events::QueueingHint::Skip)
    );
}

#[test]
fn args_defaults_round_trip_and_validation() {
    assert_eq!(
        decode(None).expect("defaults"),
        serde_json::json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "DefaultPreemptionArgs",
            "minCandidateNodesPercentage": 10,
            "minCandidateNodesAbsolute": 100,
        })
    );
    let yaml = "minCandidateNodesPercentage: 25\nminCandidateNodesAbsolute: 7\n";
    let args: DefaultPreemptionArgs = serde_saphyr::from_str(yaml).expect("yaml decodes");
    assert_eq!(
        args,
        DefaultPreemptionArgs {
            min_candidate_nodes_percentage: 25,
            min_candidate_nodes_absolute: 7,
        }
    );
    let back: DefaultPreemptionArgs =
        serde_saphyr::from_str(&serde_saphyr::to_string(&args).expect("encodes"))
            .expect("round trips");
    assert_eq!(back, args);
    let effective = decode(Some(serde_json::to_value(&args).expect("json"))).expect("valid");
    assert_eq!(effective["minCandidateNodesPercentage"], 25);

    let bad = [
        (
            serde_json::json!({"minCandidateNodesPercentage": 101}),
            "minCandidateNodesPercentage: Invalid value: 101: not in valid range [0, 100]",
        ),
        (
            serde_json::json!({"minCandidateNodesAbsolute": -1}),
            "minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)",
        ),
        (
            serde_json::json!({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}),
            "[minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute, minCandidateNodesAbsolute: Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage]",
        ),
        (
            serde_json::json!({"minCandidateNodesPercentage": -5, "minCandidateNodesAbsolute": -5}),
            "[minCandidateNodesPercentage: Invalid value: -5: not in valid range [0, 100], minCandidateNodesAbsolute: Invalid value: -5: not in valid range [0, inf)]",
        ),
    ];
    for (value, want) in bad {
        let err = decode(Some(value.clone())).expect_err("refused");
        assert_eq!(
            err,
            format!("invalid DefaultPreemptionArgs: {want}"),
            "{value}"
        );
        let args: DefaultPreemptionArgs = serde_json::from_value(value).expect("decodes");
        assert!(DefaultPreemption::new(&args, &Handle::default()).is_err());
    }
    let err = decode(Some(serde_json::json!({"minCandidateNodes": 1}))).expect_err("unknown field");
    assert!(err.contains("minCandidateNodes"), "{err}");
}

#[tokio::test]
async fn asynchronous_preemption_evicts_after_post_filter_and_holds_the_preemptor() {
    let env = |async_preemption| Env {
        async_preemption,
        nominated: vec![(pod("queued", LOW), "node1")],
        ..Env::new(
            vec![node("node1", "2", "110")],
            vec![
                bound("v1", LOW, "node1").container(&[("cpu", "1")]),
                bound("v2", LOW, "node1").container(&[("cpu", "1")]),
            ],
        )
    };
    let preemptor = || pod("critical", HIGH).container(&[("cpu", "2")]);
    let sync = run(env(false), preemptor()).await;
    let asynchronous = run(env(true), preemptor()).await;
    // The same decision, the same evictions and cleared nominations in the end...
    let in_the_end = |o: &Outcome| Outcome {
        deleted_during_post_filter: Vec::new(),
        held_at_pre_enqueue: None,
        ..o.clone()
    };
    assert_eq!(in_the_end(&asynchronous), in_the_end(&sync));
    assert_eq!(sync.nominated, Some(Some("node1".to_string())));
    assert_eq!(sync.deleted.len(), 2);
    assert_eq!(sync.cleared, vec!["queued".to_string()]);
    // ...but without the gate they happen inside PostFilter, and nothing holds the pod.
    assert_eq!(sync.deleted_during_post_filter, sync.deleted);
    assert_eq!(sync.held_at_pre_enqueue, None);
    // With it, PostFilter returns first; the pod waits at PreEnqueue meanwhile.
    assert!(asynchronous.deleted_during_post_filter.is_empty());
    assert_eq!(
        asynchronous.held_at_pre_enqueue.as_deref(),
        Some(
            "UnschedulableAndUnresolvable: waiting for the preemption for this pod to be finished"
        )
    );
}

#[test]
fn asynchronous_preemption_registers_pod_deletions_only_with_the_gate() {
    let handle = |on| {
        Handle::builder()
            .features(
                FeatureGates::defaults()
                    .with(Feature::SchedulerAsyncPreemption, on)
                    .expect("not locked"),
            )
            .build()
    };
    let plugin =
        |on| DefaultPreemption::new(&DefaultPreemptionArgs::default(), &handle(on)).expect("valid");
    let events: Vec<String> = plugin(true)
        .events_to_register()
        .iter()
        .map(|e| e.event.label())
        .collect();
    assert_eq!(events, ["PodDelete"]);
    assert!(plugin(false).events_to_register().is_empty());
    // Nothing is held back when no preemption runs.
    assert!(
        plugin(true)
            .pre_enqueue(&pod("p", HIGH).info())
            .is_success()
    );
}

#[tokio::test]
async fn a_victim_not_started_yet_counts_as_starting_on_the_framework_clock() {
    // node1's victim starts an hour from the machine's now; node2's has not started, so
    // it counts as starting now. On a clock two hours ahead (a simulation's virtual
    // time), node2's victim is the younger one and node2 is chosen; the machine's clock
    // would choose node1.
    let in_an_hour = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after the epoch")
        .as_secs() as i64
        + 3600;
    let clock = FakeClock::new();
    clock.advance(Duration::from_secs(2 * 3600));
    let env = Env {
        clock: Some(clock),
        ..Env::new(
            vec![node("node1", "1", "110"), node("node2", "1", "110")],
            vec![
                started_at(
                    bound("older", LOW, "node1").container(&[("cpu", "1")]),
                    in_an_hour,
                ),
                bound("younger", LOW, "node2").container(&[("cpu", "1")]),
            ],
        )
    };
    let out = run(env, pod("critical", HIGH).container(&[("cpu", "1")])).await;
    assert_eq!(out.nominated, Some(Some("node2".to_string())), "{out:?}");
    assert_eq!(out.deleted, vec!["younger".to_string()]);
}

#[tokio::test]
async fn snapshot() {
    let env = Env {
        pdbs: vec![pdb("guard", &[("app", "db")], 0)],
        nominated: vec![(pod("queued", LOW), "node2")],
        unresolvable: vec!["node3"],
        ..Env::new(
            vec![
                node("node1", "2", "110"),
                node("node2", "2", "110"),
                node("node3", "2", "110"),
            ],
            vec![
                bound("db-0", LOW, "node1")
                    .label("app", "db")
                    .container(&[("cpu", "1500m")]),
                bound("web-0", MID, "node1").container(&[("cpu", "500m")]),
                started_at(
                    bound("batch-0", LOW, "node2").container(&[("cpu", "1")]),
                    100,
                ),
                started_at(
                    bound("batch-1", LOW, "node2").container(&[("cpu", "1")]),
                    200,
                ),
                bound("batch-2", LOW, "node3").container(&[("cpu", "2")]),
            ],
        )
    };
    let out = run(
        env,
        pod("critical", HIGH)
            .uid("uid-critical")
            .container(&[("cpu", "1")]),
    )
    .await;
    insta::assert_yaml_snapshot!(out);
}

#[tokio::test]
async fn an_explained_preemption_decides_the_same_and_says_why() {
    let env = |explain| Env {
        pdbs: vec![pdb("guard", &[("app", "guarded")], 0)],
        explain,
        ..Env::new(
            vec![
                node("node1", "1", "1"),
                node("node2", "1", "1"),
                node("node3", "1", "1"),
            ],
            vec![
                bound("p1", LOW, "node1").label("app", "guarded"),
                bound("p2", MID, "node2"),
                bound("p3", VERY_HIGH, "node3"),
            ],
        )
    };
    let plain = run(env(false), pod("p", HIGH)).await;
    let mut explained = run(env(true), pod("p", HIGH)).await;
    let e = explained.explanation.take().expect("an explanation");
    assert_eq!(explained, plain);
    assert_eq!(plain.nominated, nominated("node2"));
    assert_eq!(e.plugin, NAME);
    assert_eq!(e.chosen.as_deref(), Some("node2"));
    assert_eq!(e.decided_by, Some(PreemptionCriterion::FewestPdbViolations));
    let mut verdicts: Vec<(String, Vec<String>, usize, Option<PreemptionCriterion>)> = e
        .candidates
        .iter()
        .map(|c| {
            let victims = c
                .victims
                .iter()
                .map(|v| format!("{}{}", v.pod, if v.violates_pdb { " (PDB)" } else { "" }))
                .collect();
            (c.node.clone(), victims, c.pdb_violations, c.eliminated_by)
        })
        .collect();
    verdicts.sort();
    assert_eq!(
        verdicts,
        [
            (
                "node1".to_string(),
                vec!["default/p1 (PDB)".to_string()],
                1,
                Some(PreemptionCriterion::FewestPdbViolations)
            ),
            ("node2".to_string(), vec!["default/p2".to_string()], 0, None),
        ]
    );
    // The VERY_HIGH pod cannot be evicted: node3 was tried and gave no candidate.
    assert_eq!(e.rejected.len(), 1);
    assert_eq!(e.rejected[0].node, "node3");
    assert_eq!(e.rejected[0].reasons, [ERR_REASON_NO_VICTIMS]);
    assert_eq!((e.not_helpful, e.not_tried, e.not_eligible), (0, 0, None));
}

#[tokio::test]
async fn an_explained_never_pod_says_it_may_not_preempt() {
    let env = Env {
        explain: true,
        ..Env::new(
            vec![node("node1", "1", "1")],
            vec![bound("p1", LOW, "node1")],
        )
    };
    let out = run(env, pod("p", HIGH).preemption_never()).await;
    let e = out.explanation.expect("an explanation");
    assert_eq!(e.not_eligible.as_deref(), Some(NOT_ELIGIBLE_NEVER));
    assert!(e.candidates.is_empty() && e.chosen.is_none());
}

#[test]
fn the_state_is_copied_only_when_a_pre_filter_extension_runs() {
    let handle = Handle::builder().build();
    let plugin =
        DefaultPreemption::new(&DefaultPreemptionArgs::default(), &handle).expect("valid args");
    let fw = framework(handle, plugin);
    let mut state = CycleState::new();
    assert!(crate::evaluator::has_active_pre_filter_extensions(
        &fw, &state
    ));
    // A plugin whose PreFilter said Skip gets no AddPod/RemovePod calls.
    state.skip_filter_plugins.insert(FIT.to_string());
    assert!(!crate::evaluator::has_active_pre_filter_extensions(
        &fw, &state
    ));
}

/// The victims as the informer has them, changeable by the test.
#[derive(Default)]
struct Victims(Mutex<HashMap<String, Arc<PodInfo>>>);

impl kubesched_framework::LivePods for Victims {
    fn with_label(&self, _: &str, _: &str, _: &str) -> Vec<Arc<PodInfo>> {
        Vec::new()
    }
    fn by_uid(&self, uid: &str) -> Option<Arc<PodInfo>> {
        self.0.lock().unwrap().get(uid).cloned()
    }
}

/// v1.35 (#134294): the preemptor stays held while its last victim is being deleted,
/// until that victim is gone or terminating, even if the preemption task has not ended.
#[tokio::test]
async fn the_preemptor_is_held_until_its_last_victim_is_being_deleted() {
    let victims: Vec<Arc<PodInfo>> = ["v1", "v2"]
        .iter()
        .map(|n| {
            bound(n, LOW, "node1")
                .uid(n)
                .container(&[("cpu", "1")])
                .info()
        })
        .collect();
    let snapshot = Arc::new(Snapshot::new(node_infos(
        vec![node("node1", "2", "110")],
        &victims,
    )));
    let live = Arc::new(Victims::default());
    for v in &victims {
        live.0.lock().unwrap().insert(v.uid.clone(), v.clone());
    }
    let client = Arc::new(Recorder {
        hold_second_delete: Some(DeleteHold::default()),
        ..Recorder::default()
    });
    let handle = Handle::builder()
        .snapshot(snapshot.clone())
        .client(client.clone())
        .live_pods(live.clone())
        .features(
            FeatureGates::defaults()
                .with(Feature::SchedulerAsyncPreemption, true)
                .expect("not locked"),
        )
        .build();
    let plugin = DefaultPreemption::new(&DefaultPreemptionArgs::default(), &handle).expect("args");
    let fw = framework(handle.clone(), plugin);
    let preemptor = pod("critical", HIGH)
        .uid("critical")
        .container(&[("cpu", "2")])
        .info();
    let mut state = CycleState::new();
    assert!(
        fw.run_pre_filter_plugins(&mut state, &preemptor, snapshot.list())
            .status
            .is_success()
    );
    let mut statuses = NodeToStatus::for_snapshot(snapshot.clone());
    for (i, n) in snapshot.list().iter().enumerate() {
        let s = fw.run_filter_plugins_with_nominated_pods(&state, &preemptor, n);
        statuses.set_at(i, s);
    }
    let (result, status) = fw
        .run_post_filter_plugins(&state, &preemptor, &statuses)
        .await;
    assert!(status.is_success(), "{status:?}");
    assert!(result.is_some());
    let held = |fw: &Framework| !fw.run_pre_enqueue_plugins(&preemptor).is_success();
    // The background task deletes the first victim and starts on the last one.
    let hold = client.hold_second_delete.as_ref().expect("held");
    hold.started.notified().await;
    assert!(held(&fw), "the last victim is still running");
    // The informer sees the victims terminating (the first one's deletion went
    // through, the last one's is on its way): the preemption is done.
    for info in live.0.lock().unwrap().values_mut() {
        let mut terminating = (**info).clone();
        terminating.terminating = true;
        *info = Arc::new(terminating);
    }
    assert!(!held(&fw), "the last victim is being deleted");
    hold.release.notify_one();
    while handle.background_tasks() > 0 {
        tokio::task::yield_now().await;
    }
    assert!(!held(&fw));
}
