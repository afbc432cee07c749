//! Queue tests: order, backoff, events and hints, in-flight events and the move-request
//! cycle, Pending, gates, the nominator, activation, and a property test over random
//! operation sequences.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kubesched_framework::clock::FakeClock;
use kubesched_framework::events::{
    ActionType, ClusterEvent, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
};
use kubesched_framework::metrics::NoMetrics;
use kubesched_framework::{
    CycleState, EnqueueExtensions, ExtensionPoint, FilterPlugin, Framework, Handle, HandleControl,
    Nominator, Plugin, PluginRef, PreEnqueuePlugin, ProfileSpec, QueueSortPlugin, QueuedPodInfo,
    Status,
};
use kubesched_model::{NodeInfo, PodInfo};
use kubesched_testing::{NodeBuilder, PodBuilder};
use parking_lot::Mutex;
use proptest::prelude::*;

use super::*;

// ---- test plugins ----------------------------------------------------------------------

/// Orders by priority, higher first, then earlier timestamp — or the reverse priority order
/// when `reverse` (to prove the plugin is the one used).
struct Sort {
    reverse: bool,
}

impl Plugin for Sort {
    fn name(&self) -> &str {
        "Sort"
    }
    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        Some(self)
    }
}

impl QueueSortPlugin for Sort {
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        let (pa, pb) = (a.pod_info.priority, b.pod_info.priority);
        let higher = if self.reverse { pa < pb } else { pa > pb };
        higher || (pa == pb && a.timestamp < b.timestamp)
    }
}

/// Gates pods that have scheduling gates; lets them in when the last one goes.
struct Gate;

impl Plugin for Gate {
    fn name(&self) -> &str {
        "Gate"
    }
    fn as_pre_enqueue(&self) -> Option<&dyn PreEnqueuePlugin> {
        Some(self)
    }
    fn as_enqueue_extensions(&self) -> Option<&dyn EnqueueExtensions> {
        Some(self)
    }
}

impl PreEnqueuePlugin for Gate {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        if pod.scheduling_gates.is_empty() {
            Status::success()
        } else {
            Status::unresolvable(format!(
                "waiting for scheduling gates: {:?}",
                pod.scheduling_gates
            ))
        }
    }
}

impl EnqueueExtensions for Gate {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        vec![ClusterEventWithHint::with_hint(
            EventResource::Pod,
            ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
            |pod, _, new| {
                let Some(new) = new.and_then(EventObject::as_pod) else {
                    return Err("no pod".into());
                };
                Ok(if new.uid == pod.uid {
                    QueueingHint::Queue
                } else {
                    QueueingHint::Skip
                })
            },
        )]
    }
}

/// A Filter plugin that registers the given events; `Filter` itself always passes (the
/// tests set rejecting plugins by hand).
struct Registers {
    name: &'static str,
    events: EventsFn,
}

