//! `kubesched run`: builds the kube client (kubeconfig, `KUBECONFIG` or in-cluster; QPS
//! and burst), the scheduler, the watchers, the HTTP endpoints and leader election, and
//! runs them until a shutdown signal (stop taking pods, let bindings in flight finish
//! within a bound, release the lease) or the loss of the lease (stop at once, fail).

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{Api, Client};
use kubesched_config::LoadedConfig;
use kubesched_framework::ObjectStore;
use kubesched_framework::clock::RealClock;
use kubesched_framework::registry;
use kubesched_scheduler::{Scheduler, SchedulerParts, build_scheduler};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::client::KubeClient;
pub use crate::connect::{
    Clients, EVENTS_MAX_IN_FLIGHT, LEASE_MAX_IN_FLIGHT, MAX_IN_FLIGHT, build_bounded_client,
    build_client, client_config, hostname,
};
use crate::error::RunError;
use crate::events::{EventRecorder, EventSettings};
use crate::lease::{HoldEnd, LeaderElector, LeaseSettings};
use crate::requests::RequestCounts;
use crate::server::{ServerHandle, Serving};
use crate::watch::{
    NodeSink, ObjectCache, POD_FIELD_SELECTOR, PodSink, Raw, StoreSink, SyncTracker, WatchSettings,
    WatchStats, WatchedKind, kinds_to_watch_for, run_watcher,
};

/// Knobs that tests turn; the defaults are what a real cluster wants.
#[derive(Debug, Clone)]
pub struct Tuning {
    /// Page size of the watchers' lists (500, as client-go).
    pub watch_page_size: u32,
    /// Event recorder timings.
    pub events: EventSettings,
}

impl Default for Tuning {
    fn default() -> Self {
        Self {
            watch_page_size: 500,
            events: EventSettings::default(),
        }
    }
}

/// Everything `kubesched run` needs.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The loaded configuration (every profile is scheduled).
    pub config: LoadedConfig,
    /// A kubeconfig file; wins over `clientConnection.kubeconfig`. Without either, the
    /// `KUBECONFIG` variable, then `~/.kube/config`, then the in-cluster configuration.
    pub kubeconfig: Option<PathBuf>,
    /// The API server's address (kube-scheduler's `--master`): replaces the server of the
    /// kubeconfig in use, credentials and CA kept.
    pub master: Option<String>,
    /// The HTTP endpoints; None serves none.
    pub serving: Option<Serving>,
    /// The leader election identity; default `<hostname>_<random>`.
    pub identity: Option<String>,
    /// Overrides `leaderElection.leaderElect`.
    pub leader_elect: Option<bool>,
    /// How long bindings in flight may take to finish after a shutdown signal.
    pub shutdown_timeout: Duration,
    /// Tie-breaking seed (None: random).
    pub seed: Option<u64>,
    /// Internal timings.
    pub tuning: Tuning,
    /// The command line's flags with their values, as `/flagz` lists them (kube-scheduler's
    /// flag set, defaults included); empty when the caller has none to show.
    pub flags: std::collections::BTreeMap<String, String>,
}

impl RunOptions {
    /// Options with the defaults for `config`: serve HTTPS on 0.0.0.0:10259 with a
    /// self-signed certificate, bindings get 30 s to finish at shutdown.
    pub fn new(config: LoadedConfig) -> Self {
        Self {
            config,
            kubeconfig: None,
            master: None,
            serving: Some(Serving {
                addr: SocketAddr::from(([0, 0, 0, 0], crate::DEFAULT_SECURE_PORT)),
                tls: crate::server::Tls::SelfSigned,
                auth: Some(crate::auth::DelegatedAuth::default()),
            }),
            identity: None,
            leader_elect: None,
            shutdown_timeout: Duration::from_secs(30),
            seed: None,
            tuning: Tuning::default(),
            flags: Default::default(),
        }
    }
}

fn default_identity() -> String {
    format!(
        "{}_{:016x}{:016x}",
        hostname(),
        fastrand::u64(..),
        fastrand::u64(..)
    )
}

/// Waits for SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => tracing::info!("received SIGTERM"),
                    _ = tokio::signal::ctrl_c() => tracing::info!("received SIGINT"),
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM; only SIGINT stops the scheduler");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

