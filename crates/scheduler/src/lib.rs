//! The scheduling loop: event handlers that feed the cache and the queue, the scheduling
//! cycle (PreFilter, parallel Filter with adaptive node sampling, Score, host selection,
//! assume, Reserve, Permit), the binding cycle on its own task, failure handling with
//! upstream's FailedScheduling messages, the metrics with upstream's names, and scheduler
//! extenders over HTTP ([`extender`]), consulted from the same cycle in run and simulate.
//!
//! It reaches the outside only through `kubesched_framework::ClusterClient` (writes) and
//! [`ClusterChange`] (what it is told), so the same loop drives a real cluster and the
//! in-memory one. It must not hold scheduling policy (plugins do) nor know how objects
//! are fetched (backends do).

mod build;
mod changes;
mod compiled_pods;
mod explain;
pub mod extender;
mod fit_error;
pub mod metrics;
mod repeated;
mod scheduler;

pub use build::{BuildError, SchedulerParts, build_scheduler};
pub use changes::{ClusterChange, is_assigned, is_terminal, node_update_actions};
pub use explain::{Explanation, ExtenderExplanation, NodeExplanation, PluginScoreExplanation};
pub use fit_error::{Diagnosis, FitError, NO_NODES_AVAILABLE};
pub use scheduler::{
    AttemptObserver, AttemptOutcome, ExplanationScope, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND,
    MIN_FEASIBLE_NODES_TO_FIND, NO_PODS_SCHEDULABLE, PodGroupOutcome, PodLister, Scheduler,
    SchedulerOptions, num_feasible_nodes_to_find, plugin_reading_field, truncate_message,
};
