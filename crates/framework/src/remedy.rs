//! What would make a Filter plugin accept a node it rejected: a typed shortfall computed by
//! the plugin from the same state its verdict came from, for `--explain` and
//! `kubesched explain` only.
//!
//! The scheduler asks for remedies after an explained attempt's verdicts are known, through
//! [`FilterPlugin::remedies`](crate::FilterPlugin::remedies) (default: none known). Normal
//! scheduling never calls it, so Filter's per-node path pays nothing.

use std::fmt;

use serde::Serialize;

/// One thing that would change a plugin's rejection of one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Remedy {
    /// The node lacks room for a resource request (NodeResourcesFit). `pods` counts pod
    /// slots. Amounts are in the resource's base unit: millicores for `cpu`, bytes for
    /// memory and ephemeral storage, counts otherwise.
    MoreResource {
        /// `cpu`, `memory`, `ephemeral-storage`, `pods`, or an extended resource name.
        resource: String,
        /// What the pod asks for.
        requested: i64,
        /// What is left on the node: allocatable minus what its pods request (may be < 0).
        available: i64,
        /// The node's allocatable amount.
        allocatable: i64,
        /// requested − available: how much more the node would need.
        short: i64,
    },
    /// The pod does not tolerate a taint of the node (TaintToleration): the first one.
    Toleration {
        /// The taint's key.
        key: String,
        /// The taint's value (may be empty).
        value: String,
        /// The taint's effect.
        effect: String,
    },
    /// The node is cordoned (`spec.unschedulable`) and the pod does not tolerate it.
    Uncordon,
    /// The pod names another node in `spec.nodeName`.
    NodeName {
        /// The node the pod asks for.
        wanted: String,
    },
    /// A required node label requirement fails on the node (NodeAffinity).
    NodeLabel {
        /// Where the requirement comes from: `nodeSelector`, `nodeAffinity term N`, or
        /// `addedAffinity` (the plugin's args).
        source: String,
        /// The requirement, e.g. `disktype In [ssd]`.
        requirement: String,
        /// The node's value of the label, null when the node has no such label.
        node_value: Option<String>,
    },
    /// A host port the pod wants is taken on the node (NodePorts).
    HostPort {
        /// The protocol.
        protocol: String,
        /// The host IP (`0.0.0.0` for all).
        ip: String,
        /// The port.
        port: i32,
    },
    /// Placing the pod would break a spread constraint (PodTopologySpread).
    SpreadSkew {
        /// The constraint's topology key.
        topology_key: String,
        /// The node's value of it.
        value: String,
        /// The skew the domain would have with the pod.
        skew: i64,
        /// The constraint's maxSkew.
        max_skew: i32,
    },
    /// The node lacks a label that a constraint or term needs (PodTopologySpread,
    /// InterPodAffinity).
    MissingTopologyLabel {
        /// The topology key.
        topology_key: String,
    },
    /// No pod matching the pod's required affinity term runs in the node's domain
    /// (InterPodAffinity).
    PodAffinity {
        /// The term's topology key.
        topology_key: String,
        /// The node's value of it.
        value: String,
    },
    /// Pods matching the pod's required anti-affinity term run in the node's domain.
    PodAntiAffinity {
        /// The term's topology key.
        topology_key: String,
        /// The node's value of it.
        value: String,
        /// How many matching pods are there.
        matching_pods: i64,
    },
    /// An existing pod's required anti-affinity term rejects the pod in the node's domain.
    ExistingAntiAffinity {
        /// The existing term's topology key.
        topology_key: String,
        /// The node's value of it.
        value: String,
    },
}

impl Remedy {
    /// A resource shortfall; `available` is allocatable minus requested.
    pub fn more_resource(resource: &str, requested: i64, used: i64, allocatable: i64) -> Self {
        let available = allocatable - used;
        Self::MoreResource {
            resource: resource.to_string(),
            requested,
            available,
            allocatable,
            short: requested - available,
        }
    }
}

/// Formats a resource amount the way people write requests: cpu in millicores (`1500m`),
/// memory and storage in binary units (`512Mi`, `25.5Gi`), anything else as a count.
fn amount(resource: &str, value: i64) -> String {
    match resource {
        "cpu" => format!("{value}m"),
        "memory" | "ephemeral-storage" | "storage" => bytes(value),
        _ if resource.starts_with("hugepages-") => bytes(value),
        _ => value.to_string(),
    }
}

