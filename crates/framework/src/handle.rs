//! `Handle`: what a plugin may reach besides its arguments.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kubesched_model::PodInfo;
use parking_lot::RwLock;

use crate::client::{ClusterClient, NoopClient};
use crate::clock::{Clock, RealClock};
use crate::extender::Extender;
use crate::features::FeatureGates;
use crate::metrics::PluginMetrics;
use crate::nominator::Nominator;
use crate::objects::ObjectStore;
use crate::parallel::Parallelizer;
use crate::pre_bind::PodsInPreBind;
use crate::snapshot::Snapshot;
use crate::waiting::WaitingPods;

/// Moves pods back to the active queue (e.g. after a plugin frees what they waited for).
pub trait PodActivator: Send + Sync {
    /// Activates the pods with these UIDs, if they are waiting in the queue.
    fn activate(&self, uids: &[String]);
}

/// Every live pod the scheduler's event handlers know, bound or pending, of any scheduler
/// (finished and deleted pods leave), as upstream's pod informer lists them. Plugins that
/// reason about groups of pods (gang scheduling) count their members here.
pub trait LivePods: Send + Sync {
    /// The pods of `namespace` whose label `key` has `value`, sorted by name.
    fn with_label(&self, namespace: &str, key: &str, value: &str) -> Vec<Arc<PodInfo>>;

    /// The latest object of the pod with this UID, while it lives (what upstream reads
    /// from its pod lister).
    fn by_uid(&self, _uid: &str) -> Option<Arc<PodInfo>> {
        None
    }

    /// The pods of `namespace` whose `spec.schedulingGroup.podGroupName` is `group`, sorted
    /// by name (GenericWorkload's pod groups).
    fn in_pod_group(&self, _namespace: &str, _group: &str) -> Vec<Arc<PodInfo>> {
        Vec::new()
    }
}

/// No pods: the view of a handle built without a scheduler (unit tests).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoLivePods;

impl LivePods for NoLivePods {
    fn with_label(&self, _: &str, _: &str, _: &str) -> Vec<Arc<PodInfo>> {
        Vec::new()
    }
}

struct HandleInner {
    snapshot: RwLock<Arc<Snapshot>>,
    /// The snapshot's node count, readable per node without touching the lock or the Arc.
    num_nodes: AtomicUsize,
    client: Arc<dyn ClusterClient>,
    objects: Arc<ObjectStore>,
    live_pods: Arc<dyn LivePods>,
    nominator: Arc<Nominator>,
    waiting_pods: Arc<WaitingPods>,
    pods_in_pre_bind: Arc<PodsInPreBind>,
    parallelizer: Parallelizer,
    clock: Arc<dyn Clock>,
    features: FeatureGates,
    activator: RwLock<Option<Arc<dyn PodActivator>>>,
    extenders: Vec<Arc<dyn Extender>>,
    /// Work plugins started outside the scheduling cycle (asynchronous preemption) and not
    /// finished yet.
    background: Arc<AtomicUsize>,
    /// The async runtime the scheduler was built on, where background work runs whichever
    /// thread starts it.
    runtime: Option<tokio::runtime::Handle>,
    plugin_metrics: Arc<PluginMetrics>,
}

/// Shared access to the cluster view and the scheduler's services. Cheap to clone.
#[derive(Clone)]
pub struct Handle {
    inner: Arc<HandleInner>,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("nodes", &self.snapshot().num_nodes())
            .field("parallelizer", &self.inner.parallelizer)
            .finish()
    }
}

impl Default for Handle {
    fn default() -> Self {
        HandleBuilder::default().build()
    }
}

impl Handle {
    /// A builder with test-friendly defaults (no-op client, empty stores, parallelism 1).
    pub fn builder() -> HandleBuilder {
        HandleBuilder::default()
    }

