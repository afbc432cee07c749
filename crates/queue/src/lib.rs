//! The scheduling queue: every pending pod of kubesched's profiles, waiting in exactly one
//! of activeQ, backoffQ or unschedulablePods (or being scheduled, "in flight"), with
//! upstream kube-scheduler's rules for moving between them.
//!
//! It owns the queue order (the profiles' shared QueueSort plugin), exponential backoff,
//! the scheduling cycle counter, the reaction to cluster events through the plugins'
//! registered events and queueing hints, PreEnqueue gating, and keeping the [`Nominator`]
//! in step with pending pods. It must not schedule pods, talk to the cluster, or read the
//! wall clock: time comes from the injected [`Clock`], so tests and the simulator move it
//! without sleeping.
//!
//! # Where a pod is
//!
//! * **activeQ**: a heap in QueueSort order (PrioritySort: higher priority first, then
//!   earlier timestamp); [`SchedulingQueue::pop`] takes its head.
//! * **backoffQ**: pods waiting out their backoff, `podInitialBackoffSeconds × 2^(attempts−1)`
//!   capped at `podMaxBackoffSeconds`, counted from their last failure.
//!   [`SchedulingQueue::flush_backoff_completed`] (every second) moves those done to activeQ.
//! * **unschedulablePods**: pods rejected by plugins, waiting for a cluster event that one of
//!   those plugins registered (and whose queueing hint answers Queue) — or for
//!   [`SchedulingQueue::flush_unschedulable_left_over`] (every 30 s) to send back those
//!   waiting longer than `podMaxInUnschedulablePodsDuration` (5 min). Pods a PreEnqueue
//!   plugin holds back ("gated") wait here too, counted apart.
//! * **in flight**: popped and not yet [`done`](SchedulingQueue::done). Cluster events that
//!   arrive meanwhile are recorded; when the pod fails
//!   ([`SchedulingQueue::add_unschedulable_if_not_present`]) they decide, as if they came
//!   after the failure, whether it waits in unschedulablePods or retries (upstream with
//!   queueing hints on). A pod the queue did not see popped falls back to the older
//!   move-request cycle: it retries when a move request came in at or after its cycle.
//!
//! A rejection by plugins that answered Pending skips backoff when their hint says Queue; a
//! pod that failed with an error (no rejecting plugin) always retries after backoff.
//!
//! With SchedulerPopFromBackoffQ (on by default, v1.34 to v1.37,
//! [`QueueConfig::pop_from_backoff`]) a pop that finds activeQ empty takes the head of
//! backoffQ instead of waiting: backoffQ is then
//! ordered by backoff expiry rounded up to the next one-second window (counted from the
//! queue's creation; upstream counts whole wall-clock seconds), and by QueueSort within a
//! window. Pods that failed with an error wait in a backoff heap of their own and are never
//! popped early, as upstream's podErrorBackoffQ.

mod events;
mod heap;

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kubesched_framework::clock::Clock;
use kubesched_framework::events::{
    ActionType, ClusterEvent, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
    internal,
};
use kubesched_framework::{Framework, Nominator, ObjectStore, Plugin, PodActivator, QueuedPodInfo};
use kubesched_model::PodInfo;
use parking_lot::Mutex;
use tokio::sync::Notify;

pub use events::{pod_update_events, target_pod_update_events};
use heap::PodHeap;

/// Name of upstream's PodTopologySpread plugin: pods it rejected may move on any pod event
/// in their namespace.
const POD_TOPOLOGY_SPREAD: &str = "PodTopologySpread";

/// Backoff and flush durations (from KubeSchedulerConfiguration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueConfig {
    /// `podInitialBackoffSeconds` (default 1 s).
    pub initial_backoff: Duration,
    /// `podMaxBackoffSeconds` (default 10 s).
    pub max_backoff: Duration,
    /// How long a pod may wait in unschedulablePods before the periodic flush sends it back
    /// (default 5 min).
    pub max_in_unschedulable: Duration,
    /// The SchedulerPopFromBackoffQ feature gate (beta and on by default, v1.34 to v1.37).
    pub pop_from_backoff: bool,
}

/// The width of backoffQ's ordering windows with SchedulerPopFromBackoffQ.
pub const BACKOFF_ORDERING_WINDOW: Duration = Duration::from_secs(1);

impl Default for QueueConfig {
    fn default() -> Self {
        Self {
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(10),
            max_in_unschedulable: Duration::from_secs(5 * 60),
            pop_from_backoff: true,
        }
    }
}

/// Where the queue reports what upstream's queue reports: pods entering a sub-queue
/// (`scheduler_queue_incoming_pods_total{queue, event}`), the pending counts after every
/// change (`scheduler_pending_pods{queue}`), failed pods by rejecting plugin
/// (`scheduler_unschedulable_pods{plugin, profile}`) and queueing hint durations
/// (`scheduler_queueing_hint_execution_duration_seconds{plugin, event, hint}`).
pub trait QueueMetrics: Send + Sync {
    /// A pod entered `queue` (`active`, `backoff` or `unschedulable`) because of `event`.
    fn incoming(&self, queue: &str, event: &str);
    /// The sub-queues' sizes changed to these.
    fn pending(&self, _counts: QueueCounts) {}
    /// `delta` pods that `plugin` rejected (or left pending) wait in the queue, for a
    /// profile: +1 when a failed pod comes back, -1 when it is popped or leaves.
    fn unschedulable_reason(&self, _plugin: &str, _profile: &str, _delta: i64) {}
    /// A plugin's queueing hint ran for `event` and answered `hint` (`Queue`, `QueueSkip`,
    /// or `Error`).
    fn queueing_hint(&self, _plugin: &str, _event: &str, _hint: &'static str, _took: Duration) {}
}

/// The sub-queue a pending pod waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum SubQueue {
    /// Ready to be popped.
    Active,
    /// Waiting out its backoff.
    Backoff,
    /// Rejected; waiting for an event or the periodic flush.
    Unschedulable,
    /// Held back by a PreEnqueue plugin.
    Gated,
}

impl SubQueue {
    /// The name used in metrics labels.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Backoff => "backoff",
            Self::Unschedulable => "unschedulable",
            Self::Gated => "gated",
        }
    }
}

/// How many pods wait in each sub-queue (gated pods are not counted as unschedulable).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueueCounts {
    /// In activeQ.
    pub active: usize,
    /// In backoffQ.
    pub backoff: usize,
    /// In unschedulablePods, not gated.
    pub unschedulable: usize,
    /// In unschedulablePods, held back by a PreEnqueue plugin.
    pub gated: usize,
}