struct Shared {
    scheduler: Arc<Scheduler>,
    requests: Arc<RequestCounts>,
    sync: Arc<SyncTracker>,
    stats: Arc<WatchStats>,
    /// Shared with /metrics' `leader_election_master_status`.
    leading: Arc<AtomicBool>,
    identity: String,
    events: EventRecorder,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    loop_task: Mutex<Option<JoinHandle<()>>>,
}

impl Shared {
    fn spawn(&self, fut: impl Future<Output = ()> + Send + 'static) {
        self.tasks.lock().push(tokio::spawn(fut));
    }

    fn abort_all(&self) {
        for t in self.tasks.lock().drain(..) {
            t.abort();
        }
        if let Some(t) = self.loop_task.lock().take() {
            t.abort();
        }
    }
}

/// A running scheduler. Dropping it does not stop it: call [`Runner::stop`] and
/// [`Runner::wait`] (or [`Runner::kill`]).
pub struct Runner {
    shared: Arc<Shared>,
    stop_tx: watch::Sender<bool>,
    main: JoinHandle<Result<(), RunError>>,
    http_addr: Option<SocketAddr>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("identity", &self.shared.identity)
            .field("http_addr", &self.http_addr)
            .finish_non_exhaustive()
    }
}

/// A handle that asks a [`Runner`] to shut down gracefully (what SIGTERM does).
#[derive(Debug, Clone)]
pub struct StopHandle(watch::Sender<bool>);

impl StopHandle {
    /// Asks for a graceful shutdown.
    pub fn stop(&self) {
        self.0.send_replace(true);
    }
}

fn stopped(rx: &watch::Receiver<bool>) -> impl Future<Output = ()> + Send + 'static {
    let mut rx = rx.clone();
    async move {
        let _ = rx.wait_for(|s| *s).await;
    }
}

impl Runner {
    /// Connects, builds the scheduler and starts every task.
    pub async fn start(options: RunOptions) -> Result<Self, RunError> {
        let cfg = &options.config.config;
        let kubeconfig = options.kubeconfig.clone().or_else(|| {
            let p = cfg.client_connection.kubeconfig.trim();
            (!p.is_empty()).then(|| PathBuf::from(p))
        });
        let mut kube_config = client_config(kubeconfig.as_deref()).await?;
        if let Some(master) = options.master.as_deref() {
            kube_config.cluster_url = master
                .parse()
                .map_err(|e| RunError::ClientConfig(format!("--master {master}: {e}")))?;
        }
        let clients = Clients::build(
            kube_config,
            cfg.client_connection.qps,
            cfg.client_connection.burst,
            cfg.leader_election.renew_deadline,
        )?;
        // One request on each client before the traffic starts: its first connection
        // negotiates HTTP/2 and the requests that follow share it, instead of each opening
        // a connection of its own while none is ready yet. Failures are the watchers' to
        // report.
        let _ = tokio::time::timeout(
            Duration::from_secs(5),
            futures::future::join3(
                clients.main.apiserver_version(),
                clients.events.apiserver_version(),
                clients.lease.apiserver_version(),
            ),
        )
        .await;
        Self::start_with_clients(options, clients).await
    }

    /// Like [`Runner::start`], with one client built by the caller for everything.
    pub async fn start_with_client(options: RunOptions, client: Client) -> Result<Self, RunError> {
        Self::start_with_clients(options, Clients::shared(client)).await
    }

