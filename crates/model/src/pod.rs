//! `PodInfo`: everything the scheduler reads of a pod, computed once per pod update.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as api;

use crate::selector::{
    LabelSelector, Labels, NodeSelector, NodeSelectorTerm, RequiredNodeAffinity, Requirement,
    WeightedNodeSelectorTerm,
};
use crate::taint::Toleration;
use crate::{HostPort, ModelError, Resource, resource};

/// An inter-pod affinity term, compiled against the pod that declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AffinityTerm {
    /// Namespaces named in the term (the pod's own when neither these nor a selector is set).
    pub namespaces: Vec<String>,
    /// Namespaces picked by labels; nothing when the term has no namespace selector.
    pub namespace_selector: LabelSelector,
    /// Which pods the term is about.
    pub selector: LabelSelector,
    /// The node label that defines the topology domain.
    pub topology_key: String,
}

impl AffinityTerm {
    fn compile(
        owner: &api::Pod,
        term: &api::PodAffinityTerm,
        field: &str,
    ) -> Result<Self, ModelError> {
        let mut selector = LabelSelector::compile(
            term.label_selector.as_ref(),
            &format!("{field}.labelSelector"),
        )?;
        let labels = owner.metadata.labels.clone().unwrap_or_default();
        // matchLabelKeys / mismatchLabelKeys: merged into the selector with the owner's values,
        // as the API server does on create; manifests that never met one read the same.
        if term.label_selector.is_some() {
            for key in term.match_label_keys.iter().flatten() {
                if let Some(v) = labels.get(key) {
                    selector.push(Requirement::new(
                        key,
                        "In",
                        std::slice::from_ref(v),
                        false,
                        field,
                    )?);
                }
            }
            for key in term.mismatch_label_keys.iter().flatten() {
                if let Some(v) = labels.get(key) {
                    selector.push(Requirement::new(
                        key,
                        "NotIn",
                        std::slice::from_ref(v),
                        false,
                        field,
                    )?);
                }
            }
        }
        let mut namespaces = term.namespaces.clone().unwrap_or_default();
        let namespace_selector = LabelSelector::compile(
            term.namespace_selector.as_ref(),
            &format!("{field}.namespaceSelector"),
        )?;
        if namespaces.is_empty() && term.namespace_selector.is_none() {
            namespaces.push(owner.metadata.namespace.clone().unwrap_or_default());
        }
        namespaces.sort();
        namespaces.dedup();
        Ok(Self {
            namespaces,
            namespace_selector,
            selector,
            topology_key: term.topology_key.clone(),
        })
    }

    /// Whether the pod (its namespace, the namespace's labels, its labels) is one the term
    /// is about.
    pub fn matches(&self, namespace: &str, namespace_labels: &Labels, labels: &Labels) -> bool {
        (self.namespaces.iter().any(|n| n == namespace)
            || self.namespace_selector.matches(namespace_labels))
            && self.selector.matches(labels)
    }
}

/// An affinity term with the weight of its preference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedAffinityTerm {
    /// 1..=100.
    pub weight: i32,
    /// The term.
    pub term: AffinityTerm,
}

/// What to do when a spread constraint cannot be met.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum WhenUnsatisfiable {
    /// A hard constraint: filter nodes.
    DoNotSchedule,
    /// A soft constraint: score nodes.
    ScheduleAnyway,
}

/// Whether node affinity or taints decide which nodes count for spreading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum InclusionPolicy {
    /// Only nodes that pass the check count.
    Honor,
    /// All nodes count.
    Ignore,
}

/// A compiled topology spread constraint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologySpreadConstraint {
    /// Largest allowed skew.
    pub max_skew: i32,
    /// The node label that defines the domain.
    pub topology_key: String,
    /// Hard or soft.
    pub when_unsatisfiable: WhenUnsatisfiable,
    /// The pods to count (with matchLabelKeys merged).
    pub selector: LabelSelector,
    /// Minimum number of eligible domains (hard constraints only).
    pub min_domains: Option<i32>,
    /// Default Honor.
    pub node_affinity_policy: InclusionPolicy,
    /// Default Ignore.
    pub node_taints_policy: InclusionPolicy,
}

