//! Coscheduling (gang scheduling): the pods of a `PodGroup` are bound all together or not
//! at all, after kubernetes-sigs/scheduler-plugins' plugin of the same name.
//!
//! A pod joins a group with the [`POD_GROUP_LABEL`] label naming a PodGroup of its
//! namespace. QueueSort keeps a group's pods next to each other; PreEnqueue and PreFilter
//! hold them until `minMember` pods exist (and, with `minResources`, until the cluster has
//! room for the whole group); Permit makes each placed pod wait until `minMember` are
//! placed, then lets them all bind; a failure of one (PostFilter, Unreserve, a Permit
//! timeout) sends the waiting siblings back to the queue, and a group PostFilter rejects
//! whole is refused at PreFilter for `podGroupBackoffSeconds` (one second when 0, see
//! [`REJECTED_GROUP_DEFAULT_BACKOFF`]). The group's `status` follows:
//! phase Pending while held, Scheduling once tried, Scheduled (with the `scheduled` count
//! from PostBind) once `minMember` pods are bound, then Running, Finished or Failed from
//! the pods' phases (the `running`/`succeeded`/`failed` counts), which the plugin follows
//! through its pod-event side, as scheduler-plugins' PodGroup controller would; in cluster
//! mode finished pods leave the scheduler's watch and are not counted. The plugin keeps only in-memory
//! bookkeeping of placed pods and failed groups, per group, dropped when the PodGroup is
//! deleted (noticed at the plugin's next call); it reads pods through the handle's
//! [`LivePods`](kubesched_framework::LivePods) and must not change pods itself. A group's
//! `scheduleTimeoutSeconds`, when set, is the wait at Permit as it is (0 or negative: no
//! wait), as upstream. Background writes go through
//! [`Handle::spawn_background`](kubesched_framework::Handle::spawn_background), which works
//! from any extension point.

mod args;
mod podgroup;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use kubesched_framework::events::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
};
use kubesched_framework::model::{NodeInfo, PodInfo, Resource};
use kubesched_framework::{
    Code, CycleState, EnqueueExtensions, Framework, Handle, KindWrite, NodeToStatus, ObjectWriter,
    PermitPlugin, PluginError, PodEventsPlugin, PostBindPlugin, PostFilterPlugin, PostFilterResult,
    PreEnqueuePlugin, PreFilterPlugin, PreFilterResult, QueueSortPlugin, QueuedPodInfo,
    ReservePlugin, Status, Store, async_trait,
};
use parking_lot::Mutex;

pub use args::{
    CoschedulingArgs, DEFAULT_PERMIT_WAITING_TIME_SECONDS, DEFAULT_POD_GROUP_BACKOFF_SECONDS,
    DEFAULT_POD_GROUP_REJECT_PERCENTAGE,
};
pub use podgroup::{
    API_VERSION, GROUP, PLURAL, POD_GROUP_LABEL, PodGroup, PodGroupSpec, PodGroupStatus, VERSION,
    phase,
};

/// How long a passed `minResources` check holds when `permitWaitingTimeSeconds` is 0.
const RESOURCES_CHECK_DEFAULT_TTL: Duration = Duration::from_secs(3);

/// How long a group PostFilter rejected whole is refused at PreFilter when
/// `podGroupBackoffSeconds` is 0 (the queue's default initial pod backoff). Not upstream,
/// which then has no group backoff: releasing the placed siblings frees room, that event
/// requeues the pod that did not fit, and with SchedulerPopFromBackoffQ it is retried at
/// once, placed, activates its siblings and fails them again, without end (thousands of
/// rounds a second; in simulate on a clock that never moves). One second stops the round
/// the rejection starts by itself and leaves later events and flushes to wake the group.
pub const REJECTED_GROUP_DEFAULT_BACKOFF: Duration = Duration::from_secs(1);

/// The plugin's registered name.
pub const NAME: &str = "Coscheduling";

/// Permit's answer to a pod whose PodGroup does not exist.
pub const ERR_POD_GROUP_NOT_FOUND: &str = "PodGroup not found";
/// PostFilter's answer to a pod of no (known) group.
pub const ERR_NO_POD_GROUP: &str = "can not find pod group";
/// How waiting siblings are rejected when one pod of the group fails its Filter.
pub const REJECTED_IN_POST_FILTER: &str = "optimistic rejection in PostFilter";
/// How waiting siblings are rejected when one pod of the group is unreserved.
pub const REJECTED_IN_UNRESERVE: &str = "rejection in Unreserve";

/// PreFilter's and PreEnqueue's words for a group with fewer pods than `minMember`.
pub fn not_enough_siblings(point: &str, pod: &str, pods: usize, min_member: i32) -> String {
    format!(
        "{point} pod {pod} cannot find enough sibling pods, current pods number: {pods}, minMember of group: {min_member}"
    )
}

/// PreFilter's words for a group whose quorum counts pods still held by scheduling gates.
pub fn gated_siblings(pod: &str) -> String {
    format!("pre-filter pod {pod} cannot proceed due to gated pods in the same PodGroup")
}

/// PreFilter's words for a group refused during its backoff.
pub fn failed_recently(group: &str) -> String {
    format!("podGroup {group} failed recently")
}

