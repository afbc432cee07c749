//! The framework runtime's semantics at every extension point, with small fake plugins.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::{
    BindPlugin, Code, CycleState, ExtensionPoint, FilterPlugin, Framework, Handle, NodeToStatus,
    Nominator, PermitPlugin, Plugin, PluginRef, PostBindPlugin, PostFilterPlugin, PostFilterResult,
    PreBindPlugin, PreFilterPlugin, PreFilterResult, PreScorePlugin, ProfileSpec, ReservePlugin,
    ScorePlugin, Status, async_trait,
    metrics::{MetricsSink, NoMetrics},
};
use kubesched_testing::{NodeBuilder, PodBuilder, node_info};
use parking_lot::Mutex;

type NodeFn<T> = Box<dyn Fn(&NodeInfo) -> T + Send + Sync>;

/// What a fake plugin answers at each point; `log` records every call in order.
#[derive(Default)]
struct Fake {
    name: &'static str,
    pre_filter: Option<(Option<PreFilterResult>, Status)>,
    filter: Option<NodeFn<Status>>,
    pre_score: Option<Status>,
    score: Option<NodeFn<i64>>,
    normalize_to_max: bool,
    reserve: Option<Status>,
    permit: Option<(Status, Duration)>,
    pre_bind: Option<Status>,
    /// PreBindPreFlight's answer; None: Success.
    pre_flight: Option<Status>,
    /// Whether the pre-flight allows parallel PreBind.
    parallel: bool,
    /// PreBind waits here (with the other plugins sharing it) before it answers: only
    /// plugins run at the same time get past it.
    rendezvous: Option<Arc<tokio::sync::Barrier>>,
    /// PreBind never ends (it is cancelled, or the test times out).
    pre_bind_forever: bool,
    bind: Option<Status>,
    post_filter: Option<(Option<PostFilterResult>, Status)>,
    post_bind: bool,
    log: Arc<Mutex<Vec<String>>>,
}

impl Fake {
    fn new(name: &'static str, log: &Arc<Mutex<Vec<String>>>) -> Self {
        Self {
            name,
            log: log.clone(),
            ..Default::default()
        }
    }
    fn note(&self, what: &str) {
        self.log.lock().push(format!("{}:{what}", self.name));
    }
}

impl Plugin for Fake {
    fn name(&self) -> &str {
        self.name
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        self.pre_filter
            .as_ref()
            .map(|_| self as &dyn PreFilterPlugin)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        self.filter.as_ref().map(|_| self as &dyn FilterPlugin)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        self.pre_score.as_ref().map(|_| self as &dyn PreScorePlugin)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        self.score.as_ref().map(|_| self as &dyn ScorePlugin)
    }
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        self.reserve.as_ref().map(|_| self as &dyn ReservePlugin)
    }
    fn as_permit(&self) -> Option<&dyn PermitPlugin> {
        self.permit.as_ref().map(|_| self as &dyn PermitPlugin)
    }
    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        self.pre_bind.as_ref().map(|_| self as &dyn PreBindPlugin)
    }
    fn as_bind(&self) -> Option<&dyn BindPlugin> {
        self.bind.as_ref().map(|_| self as &dyn BindPlugin)
    }
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        self.post_filter
            .as_ref()
            .map(|_| self as &dyn PostFilterPlugin)
    }
    fn as_post_bind(&self) -> Option<&dyn PostBindPlugin> {
        self.post_bind.then_some(self as &dyn PostBindPlugin)
    }
}

impl PreFilterPlugin for Fake {
    fn pre_filter(
        &self,
        _: &mut CycleState,
        _: &PodInfo,
        _: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        self.note("PreFilter");
        self.pre_filter.clone().unwrap_or_default()
    }
}

impl FilterPlugin for Fake {
    fn filter(&self, _: &CycleState, _: &PodInfo, node: &NodeInfo) -> Status {
        self.note(&format!("Filter({})", node.name()));
        self.filter.as_ref().map(|f| f(node)).unwrap_or_default()
    }
}

impl PreScorePlugin for Fake {
    fn pre_score(&self, _: &mut CycleState, _: &PodInfo, _: &[Arc<NodeInfo>]) -> Status {
        self.note("PreScore");
        self.pre_score.clone().unwrap_or_default()
    }
}

impl ScorePlugin for Fake {
    fn score(&self, _: &CycleState, _: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        Ok(self.score.as_ref().map(|f| f(node)).unwrap_or(0))
    }
    fn has_normalize_score(&self) -> bool {
        self.normalize_to_max
    }
    fn normalize_score(
        &self,
        _: &CycleState,
        _: &PodInfo,
        _: &[Arc<NodeInfo>],
        scores: &mut [i64],
    ) -> Status {
        let max = scores.iter().copied().max().unwrap_or(0).max(1);
        for s in scores.iter_mut() {
            *s = *s * 100 / max;
        }
        Status::success()
    }
}

impl ReservePlugin for Fake {
    fn reserve(&self, _: &mut CycleState, _: &PodInfo, _: &str) -> Status {
        self.note("Reserve");
        self.reserve.clone().unwrap_or_default()
    }
    fn unreserve(&self, _: &mut CycleState, _: &PodInfo, _: &str) {
        self.note("Unreserve");
    }
}

impl PermitPlugin for Fake {
    fn permit(&self, _: &CycleState, _: &PodInfo, _: &str) -> (Status, Duration) {
        self.note("Permit");
        self.permit.clone().unwrap_or_default()
    }
}

