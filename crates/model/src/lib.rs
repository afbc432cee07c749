//! The compact scheduling model: what kubesched reads of pods and nodes, computed once per
//! object update from the API types.
//!
//! It owns quantity parsing, resource arithmetic and pod request rules, compiled label and
//! node selectors, taints and tolerations, host ports, storage classes of claims and
//! volumes, [`PodInfo`] and [`NodeInfo`].
//! It must not know about plugins, caches or the scheduling loop, and it never panics on
//! API input: a malformed object gives a [`ModelError`] naming the object and the field.
//!
//! **Architecture invariant:** plugins read these types in Filter and Score, never the
//! k8s-openapi objects they were built from.

mod node;
mod pod;
mod pod_object;
mod ports;
mod quantity;
pub mod resource;
pub mod selector;
pub mod storage;
mod taint;
pub mod topology;

pub use node::{
    ImageStateSummary, ImageStates, Kept, Node, NodeInfo, NodeNumbers, next_generation,
};
pub use pod::{
    AffinityTerm, DEFAULT_SCHEDULER_NAME, InclusionPolicy, PodInfo, TopologySpreadConstraint,
    WeightedAffinityTerm, WhenUnsatisfiable, slim_pod,
};
pub use pod_object::PodObject;
pub use ports::{DEFAULT_BIND_ALL_HOST_IP, HostPort, HostPortInfo, any_conflict};
pub use quantity::{Quantity, QuantityError};
pub use resource::Resource;
pub use selector::{
    FlatLabels, LabelLookup, LabelSelector, Labels, NodeSelector, NodeSelectorTerm,
    RequiredNodeAffinity,
};
pub use taint::{
    Taint, TaintEffect, Toleration, TolerationOperator, find_untolerated, find_untolerated_with,
    tolerated, tolerated_with,
};

/// Re-export of the API types the model is built from, so dependents name one version.
pub use k8s_openapi;

/// A malformed API object: which object, which field, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{field}: {message}", object.as_ref().map(|o| format!("{o}: ")).unwrap_or_default())]
pub struct ModelError {
    /// `Kind namespace/name`, when known.
    pub object: Option<String>,
    /// The field path, e.g. `spec.containers[0].resources[cpu]`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl ModelError {
    /// An error at a field, not yet tied to an object.
    pub fn invalid(field: &str, message: &str) -> Self {
        Self {
            object: None,
            field: field.to_string(),
            message: message.to_string(),
        }
    }

    /// Ties the error to an object, keeping the first object named.
    pub fn in_object(mut self, object: &str) -> Self {
        if self.object.is_none() {
            self.object = Some(object.to_string());
        }
        self
    }
}
