//! Resource amounts and the pod request rules of upstream's resource helpers.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use crate::{ModelError, Quantity};

/// Name of the CPU resource.
pub const CPU: &str = "cpu";
/// Name of the memory resource.
pub const MEMORY: &str = "memory";
/// Name of the ephemeral storage resource.
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// Name of the pod-count resource.
pub const PODS: &str = "pods";
/// CPU given to a container that requests none, when scoring (100m).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Memory given to a container that requests none, when scoring (200 MiB).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// An amount of each resource a scheduler accounts for.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct Resource {
    /// CPU in millicores.
    pub milli_cpu: i64,
    /// Memory in bytes.
    pub memory: i64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage: i64,
    /// Pods a node admits (only meaningful for allocatable).
    pub allowed_pod_number: i64,
    /// Extended and hugepages resources, in whole units.
    pub scalar: BTreeMap<String, i64>,
}

impl Resource {
    /// Reads a resource list (allocatable, requests, overhead). `field` names it in errors.
    pub fn from_list(
        list: &BTreeMap<String, ApiQuantity>,
        field: &str,
    ) -> Result<Self, ModelError> {
        let mut problems = Vec::new();
        let r = Self::from_list_lenient(list, field, &mut problems);
        match problems.into_iter().next() {
            Some(e) => Err(e),
            None => Ok(r),
        }
    }

    /// Like [`Resource::from_list`], but an amount that does not parse is left out (and
    /// reported in `problems`) instead of failing the whole list.
    pub fn from_list_lenient(
        list: &BTreeMap<String, ApiQuantity>,
        field: &str,
        problems: &mut Vec<ModelError>,
    ) -> Self {
        let mut r = Resource::default();
        for (name, q) in list {
            match parse_quantity(q, &format!("{field}[{name}]")) {
                Ok(amount) => r.set(name, &amount),
                Err(e) => problems.push(e),
            }
        }
        r
    }

    fn set(&mut self, name: &str, q: &Quantity) {
        match name {
            CPU => self.milli_cpu = q.milli_value(),
            MEMORY => self.memory = q.value(),
            EPHEMERAL_STORAGE => self.ephemeral_storage = q.value(),
            PODS => self.allowed_pod_number = q.value(),
            other if is_scalar_resource_name(other) => {
                self.scalar.insert(other.to_string(), q.value());
            }
            _ => {}
        }
    }

    /// The amount of one named resource.
    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.milli_cpu,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.allowed_pod_number,
            other => self.scalar.get(other).copied().unwrap_or(0),
        }
    }

    /// Adds another amount, resource by resource.
    pub fn add(&mut self, other: &Resource) {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
        self.ephemeral_storage += other.ephemeral_storage;
        self.allowed_pod_number += other.allowed_pod_number;
        for (k, v) in &other.scalar {
            *self.scalar.entry(k.clone()).or_insert(0) += v;
        }
    }

    /// Subtracts another amount, resource by resource.
    pub fn sub(&mut self, other: &Resource) {
        self.milli_cpu -= other.milli_cpu;
        self.memory -= other.memory;
        self.ephemeral_storage -= other.ephemeral_storage;
        self.allowed_pod_number -= other.allowed_pod_number;
        for (k, v) in &other.scalar {
            *self.scalar.entry(k.clone()).or_insert(0) -= v;
        }
    }

    /// Raises each resource to at least the other's amount.
    pub fn set_max(&mut self, other: &Resource) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        self.allowed_pod_number = self.allowed_pod_number.max(other.allowed_pod_number);
        for (k, v) in &other.scalar {
            let e = self.scalar.entry(k.clone()).or_insert(0);
            *e = (*e).max(*v);
        }
    }

    /// Whether every amount is zero.
    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.allowed_pod_number == 0
            && self.scalar.values().all(|v| *v == 0)
    }
}

/// Whether a resource name is extended, hugepages, prefixed native (`*kubernetes.io/…`) or
/// attachable-volume (tracked as scalar), as upstream's `IsScalarResourceName`.
pub fn is_scalar_resource_name(name: &str) -> bool {
    is_extended_resource_name(name)
        || name.starts_with("hugepages-")
        || name.contains("kubernetes.io/")
        || name.starts_with("attachable-volumes-")
}