/// PostFilter's words when it rejects the whole group.
pub fn group_rejected(group: &str, pod: &str) -> String {
    format!(
        "PodGroup {group} gets rejected due to Pod {pod} is unschedulable even after PostFilter"
    )
}

/// The Coscheduling plugin.
pub struct Coscheduling {
    handle: Handle,
    groups: Arc<Store<PodGroup>>,
    /// Writes the groups' `status.phase` (cluster: the API server; simulate: the store).
    writer: ObjectWriter<PodGroup>,
    /// The wait at Permit when the group sets none.
    permit_timeout: Duration,
    /// How long a passed `minResources` check holds for a group.
    resources_ttl: Duration,
    /// How long a group PostFilter rejected whole is refused at PreFilter.
    group_backoff: Duration,
    /// `podGroupRejectPercentage` as a fraction.
    reject_threshold: f64,
    book: Arc<Mutex<Bookkeeping>>,
    /// Held by the background task writing a group's status, so writes land in the order
    /// they are made and the last one carries the latest counts.
    status_writes: Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for Coscheduling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coscheduling")
            .field("permit_timeout", &self.permit_timeout)
            .field("group_backoff", &self.group_backoff)
            .field("reject_threshold", &self.reject_threshold)
            .finish()
    }
}

/// What the plugin remembers between cycles, by group (`namespace/name`).
#[derive(Debug, Default)]
struct Bookkeeping {
    /// Names of the pods that passed Permit (assumed or bound) and were not unreserved.
    placed: HashMap<String, BTreeSet<String>>,
    /// Groups whose `minResources` check passed, until when it holds.
    resources_checked: HashMap<String, Instant>,
    /// Groups refused at PreFilter until then.
    backed_off: HashMap<String, Instant>,
    /// When the group last failed: it sorts as if created then, so a group that cannot
    /// be placed does not keep the head of the queue.
    last_failure: HashMap<String, SystemTime>,
    /// The phase last written to each group's status, so siblings do not write it again
    /// before the store shows it.
    phase_written: HashMap<String, &'static str>,
    /// The `scheduleStartTime` written with Scheduling, by group.
    start_written: HashMap<String, String>,
    /// Groups PreEnqueue last found with at least `minMember` pods.
    whole: BTreeSet<String>,
    /// Names of the pods that passed PostBind (the live view may show their binds later).
    bound: HashMap<String, BTreeSet<String>>,
    /// The `status.scheduled` count last written to each group.
    scheduled_written: HashMap<String, i32>,
    /// The phase (`status.phase`) of each pod of each group, from the pod events, finished
    /// pods included until they are deleted. Kept by pod, not by PodGroup: pods may be
    /// seen before their PodGroup (a restart lists both at once), and a pod's entry leaves
    /// with the pod.
    pod_phases: HashMap<String, BTreeMap<String, String>>,
    /// The running, succeeded and failed counts last written to each group.
    counts_written: HashMap<String, (i32, i32, i32)>,
    /// The PodGroup store's generation when the records were last matched against it.
    seen_generation: u64,
}

impl Bookkeeping {
    /// Forgets every record of a group `exists` no longer finds (its PodGroup was
    /// deleted), but the pods' phases, which leave with the pods. Those records are only
    /// made for groups that exist, so nothing is lost that a later cycle would need.
    fn forget_deleted(&mut self, exists: impl Fn(&str) -> bool) {
        self.placed.retain(|g, _| exists(g));
        self.resources_checked.retain(|g, _| exists(g));
        self.backed_off.retain(|g, _| exists(g));
        self.last_failure.retain(|g, _| exists(g));
        self.phase_written.retain(|g, _| exists(g));
        self.start_written.retain(|g, _| exists(g));
        self.whole.retain(|g| exists(g));
        self.scheduled_written.retain(|g, _| exists(g));
        self.bound.retain(|g, _| exists(g));
        self.counts_written.retain(|g, _| exists(g));
    }

    /// The groups with any record.
    #[cfg(test)]
    fn groups_recorded(&self) -> BTreeSet<&str> {
        self.placed
            .keys()
            .chain(self.resources_checked.keys())
            .chain(self.backed_off.keys())
            .chain(self.last_failure.keys())
            .chain(self.phase_written.keys())
            .chain(self.start_written.keys())
            .chain(self.scheduled_written.keys())
            .chain(self.bound.keys())
            .chain(self.pod_phases.keys())
            .chain(self.counts_written.keys())
            .chain(self.whole.iter())
            .map(String::as_str)
            .collect()
    }
}

impl Coscheduling {
    /// Builds the plugin over the handle's PodGroups (the registry's factory).
    pub fn new(args: &CoschedulingArgs, handle: &Handle) -> Result<Self, PluginError> {
        Self::with_groups(args, handle, handle.objects().of::<PodGroup>())
    }

