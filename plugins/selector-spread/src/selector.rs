//! The selector of the pod's "group": what its Services and controller select.

use kubesched_framework::ObjectStore;
use kubesched_framework::model::{LabelSelector, Labels, PodInfo};

/// The selector deduced from the Services selecting the pod and the ReplicationController,
/// ReplicaSet or StatefulSet controlling it (upstream's `helper.DefaultSelector`). Empty
/// when none is found.
///
/// PodTopologySpread has the same helper; plugin crates do not depend on each other, so
/// each keeps its copy (a dozen lines of lookups).
pub(crate) fn default_selector(pod: &PodInfo, objects: &ObjectStore) -> LabelSelector {
    let mut set = Labels::new();
    for svc in objects.services.list_namespace(&pod.namespace) {
        // A Service without a selector selects nothing, not everything.
        let Some(sel) = svc.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
            continue;
        };
        if sel.iter().all(|(k, v)| pod.labels.get(k) == Some(v)) {
            set.extend(sel.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    let mut selector = LabelSelector::from_map(&set);
    let Some(owner) = pod
        .pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
    else {
        return selector;
    };
    let ns = Some(pod.namespace.as_str());
    let extra = match (owner.api_version.as_str(), owner.kind.as_str()) {
        ("v1", "ReplicationController") => {
            if let Some(rc_sel) = objects
                .replication_controllers
                .get(ns, &owner.name)
                .and_then(|rc| rc.spec.as_ref().and_then(|s| s.selector.clone()))
            {
                set.extend(rc_sel);
                selector = LabelSelector::from_map(&set);
            }
            None
        }
        ("apps/v1", "ReplicaSet") => objects
            .replica_sets
            .get(ns, &owner.name)
            .and_then(|rs| rs.spec.as_ref().map(|s| s.selector.clone())),
        ("apps/v1", "StatefulSet") => objects
            .stateful_sets
            .get(ns, &owner.name)
            .and_then(|ss| ss.spec.as_ref().map(|s| s.selector.clone())),
        _ => None,
    };
    if let Some(extra) = extra
        // A malformed controller selector adds nothing (upstream ignores it too).
        && let Ok(compiled) = LabelSelector::compile(Some(&extra), "spec.selector")
    {
        for r in compiled.requirements {
            selector.push(r);
        }
    }
    selector
}
