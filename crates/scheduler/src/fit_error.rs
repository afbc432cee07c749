//! Why a pod fits nowhere, and upstream's FailedScheduling message built from it.

use std::collections::{BTreeMap, BTreeSet};

use kubesched_framework::{NodeToStatus, Status};

/// The message when the cluster has no node at all.
pub const NO_NODES_AVAILABLE: &str = "no nodes available to schedule pods";

/// What each node's Filter said, and which plugins rejected the pod.
#[derive(Debug, Clone, Default)]
pub struct Diagnosis {
    /// The rejecting status of each node that was evaluated (and the status of absent ones).
    pub node_to_status: NodeToStatus,
    /// Plugins that rejected the pod somewhere.
    pub unschedulable_plugins: BTreeSet<String>,
    /// Plugins that answered Pending somewhere.
    pub pending_plugins: BTreeSet<String>,
    /// PreFilter's message when PreFilter rejected the pod.
    pub pre_filter_msg: String,
    /// PostFilter's message, when it ran.
    pub post_filter_msg: String,
}

impl Diagnosis {
    /// Records which plugin a rejecting status came from.
    pub fn add_plugin_status(&mut self, status: &Status) {
        let Some(plugin) = status.plugin() else {
            return;
        };
        match status.code() {
            // Checked first: most rejections repeat a plugin already recorded.
            kubesched_framework::Code::Pending if !self.pending_plugins.contains(plugin) => {
                self.pending_plugins.insert(plugin.to_string());
            }
            kubesched_framework::Code::Pending => {}
            c if c != kubesched_framework::Code::Success
                && !self.unschedulable_plugins.contains(plugin) =>
            {
                self.unschedulable_plugins.insert(plugin.to_string());
            }
            _ => {}
        }
    }
}

/// No node fits the pod.
#[derive(Debug, Clone)]
pub struct FitError {
    /// All nodes in the snapshot.
    pub num_all_nodes: usize,
    /// Why.
    pub diagnosis: Diagnosis,
}

impl FitError {
    /// Upstream's message: `0/N nodes are available: <counts>.` with the PreFilter message
    /// in place of the counts when PreFilter rejected, then a space and the PostFilter
    /// message unchanged (no period added after it).
    pub fn message(&self) -> String {
        let mut msg = format!("0/{} nodes are available:", self.num_all_nodes);
        let d = &self.diagnosis;
        if !d.pre_filter_msg.is_empty() {
            msg.push_str(&format!(" {}.", d.pre_filter_msg));
        } else {
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            for (status, nodes) in d.node_to_status.counted() {
                for r in status.reasons() {
                    *counts.entry(r.as_str()).or_insert(0) += nodes;
                }
            }
            let explicit = d.node_to_status.len();
            if explicit < self.num_all_nodes
                && let Some(absent) = &d.node_to_status.absent
            {
                for r in absent.reasons() {
                    *counts.entry(r.as_str()).or_insert(0) += self.num_all_nodes - explicit;
                }
            }
            let mut parts: Vec<String> = counts
                .into_iter()
                .map(|(reason, n)| format!("{n} {reason}"))
                .collect();
            // Sorted as strings, count first, exactly as upstream sorts them.
            parts.sort();
            if !parts.is_empty() {
                msg.push_str(&format!(" {}.", parts.join(", ")));
            }
        }
        // The PostFilter message goes in as it is: DefaultPreemption's already ends with
        // its own `0/N nodes are available: ….`, so v1.34 adds no second period.
        if !d.post_filter_msg.is_empty() {
            msg.push(' ');
            msg.push_str(&d.post_filter_msg);
        }
        msg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(statuses: &[(&str, Status)]) -> Diagnosis {
        let mut d = Diagnosis::default();
        for (n, s) in statuses {
            d.node_to_status.set(n, s.clone());
        }
        d
    }

    #[test]
    fn counts_reasons_sorted_as_strings() {
        let d = with(&[
            ("a", Status::unschedulable("Insufficient cpu")),
            ("b", Status::unschedulable("Insufficient cpu")),
            (
                "c",
                Status::new(
                    kubesched_framework::Code::Unschedulable,
                    ["Insufficient cpu", "Insufficient memory"],
                ),
            ),
            (
                "d",
                Status::unresolvable("node(s) had untolerated taint(s)"),
            ),
            (
                "e",
                Status::unresolvable("node(s) had untolerated taint(s)"),
            ),
        ]);
        let e = FitError {
            num_all_nodes: 5,
            diagnosis: d,
        };
        assert_eq!(
            e.message(),
            "0/5 nodes are available: 1 Insufficient memory, 2 node(s) had untolerated taint(s), 3 Insufficient cpu."
        );
    }

    #[test]
    fn absent_nodes_and_post_filter() {
        let mut d = with(&[("a", Status::unschedulable("Insufficient cpu"))]);
        d.node_to_status.absent = Some(Status::unresolvable(
            "node(s) didn't satisfy plugin(s) [NodeAffinity]",
        ));
        d.post_filter_msg =
            "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
                .into();
        let e = FitError {
            num_all_nodes: 3,
            diagnosis: d,
        };
        assert_eq!(
            e.message(),
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        );
    }

    #[test]
    fn post_filter_message_without_period_gets_none() {
        // Several PostFilter plugins are joined with `, `; only the text they gave is used.
        let mut d = with(&[("a", Status::unschedulable("Insufficient cpu"))]);
        d.post_filter_msg =
            "no new claims to deallocate, preemption: not eligible due to preemptionPolicy=Never."
                .into();
        let e = FitError {
            num_all_nodes: 1,
            diagnosis: d,
        };
        assert_eq!(
            e.message(),
            "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: not eligible due to preemptionPolicy=Never."
        );
    }

    #[test]
    fn pre_filter_message_replaces_counts() {
        let mut d = Diagnosis {
            pre_filter_msg: "node(s) didn't satisfy plugin NodeAffinity".into(),
            ..Default::default()
        };
        d.node_to_status.absent = Some(Status::unresolvable("x"));
        let e = FitError {
            num_all_nodes: 2,
            diagnosis: d,
        };
        assert_eq!(
            e.message(),
            "0/2 nodes are available: node(s) didn't satisfy plugin NodeAffinity."
        );
    }
}
