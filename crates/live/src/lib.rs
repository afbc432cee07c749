//! The live backend: the scheduler against a live API server, for `kubesched run`
//! (schedule its pending pods) and `kubesched explain` (read it once and answer "where
//! would this pod go?"). Not to be confused with the simulator's in-memory cluster
//! (`kubesched-sim`), which plays the API server offline.
//!
//! It owns the watchers that feed the scheduler's cache, queue and object store (with
//! resourceVersion resumption, bookmarks, and relists that reconcile), the
//! [`ClusterClient`](kubesched_framework::ClusterClient) implementation that binds, patches
//! pod status, deletes victims and records aggregated events, the Lease-based leader
//! election, the QPS/burst token bucket, the HTTP endpoints with delegated authentication,
//! the one-off read of `kubesched explain`, and the run loop with its graceful shutdown.
//! It must not hold scheduling policy (the scheduler and plugins do) and reaches the API
//! server only through kube-rs, with the access listed in [`rbac`] and derived from the
//! plugins' kind declarations in [`access`]. It names no plugin: what it watches comes
//! from the declarations of the compiled-in, enabled plugins.
//!
//! (Until issue 18 this crate was `kubesched-cluster` in `crates/cluster`.)

pub mod access;
pub mod auth;
pub mod auth_sources;
pub mod client;
pub mod connect;
pub mod error;
pub mod events;
pub mod lease;
pub mod lenient;
pub mod process;
#[cfg(feature = "profiling")]
pub mod profile;
pub mod ratelimit;
pub use kubesched_rbac as rbac;
pub mod read;
pub mod requests;
pub mod run;
pub mod server;
pub mod watch;
pub mod watch_lines;
pub mod zpages;

pub use auth::DelegatedAuth;
pub use client::KubeClient;
pub use error::RunError;
pub use run::{Clients, RunOptions, Runner, StopHandle, Tuning, run, shutdown_signal};
pub use server::{Serving, Tls};

/// Upstream's secure port.
pub const DEFAULT_SECURE_PORT: u16 = 10259;