    /// Builds the plugin over the PodGroups of `groups`.
    pub fn with_groups(
        args: &CoschedulingArgs,
        handle: &Handle,
        groups: Arc<Store<PodGroup>>,
    ) -> Result<Self, PluginError> {
        use kubesched_framework::registry::PluginArgs;
        args.validate(handle.features())
            .map_err(|e| PluginError(format!("{NAME}: {e}")))?;
        let permit_timeout = match args.permit_waiting_time_seconds {
            0 => Duration::from_secs(DEFAULT_PERMIT_WAITING_TIME_SECONDS as u64),
            s => Duration::from_secs(s as u64),
        };
        // Upstream keeps a passed check for permitWaitingTimeSeconds as given; 0 there
        // means its cache's default lifetime, 3 s.
        let resources_ttl = match args.permit_waiting_time_seconds {
            0 => RESOURCES_CHECK_DEFAULT_TTL,
            s => Duration::from_secs(s as u64),
        };
        let group_backoff = match args.pod_group_backoff_seconds {
            0 => REJECTED_GROUP_DEFAULT_BACKOFF,
            s => Duration::from_secs(s as u64),
        };
        Ok(Self {
            handle: handle.clone(),
            groups,
            permit_timeout,
            resources_ttl,
            group_backoff,
            writer: handle.object_writer::<PodGroup>(),
            reject_threshold: f64::from(args.pod_group_reject_percentage) / 100.0,
            book: Arc::new(Mutex::new(Bookkeeping::default())),
            status_writes: Arc::new(tokio::sync::Mutex::new(())),
        })
    }

