//! Prometheus metrics with upstream kube-scheduler's names.

use std::time::Duration;

use std::sync::Arc;

use kubesched_framework::metrics::{MetricsSink, PluginMetrics};
use kubesched_framework::{Code, ExtensionPoint};
use parking_lot::RwLock;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use rustc_hash::FxHashMap;

type Labels = Vec<(&'static str, String)>;

/// The `operation` label of the goroutines gauge for binding cycles in flight.
pub const BINDING: &str = "binding";

/// Histogram handles of one family, found by name, extension point and status without
/// building the label vector: plugin timings are recorded per node, so the lookup sits on
/// the hot path of sampled cycles.
#[derive(Debug, Default)]
struct HistogramHandles {
    by_name: RwLock<FxHashMap<String, HandlesByPoint>>,
}

/// One name's histograms by extension point and status.
type HandlesByPoint = FxHashMap<(ExtensionPoint, Code), Histogram>;

impl HistogramHandles {
    /// Observes every value in the histogram of (name, point, code), made by `create`
    /// the first time; the handle is looked up once for all of them.
    fn observe_all(
        &self,
        name: &str,
        point: ExtensionPoint,
        code: Code,
        seconds: impl IntoIterator<Item = f64>,
        create: impl FnOnce() -> Histogram,
    ) {
        if let Some(h) = self
            .by_name
            .read()
            .get(name)
            .and_then(|m| m.get(&(point, code)))
        {
            for s in seconds {
                h.observe(s);
            }
            return;
        }
        let h = create();
        for s in seconds {
            h.observe(s);
        }
        self.by_name
            .write()
            .entry(name.to_string())
            .or_default()
            .insert((point, code), h);
    }

    fn observe(
        &self,
        name: &str,
        point: ExtensionPoint,
        code: Code,
        seconds: f64,
        create: impl FnOnce() -> Histogram,
    ) {
        self.observe_all(name, point, code, std::iter::once(seconds), create);
    }
}

fn latency_histogram() -> Histogram {
    // 1 ms .. ~16 s, as upstream's exponential buckets for attempt durations.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

fn extension_point_histogram() -> Histogram {
    // 0.1 ms .. [~200 ms, Inf), as upstream's extension point and event handling latencies.
    Histogram::new(exponential_buckets(0.0001, 2.0, 12))
}

fn plugin_histogram() -> Histogram {
    // 0.01 ms .. [~22 ms, Inf) by a factor of 1.5, as upstream's plugin and queueing hint
    // durations: plugin latency needs the finer steps.
    Histogram::new(exponential_buckets(0.00001, 1.5, 20))
}

fn sli_histogram() -> Histogram {
    // 10 ms .. [~88 min, Inf), as upstream's pod scheduling SLI.
    Histogram::new(exponential_buckets(0.01, 2.0, 20))
}

/// Upstream's `attempts` label of the SLI: the count, capped at "15+".
pub fn attempts_label(attempts: u32) -> String {
    if attempts >= 15 {
        "15+".to_string()
    } else {
        attempts.to_string()
    }
}

/// Handles of a family by three label values, looked up by borrowed parts (no label
/// vector, no key string built for a handle that exists).
#[derive(Debug)]
struct ByThree<A, C, M> {
    handles: RwLock<ThreeLevels<A, C, M>>,
}

type ThreeLevels<A, C, M> = FxHashMap<A, FxHashMap<String, FxHashMap<C, M>>>;

impl<A, C, M> Default for ByThree<A, C, M> {
    fn default() -> Self {
        Self {
            handles: RwLock::new(FxHashMap::default()),
        }
    }
}

impl<A, C, M> ByThree<A, C, M>
where
    A: std::hash::Hash + Eq + std::borrow::Borrow<str>,
    C: std::hash::Hash + Eq + Copy,
    M: Clone,
{
    fn get(
        &self,
        a: &str,
        b: &str,
        c: C,
        owned_a: impl FnOnce() -> A,
        create: impl FnOnce() -> M,
    ) -> M {
        if let Some(m) = self
            .handles
            .read()
            .get(a)
            .and_then(|m| m.get(b))
            .and_then(|m| m.get(&c))
        {
            return m.clone();
        }
        let m = create();
        self.handles
            .write()
            .entry(owned_a())
            .or_default()
            .entry(b.to_string())
            .or_default()
            .insert(c, m.clone());
        m
    }
}

/// Handles of a family by one string label, so a hot caller looks up a `&str` instead of
/// building the label vector.
#[derive(Debug)]
struct ByLabel<M> {
    handles: RwLock<FxHashMap<String, M>>,
}

impl<M> Default for ByLabel<M> {
    fn default() -> Self {
        Self {
            handles: RwLock::new(FxHashMap::default()),
        }
    }
}

impl<M: Clone> ByLabel<M> {
    fn get(&self, key: &str, create: impl FnOnce() -> M) -> M {
        if let Some(m) = self.handles.read().get(key) {
            return m.clone();
        }
        let m = create();
        self.handles.write().insert(key.to_string(), m.clone());
        m
    }
}

/// Every metric the scheduler exports.
#[derive(Debug)]
pub struct SchedulerMetrics {
    registry: Registry,
    /// Plugins' own counters (given to the framework handle), encoded with the rest.
    plugin_metrics: Arc<PluginMetrics>,
    schedule_attempts: Family<Labels, Counter>,
    attempt_duration: Family<Labels, Histogram, fn() -> Histogram>,
    algorithm_duration: Histogram,
    preemption_victims: Histogram,
    preemption_attempts: Counter,
    pod_scheduled_after_flush: Counter,
    pod_scheduling_attempts: Histogram,
    extension_point_duration: Family<Labels, Histogram, fn() -> Histogram>,
    plugin_duration: Family<Labels, Histogram, fn() -> Histogram>,
    queue_incoming: Family<Labels, Counter>,
    goroutines: Family<Labels, Gauge>,
    /// `goroutines{operation="binding"}`, kept at hand: it moves twice per bound pod.
    binding_goroutines: Gauge,
    /// `pending_pods` by queue, kept at hand: the queue reports after every change.
    pending_by_queue: [Gauge; 4],
    unschedulable_pods: Family<Labels, Gauge>,
    sli_duration: Family<Labels, Histogram, fn() -> Histogram>,
    queueing_hint_duration: Family<Labels, Histogram, fn() -> Histogram>,
    /// By plugin, event and hint.
    queueing_hint_handles: ByThree<String, &'static str, Histogram>,
    event_handling_duration: Family<Labels, Histogram, fn() -> Histogram>,
    /// By event label.
    event_handling_handles: ByLabel<Histogram>,
    /// `scheduler_cache_size` for nodes, pods and assumed pods.
    cache_size: [Gauge; 3],
    permit_wait_duration: Family<Labels, Histogram, fn() -> Histogram>,
    plugin_evaluations: Family<Labels, Counter>,
    /// By profile, plugin and extension point.
    plugin_evaluation_handles: ByThree<String, ExtensionPoint, Counter>,
    /// Handles into `extension_point_duration`, by profile.
    extension_point_handles: HistogramHandles,
    /// Handles into `plugin_duration`, by plugin.
    plugin_handles: HistogramHandles,
    /// GenericWorkload's pod-group families, registered only when the gate is on (as
    /// upstream registers them): see [`SchedulerMetrics::enable_pod_group_metrics`].
    pod_groups: std::sync::OnceLock<PodGroupMetrics>,
}

/// The pod-group families of v1.37 (`pkg/scheduler/metrics/metrics.go`, registered under
/// GenericWorkload), in a registry of their own so that a scheduler without the gate
/// exposes none of them.
struct PodGroupMetrics {
    registry: Registry,
    attempts: Family<Labels, Counter>,
    attempt_duration: Family<Labels, Histogram, fn() -> Histogram>,
    algorithm_duration: Histogram,
}

impl std::fmt::Debug for PodGroupMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodGroupMetrics").finish_non_exhaustive()
    }
}

