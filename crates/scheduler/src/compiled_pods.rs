//! The compiled form of the pod objects last delivered, so an update's old object (the
//! one delivered the time before) is not compiled a second time.

use std::sync::Arc;

use kubesched_framework::LivePods;
use kubesched_framework::model::{PodInfo, PodObject};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;

/// The last compiled object of every live pod, by uid. An entry is only reused for the
/// very object it was compiled from (pointer identity), so a backend that delivers a
/// different copy of the old object just gets it compiled again.
#[derive(Debug, Default)]
pub(crate) struct CompiledPods {
    by_uid: Mutex<FxHashMap<String, Compiled>>,
}

/// An object and what it compiled to.
type Compiled = (PodObject, Arc<PodInfo>);

impl CompiledPods {
    /// Compiles the pod and remembers it as the pod's latest object (an object compiled
    /// ahead, see [`CompiledPods::remember`], is not compiled again). A malformed pod is
    /// logged, forgotten and skipped.
    pub(crate) fn compile(&self, pod: &PodObject) -> Option<Arc<PodInfo>> {
        if let Some(info) = self.remembered(pod) {
            return Some(info);
        }
        let info = compile(pod);
        let mut by_uid = self.by_uid.lock();
        match &info {
            Some(i) => {
                by_uid.insert(pod.key().to_string(), (pod.clone(), Arc::clone(i)));
            }
            None => {
                by_uid.remove(pod.key());
            }
        }
        info
    }

    /// Remembers a pod compiled ahead of its delivery (the simulator compiles each pod it
    /// loads to check it), so the change that delivers its object does not compile it
    /// again.
    pub(crate) fn remember(&self, info: Arc<PodInfo>) {
        self.by_uid
            .lock()
            .insert(info.pod.key().to_string(), (info.pod.clone(), info));
    }

    /// The compiled form of an object delivered before: remembered when it is the pod's
    /// latest object, compiled otherwise (and not remembered).
    pub(crate) fn previous(&self, pod: &PodObject) -> Option<Arc<PodInfo>> {
        self.remembered(pod).or_else(|| compile(pod))
    }

    /// The remembered compiled form of this very object.
    fn remembered(&self, pod: &PodObject) -> Option<Arc<PodInfo>> {
        self.by_uid
            .lock()
            .get(pod.key())
            .filter(|(object, _)| PodObject::ptr_eq(object, pod))
            .map(|(_, info)| Arc::clone(info))
    }

    /// The compiled form of the pod's latest object, if the pod is known.
    pub(crate) fn latest(&self, uid: &str) -> Option<Arc<PodInfo>> {
        self.by_uid
            .lock()
            .get(uid)
            .map(|(_, info)| Arc::clone(info))
    }

    /// Forgets a pod that is gone (deleted or finished).
    pub(crate) fn forget(&self, pod: &PodObject) {
        self.by_uid.lock().remove(pod.key());
    }
}

/// The compiled pods are every live pod the event handlers saw, which is what plugins list.
impl LivePods for CompiledPods {
    fn with_label(&self, namespace: &str, key: &str, value: &str) -> Vec<Arc<PodInfo>> {
        let mut pods: Vec<Arc<PodInfo>> = self
            .by_uid
            .lock()
            .values()
            .filter(|(_, info)| {
                info.namespace == namespace
                    && info.labels.get(key).map(String::as_str) == Some(value)
            })
            .map(|(_, info)| Arc::clone(info))
            .collect();
        pods.sort_by(|a, b| a.name.cmp(&b.name));
        pods
    }

    fn by_uid(&self, uid: &str) -> Option<Arc<PodInfo>> {
        self.latest(uid)
    }

    fn in_pod_group(&self, namespace: &str, group: &str) -> Vec<Arc<PodInfo>> {
        let mut pods: Vec<Arc<PodInfo>> = self
            .by_uid
            .lock()
            .values()
            .filter(|(_, info)| {
                info.namespace == namespace
                    && kubesched_framework::workload::pod_group_name(info) == Some(group)
            })
            .map(|(_, info)| Arc::clone(info))
            .collect();
        pods.sort_by(|a, b| a.name.cmp(&b.name));
        pods
    }
}

fn compile(pod: &PodObject) -> Option<Arc<PodInfo>> {
    match PodInfo::new(pod) {
        Ok(p) => Some(Arc::new(p)),
        Err(e) => {
            tracing::warn!(error = %e, "skipping malformed pod");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(uid: &str, label: &str) -> PodObject {
        PodObject::from(Pod {
            metadata: ObjectMeta {
                name: Some(uid.into()),
                namespace: Some("default".into()),
                uid: Some(uid.into()),
                labels: Some([("v".to_string(), label.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    #[test]
    fn the_latest_object_is_reused_and_others_are_compiled() {
        let pods = CompiledPods::default();
        let first = pod("a", "1");
        let compiled = pods.compile(&first).expect("valid pod");
        // The same object: the same compiled pod, not a new one.
        let again = pods.previous(&first).expect("valid pod");
        assert!(Arc::ptr_eq(&compiled, &again));
        // An equal but different object is compiled afresh.
        let copy = PodObject::from((*first).clone());
        let fresh = pods.previous(&copy).expect("valid pod");
        assert!(!Arc::ptr_eq(&compiled, &fresh));
        assert_eq!(fresh.labels, compiled.labels);
        // A newer object replaces the entry; the old one is then compiled again.
        let second = pod("a", "2");
        pods.compile(&second);
        assert!(!Arc::ptr_eq(
            &pods.previous(&first).expect("valid"),
            &compiled
        ));
        assert_eq!(pods.previous(&second).expect("valid").labels["v"], "2");
        pods.compile(&pod("b", "2"));
        let listed: Vec<String> = pods
            .with_label("default", "v", "2")
            .iter()
            .map(|p| p.name.clone())
            .collect();
        assert_eq!(listed, ["a", "b"]);
        assert!(pods.with_label("other", "v", "2").is_empty());
        pods.forget(&second);
        pods.forget(&pod("b", "2"));
        assert!(pods.by_uid.lock().is_empty());
    }
}