/// A queue operation that does not fit the pod's state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    /// The pod given back after a failed attempt is already queued.
    #[error("Pod {pod} is already present in {queue}")]
    AlreadyPresent {
        /// `namespace/name`.
        pod: String,
        /// `unschedulable queue`, `the active queue` or `the backoff queue`.
        queue: &'static str,
    },
}

/// How a pod should be requeued after an event, lowest to highest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Requeue {
    /// The event cannot help: stay in unschedulablePods.
    Skip,
    /// Retry, after the rest of the backoff.
    AfterBackoff,
    /// Retry now (a Pending plugin's hint said Queue).
    Immediately,
}

/// One profile's queue-relevant parts.
struct Profile {
    framework: Arc<Framework>,
    /// Every (plugin, registered event with its hint), in plugin-name order.
    hints: Vec<(String, ClusterEventWithHint)>,
    /// The events each plugin registered (for gated pods).
    plugin_events: HashMap<String, Vec<ClusterEvent>>,
}

#[derive(Debug)]
enum InFlight {
    /// A pod popped at this point of the sequence.
    Pod(Arc<PodInfo>),
    /// An event received while some pod was in flight.
    Event {
        event: ClusterEvent,
        old: Option<EventObject>,
        new: Option<EventObject>,
    },
}

/// backoffQ: pods rejected by plugins, and apart from them pods that failed with an error
/// (never popped before their backoff is over).
#[derive(Debug, Default)]
struct BackoffQ {
    rejected: PodHeap,
    errors: PodHeap,
}

/// A pod that failed without any rejecting or pending plugin: an error.
fn failed_with_error(q: &QueuedPodInfo) -> bool {
    q.unschedulable_plugins.is_empty() && q.pending_plugins.is_empty()
}

impl BackoffQ {
    fn len(&self) -> usize {
        self.rejected.len() + self.errors.len()
    }

    fn contains(&self, uid: &str) -> bool {
        self.rejected.contains(uid) || self.errors.contains(uid)
    }

    fn get(&self, uid: &str) -> Option<&QueuedPodInfo> {
        self.rejected.get(uid).or_else(|| self.errors.get(uid))
    }

    fn iter(&self) -> impl Iterator<Item = &QueuedPodInfo> {
        self.rejected.iter().chain(self.errors.iter())
    }

    fn push(&mut self, info: QueuedPodInfo, less: heap::Less<'_>) {
        if failed_with_error(&info) {
            self.errors.push(info, less);
        } else {
            self.rejected.push(info, less);
        }
    }

    fn remove(&mut self, uid: &str, less: heap::Less<'_>) -> Option<QueuedPodInfo> {
        self.rejected
            .remove(uid, less)
            .or_else(|| self.errors.remove(uid, less))
    }

    fn update(
        &mut self,
        uid: &str,
        less: heap::Less<'_>,
        change: impl FnOnce(&mut QueuedPodInfo),
    ) -> bool {
        if self.rejected.contains(uid) {
            self.rejected.update(uid, less, change)
        } else {
            self.errors.update(uid, less, change)
        }
    }

    /// The head of both heaps that comes first.
    fn peek(&self, less: heap::Less<'_>) -> Option<&QueuedPodInfo> {
        match (self.rejected.peek(), self.errors.peek()) {
            (Some(a), Some(b)) => Some(if less(b, a) { b } else { a }),
            (a, b) => a.or(b),
        }
    }

    /// Pops the head that comes first.
    fn pop(&mut self, less: heap::Less<'_>) -> Option<QueuedPodInfo> {
        let from_errors = match (self.rejected.peek(), self.errors.peek()) {
            (Some(a), Some(b)) => less(b, a),
            (None, Some(_)) => true,
            _ => false,
        };
        if from_errors {
            self.errors.pop(less)
        } else {
            self.rejected.pop(less)
        }
    }
}

#[derive(Debug, Default)]
struct State {
    active: PodHeap,
    backoff: BackoffQ,
    unschedulable: BTreeMap<String, QueuedPodInfo>,
    gated: usize,
    /// Popped pods and the events received since, in arrival order.
    in_flight: BTreeMap<u64, InFlight>,
    /// UID → the sequence number of its `InFlight::Pod` entry.
    in_flight_pods: HashMap<String, u64>,
    /// In-flight pods an activation aimed at already: one such event in the in-flight log
    /// is as good as many (a gang's Permit activates its unscheduled members once for each
    /// member it holds, thousands of times for a large group).
    activated_in_flight: HashSet<String>,
    next_seq: u64,
    scheduling_cycle: u64,
    move_request_cycle: Option<u64>,
    closed: bool,
    /// Failed pods counted in `scheduler_unschedulable_pods`, by UID: their profile and the
    /// plugins they were counted under (taken back when they are popped or leave).
    unschedulable_reasons: HashMap<String, (String, Vec<String>)>,
}

impl State {
    fn counts(&self) -> QueueCounts {
        QueueCounts {
            active: self.active.len(),
            backoff: self.backoff.len(),
            unschedulable: self.unschedulable.len() - self.gated,
            gated: self.gated,
        }
    }
}

/// The queue's lock: when it is released after a change of the sub-queues' sizes, the new
/// sizes are reported (so `scheduler_pending_pods` follows every change, not only attempts).
struct Locked<'a> {
    state: parking_lot::MutexGuard<'a, State>,
    queue: &'a SchedulingQueue,
}

impl std::ops::Deref for Locked<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.state
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.state
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let Some(m) = &self.queue.metrics else {
            return;
        };
        let counts = self.state.counts();
        let mut last = self.queue.reported.lock();
        if *last != Some(counts) {
            *last = Some(counts);
            m.pending(counts);
        }
    }
}

/// The scheduling queue. All methods take `&self`; one internal lock serialises them.
/// PreEnqueue plugins, QueueSort and queueing hints run under that lock, as upstream runs
/// them under the queue's lock, so they must not call back into the queue.
pub struct SchedulingQueue {
    profiles: BTreeMap<String, Profile>,
    queue_sort: Option<Arc<dyn Plugin>>,
    nominator: Arc<Nominator>,
    objects: Option<Arc<ObjectStore>>,
    clock: Arc<dyn Clock>,
    config: QueueConfig,
    metrics: Option<Arc<dyn QueueMetrics>>,
    state: Mutex<State>,
    notify: Notify,
    /// Where backoffQ's ordering windows are counted from.
    epoch: Instant,
    /// The sizes last reported to the metrics.
    reported: Mutex<Option<QueueCounts>>,
}