impl PodGroupMetrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("scheduler");
        let attempts = Family::<Labels, Counter>::default();
        registry.register(
            "podgroup_schedule_attempts",
            "Number of attempts to schedule pod group, by the result",
            attempts.clone(),
        );
        let attempt_duration: Family<Labels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(latency_histogram);
        registry.register(
            "podgroup_scheduling_attempt_duration_seconds",
            "Pod group scheduling attempt latency in seconds",
            attempt_duration.clone(),
        );
        let algorithm_duration = latency_histogram();
        registry.register(
            "podgroup_scheduling_algorithm_duration_seconds",
            "Pod group scheduling algorithm latency in seconds",
            algorithm_duration.clone(),
        );
        Self {
            registry,
            attempts,
            attempt_duration,
            algorithm_duration,
        }
    }
}

impl Default for SchedulerMetrics {
    fn default() -> Self {
        Self::new()
    }
}

/// The `result` label of an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptResult {
    /// The pod was bound.
    Scheduled,
    /// No node fits.
    Unschedulable,
    /// An internal error.
    Error,
}

impl AttemptResult {
    fn as_str(&self) -> &'static str {
        match self {
            Self::Scheduled => "scheduled",
            Self::Unschedulable => "unschedulable",
            Self::Error => "error",
        }
    }
}