/// Which sums of the pods already on a node a scoring plugin reads for cpu and memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuMemoryRequests {
    /// Requests with the scoring defaults for containers that ask for none.
    NonZero,
    /// Requests as the pods declare them.
    Plain,
}

/// A resource a scoring plugin is configured with, resolved once, so that the per-node
/// lookup matches on a kind instead of comparing names for every node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScoredResource {
    /// `cpu`.
    Cpu,
    /// `memory`.
    Memory,
    /// `ephemeral-storage`.
    EphemeralStorage,
    /// Any other name, with whether it is a scalar (extended, hugepages...) resource.
    Other {
        /// The resource name.
        name: String,
        /// [`is_scalar_resource_name`] of the name.
        scalar: bool,
    },
}

impl ScoredResource {
    /// Resolves a configured resource name.
    pub fn new(name: &str) -> Self {
        match name {
            CPU => Self::Cpu,
            MEMORY => Self::Memory,
            EPHEMERAL_STORAGE => Self::EphemeralStorage,
            _ => Self::Other {
                name: name.to_string(),
                scalar: is_scalar_resource_name(name),
            },
        }
    }

    /// (allocatable, requested including the pod's `pod_request`) of this resource on the
    /// node. `(0, 0)` leaves the resource out of the score: a scalar resource the pod does
    /// not request, or one the node lacks.
    pub fn allocatable_and_requested(
        &self,
        node: &crate::NodeInfo,
        cpu_memory: CpuMemoryRequests,
        pod_request: i64,
    ) -> (i64, i64) {
        // cpu, memory and ephemeral storage come from the compact numbers at the head of
        // the info; only the other resources read the full sums.
        let n = node.numbers();
        let (cpu_requested, memory_requested) = match cpu_memory {
            CpuMemoryRequests::NonZero => (n.non_zero_milli_cpu, n.non_zero_memory),
            CpuMemoryRequests::Plain => (n.requested_milli_cpu, n.requested_memory),
        };
        match self {
            Self::Cpu => (n.allocatable_milli_cpu, cpu_requested + pod_request),
            Self::Memory => (n.allocatable_memory, memory_requested + pod_request),
            Self::EphemeralStorage => (
                n.allocatable_ephemeral_storage,
                n.requested_ephemeral_storage + pod_request,
            ),
            Self::Other { scalar: true, .. } if pod_request == 0 => (0, 0),
            Self::Other { name, .. } => match node.allocatable.scalar.get(name) {
                Some(&allocatable) => (
                    allocatable,
                    node.requested.scalar.get(name).copied().unwrap_or(0) + pod_request,
                ),
                None => (0, 0),
            },
        }
    }
}

/// Whether a resource name is an extended resource: fully qualified, outside the
/// `kubernetes.io/` namespace, and not a `requests.` quota name.
pub fn is_extended_resource_name(name: &str) -> bool {
    if is_native_resource(name) || name.starts_with("requests.") {
        return false;
    }
    name.contains('/')
}

/// Whether a resource name lives in the `kubernetes.io` namespace (or has no namespace).
pub fn is_native_resource(name: &str) -> bool {
    match name.split_once('/') {
        None => true,
        Some((prefix, _)) => prefix == "kubernetes.io" || prefix.ends_with(".kubernetes.io"),
    }
}

/// Parses an API quantity, naming the field on error.
pub fn parse_quantity(q: &ApiQuantity, field: &str) -> Result<Quantity, ModelError> {
    Quantity::parse(&q.0).map_err(|e| ModelError::invalid(field, &e.to_string()))
}

/// Whether upstream reads this resource from a pod's `spec.resources` (PodLevelResources):
/// cpu and memory, and in v1.37 hugepages of every size too (component-helpers'
/// `IsSupportedPodLevelResource`; v1.34 read cpu and memory only).
pub fn is_supported_pod_level_resource(name: &str) -> bool {
    name == CPU || name == MEMORY || name.starts_with(HUGEPAGES_PREFIX)
}

