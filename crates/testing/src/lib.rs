//! The kit every plugin test uses, in-tree and out-of-tree: fluent builders for pods, nodes
//! and storage objects (in the spirit of upstream's `MakePod`/`MakeNode` wrappers) and a
//! harness that runs one plugin's extension points for a pod over a set of nodes and returns
//! a serialisable result for insta snapshots, and one check of a plugin's args codec that
//! every plugin's tests share.
//!
//! It must stay a test helper: nothing in the scheduler depends on it, and builders panic
//! on inputs a test author got wrong (that is what a test wants).

mod args;
mod builders;
pub use args::{assert_args_codec, assert_args_round_trip};
pub use builders::{node_term, selector};
mod churn;
mod harness;
mod storage;

pub use churn::Churn;

pub use builders::{NodeBuilder, PodBuilder, node_info, node_infos};
pub use harness::{NodeOutcome, PluginHarness, PluginRun, StatusView};
pub use storage::{
    BIND_COMPLETED, PvBuilder, PvcBuilder, StorageClassBuilder, csi_driver, csi_node,
    csi_storage_capacity, storage_class, volume, volume_attachment,
};