    /// The snapshot of the current scheduling cycle.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.inner.snapshot.read().clone()
    }

    /// The number of nodes in the current snapshot; cheap enough for Score's per-node calls.
    pub fn num_nodes(&self) -> usize {
        self.inner.num_nodes.load(Ordering::Relaxed)
    }

    /// A writer of objects of kind `K` (a kind the plugin owns, declared in its
    /// registration's `writes`), through this handle's cluster client.
    pub fn object_writer<K: crate::kinds::Kind>(&self) -> crate::ObjectWriter<K> {
        crate::ObjectWriter::new(self.inner.client.clone())
    }

    /// The cluster client.
    pub fn client(&self) -> &Arc<dyn ClusterClient> {
        &self.inner.client
    }

    /// Objects other than nodes and pods.
    pub fn objects(&self) -> &Arc<ObjectStore> {
        &self.inner.objects
    }

    /// Every live pod, bound or pending (see [`LivePods`]).
    pub fn live_pods(&self) -> &Arc<dyn LivePods> {
        &self.inner.live_pods
    }

    /// Nominated pods.
    pub fn nominator(&self) -> &Arc<Nominator> {
        &self.inner.nominator
    }

    /// Pods waiting at Permit.
    pub fn waiting_pods(&self) -> &Arc<WaitingPods> {
        &self.inner.waiting_pods
    }

    /// Pods running their PreBind plugins (preemption cancels them in memory).
    pub fn pods_in_pre_bind(&self) -> &Arc<PodsInPreBind> {
        &self.inner.pods_in_pre_bind
    }

    /// The parallelizer.
    pub fn parallelizer(&self) -> &Parallelizer {
        &self.inner.parallelizer
    }

    /// The clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    /// The feature gates in effect.
    pub fn features(&self) -> &FeatureGates {
        &self.inner.features
    }

    /// Where plugins register counters under their own metric names (see [`PluginMetrics`]).
    pub fn plugin_metrics(&self) -> &Arc<PluginMetrics> {
        &self.inner.plugin_metrics
    }

    /// Runs `work` on the async runtime outside the scheduling cycle, counted in
    /// [`Handle::background_tasks`] until it ends (a simulation waits for it).
    ///
    /// Callable from any extension point and any thread: PreFilter, Filter and Score run on
    /// the parallelizer's threads, outside the runtime, and the work goes to the runtime
    /// the handle was built on (see [`HandleBuilder::runtime`]). A handle built off any
    /// runtime (unit tests) drops the work with a warning; [`Handle::can_spawn`] tells
    /// beforehand. Returns whether the work was started.
    pub fn spawn_background<F>(&self, work: F) -> bool
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let Some(runtime) = self.runtime() else {
            tracing::warn!("background work dropped: the handle has no async runtime");
            return false;
        };
        let counter = Arc::clone(&self.inner.background);
        counter.fetch_add(1, Ordering::SeqCst);
        runtime.spawn(async move {
            work.await;
            counter.fetch_sub(1, Ordering::SeqCst);
        });
        true
    }

    /// Whether [`Handle::spawn_background`] can start work: the handle knows a runtime,
    /// or the calling thread is on one.
    pub fn can_spawn(&self) -> bool {
        self.runtime().is_some()
    }

    /// The handle's runtime, else the caller's.
    fn runtime(&self) -> Option<tokio::runtime::Handle> {
        self.inner
            .runtime
            .clone()
            .or_else(|| tokio::runtime::Handle::try_current().ok())
    }

    /// Background work started by plugins and still running.
    pub fn background_tasks(&self) -> usize {
        self.inner.background.load(Ordering::SeqCst)
    }

    /// Moves pods back to the active queue.
    pub fn activate(&self, uids: &[String]) {
        if let Some(a) = self.inner.activator.read().as_ref() {
            a.activate(uids);
        }
    }

    /// The configured scheduler extenders, in the order they are consulted (ignorable
    /// ones last).
    pub fn extenders(&self) -> &[Arc<dyn Extender>] {
        &self.inner.extenders
    }
}

/// Builds a [`Handle`].
pub struct HandleBuilder {
    snapshot: Arc<Snapshot>,
    client: Arc<dyn ClusterClient>,
    objects: Arc<ObjectStore>,
    live_pods: Arc<dyn LivePods>,
    nominator: Arc<Nominator>,
    waiting_pods: Arc<WaitingPods>,
    parallelism: usize,
    caller_joins_pool: bool,
    clock: Arc<dyn Clock>,
    extenders: Vec<Arc<dyn Extender>>,
    features: FeatureGates,
    runtime: Option<tokio::runtime::Handle>,
    plugin_metrics: Arc<PluginMetrics>,
}

impl Default for HandleBuilder {
    fn default() -> Self {
        Self {
            snapshot: Arc::new(Snapshot::default()),
            client: Arc::new(NoopClient),
            objects: Arc::new(ObjectStore::default()),
            live_pods: Arc::new(NoLivePods),
            nominator: Arc::new(Nominator::new()),
            waiting_pods: Arc::new(WaitingPods::default()),
            parallelism: 1,
            caller_joins_pool: false,
            clock: Arc::new(RealClock),
            extenders: Vec::new(),
            features: FeatureGates::defaults(),
            runtime: None,
            plugin_metrics: Arc::default(),
        }
    }
}