    /// The bookkeeping, locked; first rid of the records of PodGroups deleted since the
    /// last look (checked when the store's generation moved, so a delete is noticed by the
    /// plugin's next call).
    fn book(&self) -> parking_lot::MutexGuard<'_, Bookkeeping> {
        let mut book = self.book.lock();
        let generation = self.groups.generation();
        if book.seen_generation != generation {
            book.seen_generation = generation;
            book.forget_deleted(|full| {
                full.split_once('/')
                    .is_some_and(|(ns, name)| self.groups.get(Some(ns), name).is_some())
            });
        }
        book
    }

    fn now(&self) -> Instant {
        self.handle.clock().now()
    }

    /// The pod's group: its `namespace/name` and the PodGroup when it exists. None for a
    /// pod without the label.
    fn group_of(&self, pod: &PodInfo) -> Option<(String, Option<Arc<PodGroup>>)> {
        let name = pod.labels.get(POD_GROUP_LABEL).filter(|n| !n.is_empty())?;
        let full = format!("{}/{name}", pod.namespace);
        Some((full, self.groups.get(Some(&pod.namespace), name)))
    }

    /// Every live pod of the pod's group (the pod included once it is known).
    fn members(&self, pod: &PodInfo) -> Vec<Arc<PodInfo>> {
        match pod.labels.get(POD_GROUP_LABEL) {
            Some(name) => self
                .handle
                .live_pods()
                .with_label(&pod.namespace, POD_GROUP_LABEL, name),
            None => Vec::new(),
        }
    }

    /// How many pods of the group are placed: bound ones, and those that passed Permit
    /// and were not unreserved. Names of pods gone since are forgotten.
    fn placed_count(&self, group: &str, members: &[Arc<PodInfo>]) -> usize {
        let mut book = self.book();
        let mut placed: BTreeSet<&str> = members
            .iter()
            .filter(|p| p.node_name.is_some())
            .map(|p| p.name.as_str())
            .collect();
        if let Some(tracked) = book.placed.get_mut(group) {
            tracked.retain(|name| members.iter().any(|p| &p.name == name));
            placed.extend(tracked.iter().map(String::as_str));
        }
        placed.len()
    }

    /// Moves the group's `status.phase` forward to `phase` (Pending, then Scheduling with
    /// `scheduleStartTime`), once: the part of scheduler-plugins' PodGroup controller the
    /// scheduler sees (PostBind does `Scheduled`, see [`Self::record_scheduled`]). Written
    /// in the background; a failure is logged.
    fn advance_phase(&self, full: &str, group: &PodGroup, phase: &'static str) {
        let current = group.status.as_ref().and_then(|s| s.phase.as_deref());
        {
            let mut book = self.book();
            let written = book.phase_written.get(full).copied();
            if rank(Some(phase)) <= rank(current).max(rank(written)) {
                return;
            }
            // A write needs the async runtime; unit tests without one skip it.
            if !self.handle.can_spawn() {
                return;
            }
            book.phase_written.insert(full.to_string(), phase);
            if phase == phase::SCHEDULING
                && let Some(now) = api_time(self.handle.clock().wall_now())
            {
                book.start_written.insert(full.to_string(), now);
            }
        }
        tracing::debug!(podgroup = %full, phase, "writing the PodGroup's phase");
        self.write_status(full, group);
    }

    /// Patches the group's status with everything the plugin has decided for it so far
    /// (phase, `scheduleStartTime`, `scheduled`, pod counts), in the background. Writes
    /// run one at a time and each reads the decisions when it runs, so a late write
    /// never puts back an older count. A failure is logged.
    fn write_status(&self, full: &str, group: &PodGroup) {
        let writer = self.writer.clone();
        let namespace = group.metadata.namespace.clone();
        let name = group.metadata.name.clone().unwrap_or_default();
        let full = full.to_string();
        let book = Arc::clone(&self.book);
        let writes = Arc::clone(&self.status_writes);
        self.handle.spawn_background(async move {
            let _turn = writes.lock().await;
            let status = {
                let book = book.lock();
                let mut status = serde_json::Map::new();
                if let Some(phase) = book.phase_written.get(&full) {
                    status.insert("phase".into(), serde_json::json!(phase));
                }
                if let Some(start) = book.start_written.get(&full) {
                    status.insert("scheduleStartTime".into(), serde_json::json!(start));
                }
                if let Some(scheduled) = book.scheduled_written.get(&full) {
                    status.insert("scheduled".into(), serde_json::json!(scheduled));
                }
                if let Some((running, succeeded, failed)) = book.counts_written.get(&full) {
                    status.insert("running".into(), serde_json::json!(running));
                    status.insert("succeeded".into(), serde_json::json!(succeeded));
                    status.insert("failed".into(), serde_json::json!(failed));
                }
                status
            };
            if status.is_empty() {
                return;
            }
            let patch = serde_json::json!({ "status": status });
            if let Err(e) = writer
                .patch_status(namespace.as_deref(), &name, patch)
                .await
            {
                tracing::warn!(podgroup = %full, error = %e, "updating the PodGroup's status");
            }
        });
    }

    /// Writes `status.scheduled` (the group's bound pods) after a bind, and moves the
    /// phase from Scheduling to Scheduled once `minMember` pods are bound: the step of
    /// scheduler-plugins' PodGroup controller that follows the scheduler's binds. Written
    /// in the background, only when the count or the phase changes.
    fn record_scheduled(&self, full: &str, group: &PodGroup, scheduled: i32) {
        let status = group.status.clone().unwrap_or_default();
        let phase = {
            let mut book = self.book();
            let known = book
                .scheduled_written
                .get(full)
                .copied()
                .unwrap_or(status.scheduled);
            let current =
                rank(status.phase.as_deref()).max(rank(book.phase_written.get(full).copied()));
            let phase = (scheduled >= group.spec.min_member
                && current < rank(Some(phase::SCHEDULED)))
            .then_some(phase::SCHEDULED);
            if known == scheduled && phase.is_none() {
                return;
            }
            if !self.handle.can_spawn() {
                return;
            }
            book.scheduled_written.insert(full.to_string(), scheduled);
            if let Some(phase) = phase {
                book.phase_written.insert(full.to_string(), phase);
            }
            phase
        };
        tracing::debug!(podgroup = %full, scheduled, phase, "writing the PodGroup's scheduled count");
        self.write_status(full, group);
    }

    /// Counts the group's pods by phase after a pod event and moves the group's phase as
    /// scheduler-plugins' PodGroup controller does: Scheduled to Running once running and
    /// succeeded pods reach `minMember`; Failed once a pod failed and failed, running and
    /// succeeded pods reach `minMember`; Finished once succeeded pods reach `minMember`. A
    /// Finished or Failed group is left alone, and a group not yet Scheduled gets its
    /// counts only. Written in the background, only when something changed.
    fn record_pod_phases(&self, full: &str, group: &PodGroup) {
        let status = group.status.clone().unwrap_or_default();
        let (counts, phase) = {
            let mut book = self.book();
            let current = book
                .phase_written
                .get(full)
                .copied()
                .map(str::to_string)
                .or(status.phase.clone());
            if matches!(current.as_deref(), Some(phase::FINISHED | phase::FAILED)) {
                return;
            }
            let (mut running, mut succeeded, mut failed) = (0i32, 0i32, 0i32);
            for pod_phase in book
                .pod_phases
                .get(full)
                .into_iter()
                .flat_map(|m| m.values())
            {
                match pod_phase.as_str() {
                    "Running" => running += 1,
                    "Succeeded" => succeeded += 1,
                    "Failed" => failed += 1,
                    _ => {}
                }
            }
            let min = group.spec.min_member;
            let mut next = current.as_deref();
            if next == Some(phase::SCHEDULED) && running + succeeded >= min {
                next = Some(phase::RUNNING);
            }
            if failed != 0 && failed + running + succeeded >= min {
                next = Some(phase::FAILED);
            }
            if succeeded >= min {
                next = Some(phase::FINISHED);
            }
            let phase = (next != current.as_deref())
                .then_some(next)
                .flatten()
                .and_then(static_phase);
            let counts = (running, succeeded, failed);
            let known = book.counts_written.get(full).copied().unwrap_or((
                status.running,
                status.succeeded,
                status.failed,
            ));
            if known == counts && phase.is_none() {
                return;
            }
            if !self.handle.can_spawn() {
                return;
            }
            book.counts_written.insert(full.to_string(), counts);
            if let Some(phase) = phase {
                book.phase_written.insert(full.to_string(), phase);
            }
            (counts, phase)
        };
        let (running, succeeded, failed) = counts;
        tracing::debug!(podgroup = %full, running, succeeded, failed, phase, "writing the PodGroup's pod counts");
        self.write_status(full, group);
    }

    /// Moves these pods to the active queue once the caller (PreEnqueue runs inside the
    /// queue) has returned.
    fn activate_later(&self, uids: Vec<String>) {
        if uids.is_empty() {
            return;
        }
        let handle = self.handle.clone();
        self.handle.spawn_background(async move {
            handle.activate(&uids);
        });
    }

    /// Refuses the group at PreFilter for its backoff. In a cluster, its pods are
    /// activated when the backoff ends: the refused ones wait in unschedulablePods, and
    /// no cluster event says that time has passed (a simulation's clock jumps to the
    /// unschedulable-pods flush instead, and its background work must end).
    fn back_off(&self, full: &str) {
        let now = self.now();
        {
            let mut book = self.book();
            if book.backed_off.get(full).is_some_and(|until| *until > now) {
                return;
            }
            book.backed_off
                .insert(full.to_string(), now + self.group_backoff);
        }
        tracing::debug!(podgroup = %full, backoff = ?self.group_backoff, "PostFilter rejects the group and backs it off");
        if self.handle.clock().is_virtual() || !self.handle.can_spawn() {
            return;
        }
        let Some((namespace, name)) = full.split_once('/') else {
            return;
        };
        let (handle, backoff) = (self.handle.clone(), self.group_backoff);
        let (namespace, name) = (namespace.to_string(), name.to_string());
        self.handle.spawn_background(async move {
            tokio::time::sleep(backoff).await;
            let waiting: Vec<String> = handle
                .live_pods()
                .with_label(&namespace, POD_GROUP_LABEL, &name)
                .iter()
                .filter(|p| p.node_name.is_none())
                .map(|p| p.uid.clone())
                .collect();
            if !waiting.is_empty() {
                handle.activate(&waiting);
            }
        });
    }

    fn mark_failure(&self, group: &str) {
        let wall = self.handle.clock().wall_now();
        let mut book = self.book();
        book.resources_checked.remove(group);
        book.last_failure.insert(group.to_string(), wall);
    }

    /// Rejects every pod of the group waiting at Permit.
    fn reject_waiting(&self, group: &str, message: &str) {
        for waiting in self.handle.waiting_pods().list() {
            if full_group_name(waiting.pod()).as_deref() == Some(group) {
                waiting.reject(NAME, message);
            }
        }
    }

    /// The time a queued pod sorts by: its group's last failure, else the group's
    /// creation, else the pod's first entry in the queue.
    fn sort_time(&self, info: &QueuedPodInfo) -> SystemTime {
        let pod = &info.pod_info;
        if let Some((full, group)) = self.group_of(pod) {
            if let Some(failed) = self.book().last_failure.get(&full) {
                return *failed;
            }
            if let Some(group) = group {
                // A PodGroup without a creation time sorts first, as Go's zero time does.
                return group
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map_or(SystemTime::UNIX_EPOCH, |t| wall_time(&t.0));
            }
        }
        let at = info.initial_attempt_timestamp.unwrap_or(info.timestamp);
        let clock = self.handle.clock();
        let ago = clock.now().saturating_duration_since(at);
        clock
            .wall_now()
            .checked_sub(ago)
            .unwrap_or(SystemTime::UNIX_EPOCH)
    }

    /// Upstream's cluster-wide check: the nodes' free resources, not counting the group's
    /// own pods, cover `minResources` and `minMember` pods. The refusal lists what is
    /// missing as `resource gap: map[cpu:3500m pods:3]`, sorted by name (cpu in
    /// millicores, the rest in units). Upstream prints the same map with Go's `%v`, which
    /// shows the quantities' internal fields; the readable form is ours on purpose.
    fn check_cluster_resources(&self, group: &PodGroup, full: &str) -> Result<(), String> {
        let wanted = group.spec.min_resources.clone().unwrap_or_default();
        let mut need = Resource::from_list(&wanted, "spec.minResources")
            .map_err(|e| format!("PodGroup {full}: {e}"))?;
        need.allowed_pod_number = i64::from(group.spec.min_member);
        let mut names: Vec<String> = wanted.keys().cloned().collect();
        names.push("pods".into());
        names.sort();
        names.dedup();
        let mut gap: BTreeMap<String, i64> = names
            .into_iter()
            .map(|n| {
                let amount = need.get(&n);
                (n, amount)
            })
            .filter(|(_, amount)| *amount > 0)
            .collect();
        for node in self.handle.snapshot().list() {
            if gap.is_empty() {
                break;
            }
            if node.node().is_none() {
                continue;
            }
            let free = free_without_group(node, full);
            gap.retain(|name, amount| {
                *amount -= free.get(name);
                *amount > 0
            });
        }
        if gap.is_empty() {
            return Ok(());
        }
        let listed: Vec<String> = gap
            .iter()
            .map(|(name, amount)| match name.as_str() {
                "cpu" => format!("{name}:{amount}m"),
                _ => format!("{name}:{amount}"),
            })
            .collect();
        Err(format!("resource gap: map[{}]", listed.join(" ")))
    }

    /// The quorum check PreEnqueue and PreFilter share.
    fn check_quorum(
        &self,
        point: &str,
        pod: &PodInfo,
        group: &PodGroup,
        members: &[Arc<PodInfo>],
    ) -> Result<(), String> {
        let min = group.spec.min_member;
        if (members.len() as i64) < i64::from(min) {
            return Err(not_enough_siblings(point, &pod.name, members.len(), min));
        }
        Ok(())
    }
}