    /// Like [`Runner::start`], with the clients built by the caller.
    pub async fn start_with_clients(
        options: RunOptions,
        clients: Clients,
    ) -> Result<Self, RunError> {
        let loaded = &options.config;
        let cfg = &loaded.config;
        let identity = options.identity.clone().unwrap_or_else(default_identity);
        let (profile_names, primary) = profile_names(loaded);
        let pods = Arc::new(ObjectCache::<Pod>::default());
        let (events, events_task) =
            start_event_recorder(&clients, &pods, &profile_names, &primary, &options);
        let objects = Arc::new(ObjectStore::default());
        let scheduler =
            build_cluster_scheduler(&options, &clients, &pods, &events, &objects, primary)?;

        let kinds = kinds_to_watch_for(enabled_plugins(loaded));
        let sync = Arc::new(SyncTracker::new(&kinds));
        let stats = Arc::new(WatchStats::default());
        let leading = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared {
            scheduler: scheduler.clone(),
            requests: clients.counts.clone(),
            sync: sync.clone(),
            stats: stats.clone(),
            leading: leading.clone(),
            identity: identity.clone(),
            events,
            tasks: Mutex::new(vec![events_task]),
            loop_task: Mutex::new(None),
        });
        let leader_status = leader_election_on(&options).then(|| leading.clone());
        let server = serve_endpoints(&options, &clients, &scheduler, &sync, leader_status).await?;
        let http_addr = server.as_ref().map(|s| s.addr);
        let watchers = WatcherSet {
            client: clients.main.clone(),
            kinds,
            scheduler,
            objects,
            pods,
            settings: WatchSettings {
                page_size: options.tuning.watch_page_size,
                sync,
                stats,
            },
        };
        let elector = leader_elector(&options, &clients, &identity);
        let leader_elect = elector.is_some();
        let (stop_tx, stop_rx) = watch::channel(false);
        let main = tokio::spawn(main_task(
            shared.clone(),
            watchers,
            elector,
            cfg.delay_cache_until_active,
            stop_rx,
            options.shutdown_timeout,
            server,
        ));
        tracing::info!(%identity, profiles = ?profile_names, leader_elect, "kubesched started");
        Ok(Self {
            shared,
            stop_tx,
            main,
            http_addr,
        })
    }

    /// The address of the HTTP endpoints, when served.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// The scheduler.
    pub fn scheduler(&self) -> &Arc<Scheduler> {
        &self.shared.scheduler
    }

    /// Whether this instance leads (and so schedules).
    pub fn is_leader(&self) -> bool {
        self.shared.leading.load(Ordering::SeqCst)
    }

    /// The leader election identity.
    pub fn identity(&self) -> &str {
        &self.shared.identity
    }

    /// Whether every watcher has listed once.
    pub fn synced(&self) -> bool {
        self.shared.sync.all_synced()
    }

    /// The instant every watcher had listed once (the scheduler schedules nothing before
    /// it), when they have.
    pub fn synced_at(&self) -> Option<std::time::Instant> {
        self.shared.sync.synced_at()
    }

    /// Waits until every watcher has listed once.
    pub async fn wait_synced(&self) {
        self.shared.sync.wait().await;
    }

    /// The API requests the scheduler's clients sent so far.
    pub fn request_counts(&self) -> &Arc<RequestCounts> {
        &self.shared.requests
    }

    /// What the watchers saw.
    pub fn watch_stats(&self) -> &WatchStats {
        &self.shared.stats
    }

    /// A handle to ask for a graceful shutdown.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle(self.stop_tx.clone())
    }

    /// Asks for a graceful shutdown (as SIGTERM does). The queue closes at once, so no
    /// pod is taken after this returns; the main task drains what is in flight.
    pub fn stop(&self) {
        self.shared.scheduler.queue().close();
        self.stop_tx.send_replace(true);
    }

    /// Waits until the scheduler has stopped: Ok after a requested shutdown, an error
    /// when it had to stop (the lease was lost).
    pub async fn wait(self) -> Result<(), RunError> {
        match self.main.await {
            Ok(r) => r,
            Err(e) => Err(RunError::Internal(format!("the main task failed: {e}"))),
        }
    }

    /// Stops everything at once, without releasing the lease or waiting for bindings
    /// (what a crash looks like to the cluster).
    pub fn kill(self) {
        self.main.abort();
        self.shared.scheduler.queue().close();
        self.shared.abort_all();
    }
}

/// Runs until `shutdown` completes (then stops gracefully) or the lease is lost.
pub async fn run(options: RunOptions, shutdown: impl Future<Output = ()>) -> Result<(), RunError> {
    let runner = Runner::start(options).await?;
    let stop = runner.stop_handle();
    let mut wait = std::pin::pin!(runner.wait());
    tokio::select! {
        r = &mut wait => return r,
        _ = shutdown => {
            tracing::info!("shutting down");
            stop.stop();
        }
    }
    wait.await
}

/// The profiles' scheduler names, and the first one (events of pods no profile claims
/// are reported under it).
fn profile_names(loaded: &LoadedConfig) -> (Vec<String>, String) {
    let names: Vec<String> = loaded
        .profiles
        .iter()
        .map(|p| p.scheduler_name.clone())
        .collect();
    let primary = names
        .first()
        .cloned()
        .unwrap_or_else(|| kubesched_framework::model::DEFAULT_SCHEDULER_NAME.to_string());
    (names, primary)
}