#[async_trait]
impl PreBindPlugin for Fake {
    async fn pre_bind(&self, _: &CycleState, _: &PodInfo, _: &str) -> Status {
        self.note("PreBind");
        if let Some(b) = &self.rendezvous {
            b.wait().await;
        }
        if self.pre_bind_forever {
            std::future::pending::<()>().await;
        }
        self.pre_bind.clone().unwrap_or_default()
    }
    fn pre_bind_pre_flight(&self, _: &CycleState, _: &PodInfo, _: &str) -> Status {
        self.note("PreBindPreFlight");
        self.pre_flight.clone().unwrap_or_default()
    }
    fn pre_bind_allows_parallel(&self, _: &CycleState, _: &PodInfo, _: &str) -> bool {
        self.parallel
    }
}

#[async_trait]
impl BindPlugin for Fake {
    async fn bind(&self, _: &CycleState, _: &PodInfo, _: &str) -> Status {
        self.note("Bind");
        self.bind.clone().unwrap_or_default()
    }
}

#[async_trait]
impl PostFilterPlugin for Fake {
    async fn post_filter(
        &self,
        _: &Framework,
        _: &CycleState,
        _: &Arc<PodInfo>,
        _: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status) {
        self.note("PostFilter");
        self.post_filter.clone().unwrap_or_default()
    }
}

impl PostBindPlugin for Fake {
    fn post_bind(&self, _: &CycleState, _: &PodInfo, _: &str) {
        self.note("PostBind");
    }
}

/// Builds a framework with the fakes enabled at every point they implement, in order;
/// `weights` sets Score weights by name.
fn framework(plugins: Vec<Fake>, weights: &[(&str, i64)], handle: Handle) -> Framework {
    framework_reporting(plugins, weights, handle, Arc::new(NoMetrics))
}

/// Like [`framework`], reporting to `metrics`.
fn framework_reporting(
    plugins: Vec<Fake>,
    weights: &[(&str, i64)],
    handle: Handle,
    metrics: Arc<dyn MetricsSink>,
) -> Framework {
    let mut spec = ProfileSpec {
        scheduler_name: "test".into(),
        ..Default::default()
    };
    let mut instances: BTreeMap<String, Arc<dyn Plugin>> = BTreeMap::new();
    for p in plugins {
        let p: Arc<dyn Plugin> = Arc::new(p);
        for point in kubesched_framework::implemented_points(p.as_ref()) {
            let weight = weights
                .iter()
                .find(|(n, _)| *n == p.name())
                .map_or(0, |(_, w)| *w);
            spec.plugins
                .entry(point)
                .or_default()
                .push(PluginRef::weighted(p.name(), weight));
        }
        instances.insert(p.name().to_string(), p);
    }
    Framework::from_instances(spec, handle, metrics, instances, BTreeMap::new())
        .expect("valid framework")
}

fn nodes(names: &[&str]) -> Vec<Arc<NodeInfo>> {
    names
        .iter()
        .map(|n| node_info(NodeBuilder::new(n), &[]))
        .collect()
}

fn log() -> Arc<Mutex<Vec<String>>> {
    Arc::new(Mutex::new(Vec::new()))
}

