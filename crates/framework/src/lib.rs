//! The scheduling framework: the contract every plugin compiles against.
//!
//! It owns [`Status`], the plugin traits of each extension point, [`CycleState`], the
//! [`Handle`] plugins reach the cluster view through, the link-time plugin
//! [registry], the [`Framework`] runtime that runs one profile's plugins with
//! upstream kube-scheduler's semantics, [`NodeTally`], the per-node results a plugin
//! keeps from one cycle to the next, the [`Extender`] contract of scheduler extenders, and
//! [`PreemptionExplanation`], what a preemption plugin reports when an attempt is explained.
//! It must not hold scheduling policy of its own
//! (that lives in plugins) nor talk to an API server directly (that is the
//! [`ClusterClient`] implementations' job).
//!
//! **API boundary:** this crate and `kubesched-model` are what out-of-tree plugins
//! compile against.

mod client;
pub mod clock;
mod cycle_state;
pub mod dra_devices;
pub mod duration;
pub mod events;
mod explain;
mod extender;
pub mod features;
mod handle;
mod kind;
pub mod kinds;
pub mod metrics;
mod node_tally;
mod node_to_status;
mod nominator;
pub mod normalize;
mod objects;
mod parallel;
mod plugin;
pub mod pre_bind;
pub mod prelude;
#[doc(hidden)]
pub mod probe;
pub mod registry;
mod remedy;
mod runtime;
mod snapshot;
mod status;
mod store;
mod waiting;
pub mod workload;
mod writer;

pub use client::{
    ClientError, ClusterClient, Event, EventType, NoopClient, ObjectRef, ObjectWrite,
    PodScheduledCondition, PodStatusUpdate,
};
pub use cycle_state::{CycleState, StateData};
pub use explain::{
    CandidateExplanation, PreemptionCriterion, PreemptionExplainer, PreemptionExplanation,
    RejectedPreemptionNode, VictimExplanation,
};
pub use extender::{
    EXTENDER_NAME, Extender, ExtenderError, ExtenderFilterOutcome, FailedNodesMap, HostPriority,
    Victims,
};
pub use features::{Feature, FeatureGateError, FeatureGates, Version};
pub use handle::{Handle, HandleBuilder, HandleControl, LivePods, NoLivePods, PodActivator};
pub use kinds::{Kind, KindWrite, ObjectKind};
pub use node_tally::{NodeTally, TallyCache};
pub use node_to_status::NodeToStatus;
pub use nominator::{NominatedView, Nominator};
pub use objects::{ObjectStore, Store};
pub use parallel::Parallelizer;
pub use plugin::*;
pub use remedy::{NodeRemedy, Remedy};
pub use runtime::{
    DYNAMIC_RESOURCES, DYNAMIC_RESOURCES_MISSING, FilterTimings, Framework, MAX_PERMIT_TIMEOUT,
    PlacementScoreTable, PluginRef, PluginScores, PreFilterOutcome, ProfileSpec, ScoreTable,
    implemented_points,
};
pub use snapshot::Snapshot;
pub use status::{Code, Status};
pub use waiting::{WaitingPod, WaitingPods, go_duration};
pub use writer::ObjectWriter;

pub use async_trait::async_trait;
pub use kubesched_model as model;

/// The API version of KubeSchedulerConfiguration and plugin args.
pub const CONFIG_API_VERSION: &str = "kubescheduler.config.k8s.io/v1";

/// A plugin could not be built or a profile could not be assembled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PluginError(pub String);

#[doc(hidden)]
pub mod __private {
    pub use crate::probe;
    #[cfg(all(feature = "inventory", not(feature = "linkme")))]
    pub use inventory;
    #[cfg(feature = "linkme")]
    pub use linkme;
}