impl SchedulerMetrics {
    /// Registers every metric under the `scheduler_` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("scheduler");
        let schedule_attempts = Family::<Labels, Counter>::default();
        registry.register(
            "schedule_attempts",
            "Number of attempts to schedule pods, by the result",
            schedule_attempts.clone(),
        );
        let attempt_duration: Family<Labels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(latency_histogram);
        registry.register(
            "scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            attempt_duration.clone(),
        );
        let algorithm_duration = latency_histogram();
        registry.register(
            "scheduling_algorithm_duration_seconds",
            "Scheduling algorithm latency in seconds",
            algorithm_duration.clone(),
        );
        let pending_pods = Family::<Labels, Gauge>::default();
        registry.register(
            "pending_pods",
            "Number of pending pods, by the queue type",
            pending_pods.clone(),
        );
        let preemption_victims = Histogram::new(exponential_buckets(1.0, 2.0, 7));
        registry.register(
            "preemption_victims",
            "Number of selected preemption victims",
            preemption_victims.clone(),
        );
        let preemption_attempts = Counter::default();
        registry.register(
            "preemption_attempts",
            "Total preemption attempts in the cluster till now",
            preemption_attempts.clone(),
        );
        let pod_scheduled_after_flush = Counter::default();
        registry.register(
            "pod_scheduled_after_flush",
            "Number of pods that were successfully scheduled after being flushed from unschedulableEntities due to timeout. This metric helps detect potential queueing hint misconfigurations or event handling issues.",
            pod_scheduled_after_flush.clone(),
        );
        let pod_scheduling_attempts = Histogram::new(exponential_buckets(1.0, 2.0, 5));
        registry.register(
            "pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod",
            pod_scheduling_attempts.clone(),
        );
        let extension_point_duration: Family<Labels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(extension_point_histogram);
        registry.register(
            "framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point",
            extension_point_duration.clone(),
        );
        let plugin_duration: Family<Labels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(plugin_histogram);
        registry.register(
            "plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point",
            plugin_duration.clone(),
        );
        let queue_incoming = Family::<Labels, Counter>::default();
        registry.register(
            "queue_incoming_pods",
            "Number of pods added to scheduling queues by event and queue type",
            queue_incoming.clone(),
        );
        let goroutines = Family::<Labels, Gauge>::default();
        registry.register(
            "goroutines",
            "Number of running goroutines split by the work they do such as binding",
            goroutines.clone(),
        );
        let binding_goroutines = goroutines
            .get_or_create(&vec![("operation", BINDING.to_string())])
            .clone();
        let pending_by_queue = ["active", "backoff", "unschedulable", "gated"].map(|q| {
            pending_pods
                .get_or_create(&vec![("queue", q.to_string())])
                .clone()
        });
        let unschedulable_pods = Family::<Labels, Gauge>::default();
        registry.register(
            "unschedulable_pods",
            "The number of unschedulable pods broken down by plugin name. A pod will increment the gauge for all plugins that caused it to not schedule and so this metric have meaning only when broken down by plugin",
            unschedulable_pods.clone(),
        );
        let sli_duration: Family<Labels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(sli_histogram);
        registry.register(
            "pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might involve multiple scheduling attempts",
            sli_duration.clone(),
        );
        let queueing_hint_duration: Family<Labels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(plugin_histogram);
        registry.register(
            "queueing_hint_execution_duration_seconds",
            "Duration for running a queueing hint function of a plugin",
            queueing_hint_duration.clone(),
        );
        let event_handling_duration: Family<Labels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(extension_point_histogram);
        registry.register(
            "event_handling_duration_seconds",
            "Event handling latency in seconds",
            event_handling_duration.clone(),
        );
        let cache_sizes = Family::<Labels, Gauge>::default();
        // v1.34 removed the old name with the subsystem twice (scheduler_scheduler_cache_size).
        registry.register(
            "cache_size",
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache",
            cache_sizes.clone(),
        );
        let cache_size = ["nodes", "pods", "assumed_pods"].map(|t| {
            cache_sizes
                .get_or_create(&vec![("type", t.to_string())])
                .clone()
        });
        let permit_wait_duration: Family<Labels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(latency_histogram);
        registry.register(
            "permit_wait_duration_seconds",
            "Duration of waiting on permit",
            permit_wait_duration.clone(),
        );
        let plugin_evaluations = Family::<Labels, Counter>::default();
        registry.register(
            "plugin_evaluation",
            "Number of attempts to schedule pods by each plugin and the extension point (available only in PreFilter, Filter, PreScore, and Score)",
            plugin_evaluations.clone(),
        );
        Self {
            registry,
            plugin_metrics: Arc::default(),
            schedule_attempts,
            attempt_duration,
            algorithm_duration,
            preemption_victims,
            preemption_attempts,
            pod_scheduled_after_flush,
            pod_scheduling_attempts,
            extension_point_duration,
            plugin_duration,
            queue_incoming,
            goroutines,
            binding_goroutines,
            pending_by_queue,
            unschedulable_pods,
            sli_duration,
            queueing_hint_duration,
            queueing_hint_handles: ByThree::default(),
            event_handling_duration,
            event_handling_handles: ByLabel::default(),
            cache_size,
            permit_wait_duration,
            plugin_evaluations,
            plugin_evaluation_handles: ByThree::default(),
            extension_point_handles: HistogramHandles::default(),
            plugin_handles: HistogramHandles::default(),
            pod_groups: std::sync::OnceLock::new(),
        }
    }

    /// Registers GenericWorkload's pod-group families (`scheduler_podgroup_*`), as upstream
    /// does when the gate is on; before this, and without the gate, they are not exposed
    /// and the pod-group observations below are dropped.
    pub fn enable_pod_group_metrics(&self) {
        self.pod_groups.get_or_init(PodGroupMetrics::new);
    }

    /// One pod-group scheduling cycle finished (`scheduler_podgroup_schedule_attempts_total`
    /// and `scheduler_podgroup_scheduling_attempt_duration_seconds`, by result and profile):
    /// scheduled, unschedulable, or an error, `duration` after the cycle began.
    pub fn pod_group_attempt(&self, result: AttemptResult, profile: &str, duration: Duration) {
        let Some(m) = self.pod_groups.get() else {
            return;
        };
        let labels = vec![
            ("result", result.as_str().to_string()),
            ("profile", profile.to_string()),
        ];
        m.attempts.get_or_create(&labels).inc();
        m.attempt_duration
            .get_or_create(&labels)
            .observe(duration.as_secs_f64());
    }

    /// A pod-group cycle's algorithm (every member tried) took this long
    /// (`scheduler_podgroup_scheduling_algorithm_duration_seconds`).
    pub fn pod_group_algorithm(&self, duration: Duration) {
        if let Some(m) = self.pod_groups.get() {
            m.algorithm_duration.observe(duration.as_secs_f64());
        }
    }

    /// A pod bound after the periodic flush (not an event) took it out of
    /// unschedulablePods (v1.36, `scheduler_pod_scheduled_after_flush_total`).
    pub fn pod_scheduled_after_flush(&self) {
        self.pod_scheduled_after_flush.inc();
    }

    /// One scheduling attempt finished.
    pub fn attempt(&self, result: AttemptResult, profile: &str, duration: Duration) {
        let labels = vec![
            ("result", result.as_str().to_string()),
            ("profile", profile.to_string()),
        ];
        self.schedule_attempts.get_or_create(&labels).inc();
        self.attempt_duration
            .get_or_create(&labels)
            .observe(duration.as_secs_f64());
    }

    /// The scheduling algorithm (filter + score) took this long.
    pub fn algorithm(&self, duration: Duration) {
        self.algorithm_duration.observe(duration.as_secs_f64());
    }

    /// A pod was bound after this many attempts.
    pub fn pod_scheduled_after(&self, attempts: u32) {
        self.pod_scheduling_attempts.observe(f64::from(attempts));
    }

    /// PostFilter (preemption) ran for a pod.
    pub fn preemption_attempt(&self) {
        self.preemption_attempts.inc();
    }

    /// A pod was bound `since_first_attempt` after it first entered activeQ, after
    /// `attempts` attempts (`scheduler_pod_scheduling_sli_duration_seconds{attempts}`).
    pub fn pod_scheduled_sli(&self, attempts: u32, since_first_attempt: Duration) {
        self.sli_duration
            .get_or_create(&vec![("attempts", attempts_label(attempts))])
            .observe(since_first_attempt.as_secs_f64());
    }

    /// The scheduler handled one cluster event (`scheduler_event_handling_duration_seconds`).
    pub fn event_handled(&self, event: &str, took: Duration) {
        self.event_handling_handles
            .get(event, || {
                self.event_handling_duration
                    .get_or_create(&vec![("event", event.to_string())])
                    .clone()
            })
            .observe(took.as_secs_f64());
    }

    /// The cache's sizes (`scheduler_cache_size{type}`).
    pub fn cache_sizes(&self, sizes: kubesched_cache::CacheSizes) {
        let [nodes, pods, assumed] = &self.cache_size;
        nodes.set(sizes.nodes as i64);
        pods.set(sizes.pods as i64);
        assumed.set(sizes.assumed_pods as i64);
    }

    /// A pod entered a queue because of an event.
    pub fn queue_incoming(&self, queue: &str, event: &str) {
        self.queue_incoming
            .get_or_create(&vec![
                ("queue", queue.to_string()),
                ("event", event.to_string()),
            ])
            .inc();
    }

    /// Work of kind `operation` ([`BINDING`], `prioritizing_extender`) started on its own
    /// task or thread: `scheduler_goroutines{operation}` goes up.
    pub fn goroutine_started(&self, operation: &str) {
        self.goroutine_gauge(operation).inc();
    }

    /// Work of kind `operation` finished: `scheduler_goroutines{operation}` goes down.
    pub fn goroutine_finished(&self, operation: &str) {
        self.goroutine_gauge(operation).dec();
    }

    fn goroutine_gauge(&self, operation: &str) -> Gauge {
        if operation == BINDING {
            return self.binding_goroutines.clone();
        }
        self.goroutines
            .get_or_create(&vec![("operation", operation.to_string())])
            .clone()
    }

    /// Total time and sample count of `scheduler_plugin_execution_duration_seconds` per
    /// plugin and extension point (summed over status codes), sorted by plugin then point.
    /// Plugin durations are sampled (a share of attempts records them), so these are
    /// sample totals, comparable with each other rather than with wall time.
    pub fn plugin_duration_totals(&self) -> Vec<PluginDurationTotal> {
        // Read back through the exposition text: the metric family offers no iteration
        // over its label sets, and this keeps the hot path free of extra bookkeeping.
        parse_plugin_totals(&self.encode())
    }

    /// The registry plugins count into under their own names (the handle's).
    pub fn plugin_metrics(&self) -> &Arc<PluginMetrics> {
        &self.plugin_metrics
    }

    /// The OpenMetrics text of every metric, plugins' own counters included, each
    /// family's HELP as upstream's component-base writes it (see [`UPSTREAM_FAMILIES`]).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        let mut plugins = String::new();
        if let Some(m) = self.pod_groups.get()
            && prometheus_client::encoding::text::encode_registry(&mut plugins, &m.registry)
                .is_err()
        {
            plugins.clear();
        }
        plugins.push_str(&self.plugin_metrics.encode_openmetrics());
        match out.rfind("# EOF") {
            Some(at) => out.insert_str(at, &plugins),
            None => out.push_str(&plugins),
        }
        with_upstream_help(&out)
    }
}

