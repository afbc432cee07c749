//! Behaviour kube-scheduler v1.34 has and kubesched must match, on the in-memory cluster:
//! what goes back to the queue after a failed attempt, and what happens to a pod's
//! nomination. One test plugin is registered here next to the in-tree ones.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use kubesched_framework::model::k8s_openapi::api::core::v1 as api;
use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::{
    CycleState, Handle, PluginError, PreFilterPlugin, PreFilterResult, Status,
};
use kubesched_scheduler::Scheduler;
use kubesched_sim::{PodState, SimCluster, SimReport, Simulation};
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
    plugin: UpdateDuringCycle,
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
- schedulerName: no-post-filter
  plugins:
    postFilter:
      disabled:
      - name: '*'
";

/// Loads `manifests`, lets `before` act on the simulation, settles, and hands the
/// simulation to `after` with the report.
fn run<T>(
    manifests: &str,
    before: impl FnOnce(&Simulation),
    after: impl FnOnce(&Simulation, SimReport) -> T,
) -> T {
    let loaded = kubesched_config::load_str(CONFIG, "config.yaml").expect("valid config");
    kubesched_tests::with_simulation(&loaded, 0, None, async |mut sim| {
        let m = kubesched_tests::manifests_of(manifests);
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
fn a_failure_outside_post_filter_clears_the_nomination() {
    // v1.34 (kubernetes#133276) stopped clearing nominatedNodeName when an attempt failed
    // for another reason than preemption finding no candidate; v1.35 brought the clearing
    // back (kubernetes#135007). Here there is no node at all.
    let input = pod("keep", "waiting", "1", "", "nominatedNodeName: n1");
    run(
        &input,
        |_| {},
        |sim, report| {
            assert_eq!(state_of(&report, "waiting"), PodState::Unschedulable);
            let cluster_pod = sim.cluster().pod("keep/waiting").expect("pod");
            let status = cluster_pod.status.as_ref().expect("status");
            assert_eq!(status.nominated_node_name, None, "cleared in status");
            assert_eq!(
                sim.scheduler().handle().nominator().node_of("keep-waiting"),
                None,
                "cleared in memory"
            );
        },
    );
}

#[test]
fn without_any_post_filter_plugin_the_nomination_is_cleared() {
    // No PostFilter plugin, so no preemption of this profile nominated the pod: upstream
    // clears it like any other failure's (kubernetes#135007 made this case clear too).
    let input = format!(
        "{}{}",
        node("n1", "1", ""),
        pod(
            "keep",
            "big",
            "2",
            ", schedulerName: no-post-filter",
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
            assert_eq!(status.nominated_node_name, None);
            assert_eq!(
                sim.scheduler().handle().nominator().node_of("keep-big"),
                None
            );
        },
    );
}

#[test]
fn post_filter_plugins_that_nominate_nothing_leave_the_nomination_alone() {
    // Someone else (an autoscaler, or another profile's preemption) nominated the pod.
    // This profile's only PostFilter plugin is DynamicResources, which has no claims to
    // free here and returns no result: nothing decided about a nomination, so upstream
    // leaves it as it is.
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

#[test]
fn a_nomination_that_arrives_by_a_status_update_is_tried_first() {
    // The waiting pod learns its nominatedNodeName from a status-only update while it
    // sits in the queue (as a preemptor learns it from its own status patch). Upstream's
    // queue replaces the queued object on every update, so the next attempt evaluates
    // the nominated n1 first and takes it, though the roomier n2 would score higher in
    // a pass over all nodes.
    let input = format!(
        "{}{}{}{}{}",
        node("n1", "2", ""),
        node("n2", "4", ""),
        pod("nn", "on-n1", "2", ", nodeName: n1", ""),
        pod("nn", "on-n2", "4", ", nodeName: n2", ""),
        pod("nn", "waiting", "2", ", schedulerName: no-preemption", "")
    );
    let loaded = kubesched_config::load_str(CONFIG, "config.yaml").expect("valid config");
    kubesched_tests::with_simulation(&loaded, 0, None, async |mut sim| {
        sim.load(kubesched_tests::manifests_of(&input), "input.yaml");
        sim.settle().await;
        assert_eq!(state_of(&sim.report(), "waiting"), PodState::Unschedulable);

        let mut waiting = (*sim.cluster().pod("nn/waiting").expect("pod")).clone();
        waiting
            .status
            .get_or_insert_with(Default::default)
            .nominated_node_name = Some("n1".into());
        sim.cluster().apply_pod(waiting);
        sim.settle().await;
        assert!(sim.cluster().delete_pod_by_key("nn/on-n1"));
        assert!(sim.cluster().delete_pod_by_key("nn/on-n2"));
        sim.settle().await;

        let placed = sim.cluster().pod("nn/waiting").expect("pod");
        assert_eq!(
            placed.spec.as_ref().and_then(|s| s.node_name.as_deref()),
            Some("n1")
        );
    });
}

#[test]
fn a_victim_holds_its_room_for_its_grace_period_and_bound_pods_start_on_the_virtual_clock() {
    let input = format!(
        "{}{}{}{}",
        node("n1", "2", ""),
        node("n2", "1", ""),
        pod(
            "grace",
            "victim",
            "2",
            ", nodeName: n1, priority: 0, terminationGracePeriodSeconds: 60",
            ""
        ),
        pod("grace", "preemptor", "2", ", priority: 1000", "")
    );
    let loaded = kubesched_config::load_str(CONFIG, "config.yaml").expect("valid config");
    kubesched_tests::with_simulation(&loaded, 0, None, async |mut sim| {
        let m = kubesched_tests::manifests_of(&input);
        sim.load(m, "input.yaml");
        // Ten virtual seconds: the preemptor chose n1 and the victim is terminating there,
        // still holding its 2 cpu, marked as a preemption victim.
        sim.advance_clock(std::time::Duration::from_secs(10)).await;
        let victim = sim.cluster().pod("grace/victim").expect("still there");
        assert!(victim.metadata.deletion_timestamp.is_some());
        assert_eq!(victim.metadata.deletion_grace_period_seconds, Some(60));
        let conditions = victim
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        assert!(
            conditions.iter().any(|c| c.type_ == "DisruptionTarget"
                && c.status == "True"
                && c.reason.as_deref() == Some("PreemptionByScheduler")),
            "{conditions:?}"
        );
        assert_eq!(
            sim.cluster().terminating_pods(),
            vec!["grace/victim".to_string()]
        );
        let preemptor = sim.cluster().pod("grace/preemptor").expect("pod");
        assert!(
            preemptor
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .is_none()
        );
        assert_eq!(
            preemptor
                .status
                .as_ref()
                .and_then(|s| s.nominated_node_name.as_deref()),
            Some("n1")
        );

        // The grace period ends on the virtual clock; the preemptor binds after it.
        sim.settle().await;
        assert!(sim.cluster().pod("grace/victim").is_none());
        assert!(sim.clock().elapsed() >= std::time::Duration::from_secs(60));
        let preemptor = sim.cluster().pod("grace/preemptor").expect("pod");
        assert_eq!(
            preemptor.spec.as_ref().and_then(|s| s.node_name.as_deref()),
            Some("n1")
        );
        // It started when it was bound, on the virtual clock: a minute after the start.
        let started = preemptor
            .status
            .as_ref()
            .and_then(|s| s.start_time.clone())
            .expect("status.startTime");
        let begin = kubesched_framework::model::k8s_openapi::jiff::Timestamp::try_from(
            kubesched_framework::clock::Clock::wall_now(sim.clock()),
        )
        .expect("a valid time")
        .checked_sub(
            kubesched_framework::model::k8s_openapi::jiff::SignedDuration::try_from(
                sim.clock().elapsed(),
            )
            .expect("short"),
        )
        .expect("valid");
        let after = started.0.duration_since(begin);
        assert!(
            after.as_secs() >= 60,
            "started {after:?} after the beginning"
        );
    });
}

/// The value of one sample line of the Prometheus text, by its exact name and labels.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    })
}

#[test]
fn v1_34_metrics_are_recorded() {
    let input = format!(
        "{}{}{}{}",
        node("n1", "2", ""),
        pod("m", "victim", "2", ", nodeName: n1, priority: 0", ""),
        pod("m", "preemptor", "2", ", priority: 1000", ""),
        pod("m", "huge", "8", ", priority: 0", "")
    );
    let loaded = kubesched_config::load_str(CONFIG, "config.yaml").expect("valid config");
    let text = kubesched_tests::with_simulation(&loaded, 0, None, async |mut sim| {
        let m = kubesched_tests::manifests_of(&input);
        sim.load(m, "input.yaml");
        sim.settle().await;
        // A node too small for `huge`: its queueing hint runs and says skip.
        sim.load(
            kubesched_tests::manifests_of(&node("n2", "1", "")),
            "more.yaml",
        );
        sim.settle().await;
        sim.scheduler().metrics().encode()
    });
    let v = |series: &str| sample(&text, series).unwrap_or_else(|| panic!("{series} in\n{text}"));
    // One preemption with one victim.
    assert_eq!(v("scheduler_preemption_victims_count"), 1.0);
    assert_eq!(v("scheduler_preemption_victims_sum"), 1.0);
    // The preemptor was bound on its second attempt; the SLI counts from its first.
    assert_eq!(
        v("scheduler_pod_scheduling_sli_duration_seconds_count{attempts=\"2\"}"),
        1.0
    );
    // `huge` waits, rejected by NodeResourcesFit; the gauge follows the queue.
    assert_eq!(
        v(
            "scheduler_unschedulable_pods{plugin=\"NodeResourcesFit\",profile=\"default-scheduler\"}"
        ),
        1.0
    );
    assert_eq!(v("scheduler_pending_pods{queue=\"unschedulable\"}"), 1.0);
    assert_eq!(v("scheduler_cache_size{type=\"nodes\"}"), 2.0);
    assert_eq!(v("scheduler_cache_size{type=\"pods\"}"), 1.0);
    assert_eq!(v("scheduler_cache_size{type=\"assumed_pods\"}"), 0.0);
    assert_eq!(
        v("scheduler_event_handling_duration_seconds_count{event=\"NodeAdd\"}"),
        2.0
    );
    assert!(
        v("scheduler_event_handling_duration_seconds_count{event=\"UnscheduledPodAdd\"}") >= 2.0
    );
    assert!(
        v(
            "scheduler_queueing_hint_execution_duration_seconds_count{plugin=\"NodeResourcesFit\",event=\"NodeAdd\",hint=\"QueueSkip\"}"
        ) >= 1.0
    );
    // Filter ran NodeResourcesFit once per node and attempt; PreFilter once per attempt.
    assert!(
        v(
            "scheduler_plugin_evaluation_total{plugin=\"NodeResourcesFit\",extension_point=\"Filter\",profile=\"default-scheduler\"}"
        ) >= 3.0
    );
    assert!(
        v(
            "scheduler_plugin_evaluation_total{plugin=\"NodeResourcesFit\",extension_point=\"PreFilter\",profile=\"default-scheduler\"}"
        ) >= 3.0
    );
    // Upstream's buckets: 12 for extension points, 20 for plugins (plus +Inf each).
    let buckets = |name: &str| {
        let les: std::collections::BTreeSet<&str> = text
            .lines()
            .filter(|l| l.starts_with(&format!("{name}_bucket{{")))
            .filter_map(|l| l.split("le=\"").nth(1)?.split('"').next())
            .collect();
        les.len()
    };
    assert_eq!(
        buckets("scheduler_framework_extension_point_duration_seconds"),
        13
    );
    assert_eq!(buckets("scheduler_pod_scheduling_sli_duration_seconds"), 21);
    assert_eq!(buckets("scheduler_plugin_execution_duration_seconds"), 21);
    assert_eq!(buckets("scheduler_event_handling_duration_seconds"), 13);
}

#[test]
fn a_gated_pods_nomination_keeps_its_room_from_lower_priority_pods() {
    // v1.37 (kubernetes#139057): the nomination of a pod that a scheduling gate holds back
    // is known to the nominator from the moment the pod is added, so a lower-priority pod
    // does not take the room; an equal-or-higher one would. Once the gate opens, the
    // nominated pod gets its node.
    let input = format!(
        "{}{}{}",
        node("n1", "2", ""),
        pod(
            "gated",
            "nominated",
            "2",
            ", priority: 1000, schedulingGates: [{name: wait}]",
            "nominatedNodeName: n1"
        ),
        pod("gated", "low", "1", ", priority: 0", "")
    );
    let loaded = kubesched_config::load_str(CONFIG, "config.yaml").expect("valid config");
    kubesched_tests::with_simulation(&loaded, 0, None, async |mut sim| {
        sim.load(kubesched_tests::manifests_of(&input), "input.yaml");
        sim.settle().await;
        let report = sim.report();
        assert_eq!(state_of(&report, "low"), PodState::Unschedulable);
        let low = report.pods.iter().find(|p| p.name == "low").expect("low");
        assert_eq!(
            low.message.as_deref(),
            Some(
                "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
            )
        );
        let nominated = sim.cluster().pod("gated/nominated").expect("pod");
        assert!(
            nominated
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_none()
        );

        // The gate opens: the nominated pod takes n1.
        let mut opened = (*nominated).clone();
        opened
            .spec
            .get_or_insert_with(Default::default)
            .scheduling_gates = None;
        sim.cluster().apply_pod(opened);
        sim.settle().await;
        let placed = sim.cluster().pod("gated/nominated").expect("pod");
        assert_eq!(
            placed.spec.as_ref().and_then(|s| s.node_name.as_deref()),
            Some("n1")
        );
        assert!(
            sim.cluster()
                .pod("gated/low")
                .expect("pod")
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_none()
        );
    });
}

#[test]
fn a_gated_pods_nomination_does_not_hold_room_from_higher_priority_pods() {
    let input = format!(
        "{}{}{}",
        node("n1", "2", ""),
        pod(
            "gated-high",
            "nominated",
            "2",
            ", priority: 0, schedulingGates: [{name: wait}]",
            "nominatedNodeName: n1"
        ),
        pod("gated-high", "high", "1", ", priority: 1000", "")
    );
    let loaded = kubesched_config::load_str(CONFIG, "config.yaml").expect("valid config");
    kubesched_tests::with_simulation(&loaded, 0, None, async |mut sim| {
        sim.load(kubesched_tests::manifests_of(&input), "input.yaml");
        sim.settle().await;
        assert_eq!(state_of(&sim.report(), "high"), PodState::Scheduled);
    });
}