fn bytes(value: i64) -> String {
    const UNITS: [(&str, i64); 4] = [
        ("Ti", 1 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ];
    let Some((suffix, size)) = UNITS.into_iter().find(|(_, size)| value.abs() >= *size) else {
        return value.to_string();
    };
    if value % size == 0 {
        return format!("{}{suffix}", value / size);
    }
    // Up to two decimals, trailing zeros dropped: 25.5Gi, 1.25Mi.
    let text = format!("{:.2}", value as f64 / size as f64);
    format!(
        "{}{suffix}",
        text.trim_end_matches('0').trim_end_matches('.')
    )
}

impl fmt::Display for Remedy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MoreResource {
                resource,
                available,
                allocatable,
                short,
                ..
            } if resource == "pods" => write!(
                f,
                "needs {short} more pod slot{} ({} of {allocatable} in use)",
                if *short == 1 { "" } else { "s" },
                allocatable - available,
            ),
            Self::MoreResource {
                resource,
                requested,
                available,
                allocatable,
                short,
            } => write!(
                f,
                "needs {} more {resource} (requests {}, {} free of {})",
                amount(resource, *short),
                amount(resource, *requested),
                amount(resource, (*available).max(0)),
                amount(resource, *allocatable),
            ),
            Self::Toleration { key, value, effect } => {
                if value.is_empty() {
                    write!(f, "add a toleration for {key}:{effect}")
                } else {
                    write!(f, "add a toleration for {key}={value}:{effect}")
                }
            }
            Self::Uncordon => f.write_str("node is cordoned: uncordon it"),
            Self::NodeName { wanted } => {
                write!(f, "pod is pinned to node {wanted} by spec.nodeName")
            }
            Self::NodeLabel {
                source,
                requirement,
                node_value,
            } => match node_value {
                Some(v) => write!(f, "{source} needs {requirement}; node has {v:?}"),
                None => write!(f, "{source} needs {requirement}; node has no such label"),
            },
            Self::HostPort { protocol, ip, port } => {
                write!(f, "host port {protocol}/{ip}:{port} is already in use")
            }
            Self::SpreadSkew {
                topology_key,
                value,
                skew,
                max_skew,
            } => write!(
                f,
                "{topology_key}={value} spread skew would be {skew} > maxSkew {max_skew}"
            ),
            Self::MissingTopologyLabel { topology_key } => {
                write!(f, "node has no {topology_key} label")
            }
            Self::PodAffinity {
                topology_key,
                value,
            } => write!(
                f,
                "no pod matching the required pod affinity runs in {topology_key}={value}"
            ),
            Self::PodAntiAffinity {
                topology_key,
                value,
                matching_pods,
            } => write!(
                f,
                "{matching_pods} pod(s) matching the required pod anti-affinity run in {topology_key}={value}"
            ),
            Self::ExistingAntiAffinity {
                topology_key,
                value,
            } => write!(
                f,
                "an existing pod's required anti-affinity forbids {topology_key}={value}"
            ),
        }
    }
}

/// A remedy as `--explain` shows it: the plugin it comes from, its words and its fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeRemedy {
    /// The Filter plugin that rejected the node.
    pub plugin: String,
    /// The remedy in words.
    pub text: String,
    /// The typed shortfall.
    #[serde(flatten)]
    pub remedy: Remedy,
}

impl NodeRemedy {
    /// A plugin's remedy, with its words.
    pub fn new(plugin: &str, remedy: Remedy) -> Self {
        Self {
            plugin: plugin.to_string(),
            text: remedy.to_string(),
            remedy,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_amounts_read_like_requests() {
        let cpu = Remedy::more_resource("cpu", 2500, 3000, 4000);
        assert_eq!(
            cpu.to_string(),
            "needs 1500m more cpu (requests 2500m, 1000m free of 4000m)"
        );
        let mem = Remedy::more_resource("memory", 3 << 30, 6 << 30, 8 << 30);
        assert_eq!(
            mem.to_string(),
            "needs 1Gi more memory (requests 3Gi, 2Gi free of 8Gi)"
        );
        let whole = Remedy::more_resource("example.com/gpu", 4, 0, 2);
        assert_eq!(
            whole.to_string(),
            "needs 2 more example.com/gpu (requests 4, 2 free of 2)"
        );
        let pods = Remedy::more_resource("pods", 1, 110, 110);
        assert_eq!(
            pods.to_string(),
            "needs 1 more pod slot (110 of 110 in use)"
        );
        assert_eq!(bytes(1536), "1.5Ki");
        assert_eq!(bytes(100), "100");
        assert_eq!(bytes(26112 << 20), "25.5Gi");
        assert_eq!(bytes(1_500_000_000), "1.4Gi");
    }

    #[test]
    fn serializes_flat_with_kind_and_text() {
        let r = NodeRemedy::new(
            "TaintToleration",
            Remedy::Toleration {
                key: "node-role/gpu".into(),
                value: String::new(),
                effect: "NoSchedule".into(),
            },
        );
        assert_eq!(r.text, "add a toleration for node-role/gpu:NoSchedule");
        let json = serde_json::to_value(&r).expect("serializes");
        assert_eq!(json["kind"], "toleration");
        assert_eq!(json["plugin"], "TaintToleration");
        assert_eq!(json["key"], "node-role/gpu");
    }
}
