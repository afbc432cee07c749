//! Builders for API pods and nodes, and their scheduling views.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kubesched_model::{Node, NodeInfo, PodInfo};

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

fn string_map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A label selector with `matchLabels`.
pub fn selector(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(string_map(pairs)),
        ..Default::default()
    }
}

/// Builds a `v1.Pod`. Defaults: namespace `default`, UID = name, one container `c0`
/// only when requests, ports or images are added.
#[derive(Debug, Clone)]
pub struct PodBuilder {
    pod: api::Pod,
}

impl PodBuilder {
    /// A pod named `name` in namespace `default`.
    pub fn new(name: &str) -> Self {
        Self {
            pod: api::Pod {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    namespace: Some("default".into()),
                    uid: Some(name.into()),
                    ..Default::default()
                },
                spec: Some(api::PodSpec::default()),
                status: Some(api::PodStatus::default()),
            },
        }
    }

    fn spec(&mut self) -> &mut api::PodSpec {
        self.pod.spec.get_or_insert_with(Default::default)
    }

    fn affinity(&mut self) -> &mut api::Affinity {
        self.spec().affinity.get_or_insert_with(Default::default)
    }

    /// Sets the namespace (and keeps the UID unique by prefixing it).
    pub fn namespace(mut self, ns: &str) -> Self {
        self.pod.metadata.namespace = Some(ns.into());
        let name = self.pod.metadata.name.clone().unwrap_or_default();
        self.pod.metadata.uid = Some(format!("{ns}/{name}"));
        self
    }

    /// Sets the UID.
    pub fn uid(mut self, uid: &str) -> Self {
        self.pod.metadata.uid = Some(uid.into());
        self
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.pod
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(key.into(), value.into());
        self
    }

    /// Adds labels.
    pub fn labels(mut self, pairs: &[(&str, &str)]) -> Self {
        for (k, v) in pairs {
            self = self.label(k, v);
        }
        self
    }

    /// Adds an owner reference (controller).
    pub fn owner(mut self, kind: &str, name: &str) -> Self {
        self.pod
            .metadata
            .owner_references
            .get_or_insert_with(Default::default)
            .push(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: kind.into(),
                    name: name.into(),
                    uid: format!("{kind}-{name}"),
                    controller: Some(true),
                    ..Default::default()
                },
            );
        self
    }

    /// Sets `spec.priority`.
    pub fn priority(mut self, p: i32) -> Self {
        self.spec().priority = Some(p);
        self
    }

    /// Sets `spec.preemptionPolicy: Never`.
    pub fn preemption_never(mut self) -> Self {
        self.spec().preemption_policy = Some("Never".into());
        self
    }

    /// Sets `spec.nodeName` (a bound pod).
    pub fn node(mut self, node: &str) -> Self {
        self.spec().node_name = Some(node.into());
        self
    }

    /// Sets `status.nominatedNodeName`.
    pub fn nominated_node(mut self, node: &str) -> Self {
        self.pod
            .status
            .get_or_insert_with(Default::default)
            .nominated_node_name = Some(node.into());
        self
    }

    /// Sets `spec.schedulerName`.
    pub fn scheduler_name(mut self, name: &str) -> Self {
        self.spec().scheduler_name = Some(name.into());
        self
    }

    /// Adds a container with these requests, e.g. `&[("cpu", "100m"), ("memory", "1Gi")]`.
    pub fn container(mut self, requests: &[(&str, &str)]) -> Self {
        let n = self.spec().containers.len();
        self.spec().containers.push(api::Container {
            name: format!("c{n}"),
            resources: Some(api::ResourceRequirements {
                requests: Some(quantities(requests)),
                ..Default::default()
            }),
            ..Default::default()
        });
        self
    }

    /// Adds an init container with these requests (`sidecar`: restartPolicy Always).
    pub fn init_container(mut self, requests: &[(&str, &str)], sidecar: bool) -> Self {
        let inits = self
            .spec()
            .init_containers
            .get_or_insert_with(Default::default);
        let n = inits.len();
        inits.push(api::Container {
            name: format!("init{n}"),
            resources: Some(api::ResourceRequirements {
                requests: Some(quantities(requests)),
                ..Default::default()
            }),
            restart_policy: sidecar.then(|| "Always".to_string()),
            ..Default::default()
        });
        self
    }

    /// Sets `spec.overhead`.
    pub fn overhead(mut self, amounts: &[(&str, &str)]) -> Self {
        self.spec().overhead = Some(quantities(amounts));
        self
    }

    fn last_container(&mut self) -> &mut api::Container {
        if self.spec().containers.is_empty() {
            self.spec().containers.push(api::Container {
                name: "c0".into(),
                ..Default::default()
            });
        }
        self.spec()
            .containers
            .last_mut()
            .expect("a container exists")
    }

    /// Adds a host port to the last container (`protocol`/`ip` may be "").
    pub fn host_port(mut self, port: i32, protocol: &str, ip: &str) -> Self {
        self.last_container()
            .ports
            .get_or_insert_with(Default::default)
            .push(api::ContainerPort {
                container_port: port,
                host_port: Some(port),
                protocol: (!protocol.is_empty()).then(|| protocol.into()),
                host_ip: (!ip.is_empty()).then(|| ip.into()),
                ..Default::default()
            });
        self
    }

    /// Adds a container running `image`.
    pub fn image(mut self, image: &str) -> Self {
        let n = self.spec().containers.len();
        self.spec().containers.push(api::Container {
            name: format!("c{n}"),
            image: Some(image.into()),
            ..Default::default()
        });
        self
    }

    /// Adds `nodeSelector` pairs.
    pub fn node_selector(mut self, pairs: &[(&str, &str)]) -> Self {
        let ns = self
            .spec()
            .node_selector
            .get_or_insert_with(Default::default);
        ns.extend(string_map(pairs));
        self
    }

    /// Adds a required node affinity term (terms are ORed).
    pub fn required_node_term(mut self, term: api::NodeSelectorTerm) -> Self {
        let na = self
            .affinity()
            .node_affinity
            .get_or_insert_with(Default::default);
        na.required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Default::default)
            .node_selector_terms
            .push(term);
        self
    }

    /// Adds a required node affinity term of one expression `key op values`.
    pub fn node_affinity(self, key: &str, op: &str, values: &[&str]) -> Self {
        self.required_node_term(node_term(key, op, values))
    }

    /// Adds a preferred node affinity term.
    pub fn preferred_node_term(mut self, weight: i32, term: api::NodeSelectorTerm) -> Self {
        let na = self
            .affinity()
            .node_affinity
            .get_or_insert_with(Default::default);
        na.preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Default::default)
            .push(api::PreferredSchedulingTerm {
                weight,
                preference: term,
            });
        self
    }

    /// Adds a toleration (`op` is `Equal` or `Exists`; `effect` may be "").
    pub fn toleration(mut self, key: &str, op: &str, value: &str, effect: &str) -> Self {
        self.spec()
            .tolerations
            .get_or_insert_with(Default::default)
            .push(api::Toleration {
                key: (!key.is_empty()).then(|| key.into()),
                operator: Some(op.into()),
                value: (!value.is_empty()).then(|| value.into()),
                effect: (!effect.is_empty()).then(|| effect.into()),
                ..Default::default()
            });
        self
    }

    fn affinity_term(labels: &[(&str, &str)], topology_key: &str) -> api::PodAffinityTerm {
        api::PodAffinityTerm {
            label_selector: Some(selector(labels)),
            topology_key: topology_key.into(),
            ..Default::default()
        }
    }

    /// Adds a required pod affinity term to pods with `labels` in `topology_key`.
    pub fn pod_affinity(mut self, labels: &[(&str, &str)], topology_key: &str) -> Self {
        let term = Self::affinity_term(labels, topology_key);
        self.affinity()
            .pod_affinity
            .get_or_insert_with(Default::default)
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Default::default)
            .push(term);
        self
    }

    /// Adds a required pod anti-affinity term.
    pub fn pod_anti_affinity(mut self, labels: &[(&str, &str)], topology_key: &str) -> Self {
        let term = Self::affinity_term(labels, topology_key);
        self.affinity()
            .pod_anti_affinity
            .get_or_insert_with(Default::default)
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Default::default)
            .push(term);
        self
    }

    /// Adds a required pod affinity term given in full.
    pub fn pod_affinity_term(mut self, term: api::PodAffinityTerm) -> Self {
        self.affinity()
            .pod_affinity
            .get_or_insert_with(Default::default)
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Default::default)
            .push(term);
        self
    }

    /// Adds a required pod anti-affinity term given in full.
    pub fn pod_anti_affinity_term(mut self, term: api::PodAffinityTerm) -> Self {
        self.affinity()
            .pod_anti_affinity
            .get_or_insert_with(Default::default)
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Default::default)
            .push(term);
        self
    }

    /// Adds a preferred pod affinity term.
    pub fn preferred_pod_affinity(
        mut self,
        weight: i32,
        labels: &[(&str, &str)],
        topology_key: &str,
    ) -> Self {
        let term = Self::affinity_term(labels, topology_key);
        self.affinity()
            .pod_affinity
            .get_or_insert_with(Default::default)
            .preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Default::default)
            .push(api::WeightedPodAffinityTerm {
                weight,
                pod_affinity_term: term,
            });
        self
    }

    /// Adds a preferred pod anti-affinity term.
    pub fn preferred_pod_anti_affinity(
        mut self,
        weight: i32,
        labels: &[(&str, &str)],
        topology_key: &str,
    ) -> Self {
        let term = Self::affinity_term(labels, topology_key);
        self.affinity()
            .pod_anti_affinity
            .get_or_insert_with(Default::default)
            .preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Default::default)
            .push(api::WeightedPodAffinityTerm {
                weight,
                pod_affinity_term: term,
            });
        self
    }

    /// Adds a topology spread constraint over pods with `labels`.
    pub fn spread_constraint(
        mut self,
        max_skew: i32,
        topology_key: &str,
        when_unsatisfiable: &str,
        labels: &[(&str, &str)],
    ) -> Self {
        self.spec()
            .topology_spread_constraints
            .get_or_insert_with(Default::default)
            .push(api::TopologySpreadConstraint {
                max_skew,
                topology_key: topology_key.into(),
                when_unsatisfiable: when_unsatisfiable.into(),
                label_selector: Some(selector(labels)),
                ..Default::default()
            });
        self
    }

    /// Adds a topology spread constraint given in full.
    pub fn spread_constraint_full(mut self, c: api::TopologySpreadConstraint) -> Self {
        self.spec()
            .topology_spread_constraints
            .get_or_insert_with(Default::default)
            .push(c);
        self
    }

    /// Adds a scheduling gate.
    pub fn scheduling_gate(mut self, name: &str) -> Self {
        self.spec()
            .scheduling_gates
            .get_or_insert_with(Default::default)
            .push(api::PodSchedulingGate { name: name.into() });
        self
    }

    /// Joins the pod to a PodGroup (`spec.schedulingGroup.podGroupName`, GenericWorkload).
    pub fn pod_group(mut self, name: &str) -> Self {
        self.spec().scheduling_group = Some(api::PodSchedulingGroup {
            pod_group_name: Some(name.into()),
        });
        self
    }

    /// Mounts a PersistentVolumeClaim.
    pub fn pvc(mut self, claim: &str) -> Self {
        let n = self.spec().volumes.as_ref().map_or(0, Vec::len);
        self.spec()
            .volumes
            .get_or_insert_with(Default::default)
            .push(api::Volume {
                name: format!("v{n}"),
                persistent_volume_claim: Some(api::PersistentVolumeClaimVolumeSource {
                    claim_name: claim.into(),
                    read_only: None,
                }),
                ..Default::default()
            });
        self
    }

    /// Applies any change to the API object.
    pub fn with(mut self, f: impl FnOnce(&mut api::Pod)) -> Self {
        f(&mut self.pod);
        self
    }

    /// The API object.
    pub fn build(self) -> api::Pod {
        self.pod
    }

    /// The scheduling view. Panics when the pod is malformed (a test bug).
    pub fn info(self) -> Arc<PodInfo> {
        Arc::new(PodInfo::new(Arc::new(self.pod)).expect("test pod must be valid"))
    }
}