/// Starts the event recorder on its own client; an event is reported by the profile of
/// the pod it is about.
fn start_event_recorder(
    clients: &Clients,
    pods: &Arc<ObjectCache<Pod>>,
    profile_names: &[String],
    primary: &str,
    options: &RunOptions,
) -> (EventRecorder, JoinHandle<()>) {
    let controller_of = {
        let pods = pods.clone();
        let names = profile_names.to_vec();
        let primary = primary.to_string();
        Arc::new(move |r: &kubesched_framework::ObjectRef| {
            pods.get(&format!("{}/{}", r.namespace, r.name))
                .and_then(|p| p.spec.as_ref().and_then(|s| s.scheduler_name.clone()))
                .filter(|n| names.contains(n))
                .unwrap_or_else(|| primary.clone())
        }) as crate::events::ControllerOf
    };
    EventRecorder::start(
        clients.events.clone(),
        controller_of,
        hostname(),
        options.tuning.events.clone(),
    )
}

/// The scheduler of the configured profiles, writing through the kube client and reading
/// pods from the pod watcher's cache.
fn build_cluster_scheduler(
    options: &RunOptions,
    clients: &Clients,
    pods: &Arc<ObjectCache<Pod>>,
    events: &EventRecorder,
    objects: &Arc<ObjectStore>,
    primary: String,
) -> Result<Arc<Scheduler>, RunError> {
    let kube_client = KubeClient::new(clients.main.clone(), pods.clone(), events.clone(), primary);
    let scheduler = build_scheduler(
        &options.config,
        SchedulerParts {
            client: Arc::new(kube_client),
            objects: objects.clone(),
            clock: Arc::new(RealClock),
            seed: options.seed,
            caller_joins_pool: false,
        },
    )?;
    scheduler.set_pod_lister(pods.clone());
    Ok(scheduler)
}

/// Serves the HTTP endpoints when asked to (with delegated authentication when
/// configured).
async fn serve_endpoints(
    options: &RunOptions,
    clients: &Clients,
    scheduler: &Arc<Scheduler>,
    sync: &Arc<SyncTracker>,
    leader_status: Option<Arc<AtomicBool>>,
) -> Result<Option<ServerHandle>, RunError> {
    let Some(serving) = &options.serving else {
        return Ok(None);
    };
    let mut configz =
        serde_json::to_value(&options.config.config).unwrap_or(serde_json::Value::Null);
    if !cfg!(feature = "profiling") && options.config.config.enable_profiling {
        // /configz tells what is served, not what was asked for.
        tracing::warn!(
            "enableProfiling is on, but this build has no profiling handlers (the `profiling` feature): /debug/pprof is not served"
        );
        configz["enableProfiling"] = serde_json::Value::Bool(false);
    }
    let gate = match &serving.auth {
        Some(auth) => Some(Arc::new(crate::auth::Gatekeeper::new(auth.clone()).await?)),
        None => None,
    };
    let client_roots = gate
        .as_ref()
        .map(|g| g.sources().all_roots())
        .unwrap_or_default();
    let features = scheduler.handle().features();
    let zpages = crate::zpages::ZPages {
        started: crate::process::ProcessStats::of_self()
            .and_then(|p| p.start_time_seconds)
            .map(|s| std::time::UNIX_EPOCH + Duration::from_secs_f64(s))
            .unwrap_or_else(std::time::SystemTime::now),
        binary_version: crate::zpages::binary_version(),
        emulation_version: features.version().to_string(),
        paths: Vec::new(),
        statusz: features.enabled(kubesched_framework::Feature::ComponentStatusz),
        flags: features
            .enabled(kubesched_framework::Feature::ComponentFlagz)
            .then(|| options.flags.clone()),
    };
    let router = crate::server::router(
        scheduler.clone(),
        clients.counts.clone(),
        sync.clone(),
        leader_status,
        configz,
        zpages,
        gate,
    );
    Ok(Some(
        crate::server::start(serving, router, &client_roots).await?,
    ))
}

