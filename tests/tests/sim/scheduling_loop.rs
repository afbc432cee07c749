//! The scheduling loop's own behaviour on the in-memory cluster: node sampling and its
//! rotating start, Permit wait/allow/reject, and binding failures going back to the queue.
//! Two test plugins are registered here next to the in-tree ones.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::{CycleState, FilterPlugin, Handle, PermitPlugin, PluginError, Status};
use kubesched_sim::{Manifests, PodState, SimReport, Simulation, load_text};
use kubesched_tests as _;

/// Node names each pod's Filter saw, in order.
static VISITS: Mutex<BTreeMap<String, Vec<String>>> = Mutex::new(BTreeMap::new());

struct CountingFilter;

impl CountingFilter {
    fn new(_: &Handle) -> Result<Self, PluginError> {
        Ok(Self)
    }
}

impl FilterPlugin for CountingFilter {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if pod.namespace == "sampling" {
            VISITS
                .lock()
                .expect("lock")
                .entry(pod.name.clone())
                .or_default()
                .push(node.name().to_string());
        }
        Status::success()
    }
}

kubesched_framework::register_plugin! {
    name: "CountingFilter",
    plugin: CountingFilter,
    factory: CountingFilter::new,
}

/// Permit by label: `permit=deny` rejects, `permit=timeout` waits 1 s and times out,
/// `permit=later` waits and is allowed by another task once it is in the waiting list.
struct TestPermit {
    handle: Handle,
}

impl TestPermit {
    fn new(handle: &Handle) -> Result<Self, PluginError> {
        Ok(Self {
            handle: handle.clone(),
        })
    }
}

impl PermitPlugin for TestPermit {
    fn permit(&self, _: &CycleState, pod: &PodInfo, _: &str) -> (Status, Duration) {
        match pod.labels.get("permit").map(String::as_str) {
            Some("deny") => (Status::unschedulable("denied by the test"), Duration::ZERO),
            Some("timeout") => (Status::wait(), Duration::from_secs(1)),
            Some("later") => {
                let handle = self.handle.clone();
                let uid = pod.uid.clone();
                // No real-time sleep: the simulation's clock is virtual and jumps to the
                // 30 s deadline once nothing else can run, so a timer-driven allow raced it.
                // Yielding lets the pod reach the waiting list, then allows it.
                tokio::spawn(async move {
                    for _ in 0..10_000 {
                        if let Some(wp) = handle.waiting_pods().get(&uid) {
                            wp.allow("TestPermit");
                            return;
                        }
                        tokio::task::yield_now().await;
                    }
                });
                (Status::wait(), Duration::from_secs(30))
            }
            _ => (Status::success(), Duration::ZERO),
        }
    }
}

kubesched_framework::register_plugin! {
    name: "TestPermit",
    plugin: TestPermit,
    factory: TestPermit::new,
}

const CONFIG: &str = "
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
parallelism: 1
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: CountingFilter
      - name: TestPermit
";

fn run(manifests: &str, before: impl FnOnce(&Simulation)) -> SimReport {
    let loaded = kubesched_config::load_str(CONFIG, "config.yaml").expect("valid config");
    kubesched_tests::with_simulation(&loaded, 0, None, async |mut sim| {
        let m = kubesched_tests::manifests_of(manifests);
        before(&sim);
        sim.load(m, "input.yaml");
        sim.settle().await;
        sim.report()
    })
}

fn nodes(count: usize) -> String {
    (0..count)
        .map(|i| {
            format!(
                "---\napiVersion: v1\nkind: Node\nmetadata: {{name: n{i:03}}}\nstatus: {{allocatable: {{cpu: '4', memory: 8Gi, pods: '110'}}}}\n"
            )
        })
        .collect()
}

fn pod(ns: &str, name: &str, labels: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {ns}, labels: {{{labels}}}}}\nspec: {{containers: [{{name: c, image: app, resources: {{requests: {{cpu: 10m}}}}}}]}}\n"
    )
}

#[test]
fn sampling_finds_the_adaptive_count_and_rotates_its_start() {
    // 250 nodes: 50 - 250/125 = 48 % of them, 120 nodes, are enough per pod.
    let input = format!(
        "{}{}{}",
        nodes(250),
        pod("sampling", "first", ""),
        pod("sampling", "second", "")
    );
    let report = run(&input, |_| {});
    assert_eq!(report.summary.scheduled, 2);
    let visits = VISITS.lock().expect("lock").clone();
    let first = &visits["first"];
    let second = &visits["second"];
    assert_eq!(first.len(), 120);
    assert_eq!(second.len(), 120);
    assert_eq!(first[0], "n000");
    assert_eq!(first[119], "n119");
    // The second pod starts where the first stopped, and wraps around.
    assert_eq!(second[0], "n120");
    assert_eq!(second[119], "n239");
}

#[test]
fn permit_reject_wait_timeout_and_allow() {
    let input = format!(
        "{}{}{}{}",
        nodes(1),
        pod("permit", "denied", "permit: deny"),
        pod("permit", "slow", "permit: timeout"),
        pod("permit", "allowed", "permit: later")
    );
    let report = run(&input, |_| {});
    let by_name = |n: &str| {
        report
            .pods
            .iter()
            .find(|p| p.name == n)
            .expect("pod")
            .clone()
    };
    let denied = by_name("denied");
    assert_eq!(denied.status, PodState::Unschedulable);
    assert_eq!(
        denied.message.as_deref(),
        Some("0/1 nodes are available: 1 denied by the test.")
    );
    let slow = by_name("slow");
    assert_eq!(slow.status, PodState::Unschedulable);
    assert_eq!(
        slow.message.as_deref(),
        Some(
            "0/1 nodes are available: 1 rejected due to timeout after waiting 1s at plugin TestPermit."
        )
    );
    let allowed = by_name("allowed");
    assert_eq!(allowed.status, PodState::Scheduled);
    assert_eq!(allowed.node.as_deref(), Some("n000"));
}

#[test]
fn a_failed_bind_sends_the_pod_back_to_the_queue() {
    let input = format!("{}{}", nodes(1), pod("binding", "retried", ""));
    let mut events = Vec::new();
    let report = {
        let loaded = kubesched_config::load_str(CONFIG, "config.yaml").expect("valid config");
        kubesched_tests::with_simulation(&loaded, 0, None, async |mut sim| {
            sim.cluster().fail_next_binds(1);
            let mut m = Manifests::default();
            let mut problems = Vec::new();
            load_text(&input, "input.yaml", &mut m, &mut problems);
            sim.load(m, "input.yaml");
            sim.settle().await;
            events = sim.cluster().events();
            sim.report()
        })
    };
    let p = &report.pods[0];
    assert_eq!(p.status, PodState::Scheduled);
    assert_eq!(p.attempts, 2, "one failed bind, then a retry after backoff");
    let reasons: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e.reason.as_str(), e.note.as_str()))
        .collect();
    assert!(
        reasons.iter().any(|(r, n)| *r == "FailedScheduling"
            && n.contains("running Bind plugin \"DefaultBinder\"")
            && n.contains("simulated server error")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(
            |(r, n)| *r == "Scheduled" && *n == "Successfully assigned binding/retried to n000"
        ),
        "{reasons:?}"
    );
}
