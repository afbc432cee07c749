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
    /// Plugin → deadline.
    pending: HashMap<String, (Instant, Duration)>,
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
    fn new(pod: Arc<PodInfo>, waits: HashMap<String, Duration>) -> Self {
        let now = Instant::now();
        let (tx, rx) = oneshot::channel();
        Self {
            pod,
            state: Mutex::new(WaitState {
                pending: waits.into_iter().map(|(p, d)| (p, (now + d, d))).collect(),
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

    /// The earliest deadline and the plugin it belongs to.
    fn next_deadline(&self) -> Option<(Instant, String, Duration)> {
        self.state
            .lock()
            .pending
            .iter()
            .min_by_key(|(name, (at, _))| (*at, (*name).clone()))
            .map(|(name, (at, d))| (*at, name.clone(), *d))
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
                    let msg = format!(
                        "rejected due to timeout after waiting {} at plugin {plugin}",
                        go_duration(waited)
                    );
                    self.reject(&plugin, &msg);
                }
            }
        }
    }
}

/// Formats a duration the way Go prints a `time.Duration` (e.g. `10s`, `1m30s`, `500ms`).
pub fn go_duration(d: Duration) -> String {
    let total_ms = d.as_millis();
    if total_ms < 1000 {
        return format!("{total_ms}ms");
    }
    let secs = d.as_secs_f64();
    let h = (secs / 3600.0).floor() as u64;
    let m = ((secs - h as f64 * 3600.0) / 60.0).floor() as u64;
    let s = secs - h as f64 * 3600.0 - m as f64 * 60.0;
    let s = if s.fract() == 0.0 {
        format!("{}", s as u64)
    } else {
        format!("{s}")
    };
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, m) => format!("{m}m{s}s"),
        (h, m) => format!("{h}h{m}m{s}s"),
    }
}

/// Every pod waiting at Permit, by UID.
#[derive(Debug, Default)]
pub struct WaitingPods {
    pods: Mutex<HashMap<String, Arc<WaitingPod>>>,
}

impl WaitingPods {
    /// Registers a waiting pod.
    pub fn add(&self, pod: Arc<PodInfo>, waits: HashMap<String, Duration>) -> Arc<WaitingPod> {
        let wp = Arc::new(WaitingPod::new(pod.clone(), waits));
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
    fn go_durations() {
        assert_eq!(go_duration(Duration::from_secs(10)), "10s");
        assert_eq!(go_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(go_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(go_duration(Duration::from_secs(3600)), "1h0m0s");
    }
}
