//! What `kubesched version` and `--version` report: the crate version, the git commit it
//! was built from (see build.rs; "unknown" for a build without git), the Kubernetes
//! release whose kube-scheduler it reproduces and the plugins compiled in.

use serde_json::json;

/// The Kubernetes release kubesched reproduces.
pub const KUBERNETES_VERSION: &str = "v1.37";

/// The crate version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit of the build, if known.
pub fn git_commit() -> Option<&'static str> {
    option_env!("KUBESCHED_GIT_COMMIT").filter(|c| !c.is_empty())
}

/// The compiled-in plugins, sorted.
pub fn plugins() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = kubesched_framework::registry::plugins()
        .iter()
        .map(|d| d.name)
        .collect();
    names.sort_unstable();
    names
}

/// The report as text, one fact a line.
pub fn text() -> String {
    format!(
        "kubesched {VERSION}\ngit commit: {}\nkube-scheduler reproduced: {KUBERNETES_VERSION}\nplugins: {}\n",
        git_commit().unwrap_or("unknown"),
        plugins().join(", ")
    )
}

/// The report as JSON.
pub fn json() -> serde_json::Value {
    json!({
        "version": VERSION,
        "gitCommit": git_commit().unwrap_or("unknown"),
        "kubernetesVersion": KUBERNETES_VERSION,
        "plugins": plugins(),
    })
}