/// The phase constant of a phase name.
fn static_phase(name: &str) -> Option<&'static str> {
    [
        phase::PENDING,
        phase::SCHEDULING,
        phase::SCHEDULED,
        phase::RUNNING,
        phase::FINISHED,
        phase::FAILED,
        phase::UNKNOWN,
    ]
    .into_iter()
    .find(|p| *p == name)
}

/// A pod's group (`namespace/name`), name and phase, when it names a group.
fn pod_in_group(pod: &k8s_openapi::api::core::v1::Pod) -> Option<(String, String, String)> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let group = pod
        .metadata
        .labels
        .as_ref()?
        .get(POD_GROUP_LABEL)
        .filter(|g| !g.is_empty())?;
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default();
    Some((
        format!("{namespace}/{group}"),
        pod.metadata.name.clone().unwrap_or_default(),
        phase,
    ))
}

/// How far along the phase machine a phase is (no phase first; Running, Finished, Failed
/// and Unknown last).
fn rank(phase: Option<&str>) -> u8 {
    match phase {
        None => 0,
        Some(phase::PENDING) => 1,
        Some(phase::SCHEDULING) => 2,
        Some(phase::SCHEDULED) => 3,
        Some(_) => 4,
    }
}

/// An API timestamp as a wall-clock time (times before 1970 as 1970).
fn wall_time(ts: &k8s_openapi::jiff::Timestamp) -> SystemTime {
    match u64::try_from(ts.as_second()) {
        Ok(secs) => {
            let nanos = u32::try_from(ts.subsec_nanosecond()).unwrap_or(0);
            SystemTime::UNIX_EPOCH + Duration::new(secs, nanos)
        }
        Err(_) => SystemTime::UNIX_EPOCH,
    }
}

