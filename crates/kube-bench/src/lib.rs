//! `kubesched bench --kubeconfig FILE`: the benchmark workloads (benchmarks/*.yaml) run
//! against an API server instead of the in-memory cluster. It creates the workload's
//! namespaces, nodes, objects and initial pods through the API (setup, not timed), starts
//! the scheduler in cluster mode in this process (the code of `kubesched run`, on a
//! runtime of its own), creates the measured pods, watches them get bound, and reports
//! throughput, time to the first bind, the scheduler's CPU time and the API requests its
//! clients sent per scheduled pod. Everything it created is deleted at the end.
//!
//! It owns the driving and the measuring only; it must not reach into the scheduler
//! beyond what [`kubesched_live::Runner`] offers, so what it measures is what a
//! deployed `kubesched run` does.

mod cpu;
mod objects;
mod report;
mod tracker;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, Config};
use kubesched_config::LoadedConfig;
use kubesched_live::requests::RequestKind;
use kubesched_live::{RunOptions, Runner};
use kubesched_sim::bench::{LatencyMs, scale_workload};
use kubesched_sim::{Op, Workload, generated_node, node_template, percentile, pod_template};
use serde::{Deserialize, Serialize};

pub use report::{to_json, to_markdown};

use objects::{Created, DynamicKind};
use tracker::PodTracker;

/// How a workload is run against the API server.
#[derive(Debug, Clone)]
pub struct KubeBenchOptions {
    /// The kubeconfig of the API server (the scheduler and the pod-creating client use it).
    pub kubeconfig: PathBuf,
    /// The scheduler's configuration; None: the default one with `clientConnection`
    /// qps and burst raised to 5000, as scheduler_perf raises its clients' limits (the
    /// default 50 would make the rate limiter the whole measurement).
    pub config: Option<LoadedConfig>,
    /// Multiplies every node and pod count, in (0, 1].
    pub scale: f64,
    /// The scheduler's tie-breaking seed.
    pub seed: u64,
    /// The longest wait for the scheduler (its caches to sync, pods to be bound).
    pub timeout: Duration,
    /// Create requests the driver keeps in flight.
    pub concurrency: usize,
}

impl KubeBenchOptions {
    /// Defaults for `kubeconfig`.
    pub fn new(kubeconfig: PathBuf) -> Self {
        Self {
            kubeconfig,
            config: None,
            scale: 1.0,
            seed: 0,
            timeout: Duration::from_secs(600),
            concurrency: 64,
        }
    }
}

/// API requests of one verb and resource during the measured phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRate {
    /// `create`, `patch`, `list`, ...
    pub verb: String,
    /// `pods/binding`, `events.k8s.io/events`, ...
    pub resource: String,
    /// Requests sent.
    pub requests: u64,
    /// Requests per measured pod.
    pub per_pod: f64,
}

/// The result of one workload against an API server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KubeBenchResult {
    /// The workload's name.
    pub workload: String,
    /// Nodes created.
    pub nodes: usize,
    /// Pods created before the measured ones (pending when the scheduler starts).
    pub initial_pods: usize,
    /// Measured pods.
    pub measured_pods: usize,
    /// Measured pods bound per second, between the bind that completed the first 1 % of
    /// them and the last bind.
    pub pods_per_second: f64,
    /// Per measured pod, from its create request's answer to its bind as the driver's
    /// watch saw it.
    pub latency_ms: LatencyMs,
    /// From the scheduler's start (building its clients included) until every watcher
    /// had listed once.
    pub synced_seconds: f64,
    /// From the scheduler's start to its first bind, when an initial pod was bound (None
    /// when no initial pod could be).
    pub first_bind_seconds: Option<f64>,
    /// From the first measured pod's create request until the last measured pod bound.
    pub measured_seconds: f64,
    /// CPU time (user + system) of the scheduler's threads (its async runtime and its
    /// worker pool; not the driver's) during the measured phase, on Linux.
    pub scheduler_cpu_seconds: Option<f64>,
    /// `scheduler_cpu_seconds` per 10,000 measured pods.
    pub cpu_seconds_per_10k_pods: Option<f64>,
    /// Write requests (every verb but get, list and watch) per measured pod, events left
    /// out.
    pub writes_per_pod: f64,
    /// Every request the scheduler's clients sent during the measured phase, by verb and
    /// resource.
    pub requests: Vec<RequestRate>,
    /// The factor every count was multiplied by (1 for a real run).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub scale: f64,
}

