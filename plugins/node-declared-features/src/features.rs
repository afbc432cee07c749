//! The declared-feature registry: every feature a v1.37 kubelet may list in
//! `node.status.declaredFeatures`, and which pod fields make a pod need it at scheduling time.
//!
//! This is kubesched's own rendering of the inference half of upstream's
//! `k8s.io/component-helpers/nodedeclaredfeatures` library (its `features/` registry as of
//! v1.37). Discovery (which node declares what) is the kubelet's, and inference for pod
//! updates is the admission plugin's and the kubelet's: the scheduler calls neither, so
//! neither is here.

use kubesched_framework::Version;
use kubesched_framework::model::k8s_openapi::api::core::v1::{PodSpec, VolumeMount};

/// `ContainerRestartRule.action` that restarts every container of the pod.
pub const RESTART_ALL_CONTAINERS_ACTION: &str = "RestartAllContainers";

/// One declared feature.
#[derive(Debug, Clone, Copy)]
pub struct DeclaredFeature {
    /// The name nodes declare (always the kubelet feature gate's name in v1.37).
    pub name: &'static str,
    /// The last release (inclusive) in which the feature still matters for scheduling:
    /// from the release after it, every supported node has it and nothing is inferred.
    /// None: no bound (every v1.37 feature).
    pub max_version: Option<Version>,
    /// Whether scheduling the pod needs the feature. None for features that only matter
    /// when a running pod is updated (in-place resize and the like).
    pub needed_to_schedule: Option<fn(&PodSpec) -> bool>,
}

impl DeclaredFeature {
    /// Whether scheduling a pod with `spec` onto a node of release `target` needs it.
    pub fn required_for(&self, spec: &PodSpec, target: Version) -> bool {
        if self.max_version.is_some_and(|max| target > max) {
            return false;
        }
        self.needed_to_schedule.is_some_and(|needs| needs(spec))
    }
}

const fn feature(
    name: &'static str,
    needed_to_schedule: Option<fn(&PodSpec) -> bool>,
) -> DeclaredFeature {
    DeclaredFeature {
        name,
        max_version: None,
        needed_to_schedule,
    }
}

/// v1.37's registry, sorted by name (the order requirement sets are numbered in).
pub const REGISTRY: &[DeclaredFeature] = &[
    // DRA devices that count against node allocatable: nothing in the pod spec says so
    // (the claims do), so nothing is inferred.
    feature("DRANodeAllocatableResources", None),
    // Optional node operations of DRA drivers: a claim's allocation is known only at
    // PreBind, and DynamicResources filters those nodes itself.
    feature("DRAOptionalNodeOperations", None),
    // Websocket streaming to the kubelet: no pod field asks for it.
    feature("ExtendWebSocketsToKubelet", None),
    // In-place resize of pod-level resources: an update of a running pod.
    feature("InPlacePodLevelResourcesVerticalScaling", None),
    // In-place resize of non-sidecar init containers: an update of a running pod.
    feature("InPlacePodVerticalScalingInitContainers", None),
    // In-place resize of memory-backed emptyDir volumes: an update of a running pod.
    feature("InPlacePodVerticalScalingMemoryBackedVolumes", None),
    feature(
        "RestartAllContainersOnContainerExits",
        Some(restarts_all_containers),
    ),
    feature(
        "UserNamespacesHostNetworkSupport",
        Some(host_network_in_user_namespace),
    ),
    feature("VolumeBindMountOptions", Some(uses_bind_mount_options)),
];

/// A container or an init container has a restart rule whose action restarts them all.
fn restarts_all_containers(spec: &PodSpec) -> bool {
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .flat_map(|c| c.restart_policy_rules.iter().flatten())
        .any(|r| r.action == RESTART_ALL_CONTAINERS_ACTION)
}

/// The pod uses the host's network and its own user namespace (`hostUsers: false`).
fn host_network_in_user_namespace(spec: &PodSpec) -> bool {
    spec.host_network == Some(true) && spec.host_users == Some(false)
}

/// A volume mount of any container (init and ephemeral ones included) asks for extra bind
/// mount options.
fn uses_bind_mount_options(spec: &PodSpec) -> bool {
    let asks = |mounts: &Option<Vec<VolumeMount>>| {
        mounts
            .iter()
            .flatten()
            .any(|m| m.bind_mount_options.as_ref().is_some_and(|o| !o.is_empty()))
    };
    spec.containers.iter().any(|c| asks(&c.volume_mounts))
        || spec
            .init_containers
            .iter()
            .flatten()
            .any(|c| asks(&c.volume_mounts))
        || spec
            .ephemeral_containers
            .iter()
            .flatten()
            .any(|c| asks(&c.volume_mounts))
}

/// The features a pod needs, as a set over [`REGISTRY`] (bit i is `REGISTRY[i]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Requirements(u64);

// A bit per registered feature: the registry must fit.
const _: () = assert!(REGISTRY.len() <= 64);

impl Requirements {
    /// What scheduling a pod with `spec` onto a node of release `target` needs.
    pub fn infer(spec: &PodSpec, target: Version) -> Self {
        let mut bits = 0u64;
        for (i, f) in REGISTRY.iter().enumerate() {
            if f.required_for(spec, target) {
                bits |= 1 << i;
            }
        }
        Self(bits)
    }

    /// No feature is needed.
    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    /// The names of the features needed, in registry (name) order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        REGISTRY
            .iter()
            .enumerate()
            .filter(|(i, _)| self.0 & (1 << i) != 0)
            .map(|(_, f)| f.name)
    }

    /// Whether a node declaring `declared` (sorted, as the model keeps it) has every one.
    /// Names the registry does not know are ignored, as upstream ignores them.
    pub fn satisfied_by(&self, declared: &[String]) -> bool {
        self.names()
            .all(|name| declared.binary_search_by(|d| d.as_str().cmp(name)).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_sorted_and_unique() {
        let names: Vec<&str> = REGISTRY.iter().map(|f| f.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
    }

    #[test]
    fn max_version_ends_the_requirement() {
        let bounded = DeclaredFeature {
            name: "Bounded",
            max_version: Some(Version::V1_36),
            needed_to_schedule: Some(|_| true),
        };
        let spec = PodSpec::default();
        assert!(bounded.required_for(&spec, Version::V1_35));
        assert!(bounded.required_for(&spec, Version::V1_36));
        assert!(!bounded.required_for(&spec, Version::V1_37));
    }
}