/// A wall-clock time as the API writes it (RFC 3339, whole seconds).
fn api_time(at: SystemTime) -> Option<String> {
    let secs = at.duration_since(SystemTime::UNIX_EPOCH).ok()?.as_secs();
    let ts = k8s_openapi::jiff::Timestamp::from_second(i64::try_from(secs).ok()?).ok()?;
    Some(ts.to_string())
}

/// Unschedulable with no message: PostFilter could not help, but has nothing to add.
fn unschedulable_without_reason() -> Status {
    Status::new(Code::Unschedulable, Vec::<String>::new())
}

/// `namespace/group` of a pod, if it names a group.
fn full_group_name(pod: &PodInfo) -> Option<String> {
    pod.labels
        .get(POD_GROUP_LABEL)
        .filter(|n| !n.is_empty())
        .map(|n| format!("{}/{n}", pod.namespace))
}

/// The bytes of `namespace/name`, the key upstream breaks sort ties with (compared as one
/// string: `a-b/x` sorts before `a/x`), without building it.
fn namespaced_name(pod: &PodInfo) -> impl Iterator<Item = u8> + '_ {
    pod.namespace
        .bytes()
        .chain(std::iter::once(b'/'))
        .chain(pod.name.bytes())
}

/// A node's free resources with the pods of `group` taken off it.
fn free_without_group(node: &NodeInfo, group: &str) -> Resource {
    let mut requested = node.requested.clone();
    let mut pods = 0i64;
    for p in &node.pods {
        if full_group_name(p).as_deref() == Some(group) {
            requested.sub(&p.requests);
        } else {
            pods += 1;
        }
    }
    let mut free = node.allocatable.clone();
    free.sub(&requested);
    free.allowed_pod_number = node.allocatable.allowed_pod_number - pods;
    free
}

kubesched_framework::register_plugin! {
    name: NAME,
    plugin: Coscheduling,
    args: CoschedulingArgs,
    kinds: [PodGroup],
    writes: [KindWrite::status::<PodGroup>()],
    factory: Coscheduling::new,
}

impl QueueSortPlugin for Coscheduling {
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        let (pa, pb) = (a.pod_info.priority, b.pod_info.priority);
        if pa != pb {
            return pa > pb;
        }
        let (ta, tb) = (self.sort_time(a), self.sort_time(b));
        if ta == tb {
            return namespaced_name(&a.pod_info).lt(namespaced_name(&b.pod_info));
        }
        ta < tb
    }
}

impl PreEnqueuePlugin for Coscheduling {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        let Some((full, Some(group))) = self.group_of(pod) else {
            // No group, or one that does not exist yet: Permit answers for the latter.
            return Status::success();
        };
        let members = self.members(pod);
        match self.check_quorum("pre-enqueue", pod, &group, &members) {
            Ok(()) => {
                // The group just became whole: the siblings this gate held back come
                // back to the queue (after the queue's lock is released).
                if self.book().whole.insert(full) {
                    let siblings: Vec<String> = members
                        .iter()
                        .filter(|p| p.uid != pod.uid && p.node_name.is_none())
                        .map(|p| p.uid.clone())
                        .collect();
                    self.activate_later(siblings);
                }
                Status::success()
            }
            Err(message) => {
                self.book().whole.remove(&full);
                self.advance_phase(&full, &group, phase::PENDING);
                Status::unresolvable(message)
            }
        }
    }
}

impl PreFilterPlugin for Coscheduling {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        let (result, status) = self.check_group(pod);
        if status.is_rejected() {
            state.write(RefusedAtPreFilter);
        }
        (result, status)
    }
}

/// Written to the cycle state when this plugin's PreFilter refused the pod: the group was
/// not tried, so its PostFilter must not back the group off for it.
#[derive(Debug, Clone, Copy)]
struct RefusedAtPreFilter;

