//! The simulation loop: deliver changes, schedule ready pods, let bindings finish, jump
//! the virtual clock to the next backoff expiry, until nothing is left to try.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1 as api;
use kubesched_config::LoadedConfig;
use kubesched_framework::clock::FakeClock;
use kubesched_framework::events::{ActionType, EventObject, EventResource};
use kubesched_framework::model::{PodInfo, PodObject};
use kubesched_scheduler::{
    AttemptObserver, AttemptOutcome, ClusterChange, Explanation, ExplanationScope, PodGroupOutcome,
    Scheduler, SchedulerParts, build_scheduler,
};
use parking_lot::Mutex;

use crate::cluster::{SimCluster, pod_key};
use crate::explained::ExplainedPods;
use crate::load::{
    InputProblem, InvalidPod, Manifests, apply_other, needs_priority, resolve_priority,
};
use crate::report::{
    Attempt, AttemptResult, EventRef, PlacementResult, PodGroupResult, PodResult, PodState,
    ReportEvent, ReportType, SimReport, Summary, percentile,
};
use crate::workload::{
    CreateNodes, CreatePods, CsiNodeTemplate, DeletePods, Expect, Op, Workload, generated_node,
    node_template, pod_template, volume_templates,
};

/// A simulation could not start or a workload failed.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The scheduler could not be built from the configuration.
    #[error("{0}")]
    Build(String),
    /// A workload's `expect` did not hold.
    #[error("workload {workload}: ops[{op}]: {message}")]
    Expectation {
        /// The workload.
        workload: String,
        /// The op index.
        op: usize,
        /// What differed.
        message: String,
    },
    /// A what-if could not be asked of this input.
    #[error("{0}")]
    WhatIf(String),
    /// The pod asked about is not in the input.
    #[error("pod {pod} not found{hint}")]
    PodNotFound {
        /// `namespace/name`.
        pod: String,
        /// What was looked at, after the pod's name (e.g. ` (finished pods are not read)`).
        hint: String,
    },
    /// A workload op could not be applied.
    #[error("workload {workload}: ops[{op}]: {message}")]
    Op {
        /// The workload.
        workload: String,
        /// The op index.
        op: usize,
        /// Why.
        message: String,
    },
}

/// The most virtual time one `settle` lets pass while pods keep backing off.
pub const MAX_SETTLE_VIRTUAL_TIME: Duration = Duration::from_secs(15 * 60);

/// One attempt as recorded; the report adds the words of a success.
#[derive(Debug, Clone)]
struct AttemptRecord {
    result: AttemptResult,
    node: Option<String>,
    nominated_node: Option<String>,
    /// The failure's message; consecutive identical ones share one allocation.
    message: Option<Arc<str>>,
}

#[derive(Debug, Clone, Default)]
struct PodRecord {
    history: Vec<AttemptRecord>,
    measured: bool,
}

impl PodRecord {
    fn failed_last(&self) -> Option<&str> {
        self.history
            .last()
            .filter(|a| a.result != AttemptResult::Scheduled)
            .map(|a| a.message.as_deref().unwrap_or_default())
    }
}

/// Explanations condensed for the HTML report as they are recorded.
#[derive(Default)]
struct Condensing {
    explained: ExplainedPods,
    /// Explanations whose attempt has not ended yet, by pod: an explanation arrives before
    /// its outcome, and the node the attempt binds the pod to is kept with it.
    pending: HashMap<String, Explanation>,
}

/// Records every attempt the scheduler reports.
#[derive(Default)]
struct Recorder {
    pods: Mutex<BTreeMap<String, PodRecord>>,
    latencies: Mutex<Vec<Duration>>,
    measured_latencies: Mutex<Vec<Duration>>,
    explain: Option<String>,
    explanations: Mutex<Vec<Explanation>>,
    /// Set by [`Simulation::condense_explanations`]: every pod is explained, and each
    /// attempt's explanation is condensed once its outcome is known.
    condensed: Mutex<Option<Condensing>>,
    measured_scheduled: Mutex<usize>,
    /// The last cycle of each pod group (GenericWorkload) and how many ran, by
    /// `namespace/name`.
    pod_groups: Mutex<BTreeMap<String, (PodGroupOutcome, u32)>>,
}

impl Recorder {
    /// Whether `SimulationOptions::explain` asks for this pod's explanations whole.
    fn wants_whole(&self, pod: &PodInfo) -> bool {
        match self.explain.as_deref() {
            Some(EXPLAIN_ALL) => true,
            Some(key) => key == pod.key(),
            None => false,
        }
    }
}

impl AttemptObserver for Recorder {
    fn attempt(&self, pod: &PodInfo, outcome: &AttemptOutcome, latency: Duration) {
        let key = pod.key();
        let mut pods = self.pods.lock();
        let rec = pods.entry(key.clone()).or_default();
        let (result, node, nominated_node, failure) = match outcome {
            AttemptOutcome::Scheduled { node } => {
                (AttemptResult::Scheduled, Some(node.clone()), None, None)
            }
            AttemptOutcome::Unschedulable {
                message,
                nominated_node,
            } => (
                AttemptResult::Unschedulable,
                None,
                nominated_node.clone(),
                Some(message),
            ),
            AttemptOutcome::Error {
                message,
                nominated_node,
            } => (
                AttemptResult::Error,
                None,
                nominated_node.clone(),
                Some(message),
            ),
        };
        let message = failure.map(
            |m| match rec.history.last().and_then(|a| a.message.as_ref()) {
                Some(prev) if **prev == **m => prev.clone(),
                _ => Arc::from(m.as_str()),
            },
        );
        rec.history.push(AttemptRecord {
            result,
            node,
            nominated_node,
            message,
        });
        let measured = rec.measured;
        drop(pods);
        if let Some(c) = self.condensed.lock().as_mut()
            && let Some(e) = c.pending.remove(&key)
        {
            let bound = match outcome {
                AttemptOutcome::Scheduled { node } => Some(node.as_str()),
                _ => None,
            };
            c.explained.record(&e, bound);
        }
        self.latencies.lock().push(latency);
        if measured {
            self.measured_latencies.lock().push(latency);
            if matches!(outcome, AttemptOutcome::Scheduled { .. }) {
                *self.measured_scheduled.lock() += 1;
            }
        }
    }