impl std::fmt::Debug for SchedulingQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulingQueue")
            .field("profiles", &self.profiles.keys().collect::<Vec<_>>())
            .field("counts", &self.counts())
            .finish()
    }
}

/// PrioritySort's order, used when no profile has a QueueSort plugin.
fn default_less(a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
    let (pa, pb) = (a.pod_info.priority, b.pod_info.priority);
    pa > pb || (pa == pb && a.timestamp < b.timestamp)
}

fn is_wildcard(event: &ClusterEvent) -> bool {
    event.resource == EventResource::WildCard && event.action == ActionType::ALL
}

const WILDCARD: ClusterEvent = ClusterEvent::new(EventResource::WildCard, ActionType::ALL);

impl SchedulingQueue {
    /// A queue for these profiles (by `schedulerName`). The QueueSort plugin is taken from
    /// the first profile that has one (all profiles share it); each profile's PreEnqueue
    /// plugins and registered events are used for its pods.
    pub fn new(
        profiles: BTreeMap<String, Arc<Framework>>,
        nominator: Arc<Nominator>,
        clock: Arc<dyn Clock>,
        config: QueueConfig,
        metrics: Option<Arc<dyn QueueMetrics>>,
    ) -> Self {
        let queue_sort = profiles.values().find_map(|f| f.queue_sort().cloned());
        let objects = profiles
            .values()
            .next()
            .map(|f| f.handle().objects().clone());
        let profiles = profiles
            .into_iter()
            .map(|(name, framework)| {
                let mut hints = Vec::new();
                let mut plugin_events: HashMap<String, Vec<ClusterEvent>> = HashMap::new();
                for (plugin, registrations) in framework.events_to_register() {
                    for r in registrations {
                        plugin_events
                            .entry(plugin.clone())
                            .or_default()
                            .push(r.event);
                        hints.push((plugin.clone(), r));
                    }
                }
                let profile = Profile {
                    framework,
                    hints,
                    plugin_events,
                };
                (name, profile)
            })
            .collect();
        let epoch = clock.now();
        Self {
            profiles,
            queue_sort,
            nominator,
            objects,
            clock,
            config,
            epoch,
            reported: Mutex::new(None),
            metrics,
            state: Mutex::new(State::default()),
            notify: Notify::new(),
        }
    }