/// A metric's stability level, which component-base writes at the head of its HELP text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stability {
    /// `[ALPHA]`.
    Alpha,
    /// `[BETA]`.
    Beta,
    /// `[STABLE]`.
    Stable,
}

impl Stability {
    fn tag(self) -> &'static str {
        match self {
            Self::Alpha => "[ALPHA]",
            Self::Beta => "[BETA]",
            Self::Stable => "[STABLE]",
        }
    }
}

/// The families kubesched exposes under upstream's names, with their v1.37 stability
/// level and help text (`pkg/scheduler/metrics/metrics.go` and the VolumeBinding plugin's
/// metrics at v1.37). Names are OpenMetrics family names: counters without `_total`.
/// Dashboards and alerts key on the names; the levels say which ones upstream promises
/// to keep.
pub const UPSTREAM_FAMILIES: &[(&str, Stability, &str)] = &[
    (
        "scheduler_schedule_attempts",
        Stability::Stable,
        "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
    ),
    (
        "scheduler_scheduling_attempt_duration_seconds",
        Stability::Stable,
        "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
    ),
    (
        "scheduler_scheduling_algorithm_duration_seconds",
        Stability::Beta,
        "Scheduling algorithm latency in seconds",
    ),
    (
        "scheduler_event_handling_duration_seconds",
        Stability::Alpha,
        "Event handling latency in seconds.",
    ),
    (
        "scheduler_preemption_victims",
        Stability::Stable,
        "Number of selected preemption victims for preemption initiated by a single pod",
    ),
    (
        "scheduler_preemption_attempts",
        Stability::Stable,
        "Total preemption attempts in the cluster till now",
    ),
    (
        "scheduler_pending_pods",
        Stability::Stable,
        "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulableEntities that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler never attempted to schedule because they are gated; 'incomplete' means number of pods in incompletePodGroupPods; 'pending' means number of pods in pendingPodGroupPods.",
    ),
    (
        "scheduler_goroutines",
        Stability::Beta,
        "Number of running goroutines split by the work they do such as binding.",
    ),
    (
        "scheduler_pod_scheduling_sli_duration_seconds",
        Stability::Beta,
        "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might involve multiple scheduling attempts.",
    ),
    (
        "scheduler_pod_scheduling_attempts",
        Stability::Stable,
        "Number of attempts to successfully schedule a pod.",
    ),
    (
        "scheduler_pod_scheduled_after_flush",
        Stability::Alpha,
        "Number of pods that were successfully scheduled after being flushed from unschedulableEntities due to timeout. This metric helps detect potential queueing hint misconfigurations or event handling issues.",
    ),
    (
        "scheduler_framework_extension_point_duration_seconds",
        Stability::Stable,
        "Latency for running all plugins of a specific extension point.",
    ),
    (
        "scheduler_plugin_execution_duration_seconds",
        Stability::Beta,
        "Duration for running a plugin at a specific extension point.",
    ),
    (
        "scheduler_queueing_hint_execution_duration_seconds",
        Stability::Alpha,
        "Duration for running a queueing hint function of a plugin.",
    ),
    (
        "scheduler_queue_incoming_pods",
        Stability::Stable,
        "Number of pods added to scheduling queues by event and queue type.",
    ),
    (
        "scheduler_permit_wait_duration_seconds",
        Stability::Beta,
        "Duration of waiting on permit.",
    ),
    (
        "scheduler_cache_size",
        Stability::Alpha,
        "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
    ),
    (
        "scheduler_unschedulable_pods",
        Stability::Beta,
        "The number of unschedulable pods broken down by plugin name. A pod will increment the gauge for all plugins that caused it to not schedule and so this metric have meaning only when broken down by plugin.",
    ),
    (
        "scheduler_plugin_evaluation",
        Stability::Beta,
        "Number of attempts to schedule pods by each plugin and the extension point (available only in PreFilter, Filter, PreScore, and Score).",
    ),
    (
        "scheduler_podgroup_schedule_attempts",
        Stability::Alpha,
        "Number of attempts to schedule pod group, by the result. 'unschedulable' means a pod group could not be scheduled, while 'error' means an internal scheduler problem.",
    ),
    (
        "scheduler_podgroup_scheduling_attempt_duration_seconds",
        Stability::Alpha,
        "Pod group scheduling attempt latency in seconds",
    ),
    (
        "scheduler_podgroup_scheduling_algorithm_duration_seconds",
        Stability::Alpha,
        "Pod group scheduling algorithm latency in seconds",
    ),
    (
        "scheduler_volume_scheduling_stage_error",
        Stability::Alpha,
        "Volume scheduling stage error count",
    ),
    (
        "scheduler_volume_binder_cache_requests",
        Stability::Alpha,
        "Total number for request volume binding cache",
    ),
    // DynamicResources (v1.37): the claims the scheduler creates for DRA-backed extended
    // resources (#138542 gave the controller's and the scheduler's counters one name),
    // and the waits for binding conditions.
    (
        "dynamic_resource_allocation_resourceclaim_creates",
        Stability::Alpha,
        "Number of ResourceClaims creation requests, categorized by creation status and admin access",
    ),
    (
        "scheduler_dra_bindingconditions_allocations",
        Stability::Alpha,
        "Number of allocations using devices with BindingConditions, counted per driver per scheduling attempt",
    ),
    (
        "scheduler_dra_bindingconditions_wait_duration_seconds",
        Stability::Alpha,
        "Time in seconds spent waiting for BindingConditions to be satisfied during PreBind.",
    ),
];

