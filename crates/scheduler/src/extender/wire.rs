//! The JSON an extender speaks: upstream's `k8s.io/kube-scheduler/extender/v1` types with
//! Go's field names (`Pod`, `NodeNames`, `FailedNodes`, ...), as `encoding/json` writes
//! them: nil pointers, maps and slices as `null`.
//!
//! Requests are written exactly so. Answers are read the way Go reads them: field names
//! match case-insensitively, unknown fields are ignored, `null` is an empty value.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as api;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `ExtenderArgs`: what filter and prioritize calls send.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExtenderArgs {
    /// The pod being scheduled.
    #[serde(rename = "Pod")]
    pub pod: Option<api::Pod>,
    /// The candidate nodes, whole; set only when the extender is not `nodeCacheCapable`.
    #[serde(rename = "Nodes")]
    pub nodes: Option<NodeList>,
    /// The candidate node names; set only when the extender is `nodeCacheCapable`.
    #[serde(rename = "NodeNames")]
    pub node_names: Option<Vec<String>>,
}

/// A `v1.NodeList` as Go writes one that was built in memory: no kind, empty metadata.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeList {
    /// Always empty.
    #[serde(default)]
    pub metadata: ListMeta,
    /// The nodes.
    #[serde(default, deserialize_with = "null_as_default")]
    pub items: Vec<api::Node>,
}

/// Empty list metadata (`{}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListMeta {}

/// `ExtenderFilterResult`: the answer to a filter call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExtenderFilterResult {
    /// The nodes that pass, whole (extenders that are not `nodeCacheCapable`).
    #[serde(rename = "Nodes")]
    pub nodes: Option<FilteredNodeList>,
    /// The names of the nodes that pass (`nodeCacheCapable` extenders).
    #[serde(rename = "NodeNames")]
    pub node_names: Option<Vec<String>>,
    /// Rejected nodes, with why; preemption may help them.
    #[serde(rename = "FailedNodes")]
    pub failed_nodes: Option<BTreeMap<String, String>>,
    /// Rejected nodes that preemption cannot help; they win over `FailedNodes`.
    #[serde(rename = "FailedAndUnresolvableNodes")]
    pub failed_and_unresolvable_nodes: Option<BTreeMap<String, String>>,
    /// Non-empty: the call failed with this message.
    #[serde(rename = "Error", default)]
    pub error: String,
}

/// The node list of a filter answer. Only the names are read: the scheduler keeps its own
/// view of each node, so an extender cannot change a node by answering with it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FilteredNodeList {
    /// The nodes.
    #[serde(default, deserialize_with = "null_as_default")]
    pub items: Vec<NodeRef>,
}

/// A node in a filter answer, reduced to its name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRef {
    /// The node's metadata.
    #[serde(default)]
    pub metadata: NodeRefMeta,
}

/// The name of a node in a filter answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRefMeta {
    /// The node's name.
    #[serde(default)]
    pub name: String,
}

/// `HostPriority`: one node's score.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostPriority {
    /// The node.
    #[serde(rename = "Host", default)]
    pub host: String,
    /// The score, 0..=10 (`MaxExtenderPriority`).
    #[serde(rename = "Score", default)]
    pub score: i64,
}

/// `HostPriorityList`: the answer to a prioritize call.
pub type HostPriorityList = Vec<HostPriority>;

/// `ExtenderPreemptionArgs`: what a preempt call sends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExtenderPreemptionArgs {
    /// The preemptor.
    #[serde(rename = "Pod")]
    pub pod: Option<api::Pod>,
    /// Candidate nodes and their victims, whole; set when not `nodeCacheCapable`.
    #[serde(rename = "NodeNameToVictims")]
    pub node_name_to_victims: Option<BTreeMap<String, WireVictims>>,
    /// Candidate nodes and their victims' UIDs; set when `nodeCacheCapable`.
    #[serde(rename = "NodeNameToMetaVictims")]
    pub node_name_to_meta_victims: Option<BTreeMap<String, MetaVictims>>,
}

/// `Victims`: the pods to evict on a node, whole.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WireVictims {
    /// The victims.
    #[serde(rename = "Pods")]
    pub pods: Option<Vec<api::Pod>>,
    /// Evictions that violate a PodDisruptionBudget.
    #[serde(rename = "NumPDBViolations", default)]
    pub num_pdb_violations: i64,
}

/// `MetaVictims`: the pods to evict on a node, by UID.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaVictims {
    /// The victims.
    #[serde(rename = "Pods")]
    pub pods: Option<Vec<MetaPod>>,
    /// Evictions that violate a PodDisruptionBudget.
    #[serde(rename = "NumPDBViolations", default)]
    pub num_pdb_violations: i64,
}