    fn explanation_scope(&self, pod: &PodInfo) -> Option<ExplanationScope> {
        if self.wants_whole(pod) {
            Some(ExplanationScope::AllNodes)
        } else {
            // The report explains every pod: what each attempt computed is enough, and
            // costs little over the run.
            self.condensed
                .lock()
                .is_some()
                .then_some(ExplanationScope::Examined)
        }
    }

    fn explanation(&self, pod: &PodInfo, mut explanation: Explanation) {
        // Explanations arrive before their attempt's outcome.
        let attempts = self
            .pods
            .lock()
            .get(&pod.key())
            .map_or(0, |r| r.history.len());
        explanation.attempt = Some(attempts as u32 + 1);
        let whole = self.wants_whole(pod);
        let explanation = match self.condensed.lock().as_mut() {
            Some(c) => {
                let copy = whole.then(|| explanation.clone());
                // An attempt whose outcome never came (none should) is condensed unbound.
                if let Some(earlier) = c.pending.insert(pod.key(), explanation) {
                    c.explained.record(&earlier, None);
                }
                match copy {
                    Some(e) => e,
                    None => return,
                }
            }
            None => explanation,
        };
        self.explanations.lock().push(explanation);
    }

    fn pod_group_attempt(&self, outcome: &PodGroupOutcome) {
        let key = format!("{}/{}", outcome.namespace, outcome.name);
        let mut groups = self.pod_groups.lock();
        let entry = groups.entry(key).or_insert_with(|| (outcome.clone(), 0));
        entry.0 = outcome.clone();
        entry.1 += 1;
    }
}

/// Progress of a long run, for a progress bar.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Pods that reached a final state so far.
    pub done: u64,
    /// Pods known so far.
    pub total: u64,
}

/// `SimulationOptions::explain` value that explains every pod (what `--report` uses); no
/// pod can be called `*`.
pub const EXPLAIN_ALL: &str = "*";

/// What a simulation is started with.
pub struct SimulationOptions {
    /// Seed of the tie-breaking RNG.
    pub seed: Option<u64>,
    /// `namespace/name` of a pod to explain, or [`EXPLAIN_ALL`].
    pub explain: Option<String>,
    /// Called now and then with progress.
    pub progress: Option<Box<dyn Fn(Progress) + Send + Sync>>,
}

impl std::fmt::Debug for SimulationOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimulationOptions")
            .field("seed", &self.seed)
            .field("explain", &self.explain)
            .finish()
    }
}

/// One simulated cluster with its scheduler.
pub struct Simulation {
    cluster: Arc<SimCluster>,
    scheduler: Arc<Scheduler>,
    clock: FakeClock,
    recorder: Arc<Recorder>,
    problems: Vec<InputProblem>,
    priority_classes: Vec<k8s_openapi::api::scheduling::v1::PriorityClass>,
    /// Pods this scheduler is responsible for, in arrival order.
    tracked: Vec<String>,
    /// Pending pods that name a scheduler no profile is, by that name (left alone, as
    /// kube-scheduler leaves another scheduler's pods).
    other_schedulers: BTreeMap<String, Vec<String>>,
    progress: Option<Box<dyn Fn(Progress) + Send + Sync>>,
    measured_time: Duration,
    measured_pods: usize,
    /// The number of the next volume a `createPods` op makes (`vol-<n>`).
    next_volume: usize,
    started: Instant,
    /// Pods an API server would refuse, in input order: reported as `Invalid`.
    invalid: Vec<InvalidPod>,
}

impl std::fmt::Debug for Simulation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulation")
            .field("cluster", &self.cluster)
            .finish()
    }
}

impl Simulation {
    /// A simulation of an empty cluster under the configuration.
    pub fn new(config: &LoadedConfig, options: SimulationOptions) -> Result<Self, SimError> {
        let clock = FakeClock::new();
        let cluster = Arc::new(SimCluster::with_clock(clock.clone()));
        let scheduler = build_scheduler(
            config,
            SchedulerParts {
                client: cluster.clone(),
                objects: cluster.objects().clone(),
                clock: Arc::new(clock.clone()),
                seed: options.seed.or(Some(0)),
                // A simulation runs its scheduler on the thread that builds it.
                caller_joins_pool: true,
            },
        )
        .map_err(|e| SimError::Build(e.to_string()))?;
        let recorder = Arc::new(Recorder {
            explain: options.explain.clone(),
            ..Default::default()
        });
        scheduler.set_observer(recorder.clone());
        scheduler.set_pod_lister(cluster.clone());
        Ok(Self {
            cluster,
            scheduler,
            clock,
            recorder,
            problems: Vec::new(),
            priority_classes: Vec::new(),
            tracked: Vec::new(),
            other_schedulers: BTreeMap::new(),
            progress: options.progress,
            measured_time: Duration::ZERO,
            measured_pods: 0,
            next_volume: 0,
            started: Instant::now(),
            invalid: Vec::new(),
        })
    }

    /// The scheduler's compiled form of this very object, if it has one (what the
    /// report and the usage charts read of a pod, so a packed pod is not decoded).
    pub fn compiled(&self, pod: &PodObject) -> Option<Arc<PodInfo>> {
        self.scheduler
            .handle()
            .live_pods()
            .by_uid(pod.key())
            .filter(|info| PodObject::ptr_eq(&info.pod, pod))
    }

    /// The in-memory cluster.
    pub fn cluster(&self) -> &Arc<SimCluster> {
        &self.cluster
    }