/// Rewrites the HELP line of each family in [`UPSTREAM_FAMILIES`] as component-base
/// writes it: the stability level, then upstream's text exactly (prometheus-client
/// would otherwise end every help with a period of its own).
fn with_upstream_help(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 4096);
    for line in text.lines() {
        let upstream = line.strip_prefix("# HELP ").and_then(|rest| {
            let name = rest.split_once(' ').map_or(rest, |(n, _)| n);
            UPSTREAM_FAMILIES
                .iter()
                .find(|(family, _, _)| *family == name)
                .map(|(family, stability, help)| {
                    format!("# HELP {family} {} {help}", stability.tag())
                })
        });
        match upstream {
            Some(l) => out.push_str(&l),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Time spent in one plugin at one extension point, from the plugin duration histogram.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginDurationTotal {
    /// The plugin's name.
    pub plugin: String,
    /// The extension point's name (`Filter`, `Score`, ...).
    pub extension_point: String,
    /// Sum of the recorded durations, in seconds.
    pub seconds: f64,
    /// Number of recorded calls.
    pub count: u64,
}

const PLUGIN_DURATION_METRIC: &str = "scheduler_plugin_execution_duration_seconds";

/// The value of `key` in a label list such as `a="x",b="y"`.
fn label_value<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    labels.split(',').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"'))
    })
}