impl Coscheduling {
    /// PreFilter's checks: the group's backoff, its quorum, gated siblings, minResources.
    fn check_group(&self, pod: &PodInfo) -> (Option<PreFilterResult>, Status) {
        let Some((full, Some(group))) = self.group_of(pod) else {
            return (None, Status::success());
        };
        let now = self.now();
        {
            let mut book = self.book();
            match book.backed_off.get(&full) {
                Some(until) if *until > now => {
                    tracing::debug!(pod = %pod.key(), podgroup = %full, "the group failed recently; refused until its backoff ends");
                    return (None, Status::unresolvable(failed_recently(&full)));
                }
                Some(_) => {
                    book.backed_off.remove(&full);
                }
                None => {}
            }
        }
        let members = self.members(pod);
        if let Err(message) = self.check_quorum("pre-filter", pod, &group, &members) {
            // Pods queued before their PodGroup was known passed PreEnqueue; the group
            // is held here instead, and is Pending all the same.
            self.advance_phase(&full, &group, phase::PENDING);
            return (None, Status::unresolvable(message));
        }
        // minMember may be below the workload's size: only gated pods beyond the slack
        // stop the group.
        let mut slack = members.len() as i64 - i64::from(group.spec.min_member);
        for member in &members {
            if !member.scheduling_gates.is_empty() {
                slack -= 1;
            }
            if slack < 0 {
                return (None, Status::unresolvable(gated_siblings(&pod.name)));
            }
        }
        if group.spec.min_resources.is_none() {
            self.advance_phase(&full, &group, phase::SCHEDULING);
            return (None, Status::success());
        }
        {
            let mut book = self.book();
            match book.resources_checked.get(&full) {
                Some(until) if *until > now => return (None, Status::success()),
                Some(_) => {
                    book.resources_checked.remove(&full);
                }
                None => {}
            }
        }
        if let Err(message) = self.check_cluster_resources(&group, &full) {
            return (None, Status::unresolvable(message));
        }
        self.book
            .lock()
            .resources_checked
            .insert(full.clone(), now + self.resources_ttl);
        self.advance_phase(&full, &group, phase::SCHEDULING);
        (None, Status::success())
    }
}

#[async_trait]
impl PostFilterPlugin for Coscheduling {
    async fn post_filter(
        &self,
        _framework: &Framework,
        state: &CycleState,
        pod: &Arc<PodInfo>,
        _statuses: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status) {
        let Some((full, Some(group))) = self.group_of(pod) else {
            return (
                Some(PostFilterResult::default()),
                Status::unschedulable(ERR_NO_POD_GROUP),
            );
        };
        let min = group.spec.min_member;
        let members = self.members(pod);
        let placed = self.placed_count(&full, &members) as i64;
        // Enough pods are placed already: rejecting the group would undo a quorum.
        if placed >= i64::from(min) {
            return (
                Some(PostFilterResult::default()),
                unschedulable_without_reason(),
            );
        }
        // Only a few pods short: let the others try before giving the group up.
        let missing = (i64::from(min) - placed) as f64 / f64::from(min.max(1));
        if missing <= self.reject_threshold {
            return (
                Some(PostFilterResult::default()),
                unschedulable_without_reason(),
            );
        }
        self.reject_waiting(&full, REJECTED_IN_POST_FILTER);
        // As upstream, only a whole group is backed off: one still short of pods was
        // refused for that, and must come back as soon as they exist. Unlike upstream,
        // a pod this plugin's PreFilter refused does not back the group off (the group
        // was not tried: its quorum may have been reached since the check, and a refusal
        // for the backoff itself would push the backoff on with every sibling it turns
        // away), nor does a group already backed off have its backoff extended.
        if members.len() as i64 >= i64::from(min) && state.read::<RefusedAtPreFilter>().is_none() {
            self.back_off(&full);
        }
        self.mark_failure(&full);
        (
            Some(PostFilterResult::default()),
            Status::unschedulable(group_rejected(&full, &pod.name)),
        )
    }
}

impl ReservePlugin for Coscheduling {
    fn reserve(&self, _state: &mut CycleState, _pod: &PodInfo, _node_name: &str) -> Status {
        Status::success()
    }

    fn unreserve(&self, _state: &mut CycleState, pod: &PodInfo, _node_name: &str) {
        let Some((full, Some(_))) = self.group_of(pod) else {
            return;
        };
        {
            let mut book = self.book();
            if let Some(placed) = book.placed.get_mut(&full) {
                placed.remove(&pod.name);
                if placed.is_empty() {
                    book.placed.remove(&full);
                }
            }
        }
        self.reject_waiting(&full, REJECTED_IN_UNRESERVE);
        self.mark_failure(&full);
    }
}

impl PostBindPlugin for Coscheduling {
    fn post_bind(&self, _state: &CycleState, pod: &PodInfo, _node_name: &str) {
        let Some((full, Some(group))) = self.group_of(pod) else {
            return;
        };
        let members = self.members(pod);
        let scheduled = {
            let mut book = self.book();
            // The live view may show binds late: the pods that passed PostBind count too,
            // while they live.
            let bound = book.bound.entry(full.clone()).or_default();
            bound.insert(pod.name.clone());
            bound.retain(|name| name == &pod.name || members.iter().any(|p| &p.name == name));
            let mut scheduled: BTreeSet<&str> = members
                .iter()
                .filter(|p| p.node_name.is_some())
                .map(|p| p.name.as_str())
                .collect();
            scheduled.extend(bound.iter().map(String::as_str));
            scheduled.len()
        };
        self.record_scheduled(&full, &group, i32::try_from(scheduled).unwrap_or(i32::MAX));
    }
}