/// Whether this instance elects a leader: the option overrides the configuration.
fn leader_election_on(options: &RunOptions) -> bool {
    options
        .leader_elect
        .unwrap_or(options.config.config.leader_election.leader_elect)
}

/// The Lease-based elector, when leader election is on (the option overrides the
/// configuration).
fn leader_elector(
    options: &RunOptions,
    clients: &Clients,
    identity: &str,
) -> Option<LeaderElector> {
    let cfg = &options.config.config;
    leader_election_on(options).then(|| {
        let le = &cfg.leader_election;
        LeaderElector::new(
            clients.lease.clone(),
            LeaseSettings {
                name: le.resource_name.clone(),
                namespace: le.resource_namespace.clone(),
                identity: identity.to_string(),
                lease_duration: le.lease_duration,
                renew_deadline: le.renew_deadline,
                retry_period: le.retry_period,
            },
        )
    })
}

/// The compiled-in plugins some profile enables: their declared kinds are watched.
pub fn enabled_plugins(loaded: &LoadedConfig) -> Vec<&'static registry::PluginDescriptor> {
    let names: std::collections::BTreeSet<String> = loaded
        .profiles
        .iter()
        .flat_map(|p| p.plugin_names())
        .collect();
    registry::plugins()
        .into_iter()
        .filter(|d| names.contains(d.name))
        .collect()
}

/// The watchers to start, and what they feed.
struct WatcherSet {
    client: Client,
    kinds: Vec<WatchedKind>,
    scheduler: Arc<Scheduler>,
    objects: Arc<ObjectStore>,
    pods: Arc<ObjectCache<Pod>>,
    settings: WatchSettings,
}

impl WatcherSet {
    fn spawn_all(self, shared: &Shared) {
        for kind in &self.kinds {
            self.spawn_one(*kind, shared);
        }
    }

    fn spawn_one(&self, kind: WatchedKind, shared: &Shared) {
        let client = self.client.clone();
        let settings = self.settings.clone();
        let scheduler = self.scheduler.clone();
        match kind.declared {
            None if kind.kind == "Pod" => shared.spawn(run_watcher::<Pod, _>(
                Api::all(client),
                kind,
                Some(POD_FIELD_SELECTOR),
                self.pods.clone(),
                PodSink(scheduler),
                settings,
            )),
            None => shared.spawn(run_watcher::<Node, _>(
                Api::all(client),
                kind,
                None,
                Arc::new(ObjectCache::default()),
                NodeSink(scheduler),
                settings,
            )),
            Some(declared) => {
                // Every store of the kind: the declared type's, and any other type a
                // plugin reads the same group and kind through.
                self.objects.register(declared);
                let stores = self
                    .objects
                    .stores_for(&kind.api_version(), kind.kind)
                    .into_iter()
                    .filter(|s| s.kind().version == kind.version)
                    .collect();
                let sink = StoreSink {
                    scheduler,
                    stores,
                    stats: settings.stats.clone(),
                };
                shared.spawn(run_watcher::<Raw, _>(
                    Api::all_with(client, &kind.api_resource()),
                    kind,
                    None,
                    Arc::new(ObjectCache::default()),
                    sink,
                    settings,
                ))
            }
        }
    }
}

/// Starts the scheduling loop and the queue's periodic flushes.
fn start_scheduling(shared: &Shared) {
    let scheduler = shared.scheduler.clone();
    shared.leading.store(true, Ordering::SeqCst);
    tracing::info!("starting to schedule");
    let s = scheduler.clone();
    *shared.loop_task.lock() = Some(tokio::spawn(async move {
        while s.schedule_one().await {}
        tracing::debug!("scheduling loop ended");
    }));
    let s = scheduler.clone();
    shared.spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            s.queue().flush_backoff_completed();
            s.cache().cleanup_expired_assumed_pods();
        }
    });
    let s = scheduler;
    shared.spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(30));
        tick.tick().await;
        loop {
            tick.tick().await;
            s.queue().flush_unschedulable_left_over();
        }
    });
}