impl Plugin for Registers {
    fn name(&self) -> &str {
        self.name
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_enqueue_extensions(&self) -> Option<&dyn EnqueueExtensions> {
        Some(self)
    }
}

impl FilterPlugin for Registers {
    fn filter(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Status {
        Status::success()
    }
}

impl EnqueueExtensions for Registers {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        (self.events)()
    }
}

type EventsFn = fn() -> Vec<ClusterEventWithHint>;

/// Like NodeResourcesFit: a new node, a deleted pod or a pod scale-down may help.
const FIT: &str = "Fit";
/// A hint on node label updates: Queue only when the new node is labelled `ready=true`.
const LABELLED: &str = "Labelled";
/// A hint that always fails.
const BROKEN: &str = "Broken";
/// Answers Pending; a new node may help.
const WAITER: &str = "Waiter";
/// A Filter plugin without EnqueueExtensions: registered for every event.
const SILENT: &str = "Silent";
/// Registered for the rejected pod's own relabelling (v1.37's TargetPod), no hint.
const OWN_LABELS: &str = "OwnLabels";
/// Registered for other unscheduled pods: their relabelling and their creation, no hint.
const OTHERS: &str = "Others";

fn own_labels_events() -> Vec<ClusterEventWithHint> {
    vec![ClusterEventWithHint::new(
        EventResource::TargetPod,
        ActionType::UPDATE_POD_LABEL,
    )]
}

fn others_events() -> Vec<ClusterEventWithHint> {
    vec![ClusterEventWithHint::new(
        EventResource::UnscheduledPod,
        ActionType::UPDATE_POD_LABEL.union(ActionType::ADD),
    )]
}

fn fit_events() -> Vec<ClusterEventWithHint> {
    vec![
        ClusterEventWithHint::new(EventResource::Node, ActionType::ADD),
        ClusterEventWithHint::new(
            EventResource::Pod,
            ActionType::DELETE.union(ActionType::UPDATE_POD_SCALE_DOWN),
        ),
    ]
}

fn labelled_events() -> Vec<ClusterEventWithHint> {
    vec![ClusterEventWithHint::with_hint(
        EventResource::Node,
        ActionType::UPDATE_NODE_LABEL,
        |_, _, new| {
            let ready = new
                .and_then(EventObject::as_node)
                .is_some_and(|n| n.labels.get("ready").map(String::as_str) == Some("true"));
            Ok(if ready {
                QueueingHint::Queue
            } else {
                QueueingHint::Skip
            })
        },
    )]
}

fn broken_events() -> Vec<ClusterEventWithHint> {
    vec![ClusterEventWithHint::with_hint(
        EventResource::Node,
        ActionType::UPDATE_NODE_TAINT,
        |_, _, _| Err("cannot decide".into()),
    )]
}

fn waiter_events() -> Vec<ClusterEventWithHint> {
    vec![ClusterEventWithHint::new(
        EventResource::Node,
        ActionType::ADD,
    )]
}

struct Silent;

impl Plugin for Silent {
    fn name(&self) -> &str {
        SILENT
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl FilterPlugin for Silent {
    fn filter(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Status {
        Status::success()
    }
}

fn framework(name: &str, sort: Option<bool>, handle: &Handle) -> Arc<Framework> {
    let mut instances: BTreeMap<String, Arc<dyn Plugin>> = BTreeMap::new();
    let mut spec = ProfileSpec {
        scheduler_name: name.to_string(),
        ..Default::default()
    };
    if let Some(reverse) = sort {
        instances.insert("Sort".into(), Arc::new(Sort { reverse }));
        spec.plugins
            .insert(ExtensionPoint::QueueSort, vec![PluginRef::new("Sort")]);
    }
    instances.insert("Gate".into(), Arc::new(Gate));
    spec.plugins
        .insert(ExtensionPoint::PreEnqueue, vec![PluginRef::new("Gate")]);
    let registering: [(&'static str, EventsFn); 6] = [
        (FIT, fit_events),
        (LABELLED, labelled_events),
        (BROKEN, broken_events),
        (WAITER, waiter_events),
        (OWN_LABELS, own_labels_events),
        (OTHERS, others_events),
    ];
    let mut filters = Vec::new();
    for (name, events) in registering {
        instances.insert(name.into(), Arc::new(Registers { name, events }));
        filters.push(PluginRef::new(name));
    }
    instances.insert(SILENT.into(), Arc::new(Silent));
    filters.push(PluginRef::new(SILENT));
    spec.plugins.insert(ExtensionPoint::Filter, filters);
    Arc::new(
        Framework::from_instances(
            spec,
            handle.clone(),
            Arc::new(NoMetrics),
            instances,
            BTreeMap::new(),
        )
        .expect("test framework"),
    )
}

#[derive(Default)]
struct Recorded(
    Mutex<Vec<(String, String)>>,
    /// The last pending counts reported.
    Mutex<Option<QueueCounts>>,
    /// `scheduler_unschedulable_pods` by (plugin, profile).
    Mutex<BTreeMap<(String, String), i64>>,
    /// Queueing hints run: (plugin, event, hint).
    Mutex<Vec<(String, String, String)>>,
);

impl QueueMetrics for Recorded {
    fn incoming(&self, queue: &str, event: &str) {
        self.0.lock().push((queue.to_string(), event.to_string()));
    }
    fn pending(&self, counts: QueueCounts) {
        *self.1.lock() = Some(counts);
    }
    fn unschedulable_reason(&self, plugin: &str, profile: &str, delta: i64) {
        *self
            .2
            .lock()
            .entry((plugin.to_string(), profile.to_string()))
            .or_default() += delta;
    }
    fn queueing_hint(&self, plugin: &str, event: &str, hint: &'static str, _took: Duration) {
        self.3
            .lock()
            .push((plugin.to_string(), event.to_string(), hint.to_string()));
    }
}

struct Env {
    q: SchedulingQueue,
    clock: FakeClock,
    nominator: Arc<Nominator>,
    metrics: Arc<Recorded>,
    handle: HandleControl,
}

fn env_with(sort: Option<bool>) -> Env {
    // Most tests pin the queue without SchedulerPopFromBackoffQ: backoff is waited out.
    env_configured(
        sort,
        QueueConfig {
            pop_from_backoff: false,
            ..QueueConfig::default()
        },
    )
}

fn env_configured(sort: Option<bool>, config: QueueConfig) -> Env {
    let clock = FakeClock::new();
    let nominator = Arc::new(Nominator::new());
    let handle = Handle::builder()
        .nominator(nominator.clone())
        .clock(Arc::new(clock.clone()))
        .build_with_control();
    let mut profiles = BTreeMap::new();
    profiles.insert(
        "default-scheduler".to_string(),
        framework("default-scheduler", sort, &handle),
    );
    let metrics = Arc::new(Recorded::default());
    let q = SchedulingQueue::new(
        profiles,
        nominator.clone(),
        Arc::new(clock.clone()),
        config,
        Some(metrics.clone() as Arc<dyn QueueMetrics>),
    );
    Env {
        q,
        clock,
        nominator,
        metrics,
        handle,
    }
}

fn env() -> Env {
    env_with(Some(false))
}

fn pod(name: &str) -> Arc<PodInfo> {
    PodBuilder::new(name).info()
}

fn node_event(action: ActionType) -> ClusterEvent {
    ClusterEvent::new(EventResource::Node, action)
}

fn node_obj(labels: &[(&str, &str)]) -> EventObject {
    let mut b = NodeBuilder::new("n");
    for (k, v) in labels {
        b = b.label(k, v);
    }
    EventObject::Node(b.model())
}

impl Env {
    /// Adds a pod and moves the clock a little, so pods added in a row pop in that order.
    fn add(&self, p: Arc<PodInfo>) {
        self.q.add(p);
        self.clock.advance(Duration::from_millis(1));
    }

    fn sub_queue(&self, uid: &str) -> Option<SubQueue> {
        self.q
            .pending_pods()
            .into_iter()
            .find(|(p, _)| p.uid == uid)
            .map(|(_, s)| s)
    }

    /// Pops the next pod and fails it, rejected by `plugins` (and `pending` as Pending).
    fn pop_and_fail(&self, plugins: &[&str], pending: &[&str]) -> String {
        let mut qpi = self.q.pop().expect("a pod to pop");
        let cycle = self.q.scheduling_cycle();
        qpi.unschedulable_plugins = plugins.iter().map(|p| p.to_string()).collect();
        qpi.pending_plugins = pending.iter().map(|p| p.to_string()).collect();
        let uid = qpi.pod_info.uid.clone();
        self.q
            .add_unschedulable_if_not_present(qpi, cycle)
            .expect("not queued twice");
        uid
    }

    fn popped_order(&self) -> Vec<String> {
        std::iter::from_fn(|| self.q.pop())
            .map(|q| {
                self.q.done(&q.pod_info.uid);
                q.pod_info.name.clone()
            })
            .collect()
    }

    fn incoming(&self) -> Vec<(String, String)> {
        std::mem::take(&mut *self.metrics.0.lock())
    }
}

// ---- order ------------------------------------------------------------------------------

#[test]
fn active_queue_follows_queue_sort() {
    // (sort plugin, expected order) for pods added as (name, priority) one second apart.
    let pods = [("low", 1), ("high", 10), ("mid-early", 5), ("mid-late", 5)];
    let cases = [
        (
            "PrioritySort-like plugin",
            Some(false),
            vec!["high", "mid-early", "mid-late", "low"],
        ),
        (
            "reversed plugin",
            Some(true),
            vec!["low", "mid-early", "mid-late", "high"],
        ),
        (
            "no QueueSort: priority then time",
            None,
            vec!["high", "mid-early", "mid-late", "low"],
        ),
    ];
    for (name, sort, want) in cases {
        let e = env_with(sort);
        for (p, prio) in pods {
            e.add(PodBuilder::new(p).priority(prio).info());
            e.clock.advance(Duration::from_secs(1));
        }
        assert_eq!(e.popped_order(), want, "{name}");
    }
}

#[test]
fn pods_of_other_schedulers_are_not_queued() {
    let e = env();
    e.add(
        PodBuilder::new("other")
            .scheduler_name("someone-else")
            .info(),
    );
    assert_eq!(e.q.counts(), QueueCounts::default());
    assert!(e.q.pop().is_none());
}

#[test]
fn pop_counts_cycles_and_attempts() {
    let e = env();
    e.add(pod("a"));
    assert_eq!(e.q.scheduling_cycle(), 0);
    let a = e.q.pop().expect("a");
    assert_eq!(a.attempts, 1);
    assert!(a.initial_attempt_timestamp.is_some());
    assert_eq!(e.q.scheduling_cycle(), 1);
    assert!(e.q.pop().is_none());
    assert_eq!(e.incoming(), [("active".into(), "PodAdd".into())]);
}

// ---- backoff ----------------------------------------------------------------------------

#[test]
fn backoff_doubles_up_to_the_max() {
    let e = env();
    e.add(pod("p"));
    // An error (no rejecting plugin) always goes through backoffQ.
    for (attempt, secs) in [1u64, 2, 4, 8, 10, 10].into_iter().enumerate() {
        e.pop_and_fail(&[], &[]);
        assert_eq!(
            e.sub_queue("p"),
            Some(SubQueue::Backoff),
            "attempt {}",
            attempt + 1
        );
        let expiry = e.q.next_backoff_expiry().expect("backing off");
        assert_eq!(
            expiry - e.clock.now(),
            Duration::from_secs(secs),
            "attempt {}",
            attempt + 1
        );
        e.clock
            .advance(Duration::from_secs(secs) - Duration::from_millis(1));
        e.q.flush_backoff_completed();
        assert_eq!(e.sub_queue("p"), Some(SubQueue::Backoff));
        e.clock.advance(Duration::from_millis(1));
        e.q.flush_backoff_completed();
        assert_eq!(e.sub_queue("p"), Some(SubQueue::Active));
    }
    assert!(e.q.next_backoff_expiry().is_none());
}

#[test]
fn custom_backoff_bounds() {
    let clock = FakeClock::new();
    let q = SchedulingQueue::new(
        BTreeMap::from([(
            "default-scheduler".to_string(),
            framework("default-scheduler", Some(false), &Handle::default()),
        )]),
        Arc::new(Nominator::new()),
        Arc::new(clock.clone()),
        QueueConfig {
            initial_backoff: Duration::from_secs(3),
            max_backoff: Duration::from_secs(20),
            max_in_unschedulable: Duration::from_secs(60),
            pop_from_backoff: false,
        },
        None,
    );
    let want = [3, 6, 12, 20, 20];
    for attempts in 1..=5u32 {
        assert_eq!(
            q.backoff_duration(attempts),
            Duration::from_secs(want[attempts as usize - 1])
        );
    }
    assert_eq!(q.backoff_duration(0), Duration::ZERO);
    assert_eq!(q.backoff_duration(u32::MAX), Duration::from_secs(20));
}

// ---- metrics ----------------------------------------------------------------------------

#[test]
fn pending_counts_are_reported_on_every_change_not_only_after_attempts() {
    let e = env();
    // A gated pod arrives while nothing is being scheduled.
    e.add(PodBuilder::new("gated").scheduling_gate("wait").info());
    assert_eq!(
        *e.metrics.1.lock(),
        Some(QueueCounts {
            gated: 1,
            ..QueueCounts::default()
        })
    );
    e.add(pod("ready"));
    assert_eq!(
        e.metrics.1.lock().map(|c| (c.active, c.gated)),
        Some((1, 1))
    );
    e.q.pop().expect("ready");
    assert_eq!(e.metrics.1.lock().map(|c| c.active), Some(0));
}

#[test]
fn failed_pods_are_counted_by_rejecting_plugin_until_popped_or_gone() {
    let e = env();
    let count = |plugin: &str| {
        e.metrics
            .2
            .lock()
            .get(&(plugin.to_string(), "default-scheduler".to_string()))
            .copied()
            .unwrap_or(0)
    };
    e.add(pod("a"));
    e.add(pod("b"));
    e.pop_and_fail(&[FIT], &[]);
    e.pop_and_fail(&[FIT, "Other"], &[WAITER]);
    assert_eq!((count(FIT), count("Other"), count(WAITER)), (2, 1, 1));
    // An event brings both back; popping one takes it out of the count.
    e.q.move_all_to_active_or_backoff(node_event(ActionType::ADD), None, Some(&node_obj(&[])));
    e.clock.advance(Duration::from_secs(20));
    e.q.flush_backoff_completed();
    let popped = e.q.pop().expect("a pod");
    let other = if popped.pod_info.name == "a" {
        "b"
    } else {
        "a"
    };
    assert_eq!(count(FIT), 1);
    // The other one leaves the queue (deleted): nothing is left counted.
    e.q.delete(&PodBuilder::new(other).info());
    assert_eq!((count(FIT), count("Other"), count(WAITER)), (0, 0, 0));
}

#[test]
fn gated_pods_are_counted_under_their_gate_until_popped() {
    let e = env();
    let gate = || {
        e.metrics
            .2
            .lock()
            .get(&("Gate".to_string(), "default-scheduler".to_string()))
            .copied()
            .unwrap_or(0)
    };
    let gated = PodBuilder::new("g").scheduling_gate("wait").info();
    e.add(gated.clone());
    assert_eq!(gate(), 1);
    // Another update that keeps the gate does not count it twice.
    let relabelled = PodBuilder::new("g")
        .scheduling_gate("wait")
        .label("x", "y")
        .info();
    e.q.update(&gated, relabelled.clone());
    assert_eq!(gate(), 1);
    // Ungated, it stays counted while it waits in activeQ, and leaves the count when popped.
    e.q.update(&relabelled, PodBuilder::new("g").label("x", "y").info());
    assert_eq!(gate(), 1);
    e.q.pop().expect("g");
    assert_eq!(gate(), 0);
}

#[test]
fn queueing_hints_are_reported_with_their_answer() {
    let e = env();
    e.add(pod("p"));
    e.pop_and_fail(&[LABELLED, BROKEN], &[]);
    let update = ActionType::UPDATE_NODE_LABEL;
    e.q.move_all_to_active_or_backoff(node_event(update), None, Some(&node_obj(&[])));
    e.q.move_all_to_active_or_backoff(
        node_event(ActionType::UPDATE_NODE_TAINT),
        None,
        Some(&node_obj(&[])),
    );
    let hints = e.metrics.3.lock().clone();
    assert_eq!(
        hints,
        [
            (
                LABELLED.into(),
                "NodeUpdateNodeLabel".into(),
                "QueueSkip".into()
            ),
            (BROKEN.into(), "NodeUpdateNodeTaint".into(), "Error".into()),
        ]
    );
}

// ---- SchedulerPopFromBackoffQ -------------------------------------------------------------

fn env_popping() -> Env {
    env_configured(Some(false), QueueConfig::default())
}

/// Pops `name`, then fails it rejected by Fit with a Node/Add arriving meanwhile, which sends
/// it to backoffQ.
fn fail_into_backoff(e: &Env, name: &str) {
    let mut qpi = e.q.pop().expect("a pod");
    assert_eq!(qpi.pod_info.name, name);
    let cycle = e.q.scheduling_cycle();
    e.q.move_all_to_active_or_backoff(node_event(ActionType::ADD), None, Some(&node_obj(&[])));
    qpi.unschedulable_plugins = BTreeSet::from([FIT.to_string()]);
    e.q.add_unschedulable_if_not_present(qpi, cycle).unwrap();
    assert_eq!(e.sub_queue(name), Some(SubQueue::Backoff));
}

#[test]
fn an_empty_active_queue_pops_from_backoff() {
    let e = env_popping();
    e.add(pod("p"));
    fail_into_backoff(&e, "p");
    e.incoming();
    // Still backing off, but nothing else is ready: it is tried again at once.
    let again = e.q.pop().expect("popped from backoffQ");
    assert_eq!(again.pod_info.name, "p");
    assert_eq!(again.attempts, 2);
    assert_eq!(e.incoming(), [("active".into(), "PopFromBackoffQ".into())]);
    // Without the gate the pod waits its backoff out.
    let e = env();
    e.add(pod("p"));
    fail_into_backoff(&e, "p");
    assert!(e.q.pop().is_none());
}

#[test]
fn active_pods_and_errors_are_not_overtaken() {
    let e = env_popping();
    e.add(pod("rejected"));
    e.add(pod("broken"));
    fail_into_backoff(&e, "rejected");
    // An error waits in its own heap and is never popped early.
    e.pop_and_fail(&[], &[]);
    assert_eq!(e.sub_queue("broken"), Some(SubQueue::Backoff));
    e.add(pod("fresh"));
    assert_eq!(e.popped_order(), ["fresh", "rejected"]);
    assert_eq!(e.sub_queue("broken"), Some(SubQueue::Backoff));
    assert!(e.q.pop().is_none());
    // Its backoff over, the error is flushed as usual.
    e.clock.advance(Duration::from_secs(2));
    e.q.flush_backoff_completed();
    assert_eq!(e.popped_order(), ["broken"]);
}

#[test]
fn backoff_ends_are_rounded_up_to_one_second_windows_ordered_by_priority() {
    let e = env_popping();
    // Both fail within the same second: their backoffs end in the same window, so the
    // higher priority pops first although it failed later.
    e.add(PodBuilder::new("low").priority(1).info());
    e.add(PodBuilder::new("high").priority(10).info());
    e.clock.advance(Duration::from_millis(100));
    // high pops first (priority); fail it, then low 300 ms later.
    fail_into_backoff(&e, "high");
    e.clock.advance(Duration::from_millis(300));
    fail_into_backoff(&e, "low");
    let pending: Vec<String> =
        e.q.pending_pods()
            .into_iter()
            .map(|(p, _)| p.name.clone())
            .collect();
    assert_eq!(pending, ["high", "low"]);
    // The window ends at the next whole second after the 1 s backoff, not before.
    let end = e.q.next_backoff_expiry().expect("backing off");
    let since_start = end.duration_since(e.q.epoch);
    assert_eq!(since_start.subsec_nanos(), 0, "{since_start:?}");
    assert_eq!(since_start, Duration::from_secs(2));

    // Same failures the other way round: low fails first, high 300 ms later in the same
    // window; high still comes first.
    let e = env_popping();
    e.add(PodBuilder::new("low").priority(1).info());
    let low = e.q.pop().expect("low");
    e.add(PodBuilder::new("high").priority(10).info());
    let high = e.q.pop().expect("high");
    for (mut q, wait) in [(low, 0), (high, 300)] {
        e.clock.advance(Duration::from_millis(wait));
        let cycle = e.q.scheduling_cycle();
        e.q.move_all_to_active_or_backoff(node_event(ActionType::ADD), None, Some(&node_obj(&[])));
        q.unschedulable_plugins = BTreeSet::from([FIT.to_string()]);
        e.q.add_unschedulable_if_not_present(q, cycle).unwrap();
    }
    assert_eq!(e.popped_order(), ["high", "low"]);
}

// ---- events and hints -------------------------------------------------------------------

#[test]
fn events_move_only_pods_whose_rejecting_plugin_registered_them() {
    let e = env();
    e.add(pod("fit"));
    e.add(pod("labelled"));
    e.add(pod("silent"));
    e.pop_and_fail(&[FIT], &[]);
    e.pop_and_fail(&[LABELLED], &[]);
    e.pop_and_fail(&[SILENT], &[]);
    assert_eq!(e.q.counts().unschedulable, 3);
    e.incoming();

    // Nobody registered PersistentVolume events but Silent (through the wildcard).
    e.q.move_all_to_active_or_backoff(
        ClusterEvent::new(EventResource::PersistentVolume, ActionType::ADD),
        None,
        Some(&EventObject::Other),
    );
    assert_eq!(e.sub_queue("fit"), Some(SubQueue::Unschedulable));
    assert_eq!(e.sub_queue("labelled"), Some(SubQueue::Unschedulable));
    assert_eq!(e.sub_queue("silent"), Some(SubQueue::Backoff));
    assert_eq!(
        e.incoming(),
        [("backoff".into(), "PersistentVolumeAdd".into())]
    );

    // Node/Add: Fit registered it; Labelled did not.
    e.q.move_all_to_active_or_backoff(node_event(ActionType::ADD), None, Some(&node_obj(&[])));
    assert_eq!(e.sub_queue("fit"), Some(SubQueue::Backoff));
    assert_eq!(e.sub_queue("labelled"), Some(SubQueue::Unschedulable));
    assert_eq!(e.incoming(), [("backoff".into(), "NodeAdd".into())]);
}

#[test]
fn moved_pods_skip_backoff_when_it_is_over() {
    let e = env();
    e.add(pod("p"));
    e.pop_and_fail(&[FIT], &[]);
    e.clock.advance(Duration::from_secs(1));
    e.q.move_all_to_active_or_backoff(node_event(ActionType::ADD), None, None);
    assert_eq!(e.sub_queue("p"), Some(SubQueue::Active));
}

#[test]
fn queueing_hints_decide() {
    struct Case {
        name: &'static str,
        plugin: &'static str,
        event: ActionType,
        labels: &'static [(&'static str, &'static str)],
        moved: bool,
    }
    let cases = [
        Case {
            name: "hint says Skip",
            plugin: LABELLED,
            event: ActionType::UPDATE_NODE_LABEL,
            labels: &[("ready", "false")],
            moved: false,
        },
        Case {
            name: "hint says Queue",
            plugin: LABELLED,
            event: ActionType::UPDATE_NODE_LABEL,
            labels: &[("ready", "true")],
            moved: true,
        },
        Case {
            name: "event not registered by the plugin",
            plugin: LABELLED,
            event: ActionType::UPDATE_NODE_TAINT,
            labels: &[("ready", "true")],
            moved: false,
        },
        Case {
            name: "hint error counts as Queue",
            plugin: BROKEN,
            event: ActionType::UPDATE_NODE_TAINT,
            labels: &[],
            moved: true,
        },
        Case {
            name: "registration covers several actions",
            plugin: LABELLED,
            event: ActionType::UPDATE_NODE_LABEL.union(ActionType::UPDATE_NODE_TAINT),
            labels: &[("ready", "true")],
            moved: true,
        },
    ];
    for case in cases {
        let e = env();
        e.add(pod("p"));
        e.pop_and_fail(&[case.plugin], &[]);
        e.q.move_all_to_active_or_backoff(
            node_event(case.event),
            Some(&node_obj(&[])),
            Some(&node_obj(case.labels)),
        );
        let want = if case.moved {
            SubQueue::Backoff
        } else {
            SubQueue::Unschedulable
        };
        assert_eq!(e.sub_queue("p"), Some(want), "{}", case.name);
    }
}

#[test]
fn pending_rejection_skips_backoff() {
    let e = env();
    e.add(pod("pending"));
    e.add(pod("mixed"));
    e.pop_and_fail(&[], &[WAITER]);
    e.pop_and_fail(&[FIT], &[WAITER]);
    e.q.move_all_to_active_or_backoff(node_event(ActionType::ADD), None, None);
    // Backoff of one second is not over, yet both go straight to activeQ: a Pending
    // plugin's Queue wins.
    assert!(e.q.next_backoff_expiry().is_none());
    assert_eq!(e.sub_queue("pending"), Some(SubQueue::Active));
    assert_eq!(e.sub_queue("mixed"), Some(SubQueue::Active));
}

#[test]
fn five_minute_flush_sends_unschedulable_pods_back() {
    let e = env();
    e.add(pod("p"));
    e.pop_and_fail(&[LABELLED], &[]);
    e.incoming();
    e.clock.advance(Duration::from_secs(5 * 60));
    e.q.flush_unschedulable_left_over();
    assert_eq!(
        e.sub_queue("p"),
        Some(SubQueue::Unschedulable),
        "not longer than 5 min yet"
    );
    e.clock.advance(Duration::from_millis(1));
    e.q.flush_unschedulable_left_over();
    assert_eq!(e.sub_queue("p"), Some(SubQueue::Active));
    assert_eq!(
        e.incoming(),
        [("active".into(), "UnschedulableTimeout".into())]
    );
    // The pod remembers it came back by the flush (for
    // scheduler_pod_scheduled_after_flush_total) ...
    let mut again = e.q.pop().expect("p");
    assert!(again.flushed_from_unschedulable);
    // ... and forgets it when an event brings it back the next time.
    let cycle = e.q.scheduling_cycle();
    again.unschedulable_plugins = BTreeSet::from([SILENT.to_string()]);
    e.q.add_unschedulable_if_not_present(again, cycle)
        .expect("queued");
    e.q.move_all_to_active_or_backoff(
        ClusterEvent::new(EventResource::PersistentVolume, ActionType::ADD),
        None,
        Some(&EventObject::Other),
    );
    e.clock.advance(Duration::from_secs(10));
    e.q.flush_backoff_completed();
    assert!(!e.q.pop().expect("p again").flushed_from_unschedulable);
}

// ---- in flight and the move-request cycle -------------------------------------------------

#[test]
fn events_during_the_attempt_send_the_pod_to_backoff() {
    struct Case {
        name: &'static str,
        event: ActionType,
        queue: SubQueue,
    }
    let cases = [
        Case {
            name: "a Node/Add arrived while Fit rejected the pod",
            event: ActionType::ADD,
            queue: SubQueue::Backoff,
        },
        Case {
            name: "an event Fit does not care about",
            event: ActionType::UPDATE_NODE_ANNOTATION,
            queue: SubQueue::Unschedulable,
        },
    ];
    for case in cases {
        let e = env();
        e.add(pod("p"));
        let mut qpi = e.q.pop().expect("p");
        let cycle = e.q.scheduling_cycle();
        e.q.move_all_to_active_or_backoff(node_event(case.event), None, Some(&node_obj(&[])));
        qpi.unschedulable_plugins = BTreeSet::from([FIT.to_string()]);
        e.q.add_unschedulable_if_not_present(qpi, cycle).unwrap();
        assert_eq!(e.sub_queue("p"), Some(case.queue), "{}", case.name);
        // The failure made the pod done: nothing stays in flight.
        assert!(e.q.state.lock().in_flight.is_empty(), "{}", case.name);
    }
}

/// v1.37 (#135905): a pending pod's own update is a TargetPod event, heard by the
/// registrations for the pod itself (or the broad Pod), not by those for other unscheduled
/// pods; v1.34 reported it as UnscheduledPod, which those heard.
#[test]
fn a_pods_own_update_is_a_target_pod_event() {
    let e = env();
    e.add(pod("own"));
    e.add(pod("other"));
    e.pop_and_fail(&[OWN_LABELS], &[]);
    e.pop_and_fail(&[OTHERS], &[]);
    e.incoming();
    for name in ["own", "other"] {
        let relabelled = PodBuilder::new(name).label("x", "y").info();
        e.q.update(&pod(name), relabelled);
    }
    assert_eq!(e.sub_queue("own"), Some(SubQueue::Backoff));
    assert_eq!(e.sub_queue("other"), Some(SubQueue::Unschedulable));
    assert_eq!(
        e.incoming(),
        [("backoff".into(), "TargetPodUpdatePodLabel".into())]
    );
}

/// A TargetPod event recorded while several pods were in flight is the updated pod's
/// alone: another in-flight pod rejected by a plugin registered for TargetPod does not
/// take it as a reason to retry.
#[test]
fn an_in_flight_pods_own_update_is_not_heard_by_the_others() {
    let e = env();
    e.add(pod("a"));
    e.add(pod("b"));
    let mut a = e.q.pop().expect("a");
    let mut b = e.q.pop().expect("b");
    let relabelled = PodBuilder::new("b").label("x", "y").info();
    e.q.update(&pod("b"), relabelled);
    for q in [&mut a, &mut b] {
        q.unschedulable_plugins = BTreeSet::from([OWN_LABELS.to_string()]);
    }
    e.q.add_unschedulable_if_not_present(a, 1).unwrap();
    e.q.add_unschedulable_if_not_present(b, 2).unwrap();
    assert_eq!(e.sub_queue("a"), Some(SubQueue::Unschedulable));
    assert_eq!(e.sub_queue("b"), Some(SubQueue::Backoff));
}

#[test]
fn events_before_the_pop_do_not_count() {
    let e = env();
    e.add(pod("early"));
    e.add(pod("late"));
    let mut early = e.q.pop().expect("early");
    e.q.move_all_to_active_or_backoff(node_event(ActionType::ADD), None, None);
    let mut late = e.q.pop().expect("late");
    for q in [&mut early, &mut late] {
        q.unschedulable_plugins = BTreeSet::from([FIT.to_string()]);
    }
    e.q.add_unschedulable_if_not_present(late, 2).unwrap();
    e.q.add_unschedulable_if_not_present(early, 1).unwrap();
    assert_eq!(e.sub_queue("early"), Some(SubQueue::Backoff));
    assert_eq!(e.sub_queue("late"), Some(SubQueue::Unschedulable));
}

#[test]
fn move_request_cycle_applies_to_pods_not_popped_here() {
    let e = env();
    e.add(pod("x"));
    let _ = e.q.pop();
    let cycle = e.q.scheduling_cycle();
    // A move request in this cycle.
    e.q.move_all_to_active_or_backoff(node_event(ActionType::ADD), None, None);
    // (pod, its cycle, where it goes): "m1" failed in the move-request cycle, "m2" after.
    for (name, pod_cycle, want) in [
        ("m1", cycle, SubQueue::Backoff),
        ("m2", cycle + 1, SubQueue::Unschedulable),
    ] {
        let mut qpi = QueuedPodInfo::new(pod(name), e.clock.now());
        qpi.attempts = 1;
        qpi.unschedulable_plugins = BTreeSet::from([LABELLED.to_string()]);
        e.q.add_unschedulable_if_not_present(qpi, pod_cycle)
            .unwrap();
        assert_eq!(e.sub_queue(name), Some(want), "{name}");
    }
}

#[test]
fn pod_given_back_twice_is_refused() {
    let e = env();
    e.add(pod("p"));
    let qpi = e.q.pop().expect("p");
    e.q.add_unschedulable_if_not_present(qpi.clone(), 1)
        .unwrap();
    assert_eq!(
        e.q.add_unschedulable_if_not_present(qpi, 1)
            .unwrap_err()
            .to_string(),
        "Pod default/p is already present in the backoff queue"
    );
}

// ---- gates ------------------------------------------------------------------------------

#[test]
fn gated_pods_wait_apart_until_their_gate_goes() {
    let e = env();
    let gated = PodBuilder::new("g")
        .scheduling_gate("example.com/wait")
        .info();
    e.add(gated.clone());
    assert_eq!(
        e.q.counts(),
        QueueCounts {
            gated: 1,
            ..Default::default()
        }
    );
    assert_eq!(e.sub_queue("g"), Some(SubQueue::Gated));
    assert!(e.q.pop().is_none());
    assert_eq!(e.incoming(), [("unschedulable".into(), "PodAdd".into())]);

    // Events the gate did not register leave it alone; so does activation.
    e.q.move_all_to_active_or_backoff(node_event(ActionType::ADD), None, None);
    e.q.activate(&["g".to_string()]);
    assert_eq!(e.sub_queue("g"), Some(SubQueue::Gated));

    // An update that keeps a gate: still gated, not counted as a new arrival.
    let relabelled = PodBuilder::new("g")
        .scheduling_gate("example.com/wait")
        .label("x", "y")
        .info();
    e.q.update(&gated, relabelled.clone());
    assert_eq!(e.sub_queue("g"), Some(SubQueue::Gated));
    assert!(e.incoming().is_empty());

    // The last gate removed: in activeQ, no backoff (never attempted).
    let open = PodBuilder::new("g").label("x", "y").info();
    e.q.update(&relabelled, open);
    assert_eq!(e.sub_queue("g"), Some(SubQueue::Active));
    assert_eq!(
        e.q.counts(),
        QueueCounts {
            active: 1,
            ..Default::default()
        }
    );
    assert_eq!(
        e.incoming(),
        [(
            "active".into(),
            "TargetPodUpdatePodSchedulingGatesEliminated".into()
        )]
    );
}

// ---- updates, deletes, activation ---------------------------------------------------------

#[test]
fn updates_of_unschedulable_pods_ask_the_hints() {
    let e = env();
    let big = PodBuilder::new("p").container(&[("cpu", "2")]).info();
    e.add(big.clone());
    e.pop_and_fail(&[FIT], &[]);

    // A label change: Fit registered no such event.
    let labelled = PodBuilder::new("p")
        .container(&[("cpu", "2")])
        .label("a", "b")
        .info();
    e.q.update(&big, labelled.clone());
    assert_eq!(e.sub_queue("p"), Some(SubQueue::Unschedulable));
    assert_eq!(
        e.q.pending_pods()[0].0.labels.get("a").map(String::as_str),
        Some("b"),
        "object updated in place"
    );

    // Scaling the pod itself down may make it fit.
    let small = PodBuilder::new("p")
        .container(&[("cpu", "1")])
        .label("a", "b")
        .info();
    e.q.update(&labelled, small);
    assert_eq!(e.sub_queue("p"), Some(SubQueue::Backoff));
}

#[test]
fn updates_elsewhere_keep_the_pod_in_place() {
    let e = env();
    let old = pod("p");
    e.add(old.clone());
    let new = PodBuilder::new("p").priority(5).info();
    e.q.update(&old, new);
    assert_eq!(e.sub_queue("p"), Some(SubQueue::Active));
    assert_eq!(e.q.pop().map(|q| q.pod_info.priority), Some(5));

    // In flight: recorded, and the update makes the failed pod retry if a plugin cares.
    let cycle = e.q.scheduling_cycle();
    let scaled = PodBuilder::new("p")
        .priority(5)
        .container(&[("cpu", "1")])
        .info();
    let smaller = PodBuilder::new("p")
        .priority(5)
        .container(&[("cpu", "500m")])
        .info();
    e.q.update(&scaled, smaller.clone());
    assert_eq!(e.sub_queue("p"), None, "still in flight");
    let mut qpi = QueuedPodInfo::new(smaller, e.clock.now());
    qpi.attempts = 1;
    qpi.unschedulable_plugins = BTreeSet::from([FIT.to_string()]);
    e.q.add_unschedulable_if_not_present(qpi, cycle).unwrap();
    assert_eq!(e.sub_queue("p"), Some(SubQueue::Backoff));

    // An unknown pod's update adds it.
    e.q.update(&pod("new"), pod("new"));
    assert_eq!(e.sub_queue("new"), Some(SubQueue::Active));
}

#[test]
fn delete_removes_from_every_sub_queue() {
    let e = env();
    for p in ["a", "b", "c"] {
        e.add(pod(p));
    }
    e.add(PodBuilder::new("gated").scheduling_gate("g").info());
    e.pop_and_fail(&[LABELLED], &[]); // a → unschedulable
    e.pop_and_fail(&[], &[]); // b → backoff
    for p in ["a", "b", "c", "gated"] {
        e.q.delete(&pod(p));
    }
    assert_eq!(e.q.counts(), QueueCounts::default());
    assert!(e.q.pending_pods().is_empty());
}

#[test]
fn activate_moves_waiting_pods_to_active() {
    let e = env();
    for p in ["u", "b", "f"] {
        e.add(pod(p));
    }
    e.pop_and_fail(&[LABELLED], &[]);
    e.pop_and_fail(&[], &[]);
    let mut f = e.q.pop().expect("f");
    e.incoming();
    e.q.activate(&["u".into(), "b".into(), "f".into(), "unknown".into()]);
    assert_eq!(e.sub_queue("u"), Some(SubQueue::Active));
    assert_eq!(e.sub_queue("b"), Some(SubQueue::Active));
    assert_eq!(
        e.incoming(),
        [
            ("active".into(), "ForceActivate".into()),
            ("active".into(), "ForceActivate".into())
        ]
    );
    // The in-flight pod retries when it fails, although its rejector registered nothing
    // that happened.
    f.unschedulable_plugins = BTreeSet::from([LABELLED.to_string()]);
    e.q.add_unschedulable_if_not_present(f, 3).unwrap();
    assert_eq!(e.sub_queue("f"), Some(SubQueue::Backoff));
}

#[test]
fn an_in_flight_pod_activated_again_and_again_is_recorded_once() {
    let e = env();
    e.add(pod("f"));
    let mut f = e.q.pop().expect("f");
    for _ in 0..1000 {
        e.q.activate(&["f".into()]);
    }
    // The pod's own entry and one activation aimed at it, not a thousand.
    assert_eq!(e.q.lock().in_flight.len(), 2);
    f.unschedulable_plugins = BTreeSet::from([LABELLED.to_string()]);
    let cycle = e.q.scheduling_cycle();
    e.q.add_unschedulable_if_not_present(f, cycle).unwrap();
    assert_eq!(e.sub_queue("f"), Some(SubQueue::Backoff));
    // Its next attempt starts afresh: an activation while it is in flight counts again.
    e.clock.advance(Duration::from_secs(60));
    e.q.flush_backoff_completed();
    let mut again = e.q.pop().expect("f again");
    e.q.activate(&["f".into()]);
    again.unschedulable_plugins = BTreeSet::from([LABELLED.to_string()]);
    let cycle = e.q.scheduling_cycle();
    e.q.add_unschedulable_if_not_present(again, cycle).unwrap();
    assert_eq!(e.sub_queue("f"), Some(SubQueue::Backoff));
}

#[test]
fn plugins_activate_through_the_handle() {
    let e = Arc::new(env());
    e.add(pod("h"));
    let h = e.pop_and_fail(&[LABELLED], &[]);
    let queue: Arc<SchedulingQueue> = Arc::new(env_queue_sharing(&e));
    e.handle.set_activator(queue.clone());
    queue.add(pod("h2"));
    let h2 = {
        let mut q = queue.pop().expect("h2");
        q.unschedulable_plugins = BTreeSet::from([LABELLED.to_string()]);
        let uid = q.pod_info.uid.clone();
        queue.add_unschedulable_if_not_present(q, 1).unwrap();
        uid
    };
    e.handle.activate(&[h2, h]);
    assert!(
        queue
            .pending_pods()
            .iter()
            .all(|(_, s)| *s == SubQueue::Active)
    );
    // The first queue is not the handle's activator: its pod stays.
    assert_eq!(e.sub_queue("h"), Some(SubQueue::Unschedulable));
}

/// A second queue over the same profile, handle and clock.
fn env_queue_sharing(e: &Env) -> SchedulingQueue {
    SchedulingQueue::new(
        BTreeMap::from([(
            "default-scheduler".to_string(),
            framework("default-scheduler", Some(false), &e.handle),
        )]),
        e.nominator.clone(),
        Arc::new(e.clock.clone()),
        QueueConfig::default(),
        None,
    )
}

// ---- assigned pods ------------------------------------------------------------------------

#[test]
fn assigned_pods_move_only_pods_they_may_help() {
    let e = env();
    let affine = PodBuilder::new("affine")
        .pod_affinity(&[("app", "db")], "kubernetes.io/hostname")
        .info();
    let spread = pod("spread");
    let other_ns_spread = PodBuilder::new("spread").namespace("other").info();
    let plain = pod("plain");
    for p in [&affine, &spread, &other_ns_spread, &plain] {
        e.add(p.clone());
    }
    // Silent registered every event (it has no EnqueueExtensions).
    e.pop_and_fail(&[SILENT], &[]);
    e.pop_and_fail(&[SILENT, POD_TOPOLOGY_SPREAD], &[]);
    e.pop_and_fail(&[SILENT, POD_TOPOLOGY_SPREAD], &[]);
    e.pop_and_fail(&[SILENT], &[]);
    let bound = PodBuilder::new("db-0").node("n1").label("app", "db").info();
    e.q.assigned_pod_added(&bound);
    assert_eq!(
        e.sub_queue("affine"),
        Some(SubQueue::Backoff),
        "affinity term matches"
    );
    assert_eq!(
        e.sub_queue("spread"),
        Some(SubQueue::Backoff),
        "spread, same namespace"
    );
    assert_eq!(e.sub_queue("other/spread"), Some(SubQueue::Unschedulable));
    assert_eq!(e.sub_queue("plain"), Some(SubQueue::Unschedulable));

    // A candidate whose rejector registered nothing for the event stays.
    let e = env();
    e.add(affine);
    e.pop_and_fail(&["InterPodAffinity"], &[]);
    e.q.assigned_pod_added(&bound);
    assert_eq!(e.sub_queue("affine"), Some(SubQueue::Unschedulable));
}

#[test]
fn assigned_pod_scale_down_moves_every_pod_it_may_help() {
    let e = env();
    e.add(pod("fit"));
    e.add(pod("labelled"));
    e.pop_and_fail(&[FIT], &[]);
    e.pop_and_fail(&[LABELLED], &[]);
    let old = PodBuilder::new("x")
        .node("n1")
        .container(&[("cpu", "2")])
        .info();
    let new = PodBuilder::new("x")
        .node("n1")
        .container(&[("cpu", "1")])
        .info();
    e.q.assigned_pod_updated(&old, &new);
    assert_eq!(e.sub_queue("fit"), Some(SubQueue::Backoff));
    assert_eq!(e.sub_queue("labelled"), Some(SubQueue::Unschedulable));
}

// ---- nominator ----------------------------------------------------------------------------

#[test]
fn nominator_follows_pending_pods() {
    let e = env();
    let nominated = PodBuilder::new("p").nominated_node("n1").info();
    e.add(nominated.clone());
    assert_eq!(e.nominator.node_of("p").as_deref(), Some("n1"));

    // Updates that neither set nor clear nominatedNodeName keep an in-memory nomination.
    let plain = pod("q");
    e.add(plain.clone());
    e.nominator.add(plain.clone(), Some("n2"));
    let relabelled = PodBuilder::new("q").label("a", "b").info();
    e.q.update(&plain, relabelled.clone());
    assert_eq!(e.nominator.node_of("q").as_deref(), Some("n2"));
    // Setting it moves the nomination; clearing it drops it.
    let moved = PodBuilder::new("q")
        .label("a", "b")
        .nominated_node("n3")
        .info();
    e.q.update(&relabelled, moved.clone());
    assert_eq!(e.nominator.node_of("q").as_deref(), Some("n3"));
    let cleared = PodBuilder::new("q").label("a", "c").info();
    e.q.update(&moved, cleared);
    assert_eq!(e.nominator.node_of("q"), None);

    // Deleted and bound pods are never nominated.
    e.q.delete(&nominated);
    assert_eq!(e.nominator.node_of("p"), None);
    e.nominator.add(pod("r"), Some("n1"));
    e.q.assigned_pod_added(&PodBuilder::new("r").node("n1").info());
    assert_eq!(e.nominator.node_of("r"), None);
    assert!(e.nominator.is_empty());
}

#[test]
fn a_gated_pod_is_nominated_from_its_arrival() {
    // v1.37 (kubernetes#139057): the nominator learns a gated pod's nominatedNodeName when
    // the pod is added, before PreEnqueue sends it to unschedulablePods.
    let e = env();
    let gated = PodBuilder::new("g")
        .scheduling_gate("wait")
        .nominated_node("n1")
        .info();
    e.add(gated.clone());
    assert_eq!(e.q.counts().gated, 1);
    assert_eq!(e.nominator.node_of("g").as_deref(), Some("n1"));
    // Updates while gated keep it in step; the gate opening changes nothing to it.
    let moved = PodBuilder::new("g")
        .scheduling_gate("wait")
        .nominated_node("n2")
        .info();
    e.q.update(&gated, moved.clone());
    assert_eq!(e.nominator.node_of("g").as_deref(), Some("n2"));
    let open = PodBuilder::new("g").nominated_node("n2").info();
    e.q.update(&moved, open.clone());
    assert_eq!(e.q.counts().gated, 0);
    assert_eq!(e.nominator.node_of("g").as_deref(), Some("n2"));
    // A gated pod that first shows up by an update (the queue never saw it) is nominated too.
    let late = PodBuilder::new("late")
        .scheduling_gate("wait")
        .nominated_node("n1")
        .info();
    e.q.update(&late, late.clone());
    assert_eq!(e.nominator.node_of("late").as_deref(), Some("n1"));
    e.q.delete(&late);
    assert_eq!(e.nominator.node_of("late"), None);
}

// ---- pop_wait -----------------------------------------------------------------------------

#[tokio::test]
async fn pop_wait_wakes_on_add_and_on_close() {
    let e = Arc::new(env());
    let waiter = {
        let e = e.clone();
        tokio::spawn(async move { e.q.pop_wait().await.map(|q| q.pod_info.name.clone()) })
    };
    tokio::task::yield_now().await;
    e.add(pod("p"));
    assert_eq!(waiter.await.expect("task"), Some("p".to_string()));

    let waiter = {
        let e = e.clone();
        tokio::spawn(async move { e.q.pop_wait().await.is_none() })
    };
    tokio::task::yield_now().await;
    e.q.close();
    assert!(waiter.await.expect("task"));
    assert!(e.q.pop_wait().await.is_none());
}

// ---- property test ------------------------------------------------------------------------

const PODS: usize = 6;

#[derive(Debug, Clone)]
enum Op {
    Add {
        pod: usize,
        gated: bool,
        nominated: bool,
        priority: i32,
    },
    Update {
        pod: usize,
        gated: bool,
        nominated: bool,
        cpu: u32,
    },
    Delete(usize),
    Pop,
    Fail {
        which: usize,
        plugins: Vec<usize>,
        pending: bool,
    },
    Bound {
        which: usize,
    },
    Event(usize),
    AssignedAdded,
    Activate(usize),
    Advance(u64),
    FlushBackoff,
    FlushLeftover,
}

const REJECTORS: [&str; 4] = [FIT, LABELLED, BROKEN, SILENT];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..PODS, any::<bool>(), any::<bool>(), 0..3i32)
            .prop_map(|(pod, gated, nominated, priority)| Op::Add { pod, gated, nominated, priority }),
        2 => (0..PODS, any::<bool>(), any::<bool>(), 1..4u32)
            .prop_map(|(pod, gated, nominated, cpu)| Op::Update { pod, gated, nominated, cpu }),
        1 => (0..PODS).prop_map(Op::Delete),
        3 => Just(Op::Pop),
        3 => (0..4usize, proptest::collection::vec(0..REJECTORS.len(), 0..3), any::<bool>())
            .prop_map(|(which, plugins, pending)| Op::Fail { which, plugins, pending }),
        1 => (0..4usize).prop_map(|which| Op::Bound { which }),
        2 => (0..5usize).prop_map(Op::Event),
        1 => Just(Op::AssignedAdded),
        1 => (0..PODS).prop_map(Op::Activate),
        2 => (0..400u64).prop_map(Op::Advance),
        2 => Just(Op::FlushBackoff),
        1 => Just(Op::FlushLeftover),
    ]
}

fn model_pod(i: usize, gated: bool, nominated: bool, priority: i32, cpu: u32) -> Arc<PodInfo> {
    let mut b = PodBuilder::new(&format!("p{i}"))
        .priority(priority)
        .container(&[("cpu", &cpu.to_string())]);
    if gated {
        b = b.scheduling_gate("g");
    }
    if nominated {
        b = b.nominated_node("n1");
    }
    b.info()
}

fn events(i: usize) -> (ClusterEvent, Option<EventObject>) {
    match i {
        0 => (node_event(ActionType::ADD), Some(node_obj(&[]))),
        1 => (
            node_event(ActionType::UPDATE_NODE_LABEL),
            Some(node_obj(&[("ready", "true")])),
        ),
        2 => (
            node_event(ActionType::UPDATE_NODE_TAINT),
            Some(node_obj(&[])),
        ),
        3 => (
            ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
            Some(EventObject::Pod(PodBuilder::new("gone").node("n1").info())),
        ),
        _ => (
            ClusterEvent::new(EventResource::StorageClass, ActionType::ADD),
            Some(EventObject::Other),
        ),
    }
}

fn check(
    e: &Env,
    live: &BTreeMap<String, Arc<PodInfo>>,
    popped: &[QueuedPodInfo],
) -> Result<(), TestCaseError> {
    let pending = e.q.pending_pods();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (p, _) in &pending {
        *seen.entry(p.uid.clone()).or_insert(0) += 1;
    }
    for q in popped {
        *seen.entry(q.pod_info.uid.clone()).or_insert(0) += 1;
    }
    // Every live pod is in exactly one place; nothing else is anywhere.
    prop_assert_eq!(
        seen.keys().cloned().collect::<BTreeSet<_>>(),
        live.keys().cloned().collect::<BTreeSet<_>>()
    );
    prop_assert!(
        seen.values().all(|n| *n == 1),
        "a pod in two places: {:?}",
        seen
    );
    let c = e.q.counts();
    prop_assert_eq!(
        c.active + c.backoff + c.unschedulable + c.gated,
        pending.len()
    );
    let count = |s: SubQueue| pending.iter().filter(|(_, q)| *q == s).count();
    prop_assert_eq!(c.active, count(SubQueue::Active));
    prop_assert_eq!(c.backoff, count(SubQueue::Backoff));
    prop_assert_eq!(c.unschedulable, count(SubQueue::Unschedulable));
    prop_assert_eq!(c.gated, count(SubQueue::Gated));
    // Gated exactly when the pod has gates; queued objects are the latest versions.
    for (p, sub) in &pending {
        let latest = &live[&p.uid];
        prop_assert!(Arc::ptr_eq(p, latest), "stale object for {}", p.uid);
        if !p.scheduling_gates.is_empty() {
            prop_assert_eq!(*sub, SubQueue::Gated);
        } else {
            prop_assert_ne!(*sub, SubQueue::Gated);
        }
    }
    // Nominations: only live, unbound pods; never pods that never had nominatedNodeName.
    for uid in (0..PODS).map(|i| format!("p{i}")) {
        if let Some(node) = e.nominator.node_of(&uid) {
            prop_assert!(live.contains_key(&uid), "{} nominated after it left", uid);
            prop_assert_eq!(node, "n1");
        }
    }
    let st = e.q.state.lock();
    prop_assert_eq!(
        st.gated,
        st.unschedulable
            .values()
            .filter(|q| q.gating_plugin.is_some())
            .count()
    );
    prop_assert_eq!(st.in_flight_pods.len(), popped.len());
    // The in-flight log never starts with an event nobody needs.
    prop_assert!(
        st.in_flight
            .first_key_value()
            .is_none_or(|(_, e)| matches!(e, InFlight::Pod(_)))
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_operations_keep_each_pod_in_one_place(ops in proptest::collection::vec(op(), 1..80)) {
        let e = env();
        let mut live: BTreeMap<String, Arc<PodInfo>> = BTreeMap::new();
        let mut popped: Vec<QueuedPodInfo> = Vec::new();
        for op in ops {
            match op {
                Op::Add { pod, gated, nominated, priority } => {
                    // Scheduling gates can only be removed from an existing pod, never added.
                    let uid = format!("p{pod}");
                    let gated = gated && live.get(&uid).is_none_or(|p| !p.scheduling_gates.is_empty());
                    let p = model_pod(pod, gated, nominated, priority, 1);
                    let in_flight = popped.iter().any(|q| q.pod_info.uid == p.uid);
                    e.add(p.clone());
                    if !in_flight {
                        live.insert(p.uid.clone(), p);
                    }
                }
                Op::Update { pod, gated, nominated, cpu } => {
                    let uid = format!("p{pod}");
                    let old = live.get(&uid).cloned().unwrap_or_else(|| model_pod(pod, false, false, 0, 1));
                    let gated = gated && !old.scheduling_gates.is_empty();
                    let new = model_pod(pod, gated, nominated, old.priority, cpu);
                    e.q.update(&old, new.clone());
                    // A popped pod keeps the copy it was popped with: the update reaches it
                    // only when it fails (below), as in the scheduler.
                    live.insert(uid, new);
                }
                Op::Delete(pod) => {
                    let uid = format!("p{pod}");
                    if !popped.iter().any(|q| q.pod_info.uid == uid) {
                        let p = live.remove(&uid).unwrap_or_else(|| model_pod(pod, false, false, 0, 1));
                        e.q.delete(&p);
                    }
                }
                Op::Pop => {
                    if let Some(q) = e.q.pop() {
                        popped.push(q);
                    }
                }
                Op::Fail { which, plugins, pending } => {
                    if !popped.is_empty() {
                        let mut q = popped.remove(which % popped.len());
                        // The scheduler gives back the informer's latest copy of the pod,
                        // not the one it popped.
                        q.pod_info = live[&q.pod_info.uid].clone();
                        let names: BTreeSet<String> = plugins.iter().map(|i| REJECTORS[*i].to_string()).collect();
                        if pending {
                            q.pending_plugins = BTreeSet::from([WAITER.to_string()]);
                        }
                        q.unschedulable_plugins = names;
                        let cycle = e.q.scheduling_cycle();
                        prop_assert!(e.q.add_unschedulable_if_not_present(q, cycle).is_ok());
                    }
                }
                Op::Bound { which } => {
                    if !popped.is_empty() {
                        let q = popped.remove(which % popped.len());
                        e.q.done(&q.pod_info.uid);
                        let bound = PodBuilder::new(&q.pod_info.name).node("n1").info();
                        e.q.assigned_pod_added(&bound);
                        live.remove(&q.pod_info.uid);
                    }
                }
                Op::Event(i) => {
                    let (event, obj) = events(i);
                    e.q.move_all_to_active_or_backoff(event, None, obj.as_ref());
                }
                Op::AssignedAdded => {
                    e.q.assigned_pod_added(&PodBuilder::new("other").node("n1").info());
                }
                Op::Activate(pod) => e.q.activate(&[format!("p{pod}")]),
                Op::Advance(secs) => e.clock.advance(Duration::from_secs(secs)),
                Op::FlushBackoff => e.q.flush_backoff_completed(),
                Op::FlushLeftover => e.q.flush_unschedulable_left_over(),
            }
            check(&e, &live, &popped)?;
        }
    }
}