impl PodEventsPlugin for Coscheduling {
    fn on_pod_event(
        &self,
        old: Option<&k8s_openapi::api::core::v1::Pod>,
        new: Option<&k8s_openapi::api::core::v1::Pod>,
    ) {
        let before = old.and_then(pod_in_group);
        let after = new.and_then(pod_in_group);
        if before.is_none() && after.is_none() {
            return;
        }
        let mut changed: Vec<String> = Vec::new();
        {
            let mut book = self.book();
            if let Some((group, name, _)) = &before
                && after
                    .as_ref()
                    .is_none_or(|(g, n, _)| g != group || n != name)
            {
                if let Some(phases) = book.pod_phases.get_mut(group) {
                    phases.remove(name);
                    if phases.is_empty() {
                        book.pod_phases.remove(group);
                    }
                }
                changed.push(group.clone());
            }
            if let Some((group, name, phase)) = &after {
                let phases = book.pod_phases.entry(group.clone()).or_default();
                if phases.get(name) != Some(phase) {
                    phases.insert(name.clone(), phase.clone());
                    changed.push(group.clone());
                }
            }
        }
        for full in changed {
            let Some((namespace, name)) = full.split_once('/') else {
                continue;
            };
            // No such group (yet): nothing to write.
            if let Some(group) = self.groups.get(Some(namespace), name) {
                self.record_pod_phases(&full, &group);
            }
        }
    }
}

impl PermitPlugin for Coscheduling {
    fn permit(&self, _state: &CycleState, pod: &PodInfo, _node_name: &str) -> (Status, Duration) {
        let Some((full, group)) = self.group_of(pod) else {
            return (Status::success(), Duration::ZERO);
        };
        let Some(group) = group else {
            return (
                Status::unschedulable(ERR_POD_GROUP_NOT_FOUND),
                Duration::ZERO,
            );
        };
        let members = self.members(pod);
        self.book
            .lock()
            .placed
            .entry(full.clone())
            .or_default()
            .insert(pod.name.clone());
        let placed = self.placed_count(&full, &members);
        if placed as i64 >= i64::from(group.spec.min_member) {
            self.book().last_failure.remove(&full);
            for waiting in self.handle.waiting_pods().list() {
                if full_group_name(waiting.pod()).as_deref() == Some(full.as_str()) {
                    waiting.allow(NAME);
                }
            }
            return (Status::success(), Duration::ZERO);
        }
        if placed == 1 {
            // The group's first placed pod: its siblings may sit in the unschedulable
            // pods (rejected before the group was whole); bring them back.
            let siblings: Vec<String> = members
                .iter()
                .filter(|p| p.uid != pod.uid && p.node_name.is_none())
                .map(|p| p.uid.clone())
                .collect();
            if !siblings.is_empty() {
                self.handle.activate(&siblings);
            }
        }
        (Status::wait(), group.permit_timeout(self.permit_timeout))
    }
}

impl EnqueueExtensions for Coscheduling {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        vec![
            // A sibling appeared: the group may be whole now.
            ClusterEventWithHint::new(EventResource::Pod, ActionType::ADD),
            ClusterEventWithHint::with_hint(
                EventResource::of::<PodGroup>(),
                ActionType::ADD.union(ActionType::UPDATE),
                pod_group_changed,
            ),
            // Not in upstream's list. A pod this plugin rejected on a sibling's behalf
            // (PostFilter, Unreserve) needs what the sibling needed: room. When a group's
            // last failures all came from here (the sibling that did not fit was placed
            // again meanwhile and released by a late Unreserve), nothing else wakes it and
            // it waited for the unschedulable-pods flush (5 min) after a node was added.
            // Pod/Delete is left out on purpose: forgetting the group's own assumed pods
            // raises it, and the group would retry without end.
            ClusterEventWithHint::new(
                EventResource::Node,
                ActionType::ADD.union(ActionType::UPDATE_NODE_ALLOCATABLE),
            ),
        ]
    }
}

/// A PodGroup change helps the pods of that group only, and only when it is new or its
/// spec changed (our own status writes must not wake the group).
fn pod_group_changed(
    pod: &PodInfo,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let Some(new) = new.and_then(|o| o.downcast::<PodGroup>()) else {
        return Err("a PodGroup event without the new PodGroup".into());
    };
    let ours = new.metadata.namespace.as_deref() == Some(pod.namespace.as_str())
        && new.metadata.name.as_deref() == pod.labels.get(POD_GROUP_LABEL).map(String::as_str);
    if !ours {
        return Ok(QueueingHint::Skip);
    }
    match old.and_then(|o| o.downcast::<PodGroup>()) {
        Some(old) if old.spec == new.spec => Ok(QueueingHint::Skip),
        _ => Ok(QueueingHint::Queue),
    }
}

#[cfg(test)]
mod tests;