/// `MetaPod`: a pod named by UID.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaPod {
    /// The pod's UID.
    #[serde(rename = "UID", default)]
    pub uid: String,
}

/// `ExtenderPreemptionResult`: the answer to a preempt call. Extenders always answer by
/// UID, whatever they were sent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtenderPreemptionResult {
    /// The nodes the extender accepts, with their victims.
    #[serde(rename = "NodeNameToMetaVictims")]
    pub node_name_to_meta_victims: Option<BTreeMap<String, Option<MetaVictims>>>,
}

/// `ExtenderBindingArgs`: what a bind call sends.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtenderBindingArgs {
    /// The pod's name.
    #[serde(rename = "PodName", default)]
    pub pod_name: String,
    /// The pod's namespace.
    #[serde(rename = "PodNamespace", default)]
    pub pod_namespace: String,
    /// The pod's UID.
    #[serde(rename = "PodUID", default)]
    pub pod_uid: String,
    /// The node chosen by the scheduler.
    #[serde(rename = "Node", default)]
    pub node: String,
}

/// `ExtenderBindingResult`: the answer to a bind call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtenderBindingResult {
    /// Non-empty: binding failed with this message.
    #[serde(rename = "Error", default)]
    pub error: String,
}

fn null_as_default<'de, D: serde::Deserializer<'de>, T: Deserialize<'de> + Default>(
    d: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Renames the keys of `obj` that match one of `names` case-insensitively to that name, as
/// Go's decoder matches fields (an exact match wins).
fn canonical_keys(value: &mut Value, names: &[&str]) {
    let Value::Object(obj) = value else {
        return;
    };
    for name in names {
        if obj.contains_key(*name) {
            continue;
        }
        let found = obj
            .keys()
            .find(|k| k.to_lowercase() == name.to_lowercase())
            .cloned();
        if let Some(k) = found
            && let Some(v) = obj.remove(&k)
        {
            obj.insert((*name).to_string(), v);
        }
    }
}

fn each_value(value: &mut Value, f: impl Fn(&mut Value)) {
    match value {
        Value::Object(obj) => obj.values_mut().for_each(f),
        Value::Array(items) => items.iter_mut().for_each(f),
        _ => {}
    }
}

fn field<'a>(value: &'a mut Value, name: &str) -> Option<&'a mut Value> {
    value.as_object_mut().and_then(|o| o.get_mut(name))
}

/// Answers the scheduler reads, with the key normalisation their shape needs.
pub trait Answer: serde::de::DeserializeOwned {
    /// Brings Go-style case-insensitive field names to the canonical ones.
    fn canonicalize(value: &mut Value);
}

impl Answer for ExtenderFilterResult {
    fn canonicalize(value: &mut Value) {
        canonical_keys(
            value,
            &[
                "Nodes",
                "NodeNames",
                "FailedNodes",
                "FailedAndUnresolvableNodes",
                "Error",
            ],
        );
        if let Some(nodes) = field(value, "Nodes") {
            canonical_keys(nodes, &["items"]);
            if let Some(items) = field(nodes, "items") {
                each_value(items, |item| {
                    canonical_keys(item, &["metadata"]);
                    if let Some(meta) = field(item, "metadata") {
                        canonical_keys(meta, &["name"]);
                    }
                });
            }
        }
    }
}

impl Answer for HostPriorityList {
    fn canonicalize(value: &mut Value) {
        each_value(value, |v| canonical_keys(v, &["Host", "Score"]));
    }
}

impl Answer for ExtenderPreemptionResult {
    fn canonicalize(value: &mut Value) {
        canonical_keys(value, &["NodeNameToMetaVictims"]);
        if let Some(map) = field(value, "NodeNameToMetaVictims") {
            each_value(map, |victims| {
                canonical_keys(victims, &["Pods", "NumPDBViolations"]);
                if let Some(pods) = field(victims, "Pods") {
                    each_value(pods, |p| canonical_keys(p, &["UID"]));
                }
            });
        }
    }
}

impl Answer for ExtenderBindingResult {
    fn canonicalize(value: &mut Value) {
        canonical_keys(value, &["Error"]);
    }
}

/// Reads an answer the way Go's `json.Decoder` does (first JSON value of the body).
pub fn decode_answer<T: Answer>(body: &[u8]) -> Result<T, String> {
    let mut stream = serde_json::Deserializer::from_slice(body).into_iter::<Value>();
    let mut value = match stream.next() {
        Some(Ok(v)) => v,
        Some(Err(e)) => return Err(e.to_string()),
        None => return Err("EOF".to_string()),
    };
    T::canonicalize(&mut value);
    serde_json::from_value(value).map_err(|e| e.to_string())
}
