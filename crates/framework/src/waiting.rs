//! Pods held at Permit, waiting for every plugin that said Wait to allow them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kubesched_model::PodInfo;
use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::{Code, Status};

struct WaitState {
    /// Plugin → deadline on the runtime's timer, the wait it asked for, and the deadline
    /// on the scheduler's clock (virtual in a simulation, see [`WaitingPods::expire_due`]).
    pending: HashMap<String, (Instant, Duration, std::time::Instant)>,
    done: Option<oneshot::Sender<Status>>,
}

/// A pod waiting at Permit.
pub struct WaitingPod {
    pod: Arc<PodInfo>,
    state: Mutex<WaitState>,
    receiver: Mutex<Option<oneshot::Receiver<Status>>>,
}

impl std::fmt::Debug for WaitingPod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitingPod")
            .field("pod", &self.pod.key())
            .field("pending", &self.pending_plugins())
            .finish()
    }
}

impl WaitingPod {
    fn new(
        pod: Arc<PodInfo>,
        waits: HashMap<String, Duration>,
        clock_now: std::time::Instant,
    ) -> Self {
        let now = Instant::now();
        let (tx, rx) = oneshot::channel();
        Self {
            pod,
            state: Mutex::new(WaitState {
                pending: waits
                    .into_iter()
                    .map(|(p, d)| (p, (now + d, d, clock_now + d)))
                    .collect(),
                done: Some(tx),
            }),
            receiver: Mutex::new(Some(rx)),
        }
    }

    /// The pod.
    pub fn pod(&self) -> &Arc<PodInfo> {
        &self.pod
    }

    /// The plugins that have not allowed the pod yet, sorted.
    pub fn pending_plugins(&self) -> Vec<String> {
        let mut v: Vec<String> = self.state.lock().pending.keys().cloned().collect();
        v.sort();
        v
    }

    /// The plugin allows the pod; when no plugin is left, the pod goes on to binding.
    pub fn allow(&self, plugin: &str) {
        let mut s = self.state.lock();
        s.pending.remove(plugin);
        if s.pending.is_empty()
            && let Some(tx) = s.done.take()
        {
            let _ = tx.send(Status::success());
        }
    }

    /// The plugin rejects the pod.
    pub fn reject(&self, plugin: &str, message: &str) {
        if let Some(tx) = self.state.lock().done.take() {
            let _ = tx.send(Status::unschedulable(message).with_plugin(plugin));
        }
    }

    /// Preemption takes the pod off its node while it waits (upstream's `Preempt`, v1.36):
    /// it ends with an error rather than a rejection, so the pod is retried after its
    /// backoff instead of waiting for a cluster event, and nothing is deleted. False when
    /// the pod no longer waits (allowed or rejected already): the caller deletes it then.
    pub fn preempt(&self, plugin: &str, message: &str) -> bool {
        match self.state.lock().done.take() {
            Some(tx) => {
                let _ = tx.send(Status::error(message).with_plugin(plugin));
                true
            }
            None => false,
        }
    }

    /// The earliest deadline and the plugin it belongs to.
    fn next_deadline(&self) -> Option<(Instant, String, Duration)> {
        self.state
            .lock()
            .pending
            .iter()
            .min_by_key(|(name, (at, _, _))| (*at, (*name).clone()))
            .map(|(name, (at, d, _))| (*at, name.clone(), *d))
    }

    /// Whether the pod still waits: no plugin rejected it and not every plugin allowed it.
    pub fn is_waiting(&self) -> bool {
        self.state.lock().done.is_some()
    }

    /// The earliest deadline on the scheduler's clock, while the pod still waits.
    fn clock_deadline(&self) -> Option<std::time::Instant> {
        let s = self.state.lock();
        s.done.as_ref()?;
        s.pending.values().map(|(_, _, at)| *at).min()
    }

    /// Rejects the pod when a plugin's deadline on the scheduler's clock has passed.
    fn expire_due(&self, clock_now: std::time::Instant) -> bool {
        let due = {
            let s = self.state.lock();
            if s.done.is_none() {
                return false;
            }
            s.pending
                .iter()
                .filter(|(_, (_, _, at))| *at <= clock_now)
                .min_by_key(|(name, (_, _, at))| (*at, (*name).clone()))
                .map(|(name, (_, d, _))| (name.clone(), *d))
        };
        match due {
            Some((plugin, waited)) => {
                self.reject(&plugin, &timeout_message(&plugin, waited));
                true
            }
            None => false,
        }
    }

    /// Waits until every plugin allows, one rejects, or a plugin's time runs out.
    pub async fn wait(&self) -> Status {
        let Some(mut rx) = self.receiver.lock().take() else {
            return Status::error("permit wait was already awaited");
        };
        loop {
            let Some((deadline, plugin, waited)) = self.next_deadline() else {
                // Everything allowed before we started waiting.
                return rx
                    .await
                    .unwrap_or_else(|_| Status::error("permit wait dropped"));
            };
            tokio::select! {
                res = &mut rx => {
                    return res.unwrap_or_else(|_| Status::error("permit wait dropped"));
                }
                _ = tokio::time::sleep_until(deadline) => {
                    self.reject(&plugin, &timeout_message(&plugin, waited));
                }
            }
        }
    }
}

