//! Workload files: ordered operations that build large synthetic clusters without big
//! manifest files, in the spirit of upstream's scheduler_perf.
//!
//! ```yaml
//! kind: Workload
//! name: SchedulingBasic/500Nodes
//! ops:
//! - createNodes: {count: 500, template: {metadata: {name: node}, status: {allocatable: {cpu: "4", memory: 32Gi, pods: "110"}}}}
//! - createPods: {count: 1000, namespace: init, template: {...}}
//! - createPods: {count: 10000, namespace: measured, template: {...}, measure: true}
//! - barrier: {}
//! - expect: {scheduled: 11000}
//! ```

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as api;
use serde::Deserialize;

/// A workload file.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Workload {
    /// `Workload`.
    pub kind: String,
    /// Free-form version string.
    #[serde(default)]
    pub api_version: Option<String>,
    /// The workload's name (benchmarks use `Name/500Nodes`).
    pub name: String,
    /// What it exercises.
    #[serde(default)]
    pub description: Option<String>,
    /// The operations, run in order.
    pub ops: Vec<Op>,
}

/// One operation.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Op {
    /// Creates `count` nodes from a template.
    CreateNodes(CreateNodes),
    /// Creates `count` pods from a template.
    CreatePods(CreatePods),
    /// Creates arbitrary objects (namespaces, services, priority classes...).
    CreateObjects(Vec<serde_json::Value>),
    /// Deletes pods.
    DeletePods(DeletePods),
    /// Moves the virtual clock (backoff and unschedulable flushes run on it).
    AdvanceClock(AdvanceClock),
    /// Runs the scheduler until nothing is left to try.
    Barrier(Barrier),
    /// Checks counts so far; a mismatch fails the run.
    Expect(Expect),
}

/// `createNodes`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateNodes {
    /// How many.
    pub count: usize,
    /// A Node manifest; its name is the prefix (`node` by default), `-<i>` is appended.
    #[serde(default)]
    pub template: Option<serde_json::Value>,
    /// Zones assigned round-robin as `topology.kubernetes.io/zone`.
    #[serde(default)]
    pub zones: Vec<String>,
    /// Extra labels whose values cycle through the given list, by node index.
    #[serde(default)]
    pub cycle_labels: BTreeMap<String, Vec<String>>,
}

/// `createPods`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreatePods {
    /// How many.
    pub count: usize,
    /// Namespace (default `default`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// A Pod manifest; its name is the prefix (`pod` by default), `-<i>` is appended.
    #[serde(default)]
    pub template: Option<serde_json::Value>,
    /// Whether these pods count in the measured phase (benchmarks).
    #[serde(default)]
    pub measure: bool,
    /// Schedule after every this many pods (0: only at the next barrier or the end).
    #[serde(default)]
    pub schedule_every: usize,
}

/// `deletePods`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeletePods {
    /// Namespace of the pods to delete.
    pub namespace: String,
    /// Only pods with all these labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// At most this many (all when absent), oldest names first.
    #[serde(default)]
    pub count: Option<usize>,
}

/// `advanceClock`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdvanceClock {
    /// Seconds.
    pub seconds: u64,
}

/// `barrier` (no fields).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Barrier {}

/// `expect`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    /// Scheduled pods so far.
    #[serde(default)]
    pub scheduled: Option<usize>,
    /// Unschedulable pods so far.
    #[serde(default)]
    pub unschedulable: Option<usize>,
}

/// A workload file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The file could not be read.
    #[error("{file}: cannot read: {source}")]
    Io {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid workload.
    #[error("{file}: {field}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// Where.
        field: String,
        /// What.
        message: String,
    },
}

impl Workload {
    /// Reads and checks a workload file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, WorkloadError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| WorkloadError::Io {
            file: file.clone(),
            source,
        })?;
        Self::from_str(&text, &file)
    }

    /// Parses and checks workload text.
    pub fn from_str(text: &str, file: &str) -> Result<Self, WorkloadError> {
        let invalid = |field: String, message: String| WorkloadError::Invalid {
            file: file.to_string(),
            field,
            message,
        };
        let value: serde_json::Value = serde_saphyr::from_str(text)
            .map_err(|e| invalid("(document)".into(), format!("invalid YAML: {e}")))?;
        let w: Workload = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            invalid(path, e.into_inner().to_string())
        })?;
        if w.kind != "Workload" {
            return Err(invalid(
                "kind".into(),
                format!("expected Workload, got {:?}", w.kind),
            ));
        }
        for (i, op) in w.ops.iter().enumerate() {
            match op {
                Op::CreateNodes(c) => {
                    node_template(c.template.as_ref()).map_err(|m| {
                        invalid(
                            format!("ops[{i}].createNodes.template{m}"),
                            "invalid Node".into(),
                        )
                    })?;
                }
                Op::CreatePods(c) => {
                    pod_template(c.template.as_ref()).map_err(|m| {
                        invalid(
                            format!("ops[{i}].createPods.template{m}"),
                            "invalid Pod".into(),
                        )
                    })?;
                }
                _ => {}
            }
        }
        Ok(w)
    }
}

fn decode_template<T: serde::de::DeserializeOwned + Default>(
    v: Option<&serde_json::Value>,
) -> Result<T, String> {
    match v {
        None => Ok(T::default()),
        Some(v) => serde_path_to_error::deserialize(v.clone()).map_err(|e| {
            let path = e.path().to_string();
            format!(".{path}: {}", e.into_inner())
        }),
    }
}

/// The typed node template.
pub fn node_template(v: Option<&serde_json::Value>) -> Result<api::Node, String> {
    decode_template(v)
}

/// The typed pod template.
pub fn pod_template(v: Option<&serde_json::Value>) -> Result<api::Pod, String> {
    decode_template(v)
}