fn one() -> f64 {
    1.0
}

fn is_one(v: &f64) -> bool {
    *v == 1.0
}

/// A workload could not be run against the API server.
#[derive(Debug, thiserror::Error)]
pub enum KubeBenchError {
    /// The scale factor is out of range.
    #[error("scale must be in (0, 1], got {0}")]
    Scale(f64),
    /// Nothing to measure.
    #[error("workload {0} has no createPods op with measure: true")]
    NothingMeasured(String),
    /// An op uses something this driver cannot do through the API.
    #[error("workload {workload}: ops[{op}]: {what} is not supported against an API server")]
    Unsupported {
        /// The workload.
        workload: String,
        /// The op's index.
        op: usize,
        /// What.
        what: String,
    },
    /// A request of the driver failed.
    #[error("workload {workload}: ops[{op}]: {message}")]
    Op {
        /// The workload.
        workload: String,
        /// The op's index.
        op: usize,
        /// What failed.
        message: String,
    },
    /// The client configuration or the scheduler could not be set up.
    #[error(transparent)]
    Run(#[from] kubesched_live::RunError),
    /// The driver's client could not be built.
    #[error("building the benchmark's client: {0}")]
    Client(String),
    /// The scheduler did not get somewhere in time.
    #[error("workload {workload}: {what} within {seconds} s")]
    Timeout {
        /// The workload.
        workload: String,
        /// What did not happen.
        what: String,
        /// The bound.
        seconds: u64,
    },
    /// An `expect` op did not hold.
    #[error("workload {workload}: ops[{op}]: {message}")]
    Expectation {
        /// The workload.
        workload: String,
        /// The op's index.
        op: usize,
        /// What differed.
        message: String,
    },
}

/// The scheduler's configuration for a run: the given one, else the default with the
/// client limits raised.
fn scheduler_config(options: &KubeBenchOptions) -> LoadedConfig {
    options.config.clone().unwrap_or_else(|| {
        let mut loaded = kubesched_config::default_config();
        loaded.config.client_connection.qps = 5000.0;
        loaded.config.client_connection.burst = 5000;
        loaded
    })
}

/// Refuses, before anything is created, what the driver cannot do through the API.
fn check_supported(workload: &Workload) -> Result<(), KubeBenchError> {
    let unsupported = |op: usize, what: &str| KubeBenchError::Unsupported {
        workload: workload.name.clone(),
        op,
        what: what.to_string(),
    };
    for (i, op) in workload.ops.iter().enumerate() {
        match op {
            Op::CreateNodes(c) if c.csi_node.is_some() => {
                return Err(unsupported(i, "createNodes.csiNode"));
            }
            Op::CreateNodes(c) if c.resource_slice.is_some() => {
                return Err(unsupported(i, "createNodes.resourceSlice"));
            }
            Op::CreatePods(c)
                if c.persistent_volume_template.is_some()
                    || c.persistent_volume_claim_template.is_some() =>
            {
                return Err(unsupported(i, "createPods with volume templates"));
            }
            Op::CreatePods(c) if c.pod_groups.is_some() || c.indexed_template.is_some() => {
                return Err(unsupported(
                    i,
                    "createPods with pod groups or per-pod templates",
                ));
            }
            Op::AdvanceClock(_) => {
                return Err(unsupported(
                    i,
                    "advanceClock (the scheduler runs on real time)",
                ));
            }
            Op::CreateObjects(docs) => {
                for doc in docs {
                    let kind = doc.get("kind").and_then(|k| k.as_str()).unwrap_or("");
                    if DynamicKind::of(kind).is_none() {
                        return Err(unsupported(i, &format!("createObjects of kind {kind:?}")));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Runs one workload against the API server of `options.kubeconfig` and measures it.
/// Whatever it created is deleted before it returns, also when it fails.
pub async fn run_workload(
    workload: &Workload,
    options: &KubeBenchOptions,
) -> Result<KubeBenchResult, KubeBenchError> {
    if !(options.scale > 0.0 && options.scale <= 1.0) {
        return Err(KubeBenchError::Scale(options.scale));
    }
    let workload = scale_workload(workload, options.scale);
    check_supported(&workload)?;
    if !workload
        .ops
        .iter()
        .any(|op| matches!(op, Op::CreatePods(c) if c.measure && c.count > 0))
    {
        return Err(KubeBenchError::NothingMeasured(workload.name.clone()));
    }
    let config: Config = kubesched_live::run::client_config(Some(&options.kubeconfig)).await?;
    let client = Client::try_from(config).map_err(|e| KubeBenchError::Client(e.to_string()))?;
    let namespaces = objects::namespaces_of(&workload);
    let tracker = PodTracker::start(client.clone(), namespaces.clone());
    let mut driver = Driver {
        workload: &workload,
        options,
        client: client.clone(),
        tracker,
        created: Created::default(),
        scheduler: None,
        nodes: 0,
        initial_pods: 0,
        measured: Vec::new(),
        measured_seconds: 0.0,
        start: Instant::now(),
        synced_seconds: 0.0,
        first_bind_seconds: None,
        cpu_before: None,
        requests_before: BTreeMap::new(),
    };
    let outcome = driver.run(&namespaces).await;
    let (cpu, requests) = driver.stop_scheduler().await;
    driver.tracker.stop();
    let result = outcome.and_then(|()| driver.result(cpu, requests));
    driver
        .created
        .delete_all(&client, options.concurrency)
        .await;
    result
}

struct SchedulerRun {
    runtime: tokio::runtime::Runtime,
    runner: Runner,
}

/// The state of one run.
struct Driver<'a> {
    workload: &'a Workload,
    options: &'a KubeBenchOptions,
    client: Client,
    tracker: PodTracker,
    created: Created,
    scheduler: Option<SchedulerRun>,
    nodes: usize,
    initial_pods: usize,
    /// `namespace/name` of every measured pod.
    measured: Vec<String>,
    measured_seconds: f64,
    start: Instant,
    synced_seconds: f64,
    first_bind_seconds: Option<f64>,
    cpu_before: Option<cpu::ThreadTimes>,
    requests_before: BTreeMap<RequestKind, u64>,
}

type Stopped = (Option<f64>, BTreeMap<RequestKind, u64>);

impl Driver<'_> {
    fn op_err(&self, op: usize, message: impl std::fmt::Display) -> KubeBenchError {
        KubeBenchError::Op {
            workload: self.workload.name.clone(),
            op,
            message: message.to_string(),
        }
    }

    fn timeout(&self, what: String) -> KubeBenchError {
        KubeBenchError::Timeout {
            workload: self.workload.name.clone(),
            what,
            seconds: self.options.timeout.as_secs(),
        }
    }

    async fn run(&mut self, namespaces: &BTreeSet<String>) -> Result<(), KubeBenchError> {
        self.tracker
            .wait_listed(self.options.timeout)
            .await
            .then_some(())
            .ok_or_else(|| self.timeout("the driver's pod watch did not list".into()))?;
        self.create_namespaces(namespaces).await?;
        let workload = self.workload;
        for (i, op) in workload.ops.iter().enumerate() {
            match op {
                Op::CreateNodes(c) => {
                    let template =
                        node_template(c.template.as_ref()).map_err(|m| self.op_err(i, m))?;
                    let nodes: Vec<Node> = (0..c.count)
                        .map(|n| generated_node(&template, c, n))
                        .collect();
                    let api: Api<Node> = Api::all(self.client.clone());
                    let names = create_all(&api, nodes, self.options.concurrency)
                        .await
                        .map_err(|e| self.op_err(i, e))?;
                    self.nodes += names.len();
                    self.created.nodes.extend(names);
                }
                Op::CreateObjects(docs) => {
                    for doc in docs {
                        let made = objects::create_object(&self.client, doc)
                            .await
                            .map_err(|e| self.op_err(i, e))?;
                        self.created.objects.extend(made);
                    }
                }
                Op::CreatePods(c) => {
                    if c.measure && self.scheduler.is_none() {
                        self.start_scheduler().await?;
                    }
                    if c.measure && self.cpu_before.is_none() {
                        self.begin_measuring();
                    }
                    let template =
                        pod_template(c.template.as_ref()).map_err(|m| self.op_err(i, m))?;
                    let prefix = template
                        .metadata
                        .name
                        .clone()
                        .unwrap_or_else(|| "pod".into());
                    let ns = c.namespace.clone().unwrap_or_else(|| "default".into());
                    let pods: Vec<Pod> = (0..c.count)
                        .map(|n| {
                            let mut pod = template.clone();
                            pod.metadata.name = Some(format!("{prefix}-{n}"));
                            pod.metadata.namespace = Some(ns.clone());
                            pod
                        })
                        .collect();
                    let started = Instant::now();
                    let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
                    let tracker = &self.tracker;
                    let names = create_all_with(&api, pods, self.options.concurrency, |name| {
                        tracker.created(&format!("{ns}/{name}"));
                    })
                    .await
                    .map_err(|e| self.op_err(i, e))?;
                    let keys: Vec<String> = names.iter().map(|n| format!("{ns}/{n}")).collect();
                    self.created.pods.extend(keys.iter().cloned());
                    if c.measure {
                        let want = keys.clone();
                        if !self
                            .tracker
                            .wait_for(self.options.timeout, |t| t.all_bound(&want))
                            .await
                        {
                            let bound = self.tracker.bound_count(&keys);
                            return Err(self.timeout(format!(
                                "only {bound} of {} measured pods were bound",
                                keys.len()
                            )));
                        }
                        self.measured_seconds += started.elapsed().as_secs_f64();
                        self.measured.extend(keys);
                    } else if self.scheduler.is_some() {
                        self.settle().await?;
                    } else {
                        self.initial_pods += keys.len();
                    }
                }
                Op::DeletePods(d) => {
                    let victims = self.tracker.matching(&d.namespace, &d.labels, d.count);
                    delete_pods(&self.client, &victims, self.options.concurrency).await;
                    self.created.pods.retain(|p| !victims.contains(p));
                }
                Op::Barrier(_) => {
                    if self.scheduler.is_none() {
                        self.start_scheduler().await?;
                    }
                    self.settle().await?;
                }
                Op::Expect(e) => {
                    if self.scheduler.is_none() {
                        self.start_scheduler().await?;
                    }
                    self.settle().await?;
                    let (scheduled, unschedulable) = self.tracker.counts(&self.created.pods);
                    for (what, want, got) in [
                        ("scheduled", e.scheduled, scheduled),
                        ("unschedulable", e.unschedulable, unschedulable),
                    ] {
                        if let Some(want) = want.filter(|w| *w != got) {
                            return Err(KubeBenchError::Expectation {
                                workload: self.workload.name.clone(),
                                op: i,
                                message: format!("expected {want} {what} pods, got {got}"),
                            });
                        }
                    }
                }
                Op::AdvanceClock(_) => {}
            }
        }
        Ok(())
    }

    async fn create_namespaces(
        &mut self,
        namespaces: &BTreeSet<String>,
    ) -> Result<(), KubeBenchError> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        for ns in namespaces {
            let obj = Namespace {
                metadata: kube::api::ObjectMeta {
                    name: Some(ns.clone()),
                    ..Default::default()
                },
                ..Default::default()
            };
            match api.create(&PostParams::default(), &obj).await {
                Ok(_) => self.created.namespaces.push(ns.clone()),
                // Not ours: it stays.
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => {
                    return Err(KubeBenchError::Op {
                        workload: self.workload.name.clone(),
                        op: 0,
                        message: format!("creating namespace {ns}: {e}"),
                    });
                }
            }
        }
        Ok(())
    }

    /// Starts the scheduler on a runtime of its own and waits until its caches synced and
    /// the pods created so far are bound or found unschedulable.
    async fn start_scheduler(&mut self) -> Result<(), KubeBenchError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name(cpu::SCHEDULER_THREAD_NAME)
            // Blocking threads keep their CPU time in /proc while they live.
            .thread_keep_alive(Duration::from_secs(24 * 3600))
            .build()
            .map_err(|e| {
                KubeBenchError::Client(format!("starting the scheduler's runtime: {e}"))
            })?;
        let mut run = RunOptions::new(scheduler_config(self.options));
        run.kubeconfig = Some(self.options.kubeconfig.clone());
        run.serving = None;
        run.leader_elect = Some(false);
        run.identity = Some("kubesched-bench".into());
        run.seed = Some(self.options.seed);
        self.start = Instant::now();
        let runner = runtime
            .spawn(Runner::start(run))
            .await
            .map_err(|e| KubeBenchError::Client(format!("starting the scheduler: {e}")))??;
        let synced = tokio::time::timeout(self.options.timeout, runner.wait_synced()).await;
        let Some(synced_at) = runner.synced_at().filter(|_| synced.is_ok()) else {
            self.scheduler = Some(SchedulerRun { runtime, runner });
            return Err(self.timeout("the scheduler's caches did not sync".into()));
        };
        // The scheduler's own instant, not when this task noticed it: a pod bound right
        // after the sync must not look as if it were bound before.
        self.synced_seconds = synced_at
            .saturating_duration_since(self.start)
            .as_secs_f64();
        self.scheduler = Some(SchedulerRun { runtime, runner });
        self.settle().await?;
        self.first_bind_seconds = self
            .tracker
            .first_bind()
            .map(|t| t.saturating_duration_since(self.start).as_secs_f64());
        Ok(())
    }

    /// Waits until every pod created so far is bound or was found unschedulable.
    async fn settle(&self) -> Result<(), KubeBenchError> {
        let pods = &self.created.pods;
        if self
            .tracker
            .wait_for(self.options.timeout, |t| t.all_settled(pods))
            .await
        {
            Ok(())
        } else {
            Err(self.timeout(format!(
                "{} of {} pods were neither bound nor found unschedulable",
                pods.len() - self.tracker.settled_count(pods),
                pods.len()
            )))
        }
    }

    fn begin_measuring(&mut self) {
        self.cpu_before = Some(cpu::scheduler_threads());
        if let Some(s) = &self.scheduler {
            self.requests_before = s.runner.request_counts().by_kind();
        }
    }

    async fn stop_scheduler(&mut self) -> Stopped {
        let Some(SchedulerRun { runtime, runner }) = self.scheduler.take() else {
            return (None, BTreeMap::new());
        };
        let cpu = self
            .cpu_before
            .as_ref()
            .and_then(|before| cpu::scheduler_threads().since(before));
        let mut requests = runner.request_counts().by_kind();
        for (kind, n) in &self.requests_before {
            if let Some(after) = requests.get_mut(kind) {
                *after = after.saturating_sub(*n);
            }
        }
        runner.stop();
        if tokio::time::timeout(Duration::from_secs(10), runner.wait())
            .await
            .is_err()
        {
            tracing::warn!("the scheduler did not stop within 10 s");
        }
        runtime.shutdown_background();
        (cpu, requests)
    }

    fn result(
        &self,
        cpu: Option<f64>,
        requests: BTreeMap<RequestKind, u64>,
    ) -> Result<KubeBenchResult, KubeBenchError> {
        let n = self.measured.len();
        let mut binds = self.tracker.bind_times(&self.measured);
        binds.sort_unstable();
        let mut latencies = self.tracker.latencies(&self.measured);
        latencies.sort_unstable();
        let per_pod = |count: u64| if n == 0 { 0.0 } else { count as f64 / n as f64 };
        let pods_per_second = throughput(&binds, self.measured_seconds);
        let rates: Vec<RequestRate> = requests
            .iter()
            .filter(|(_, c)| **c > 0)
            .map(|(k, &c)| RequestRate {
                verb: k.verb.clone(),
                resource: k.resource.clone(),
                requests: c,
                per_pod: per_pod(c),
            })
            .collect();
        let writes: u64 = rates
            .iter()
            .filter(|r| !matches!(r.verb.as_str(), "get" | "list" | "watch"))
            .filter(|r| !r.resource.ends_with("events"))
            .map(|r| r.requests)
            .sum();
        Ok(KubeBenchResult {
            workload: self.workload.name.clone(),
            nodes: self.nodes,
            initial_pods: self.initial_pods,
            measured_pods: n,
            pods_per_second,
            latency_ms: LatencyMs {
                p50: percentile(&latencies, 50.0),
                p90: percentile(&latencies, 90.0),
                p99: percentile(&latencies, 99.0),
            },
            synced_seconds: self.synced_seconds,
            first_bind_seconds: self.first_bind_seconds,
            measured_seconds: self.measured_seconds,
            scheduler_cpu_seconds: cpu,
            cpu_seconds_per_10k_pods: cpu.filter(|_| n > 0).map(|c| c * 10_000.0 / n as f64),
            writes_per_pod: per_pod(writes),
            requests: rates,
            scale: self.options.scale,
        })
    }
}

/// Pods per second between the bind that completes the first 1 % of `binds` (sorted) and
/// the last one; the whole measured time when they are too few or too close to tell.
pub fn throughput(binds: &[Instant], measured_seconds: f64) -> f64 {
    let n = binds.len();
    if n == 0 {
        return 0.0;
    }
    let first = n.div_ceil(100).max(1);
    if n > first {
        let span = binds[n - 1]
            .saturating_duration_since(binds[first - 1])
            .as_secs_f64();
        if span > 0.0 {
            return (n - first) as f64 / span;
        }
    }
    if measured_seconds > 0.0 {
        n as f64 / measured_seconds
    } else {
        0.0
    }
}

/// Creates every object, `concurrency` requests at a time; their names in order.
async fn create_all<K>(
    api: &Api<K>,
    objs: Vec<K>,
    concurrency: usize,
) -> Result<Vec<String>, String>
where
    K: kube::Resource
        + Clone
        + serde::de::DeserializeOwned
        + Serialize
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    create_all_with(api, objs, concurrency, |_| {}).await
}

/// [`create_all`], calling `on_created` with each name as its request is answered.
async fn create_all_with<K>(
    api: &Api<K>,
    objs: Vec<K>,
    concurrency: usize,
    on_created: impl Fn(&str),
) -> Result<Vec<String>, String>
where
    K: kube::Resource
        + Clone
        + serde::de::DeserializeOwned
        + Serialize
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let pp = PostParams::default();
    let names: Vec<String> = objs
        .iter()
        .map(|o| o.meta().name.clone().unwrap_or_default())
        .collect();
    let mut done = Vec::with_capacity(objs.len());
    let mut results = futures::stream::iter(objs.into_iter().enumerate())
        .map(|(i, obj)| {
            let api = api.clone();
            let pp = pp.clone();
            async move { api.create(&pp, &obj).await.map(|_| i) }
        })
        .buffer_unordered(concurrency.max(1));
    let mut first_error = None;
    while let Some(r) = results.next().await {
        match r {
            Ok(i) => {
                on_created(&names[i]);
                done.push(i);
            }
            Err(e) => {
                if first_error.is_none() {
                    first_error = Some(e);
                }
            }
        }
    }
    done.sort_unstable();
    match first_error {
        // What was created is still returned through the error's absence: the caller
        // records nothing, so delete what was made here before failing.
        Some(e) => {
            let made: Vec<String> = done.iter().map(|&i| names[i].clone()).collect();
            let dp = DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            };
            let _ = futures::stream::iter(made)
                .map(|name| {
                    let api = api.clone();
                    let dp = dp.clone();
                    async move { api.delete(&name, &dp).await.map(|_| ()) }
                })
                .buffer_unordered(concurrency.max(1))
                .try_collect::<Vec<()>>()
                .await;
            Err(format!("creating {} objects: {e}", names.len()))
        }
        None => Ok(done.into_iter().map(|i| names[i].clone()).collect()),
    }
}

