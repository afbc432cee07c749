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
    entries: Mutex<Entries>,
}

/// An object and what it compiled to.
type Compiled = (PodObject, Arc<PodInfo>);

/// The entries, and the members of each pod group (`namespace/group` to name and uid, in
/// name order): a gang's Permit lists its group for every member, which scanning every
/// live pod made quadratic in the cluster's pods.
#[derive(Debug, Default)]
struct Entries {
    by_uid: FxHashMap<String, Compiled>,
    groups: FxHashMap<String, std::collections::BTreeMap<String, String>>,
}

impl Entries {
    fn get(&self, uid: &str) -> Option<&Compiled> {
        self.by_uid.get(uid)
    }

    fn insert(&mut self, uid: String, entry: Compiled) {
        if let Some(key) = kubesched_framework::workload::pod_group_key(&entry.1) {
            self.groups
                .entry(key)
                .or_default()
                .insert(entry.1.name.clone(), uid.clone());
        }
        if let Some(old) = self.by_uid.insert(uid, entry) {
            self.unlist(&old.1, false);
        }
    }

    fn remove(&mut self, uid: &str) {
        if let Some(old) = self.by_uid.remove(uid) {
            self.unlist(&old.1, true);
        }
    }

    /// Takes a replaced or removed pod out of its group's list (a replaced one only when
    /// its group changed, which the API does not allow but a broken backend might send).
    fn unlist(&mut self, old: &PodInfo, removed: bool) {
        let Some(key) = kubesched_framework::workload::pod_group_key(old) else {
            return;
        };
        let still_listed = !removed
            && self.by_uid.get(&old.uid).is_some_and(|(_, now)| {
                kubesched_framework::workload::pod_group_key(now).as_deref() == Some(&key)
            });
        if still_listed {
            return;
        }
        if let Some(members) = self.groups.get_mut(&key) {
            // A pod of the same name made again since is listed under its own uid.
            if members.get(&old.name) == Some(&old.uid) {
                members.remove(&old.name);
            }
            if members.is_empty() {
                self.groups.remove(&key);
            }
        }
    }

    fn values(&self) -> impl Iterator<Item = &Compiled> {
        self.by_uid.values()
    }
}

impl CompiledPods {
    /// Compiles the pod and remembers it as the pod's latest object (an object compiled
    /// ahead, see [`CompiledPods::remember`], is not compiled again). A malformed pod is
    /// logged, forgotten and skipped.
    pub(crate) fn compile(&self, pod: &PodObject) -> Option<Arc<PodInfo>> {
        self.compile_update(pod, None)
    }

    /// [`CompiledPods::compile`] for an update whose old object compiled to `before`: a
    /// new object that differs from it only where a binding or a status update writes is
    /// derived from `before` instead of compiled again.
    pub(crate) fn compile_update(
        &self,
        pod: &PodObject,
        before: Option<&Arc<PodInfo>>,
    ) -> Option<Arc<PodInfo>> {
        if let Some(info) = self.remembered(pod) {
            return Some(info);
        }
        let info = match before.and_then(|b| b.updated_to(pod)) {
            Some(derived) => Some(Arc::new(derived)),
            None => compile(pod),
        };
        let mut by_uid = self.entries.lock();
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
        self.entries
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
        self.entries
            .lock()
            .get(pod.key())
            .filter(|(object, _)| PodObject::ptr_eq(object, pod))
            .map(|(_, info)| Arc::clone(info))
    }

    /// The compiled form of the pod's latest object, if the pod is known.
    pub(crate) fn latest(&self, uid: &str) -> Option<Arc<PodInfo>> {
        self.entries
            .lock()
            .get(uid)
            .map(|(_, info)| Arc::clone(info))
    }

    /// Forgets a pod that is gone (deleted or finished).
    pub(crate) fn forget(&self, pod: &PodObject) {
        self.entries.lock().remove(pod.key());
    }
}

/// The compiled pods are every live pod the event handlers saw, which is what plugins list.
impl LivePods for CompiledPods {
    fn with_label(&self, namespace: &str, key: &str, value: &str) -> Vec<Arc<PodInfo>> {
        let mut pods: Vec<Arc<PodInfo>> = self
            .entries
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
        let entries = self.entries.lock();
        let Some(members) = entries.groups.get(&format!("{namespace}/{group}")) else {
            return Vec::new();
        };
        members
            .values()
            .filter_map(|uid| entries.get(uid))
            .map(|(_, info)| Arc::clone(info))
            .collect()
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
        assert!(pods.entries.lock().by_uid.is_empty());
    }

    fn member(uid: &str, name: &str, group: &str) -> PodObject {
        let mut p = (*pod(uid, "1")).clone();
        p.metadata.name = Some(name.into());
        p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            scheduling_group: Some(k8s_openapi::api::core::v1::PodSchedulingGroup {
                pod_group_name: Some(group.into()),
            }),
            ..Default::default()
        });
        PodObject::from(p)
    }

    fn names(pods: &CompiledPods, group: &str) -> Vec<String> {
        pods.in_pod_group("default", group)
            .iter()
            .map(|p| format!("{}:{}", p.name, p.uid))
            .collect()
    }

    #[test]
    fn a_group_lists_its_live_members_in_name_order() {
        let pods = CompiledPods::default();
        for (uid, name, group) in [("3", "c", "g"), ("1", "a", "g"), ("2", "b", "h")] {
            pods.compile(&member(uid, name, group));
        }
        assert_eq!(names(&pods, "g"), ["a:1", "c:3"]);
        assert_eq!(names(&pods, "h"), ["b:2"]);
        assert!(pods.in_pod_group("other", "g").is_empty());
        // An update keeps the member listed once.
        pods.compile(&member("1", "a", "g"));
        assert_eq!(names(&pods, "g"), ["a:1", "c:3"]);
        // A pod made again under the same name: the old one's deletion leaves the new one.
        let old = member("3", "c", "g");
        pods.compile(&member("4", "c", "g"));
        pods.forget(&old);
        assert_eq!(names(&pods, "g"), ["a:1", "c:4"]);
        pods.forget(&member("1", "a", "g"));
        pods.forget(&member("4", "c", "g"));
        pods.forget(&member("2", "b", "h"));
        assert!(pods.entries.lock().groups.is_empty());
    }
}
