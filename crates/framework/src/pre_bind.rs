//! Pods in PreBind, so preemption can cancel a victim's binding in memory instead of
//! deleting it through the API server (v1.36, #135502): the binding cycle fails, the
//! victim goes back to the queue's backoff and stays in the cluster.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::oneshot;

/// One pod running its PreBind plugins.
#[derive(Debug)]
pub struct PodInPreBind {
    /// Taken by the first cancellation or by the end of PreBind, whichever comes first.
    cancel: Mutex<Option<oneshot::Sender<String>>>,
}

impl PodInPreBind {
    /// Cancels the pod's PreBind with `cause`: false when PreBind already ended (the
    /// caller then deletes the pod as before).
    pub fn cancel(&self, cause: &str) -> bool {
        match self.cancel.lock().take() {
            Some(tx) => tx.send(cause.to_string()).is_ok(),
            None => false,
        }
    }
}

/// The pods in PreBind, by UID.
#[derive(Debug, Default)]
pub struct PodsInPreBind {
    pods: Mutex<HashMap<String, Arc<PodInPreBind>>>,
}

/// What the binding cycle holds while the pod is in PreBind: the cancellation to wait
/// on. Dropping it ends the registration, so a late cancellation fails (and preemption
/// falls back to deleting the pod).
#[derive(Debug)]
pub struct PreBindRegistration {
    uid: String,
    entry: Arc<PodInPreBind>,
    registry: Arc<PodsInPreBind>,
    /// Resolves with the cause when preemption cancels the pod.
    pub cancelled: oneshot::Receiver<String>,
}

impl Drop for PreBindRegistration {
    fn drop(&mut self) {
        self.entry.cancel.lock().take();
        let mut pods = self.registry.pods.lock();
        if pods
            .get(&self.uid)
            .is_some_and(|e| Arc::ptr_eq(e, &self.entry))
        {
            pods.remove(&self.uid);
        }
    }
}

impl PodsInPreBind {
    /// Registers a pod about to run PreBind.
    pub fn add(self: &Arc<Self>, uid: &str) -> PreBindRegistration {
        let (tx, rx) = oneshot::channel();
        let entry = Arc::new(PodInPreBind {
            cancel: Mutex::new(Some(tx)),
        });
        self.pods.lock().insert(uid.to_string(), entry.clone());
        PreBindRegistration {
            uid: uid.to_string(),
            entry,
            registry: self.clone(),
            cancelled: rx,
        }
    }

    /// The pod, while it is in PreBind.
    pub fn get(&self, uid: &str) -> Option<Arc<PodInPreBind>> {
        self.pods.lock().get(uid).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_registered_pod_is_cancelled_once_and_not_after_prebind() {
        let registry = Arc::new(PodsInPreBind::default());
        let mut registration = registry.add("u1");
        let entry = registry.get("u1").expect("registered");
        assert!(entry.cancel("preempted by DefaultPreemption"));
        assert!(!entry.cancel("again"), "one cancellation only");
        assert_eq!(
            (&mut registration.cancelled).await.as_deref(),
            Ok("preempted by DefaultPreemption")
        );
        drop(registration);
        assert!(registry.get("u1").is_none());

        let registration = registry.add("u2");
        let entry = registry.get("u2").expect("registered");
        drop(registration);
        assert!(!entry.cancel("too late"), "PreBind has ended");
    }
}