#[test]
fn pre_filter_unresolvable_stops_at_once() {
    let l = log();
    let mut a = Fake::new("A", &l);
    a.pre_filter = Some((None, Status::unresolvable("no way")));
    let mut b = Fake::new("B", &l);
    b.pre_filter = Some((None, Status::success()));
    let fw = framework(vec![a, b], &[], Handle::default());
    let out = fw.run_pre_filter_plugins(&mut CycleState::new(), &PodBuilder::new("p").info(), &[]);
    assert_eq!(out.status.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(out.status.plugin(), Some("A"));
    assert_eq!(*l.lock(), vec!["A:PreFilter"]);
}

#[test]
fn pre_filter_unschedulable_lets_the_others_run() {
    let l = log();
    let mut a = Fake::new("A", &l);
    a.pre_filter = Some((None, Status::unschedulable("not now")));
    let mut b = Fake::new("B", &l);
    b.pre_filter = Some((None, Status::success()));
    let fw = framework(vec![a, b], &[], Handle::default());
    let out = fw.run_pre_filter_plugins(&mut CycleState::new(), &PodBuilder::new("p").info(), &[]);
    assert_eq!(out.status.code(), Code::Unschedulable);
    assert_eq!(out.status.plugin(), Some("A"));
    assert_eq!(*l.lock(), vec!["A:PreFilter", "B:PreFilter"]);
}

#[test]
fn pre_filter_skip_disables_that_plugins_filter() {
    let l = log();
    let mut a = Fake::new("A", &l);
    a.pre_filter = Some((None, Status::skip()));
    a.filter = Some(Box::new(|_| Status::unschedulable("never asked")));
    let fw = framework(vec![a], &[], Handle::default());
    let mut state = CycleState::new();
    let pod = PodBuilder::new("p").info();
    let out = fw.run_pre_filter_plugins(&mut state, &pod, &[]);
    assert!(out.status.is_success());
    assert!(state.skip_filter_plugins.contains("A"));
    let s = fw.run_filter_plugins(&state, &pod, &nodes(&["n1"])[0]);
    assert!(s.is_success());
    assert_eq!(*l.lock(), vec!["A:PreFilter"]);
}

#[test]
fn pre_filter_results_are_intersected_and_empty_rejects() {
    let l = log();
    let pick = |names: &[&str]| Some(PreFilterResult::nodes(names.iter().map(|s| s.to_string())));
    let mut a = Fake::new("A", &l);
    a.pre_filter = Some((pick(&["n1", "n2"]), Status::success()));
    let mut b = Fake::new("B", &l);
    b.pre_filter = Some((pick(&["n2", "n3"]), Status::success()));
    let fw = framework(vec![a, b], &[], Handle::default());
    let out = fw.run_pre_filter_plugins(&mut CycleState::new(), &PodBuilder::new("p").info(), &[]);
    assert!(out.status.is_success());
    assert_eq!(
        out.result.and_then(|r| r.node_names),
        Some(BTreeSet::from(["n2".to_string()]))
    );
    assert_eq!(
        out.unschedulable_plugins,
        BTreeSet::from(["A".to_string(), "B".to_string()])
    );

    let mut a = Fake::new("A", &l);
    a.pre_filter = Some((pick(&["n1"]), Status::success()));
    let mut b = Fake::new("B", &l);
    b.pre_filter = Some((pick(&["n3"]), Status::success()));
    let fw = framework(vec![a, b], &[], Handle::default());
    let out = fw.run_pre_filter_plugins(&mut CycleState::new(), &PodBuilder::new("p").info(), &[]);
    assert_eq!(out.status.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(
        out.status.message(),
        "node(s) didn't satisfy plugin(s) [A B] simultaneously"
    );

    let mut a = Fake::new("A", &l);
    a.pre_filter = Some((pick(&[]), Status::success()));
    let fw = framework(vec![a], &[], Handle::default());
    let out = fw.run_pre_filter_plugins(&mut CycleState::new(), &PodBuilder::new("p").info(), &[]);
    assert_eq!(out.status.message(), "node(s) didn't satisfy plugin A");
}

#[test]
fn pre_filter_error_is_wrapped() {
    let l = log();
    let mut a = Fake::new("A", &l);
    a.pre_filter = Some((None, Status::error("boom")));
    let fw = framework(vec![a], &[], Handle::default());
    let out = fw.run_pre_filter_plugins(&mut CycleState::new(), &PodBuilder::new("p").info(), &[]);
    assert_eq!(out.status.code(), Code::Error);
    assert_eq!(out.status.message(), "running PreFilter plugin \"A\": boom");
}

#[test]
fn filter_first_rejection_decides() {
    let l = log();
    let mut a = Fake::new("A", &l);
    a.filter = Some(Box::new(|n| {
        if n.name() == "bad" {
            Status::unschedulable("A says no")
        } else {
            Status::success()
        }
    }));
    let mut b = Fake::new("B", &l);
    b.filter = Some(Box::new(|_| Status::unresolvable("B says no")));
    let fw = framework(vec![a, b], &[], Handle::default());
    let pod = PodBuilder::new("p").info();
    let ns = nodes(&["bad", "good"]);
    let s = fw.run_filter_plugins(&CycleState::new(), &pod, &ns[0]);
    assert_eq!((s.code(), s.plugin()), (Code::Unschedulable, Some("A")));
    let s = fw.run_filter_plugins(&CycleState::new(), &pod, &ns[1]);
    assert_eq!(
        (s.code(), s.plugin()),
        (Code::UnschedulableAndUnresolvable, Some("B"))
    );
    assert_eq!(
        *l.lock(),
        vec!["A:Filter(bad)", "A:Filter(good)", "B:Filter(good)"]
    );
}

/// Records what the framework reports for `scheduler_plugin_evaluation_total` and
/// `scheduler_permit_wait_duration_seconds`.
#[derive(Default)]
struct Reported {
    evaluations: Mutex<BTreeMap<(String, String), u64>>,
    permit_waits: Mutex<Vec<(Code, Duration)>>,
    /// Plugin durations: how many were recorded per plugin, point and code.
    durations: Mutex<BTreeMap<(String, &'static str, Code), usize>>,
}

impl MetricsSink for Reported {
    fn extension_point_duration(&self, _: &str, _: ExtensionPoint, _: Code, _: Duration) {}
    fn plugin_duration(&self, plugin: &str, point: ExtensionPoint, code: Code, _: Duration) {
        *self
            .durations
            .lock()
            .entry((plugin.to_string(), point.as_str(), code))
            .or_default() += 1;
    }
    fn plugin_evaluations(&self, _profile: &str, point: ExtensionPoint, plugin: &str, count: u64) {
        *self
            .evaluations
            .lock()
            .entry((plugin.to_string(), point.as_str().to_string()))
            .or_default() += count;
    }
    fn permit_wait(&self, code: Code, duration: Duration) {
        self.permit_waits.lock().push((code, duration));
    }
}

#[test]
fn sampled_filter_timings_are_kept_until_the_buffer_is_dropped() {
    let l = log();
    let mut a = Fake::new("A", &l);
    a.filter = Some(Box::new(|n| {
        if n.name() == "bad" {
            Status::unschedulable("A says no")
        } else {
            Status::success()
        }
    }));
    let mut b = Fake::new("B", &l);
    b.filter = Some(Box::new(|n| {
        if n.name() == "worse" {
            Status::unresolvable("B says no")
        } else {
            Status::success()
        }
    }));
    let reported = Arc::new(Reported::default());
    let fw = framework_reporting(vec![a, b], &[], Handle::default(), reported.clone());
    let pod = PodBuilder::new("p").info();
    let all = nodes(&["bad", "worse", "good", "fine"]);
    let recorded = || reported.durations.lock().clone();
    let row = |plugin: &str, code: Code, n: usize| ((plugin.to_string(), "Filter", code), n);

    // A cycle that does not sample records nothing, buffer or not.
    let unsampled = CycleState::new();
    let mut timings = fw.filter_timings();
    for n in &all {
        fw.run_filter_plugins_with_nominated_pods_into(&unsampled, &pod, n, &mut timings);
    }
    drop(timings);
    assert_eq!(recorded(), BTreeMap::new());

    // A sampled cycle: nothing reaches the metrics while the buffer lives; once dropped,
    // one duration per plugin run, with the code the plugin answered.
    let mut sampled = CycleState::new();
    sampled.record_plugin_metrics = true;
    let mut timings = fw.filter_timings();
    let codes: Vec<Code> = all
        .iter()
        .map(|n| {
            fw.run_filter_plugins_with_nominated_pods_into(&sampled, &pod, n, &mut timings)
                .code()
        })
        .collect();
    assert_eq!(
        codes,
        [
            Code::Unschedulable,
            Code::UnschedulableAndUnresolvable,
            Code::Success,
            Code::Success
        ]
    );
    assert_eq!(recorded(), BTreeMap::new());
    drop(timings);
    let expected = BTreeMap::from([
        row("A", Code::Success, 3),
        row("A", Code::Unschedulable, 1),
        row("B", Code::Success, 2),
        row("B", Code::UnschedulableAndUnresolvable, 1),
    ]);
    assert_eq!(recorded(), expected);

    // Without a buffer the same sampled cycle records each node at once.
    fw.run_filter_plugins(&sampled, &pod, &all[2]);
    let mut expected = expected;
    *expected
        .get_mut(&("A".to_string(), "Filter", Code::Success))
        .unwrap() += 1;
    *expected
        .get_mut(&("B".to_string(), "Filter", Code::Success))
        .unwrap() += 1;
    assert_eq!(recorded(), expected);
}

#[test]
fn filter_evaluations_count_each_plugin_run_on_each_node() {
    let l = log();
    let mut a = Fake::new("A", &l);
    a.filter = Some(Box::new(|n| {
        if n.name() == "bad" {
            Status::unschedulable("A says no")
        } else {
            Status::success()
        }
    }));
    let mut b = Fake::new("B", &l);
    b.filter = Some(Box::new(|n| {
        if n.name() == "worse" {
            Status::unschedulable("B says no")
        } else {
            Status::success()
        }
    }));
    let reported = Arc::new(Reported::default());
    let fw = framework_reporting(vec![a, b], &[], Handle::default(), reported.clone());
    let pod = PodBuilder::new("p").info();
    let state = CycleState::new();
    let statuses: Vec<Status> = nodes(&["bad", "worse", "good", "fine"])
        .iter()
        .map(|n| fw.run_filter_plugins(&state, &pod, n))
        .collect();
    let passed = statuses.iter().filter(|s| s.is_success()).count();
    fw.record_filter_evaluations(&state, passed, statuses.iter().filter(|s| !s.is_success()));
    // A ran on all four nodes; B on the three A let through: as many runs as the log shows.
    let filter_runs = |name: &str| {
        l.lock()
            .iter()
            .filter(|e| e.starts_with(&format!("{name}:Filter")))
            .count() as u64
    };
    let evaluations = reported.evaluations.lock().clone();
    assert_eq!(
        evaluations,
        BTreeMap::from([
            (("A".to_string(), "Filter".to_string()), filter_runs("A")),
            (("B".to_string(), "Filter".to_string()), filter_runs("B")),
        ])
    );
    assert_eq!((filter_runs("A"), filter_runs("B")), (4, 3));
}

#[test]
fn scores_are_normalized_then_weighted() {
    let l = log();
    let mut a = Fake::new("A", &l);
    a.score = Some(Box::new(|n| if n.name() == "n1" { 10 } else { 5 }));
    a.normalize_to_max = true;
    let mut b = Fake::new("B", &l);
    b.score = Some(Box::new(|n| if n.name() == "n1" { 0 } else { 100 }));
    let fw = framework(vec![a, b], &[("A", 2), ("B", 1)], Handle::default());
    let table = fw
        .run_score_plugins(
            &CycleState::new(),
            &PodBuilder::new("p").info(),
            &nodes(&["n1", "n2"]),
        )
        .expect("scores");
    assert_eq!(table.plugins[0].raw, vec![10, 5]);
    assert_eq!(table.plugins[0].normalized, vec![100, 50]);
    assert_eq!(table.totals, vec![200, 200]);
}

#[test]
fn score_out_of_range_is_an_error_and_pre_score_skip_skips() {
    let l = log();
    let mut a = Fake::new("A", &l);
    a.score = Some(Box::new(|_| 101));
    let fw = framework(vec![a], &[], Handle::default());
    let err = fw
        .run_score_plugins(
            &CycleState::new(),
            &PodBuilder::new("p").info(),
            &nodes(&["n1"]),
        )
        .expect_err("101 is out of range");
    assert!(err.message().contains("invalid score 101"), "{err}");

    let mut a = Fake::new("A", &l);
    a.score = Some(Box::new(|_| 101));
    a.pre_score = Some(Status::skip());
    let fw = framework(vec![a], &[], Handle::default());
    let mut state = CycleState::new();
    let pod = PodBuilder::new("p").info();
    let ns = nodes(&["n1"]);
    assert!(fw.run_pre_score_plugins(&mut state, &pod, &ns).is_success());
    let table = fw
        .run_score_plugins(&state, &pod, &ns)
        .expect("skipped plugin");
    assert!(table.plugins.is_empty());
    assert_eq!(table.totals, vec![0]);
}

#[test]
fn reserve_failure_and_unreserve_in_reverse_order() {
    let l = log();
    let a = Fake {
        reserve: Some(Status::success()),
        ..Fake::new("A", &l)
    };
    let b = Fake {
        reserve: Some(Status::unschedulable("full")),
        ..Fake::new("B", &l)
    };
    let c = Fake {
        reserve: Some(Status::success()),
        ..Fake::new("C", &l)
    };
    let fw = framework(vec![a, b, c], &[], Handle::default());
    let pod = PodBuilder::new("p").info();
    let mut state = CycleState::new();
    let s = fw.run_reserve_plugins_reserve(&mut state, &pod, "n1");
    assert_eq!((s.code(), s.plugin()), (Code::Unschedulable, Some("B")));
    fw.run_reserve_plugins_unreserve(&mut state, &pod, "n1");
    assert_eq!(
        *l.lock(),
        vec![
            "A:Reserve",
            "B:Reserve",
            "C:Unreserve",
            "B:Unreserve",
            "A:Unreserve"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn permit_wait_then_allow() {
    let l = log();
    let a = Fake {
        permit: Some((Status::wait(), Duration::from_secs(10))),
        ..Fake::new("A", &l)
    };
    let handle = Handle::default();
    let reported = Arc::new(Reported::default());
    let fw = framework_reporting(vec![a], &[], handle.clone(), reported.clone());
    let pod = PodBuilder::new("p").info();
    let s = fw.run_permit_plugins(&CycleState::new(), &pod, "n1");
    assert!(s.is_wait());
    let wp = handle.waiting_pods().get(&pod.uid).expect("waiting");
    assert_eq!(wp.pending_plugins(), vec!["A".to_string()]);
    wp.allow("A");
    assert!(fw.wait_on_permit(&pod).await.is_success());
    let waits = reported.permit_waits.lock().clone();
    assert_eq!(
        waits.iter().map(|(c, _)| *c).collect::<Vec<_>>(),
        [Code::Success]
    );
    assert!(handle.waiting_pods().get(&pod.uid).is_none());
}

#[tokio::test(start_paused = true)]
async fn permit_wait_times_out() {
    let l = log();
    let a = Fake {
        permit: Some((Status::wait(), Duration::from_secs(10))),
        ..Fake::new("A", &l)
    };
    let fw = framework(vec![a], &[], Handle::default());
    let pod = PodBuilder::new("p").info();
    assert!(
        fw.run_permit_plugins(&CycleState::new(), &pod, "n1")
            .is_wait()
    );
    let s = fw.wait_on_permit(&pod).await;
    assert_eq!(s.code(), Code::Unschedulable);
    assert_eq!(s.plugin(), Some("A"));
    assert_eq!(
        s.message(),
        "rejected due to timeout after waiting 10s at plugin A"
    );
}

#[tokio::test(start_paused = true)]
async fn permit_reject_while_waiting_and_reject_at_once() {
    let l = log();
    let a = Fake {
        permit: Some((Status::wait(), Duration::from_secs(10))),
        ..Fake::new("A", &l)
    };
    let handle = Handle::default();
    let fw = framework(vec![a], &[], handle.clone());
    let pod = PodBuilder::new("p").info();
    assert!(
        fw.run_permit_plugins(&CycleState::new(), &pod, "n1")
            .is_wait()
    );
    handle
        .waiting_pods()
        .reject(&pod.uid, "A", "gang incomplete");
    let s = fw.wait_on_permit(&pod).await;
    assert_eq!(
        (s.code(), s.message()),
        (Code::Unschedulable, "gang incomplete".into())
    );

    let b = Fake {
        permit: Some((Status::unschedulable("nope"), Duration::ZERO)),
        ..Fake::new("B", &l)
    };
    let fw = framework(vec![b], &[], Handle::default());
    let s = fw.run_permit_plugins(&CycleState::new(), &pod, "n1");
    assert_eq!((s.code(), s.plugin()), (Code::Unschedulable, Some("B")));
    assert!(
        fw.wait_on_permit(&pod).await.is_success(),
        "nothing is waiting"
    );
}

#[tokio::test]
async fn bind_tries_plugins_until_one_does_not_skip_then_post_bind() {
    let l = log();
    let a = Fake {
        pre_bind: Some(Status::skip()),
        bind: Some(Status::skip()),
        ..Fake::new("A", &l)
    };
    let b = Fake {
        bind: Some(Status::success()),
        post_bind: true,
        ..Fake::new("B", &l)
    };
    let c = Fake {
        bind: Some(Status::error("never called")),
        ..Fake::new("C", &l)
    };
    let fw = framework(vec![a, b, c], &[], Handle::default());
    let pod = PodBuilder::new("p").info();
    let state = CycleState::new();
    assert!(
        fw.run_pre_bind_plugins(&state, &pod, "n1")
            .await
            .is_success()
    );
    assert!(fw.run_bind_plugins(&state, &pod, "n1").await.is_success());
    fw.run_post_bind_plugins(&state, &pod, "n1");
    assert_eq!(
        *l.lock(),
        vec!["A:PreBind", "A:Bind", "B:Bind", "B:PostBind"]
    );

    let only_skip = Fake {
        bind: Some(Status::skip()),
        ..Fake::new("S", &l)
    };
    let fw = framework(vec![only_skip], &[], Handle::default());
    assert!(fw.run_bind_plugins(&state, &pod, "n1").await.is_skip());
}

#[tokio::test]
async fn pre_flights_say_whether_pre_bind_has_work_and_skipped_plugins_are_left_out() {
    let l = log();
    let works = Fake {
        pre_bind: Some(Status::success()),
        pre_flight: Some(Status::success()),
        ..Fake::new("W", &l)
    };
    let idle = Fake {
        pre_bind: Some(Status::error("never called: its pre-flight said Skip")),
        pre_flight: Some(Status::skip()),
        ..Fake::new("I", &l)
    };
    let fw = framework(vec![works, idle], &[], Handle::default());
    let pod = PodBuilder::new("p").info();
    let mut state = CycleState::new();
    assert!(
        fw.run_pre_bind_pre_flights(&mut state, &pod, "n1")
            .is_success()
    );
    assert!(
        fw.run_pre_bind_plugins(&state, &pod, "n1")
            .await
            .is_success()
    );
    assert_eq!(
        *l.lock(),
        vec!["W:PreBindPreFlight", "I:PreBindPreFlight", "W:PreBind"]
    );

    // All Skip: Skip. An error, or a code other than Success/Skip/Error: an error naming
    // the plugin, as upstream words it.
    let idle_only = Fake {
        pre_bind: Some(Status::success()),
        pre_flight: Some(Status::skip()),
        ..Fake::new("I", &l)
    };
    let fw = framework(vec![idle_only], &[], Handle::default());
    assert!(
        fw.run_pre_bind_pre_flights(&mut CycleState::new(), &pod, "n1")
            .is_skip()
    );
    let failing = Fake {
        pre_bind: Some(Status::success()),
        pre_flight: Some(Status::error("no state")),
        ..Fake::new("F", &l)
    };
    let fw = framework(vec![failing], &[], Handle::default());
    let s = fw.run_pre_bind_pre_flights(&mut CycleState::new(), &pod, "n1");
    assert_eq!(s.code(), Code::Error);
    assert_eq!(s.message(), "running PreBindPreFlight \"F\": no state");
    let odd = Fake {
        pre_bind: Some(Status::success()),
        pre_flight: Some(Status::unschedulable("no")),
        ..Fake::new("U", &l)
    };
    let fw = framework(vec![odd], &[], Handle::default());
    let s = fw.run_pre_bind_pre_flights(&mut CycleState::new(), &pod, "n1");
    assert_eq!(s.code(), Code::Error);
    assert_eq!(
        s.message(),
        "PreBindPreFlight U returned \"Unschedulable\", which is unsupported. It is supposed to return Success, Skip, or Error status"
    );
}

/// v1.36 (#135393): neighbours whose pre-flight allowed it run PreBind at the same time
/// (both reach a rendezvous that only concurrent plugins pass); a plugin that did not allow
/// it runs alone, so the same rendezvous never completes. The clock is paused: the
/// timeout passes only once nothing else can run, without waiting.
#[tokio::test(start_paused = true)]
async fn pre_bind_plugins_allowing_it_run_in_parallel() {
    let run = |parallel: [bool; 2]| async move {
        let l = log();
        let meet = Arc::new(tokio::sync::Barrier::new(2));
        let plugins = ["A", "B"]
            .into_iter()
            .zip(parallel)
            .map(|(name, parallel)| Fake {
                pre_bind: Some(Status::success()),
                parallel,
                rendezvous: Some(meet.clone()),
                ..Fake::new(name, &l)
            })
            .collect();
        let fw = framework(plugins, &[], Handle::default());
        let mut state = CycleState::new();
        assert!(
            fw.run_pre_bind_pre_flights(&mut state, &PodBuilder::new("p").info(), "n1")
                .is_success()
        );
        tokio::time::timeout(
            Duration::from_secs(60),
            fw.run_pre_bind_plugins(&state, &PodBuilder::new("p").info(), "n1"),
        )
        .await
        .map(|s| s.is_success())
    };
    assert_eq!(run([true, true]).await, Ok(true), "both allowed: together");
    assert!(
        run([true, false]).await.is_err(),
        "one did not: one after the other"
    );
    assert!(run([false, false]).await.is_err(), "neither: sequential");
}

/// In a parallel batch the first failure is the answer, naming its plugin, and the
/// plugins still running are cancelled; a sequential plugin after the batch never runs.
#[tokio::test(start_paused = true)]
async fn a_failure_in_a_parallel_batch_cancels_the_rest() {
    let l = log();
    let slow = Fake {
        pre_bind: Some(Status::success()),
        parallel: true,
        pre_bind_forever: true,
        ..Fake::new("Slow", &l)
    };
    let failing = Fake {
        pre_bind: Some(Status::error("claim gone")),
        parallel: true,
        ..Fake::new("Failing", &l)
    };
    let after = Fake {
        pre_bind: Some(Status::success()),
        ..Fake::new("After", &l)
    };
    let fw = framework(vec![slow, failing, after], &[], Handle::default());
    let pod = PodBuilder::new("p").info();
    let mut state = CycleState::new();
    assert!(
        fw.run_pre_bind_pre_flights(&mut state, &pod, "n1")
            .is_success()
    );
    assert_eq!(
        state.parallel_pre_bind_plugins,
        ["Slow", "Failing"].into_iter().map(String::from).collect()
    );
    let s = tokio::time::timeout(
        Duration::from_secs(60),
        fw.run_pre_bind_plugins(&state, &pod, "n1"),
    )
    .await
    .expect("the failure ends PreBind without waiting for the slow plugin");
    assert_eq!(s.code(), Code::Error);
    assert_eq!(
        s.message(),
        "running PreBind plugin \"Failing\": claim gone"
    );
    let calls = l.lock().clone();
    assert!(calls.contains(&"Slow:PreBind".to_string()), "{calls:?}");
    assert!(!calls.contains(&"After:PreBind".to_string()), "{calls:?}");

    // Without pre-flights (NominatedNodeNameForExpectation off) nothing runs in parallel.
    let l = log();
    let meet = Arc::new(tokio::sync::Barrier::new(2));
    let plugins = ["A", "B"]
        .into_iter()
        .map(|name| Fake {
            pre_bind: Some(Status::success()),
            parallel: true,
            rendezvous: Some(meet.clone()),
            ..Fake::new(name, &l)
        })
        .collect();
    let fw = framework(plugins, &[], Handle::default());
    let waited = tokio::time::timeout(
        Duration::from_secs(60),
        fw.run_pre_bind_plugins(&CycleState::new(), &pod, "n1"),
    )
    .await;
    assert!(waited.is_err(), "no pre-flight, no parallel PreBind");
}

#[tokio::test]
async fn pre_bind_and_bind_errors_name_the_plugin() {
    let l = log();
    let a = Fake {
        pre_bind: Some(Status::error("volume not ready")),
        bind: Some(Status::error("conflict")),
        ..Fake::new("A", &l)
    };
    let fw = framework(vec![a], &[], Handle::default());
    let pod = PodBuilder::new("p").info();
    let state = CycleState::new();
    let s = fw.run_pre_bind_plugins(&state, &pod, "n1").await;
    assert_eq!(
        s.message(),
        "running PreBind plugin \"A\": volume not ready"
    );
    let s = fw.run_bind_plugins(&state, &pod, "n1").await;
    assert_eq!(s.message(), "running Bind plugin \"A\": conflict");
}

#[tokio::test]
async fn post_filter_first_success_wins_otherwise_reasons_join() {
    let l = log();
    let a = Fake {
        post_filter: Some((None, Status::unschedulable("A cannot help"))),
        ..Fake::new("A", &l)
    };
    let b = Fake {
        post_filter: Some((
            Some(PostFilterResult {
                nominated_node_name: Some("n1".into()),
            }),
            Status::success(),
        )),
        ..Fake::new("B", &l)
    };
    let fw = framework(vec![a, b], &[], Handle::default());
    let pod = PodBuilder::new("p").info();
    let (r, s) = fw
        .run_post_filter_plugins(&CycleState::new(), &pod, &NodeToStatus::default())
        .await;
    assert!(s.is_success());
    assert_eq!(r.and_then(|r| r.nominated_node_name), Some("n1".into()));

    let a = Fake {
        post_filter: Some((None, Status::unschedulable("A cannot help"))),
        ..Fake::new("A", &l)
    };
    let c = Fake {
        post_filter: Some((None, Status::unschedulable("C cannot help"))),
        ..Fake::new("C", &l)
    };
    let fw = framework(vec![a, c], &[], Handle::default());
    let (_, s) = fw
        .run_post_filter_plugins(&CycleState::new(), &pod, &NodeToStatus::default())
        .await;
    assert_eq!(s.code(), Code::Unschedulable);
    assert_eq!(s.reasons(), ["A cannot help", "C cannot help"]);
    assert_eq!(s.plugin(), Some("A"));
}

#[test]
fn nominated_pods_of_higher_priority_count_in_filter() {
    // A filter that rejects nodes holding more than one pod.
    let l = log();
    let a = Fake {
        filter: Some(Box::new(|n| {
            if n.pods.len() > 1 {
                Status::unschedulable("too crowded")
            } else {
                Status::success()
            }
        })),
        ..Fake::new("A", &l)
    };
    let handle = Handle::default();
    let fw = framework(vec![a], &[], handle.clone());
    let running = PodBuilder::new("running").node("n1").info();
    let node = node_info(NodeBuilder::new("n1"), &[running]);
    let low = PodBuilder::new("low").priority(1).info();
    let high = PodBuilder::new("high")
        .priority(10)
        .nominated_node("n1")
        .info();
    handle.nominator().add(high.clone(), None);
    let state = CycleState::new();
    let s = fw.run_filter_plugins_with_nominated_pods(&state, &low, &node);
    assert_eq!(
        s.code(),
        Code::Unschedulable,
        "the nominated pod takes the room"
    );
    let higher = PodBuilder::new("higher").priority(100).info();
    assert!(
        fw.run_filter_plugins_with_nominated_pods(&state, &higher, &node)
            .is_success()
    );
}

#[test]
fn a_cycle_sees_the_nominations_it_first_read_and_the_next_cycle_sees_changes() {
    let l = log();
    let a = Fake {
        filter: Some(Box::new(|n| {
            if n.pods.len() > 1 {
                Status::unschedulable("too crowded")
            } else {
                Status::success()
            }
        })),
        ..Fake::new("A", &l)
    };
    let handle = Handle::default();
    let fw = framework(vec![a], &[], handle.clone());
    let running = PodBuilder::new("running").node("n1").info();
    let node = node_info(NodeBuilder::new("n1"), &[running]);
    let pod = PodBuilder::new("pod").priority(1).info();
    let high = PodBuilder::new("high")
        .priority(10)
        .nominated_node("n1")
        .info();
    let other = PodBuilder::new("other").priority(10).info();
    handle.nominator().add(other.clone(), Some("n2"));
    let state = CycleState::new();
    assert!(
        fw.run_filter_plugins_with_nominated_pods(&state, &pod, &node)
            .is_success()
    );
    let view = handle.nominator().view();
    assert!(
        Arc::ptr_eq(&view, &handle.nominator().view()),
        "shared until a change"
    );
    assert_eq!(view.pods_for_node("n2").len(), 1);
    handle.nominator().add(high.clone(), None);
    assert!(
        view.pods_for_node("n1").is_empty(),
        "a view taken earlier stays as it was"
    );
    assert_eq!(handle.nominator().view().pods_for_node("n1").len(), 1);
    // The cycle keeps what it read first; a new cycle sees the nomination.
    assert!(
        fw.run_filter_plugins_with_nominated_pods(&state, &pod, &node)
            .is_success()
    );
    assert_eq!(
        fw.run_filter_plugins_with_nominated_pods(&CycleState::new(), &pod, &node)
            .code(),
        Code::Unschedulable
    );
    handle.nominator().remove(&high.uid);
    handle.nominator().remove(&other.uid);
    assert!(fw.nominations(&CycleState::new()).is_none());
}

#[test]
fn profile_rejects_a_plugin_at_a_point_it_does_not_implement() {
    let l = log();
    let a: Arc<dyn Plugin> = Arc::new(Fake::new("A", &l));
    let spec = ProfileSpec {
        scheduler_name: "t".into(),
        plugins: BTreeMap::from([(ExtensionPoint::Filter, vec![PluginRef::new("A")])]),
        ..Default::default()
    };
    let err = Framework::from_instances(
        spec,
        Handle::default(),
        Arc::new(NoMetrics),
        BTreeMap::from([("A".to_string(), a)]),
        BTreeMap::new(),
    )
    .expect_err("A has no Filter");
    assert_eq!(
        err.to_string(),
        "plugin \"A\" does not extend Filter plugin"
    );
}

/// A pod with one resource claim.
fn pod_with_claim() -> Arc<PodInfo> {
    PodBuilder::new("gpu")
        .with(|p| {
            p.spec.get_or_insert_with(Default::default).resource_claims = Some(vec![
                kubesched_framework::model::k8s_openapi::api::core::v1::PodResourceClaim {
                    name: "gpu".into(),
                    resource_claim_name: Some("gpu-claim".into()),
                    ..Default::default()
                },
            ])
        })
        .info()
}

#[test]
fn pods_with_resource_claims_are_unresolvable_without_dynamic_resources() {
    // No plugin named DynamicResources is registered in this test binary.
    let l = log();
    let mut a = Fake::new("A", &l);
    a.pre_filter = Some((None, Status::success()));
    let fw = framework(vec![a], &[], Handle::default());
    let out = fw.run_pre_filter_plugins(&mut CycleState::new(), &pod_with_claim(), &[]);
    assert_eq!(out.status.code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(
        out.status.reasons(),
        [kubesched_framework::DYNAMIC_RESOURCES_MISSING]
    );
    assert_eq!(out.status.plugin(), Some("DynamicResources"));
    assert!(l.lock().is_empty(), "no plugin runs for such a pod");
    // Pods without claims are untouched.
    let out = fw.run_pre_filter_plugins(&mut CycleState::new(), &PodBuilder::new("p").info(), &[]);
    assert!(out.status.is_success());
}

/// A view built from a shared base and the nodes changed since agrees with the nominator
/// after any run of changes, across rebuilds of the base; older views keep their moment.
#[test]
fn nominated_view_follows_every_change() {
    let nominator = Nominator::new();
    let pods: Vec<_> = (0..200)
        .map(|i| PodBuilder::new(&format!("p{i}")).priority(10).info())
        .collect();
    // A fixed pseudo-random walk (an LCG), the same on every run.
    let mut seed: u64 = 7;
    let mut next = |below: usize| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize % below
    };
    let mut earlier = Vec::new();
    for step in 0..2000 {
        let pod = &pods[next(pods.len())];
        if next(2) == 0 {
            nominator.add(pod.clone(), Some(&format!("n{}", next(50))));
        } else {
            nominator.remove(&pod.uid);
        }
        if step % 7 == 0 {
            let view = nominator.view();
            for k in 0..50 {
                let node = format!("n{k}");
                let uids =
                    |ps: &[Arc<PodInfo>]| ps.iter().map(|p| p.uid.clone()).collect::<Vec<_>>();
                assert_eq!(
                    uids(view.pods_for_node(&node)),
                    uids(&nominator.pods_for_node(&node)),
                    "step {step}, {node}"
                );
            }
            assert_eq!(view.is_empty(), nominator.is_empty());
            earlier.push((view, nominator.pods_for_node("n0")));
        }
    }
    for (view, pods) in earlier {
        assert_eq!(view.pods_for_node("n0").len(), pods.len());
    }
}