/// A node selector term with one expression.
pub fn node_term(key: &str, op: &str, values: &[&str]) -> api::NodeSelectorTerm {
    api::NodeSelectorTerm {
        match_expressions: Some(vec![api::NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }]),
        ..Default::default()
    }
}

/// Builds a `v1.Node`. Defaults: no labels, no capacity.
#[derive(Debug, Clone)]
pub struct NodeBuilder {
    node: api::Node,
}

impl NodeBuilder {
    /// A node named `name`, labelled `kubernetes.io/hostname=name`.
    pub fn new(name: &str) -> Self {
        Self {
            node: api::Node {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    uid: Some(format!("node-{name}")),
                    labels: Some(string_map(&[("kubernetes.io/hostname", name)])),
                    ..Default::default()
                },
                spec: Some(api::NodeSpec::default()),
                status: Some(api::NodeStatus::default()),
            },
        }
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.node
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(key.into(), value.into());
        self
    }

    /// Sets `topology.kubernetes.io/zone`.
    pub fn zone(self, zone: &str) -> Self {
        self.label("topology.kubernetes.io/zone", zone)
    }

    /// Sets capacity and allocatable, e.g. `&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")]`.
    pub fn capacity(mut self, amounts: &[(&str, &str)]) -> Self {
        let status = self.node.status.get_or_insert_with(Default::default);
        status.capacity = Some(quantities(amounts));
        status.allocatable = Some(quantities(amounts));
        self
    }

    /// Adds a taint (`effect`: NoSchedule, PreferNoSchedule or NoExecute).
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.node
            .spec
            .get_or_insert_with(Default::default)
            .taints
            .get_or_insert_with(Default::default)
            .push(api::Taint {
                key: key.into(),
                value: (!value.is_empty()).then(|| value.into()),
                effect: effect.into(),
                time_added: None,
            });
        self
    }

    /// Sets `spec.unschedulable`.
    pub fn unschedulable(mut self) -> Self {
        self.node
            .spec
            .get_or_insert_with(Default::default)
            .unschedulable = Some(true);
        self
    }

    /// Adds an image with its names and size in bytes.
    pub fn image(mut self, names: &[&str], size_bytes: i64) -> Self {
        self.node
            .status
            .get_or_insert_with(Default::default)
            .images
            .get_or_insert_with(Default::default)
            .push(api::ContainerImage {
                names: Some(names.iter().map(|n| n.to_string()).collect()),
                size_bytes: Some(size_bytes),
            });
        self
    }

    /// Applies any change to the API object.
    pub fn with(mut self, f: impl FnOnce(&mut api::Node)) -> Self {
        f(&mut self.node);
        self
    }

    /// The API object.
    pub fn build(self) -> api::Node {
        self.node
    }

    /// The compiled node. Panics when the node is malformed (a test bug).
    pub fn model(self) -> Arc<Node> {
        Arc::new(Node::new(Arc::new(self.node)).expect("test node must be valid"))
    }
}

/// A `NodeInfo` of a node with these pods on it.
pub fn node_info(node: NodeBuilder, pods: &[Arc<PodInfo>]) -> Arc<NodeInfo> {
    let mut info = NodeInfo::new(node.model());
    for p in pods {
        info.add_pod(p.clone());
    }
    Arc::new(info)
}

/// `NodeInfo`s of nodes, placing each pod on the node its `spec.nodeName` names.
pub fn node_infos(nodes: Vec<NodeBuilder>, pods: &[Arc<PodInfo>]) -> Vec<Arc<NodeInfo>> {
    let mut infos: Vec<NodeInfo> = nodes
        .into_iter()
        .map(|n| NodeInfo::new(n.model()))
        .collect();
    for p in pods {
        if let Some(info) = infos
            .iter_mut()
            .find(|i| Some(i.name()) == p.node_name.as_deref())
        {
            info.add_pod(p.clone());
        }
    }
    infos.into_iter().map(Arc::new).collect()
}