    fn lock(&self) -> Locked<'_> {
        Locked {
            state: self.state.lock(),
            queue: self,
        }
    }

    // ---- public operations --------------------------------------------------------------

    /// A new pending pod. Pods of no profile of this queue are ignored; a pod already
    /// queued is treated as an update.
    pub fn add(&self, pod: Arc<PodInfo>) {
        if !self.profiles.contains_key(&pod.scheduler_name) {
            tracing::debug!(pod = %pod.key(), scheduler = %pod.scheduler_name, "pod of another scheduler not queued");
            return;
        }
        let mut st = self.lock();
        if let Some(existing) = self.queued_pod(&st, &pod.uid) {
            drop(st);
            self.update(&existing, pod);
            return;
        }
        if st.in_flight_pods.contains_key(&pod.uid) {
            tracing::debug!(pod = %pod.key(), "pod added while being scheduled; ignored");
            return;
        }
        let info = QueuedPodInfo::new(pod, self.clock.now());
        self.move_to_active(&mut st, info, internal::POD_ADD, false);
    }

    /// A pending pod changed. A queued pod is updated where it is; in unschedulablePods the
    /// update may make it schedulable (decided by the queueing hints of the plugins that
    /// rejected it); an unknown pod is added; a pod being scheduled records the update for
    /// when it comes back.
    pub fn update(&self, old: &PodInfo, new: Arc<PodInfo>) {
        if new.node_name.is_some() {
            // Bound: no longer pending.
            self.delete(old);
            return;
        }
        if !self.profiles.contains_key(&new.scheduler_name) {
            tracing::debug!(pod = %new.key(), scheduler = %new.scheduler_name, "pod of another scheduler not queued");
            return;
        }
        let events = target_pod_update_events(old, &new);
        let old_obj = EventObject::Pod(Arc::new(old.clone()));
        let new_obj = EventObject::Pod(new.clone());
        let uid = new.uid.clone();
        let mut st = self.lock();
        if st.in_flight_pods.contains_key(&uid) {
            for event in events {
                self.push_in_flight_event(
                    &mut st,
                    event,
                    Some(old_obj.clone()),
                    Some(new_obj.clone()),
                );
            }
            self.update_nomination(old, &new);
            return;
        }
        let less = |a: &QueuedPodInfo, b: &QueuedPodInfo| self.less(a, b);
        if st.active.update(&uid, &less, |q| q.pod_info = new.clone()) {
            self.update_nomination(old, &new);
            return;
        }
        let backoff_less = |a: &QueuedPodInfo, b: &QueuedPodInfo| self.backoff_less(a, b);
        if st
            .backoff
            .update(&uid, &backoff_less, |q| q.pod_info = new.clone())
        {
            self.update_nomination(old, &new);
            return;
        }
        if let Some(mut info) = self.take_unschedulable(&mut st, &uid) {
            info.pod_info = new.clone();
            self.update_nomination(old, &new);
            // Several events may describe one update: the most favourable decides.
            let mut best = Requeue::Skip;
            let mut label = internal::POD_UPDATE.to_string();
            for event in &events {
                let s = self.worth_requeuing(&info, event, Some(&old_obj), Some(&new_obj));
                if s > best {
                    best = s;
                    label = event.label();
                }
            }
            self.requeue(&mut st, info, best, &label, true);
            return;
        }
        let info = QueuedPodInfo::new(new, self.clock.now());
        self.move_to_active(&mut st, info, internal::POD_UPDATE, false);
    }

    /// A pending pod was deleted (or bound): it leaves the queue and the nominator.
    pub fn delete(&self, pod: &PodInfo) {
        self.nominator.remove(&pod.uid);
        let mut st = self.lock();
        self.uncount_reasons(&mut st, &pod.uid);
        let less = |a: &QueuedPodInfo, b: &QueuedPodInfo| self.less(a, b);
        if st.active.remove(&pod.uid, &less).is_some() {
            return;
        }
        let backoff_less = |a: &QueuedPodInfo, b: &QueuedPodInfo| self.backoff_less(a, b);
        if st.backoff.remove(&pod.uid, &backoff_less).is_some() {
            return;
        }
        self.take_unschedulable(&mut st, &pod.uid);
    }

    /// Moves these pods from unschedulablePods or backoffQ to activeQ (PreEnqueue still
    /// applies). A pod being scheduled is moved when it comes back.
    pub fn activate(&self, uids: &[String]) {
        let mut st = self.lock();
        for uid in uids {
            // In flight with an activation recorded already: nothing more to do (a pod in
            // flight is in no sub-queue).
            if st.activated_in_flight.contains(uid.as_str()) {
                st.move_request_cycle = Some(st.scheduling_cycle);
                continue;
            }
            if let Some(info) = self.take_unschedulable(&mut st, uid) {
                self.move_to_active(&mut st, info, internal::FORCE_ACTIVATE, true);
                continue;
            }
            let backoff_less = |a: &QueuedPodInfo, b: &QueuedPodInfo| self.backoff_less(a, b);
            if let Some(info) = st.backoff.remove(uid, &backoff_less) {
                self.move_to_active(&mut st, info, internal::FORCE_ACTIVATE, false);
                continue;
            }
            // In flight: record an activation aimed at this pod only, so that it retries
            // if it fails.
            let in_flight_pod =
                st.in_flight_pods
                    .get(uid)
                    .and_then(|seq| match st.in_flight.get(seq) {
                        Some(InFlight::Pod(p)) => Some(p.clone()),
                        _ => None,
                    });
            if let Some(pod) = in_flight_pod
                && st.activated_in_flight.insert(uid.clone())
            {
                self.push_in_flight_event(&mut st, WILDCARD, None, Some(EventObject::Pod(pod)));
            }
            st.move_request_cycle = Some(st.scheduling_cycle);
        }
    }

    /// The head of activeQ, now in flight, or None when activeQ is empty or the queue is
    /// closed. Each pop starts a scheduling cycle and counts an attempt.
    pub fn pop(&self) -> Option<QueuedPodInfo> {
        let mut st = self.lock();
        self.pop_locked(&mut st)
    }

    /// Takes these pods out of activeQ, backoffQ or unschedulablePods (never a gated one)
    /// and puts them in flight with an attempt counted, as [`pop`](Self::pop) does, within
    /// the current scheduling cycle: the other members of a pod group that a group cycle
    /// schedules with the pod just popped (GenericWorkload). Returns the pods found, in the
    /// order asked; a pod in flight already or not queued is left out.
    pub fn pop_specific(&self, uids: &[String]) -> Vec<QueuedPodInfo> {
        let mut st = self.lock();
        let mut out = Vec::new();
        if st.closed {
            return out;
        }
        let less = |a: &QueuedPodInfo, b: &QueuedPodInfo| self.less(a, b);
        let backoff_less = |a: &QueuedPodInfo, b: &QueuedPodInfo| self.backoff_less(a, b);
        for uid in uids {
            if st.in_flight_pods.contains_key(uid) {
                continue;
            }
            let found = match st.active.remove(uid, &less) {
                Some(info) => Some(info),
                None => match st.backoff.remove(uid, &backoff_less) {
                    Some(info) => Some(info),
                    None if st
                        .unschedulable
                        .get(uid)
                        .is_some_and(|i| i.gating_plugin.is_none()) =>
                    {
                        self.take_unschedulable(&mut st, uid)
                    }
                    None => None,
                },
            };
            let Some(mut info) = found else {
                continue;
            };
            info.attempts += 1;
            self.uncount_reasons(&mut st, uid);
            info.unschedulable_plugins.clear();
            info.pending_plugins.clear();
            let seq = st.next_seq;
            st.next_seq += 1;
            st.in_flight
                .insert(seq, InFlight::Pod(info.pod_info.clone()));
            st.in_flight_pods.insert(uid.clone(), seq);
            out.push(info);
        }
        out
    }

    /// Like [`pop`](Self::pop), but waits until a pod is ready or the queue is closed.
    pub async fn pop_wait(&self) -> Option<QueuedPodInfo> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before looking, so a pod added right after the look wakes us.
            notified.as_mut().enable();
            {
                let mut st = self.lock();
                if st.closed {
                    return None;
                }
                if let Some(info) = self.pop_locked(&mut st) {
                    return Some(info);
                }
            }
            notified.await;
        }
    }

    /// Closes the queue: waiting pops return None and every pod in flight is done.
    pub fn close(&self) {
        let mut st = self.lock();
        let uids: Vec<String> = st.in_flight_pods.keys().cloned().collect();
        for uid in uids {
            Self::done_locked(&mut st, &uid);
        }
        st.closed = true;
        drop(st);
        self.notify.notify_waiters();
    }

    /// The number of pods popped so far (the current scheduling cycle).
    pub fn scheduling_cycle(&self) -> u64 {
        self.lock().scheduling_cycle
    }

    /// Gives back a pod whose attempt (popped in scheduling cycle `pod_scheduling_cycle`)
    /// failed, with its `unschedulable_plugins` / `pending_plugins` set by the scheduler.
    /// Events received while it was in flight decide whether it waits in
    /// unschedulablePods or retries (after backoff, or at once when a Pending plugin's hint
    /// said Queue). A pod that failed without a rejecting plugin (an error) retries after
    /// backoff. The pod is done afterwards.
    pub fn add_unschedulable_if_not_present(
        &self,
        mut pod: QueuedPodInfo,
        pod_scheduling_cycle: u64,
    ) -> Result<(), QueueError> {
        let mut st = self.lock();
        let uid = pod.pod_info.uid.clone();
        let present = if st.unschedulable.contains_key(&uid) {
            Some("unschedulable queue")
        } else if st.active.contains(&uid) {
            Some("the active queue")
        } else if st.backoff.contains(&uid) {
            Some("the backoff queue")
        } else {
            None
        };
        let result = match present {
            Some(queue) => Err(QueueError::AlreadyPresent {
                pod: pod.pod_info.key(),
                queue,
            }),
            None => {
                pod.timestamp = self.clock.now();
                self.count_reasons(&mut st, &pod);
                let strategy = self.strategy_for_in_flight(&st, &pod, pod_scheduling_cycle);
                let queue = self.requeue(
                    &mut st,
                    pod,
                    strategy,
                    internal::SCHEDULE_ATTEMPT_FAILURE,
                    false,
                );
                tracing::debug!(pod = %uid, queue = queue.as_str(), cycle = pod_scheduling_cycle, "pod back in the queue after a failed attempt");
                Ok(())
            }
        };
        Self::done_locked(&mut st, &uid);
        result
    }

    /// A cluster event: moves the unschedulable pods it may help (see the crate docs).
    pub fn move_all_to_active_or_backoff(
        &self,
        event: ClusterEvent,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) {
        let mut st = self.lock();
        if !self.is_event_of_interest(&event) {
            return;
        }
        let uids: Vec<String> = st.unschedulable.keys().cloned().collect();
        self.move_pods(&mut st, uids, event, &event.label(), old, new);
    }

    /// Like [`Self::move_all_to_active_or_backoff`], but never moves the pod `except_uid`
    /// (a pod whose own failed binding freed the resources must not requeue itself).
    pub fn move_all_to_active_or_backoff_except(
        &self,
        event: ClusterEvent,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
        except_uid: &str,
    ) {
        let mut st = self.lock();
        if !self.is_event_of_interest(&event) {
            return;
        }
        let uids: Vec<String> = st
            .unschedulable
            .keys()
            .filter(|u| u.as_str() != except_uid)
            .cloned()
            .collect();
        self.move_pods(&mut st, uids, event, &event.label(), old, new);
    }

    /// A bound pod appeared: it may satisfy the pod affinity or topology spread of
    /// unschedulable pods (only those are considered, as upstream does). It is no longer
    /// nominated anywhere.
    pub fn assigned_pod_added(&self, pod: &Arc<PodInfo>) {
        self.nominator.remove(&pod.uid);
        let event = ClusterEvent::new(EventResource::AssignedPod, ActionType::ADD);
        let mut st = self.lock();
        let uids = self.cross_topology_candidates(&st, pod);
        let new = EventObject::Pod(pod.clone());
        self.move_pods(&mut st, uids, event, &event.label(), None, Some(&new));
    }

    /// A bound pod changed. A scale-down may free resources for any pod; other changes
    /// (labels, …) only matter to pods with affinity to it or rejected by topology spread.
    pub fn assigned_pod_updated(&self, old: &Arc<PodInfo>, new: &Arc<PodInfo>) {
        self.nominator.remove(&new.uid);
        let scale_down = ClusterEvent::new(EventResource::Pod, ActionType::UPDATE_POD_SCALE_DOWN);
        let old_obj = EventObject::Pod(old.clone());
        let new_obj = EventObject::Pod(new.clone());
        let mut st = self.lock();
        for event in pod_update_events(old, new) {
            let uids = if scale_down.covers(&event) {
                st.unschedulable.keys().cloned().collect()
            } else {
                self.cross_topology_candidates(&st, new)
            };
            self.move_pods(
                &mut st,
                uids,
                event,
                &event.label(),
                Some(&old_obj),
                Some(&new_obj),
            );
        }
    }

    /// Moves pods whose backoff is over to activeQ (the scheduler calls this every second;
    /// the simulator on virtual time).
    pub fn flush_backoff_completed(&self) {
        let mut st = self.lock();
        let now = self.clock.now();
        let backoff_less = |a: &QueuedPodInfo, b: &QueuedPodInfo| self.backoff_less(a, b);
        loop {
            let done = st
                .backoff
                .peek(&backoff_less)
                .is_some_and(|q| self.backoff_expiry(q).is_none_or(|e| e <= now));
            if !done {
                break;
            }
            let Some(info) = st.backoff.pop(&backoff_less) else {
                break;
            };
            self.move_to_active(&mut st, info, internal::BACKOFF_COMPLETE, false);
        }
    }

    /// Sends pods that waited in unschedulablePods longer than `max_in_unschedulable` back
    /// to backoffQ or activeQ (every 30 s).
    pub fn flush_unschedulable_left_over(&self) {
        let mut st = self.lock();
        let now = self.clock.now();
        let uids: Vec<String> = st
            .unschedulable
            .iter()
            .filter(|(_, q)| {
                now.saturating_duration_since(q.timestamp) > self.config.max_in_unschedulable
            })
            .map(|(uid, _)| uid.clone())
            .collect();
        if !uids.is_empty() {
            self.move_pods(
                &mut st,
                uids,
                WILDCARD,
                internal::UNSCHEDULABLE_TIMEOUT,
                None,
                None,
            );
        }
    }

    /// When the first pod in backoffQ finishes its backoff, so a simulator can jump its
    /// clock there.
    pub fn next_backoff_expiry(&self) -> Option<Instant> {
        let st = self.lock();
        let backoff_less = |a: &QueuedPodInfo, b: &QueuedPodInfo| self.backoff_less(a, b);
        let head = st.backoff.peek(&backoff_less)?;
        Some(self.backoff_expiry(head).unwrap_or(head.timestamp))
    }

    /// Every pending pod (not those in flight) with its sub-queue: activeQ in pop order,
    /// then backoffQ by expiry, then unschedulablePods by UID.
    pub fn pending_pods(&self) -> Vec<(Arc<PodInfo>, SubQueue)> {
        let st = self.lock();
        let mut active: Vec<&QueuedPodInfo> = st.active.iter().collect();
        active.sort_by(|a, b| self.order(a, b));
        let mut backoff: Vec<&QueuedPodInfo> = st.backoff.iter().collect();
        backoff.sort_by(|a, b| {
            if self.backoff_less(a, b) {
                Ordering::Less
            } else if self.backoff_less(b, a) {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        });
        let mut out = Vec::with_capacity(active.len() + backoff.len() + st.unschedulable.len());
        out.extend(
            active
                .into_iter()
                .map(|q| (q.pod_info.clone(), SubQueue::Active)),
        );
        out.extend(
            backoff
                .into_iter()
                .map(|q| (q.pod_info.clone(), SubQueue::Backoff)),
        );
        out.extend(st.unschedulable.values().map(|q| {
            let sub = if q.gating_plugin.is_some() {
                SubQueue::Gated
            } else {
                SubQueue::Unschedulable
            };
            (q.pod_info.clone(), sub)
        }));
        out
    }

    /// How many pods wait in each sub-queue.
    pub fn counts(&self) -> QueueCounts {
        self.lock().counts()
    }

    /// The scheduling (and binding) of a popped pod is over; events received while it was
    /// in flight are forgotten when no earlier pod still needs them.
    pub fn done(&self, uid: &str) {
        Self::done_locked(&mut self.lock(), uid);
    }

    // ---- ordering and backoff -----------------------------------------------------------

    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        match self.queue_sort.as_ref().and_then(|p| p.as_queue_sort()) {
            Some(qs) => qs.less(a, b),
            None => default_less(a, b),
        }
    }

    fn order(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> Ordering {
        if self.less(a, b) {
            Ordering::Less
        } else if self.less(b, a) {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    }

    /// The backoff after `attempts` attempts: initial × 2^(attempts−1), capped at the max.
    fn backoff_duration(&self, attempts: u32) -> Duration {
        if attempts == 0 {
            return Duration::ZERO;
        }
        let mut d = self.config.initial_backoff;
        for _ in 1..attempts {
            if d >= self.config.max_backoff.saturating_sub(d) {
                return self.config.max_backoff;
            }
            d += d;
        }
        d.min(self.config.max_backoff)
    }

    /// When the pod's backoff ends; None for a pod never attempted (no backoff at all).
    /// With SchedulerPopFromBackoffQ the end is moved to the end of its one-second window,
    /// as upstream aligns it, so pods of one window are ordered by QueueSort.
    fn backoff_expiry(&self, q: &QueuedPodInfo) -> Option<Instant> {
        (q.attempts > 0).then(|| {
            let end = q.timestamp + self.backoff_duration(q.attempts);
            if self.config.pop_from_backoff {
                self.align_to_window(end)
            } else {
                end
            }
        })
    }

    /// The end of the ordering window `t` falls in (always the next window boundary).
    fn align_to_window(&self, t: Instant) -> Instant {
        let since = t.saturating_duration_since(self.epoch);
        let window = BACKOFF_ORDERING_WINDOW.as_nanos();
        let start = since.as_nanos() / window * window;
        let end = u64::try_from(start + window).unwrap_or(u64::MAX);
        self.epoch + Duration::from_nanos(end)
    }

    /// backoffQ's order: earlier backoff end first, then as activeQ orders.
    fn backoff_less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        let (ea, eb) = (self.backoff_expiry(a), self.backoff_expiry(b));
        ea < eb || (ea == eb && self.less(a, b))
    }

    fn is_backing_off(&self, q: &QueuedPodInfo) -> bool {
        let now = self.clock.now();
        self.backoff_expiry(q).is_some_and(|e| e > now)
    }

    // ---- moving pods --------------------------------------------------------------------

    fn record(&self, queue: SubQueue, event: &str) {
        if let Some(m) = &self.metrics {
            m.incoming(queue.as_str(), event);
        }
    }

    /// A queued pod (in any sub-queue) by UID.
    fn queued_pod(&self, st: &State, uid: &str) -> Option<Arc<PodInfo>> {
        st.active
            .get(uid)
            .or_else(|| st.backoff.get(uid))
            .or_else(|| st.unschedulable.get(uid))
            .map(|q| q.pod_info.clone())
    }

    fn take_unschedulable(&self, st: &mut State, uid: &str) -> Option<QueuedPodInfo> {
        let info = st.unschedulable.remove(uid)?;
        if info.gating_plugin.is_some() {
            st.gated -= 1;
        }
        Some(info)
    }

    /// Puts a pod in unschedulablePods; `record` is false when it was there already (an
    /// in-place update, which upstream does not count as incoming).
    fn put_unschedulable(&self, st: &mut State, info: QueuedPodInfo, event: &str, record: bool) {
        let uid = info.pod_info.uid.clone();
        self.take_unschedulable(st, &uid);
        if info.gating_plugin.is_some() {
            st.gated += 1;
        }
        st.unschedulable.insert(uid, info);
        if record {
            self.record(SubQueue::Unschedulable, event);
        }
    }

    /// Runs the profile's PreEnqueue plugins; a rejection gates the pod.
    fn run_pre_enqueue(&self, info: &mut QueuedPodInfo) {
        let Some(profile) = self.profiles.get(&info.pod_info.scheduler_name) else {
            info.gated = false;
            info.gating_plugin = None;
            return;
        };
        let status = profile.framework.run_pre_enqueue_plugins(&info.pod_info);
        if status.is_success() {
            info.gated = false;
            info.gating_plugin = None;
            return;
        }
        let plugin = status.plugin().unwrap_or_default().to_string();
        if status.is_error() {
            tracing::warn!(pod = %info.pod_info.key(), plugin = %plugin, status = %status, "unexpected error running PreEnqueue plugin");
        } else {
            tracing::debug!(pod = %info.pod_info.key(), plugin = %plugin, status = %status, "pod gated by PreEnqueue plugin");
        }
        info.unschedulable_plugins.insert(plugin.clone());
        info.gated = true;
        info.gating_plugin = Some(plugin);
    }

    /// Tries to put a pod in activeQ; a pod PreEnqueue gates goes to unschedulablePods
    /// instead. `was_unschedulable`: the pod was taken out of unschedulablePods for this
    /// move (so going back there is not a new arrival).
    fn move_to_active(
        &self,
        st: &mut State,
        mut info: QueuedPodInfo,
        event: &str,
        was_unschedulable: bool,
    ) -> bool {
        self.run_pre_enqueue(&mut info);
        let uid = info.pod_info.uid.clone();
        if event == internal::POD_ADD || event == internal::POD_UPDATE {
            // Before the pod lands anywhere, gated or not (v1.37, kubernetes#139057): a
            // gated pod's nominatedNodeName keeps its room from lower-priority pods too.
            self.nominator.add(info.pod_info.clone(), None);
        }
        if let Some(plugin) = &info.gating_plugin {
            if st.active.contains(&uid) || st.backoff.contains(&uid) {
                return false;
            }
            self.count_gating(st, &info.pod_info, plugin);
            self.put_unschedulable(st, info, event, !was_unschedulable);
            return false;
        }
        if info.initial_attempt_timestamp.is_none() {
            info.initial_attempt_timestamp = Some(self.clock.now());
        }
        self.take_unschedulable(st, &uid);
        let backoff_less = |a: &QueuedPodInfo, b: &QueuedPodInfo| self.backoff_less(a, b);
        st.backoff.remove(&uid, &backoff_less);
        let less = |a: &QueuedPodInfo, b: &QueuedPodInfo| self.less(a, b);
        st.active.push(info, &less);
        self.record(SubQueue::Active, event);
        self.notify.notify_waiters();
        true
    }

    fn move_to_backoff(&self, st: &mut State, info: QueuedPodInfo, event: &str) {
        let uid = info.pod_info.uid.clone();
        self.take_unschedulable(st, &uid);
        let backoff_less = |a: &QueuedPodInfo, b: &QueuedPodInfo| self.backoff_less(a, b);
        let poppable = self.config.pop_from_backoff && !failed_with_error(&info);
        st.backoff.push(info, &backoff_less);
        self.record(SubQueue::Backoff, event);
        if poppable {
            // A pop waiting on an empty activeQ can take it now.
            self.notify.notify_waiters();
        }
    }

    /// Puts a pod where `strategy` says; returns where it went.
    fn requeue(
        &self,
        st: &mut State,
        info: QueuedPodInfo,
        strategy: Requeue,
        event: &str,
        was_unschedulable: bool,
    ) -> SubQueue {
        match strategy {
            Requeue::Skip => {
                let gated = info.gating_plugin.is_some();
                self.put_unschedulable(st, info, event, !was_unschedulable);
                if gated {
                    SubQueue::Gated
                } else {
                    SubQueue::Unschedulable
                }
            }
            Requeue::AfterBackoff if self.is_backing_off(&info) => {
                self.move_to_backoff(st, info, event);
                SubQueue::Backoff
            }
            _ => {
                if self.move_to_active(st, info, event, was_unschedulable) {
                    SubQueue::Active
                } else {
                    SubQueue::Gated
                }
            }
        }
    }

    fn pop_locked(&self, st: &mut State) -> Option<QueuedPodInfo> {
        if st.closed {
            return None;
        }
        let less = |a: &QueuedPodInfo, b: &QueuedPodInfo| self.less(a, b);
        let backoff_less = |a: &QueuedPodInfo, b: &QueuedPodInfo| self.backoff_less(a, b);
        loop {
            let mut info = match st.active.pop(&less) {
                Some(info) => info,
                // SchedulerPopFromBackoffQ: rather than idle, retry the pod whose backoff
                // ends first (never one that failed with an error).
                None if self.config.pop_from_backoff => {
                    let info = st.backoff.rejected.pop(&backoff_less)?;
                    self.record(SubQueue::Active, internal::POP_FROM_BACKOFF_Q);
                    info
                }
                None => return None,
            };
            let uid = info.pod_info.uid.clone();
            if st.in_flight_pods.contains_key(&uid) {
                tracing::error!(pod = %info.pod_info.key(), "the same pod is tracked in multiple places in the scheduler; discarding the popped one");
                continue;
            }
            info.attempts += 1;
            self.uncount_reasons(st, &uid);
            // The next failure says which plugins rejected it this time.
            info.unschedulable_plugins.clear();
            info.pending_plugins.clear();
            st.scheduling_cycle += 1;
            let seq = st.next_seq;
            st.next_seq += 1;
            st.in_flight
                .insert(seq, InFlight::Pod(info.pod_info.clone()));
            st.in_flight_pods.insert(uid, seq);
            return Some(info);
        }
    }

    /// Counts a failed pod under each plugin that rejected it or left it pending
    /// (`scheduler_unschedulable_pods`), until it is popped again or leaves.
    fn count_reasons(&self, st: &mut State, pod: &QueuedPodInfo) {
        let Some(m) = &self.metrics else {
            return;
        };
        self.uncount_reasons(st, &pod.pod_info.uid);
        let plugins: Vec<String> = pod
            .unschedulable_plugins
            .union(&pod.pending_plugins)
            .cloned()
            .collect();
        if plugins.is_empty() {
            return;
        }
        let profile = pod.pod_info.scheduler_name.clone();
        for plugin in &plugins {
            m.unschedulable_reason(plugin, &profile, 1);
        }
        st.unschedulable_reasons
            .insert(pod.pod_info.uid.clone(), (profile, plugins));
    }

    /// Counts a gated pod under the PreEnqueue plugin that gates it (once per plugin), as
    /// upstream does, until it is popped or leaves.
    fn count_gating(&self, st: &mut State, pod: &PodInfo, plugin: &str) {
        let Some(m) = &self.metrics else {
            return;
        };
        let (_, plugins) = st
            .unschedulable_reasons
            .entry(pod.uid.clone())
            .or_insert_with(|| (pod.scheduler_name.clone(), Vec::new()));
        if !plugins.iter().any(|p| p == plugin) {
            plugins.push(plugin.to_string());
            m.unschedulable_reason(plugin, &pod.scheduler_name, 1);
        }
    }

    fn uncount_reasons(&self, st: &mut State, uid: &str) {
        let (Some(m), Some((profile, plugins))) =
            (&self.metrics, st.unschedulable_reasons.remove(uid))
        else {
            return;
        };
        for plugin in &plugins {
            m.unschedulable_reason(plugin, &profile, -1);
        }
    }

    fn done_locked(st: &mut State, uid: &str) {
        let Some(seq) = st.in_flight_pods.remove(uid) else {
            return;
        };
        st.activated_in_flight.remove(uid);
        st.in_flight.remove(&seq);
        // Events before the oldest pod still in flight concern nobody any more.
        while let Some(entry) = st.in_flight.first_entry() {
            if matches!(entry.get(), InFlight::Pod(_)) {
                break;
            }
            entry.remove();
        }
    }

    fn push_in_flight_event(
        &self,
        st: &mut State,
        event: ClusterEvent,
        old: Option<EventObject>,
        new: Option<EventObject>,
    ) {
        if st.in_flight_pods.is_empty() {
            return;
        }
        let seq = st.next_seq;
        st.next_seq += 1;
        st.in_flight
            .insert(seq, InFlight::Event { event, old, new });
    }

    // ---- events and hints ---------------------------------------------------------------

    /// Whether any plugin of any profile registered an event covering this one.
    fn is_event_of_interest(&self, event: &ClusterEvent) -> bool {
        is_wildcard(event)
            || self
                .profiles
                .values()
                .any(|p| p.hints.iter().any(|(_, h)| h.event.covers(event)))
    }

    /// Upstream's `isPodWorthRequeuing`: asks the hints of the plugins that rejected the pod.
    fn worth_requeuing(
        &self,
        info: &QueuedPodInfo,
        event: &ClusterEvent,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) -> Requeue {
        if info.unschedulable_plugins.is_empty() && info.pending_plugins.is_empty() {
            return Requeue::AfterBackoff;
        }
        if is_wildcard(event) {
            // A wildcard carrying a pod (an activation) is meant for that pod only.
            if let Some(target) = new.and_then(EventObject::as_pod)
                && target.uid != info.pod_info.uid
            {
                return Requeue::Skip;
            }
            return Requeue::AfterBackoff;
        }
        // A pod's own update (v1.37's TargetPod) is for that pod's hints only; an in-flight
        // pod's update recorded for the others is not theirs to hear.
        if event.resource == EventResource::TargetPod
            && let Some(target) = new.or(old).and_then(EventObject::as_pod)
            && target.uid != info.pod_info.uid
        {
            return Requeue::Skip;
        }
        let Some(profile) = self.profiles.get(&info.pod_info.scheduler_name) else {
            return Requeue::AfterBackoff;
        };
        let mut strategy = Requeue::Skip;
        for (plugin, registration) in &profile.hints {
            if !registration.event.covers(event) {
                continue;
            }
            let pending = info.pending_plugins.contains(plugin);
            if !pending && !info.unschedulable_plugins.contains(plugin) {
                continue;
            }
            let hint = match &registration.hint {
                None => QueueingHint::Queue,
                Some(f) => {
                    // A duration, not a time of day: the injected clock is for scheduling.
                    let started = std::time::Instant::now();
                    let answer = f(&info.pod_info, old, new);
                    let took = started.elapsed();
                    let (hint, label) = match answer {
                        Ok(QueueingHint::Queue) => (QueueingHint::Queue, "Queue"),
                        Ok(h) => (h, "QueueSkip"),
                        Err(e) => {
                            // An error must not leave the pod stuck: treat it as Queue.
                            tracing::error!(pod = %info.pod_info.key(), plugin = %plugin, event = %event.label(), error = %e, "queueing hint returned an error");
                            (QueueingHint::Queue, "Error")
                        }
                    };
                    if let Some(m) = &self.metrics {
                        m.queueing_hint(plugin, &event.label(), label, took);
                    }
                    hint
                }
            };
            if hint == QueueingHint::Skip {
                continue;
            }
            if pending {
                return Requeue::Immediately;
            }
            if info.pending_plugins.is_empty() {
                return Requeue::AfterBackoff;
            }
            strategy = Requeue::AfterBackoff;
        }
        strategy
    }

    /// Whether the gating PreEnqueue plugin of a gated pod registered this event.
    fn gating_plugin_interested(&self, info: &QueuedPodInfo, event: &ClusterEvent) -> bool {
        let Some(plugin) = &info.gating_plugin else {
            return true;
        };
        self.profiles
            .get(&info.pod_info.scheduler_name)
            .and_then(|p| p.plugin_events.get(plugin))
            .is_some_and(|events| events.iter().any(|e| e.covers(event)))
    }

    /// Upstream's `movePodsToActiveOrBackoffQueue` over the given unschedulable pods.
    fn move_pods(
        &self,
        st: &mut State,
        uids: Vec<String>,
        event: ClusterEvent,
        label: &str,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) {
        if !self.is_event_of_interest(&event) {
            return;
        }
        for uid in uids {
            let Some(info) = st.unschedulable.get(&uid) else {
                continue;
            };
            if info.gating_plugin.is_some() && !self.gating_plugin_interested(info, &event) {
                continue;
            }
            let strategy = self.worth_requeuing(info, &event, old, new);
            if strategy == Requeue::Skip {
                tracing::trace!(pod = %uid, event = label, "event does not make the pod schedulable");
                continue;
            }
            if let Some(mut info) = self.take_unschedulable(st, &uid) {
                info.flushed_from_unschedulable = label == internal::UNSCHEDULABLE_TIMEOUT;
                self.requeue(st, info, strategy, label, false);
            }
        }
        st.move_request_cycle = Some(st.scheduling_cycle);
        self.push_in_flight_event(st, event, old.cloned(), new.cloned());
    }

    /// The strategy for a pod that failed, from the events received while it was in flight.
    fn strategy_for_in_flight(&self, st: &State, info: &QueuedPodInfo, cycle: u64) -> Requeue {
        if info.unschedulable_plugins.is_empty() && info.pending_plugins.is_empty() {
            // An error, not a rejection: retry after backoff.
            return Requeue::AfterBackoff;
        }
        let Some(&seq) = st.in_flight_pods.get(&info.pod_info.uid) else {
            tracing::warn!(pod = %info.pod_info.key(), "failed pod was not popped from this queue; using the move-request cycle");
            return if st.move_request_cycle.is_some_and(|m| m >= cycle) {
                Requeue::AfterBackoff
            } else {
                Requeue::Skip
            };
        };
        let mut strategy = Requeue::Skip;
        for entry in st.in_flight.range(seq + 1..).map(|(_, e)| e) {
            let InFlight::Event { event, old, new } = entry else {
                continue;
            };
            match self.worth_requeuing(info, event, old.as_ref(), new.as_ref()) {
                Requeue::Immediately => return Requeue::Immediately,
                Requeue::AfterBackoff => {
                    strategy = Requeue::AfterBackoff;
                    if info.pending_plugins.is_empty() {
                        return strategy;
                    }
                }
                Requeue::Skip => {}
            }
        }
        strategy
    }

    /// Unschedulable pods an assigned pod's appearance or change may help: those rejected
    /// by PodTopologySpread in the same namespace, and those with a required pod affinity
    /// term matching it.
    fn cross_topology_candidates(&self, st: &State, pod: &PodInfo) -> Vec<String> {
        let mut ns_labels = None;
        let mut out = Vec::new();
        for (uid, info) in &st.unschedulable {
            if info.unschedulable_plugins.contains(POD_TOPOLOGY_SPREAD)
                && info.pod_info.namespace == pod.namespace
            {
                out.push(uid.clone());
                continue;
            }
            let terms = &info.pod_info.required_affinity_terms;
            if terms.is_empty() {
                continue;
            }
            let labels = ns_labels.get_or_insert_with(|| {
                self.objects
                    .as_ref()
                    .map(|o| o.namespace_labels(&pod.namespace))
                    .unwrap_or_default()
            });
            if terms
                .iter()
                .any(|t| t.matches(&pod.namespace, labels, &pod.labels))
            {
                out.push(uid.clone());
            }
        }
        out
    }

    /// Keeps the nominator in step with an updated pending pod, as upstream's
    /// `UpdateNominatedPod`: a nomination made in memory survives updates that neither set
    /// nor clear `nominatedNodeName`.
    fn update_nomination(&self, old: &PodInfo, new: &Arc<PodInfo>) {
        let keep = if old.nominated_node_name.is_none() && new.nominated_node_name.is_none() {
            self.nominator.node_of(&old.uid)
        } else {
            None
        };
        self.nominator.add(new.clone(), keep.as_deref());
    }
}

impl PodActivator for SchedulingQueue {
    fn activate(&self, uids: &[String]) {
        SchedulingQueue::activate(self, uids);
    }
}

#[cfg(test)]
mod tests;
