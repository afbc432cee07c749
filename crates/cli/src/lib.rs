//! The `kubesched` binary's library half: the plugin set of this build (`plugins.rs`), the
//! kube-scheduler v1.37 command line as data ([`kube_flags`]), the log output
//! ([`logs`]) and the version report ([`version`]). It holds no scheduling code; the
//! binary (src/main.rs) and the end-to-end tests share these pieces so that a test of
//! "kube-scheduler's arguments start kubesched" goes through the very parser the binary uses.

pub use kubesched_framework as framework;

pub mod kube_flags;
pub mod logs;
mod plugins;
pub mod version;
