//! The kube-rs backend: everything `kubesched run` needs to schedule a real cluster.
//!
//! It owns the watchers that feed the scheduler's cache, queue and object store (with
//! resourceVersion resumption, bookmarks, and relists that reconcile), the
//! [`ClusterClient`](kubesched_framework::ClusterClient) implementation that binds, patches
//! pod status, deletes victims and records aggregated events, the Lease-based leader
//! election, the QPS/burst token bucket, the HTTP endpoints, and the run loop with its
//! graceful shutdown. It must not hold scheduling policy (the scheduler and plugins do)
//! and reaches the API server only through kube-rs, with the access listed in [`rbac`] and
//! derived from the plugins' kind declarations in [`access`]. It names no plugin: what it
//! watches comes from the declarations of the compiled-in, enabled plugins.

pub mod access;
pub mod auth;
pub mod client;
pub mod connect;
pub mod error;
pub mod events;
pub mod lease;
pub mod lenient;
pub mod ratelimit;
pub mod rbac;
pub mod read;
pub mod requests;
pub mod run;
pub mod server;
pub mod watch;

pub use auth::DelegatedAuth;
pub use client::KubeClient;
pub use error::RunError;
pub use run::{Clients, RunOptions, Runner, StopHandle, Tuning, run, shutdown_signal};
pub use server::{Serving, Tls};

/// Upstream's secure port.
pub const DEFAULT_SECURE_PORT: u16 = 10259;
