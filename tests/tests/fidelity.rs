//! Behaviour kube-scheduler v1.34 has and kubesched must match, on the in-memory cluster:
//! what goes back to the queue after a failed attempt, and what happens to a pod's
//! nomination. One test plugin is registered in this binary next to the in-tree ones.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use kubesched_framework::model::k8s_openapi::api::core::v1 as api;
use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::{
    CycleState, Handle, Plugin, PluginError, PreFilterPlugin, PreFilterResult, Status,
};
use kubesched_scheduler::Scheduler;
use kubesched_sim::{
    Manifests, PodState, SimCluster, SimReport, Simulation, SimulationOptions, load_text,
};
use kubesched_tests as _;

/// What the test plugin does to a pod the first time it sees it, by namespace: the cluster
/// and scheduler to act on, and the change to make.
type Injection = (Arc<SimCluster>, Arc<Scheduler>, fn(&mut api::Pod));

static INJECT: Mutex<BTreeMap<String, Injection>> = Mutex::new(BTreeMap::new());

/// A PreFilter that changes the pod in the cluster while its cycle runs, and delivers the
/// change to the scheduler at once (as a watch would, concurrently with the cycle).
struct UpdateDuringCycle;

impl UpdateDuringCycle {
    fn new(_: &Handle) -> Result<Self, PluginError> {
        Ok(Self)
    }
}

impl Plugin for UpdateDuringCycle {
    fn name(&self) -> &str {
        "UpdateDuringCycle"
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for UpdateDuringCycle {
    fn pre_filter(
        &self,
        _: &mut CycleState,
        pod: &PodInfo,
        _: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        let injection = INJECT.lock().expect("lock").remove(&pod.namespace);
        if let Some((cluster, scheduler, change)) = injection {
            let key = format!("{}/{}", pod.namespace, pod.name);
            let mut updated = (*cluster.pod(&key).expect("pod in the cluster")).clone();
            change(&mut updated);
            cluster.apply_pod(updated);
            for c in cluster.drain_changes() {
                scheduler.handle_change(c);
            }
        }
        (None, Status::success())
    }
}

kubesched_framework::register_plugin! {
    name: "UpdateDuringCycle",
    extension_points: [PreFilter],
    factory: UpdateDuringCycle::new,
}

const CONFIG: &str = "
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: UpdateDuringCycle
- schedulerName: no-preemption
  plugins:
    postFilter:
      disabled:
      - name: DefaultPreemption
";

/// Loads `manifests`, lets `before` act on the simulation, settles, and hands the
/// simulation to `after` with the report.
fn run<T>(
    manifests: &str,
    before: impl FnOnce(&Simulation),
    after: impl FnOnce(&Simulation, SimReport) -> T,
) -> T {
    let loaded = kubesched_config::load_str(CONFIG, "config.yaml").expect("valid config");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut sim = Simulation::new(
            &loaded,
            SimulationOptions {
                seed: Some(0),
                explain: None,
                progress: None,
            },
        )
        .expect("simulation");
        let mut m = Manifests::default();
        let mut problems = Vec::new();
        load_text(manifests, "input.yaml", &mut m, &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        before(&sim);
        sim.load(m, "input.yaml");
        sim.settle().await;
        let report = sim.report();
        after(&sim, report)
    })
}

fn node(name: &str, cpu: &str, extra: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Node\nmetadata: {{name: {name}}}\nspec: {{{extra}}}\nstatus: {{allocatable: {{cpu: '{cpu}', memory: 8Gi, pods: '110'}}}}\n"
    )
}

fn pod(ns: &str, name: &str, cpu: &str, spec: &str, status: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {ns}, uid: {ns}-{name}}}\nspec: {{containers: [{{name: c, image: app, resources: {{requests: {{cpu: '{cpu}'}}}}}}]{spec}}}\nstatus: {{{status}}}\n"
    )
}

fn state_of(report: &SimReport, name: &str) -> PodState {
    report
        .pods
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("pod {name} in the report"))
        .status
}

fn add_toleration(pod: &mut api::Pod) {
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.tolerations
        .get_or_insert_with(Default::default)
        .push(api::Toleration {
            key: Some("dedicated".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        });
}

#[test]
fn a_failed_pod_goes_back_to_the_queue_as_the_informer_has_it_now() {
    // The toleration arrives while the pod's first attempt runs: that attempt still sees
    // the taint, but the pod must go back to the queue with the toleration, as upstream
    // re-reads its lister, and then fit.
    let input = format!(
        "{}{}",
        node(
            "tainted",
            "2",
            "taints: [{key: dedicated, value: db, effect: NoSchedule}]"
        ),
        pod("latest", "late-toleration", "100m", "", "")
    );
    run(
        &input,
        |sim| {
            INJECT.lock().expect("lock").insert(
                "latest".into(),
                (
                    sim.cluster().clone(),
                    sim.scheduler().clone(),
                    add_toleration,
                ),
            );
        },
        |_, report| {
            let p = report
                .pods
                .iter()
                .find(|p| p.name == "late-toleration")
                .expect("pod");
            assert_eq!(p.status, PodState::Scheduled, "{p:?}");
            assert_eq!(p.attempts, 2, "{p:?}");
        },
    );
}

#[test]
fn preemption_without_a_candidate_clears_the_nomination_at_once() {
    // `nominated` was nominated to n1 by an earlier preemption, but n1's pod outranks it
    // now: preemption finds no candidate. Upstream clears the nomination in memory and in
    // status at once, so n1 keeps no room for it and `small` fits there.
    let input = format!(
        "{}{}{}{}",
        node("n1", "2", ""),
        pod(
            "nom",
            "important",
            "1",
            ", nodeName: n1, priority: 1000",
            ""
        ),
        pod(
            "nom",
            "nominated",
            "2",
            ", priority: 500",
            "nominatedNodeName: n1"
        ),
        pod("nom", "small", "1", ", priority: 0", "")
    );
    run(
        &input,
        |_| {},
        |sim, report| {
            let cluster_pod = sim.cluster().pod("nom/nominated").expect("pod");
            let status = cluster_pod.status.as_ref().expect("status");
            assert_eq!(status.nominated_node_name, None, "cleared in status");
            assert_eq!(
                sim.scheduler()
                    .handle()
                    .nominator()
                    .node_of("nom-nominated"),
                None,
                "cleared in memory"
            );
            assert_eq!(state_of(&report, "nominated"), PodState::Unschedulable);
            assert_eq!(state_of(&report, "small"), PodState::Scheduled);
        },
    );
}

#[test]
fn without_post_filter_plugins_an_existing_nomination_is_left_alone() {
    // Someone else (an autoscaler, or another profile's preemption) nominated the pod;
    // a profile without PostFilter plugins has nothing to say about it.
    let input = format!(
        "{}{}",
        node("n1", "1", ""),
        pod(
            "keep",
            "big",
            "2",
            ", schedulerName: no-preemption",
            "nominatedNodeName: n1"
        )
    );
    run(
        &input,
        |_| {},
        |sim, report| {
            assert_eq!(state_of(&report, "big"), PodState::Unschedulable);
            let cluster_pod = sim.cluster().pod("keep/big").expect("pod");
            let status = cluster_pod.status.as_ref().expect("status");
            assert_eq!(status.nominated_node_name.as_deref(), Some("n1"));
            assert_eq!(
                sim.scheduler()
                    .handle()
                    .nominator()
                    .node_of("keep-big")
                    .as_deref(),
                Some("n1")
            );
        },
    );
}