/// Stops taking pods and waits (at most `timeout`) for the pod being scheduled and the
/// bindings in flight.
async fn drain(shared: &Shared, timeout: Duration) {
    let deadline = tokio::time::Instant::now() + timeout;
    shared.scheduler.queue().close();
    let loop_task = shared.loop_task.lock().take();
    if let Some(t) = loop_task
        && tokio::time::timeout_at(deadline, t).await.is_err()
    {
        tracing::warn!("the scheduling cycle did not finish in time");
    }
    while shared.scheduler.in_flight_bindings() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left = shared.scheduler.in_flight_bindings();
    if left > 0 {
        tracing::warn!(bindings = left, "stopping with bindings still in flight");
    }
}

async fn finish(shared: &Shared, server: Option<ServerHandle>) {
    shared.events.flush(Duration::from_secs(5)).await;
    if let Some(s) = server {
        s.stop(Duration::from_secs(2)).await;
    }
    shared.abort_all();
}

/// The runner's life, then its end: events flushed, the endpoints stopped, every task
/// aborted, however the life ended.
async fn main_task(
    shared: Arc<Shared>,
    watchers: WatcherSet,
    elector: Option<LeaderElector>,
    delay_cache_until_active: bool,
    stop_rx: watch::Receiver<bool>,
    shutdown_timeout: Duration,
    server: Option<ServerHandle>,
) -> Result<(), RunError> {
    let result = live(
        &shared,
        watchers,
        elector,
        delay_cache_until_active,
        &stop_rx,
        shutdown_timeout,
    )
    .await;
    finish(&shared, server).await;
    result
}

/// Starts the watchers (before campaigning, unless the cache waits for leadership), then
/// schedules: at once without leader election, while leading with it.
async fn live(
    shared: &Shared,
    watchers: WatcherSet,
    elector: Option<LeaderElector>,
    delay_cache_until_active: bool,
    stop_rx: &watch::Receiver<bool>,
    shutdown_timeout: Duration,
) -> Result<(), RunError> {
    let mut watchers = Some(watchers);
    if !(delay_cache_until_active && elector.is_some()) {
        if let Some(w) = watchers.take() {
            w.spawn_all(shared);
        }
        // Upstream waits for its informers before it campaigns.
        tokio::select! {
            _ = shared.sync.wait() => {}
            _ = stopped(stop_rx) => return Ok(()),
        }
    }
    let Some(elector) = elector else {
        start_scheduling(shared);
        stopped(stop_rx).await;
        drain(shared, shutdown_timeout).await;
        shared.leading.store(false, Ordering::SeqCst);
        return Ok(());
    };
    lead(shared, elector, watchers, stop_rx, shutdown_timeout).await
}

/// Campaigns for the lease; once it is held, starts the watchers not started yet and
/// schedules until the stop signal (drain, release the lease) or the loss of the lease
/// (stop at once, fail).
async fn lead(
    shared: &Shared,
    mut elector: LeaderElector,
    mut watchers: Option<WatcherSet>,
    stop_rx: &watch::Receiver<bool>,
    shutdown_timeout: Duration,
) -> Result<(), RunError> {
    if !elector.acquire(stopped(stop_rx)).await {
        return Ok(());
    }
    let work = async {
        if let Some(w) = watchers.take() {
            w.spawn_all(shared);
        }
        shared.sync.wait().await;
        start_scheduling(shared);
        std::future::pending::<()>().await;
    };
    let end = tokio::select! {
        end = elector.hold(stopped(stop_rx)) => end,
        _ = work => HoldEnd::Stopped,
    };
    match end {
        HoldEnd::Lost => {
            // Stop scheduling at once: another instance may lead already.
            shared.leading.store(false, Ordering::SeqCst);
            shared.scheduler.queue().close();
            if let Some(t) = shared.loop_task.lock().take() {
                t.abort();
            }
            tracing::error!("leaderelection lost");
            Err(RunError::LeaderLost)
        }
        HoldEnd::Stopped => {
            drain(shared, shutdown_timeout).await;
            shared.leading.store(false, Ordering::SeqCst);
            elector.release().await;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[tokio::test]
    async fn a_missing_kubeconfig_is_named_once() {
        let err = client_config(Some(Path::new("/nonexistent/kubesched/kubeconfig")))
            .await
            .expect_err("no such file");
        let text = err.to_string();
        assert_eq!(
            text.matches("/nonexistent/kubesched/kubeconfig").count(),
            1,
            "{text}"
        );
        assert!(!text.contains("'\""), "{text}");
        assert!(text.contains("No such file"), "{text}");
    }
}