fn timeout_message(plugin: &str, waited: Duration) -> String {
    format!(
        "rejected due to timeout after waiting {} at plugin {plugin}",
        go_duration(waited)
    )
}

/// Formats a duration the way Go prints a `time.Duration` (e.g. `10s`, `1m30s`, `500ms`).
pub fn go_duration(d: Duration) -> String {
    crate::duration::format(d)
}

/// Every pod waiting at Permit, by UID.
#[derive(Debug, Default)]
pub struct WaitingPods {
    pods: Mutex<HashMap<String, Arc<WaitingPod>>>,
}

impl WaitingPods {
    /// Registers a waiting pod; its deadlines run on the runtime's timer.
    pub fn add(&self, pod: Arc<PodInfo>, waits: HashMap<String, Duration>) -> Arc<WaitingPod> {
        self.add_at(pod, waits, std::time::Instant::now())
    }

    /// Registers a waiting pod whose wait starts at `clock_now` on the scheduler's clock,
    /// so a simulation can time it out on its virtual clock ([`WaitingPods::expire_due`]).
    pub fn add_at(
        &self,
        pod: Arc<PodInfo>,
        waits: HashMap<String, Duration>,
        clock_now: std::time::Instant,
    ) -> Arc<WaitingPod> {
        let wp = Arc::new(WaitingPod::new(pod.clone(), waits, clock_now));
        self.pods.lock().insert(pod.uid.clone(), wp.clone());
        wp
    }

    /// The waiting pod with this UID.
    pub fn get(&self, uid: &str) -> Option<Arc<WaitingPod>> {
        self.pods.lock().get(uid).cloned()
    }

    /// Stops tracking a pod.
    pub fn remove(&self, uid: &str) {
        self.pods.lock().remove(uid);
    }

    /// Every waiting pod.
    pub fn list(&self) -> Vec<Arc<WaitingPod>> {
        self.pods.lock().values().cloned().collect()
    }

    /// How many pods still wait (neither rejected nor allowed by every plugin).
    pub fn still_waiting(&self) -> usize {
        self.pods.lock().values().filter(|w| w.is_waiting()).count()
    }

    /// The earliest deadline, on the scheduler's clock, of the pods that still wait.
    pub fn next_deadline(&self) -> Option<std::time::Instant> {
        self.pods
            .lock()
            .values()
            .filter_map(|w| w.clock_deadline())
            .min()
    }

    /// Times out every pod whose deadline on the scheduler's clock is `clock_now` or
    /// earlier, with the message the runtime's timer would give. A simulation calls this
    /// after moving its virtual clock; against a cluster the timer does it. Returns how
    /// many pods were rejected.
    pub fn expire_due(&self, clock_now: std::time::Instant) -> usize {
        let mut pods = self.list();
        // In key order, not the map's: the rejected pods' binding cycles end, and their
        // events are written, in this order, and a simulation must be the same every run.
        pods.sort_by_cached_key(|w| w.pod.key());
        pods.iter().filter(|w| w.expire_due(clock_now)).count()
    }

    /// Rejects a waiting pod (for example when it is deleted or preempted).
    pub fn reject(&self, uid: &str, plugin: &str, message: &str) -> bool {
        match self.get(uid) {
            Some(wp) => {
                wp.reject(plugin, message);
                true
            }
            None => false,
        }
    }
}

/// Whether a status came from a rejection rather than an internal error.
pub(crate) fn is_rejection(code: Code) -> bool {
    matches!(
        code,
        Code::Unschedulable | Code::UnschedulableAndUnresolvable
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_on_the_scheduler_clock_expire_when_it_passes_them() {
        let pods = WaitingPods::default();
        let start = std::time::Instant::now();
        let pod = |name: &str| {
            let pod = k8s_openapi::api::core::v1::Pod {
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    name: Some(name.into()),
                    uid: Some(name.into()),
                    ..Default::default()
                },
                ..Default::default()
            };
            Arc::new(PodInfo::new(Arc::new(pod)).expect("a named pod compiles"))
        };
        let short = pods.add_at(
            pod("short"),
            HashMap::from([("Gang".to_string(), Duration::from_secs(5))]),
            start,
        );
        let long = pods.add_at(
            pod("long"),
            HashMap::from([("Gang".to_string(), Duration::from_secs(60))]),
            start,
        );
        assert_eq!(pods.still_waiting(), 2);
        assert_eq!(pods.next_deadline(), Some(start + Duration::from_secs(5)));
        assert_eq!(pods.expire_due(start + Duration::from_secs(4)), 0);
        assert_eq!(pods.expire_due(start + Duration::from_secs(5)), 1);
        assert!(!short.is_waiting() && long.is_waiting());
        assert_eq!(pods.next_deadline(), Some(start + Duration::from_secs(60)));
        let rejected = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime")
            .block_on(short.wait());
        assert_eq!(
            rejected.message(),
            "rejected due to timeout after waiting 5s at plugin Gang"
        );
        long.allow("Gang");
        assert_eq!(pods.still_waiting(), 0);
        assert_eq!(pods.next_deadline(), None);
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(Duration::from_secs(10)), "10s");
        assert_eq!(go_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(go_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(go_duration(Duration::from_secs(3600)), "1h0m0s");
    }
}