fn parse_plugin_totals(text: &str) -> Vec<PluginDurationTotal> {
    let mut totals: std::collections::BTreeMap<(String, String), (f64, u64)> =
        std::collections::BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(PLUGIN_DURATION_METRIC) else {
            continue;
        };
        let (is_sum, rest) = if let Some(r) = rest.strip_prefix("_sum{") {
            (true, r)
        } else if let Some(r) = rest.strip_prefix("_count{") {
            (false, r)
        } else {
            continue;
        };
        let Some((labels, value)) = rest.split_once('}') else {
            continue;
        };
        let (Some(plugin), Some(point)) = (
            label_value(labels, "plugin"),
            label_value(labels, "extension_point"),
        ) else {
            continue;
        };
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        let entry = totals
            .entry((plugin.to_string(), point.to_string()))
            .or_default();
        if is_sum {
            entry.0 += value;
        } else {
            entry.1 += value as u64;
        }
    }
    totals
        .into_iter()
        .map(
            |((plugin, extension_point), (seconds, count))| PluginDurationTotal {
                plugin,
                extension_point,
                seconds,
                count,
            },
        )
        .collect()
}

impl MetricsSink for SchedulerMetrics {
    fn extension_point_duration(
        &self,
        profile: &str,
        point: ExtensionPoint,
        code: Code,
        duration: Duration,
    ) {
        self.extension_point_handles
            .observe(profile, point, code, duration.as_secs_f64(), || {
                self.extension_point_duration
                    .get_or_create(&vec![
                        ("extension_point", point.as_str().to_string()),
                        ("status", code.as_str().to_string()),
                        ("profile", profile.to_string()),
                    ])
                    .clone()
            });
    }

    fn preemption_victims(&self, victims: usize) {
        self.preemption_victims.observe(victims as f64);
    }

    fn permit_wait(&self, code: Code, duration: Duration) {
        self.permit_wait_duration
            .get_or_create(&vec![("result", code.as_str().to_string())])
            .observe(duration.as_secs_f64());
    }

    fn plugin_evaluations(&self, profile: &str, point: ExtensionPoint, plugin: &str, count: u64) {
        self.plugin_evaluation_handles
            .get(
                profile,
                plugin,
                point,
                || profile.to_string(),
                || {
                    self.plugin_evaluations
                        .get_or_create(&vec![
                            ("plugin", plugin.to_string()),
                            ("extension_point", point.as_str().to_string()),
                            ("profile", profile.to_string()),
                        ])
                        .clone()
                },
            )
            .inc_by(count);
    }

    fn plugin_duration(&self, plugin: &str, point: ExtensionPoint, code: Code, duration: Duration) {
        self.plugin_durations(plugin, point, code, std::slice::from_ref(&duration));
    }

    fn plugin_durations(
        &self,
        plugin: &str,
        point: ExtensionPoint,
        code: Code,
        durations: &[Duration],
    ) {
        self.plugin_handles.observe_all(
            plugin,
            point,
            code,
            durations.iter().map(Duration::as_secs_f64),
            || {
                self.plugin_duration
                    .get_or_create(&vec![
                        ("plugin", plugin.to_string()),
                        ("extension_point", point.as_str().to_string()),
                        ("status", code.as_str().to_string()),
                    ])
                    .clone()
            },
        );
    }
}

impl kubesched_queue::QueueMetrics for SchedulerMetrics {
    fn incoming(&self, queue: &str, event: &str) {
        self.queue_incoming(queue, event);
    }

    fn pending(&self, counts: kubesched_queue::QueueCounts) {
        let [active, backoff, unschedulable, gated] = &self.pending_by_queue;
        active.set(counts.active as i64);
        backoff.set(counts.backoff as i64);
        unschedulable.set(counts.unschedulable as i64);
        gated.set(counts.gated as i64);
    }

    fn unschedulable_reason(&self, plugin: &str, profile: &str, delta: i64) {
        self.unschedulable_pods
            .get_or_create(&vec![
                ("plugin", plugin.to_string()),
                ("profile", profile.to_string()),
            ])
            .inc_by(delta);
    }

