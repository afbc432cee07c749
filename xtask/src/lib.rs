//! xtask: kubesched's repository chores, in plain Rust so they run wherever cargo does.
//!
//! It owns `cargo xtask deploy` (rendering the ServiceAccount, RBAC, ConfigMap,
//! Deployment and metrics Service, the same objects as a Helm chart, the Grafana dashboard,
//! the Dockerfile and example workloads into deploy/) and `cargo xtask build`
//! (a release binary with exactly the chosen plugins) and `cargo xtask new-plugin` (a new
//! plugin crate, wired into the binary) and `cargo xtask stress` (the cluster-mode test
//! binaries run again and again under load). It must stay light (no clap, kube or
//! tokio) and must not link the framework or any plugin: plugin names map to Cargo features
//! by the registry's naming rule, checked against crates/cli/Cargo.toml. The ClusterRole
//! comes from the kube backend's own RBAC table (the `kubesched-rbac` crate, consts and no
//! dependencies), so the two cannot drift apart.

use std::fmt;
use std::path::{Path, PathBuf};

pub mod args;
pub mod bench_plot;
pub mod chart;
pub mod dashboard;
pub mod default_plugins;
pub mod deploy;
pub mod plugin_kinds;
pub mod plugins;
pub use kubesched_rbac as rbac;
pub mod render;
pub mod scaffold;
pub mod stress;
pub mod yaml;

/// Why a chore failed: a sentence for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(String);

impl Error {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// The workspace root: xtask lives one level below it.
pub fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map_or_else(|| manifest_dir.to_path_buf(), Path::to_path_buf)
}

/// The manifest of the `kubesched` binary crate, whose features are the plugin set.
pub fn cli_manifest_path() -> PathBuf {
    workspace_root().join("crates/cli/Cargo.toml")
}

/// The plugin features the `kubesched` crate declares.
pub fn known_plugins() -> Result<plugins::KnownPlugins, Error> {
    let path = cli_manifest_path();
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Error::new(format!("reading {}: {e}", path.display())))?;
    Ok(plugins::KnownPlugins::from_manifest(&text))
}
