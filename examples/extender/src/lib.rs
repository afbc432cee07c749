//! An example scheduler extender, served over HTTP with upstream's extender JSON:
//!
//! * `POST /filter`: nodes labelled `example.com/maintenance: "true"` are refused for good
//!   (`FailedAndUnresolvableNodes`: preemption cannot help there).
//! * `POST /prioritize`: nodes labelled `example.com/cost: "<0..10>"` score `10 - cost`
//!   (cheap nodes first); unlabelled nodes score 0.
//!
//! It reads node labels from the nodes the scheduler sends, so it is configured without
//! `nodeCacheCapable`. It owns no scheduling state and never talks to the API server.

use axum::Json;
use axum::Router;
use axum::routing::post;
use k8s_openapi::api::core::v1 as api;
use kubesched_scheduler::extender::wire::{
    ExtenderArgs, ExtenderFilterResult, FilteredNodeList, HostPriority, HostPriorityList, NodeRef,
    NodeRefMeta,
};

/// Nodes with this label set to `"true"` take no new pods.
pub const MAINTENANCE_LABEL: &str = "example.com/maintenance";
/// A node's cost, 0 (cheapest) to 10.
pub const COST_LABEL: &str = "example.com/cost";
/// Why a node in maintenance is refused.
pub const MAINTENANCE_REASON: &str = "node is in maintenance";

fn label<'a>(node: &'a api::Node, key: &str) -> Option<&'a str> {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

fn name(node: &api::Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

/// The filter verb.
pub fn filter(args: &ExtenderArgs) -> ExtenderFilterResult {
    let nodes = args
        .nodes
        .as_ref()
        .map(|l| l.items.as_slice())
        .unwrap_or_default();
    let mut passed = Vec::new();
    let mut refused = std::collections::BTreeMap::new();
    for node in nodes {
        if label(node, MAINTENANCE_LABEL) == Some("true") {
            refused.insert(name(node), MAINTENANCE_REASON.to_string());
        } else {
            passed.push(NodeRef {
                metadata: NodeRefMeta { name: name(node) },
            });
        }
    }
    ExtenderFilterResult {
        nodes: Some(FilteredNodeList { items: passed }),
        failed_and_unresolvable_nodes: Some(refused),
        ..Default::default()
    }
}

/// The prioritize verb.
pub fn prioritize(args: &ExtenderArgs) -> HostPriorityList {
    let nodes = args
        .nodes
        .as_ref()
        .map(|l| l.items.as_slice())
        .unwrap_or_default();
    nodes
        .iter()
        .map(|node| {
            let cost = label(node, COST_LABEL)
                .and_then(|c| c.parse::<i64>().ok())
                .map(|c| c.clamp(0, 10));
            HostPriority {
                host: name(node),
                score: cost.map_or(0, |c| 10 - c),
            }
        })
        .collect()
}

/// The extender's routes: `POST /filter` and `POST /prioritize`.
pub fn router() -> Router {
    Router::new()
        .route(
            "/filter",
            post(|Json(args): Json<ExtenderArgs>| async move { Json(filter(&args)) }),
        )
        .route(
            "/prioritize",
            post(|Json(args): Json<ExtenderArgs>| async move { Json(prioritize(&args)) }),
        )
}
