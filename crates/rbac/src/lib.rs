//! kubesched-rbac: the API access kubesched needs whatever plugins it has, as one table of
//! plain consts (rules, the built-in Roles and ClusterRoles the ServiceAccount is bound to).
//!
//! Two crates read it: the kube backend (`kubesched-live`, which adds the rows derived from
//! the plugins' kind declarations and checks its requests against them) and xtask (which
//! renders the ClusterRole of `cargo xtask deploy` and the Helm chart from it), so the two
//! cannot drift apart. It must stay a leaf: no dependencies, no functions, no knowledge of
//! plugins (their rows come from their declarations, elsewhere).

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

/// The verbs on a kind a plugin declares it reads (what the watchers and `explain` use).
pub const READ: &[&str] = &["get", "list", "watch"];

/// Every rule kubesched needs whatever plugins it has. The kinds plugins declare add
/// their own rows (reads: [`READ`]; writes: the declared verbs).
#[rustfmt::skip]
pub const RULES: &[Rule] = &[
    Rule { api_group: "", resource: "pods", verbs: &["get", "list", "watch", "delete"] },
    Rule { api_group: "", resource: "pods/binding", verbs: &["create"] },
    Rule { api_group: "", resource: "pods/status", verbs: &["patch", "update"] },
    Rule { api_group: "", resource: "nodes", verbs: READ },
    Rule { api_group: "events.k8s.io", resource: "events", verbs: &["create", "patch", "update"] },
    Rule { api_group: "coordination.k8s.io", resource: "leases", verbs: &["create", "get", "update"] },
    // Delegated authentication and authorization of the secure port.
    Rule { api_group: "authentication.k8s.io", resource: "tokenreviews", verbs: &["create"] },
    Rule { api_group: "authorization.k8s.io", resource: "subjectaccessreviews", verbs: &["create"] },
];

/// A built-in Role of one namespace the ServiceAccount is bound to, and what it grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoundRole {
    /// The Role's namespace.
    pub namespace: &'static str,
    /// The Role's name.
    pub role: &'static str,
    /// What the Role grants there (for the tests' coverage check).
    pub grants: Rule,
}

/// Built-in namespaced Roles the ServiceAccount is bound to, as kube-scheduler is:
/// `extension-apiserver-authentication-reader` reads the ConfigMap delegated
/// authentication takes the client CA and front-proxy settings from.
pub const BOUND_ROLES: &[BoundRole] = &[BoundRole {
    namespace: "kube-system",
    role: "extension-apiserver-authentication-reader",
    grants: Rule {
        api_group: "",
        resource: "configmaps",
        verbs: &["get", "list", "watch"],
    },
}];

/// Cluster roles the ServiceAccount is bound to besides its own: `system:auth-delegator`
/// grants what delegated authentication and authorization need, as kube-scheduler has it.
pub const BOUND_CLUSTER_ROLES: &[&str] = &["system:auth-delegator"];