impl TopologySpreadConstraint {
    /// Compiles an API constraint for the given pod labels.
    pub fn compile(
        c: &api::TopologySpreadConstraint,
        pod_labels: &Labels,
        field: &str,
    ) -> Result<Self, ModelError> {
        let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
            "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
            "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
            other => {
                return Err(ModelError::invalid(
                    &format!("{field}.whenUnsatisfiable"),
                    &format!("{other:?} is not DoNotSchedule or ScheduleAnyway"),
                ));
            }
        };
        let policy = |v: Option<&str>, default: InclusionPolicy, f: &str| match v {
            None | Some("") => Ok(default),
            Some("Honor") => Ok(InclusionPolicy::Honor),
            Some("Ignore") => Ok(InclusionPolicy::Ignore),
            Some(other) => Err(ModelError::invalid(
                &format!("{field}.{f}"),
                &format!("{other:?} is not Honor or Ignore"),
            )),
        };
        if c.max_skew < 1 {
            return Err(ModelError::invalid(
                &format!("{field}.maxSkew"),
                "must be greater than zero",
            ));
        }
        let mut selector =
            LabelSelector::compile(c.label_selector.as_ref(), &format!("{field}.labelSelector"))?;
        if c.label_selector.is_some() {
            for key in c.match_label_keys.iter().flatten() {
                if let Some(v) = pod_labels.get(key) {
                    selector.push(Requirement::new(
                        key,
                        "In",
                        std::slice::from_ref(v),
                        false,
                        field,
                    )?);
                }
            }
        }
        Ok(Self {
            max_skew: c.max_skew,
            topology_key: c.topology_key.clone(),
            when_unsatisfiable,
            selector,
            min_domains: c.min_domains,
            node_affinity_policy: policy(
                c.node_affinity_policy.as_deref(),
                InclusionPolicy::Honor,
                "nodeAffinityPolicy",
            )?,
            node_taints_policy: policy(
                c.node_taints_policy.as_deref(),
                InclusionPolicy::Ignore,
                "nodeTaintsPolicy",
            )?,
        })
    }
}

/// A pod as the scheduler sees it. Built once per pod update; shared by `Arc`.
#[derive(Debug, Clone)]
pub struct PodInfo {
    /// The API object, for status updates and for plugins' one-time precomputation.
    pub pod: Arc<api::Pod>,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID (the key in caches; `namespace/name` when the object has none).
    pub uid: String,
    /// Labels.
    pub labels: Labels,
    /// `spec.nodeName`, when bound or assigned.
    pub node_name: Option<String>,
    /// `status.nominatedNodeName`.
    pub nominated_node_name: Option<String>,
    /// `spec.schedulerName` (defaults to `default-scheduler`).
    pub scheduler_name: String,
    /// `spec.priority` (0 when unset).
    pub priority: i32,
    /// `spec.preemptionPolicy` is `Never`.
    pub preemption_never: bool,
    /// Effective requests.
    pub requests: Resource,
    /// Requests with the scoring defaults for containers that request no CPU or memory.
    pub non_zero_requests: Resource,
    /// `nodeSelector` and required node affinity.
    pub required_node_affinity: RequiredNodeAffinity,
    /// Preferred node affinity terms.
    pub preferred_node_affinity: Vec<WeightedNodeSelectorTerm>,
    /// Tolerations.
    pub tolerations: Vec<Toleration>,
    /// Host ports of the containers and sidecars (restartable init containers), de-duplicated.
    pub host_ports: Vec<HostPort>,
    /// Required pod affinity terms.
    pub required_affinity_terms: Vec<AffinityTerm>,
    /// Required pod anti-affinity terms.
    pub required_anti_affinity_terms: Vec<AffinityTerm>,
    /// Preferred pod affinity terms.
    pub preferred_affinity_terms: Vec<WeightedAffinityTerm>,
    /// Preferred pod anti-affinity terms.
    pub preferred_anti_affinity_terms: Vec<WeightedAffinityTerm>,
    /// Topology spread constraints.
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    /// Container images (init containers included).
    pub images: Vec<String>,
    /// Names of the scheduling gates still on the pod.
    pub scheduling_gates: Vec<String>,
    /// Names of the PersistentVolumeClaims the pod mounts.
    pub pvc_names: Vec<String>,
    /// The pod is being deleted.
    pub terminating: bool,
    /// Creation time in seconds since the epoch (0 when unknown).
    pub creation_seconds: i64,
}

