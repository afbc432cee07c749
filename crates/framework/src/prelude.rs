//! What a plugin crate usually needs, in one import: `use kubesched_framework::prelude::*;`.
//!
//! The extension points' traits, [`Status`] and [`Code`], [`CycleState`], the [`Handle`],
//! the event vocabulary of enqueue extensions and queueing hints, the model's
//! [`PodInfo`] and [`NodeInfo`], plugin args and the score bounds. Anything more specific
//! (object stores, kinds, explain records) is imported by name from the crate root.

pub use crate::events::{
    ActionType, ClusterEvent, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
};
pub use crate::model::{NodeInfo, PodInfo};
pub use crate::registry::PluginArgs;
pub use crate::{
    BindPlugin, Code, CycleState, EnqueueExtensions, FilterPlugin, Handle, MAX_NODE_SCORE,
    MIN_NODE_SCORE, PermitPlugin, PluginError, PostBindPlugin, PostFilterPlugin, PostFilterResult,
    PreBindPlugin, PreEnqueuePlugin, PreFilterExtensions, PreFilterPlugin, PreFilterResult,
    PreScorePlugin, QueueSortPlugin, QueuedPodInfo, ReservePlugin, ScorePlugin, StateData, Status,
    async_trait,
};