    fn queueing_hint(&self, plugin: &str, event: &str, hint: &'static str, took: Duration) {
        self.queueing_hint_handles
            .get(
                plugin,
                event,
                hint,
                || plugin.to_string(),
                || {
                    self.queueing_hint_duration
                        .get_or_create(&vec![
                            ("plugin", plugin.to_string()),
                            ("event", event.to_string()),
                            ("hint", hint.to_string()),
                        ])
                        .clone()
                },
            )
            .observe(took.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every family the scheduler registers carries upstream's stability level and
    /// help, so a dashboard written for kube-scheduler v1.37 reads the same text.
    #[test]
    fn every_family_has_upstream_stability_and_help() {
        let m = SchedulerMetrics::new();
        m.attempt(AttemptResult::Scheduled, "p", Duration::from_millis(1));
        let text = m.encode();
        let helps: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# HELP "))
            .collect();
        assert!(helps.len() >= 5, "{text}");
        for help in &helps {
            let (name, rest) = help.split_once(' ').unwrap();
            assert!(
                ["[ALPHA] ", "[BETA] ", "[STABLE] "]
                    .iter()
                    .any(|tag| rest.starts_with(tag)),
                "{name} has no stability level: {rest:?}"
            );
        }
        assert!(text.contains(
            "# HELP scheduler_schedule_attempts [STABLE] Number of attempts to schedule pods, by the result. 'unschedulable' means"
        ));
        // Upstream's text has no period at the end here, and gets none.
        assert!(text.contains(
            "# HELP scheduler_scheduling_algorithm_duration_seconds [BETA] Scheduling algorithm latency in seconds\n"
        ));
        assert!(text.contains("# HELP scheduler_cache_size [ALPHA] "));
        assert!(!text.contains("scheduler_scheduler_cache_size"));
    }

    /// The DRA families DynamicResources counts into (v1.37): upstream's names, levels and
    /// help, and every label set written.
    #[test]
    fn dra_families_have_upstream_help_and_level() {
        let m = SchedulerMetrics::new();
        let p = m.plugin_metrics();
        p.counter_vec(
            "dynamic_resource_allocation_resourceclaim_creates",
            "ignored",
            &["status", "admin_access"],
        )
        .inc(&["success", "false"]);
        let labels = ["default-scheduler", "gpu.example.com", "timeout"];
        p.counter_vec(
            "scheduler_dra_bindingconditions_allocations",
            "ignored",
            &["profile", "driver", "status"],
        )
        .inc(&labels);
        p.histogram_vec(
            "scheduler_dra_bindingconditions_wait_duration_seconds",
            "ignored",
            &["profile", "driver", "status"],
            kubesched_framework::metrics::exponential_buckets(0.1, 2.0, 14),
        )
        .observe(&labels, 600.0);
        let text = m.encode();
        for line in [
            "# HELP dynamic_resource_allocation_resourceclaim_creates [ALPHA] Number of ResourceClaims creation requests, categorized by creation status and admin access\n",
            "dynamic_resource_allocation_resourceclaim_creates_total{status=\"success\",admin_access=\"false\"} 1\n",
            "# HELP scheduler_dra_bindingconditions_allocations [ALPHA] Number of allocations using devices with BindingConditions, counted per driver per scheduling attempt\n",
            "scheduler_dra_bindingconditions_allocations_total{profile=\"default-scheduler\",driver=\"gpu.example.com\",status=\"timeout\"} 1\n",
            "# HELP scheduler_dra_bindingconditions_wait_duration_seconds [ALPHA] Time in seconds spent waiting for BindingConditions to be satisfied during PreBind.\n",
            "scheduler_dra_bindingconditions_wait_duration_seconds_bucket{profile=\"default-scheduler\",driver=\"gpu.example.com\",status=\"timeout\",le=\"409.6\"} 0\n",
            "scheduler_dra_bindingconditions_wait_duration_seconds_bucket{profile=\"default-scheduler\",driver=\"gpu.example.com\",status=\"timeout\",le=\"819.2\"} 1\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }

    /// GenericWorkload's families exist only once enabled, with upstream's names, levels,
    /// help and labels; observations before that are dropped.
    #[test]
    fn pod_group_families_only_with_generic_workload() {
        let m = SchedulerMetrics::new();
        let ms = Duration::from_millis;
        m.pod_group_attempt(AttemptResult::Scheduled, "default-scheduler", ms(3));
        m.pod_group_algorithm(ms(2));
        let off = m.encode();
        assert!(!off.contains("podgroup"), "{off}");

        m.enable_pod_group_metrics();
        m.enable_pod_group_metrics();
        // (result, profile, duration) as three group cycles end.
        let rows = [
            (AttemptResult::Scheduled, "default-scheduler", ms(3)),
            (AttemptResult::Unschedulable, "default-scheduler", ms(5)),
            (AttemptResult::Unschedulable, "default-scheduler", ms(7)),
            (AttemptResult::Error, "batch", ms(1)),
        ];
        for (result, profile, took) in rows {
            m.pod_group_attempt(result, profile, took);
        }
        m.pod_group_algorithm(ms(2));
        let text = m.encode();
        let series = |s: &str| line_value(&text, s);
        assert_eq!(
            series(
                r#"scheduler_podgroup_schedule_attempts_total{result="scheduled",profile="default-scheduler"}"#
            ),
            Some(1.0)
        );
        assert_eq!(
            series(
                r#"scheduler_podgroup_schedule_attempts_total{result="unschedulable",profile="default-scheduler"}"#
            ),
            Some(2.0)
        );
        assert_eq!(
            series(r#"scheduler_podgroup_schedule_attempts_total{result="error",profile="batch"}"#),
            Some(1.0)
        );
        assert_eq!(
            series(
                r#"scheduler_podgroup_scheduling_attempt_duration_seconds_count{result="unschedulable",profile="default-scheduler"}"#
            ),
            Some(2.0)
        );
        assert_eq!(
            series("scheduler_podgroup_scheduling_algorithm_duration_seconds_count"),
            Some(1.0),
            "the observation before enabling is not counted"
        );
        for help in [
            "# HELP scheduler_podgroup_schedule_attempts [ALPHA] Number of attempts to schedule pod group, by the result. 'unschedulable' means a pod group could not be scheduled, while 'error' means an internal scheduler problem.\n",
            "# HELP scheduler_podgroup_scheduling_attempt_duration_seconds [ALPHA] Pod group scheduling attempt latency in seconds\n",
            "# HELP scheduler_podgroup_scheduling_algorithm_duration_seconds [ALPHA] Pod group scheduling algorithm latency in seconds\n",
        ] {
            assert!(text.contains(help), "{help}{text}");
        }
        // Upstream's buckets: 1 ms doubling 15 times.
        assert!(text.contains(
            r#"scheduler_podgroup_scheduling_algorithm_duration_seconds_bucket{le="16.384"} 1"#
        ));
        assert_eq!(text.matches("# EOF").count(), 1);
        assert!(text.trim_end().ends_with("# EOF"));
    }

    #[test]
    fn plugin_totals_sum_over_status_codes() {
        let m = SchedulerMetrics::new();
        let ms = Duration::from_millis;
        m.plugin_duration(
            "NodeResourcesFit",
            ExtensionPoint::Filter,
            Code::Success,
            ms(2),
        );
        m.plugin_duration(
            "NodeResourcesFit",
            ExtensionPoint::Filter,
            Code::Unschedulable,
            ms(1),
        );
        m.plugin_duration(
            "NodeResourcesFit",
            ExtensionPoint::Score,
            Code::Success,
            ms(4),
        );
        m.plugin_duration(
            "TaintToleration",
            ExtensionPoint::Filter,
            Code::Success,
            ms(8),
        );
        // Extension point totals are another metric and must not be counted.
        m.extension_point_duration(
            "default-scheduler",
            ExtensionPoint::Filter,
            Code::Success,
            ms(100),
        );
        let totals = m.plugin_duration_totals();
        let view: Vec<(&str, &str, u64, u64)> = totals
            .iter()
            .map(|t| {
                (
                    t.plugin.as_str(),
                    t.extension_point.as_str(),
                    (t.seconds * 1e6).round() as u64,
                    t.count,
                )
            })
            .collect();
        assert_eq!(
            view,
            vec![
                ("NodeResourcesFit", "Filter", 3000, 2),
                ("NodeResourcesFit", "Score", 4000, 1),
                ("TaintToleration", "Filter", 8000, 1),
            ]
        );
    }

    fn line_value(text: &str, series: &str) -> Option<f64> {
        text.lines().find_map(|l| {
            l.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
    }

    #[test]
    fn v1_34_series_carry_upstreams_names_and_labels() {
        use kubesched_queue::QueueMetrics;
        let m = SchedulerMetrics::new();
        m.permit_wait(Code::Unschedulable, Duration::from_millis(3));
        m.plugin_evaluations("p", ExtensionPoint::Filter, "NodePorts", 4);
        m.plugin_evaluations("p", ExtensionPoint::Filter, "NodePorts", 2);
        m.unschedulable_reason("NodePorts", "p", 1);
        m.unschedulable_reason("NodePorts", "p", 1);
        m.unschedulable_reason("NodePorts", "p", -1);
        m.queueing_hint("NodePorts", "NodeAdd", "Queue", Duration::from_micros(5));
        m.pod_scheduled_sli(20, Duration::from_secs(1));
        let text = m.encode();
        let v = |series: &str| {
            line_value(&text, series).unwrap_or_else(|| panic!("{series} in\n{text}"))
        };
        assert_eq!(
            v("scheduler_permit_wait_duration_seconds_count{result=\"Unschedulable\"}"),
            1.0
        );
        assert_eq!(
            v(
                "scheduler_plugin_evaluation_total{plugin=\"NodePorts\",extension_point=\"Filter\",profile=\"p\"}"
            ),
            6.0
        );
        assert_eq!(
            v("scheduler_unschedulable_pods{plugin=\"NodePorts\",profile=\"p\"}"),
            1.0
        );
        assert_eq!(
            v(
                "scheduler_queueing_hint_execution_duration_seconds_count{plugin=\"NodePorts\",event=\"NodeAdd\",hint=\"Queue\"}"
            ),
            1.0
        );
        // Upstream caps the attempts label at 15.
        assert_eq!(
            v("scheduler_pod_scheduling_sli_duration_seconds_count{attempts=\"15+\"}"),
            1.0
        );
        assert_eq!(attempts_label(14), "14");
    }

    #[test]
    fn plugin_totals_are_empty_before_any_sample() {
        assert!(SchedulerMetrics::new().plugin_duration_totals().is_empty());
    }
}