/// The name prefix of hugepages resources (`hugepages-2Mi`, `hugepages-1Gi`).
pub const HUGEPAGES_PREFIX: &str = "hugepages-";

/// Requests of one container, with API-server defaulting (a limit stands in for a missing
/// request) applied, so manifests that were never through an API server read the same.
fn container_requests(
    c: &api::Container,
    field: &str,
    non_missing: bool,
    problems: &mut Vec<ModelError>,
) -> Resource {
    let resources = c.resources.as_ref();
    let mut list: BTreeMap<String, ApiQuantity> =
        resources.and_then(|r| r.limits.clone()).unwrap_or_default();
    if let Some(req) = resources.and_then(|r| r.requests.as_ref()) {
        for (k, v) in req {
            list.insert(k.clone(), v.clone());
        }
    }
    let mut r = Resource::from_list_lenient(&list, &format!("{field}.resources"), problems);
    if non_missing {
        if !list.contains_key(CPU) {
            r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
        }
        if !list.contains_key(MEMORY) {
            r.memory = DEFAULT_MEMORY_REQUEST;
        }
    }
    r
}

/// A pod's effective requests: the largest of the regular containers (plus sidecars) and
/// each init container step, plus overhead. With `non_missing`, containers without a CPU or
/// memory request count the scoring defaults instead (upstream's non-zero requests).
/// An amount that does not parse is left out and reported in `problems` (the API server
/// never stores one, so this only guards against what kubesched cannot read).
pub fn pod_requests(
    spec: &api::PodSpec,
    non_missing: bool,
    problems: &mut Vec<ModelError>,
) -> Resource {
    let mut reqs = Resource::default();
    for (i, c) in spec.containers.iter().enumerate() {
        reqs.add(&container_requests(
            c,
            &format!("spec.containers[{i}]"),
            non_missing,
            problems,
        ));
    }
    let mut sidecars = Resource::default();
    let mut init_max = Resource::default();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let mut step = container_requests(
            c,
            &format!("spec.initContainers[{i}]"),
            non_missing,
            problems,
        );
        if c.restart_policy.as_deref() == Some("Always") {
            // A sidecar keeps running: it adds to every later step and to the main phase.
            sidecars.add(&step);
            step = sidecars.clone();
        } else {
            step.add(&sidecars);
        }
        init_max.set_max(&step);
    }
    reqs.add(&sidecars);
    reqs.set_max(&init_max);

    // Pod-level resources replace the container sum for the resources they name, among
    // those upstream supports at pod level; others there are ignored.
    if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        for (name, q) in pod_level {
            if !is_supported_pod_level_resource(name) {
                continue;
            }
            match parse_quantity(q, &format!("spec.resources.requests[{name}]")) {
                Ok(q) => reqs.set(name, &q),
                Err(e) => problems.push(e),
            }
        }
    }
    if let Some(overhead) = &spec.overhead {
        reqs.add(&Resource::from_list_lenient(
            overhead,
            "spec.overhead",
            problems,
        ));
    }
    reqs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(cpu: Option<&str>, mem: Option<&str>, sidecar: bool) -> api::Container {
        let mut req = BTreeMap::new();
        if let Some(c) = cpu {
            req.insert(CPU.to_string(), ApiQuantity(c.into()));
        }
        if let Some(m) = mem {
            req.insert(MEMORY.to_string(), ApiQuantity(m.into()));
        }
        api::Container {
            name: "c".into(),
            resources: Some(api::ResourceRequirements {
                requests: Some(req),
                ..Default::default()
            }),
            restart_policy: sidecar.then(|| "Always".to_string()),
            ..Default::default()
        }
    }

    fn spec(containers: Vec<api::Container>, init: Vec<api::Container>) -> api::PodSpec {
        api::PodSpec {
            containers,
            init_containers: Some(init),
            ..Default::default()
        }
    }

    #[test]
    fn sums_containers_and_takes_max_with_init() {
        let s = spec(
            vec![
                container(Some("100m"), Some("1Gi"), false),
                container(Some("200m"), None, false),
            ],
            vec![container(Some("500m"), Some("100Mi"), false)],
        );
        let r = requests_ok(&s, false);
        assert_eq!(r.milli_cpu, 500);
        assert_eq!(r.memory, 1 << 30);
    }

    #[test]
    fn sidecars_add_to_main_phase_and_later_init_steps() {
        // sidecar 100m, then init 300m (runs beside the sidecar: 400m), then main 200m + 100m.
        let s = spec(
            vec![container(Some("200m"), None, false)],
            vec![
                container(Some("100m"), None, true),
                container(Some("300m"), None, false),
            ],
        );
        assert_eq!(requests_ok(&s, false).milli_cpu, 400);
        let s = spec(
            vec![container(Some("500m"), None, false)],
            vec![
                container(Some("100m"), None, true),
                container(Some("300m"), None, false),
            ],
        );
        assert_eq!(requests_ok(&s, false).milli_cpu, 600);
    }

    #[test]
    fn non_zero_defaults_only_for_missing_requests() {
        let s = spec(
            vec![
                container(None, None, false),
                container(Some("0"), None, false),
            ],
            vec![],
        );
        let r = requests_ok(&s, true);
        assert_eq!(r.milli_cpu, DEFAULT_MILLI_CPU_REQUEST);
        assert_eq!(r.memory, 2 * DEFAULT_MEMORY_REQUEST);
    }

    #[test]
    fn overhead_is_added_and_limits_default_requests() {
        let mut s = spec(vec![], vec![]);
        s.containers.push(api::Container {
            name: "c".into(),
            resources: Some(api::ResourceRequirements {
                limits: Some(BTreeMap::from([(CPU.to_string(), ApiQuantity("1".into()))])),
                ..Default::default()
            }),
            ..Default::default()
        });
        s.overhead = Some(BTreeMap::from([(
            CPU.to_string(),
            ApiQuantity("250m".into()),
        )]));
        assert_eq!(requests_ok(&s, false).milli_cpu, 1250);
    }

    #[test]
    fn pod_level_requests_replace_the_container_sum() {
        let q = |v: &str| ApiQuantity(v.into());
        // Containers ask 500m cpu, 1Gi memory and 2Mi of hugepages-2Mi; the pod asks more.
        let mut s = spec(vec![container(Some("500m"), Some("1Gi"), false)], vec![]);
        s.containers[0]
            .resources
            .get_or_insert_with(Default::default)
            .requests
            .get_or_insert_with(Default::default)
            .insert("hugepages-2Mi".into(), q("2Mi"));
        s.resources = Some(api::ResourceRequirements {
            requests: Some(BTreeMap::from([
                (CPU.to_string(), q("2")),
                ("hugepages-2Mi".to_string(), q("10Mi")),
                ("example.com/gpu".to_string(), q("3")),
            ])),
            ..Default::default()
        });
        let r = requests_ok(&s, false);
        // cpu from the pod, memory (not named there) from the containers.
        assert_eq!(r.milli_cpu, 2000);
        assert_eq!(r.memory, 1 << 30);
        // v1.37: hugepages at pod level count (v1.34 kept the containers' 2Mi).
        assert_eq!(r.get("hugepages-2Mi"), 10 << 20);
        // Extended resources are not pod-level resources: the containers' sum (none).
        assert_eq!(r.get("example.com/gpu"), 0);
        for (name, want) in [
            ("cpu", true),
            ("memory", true),
            ("hugepages-1Gi", true),
            ("ephemeral-storage", false),
            ("example.com/gpu", false),
        ] {
            assert_eq!(is_supported_pod_level_resource(name), want, "{name}");
        }
    }

    fn requests_ok(s: &api::PodSpec, non_missing: bool) -> Resource {
        let mut problems = Vec::new();
        let r = pod_requests(s, non_missing, &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        r
    }

    #[test]
    fn a_bad_quantity_is_left_out_and_names_the_field() {
        let s = spec(
            vec![
                container(Some("lots"), Some("1Gi"), false),
                container(Some("300m"), None, false),
            ],
            vec![],
        );
        let mut problems = Vec::new();
        let r = pod_requests(&s, false, &mut problems);
        // What could be read still counts.
        assert_eq!(r.milli_cpu, 300);
        assert_eq!(r.memory, 1 << 30);
        assert_eq!(problems.len(), 1, "{problems:?}");
        let err = problems[0].to_string();
        assert!(err.contains("spec.containers[0].resources[cpu]"), "{err}");
    }

    #[test]
    fn extended_resource_names() {
        assert!(is_extended_resource_name("nvidia.com/gpu"));
        assert!(!is_extended_resource_name("kubernetes.io/foo"));
        assert!(!is_extended_resource_name("cpu"));
        assert!(is_scalar_resource_name("hugepages-2Mi"));
        assert!(is_scalar_resource_name("kubernetes.io/something"));
        assert!(is_scalar_resource_name("subdomain.kubernetes.io/something"));
        assert!(!is_scalar_resource_name("cpu"));
    }

    #[test]
    fn scored_resources_read_the_sums_each_plugin_scores_with() {
        let list = |amounts: &[(&str, &str)]| -> BTreeMap<String, ApiQuantity> {
            amounts
                .iter()
                .map(|(k, v)| (k.to_string(), ApiQuantity(v.to_string())))
                .collect()
        };
        let meta = |name: &str| k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(name.into()),
            ..Default::default()
        };
        let pod = |name: &str, requests: &[(&str, &str)]| {
            let p = api::Pod {
                metadata: meta(name),
                spec: Some(api::PodSpec {
                    containers: vec![api::Container {
                        name: "c".into(),
                        resources: Some(api::ResourceRequirements {
                            requests: Some(list(requests)),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                ..Default::default()
            };
            std::sync::Arc::new(crate::PodInfo::new(std::sync::Arc::new(p)).expect("pod"))
        };
        let api_node = api::Node {
            metadata: meta("n1"),
            status: Some(api::NodeStatus {
                allocatable: Some(list(&[
                    (CPU, "4"),
                    (MEMORY, "8Gi"),
                    (EPHEMERAL_STORAGE, "100"),
                    ("example.com/gpu", "4"),
                ])),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut node = crate::NodeInfo::new(std::sync::Arc::new(
            crate::Node::new(std::sync::Arc::new(api_node)).expect("node"),
        ));
        node.add_pod(pod(
            "a",
            &[
                (CPU, "500m"),
                (MEMORY, "1Gi"),
                (EPHEMERAL_STORAGE, "10"),
                ("example.com/gpu", "1"),
            ],
        ));
        // No requests: the scoring defaults (100m, 200Mi) count in the non-zero sums only.
        node.add_pod(pod("b", &[]));
        const MIB: i64 = 1 << 20;
        let at = |name: &str, cm, req| {
            ScoredResource::new(name).allocatable_and_requested(&node, cm, req)
        };
        use CpuMemoryRequests::{NonZero, Plain};
        assert_eq!(at(CPU, NonZero, 100), (4000, 700));
        assert_eq!(at(CPU, Plain, 100), (4000, 600));
        assert_eq!(at(MEMORY, NonZero, 0), (8 << 30, 1224 * MIB));
        assert_eq!(at(MEMORY, Plain, 0), (8 << 30, 1 << 30));
        // Ephemeral storage always reads the plain sums.
        assert_eq!(at(EPHEMERAL_STORAGE, NonZero, 5), (100, 15));
        // A scalar resource the pod does not ask for is left out; one it asks for counts.
        assert_eq!(at("example.com/gpu", Plain, 0), (0, 0));
        assert_eq!(at("example.com/gpu", Plain, 2), (4, 3));
        // A resource the node lacks is left out.
        assert_eq!(at("example.com/fpga", Plain, 1), (0, 0));
        assert_eq!(
            ScoredResource::new("example.com/gpu"),
            ScoredResource::Other {
                name: "example.com/gpu".into(),
                scalar: true
            }
        );
    }
}