    /// The scheduler.
    pub fn scheduler(&self) -> &Arc<Scheduler> {
        &self.scheduler
    }

    /// The virtual clock.
    pub fn clock(&self) -> &FakeClock {
        &self.clock
    }

    /// Pending pods left alone because they name a scheduler no profile of the
    /// configuration is: by scheduler name, the pods' keys in input order.
    pub fn pods_of_other_schedulers(&self) -> &BTreeMap<String, Vec<String>> {
        &self.other_schedulers
    }

    /// Input problems seen so far.
    pub fn problems(&self) -> &[InputProblem] {
        &self.problems
    }

    /// Records input problems found while loading.
    pub fn add_problems(&mut self, problems: impl IntoIterator<Item = InputProblem>) {
        self.problems.extend(problems);
    }

    fn track_pod(&mut self, pod: &PodInfo, measured: bool) {
        if pod.node_name.is_some() {
            return;
        }
        let key = format!("{}/{}", pod.namespace, pod.name);
        if !self.scheduler.profiles().contains_key(&pod.scheduler_name) {
            self.other_schedulers
                .entry(pod.scheduler_name.clone())
                .or_default()
                .push(key);
            return;
        }
        self.tracked.push(key.clone());
        self.recorder.pods.lock().entry(key).or_default().measured = measured;
        if measured {
            self.measured_pods += 1;
        }
    }

    /// Adds a pod, resolving its priority class; a pod that cannot be understood is
    /// reported and left out, and parts of one that do not compile are reported.
    pub fn add_pod(&mut self, pod: impl Into<PodObject>, file: &str, measured: bool) {
        self.add_pod_compiled(pod.into(), None, file, measured);
    }

    /// As [`Simulation::add_pod`], with the pod's compiled form when the loader made it
    /// from this very object (then the object is not decoded again).
    fn add_pod_compiled(
        &mut self,
        mut pod: PodObject,
        compiled: Option<Arc<PodInfo>>,
        file: &str,
        measured: bool,
    ) {
        if let Some(info) = compiled.filter(|i| PodObject::ptr_eq(&i.pod, &pod)) {
            self.take_compiled(info, file, measured);
            self.cluster.apply_pod(pod);
            return;
        }
        // The loader's pods arrive packed and alone in their allocation: read once here,
        // changed only when they must be, and shared from here on by the cluster and the
        // scheduler's cache.
        let mut object = pod.read();
        if object.metadata.namespace.is_none() || needs_priority(&object) {
            let packed = pod.packed_len() > 0;
            drop(object);
            let mut whole = pod.into_object();
            let changed = Arc::make_mut(&mut whole);
            if changed.metadata.namespace.is_none() {
                changed.metadata.namespace = Some("default".into());
            }
            if let Err(m) = resolve_priority(changed, &self.priority_classes) {
                self.problems.push(InputProblem::object(
                    file,
                    format!("Pod {}", pod_key(changed)),
                    Some("spec.priorityClassName".into()),
                    m,
                ));
                return;
            }
            pod = if packed {
                PodObject::packed(&whole)
            } else {
                PodObject::new(Arc::clone(&whole))
            };
            object = whole;
        }
        let key = pod.name_key().to_string();
        match PodInfo::from_decoded(pod.clone(), &object) {
            Err(e) => {
                self.problems.push(InputProblem::object(
                    file,
                    format!("Pod {key}"),
                    Some(e.field.clone()),
                    e.message.clone(),
                ));
                return;
            }
            Ok(info) => {
                drop(object);
                self.take_compiled(Arc::new(info), file, measured);
            }
        }
        self.cluster.apply_pod(pod);
    }

    /// A pod compiled for loading: parts that do not compile are reported, and the pod
    /// still loads (a bound one counts on its node, a pending one is refused with the field
    /// named), as in a cluster. Compiled once: the scheduler takes this when the cluster
    /// delivers the pod.
    fn take_compiled(&mut self, info: Arc<PodInfo>, file: &str, measured: bool) {
        for e in &info.problems {
            self.problems.push(InputProblem::object(
                file,
                format!("Pod {}/{}", info.namespace, info.name),
                Some(e.field.clone()),
                e.message.clone(),
            ));
        }
        self.scheduler.remember_compiled(Arc::clone(&info));
        self.track_pod(&info, measured);
    }

    /// Adds a node; a node that cannot be understood is reported and left out.
    pub fn add_node(&mut self, node: api::Node, file: &str) {
        let name = node.metadata.name.clone().unwrap_or_default();
        if let Err(e) = kubesched_framework::model::Node::new(Arc::new(node.clone())) {
            self.problems.push(InputProblem::object(
                file,
                format!("Node {name}"),
                Some(e.field.clone()),
                e.message.clone(),
            ));
            return;
        }
        self.cluster.apply_node(node);
    }

