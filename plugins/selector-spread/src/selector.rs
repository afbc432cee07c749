//! The selector of the pod's "group": what its Services and controller select.

use kubesched_framework::ObjectStore;
use kubesched_framework::model::{LabelSelector, PodInfo};

/// The selector deduced from the pod's Services and controller (see
/// `ObjectStore::default_selector`, shared with PodTopologySpread).
pub(crate) fn default_selector(pod: &PodInfo, objects: &ObjectStore) -> LabelSelector {
    objects.default_selector(pod)
}