/// Deletes pods (`namespace/name`) at once, `concurrency` at a time; failures are logged.
async fn delete_pods(client: &Client, keys: &[String], concurrency: usize) {
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    futures::stream::iter(keys.iter().cloned())
        .map(|key| {
            let client = client.clone();
            let dp = dp.clone();
            async move {
                let Some((ns, name)) = key.split_once('/') else {
                    return;
                };
                let api: Api<Pod> = Api::namespaced(client, ns);
                match api.delete(name, &dp).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => tracing::warn!(pod = %key, error = %e, "deleting a benchmark pod"),
                }
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect::<Vec<()>>()
        .await;
}

/// Runs `workload` on a runtime of its own (for the CLI).
pub fn run_workload_blocking(
    workload: &Workload,
    options: &KubeBenchOptions,
) -> Result<KubeBenchResult, KubeBenchError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("kubesched-bench")
        .enable_all()
        .build()
        .map_err(|e| KubeBenchError::Client(format!("starting the runtime: {e}")))?;
    runtime.block_on(run_workload(workload, options))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_leaves_the_first_percent_out() {
        let t0 = Instant::now();
        // 200 binds: the first two at t0 (a slow start), then one every 10 ms.
        let mut binds = vec![t0, t0];
        for i in 1..=198u64 {
            binds.push(t0 + Duration::from_millis(1000 + 10 * i));
        }
        // From the 2nd bind (t0) to the last (t0 + 2.98 s): 198 pods.
        let rate = throughput(&binds, 5.0);
        assert!((rate - 198.0 / 2.98).abs() < 1e-6, "{rate}");
        assert_eq!(throughput(&[], 1.0), 0.0);
        // One pod: the whole measured time.
        assert_eq!(throughput(&[t0], 0.5), 2.0);
    }

    #[test]
    fn unsupported_ops_are_refused_before_anything_is_created() {
        let w = Workload::from_str(
            "kind: Workload\nname: W\nops:\n- createNodes: {count: 1, csiNode: {allocatable: {d: 1}}}\n- createPods: {count: 1, measure: true}\n",
            "w.yaml",
        )
        .expect("valid");
        let e = check_supported(&w).expect_err("refused");
        assert_eq!(
            e.to_string(),
            "workload W: ops[0]: createNodes.csiNode is not supported against an API server"
        );
        let w = Workload::from_str(
            "kind: Workload\nname: W\nops:\n- createObjects: [{apiVersion: v1, kind: Namespace, metadata: {name: a}}, {apiVersion: v1, kind: Secret, metadata: {name: s}}]\n",
            "w.yaml",
        )
        .expect("valid");
        let e = check_supported(&w).expect_err("refused");
        assert!(
            e.to_string().contains("createObjects of kind \"Secret\""),
            "{e}"
        );
    }

    #[test]
    fn the_default_configuration_raises_the_client_limits_only() {
        let opts = KubeBenchOptions::new(PathBuf::from("kubeconfig"));
        let cfg = scheduler_config(&opts);
        assert_eq!(cfg.config.client_connection.qps, 5000.0);
        assert_eq!(cfg.config.client_connection.burst, 5000);
        let default = kubesched_config::default_config();
        assert_eq!(cfg.profiles.len(), default.profiles.len());
    }
}