    /// Gives `pod` its own volume made from the templates: a PersistentVolume `vol-<n>`
    /// (its source's ID set to that name) bound to a claim named after the pod, which the
    /// pod mounts.
    fn add_bound_volume(
        &mut self,
        pod: &mut api::Pod,
        pv_template: &api::PersistentVolume,
        pvc_template: &api::PersistentVolumeClaim,
    ) {
        let volume = format!("vol-{}", self.next_volume);
        self.next_volume += 1;
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let claim = pod.metadata.name.clone().unwrap_or_default();
        let mut pv = pv_template.clone();
        pv.metadata.name = Some(volume.clone());
        let spec = pv.spec.get_or_insert_with(Default::default);
        if let Some(ebs) = spec.aws_elastic_block_store.as_mut() {
            ebs.volume_id = volume.clone();
        }
        if let Some(pd) = spec.gce_persistent_disk.as_mut() {
            pd.pd_name = volume.clone();
        }
        if let Some(csi) = spec.csi.as_mut() {
            csi.volume_handle = volume.clone();
        }
        spec.claim_ref = Some(api::ObjectReference {
            kind: Some("PersistentVolumeClaim".into()),
            namespace: Some(namespace.clone()),
            name: Some(claim.clone()),
            ..Default::default()
        });
        pv.status = Some(api::PersistentVolumeStatus {
            phase: Some("Bound".into()),
            ..Default::default()
        });
        let mut pvc = pvc_template.clone();
        pvc.metadata.name = Some(claim.clone());
        pvc.metadata.namespace = Some(namespace);
        pvc.spec.get_or_insert_with(Default::default).volume_name = Some(volume);
        pvc.status = Some(api::PersistentVolumeClaimStatus {
            phase: Some("Bound".into()),
            ..Default::default()
        });
        pod.spec
            .get_or_insert_with(Default::default)
            .volumes
            .get_or_insert_with(Default::default)
            .push(api::Volume {
                name: "vol".into(),
                persistent_volume_claim: Some(api::PersistentVolumeClaimVolumeSource {
                    claim_name: claim,
                    read_only: None,
                }),
                ..Default::default()
            });
        let objects = self.cluster.objects();
        objects.persistent_volumes.upsert(pv.clone());
        objects.persistent_volume_claims.upsert(pvc.clone());
        for (resource, object) in [
            (
                EventResource::PersistentVolume,
                EventObject::object(Arc::new(pv)),
            ),
            (
                EventResource::PersistentVolumeClaim,
                EventObject::object(Arc::new(pvc)),
            ),
        ] {
            self.cluster.push_change(ClusterChange::Other {
                resource,
                action: ActionType::ADD,
                old: None,
                new: Some(object),
            });
        }
    }

