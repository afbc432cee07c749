//! The API access kubesched needs, as one table: the kube backend decides what it watches
//! and writes from it, and the deploy renderer includes this file by path to render the
//! ClusterRole, so the two cannot drift apart. Plain consts only: no dependencies, no
//! functions (a crate including the file must not get unused-code warnings).

/// One RBAC rule: an API group, a resource (`pods/binding` for a subresource) and verbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// The API group (`""` for the core group).
    pub api_group: &'static str,
    /// The resource, plural and lower case; `resource/subresource` for a subresource.
    pub resource: &'static str,
    /// The verbs allowed.
    pub verbs: &'static [&'static str],
}

/// Read-only access for objects kubesched only watches.
const READ: &[&str] = &["get", "list", "watch"];

/// Every rule kubesched needs. Kinds watched only for some plugins are listed all the
/// same, so one ClusterRole serves every build.
#[rustfmt::skip]
pub const RULES: &[Rule] = &[
    Rule { api_group: "", resource: "pods", verbs: &["get", "list", "watch", "delete"] },
    Rule { api_group: "", resource: "pods/binding", verbs: &["create"] },
    Rule { api_group: "", resource: "pods/status", verbs: &["patch", "update"] },
    Rule { api_group: "", resource: "nodes", verbs: READ },
    Rule { api_group: "", resource: "namespaces", verbs: READ },
    Rule { api_group: "", resource: "services", verbs: READ },
    Rule { api_group: "", resource: "replicationcontrollers", verbs: READ },
    // VolumeBinding's PreBind updates a volume's claimRef and a claim's selected node.
    Rule { api_group: "", resource: "persistentvolumes", verbs: &["get", "list", "watch", "update"] },
    Rule { api_group: "", resource: "persistentvolumeclaims", verbs: &["get", "list", "watch", "update"] },
    Rule { api_group: "apps", resource: "replicasets", verbs: READ },
    Rule { api_group: "apps", resource: "statefulsets", verbs: READ },
    Rule { api_group: "storage.k8s.io", resource: "storageclasses", verbs: READ },
    Rule { api_group: "storage.k8s.io", resource: "csinodes", verbs: READ },
    Rule { api_group: "storage.k8s.io", resource: "csidrivers", verbs: READ },
    Rule { api_group: "storage.k8s.io", resource: "csistoragecapacities", verbs: READ },
    Rule { api_group: "storage.k8s.io", resource: "volumeattachments", verbs: READ },
    Rule { api_group: "policy", resource: "poddisruptionbudgets", verbs: READ },
    Rule { api_group: "resource.k8s.io", resource: "resourceclaims", verbs: &["get", "list", "watch", "update"] },
    Rule { api_group: "resource.k8s.io", resource: "resourceclaims/status", verbs: &["patch", "update"] },
    Rule { api_group: "resource.k8s.io", resource: "resourceslices", verbs: READ },
    Rule { api_group: "resource.k8s.io", resource: "deviceclasses", verbs: READ },
    Rule { api_group: "events.k8s.io", resource: "events", verbs: &["create", "patch", "update"] },
    Rule { api_group: "coordination.k8s.io", resource: "leases", verbs: &["create", "get", "update"] },
    // Delegated authentication and authorization of the secure port.
    Rule { api_group: "authentication.k8s.io", resource: "tokenreviews", verbs: &["create"] },
    Rule { api_group: "authorization.k8s.io", resource: "subjectaccessreviews", verbs: &["create"] },
];

/// Cluster roles the ServiceAccount is bound to besides its own: `system:auth-delegator`
/// grants what delegated authentication and authorization need, as kube-scheduler has it.
pub const BOUND_CLUSTER_ROLES: &[&str] = &["system:auth-delegator"];