/// The scheduler name pods get when they name none.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

impl PodInfo {
    /// Builds the pod's scheduling view. Errors name the pod and the field.
    pub fn new(pod: Arc<api::Pod>) -> Result<Self, ModelError> {
        let namespace = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let object = format!("Pod {namespace}/{name}");
        Self::build(pod, namespace, name).map_err(|e| e.in_object(&object))
    }

    fn build(pod: Arc<api::Pod>, namespace: String, name: String) -> Result<Self, ModelError> {
        if name.is_empty() {
            return Err(ModelError::invalid("metadata.name", "a pod needs a name"));
        }
        let empty = api::PodSpec::default();
        let spec = pod.spec.as_ref().unwrap_or(&empty);
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let affinity = spec.affinity.as_ref();

        let node_selector = spec
            .node_selector
            .as_ref()
            .filter(|m| !m.is_empty())
            .map(LabelSelector::from_map);
        let node_affinity = affinity.and_then(|a| a.node_affinity.as_ref());
        let required = node_affinity
            .and_then(|na| {
                na.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(|s| {
                NodeSelector::compile(
                    s,
                    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                )
            })
            .transpose()?;
        let mut preferred_node_affinity = Vec::new();
        for (i, p) in node_affinity
            .and_then(|na| {
                na.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .into_iter()
            .flatten()
            .enumerate()
        {
            let field = format!(
                "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            );
            preferred_node_affinity.push(WeightedNodeSelectorTerm {
                weight: p.weight,
                term: NodeSelectorTerm::compile(&p.preference, &format!("{field}.preference"))?,
            });
        }

        let mut tolerations = Vec::new();
        for (i, t) in spec.tolerations.iter().flatten().enumerate() {
            tolerations.push(Toleration::compile(t, &format!("spec.tolerations[{i}]"))?);
        }

        let mut host_ports = Vec::new();
        let mut images = Vec::new();
        let inits = spec.init_containers.iter().flatten().map(|c| (c, true));
        for (c, init) in inits.chain(spec.containers.iter().map(|c| (c, false))) {
            if let Some(image) = &c.image {
                images.push(image.clone());
            }
            // Upstream's host ports: regular containers and sidecars (restartable init
            // containers); a plain init container has exited before the pod runs.
            if init && c.restart_policy.as_deref() != Some("Always") {
                continue;
            }
            for p in c.ports.iter().flatten() {
                if let Some(hp) = p.host_port.filter(|hp| *hp > 0) {
                    host_ports.push(HostPort::new(
                        p.host_ip.as_deref(),
                        p.protocol.as_deref(),
                        hp,
                    ));
                }
            }
        }
        let host_ports = crate::ports::dedup(host_ports);

        let pod_affinity = affinity.and_then(|a| a.pod_affinity.as_ref());
        let pod_anti_affinity = affinity.and_then(|a| a.pod_anti_affinity.as_ref());
        let required_terms = |terms: Option<&Vec<api::PodAffinityTerm>>, field: &str| {
            terms
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, t)| AffinityTerm::compile(&pod, t, &format!("{field}[{i}]")))
                .collect::<Result<Vec<_>, _>>()
        };
        let preferred_terms = |terms: Option<&Vec<api::WeightedPodAffinityTerm>>, field: &str| {
            terms
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, t)| {
                    Ok(WeightedAffinityTerm {
                        weight: t.weight,
                        term: AffinityTerm::compile(
                            &pod,
                            &t.pod_affinity_term,
                            &format!("{field}[{i}].podAffinityTerm"),
                        )?,
                    })
                })
                .collect::<Result<Vec<_>, ModelError>>()
        };
        let required_affinity_terms = required_terms(
            pod_affinity.and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            }),
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution",
        )?;
        let required_anti_affinity_terms = required_terms(
            pod_anti_affinity.and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            }),
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution",
        )?;
        let preferred_affinity_terms = preferred_terms(
            pod_affinity.and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            }),
            "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution",
        )?;
        let preferred_anti_affinity_terms = preferred_terms(
            pod_anti_affinity.and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            }),
            "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution",
        )?;

        let mut topology_spread_constraints = Vec::new();
        for (i, c) in spec
            .topology_spread_constraints
            .iter()
            .flatten()
            .enumerate()
        {
            topology_spread_constraints.push(TopologySpreadConstraint::compile(
                c,
                &labels,
                &format!("spec.topologySpreadConstraints[{i}]"),
            )?);
        }

        let pvc_names = spec
            .volumes
            .iter()
            .flatten()
            .filter_map(|v| {
                v.persistent_volume_claim
                    .as_ref()
                    .map(|c| c.claim_name.clone())
            })
            .collect();

        Ok(Self {
            uid: pod
                .metadata
                .uid
                .clone()
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| format!("{namespace}/{name}")),
            node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
            nominated_node_name: pod
                .status
                .as_ref()
                .and_then(|s| s.nominated_node_name.clone())
                .filter(|n| !n.is_empty()),
            scheduler_name: spec
                .scheduler_name
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| DEFAULT_SCHEDULER_NAME.to_string()),
            priority: spec.priority.unwrap_or(0),
            preemption_never: spec.preemption_policy.as_deref() == Some("Never"),
            requests: resource::pod_requests(spec, false)?,
            non_zero_requests: resource::pod_requests(spec, true)?,
            required_node_affinity: RequiredNodeAffinity {
                node_selector,
                required,
            },
            preferred_node_affinity,
            tolerations,
            host_ports,
            required_affinity_terms,
            required_anti_affinity_terms,
            preferred_affinity_terms,
            preferred_anti_affinity_terms,
            topology_spread_constraints,
            images,
            scheduling_gates: spec
                .scheduling_gates
                .iter()
                .flatten()
                .map(|g| g.name.clone())
                .collect(),
            pvc_names,
            terminating: pod.metadata.deletion_timestamp.is_some(),
            creation_seconds: pod
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_second())
                .unwrap_or(0),
            labels,
            namespace,
            name,
            pod,
        })
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Whether the pod has any pod affinity or anti-affinity term, required or preferred.
    pub fn has_affinity(&self) -> bool {
        !self.required_affinity_terms.is_empty()
            || !self.required_anti_affinity_terms.is_empty()
            || !self.preferred_affinity_terms.is_empty()
            || !self.preferred_anti_affinity_terms.is_empty()
    }

    /// Whether the pod has a required anti-affinity term.
    pub fn has_required_anti_affinity(&self) -> bool {
        !self.required_anti_affinity_terms.is_empty()
    }

    /// The pod's owner references as (kind, name), for controller-based spreading.
    pub fn owners(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .map(|o| (o.kind.as_str(), o.name.as_str()))
    }

    /// The labels map from the API object (for code that needs the BTreeMap type).
    pub fn label_map(&self) -> &BTreeMap<String, String> {
        &self.labels
    }
}