    /// Adds the CSINode of a created node.
    fn add_csi_node(&mut self, node: &str, template: &CsiNodeTemplate) {
        use k8s_openapi::api::storage::v1 as storage;
        let mut annotations = BTreeMap::new();
        if !template.migrated_plugins.is_empty() {
            annotations.insert(
                "storage.alpha.kubernetes.io/migrated-plugins".to_string(),
                template.migrated_plugins.join(","),
            );
        }
        let csi_node = storage::CSINode {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(node.to_string()),
                annotations: (!annotations.is_empty()).then_some(annotations),
                ..Default::default()
            },
            spec: storage::CSINodeSpec {
                drivers: template
                    .allocatable
                    .iter()
                    .map(|(driver, count)| storage::CSINodeDriver {
                        name: driver.clone(),
                        node_id: node.to_string(),
                        allocatable: Some(storage::VolumeNodeResources {
                            count: Some(*count),
                        }),
                        ..Default::default()
                    })
                    .collect(),
            },
            ..Default::default()
        };
        self.cluster.objects().csi_nodes.upsert(csi_node.clone());
        self.cluster.push_change(ClusterChange::Other {
            resource: EventResource::CSINode,
            action: ActionType::ADD,
            old: None,
            new: Some(EventObject::object(Arc::new(csi_node))),
        });
    }

    /// Adds an object of another kind (namespaces, services, ...).
    pub fn add_other(&mut self, kind: &str, doc: serde_json::Value, file: &str) {
        let mut problems = Vec::new();
        for (resource, old, new) in apply_other(&self.cluster, kind, doc, file, &mut problems) {
            self.cluster.push_change(ClusterChange::Other {
                resource,
                action: if old.is_some() {
                    ActionType::UPDATE
                } else {
                    ActionType::ADD
                },
                old,
                new: Some(new),
            });
        }
        self.problems.extend(problems);
    }

    /// Loads manifests: priority classes and other objects first, then nodes, running
    /// pods, and pending pods, each group in input order.
    /// Pods an API server would refuse are not added: the report lists them as
    /// `Invalid`.
    pub fn load(&mut self, manifests: Manifests, file_hint: &str) {
        self.invalid.extend(manifests.invalid_pods);
        self.priority_classes.extend(manifests.priority_classes);
        for (kind, doc) in manifests.others {
            self.add_other(&kind, doc, file_hint);
        }
        for n in manifests.nodes {
            self.add_node(n, file_hint);
        }
        // Bound pods first (a stable sort keeps each group's input order), so pending
        // ones meet the cluster they were dumped from.
        let mut pods = manifests.pods;
        pods.sort_by_key(|p| !p.is_assigned());
        let mut compiled: HashMap<String, Arc<PodInfo>> = manifests
            .compiled
            .into_iter()
            .map(|info| (info.pod.key().to_string(), info))
            .collect();
        for p in pods {
            let info = compiled.remove(p.key());
            self.add_pod_compiled(p, info, file_hint, false);
        }
    }

    fn deliver_changes(&self) {
        for change in self.cluster.drain_changes() {
            self.scheduler.handle_change(change);
        }
    }

    async fn let_tasks_run(&self) {
        // On the current-thread runtime spawned binding and status tasks run only when we
        // yield; keep yielding until every binding cycle (and background work such as an
        // asynchronous preemption) has ended.
        let mut spins = 0u32;
        loop {
            tokio::task::yield_now().await;
            // Pods held at Permit wait for siblings the loop has yet to schedule (gangs)
            // or for the virtual clock (their timeout): neither comes while we wait here.
            let held = self.scheduler.handle().waiting_pods().still_waiting();
            if self.scheduler.in_flight_bindings() <= held
                && self.scheduler.handle().background_tasks() == 0
            {
                break;
            }
            spins += 1;
            if spins > 64 {
                // A Permit plugin is making a pod wait for real time.
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }

    fn report_progress(&self) {
        if let Some(p) = &self.progress {
            let done = self
                .recorder
                .pods
                .lock()
                .values()
                .filter(|r| !r.history.is_empty())
                .count() as u64;
            p(Progress {
                done,
                total: self.tracked.len() as u64,
            });
        }
    }

    /// Runs the scheduler until no pod is ready or backing off and no binding is in flight.
    /// Pods left in the unschedulable set stay there (until the clock passes the
    /// five-minute flush or an event moves them).
    pub async fn settle(&mut self) {
        let mut since_progress = 0u32;
        // Pods that keep failing for reasons only time changes (for example a Permit plugin
        // that always times out) would retry forever on a virtual clock; a run gives up
        // after this much virtual time and leaves them with their last message.
        let mut jumped = Duration::ZERO;
        loop {
            self.deliver_changes();
            if self.scheduler.schedule_next_ready().await {
                self.let_tasks_run().await;
                since_progress += 1;
                if since_progress >= 256 {
                    since_progress = 0;
                    self.report_progress();
                }
                continue;
            }
            self.let_tasks_run().await;
            if self.cluster.has_changes() {
                continue;
            }
            // Nothing to do until the next pod's backoff ends or the next preemption victim
            // is gone: jump the virtual clock there.
            let termination = self.cluster.next_termination();
            let permit_deadline = self.scheduler.handle().waiting_pods().next_deadline();
            let next = [
                self.scheduler.queue().next_backoff_expiry(),
                termination,
                permit_deadline,
            ]
            .into_iter()
            .flatten()
            .min();
            if let Some(at) = next {
                let now = kubesched_framework::clock::Clock::now(&self.clock);
                if at > now {
                    self.clock.advance(at - now);
                    // Waiting for victims always ends; only retries count towards the cap.
                    if termination != Some(at) {
                        jumped += at - now;
                    }
                }
                if jumped > MAX_SETTLE_VIRTUAL_TIME {
                    tracing::warn!(
                        "pods are still backing off after {} of virtual time; stopping here",
                        kubesched_framework::go_duration(jumped)
                    );
                    break;
                }
                self.cluster.finish_terminations();
                self.expire_permit_waits();
                self.scheduler.queue().flush_backoff_completed();
                continue;
            }
            break;
        }
        self.report_progress();
    }

    /// Times out the pods held at Permit whose wait ended on the virtual clock (the
    /// runtime's timer runs on real time, which a simulation does not wait for).
    fn expire_permit_waits(&self) {
        let now = kubesched_framework::clock::Clock::now(&self.clock);
        self.scheduler.handle().waiting_pods().expire_due(now);
    }

    /// Moves the virtual clock, running the queue's periodic flushes as time passes.
    pub async fn advance_clock(&mut self, by: Duration) {
        let step = Duration::from_secs(1);
        let mut left = by;
        let mut since_leftover = Duration::ZERO;
        while left > Duration::ZERO {
            let d = left.min(step);
            self.clock.advance(d);
            left -= d;
            since_leftover += d;
            self.cluster.finish_terminations();
            self.expire_permit_waits();
            self.scheduler.queue().flush_backoff_completed();
            if since_leftover >= Duration::from_secs(30) {
                since_leftover = Duration::ZERO;
                self.scheduler.queue().flush_unschedulable_left_over();
            }
            self.deliver_changes();
            while self.scheduler.schedule_next_ready().await {
                self.let_tasks_run().await;
                self.deliver_changes();
            }
        }
    }

    fn counts(&self) -> (usize, usize) {
        let pods = self.recorder.pods.lock();
        let mut scheduled = 0;
        let mut unschedulable = 0;
        for key in &self.tracked {
            match self.cluster.pod(key) {
                Some(p) if p.is_assigned() => scheduled += 1,
                Some(_) if pods.get(key).and_then(PodRecord::failed_last).is_some() => {
                    unschedulable += 1;
                }
                Some(_) | None => {}
            }
        }
        (scheduled, unschedulable)
    }

    /// Runs a workload's operations in order, settling at barriers and at the end.
    pub async fn run_workload(&mut self, workload: &Workload) -> Result<(), SimError> {
        self.run_workload_ops(workload, 0..workload.ops.len()).await
    }

    /// Runs the operations `ops` of a workload (errors name their index in the whole
    /// workload), then settles. Running a workload in two parts lets a caller look at the
    /// scheduler between them (the bench reads its metrics before the measured phase).
    pub async fn run_workload_ops(
        &mut self,
        workload: &Workload,
        ops: std::ops::Range<usize>,
    ) -> Result<(), SimError> {
        let file = format!("workload {}", workload.name);
        let op_err = |op: usize, message: String| SimError::Op {
            workload: workload.name.clone(),
            op,
            message,
        };
        let first = ops.start;
        let selected = workload.ops.get(ops).unwrap_or_default();
        for (i, op) in selected.iter().enumerate() {
            let i = first + i;
            match op {
                Op::CreateNodes(c) => self.op_create_nodes(c, &file).map_err(|m| op_err(i, m))?,
                Op::CreatePods(c) => self
                    .op_create_pods(c, &file)
                    .await
                    .map_err(|m| op_err(i, m))?,
                Op::CreateObjects(objects) => self
                    .op_create_objects(objects, &file)
                    .map_err(|m| op_err(i, m))?,
                Op::DeletePods(d) => self.op_delete_pods(d),
                Op::AdvanceClock(a) => {
                    self.settle().await;
                    self.advance_clock(Duration::from_secs(a.seconds)).await;
                }
                Op::Barrier(_) => self.settle().await,
                Op::Expect(e) => {
                    self.settle().await;
                    if let Some(message) = self.unmet_expectation(e) {
                        return Err(SimError::Expectation {
                            workload: workload.name.clone(),
                            op: i,
                            message,
                        });
                    }
                }
            }
        }
        self.settle().await;
        Ok(())
    }

    /// Requested cpu, memory and pod count against allocatable on every node, now (for the
    /// HTML report's before/after charts).
    pub fn node_usage(&self) -> Vec<crate::usage::NodeUsage> {
        crate::usage::node_usage(&self.cluster, &|pod| self.compiled(pod))
    }

    /// `createNodes`: `count` copies of the template named `<prefix>-<n>`, with hostname,
    /// zone and cycled labels, and the CSINode and ResourceSlice the op asks for.
    fn op_create_nodes(&mut self, c: &CreateNodes, file: &str) -> Result<(), String> {
        let template = node_template(c.template.as_ref())?;
        for n in 0..c.count {
            let node = generated_node(&template, c, n);
            let name = name_of(&node);
            if let Some(csi) = &c.csi_node {
                self.add_csi_node(&name, csi);
            }
            self.add_node(node, file);
            if let Some(t) = &c.resource_slice {
                self.add_other("ResourceSlice", node_resource_slice(t, &name), file);
            }
        }
        self.deliver_changes();
        Ok(())
    }

    /// `createPods`: `count` copies of the template named `<prefix>-<n>`, each with its own
    /// bound volume when the op has volume templates, settling every `scheduleEvery` pods.
    /// A measured op adds its wall time, until the last of its pods is tried and bound,
    /// to the measured time.
    async fn op_create_pods(&mut self, c: &CreatePods, file: &str) -> Result<(), String> {
        let template = pod_template(c.template.as_ref())?;
        let prefix = template
            .metadata
            .name
            .clone()
            .unwrap_or_else(|| "pod".into());
        let ns = c.namespace.clone().unwrap_or_else(|| "default".into());
        let volumes = volume_templates(c).map_err(|(f, m)| format!("{f}: {m}"))?;
        // Pods whose text depends on their index are rendered before the clock starts, so
        // a measured op times scheduling, not template expansion.
        let rendered = match &c.indexed_template {
            Some(t) => Some(
                (0..c.count)
                    .map(|n| t.pod(n, c.count))
                    .collect::<Result<Vec<_>, String>>()?,
            ),
            None => None,
        };
        // The op's pod groups exist before any of its pods, as a job controller makes them.
        if let Some(groups) = &c.pod_groups {
            let objects: Vec<serde_json::Value> = (0..groups.groups(c.count))
                .map(|g| groups.object(g, &ns))
                .collect();
            self.op_create_objects(&objects, file)?;
        }
        let start = Instant::now();
        let mut rendered = rendered.map(Vec::into_iter);
        for n in 0..c.count {
            let mut pod = match rendered.as_mut().and_then(Iterator::next) {
                Some(pod) => pod,
                None => template.clone(),
            };
            let name = match &pod.metadata.name {
                Some(name) if c.indexed_template.is_some() => name.clone(),
                _ => format!("{prefix}-{n}"),
            };
            if let Some(groups) = &c.pod_groups {
                let spec = pod.spec.get_or_insert_with(Default::default);
                spec.scheduling_group = Some(api::PodSchedulingGroup {
                    pod_group_name: Some(groups.name(n / groups.size.max(1))),
                });
            }
            pod.metadata.uid = Some(format!("{ns}/{name}"));
            pod.metadata.name = Some(name);
            pod.metadata.namespace = Some(ns.clone());
            if let Some((pv, pvc)) = &volumes {
                self.add_bound_volume(&mut pod, pv, pvc);
            }
            self.add_pod(pod, file, c.measure);
            if c.schedule_every > 0 && (n + 1) % c.schedule_every == 0 {
                self.settle().await;
            }
        }
        if c.measure {
            self.settle().await;
            self.measured_time += start.elapsed();
        }
        Ok(())
    }

    /// `createObjects`: each document loaded as a manifest file would be.
    fn op_create_objects(
        &mut self,
        objects: &[serde_json::Value],
        file: &str,
    ) -> Result<(), String> {
        for doc in objects {
            let mut m = Manifests::default();
            let mut problems = Vec::new();
            let text = serde_json::to_string(doc).unwrap_or_default();
            crate::load::load_text(&text, file, &mut m, &mut problems);
            if !problems.is_empty() {
                return Err(problems
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "));
            }
            self.load(m, file);
        }
        self.deliver_changes();
        Ok(())
    }

    /// `deletePods`: the namespace's pods that carry every given label, the first `count`
    /// of them when a count is given.
    fn op_delete_pods(&mut self, d: &DeletePods) {
        let mut victims: Vec<String> = self
            .cluster
            .pods()
            .iter()
            .map(PodObject::read)
            .filter(|p| p.metadata.namespace.as_deref() == Some(d.namespace.as_str()))
            .filter(|p| {
                let labels = p.metadata.labels.as_ref();
                d.labels
                    .iter()
                    .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
            })
            .map(|p| pod_key(&p))
            .collect();
        if let Some(n) = d.count {
            victims.truncate(n);
        }
        for v in victims {
            self.cluster.delete_pod_by_key(&v);
        }
        self.deliver_changes();
    }

    /// `expect`: the first count that differs from what the op expects, as a message.
    fn unmet_expectation(&self, e: &Expect) -> Option<String> {
        let (scheduled, unschedulable) = self.counts();
        let checks = [
            ("scheduled", e.scheduled, scheduled),
            ("unschedulable", e.unschedulable, unschedulable),
        ];
        checks.into_iter().find_map(|(what, want, got)| {
            want.filter(|w| *w != got)
                .map(|want| format!("expected {want} {what} pods, got {got}"))
        })
    }

    /// Measured pods that have been scheduled so far.
    pub fn measured_scheduled(&self) -> usize {
        *self.recorder.measured_scheduled.lock()
    }

    /// Time spent scheduling the measured pods, and how many there were.
    pub fn measured(&self) -> (Duration, usize, Vec<Duration>) {
        (
            self.measured_time,
            self.measured_pods,
            self.recorder.measured_latencies.lock().clone(),
        )
    }

    /// From now on every pod is explained for the HTML report, each attempt's explanation
    /// condensed to what the report draws from it ([`crate::html::ExplainedPods`]) once the
    /// attempt's outcome is known, instead of kept whole; the explanations
    /// [`SimulationOptions::explain`] asks for are still kept whole for the printed report.
    /// [`Simulation::take_explained`] hands the condensed ones over.
    pub fn condense_explanations(&self) {
        let mut condensed = self.recorder.condensed.lock();
        if condensed.is_none() {
            *condensed = Some(Condensing::default());
        }
    }

    /// What [`Simulation::condense_explanations`] recorded (empty without it), taken: an
    /// attempt still without an outcome is condensed with the node its pod is on.
    pub fn take_explained(&self) -> ExplainedPods {
        let Some(mut c) = self.recorder.condensed.lock().take() else {
            return ExplainedPods::new();
        };
        let mut pending: Vec<(String, Explanation)> = c.pending.drain().collect();
        pending.sort_by(|a, b| a.0.cmp(&b.0));
        for (key, e) in pending {
            let node = self
                .cluster
                .pod(&key)
                .and_then(|p| p.spec.as_ref()?.node_name.clone())
                .filter(|n| !n.is_empty());
            c.explained.record(&e, node.as_deref());
        }
        c.explained
    }

    /// [`Simulation::report`], moving the recorded explanations into it instead of copying
    /// them: a run that explains every pod (the HTML report's) holds them once, not twice.
    pub fn into_report(self) -> SimReport {
        let explanations = std::mem::take(&mut *self.recorder.explanations.lock());
        let mut report = self.report();
        report.explanations = explanations;
        report
    }

    /// Where every pod this scheduler is responsible for ended up, with the running pods
    /// that preemption evicted and the events the scheduler wrote.
    pub fn report(&self) -> SimReport {
        let records = self.recorder.pods.lock();
        let pending = self.scheduler.queue().pending_pods();
        let gated: BTreeMap<String, String> = pending
            .iter()
            .filter(|(_, q)| matches!(q, kubesched_queue::SubQueue::Gated))
            .map(|(p, _)| {
                let msg = self
                    .scheduler
                    .profiles()
                    .get(&p.scheduler_name)
                    .map(|fw| fw.run_pre_enqueue_plugins(p).message())
                    .unwrap_or_default();
                (p.key(), msg)
            })
            .collect();
        let events: Vec<ReportEvent> = self.cluster.events().iter().map(report_event).collect();
        // Preempted events, first per victim: who it made room for, and the note.
        let mut evictions: BTreeMap<String, (Option<String>, String)> = BTreeMap::new();
        let mut eviction_order: Vec<String> = Vec::new();
        let mut victims_of: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for e in events.iter().filter(|e| e.reason == PREEMPTED_REASON) {
            let victim = format!("{}/{}", e.regarding.namespace, e.regarding.name);
            if evictions.contains_key(&victim) {
                continue;
            }
            let preemptor = e
                .related
                .as_ref()
                .map(|r| format!("{}/{}", r.namespace, r.name));
            if let Some(p) = &preemptor {
                victims_of
                    .entry(p.clone())
                    .or_default()
                    .push(victim.clone());
            }
            evictions.insert(victim.clone(), (preemptor, e.note.clone()));
            eviction_order.push(victim);
        }
        let mut pods = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        let mut tracked_rows = 0;
        let keys = self
            .tracked
            .iter()
            .map(|k| (k, true))
            .chain(eviction_order.iter().map(|k| (k, false)));
        for (key, tracked) in keys {
            if !seen.insert(key.clone()) {
                continue;
            }
            let live = self.cluster.pod(key);
            let Some(pod) = live.clone().or_else(|| self.cluster.evicted_pod(key)) else {
                continue;
            };
            let (namespace, name) = key.split_once('/').unwrap_or(("default", key));
            let history: Vec<Attempt> = records
                .get(key)
                .map(|r| {
                    r.history
                        .iter()
                        .enumerate()
                        .map(|(i, a)| attempt(key, i, a))
                        .collect()
                })
                .unwrap_or_default();
            let node = pod.node_name().map(str::to_string);
            // What the row needs of the object, from its compiled form when the scheduler
            // has this very object (a packed pod is then not decoded).
            let (terminating, nominated) = match self.compiled(&pod) {
                Some(info) => (info.terminating, info.nominated_node_name.clone()),
                None => {
                    let object = pod.read();
                    let nominated = object
                        .status
                        .as_ref()
                        .and_then(|s| s.nominated_node_name.clone())
                        .filter(|n| !n.is_empty());
                    (object.metadata.deletion_timestamp.is_some(), nominated)
                }
            };
            let eviction = evictions.get(key);
            let (state, message) = match (eviction, &live) {
                (Some((_, note)), None) => (PodState::Preempted, Some(note.clone())),
                (Some((_, note)), Some(_)) if terminating => {
                    (PodState::Terminating, Some(note.clone()))
                }
                // Rejected while waiting at Permit instead of deleted: it goes on.
                _ if node.is_some() => (PodState::Scheduled, None),
                _ => match records.get(key).and_then(PodRecord::failed_last) {
                    Some(m)
                        if history
                            .last()
                            .is_some_and(|a| a.result == AttemptResult::Error) =>
                    {
                        (PodState::Error, Some(m.to_string()))
                    }
                    Some(m) => (PodState::Unschedulable, Some(m.to_string())),
                    None => (
                        PodState::Pending,
                        gated.get(key).cloned().filter(|m| !m.is_empty()),
                    ),
                },
            };
            if tracked {
                tracked_rows += 1;
            }
            // Binding clears the field (as kube-apiserver v1.35+ does): a bound pod shows
            // the nomination it was bound under, from its last attempts.
            let nominated_node = nominated.or_else(|| {
                node.as_ref()?;
                history.iter().rev().find_map(|a| a.nominated_node.clone())
            });
            pods.push(PodResult {
                namespace: namespace.to_string(),
                name: name.to_string(),
                node,
                status: state,
                message,
                attempts: history.len() as u32,
                nominated_node,
                victims: victims_of.remove(key).unwrap_or_default(),
                preempted_by: eviction.and_then(|(by, _)| by.clone()),
                history,
            });
        }
        drop(records);
        // Refused pods go after the tracked ones (they never reached the scheduler).
        let invalid_rows = self.invalid.iter().map(|p| PodResult {
            namespace: p.namespace.clone(),
            name: p.name.clone(),
            node: None,
            status: PodState::Invalid,
            message: Some(p.message.clone()),
            attempts: 0,
            nominated_node: None,
            victims: Vec::new(),
            preempted_by: None,
            history: Vec::new(),
        });
        let rows: Vec<PodResult> = invalid_rows.collect();
        let added = rows.len();
        pods.splice(tracked_rows..tracked_rows, rows);
        tracked_rows += added;
        let count = |state: PodState| {
            pods[..tracked_rows]
                .iter()
                .filter(|p| p.status == state)
                .count()
        };
        let scheduled = count(PodState::Scheduled);
        let unschedulable = count(PodState::Unschedulable);
        let pending = count(PodState::Pending);
        let invalid = count(PodState::Invalid);
        let errors = count(PodState::Error);
        let preempted = pods
            .iter()
            .filter(|p| matches!(p.status, PodState::Preempted | PodState::Terminating))
            .count();
        let attempts: u64 = pods.iter().map(|p| u64::from(p.attempts)).sum();
        let elapsed = self.started.elapsed();
        let mut latencies = self.recorder.latencies.lock().clone();
        latencies.sort();
        let summary = Summary {
            pods: tracked_rows,
            scheduled,
            unschedulable,
            pending,
            invalid,
            errors,
            preempted,
            attempts,
            nodes: self.cluster.node_count(),
            duration_seconds: Some(elapsed.as_secs_f64()),
            pods_per_second: Some(if elapsed.as_secs_f64() > 0.0 {
                scheduled as f64 / elapsed.as_secs_f64()
            } else {
                0.0
            }),
            latency_ms_p50: Some(percentile(&latencies, 50.0)),
            latency_ms_p99: Some(percentile(&latencies, 99.0)),
        };
        let pod_groups = self.pod_group_results(&pods);
        SimReport {
            type_meta: ReportType::default(),
            pods,
            summary,
            events,
            explanations: self.recorder.explanations.lock().clone(),
            pod_groups,
            problems: self.problems.clone(),
            what_if: None,
        }
    }
}

impl Simulation {
    /// Each pod group's last cycle, with its members bound at the end of the run.
    fn pod_group_results(&self, pods: &[PodResult]) -> Vec<PodGroupResult> {
        self.recorder
            .pod_groups
            .lock()
            .values()
            .map(|(o, cycles)| {
                let members: Vec<String> = o
                    .members
                    .iter()
                    .map(|(key, _)| {
                        key.split_once('/')
                            .map_or(key.as_str(), |(_, n)| n)
                            .to_string()
                    })
                    .collect();
                let scheduled = pods
                    .iter()
                    .filter(|p| {
                        p.namespace == o.namespace
                            && p.status == PodState::Scheduled
                            && members.contains(&p.name)
                    })
                    .count()
                    + o.already_scheduled;
                PodGroupResult {
                    namespace: o.namespace.clone(),
                    name: o.name.clone(),
                    min_count: o.min_count,
                    members,
                    scheduled,
                    placed: o.placed,
                    message: o.message.clone(),
                    cycles: *cycles,
                    placement: o.placements.as_ref().and_then(|p| p.chosen.clone()),
                    placements: o
                        .placements
                        .iter()
                        .flat_map(|p| &p.tried)
                        .map(|t| PlacementResult {
                            name: t.name.clone(),
                            nodes: t.nodes,
                            feasible: t.feasible,
                            score: t.score,
                        })
                        .collect(),
                }
            })
            .collect()
    }
}

/// A node's name.
fn name_of(node: &api::Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

/// The reason of the event a preemption victim gets (upstream's and DefaultPreemption's).
const PREEMPTED_REASON: &str = "Preempted";

fn attempt(key: &str, index: usize, a: &AttemptRecord) -> Attempt {
    let message = match (&a.message, &a.node) {
        (Some(m), _) => m.clone(),
        // The Scheduled event's words.
        (None, Some(node)) => Arc::from(format!("Successfully assigned {key} to {node}")),
        (None, None) => Arc::from(""),
    };
    Attempt {
        attempt: index as u32 + 1,
        result: a.result,
        node: a.node.clone(),
        nominated_node: a.nominated_node.clone(),
        message,
    }
}

fn report_event(e: &kubesched_framework::Event) -> ReportEvent {
    let object = |r: &kubesched_framework::ObjectRef| EventRef {
        namespace: r.namespace.clone(),
        name: r.name.clone(),
    };
    ReportEvent {
        reason: e.reason.clone(),
        event_type: match e.event_type {
            kubesched_framework::EventType::Normal => "Normal",
            kubesched_framework::EventType::Warning => "Warning",
        }
        .to_string(),
        action: e.action.clone(),
        regarding: object(&e.regarding),
        related: e.related.as_ref().map(object),
        note: e.note.clone(),
    }
}

/// A `createNodes` op's ResourceSlice template made concrete for one node: named
/// `<node>-<driver>`, published by the node, in a one-slice pool named after the node
/// unless the template names the pool.
fn node_resource_slice(template: &serde_json::Value, node: &str) -> serde_json::Value {
    let mut slice = template.clone();
    let driver = slice
        .pointer("/spec/driver")
        .and_then(|d| d.as_str())
        .unwrap_or("driver")
        .to_string();
    slice["apiVersion"] = "resource.k8s.io/v1".into();
    slice["kind"] = "ResourceSlice".into();
    slice["metadata"]["name"] = format!("{node}-{driver}").into();
    slice["spec"]["nodeName"] = node.into();
    if slice.pointer("/spec/pool/name").is_none() {
        slice["spec"]["pool"]["name"] = node.into();
        slice["spec"]["pool"]["generation"] = 1.into();
        slice["spec"]["pool"]["resourceSliceCount"] = 1.into();
    }
    slice
}