impl HandleBuilder {
    /// The initial snapshot.
    pub fn snapshot(mut self, snapshot: Arc<Snapshot>) -> Self {
        self.snapshot = snapshot;
        self
    }
    /// The cluster client.
    pub fn client(mut self, client: Arc<dyn ClusterClient>) -> Self {
        self.client = client;
        self
    }
    /// The object store.
    pub fn objects(mut self, objects: Arc<ObjectStore>) -> Self {
        self.objects = objects;
        self
    }
    /// The view of every live pod.
    pub fn live_pods(mut self, live_pods: Arc<dyn LivePods>) -> Self {
        self.live_pods = live_pods;
        self
    }
    /// The nominator.
    pub fn nominator(mut self, nominator: Arc<Nominator>) -> Self {
        self.nominator = nominator;
        self
    }
    /// The waiting pods.
    pub fn waiting_pods(mut self, waiting_pods: Arc<WaitingPods>) -> Self {
        self.waiting_pods = waiting_pods;
        self
    }
    /// How many threads per-node work may use.
    pub fn parallelism(mut self, parallelism: usize) -> Self {
        self.parallelism = parallelism;
        self
    }
    /// Whether the building thread works in the parallelizer's pool too (see
    /// [`Parallelizer::joining_current_thread`]).
    pub fn caller_joins_pool(mut self, join: bool) -> Self {
        self.caller_joins_pool = join;
        self
    }
    /// The clock.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
    /// The scheduler extenders, in the order they are consulted.
    pub fn extenders(mut self, extenders: Vec<Arc<dyn Extender>>) -> Self {
        self.extenders = extenders;
        self
    }
    /// The feature gates.
    pub fn features(mut self, features: FeatureGates) -> Self {
        self.features = features;
        self
    }
    /// The async runtime background work runs on ([`Handle::spawn_background`]). When not
    /// given, the runtime the handle is built on, if any.
    pub fn runtime(mut self, runtime: tokio::runtime::Handle) -> Self {
        self.runtime = Some(runtime);
        self
    }
    /// The registry of plugins' own counters (the scheduler shares it with its /metrics).
    pub fn plugin_metrics(mut self, plugin_metrics: Arc<PluginMetrics>) -> Self {
        self.plugin_metrics = plugin_metrics;
        self
    }
    /// The handle, for plugins and tests that never install a snapshot or an activator.
    pub fn build(self) -> Handle {
        self.build_with_control().handle
    }

    /// The handle together with the [`HandleControl`] that installs snapshots and the
    /// activator: what the scheduler builds, keeping the control to itself.
    pub fn build_with_control(self) -> HandleControl {
        let handle = Handle {
            inner: Arc::new(HandleInner {
                num_nodes: AtomicUsize::new(self.snapshot.num_nodes()),
                snapshot: RwLock::new(self.snapshot),
                client: self.client,
                objects: self.objects,
                live_pods: self.live_pods,
                nominator: self.nominator,
                waiting_pods: self.waiting_pods,
                pods_in_pre_bind: Arc::default(),
                parallelizer: if self.caller_joins_pool {
                    Parallelizer::joining_current_thread(self.parallelism)
                } else {
                    Parallelizer::new(self.parallelism)
                },
                clock: self.clock,
                features: self.features,
                activator: RwLock::new(None),
                extenders: self.extenders,
                background: Arc::new(AtomicUsize::new(0)),
                runtime: self
                    .runtime
                    .or_else(|| tokio::runtime::Handle::try_current().ok()),
                plugin_metrics: self.plugin_metrics,
            }),
        };
        HandleControl { handle }
    }
}

/// The scheduler's side of a [`Handle`]: the setters only the scheduler may call. Plugins
/// receive a `&Handle` and cannot reach one (there is no way from a `Handle` to its
/// control), so a plugin cannot swap the cycle's snapshot or the queue's activator. It
/// dereferences to the handle it controls. Deliberately not `Clone`: one owner.
///
/// ```
/// use std::sync::Arc;
/// use kubesched_framework::{Handle, Snapshot};
///
/// let control = Handle::builder().build_with_control();
/// control.set_snapshot(Arc::new(Snapshot::default()));
/// assert_eq!(control.handle().num_nodes(), 0);
/// ```
///
/// A plugin's handle has no setter:
///
/// ```compile_fail
/// use std::sync::Arc;
/// use kubesched_framework::{Handle, Snapshot};
///
/// fn plugin_code(handle: &Handle) {
///     handle.set_snapshot(Arc::new(Snapshot::default()));
/// }
/// ```
pub struct HandleControl {
    handle: Handle,
}

impl std::fmt::Debug for HandleControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("HandleControl").field(&self.handle).finish()
    }
}

impl std::ops::Deref for HandleControl {
    type Target = Handle;
    fn deref(&self) -> &Handle {
        &self.handle
    }
}

impl HandleControl {
    /// The handle this controls (what plugins and frameworks get a clone of).
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Installs the snapshot of a new cycle.
    pub fn set_snapshot(&self, snapshot: Arc<Snapshot>) {
        let inner = &self.handle.inner;
        inner
            .num_nodes
            .store(snapshot.num_nodes(), Ordering::Relaxed);
        *inner.snapshot.write() = snapshot;
    }

    /// Sets who activates pods (the queue, once it exists).
    pub fn set_activator(&self, activator: Arc<dyn PodActivator>) {
        *self.handle.inner.activator.write() = Some(activator);
    }
}
