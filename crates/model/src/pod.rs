//! `PodInfo`: everything the scheduler reads of a pod, computed once per pod update.

use crate::pod_object::PodObject;
use std::collections::BTreeMap;

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
    /// Compiles a term. A selector that cannot be compiled selects nothing (the term is
    /// kept, so an existing pod's term simply matches no pod); the error goes to `problems`.
    fn compile(
        owner: &api::Pod,
        term: &api::PodAffinityTerm,
        field: &str,
        problems: &mut Vec<ModelError>,
    ) -> Self {
        let (mut selector, problem) = LabelSelector::compile_lenient(
            term.label_selector.as_ref(),
            &format!("{field}.labelSelector"),
        );
        problems.extend(problem);
        let labels = owner.metadata.labels.clone().unwrap_or_default();
        // matchLabelKeys / mismatchLabelKeys: merged into the selector with the owner's values,
        // as the API server does on create; manifests that never met one read the same.
        if term.label_selector.is_some() {
            let keys = term
                .match_label_keys
                .iter()
                .flatten()
                .map(|k| (k, "In", "matchLabelKeys"));
            let mismatch = term
                .mismatch_label_keys
                .iter()
                .flatten()
                .map(|k| (k, "NotIn", "mismatchLabelKeys"));
            for (key, op, list) in keys.chain(mismatch) {
                if let Some(v) = labels.get(key) {
                    match Requirement::new(
                        key,
                        op,
                        std::slice::from_ref(v),
                        false,
                        &format!("{field}.{list}"),
                    ) {
                        Ok(r) => selector.push(r),
                        Err(e) => problems.push(e),
                    }
                }
            }
        }
        let mut namespaces = term.namespaces.clone().unwrap_or_default();
        let (namespace_selector, problem) = LabelSelector::compile_lenient(
            term.namespace_selector.as_ref(),
            &format!("{field}.namespaceSelector"),
        );
        problems.extend(problem);
        if namespaces.is_empty() && term.namespace_selector.is_none() {
            namespaces.push(owner.metadata.namespace.clone().unwrap_or_default());
        }
        namespaces.sort();
        namespaces.dedup();
        Self {
            namespaces,
            namespace_selector,
            selector,
            topology_key: term.topology_key.clone(),
        }
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

impl TopologySpreadConstraint {
    /// Compiles a pod's constraint as upstream reads it: a `whenUnsatisfiable` that is
    /// neither value makes the constraint count for neither filtering nor scoring (None),
    /// a policy other than `Honor` ignores, and a selector that cannot be compiled selects
    /// nothing, its error going to `problems`.
    fn compile_lenient(
        c: &api::TopologySpreadConstraint,
        pod_labels: &Labels,
        field: &str,
        problems: &mut Vec<ModelError>,
    ) -> Option<Self> {
        let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
            "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
            "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
            other => {
                tracing::debug!(
                    field,
                    value = other,
                    "ignoring a spread constraint with an unknown whenUnsatisfiable"
                );
                return None;
            }
        };
        let policy = |v: Option<&str>, default: InclusionPolicy| match v {
            None | Some("") => default,
            Some("Honor") => InclusionPolicy::Honor,
            Some(_) => InclusionPolicy::Ignore,
        };
        let (mut selector, problem) = LabelSelector::compile_lenient(
            c.label_selector.as_ref(),
            &format!("{field}.labelSelector"),
        );
        problems.extend(problem);
        if c.label_selector.is_some() {
            for key in c.match_label_keys.iter().flatten() {
                if let Some(v) = pod_labels.get(key) {
                    match Requirement::new(
                        key,
                        "In",
                        std::slice::from_ref(v),
                        false,
                        &format!("{field}.matchLabelKeys"),
                    ) {
                        Ok(r) => selector.push(r),
                        Err(e) => problems.push(e),
                    }
                }
            }
        }
        Some(Self {
            max_skew: c.max_skew.max(1),
            topology_key: c.topology_key.clone(),
            when_unsatisfiable,
            selector,
            min_domains: c.min_domains,
            node_affinity_policy: policy(c.node_affinity_policy.as_deref(), InclusionPolicy::Honor),
            node_taints_policy: policy(c.node_taints_policy.as_deref(), InclusionPolicy::Ignore),
        })
    }
}

/// A pod as the scheduler sees it. Built once per pod update; shared by `Arc`.
#[derive(Debug, Clone)]
pub struct PodInfo {
    /// The API object, for status updates and for plugins' one-time precomputation. A
    /// cluster dump's pods hold it packed: read it with [`PodObject::read`] where every
    /// pod is looked at once, so bound pods stay packed.
    pub pod: PodObject,
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
    /// The pod's images: init containers', containers', then image volumes' references
    /// (ImageLocality counts all three after v1.34: #130231, #138951).
    pub images: Vec<String>,
    /// Names of the scheduling gates still on the pod.
    pub scheduling_gates: Vec<String>,
    /// The PodGroup the pod belongs to (`spec.schedulingGroup.podGroupName`, a non-empty
    /// name), kept so that finding a group's members never decodes a packed pod.
    pub pod_group_name: Option<String>,
    /// Names of the PersistentVolumeClaims the pod mounts.
    pub pvc_names: Vec<String>,
    /// The pod is being deleted.
    pub terminating: bool,
    /// Creation time in seconds since the epoch (0 when unknown).
    pub creation_seconds: i64,
    /// `status.startTime` in nanoseconds since the epoch, when the pod has started
    /// (preemption orders victims by it).
    pub start_time_nanos: Option<i128>,
    /// Parts of the pod that could not be compiled, each naming its field. They never
    /// keep the pod out of the scheduler's view (a bound pod's requests always count on
    /// its node); a pending pod is refused, with an event naming the field, by the plugin
    /// that needs the part.
    pub problems: Vec<ModelError>,
}

/// The scheduler name pods get when they name none.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

impl PodInfo {
    /// Builds the pod's scheduling view. It fails only for a pod without a name; every
    /// other part that cannot be compiled is compiled leniently, as upstream does, and
    /// listed in [`PodInfo::problems`].
    pub fn new(pod: impl Into<PodObject>) -> Result<Self, ModelError> {
        let pod = pod.into();
        // A packed object is read without being kept decoded: what the scheduler needs of
        // it is compiled here.
        let object = pod.read();
        Self::from_decoded(pod, &object)
    }

    /// [`PodInfo::new`] for a caller that has `pod` decoded already: `decoded` must be
    /// the object `pod` holds (what [`PodObject::read`] gives).
    pub fn from_decoded(pod: PodObject, decoded: &api::Pod) -> Result<Self, ModelError> {
        let namespace = decoded
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = decoded.metadata.name.clone().unwrap_or_default();
        let what = format!("Pod {namespace}/{name}");
        Self::build(pod, decoded, namespace, name).map_err(|e| e.in_object(&what))
    }

    fn build(
        object: PodObject,
        pod: &api::Pod,
        namespace: String,
        name: String,
    ) -> Result<Self, ModelError> {
        if name.is_empty() {
            return Err(ModelError::invalid("metadata.name", "a pod needs a name"));
        }
        let mut problems = Vec::new();
        let empty = api::PodSpec::default();
        let spec = pod.spec.as_ref().unwrap_or(&empty);
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let (required_node_affinity, preferred_node_affinity) =
            compile_node_affinity(spec, &namespace, &name, &mut problems);
        let tolerations = compile_tolerations(spec);
        let (images, host_ports) = images_and_host_ports(spec);
        let pod_affinity = compile_pod_affinity(pod, spec, &mut problems);
        let topology_spread_constraints = compile_spread_constraints(spec, &labels, &mut problems);
        let pvc_names = claim_names(spec);

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
            requests: resource::pod_requests(spec, false, &mut problems),
            // The same amounts again: their problems are already listed.
            non_zero_requests: resource::pod_requests(spec, true, &mut Vec::new()),
            required_node_affinity,
            preferred_node_affinity,
            tolerations,
            host_ports,
            required_affinity_terms: pod_affinity.required_affinity,
            required_anti_affinity_terms: pod_affinity.required_anti_affinity,
            preferred_affinity_terms: pod_affinity.preferred_affinity,
            preferred_anti_affinity_terms: pod_affinity.preferred_anti_affinity,
            topology_spread_constraints,
            images,
            scheduling_gates: spec
                .scheduling_gates
                .iter()
                .flatten()
                .map(|g| g.name.clone())
                .collect(),
            pod_group_name: spec
                .scheduling_group
                .as_ref()
                .and_then(|g| g.pod_group_name.clone())
                .filter(|n| !n.is_empty()),
            pvc_names,
            terminating: pod.metadata.deletion_timestamp.is_some(),
            creation_seconds: pod
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_second())
                .unwrap_or(0),
            start_time_nanos: pod
                .status
                .as_ref()
                .and_then(|s| s.start_time.as_ref())
                .map(|t| t.0.as_nanosecond()),
            problems,
            labels,
            namespace,
            name,
            pod: object,
        })
    }

    /// The compiled form of `next`, a later object of the same pod, made from this one
    /// without compiling the pod again when the two differ only where a binding or a
    /// status update writes: `spec.nodeName` and the status. Everything else the compiled
    /// form reads (the rest of the spec, labels, creation and deletion times) must be
    /// equal, or None is returned and the caller compiles `next` itself. A binding is an
    /// update of every scheduled pod, and compiling it again was a fixed cost per pod.
    pub fn updated_to(&self, next: &PodObject) -> Option<PodInfo> {
        let (old, new) = (self.pod.read(), next.read());
        let (Some(old_spec), Some(new_spec)) = (old.spec.as_ref(), new.spec.as_ref()) else {
            return None;
        };
        let same_meta = old.metadata.uid == new.metadata.uid
            && old.metadata.name == new.metadata.name
            && old.metadata.namespace == new.metadata.namespace
            && old.metadata.labels == new.metadata.labels
            && old.metadata.creation_timestamp == new.metadata.creation_timestamp
            && old.metadata.deletion_timestamp == new.metadata.deletion_timestamp;
        if !same_meta || !same_spec_but_node_name(old_spec, new_spec) {
            return None;
        }
        // A node name, once set, is never taken back: such an object is not an update.
        if self.node_name.is_some() && new_spec.node_name != old_spec.node_name {
            return None;
        }
        let mut info = self.clone();
        info.pod = next.clone();
        info.node_name = new_spec.node_name.clone().filter(|n| !n.is_empty());
        let status = new.status.as_ref();
        info.nominated_node_name = status
            .and_then(|s| s.nominated_node_name.clone())
            .filter(|n| !n.is_empty());
        info.start_time_nanos = status
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0.as_nanosecond());
        Some(info)
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

/// The pod's required node affinity (nodeSelector and required terms) and its preferred
/// terms. Required terms that do not compile match no node (as upstream); preferred ones
/// that do not compile are listed in `problems`.
fn compile_node_affinity(
    spec: &api::PodSpec,
    namespace: &str,
    name: &str,
    problems: &mut Vec<ModelError>,
) -> (RequiredNodeAffinity, Vec<WeightedNodeSelectorTerm>) {
    let node_selector = spec
        .node_selector
        .as_ref()
        .filter(|m| !m.is_empty())
        .map(LabelSelector::from_map);
    let node_affinity = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref());
    let required = node_affinity
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|s| {
            let (selector, errors) = NodeSelector::compile_lenient(
                s,
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
            );
            // Upstream ignores these too: the term matches no node, and the pod is
            // told its node affinity did not match.
            for e in errors {
                tracing::debug!(pod = %format!("{namespace}/{name}"), error = %e, "required node affinity term matches no node");
            }
            selector
        });
    let mut preferred = Vec::new();
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
        let (term, problem) =
            NodeSelectorTerm::compile_lenient(&p.preference, &format!("{field}.preference"));
        problems.extend(problem);
        preferred.push(WeightedNodeSelectorTerm {
            weight: p.weight,
            term,
        });
    }
    (
        RequiredNodeAffinity {
            node_selector,
            required,
        },
        preferred,
    )
}

/// The pod's tolerations; one with an operator or effect upstream does not know
/// tolerates no taint there either, so it is left out.
fn compile_tolerations(spec: &api::PodSpec) -> Vec<Toleration> {
    let mut tolerations = Vec::new();
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        match Toleration::compile(t, &format!("spec.tolerations[{i}]")) {
            Ok(t) => tolerations.push(t),
            Err(e) => tracing::debug!(error = %e, "toleration tolerates nothing"),
        }
    }
    // Kept for the pod's life, a hundred thousand of them in a dump: no growth slack.
    tolerations.shrink_to_fit();
    tolerations
}

/// Every container's image (init containers first), then every image volume's reference,
/// and the host ports the pod holds while it runs, without duplicates.
fn images_and_host_ports(spec: &api::PodSpec) -> (Vec<String>, Vec<HostPort>) {
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
    for v in spec.volumes.iter().flatten() {
        if let Some(image) = &v.image {
            images.push(image.reference.clone().unwrap_or_default());
        }
    }
    images.shrink_to_fit();
    (images, crate::ports::dedup(host_ports))
}

/// The pod's inter-pod affinity and anti-affinity terms, compiled.
struct PodAffinityTerms {
    required_affinity: Vec<AffinityTerm>,
    required_anti_affinity: Vec<AffinityTerm>,
    preferred_affinity: Vec<WeightedAffinityTerm>,
    preferred_anti_affinity: Vec<WeightedAffinityTerm>,
}

fn compile_pod_affinity(
    pod: &api::Pod,
    spec: &api::PodSpec,
    problems: &mut Vec<ModelError>,
) -> PodAffinityTerms {
    let affinity = spec.affinity.as_ref();
    let pod_affinity = affinity.and_then(|a| a.pod_affinity.as_ref());
    let pod_anti_affinity = affinity.and_then(|a| a.pod_anti_affinity.as_ref());
    let required_terms =
        |terms: Option<&Vec<api::PodAffinityTerm>>, field: &str, problems: &mut Vec<ModelError>| {
            terms
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, t)| AffinityTerm::compile(pod, t, &format!("{field}[{i}]"), problems))
                .collect::<Vec<_>>()
        };
    let preferred_terms = |terms: Option<&Vec<api::WeightedPodAffinityTerm>>,
                           field: &str,
                           problems: &mut Vec<ModelError>| {
        terms
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, t)| WeightedAffinityTerm {
                weight: t.weight,
                term: AffinityTerm::compile(
                    pod,
                    &t.pod_affinity_term,
                    &format!("{field}[{i}].podAffinityTerm"),
                    problems,
                ),
            })
            .collect::<Vec<_>>()
    };
    PodAffinityTerms {
        required_affinity: required_terms(
            pod_affinity.and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            }),
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution",
            problems,
        ),
        required_anti_affinity: required_terms(
            pod_anti_affinity.and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            }),
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution",
            problems,
        ),
        preferred_affinity: preferred_terms(
            pod_affinity.and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            }),
            "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution",
            problems,
        ),
        preferred_anti_affinity: preferred_terms(
            pod_anti_affinity.and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            }),
            "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution",
            problems,
        ),
    }
}

/// The pod's topology spread constraints; parts that do not compile are listed in
/// `problems`.
fn compile_spread_constraints(
    spec: &api::PodSpec,
    labels: &BTreeMap<String, String>,
    problems: &mut Vec<ModelError>,
) -> Vec<TopologySpreadConstraint> {
    let mut constraints = Vec::new();
    for (i, c) in spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
    {
        constraints.extend(TopologySpreadConstraint::compile_lenient(
            c,
            labels,
            &format!("spec.topologySpreadConstraints[{i}]"),
            problems,
        ));
    }
    constraints
}

/// The names of the PersistentVolumeClaims the pod's volumes use.
fn claim_names(spec: &api::PodSpec) -> Vec<String> {
    spec.volumes
        .iter()
        .flatten()
        .filter_map(|v| {
            v.persistent_volume_claim
                .as_ref()
                .map(|c| c.claim_name.clone())
        })
        .collect()
}

/// Whether two pod specs are equal in everything but `nodeName` (the one field a binding
/// writes). The pattern names every field, so a field a new Kubernetes release adds is a
/// compile error here rather than a difference silently ignored.
fn same_spec_but_node_name(a: &api::PodSpec, b: &api::PodSpec) -> bool {
    let api::PodSpec {
        active_deadline_seconds,
        affinity,
        automount_service_account_token,
        containers,
        dns_config,
        dns_policy,
        enable_service_links,
        ephemeral_containers,
        eviction_responders,
        host_aliases,
        host_ipc,
        host_network,
        host_pid,
        host_users,
        hostname,
        hostname_override,
        image_pull_secrets,
        init_containers,
        node_name: _,
        node_selector,
        os,
        overhead,
        preemption_policy,
        priority,
        priority_class_name,
        readiness_gates,
        resource_claims,
        resources,
        restart_policy,
        runtime_class_name,
        scheduler_name,
        scheduling_gates,
        scheduling_group,
        security_context,
        service_account,
        service_account_name,
        set_hostname_as_fqdn,
        share_process_namespace,
        subdomain,
        termination_grace_period_seconds,
        tolerations,
        topology_spread_constraints,
        volumes,
    } = a;
    *active_deadline_seconds == b.active_deadline_seconds
        && *affinity == b.affinity
        && *automount_service_account_token == b.automount_service_account_token
        && *containers == b.containers
        && *dns_config == b.dns_config
        && *dns_policy == b.dns_policy
        && *enable_service_links == b.enable_service_links
        && *ephemeral_containers == b.ephemeral_containers
        && *eviction_responders == b.eviction_responders
        && *host_aliases == b.host_aliases
        && *host_ipc == b.host_ipc
        && *host_network == b.host_network
        && *host_pid == b.host_pid
        && *host_users == b.host_users
        && *hostname == b.hostname
        && *hostname_override == b.hostname_override
        && *image_pull_secrets == b.image_pull_secrets
        && *init_containers == b.init_containers
        && *node_selector == b.node_selector
        && *os == b.os
        && *overhead == b.overhead
        && *preemption_policy == b.preemption_policy
        && *priority == b.priority
        && *priority_class_name == b.priority_class_name
        && *readiness_gates == b.readiness_gates
        && *resource_claims == b.resource_claims
        && *resources == b.resources
        && *restart_policy == b.restart_policy
        && *runtime_class_name == b.runtime_class_name
        && *scheduler_name == b.scheduler_name
        && *scheduling_gates == b.scheduling_gates
        && *scheduling_group == b.scheduling_group
        && *security_context == b.security_context
        && *service_account == b.service_account
        && *service_account_name == b.service_account_name
        && *set_hostname_as_fqdn == b.set_hostname_as_fqdn
        && *share_process_namespace == b.share_process_namespace
        && *subdomain == b.subdomain
        && *termination_grace_period_seconds == b.termination_grace_period_seconds
        && *tolerations == b.tolerations
        && *topology_spread_constraints == b.topology_spread_constraints
        && *volumes == b.volumes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn pod(spec: serde_json::Value) -> PodInfo {
        let pod: api::Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"app": "web"}},
            "spec": spec,
        }))
        .expect("pod");
        PodInfo::new(Arc::new(pod)).expect("a named pod always compiles")
    }

    fn container(cpu: &str) -> serde_json::Value {
        json!({"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}})
    }

    /// A pod compiled with affinity, tolerations, spreading and a claim, then the object
    /// a binding makes of it (node name, a condition, the nomination cleared, a start time).
    fn pod_and_its_binding() -> (PodInfo, api::Pod) {
        let spec = json!({
            "containers": [container("250m")],
            "priority": 7,
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}
            ]}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}],
            "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}],
        });
        let before: api::Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"app": "web"}},
            "spec": spec,
            "status": {"nominatedNodeName": "n0"},
        }))
        .expect("pod");
        let info = PodInfo::new(Arc::new(before.clone())).expect("compiles");
        let mut bound = before;
        bound.spec.as_mut().expect("spec").node_name = Some("n1".into());
        bound.status = Some(
            serde_json::from_value(json!({
                "conditions": [{"type": "PodScheduled", "status": "True"}],
                "startTime": "2026-01-01T00:00:00Z",
            }))
            .expect("status"),
        );
        (info, bound)
    }

    #[test]
    fn a_binding_is_compiled_from_the_pod_before_it_as_compiling_it_gives() {
        let (info, bound) = pod_and_its_binding();
        let next = PodObject::from(Arc::new(bound.clone()));
        let derived = info.updated_to(&next).expect("only the binding changed");
        let compiled = PodInfo::new(next).expect("compiles");
        assert_eq!(format!("{derived:?}"), format!("{compiled:?}"));
        assert_eq!(derived.node_name.as_deref(), Some("n1"));
        assert_eq!(derived.nominated_node_name, None);
        assert!(derived.start_time_nanos.is_some());
    }

    #[test]
    fn anything_else_changed_is_compiled_again() {
        let (info, bound) = pod_and_its_binding();
        let mut relabelled = bound.clone();
        relabelled
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("app".into(), "db".into());
        let mut tolerating = bound.clone();
        tolerating.spec.as_mut().expect("spec").tolerations = None;
        let mut deleted = bound.clone();
        deleted.metadata.deletion_timestamp =
            bound.status.as_ref().and_then(|s| s.start_time.clone());
        for changed in [relabelled, tolerating, deleted] {
            assert!(
                info.updated_to(&PodObject::from(Arc::new(changed)))
                    .is_none()
            );
        }
        // A bound pod moved to another node is no update of the same pod.
        let on_n1 = info
            .updated_to(&PodObject::from(Arc::new(bound.clone())))
            .expect("bound");
        let mut elsewhere = bound;
        elsewhere.spec.as_mut().expect("spec").node_name = Some("n2".into());
        assert!(
            on_n1
                .updated_to(&PodObject::from(Arc::new(elsewhere)))
                .is_none()
        );
    }

    #[test]
    fn a_non_integer_gt_matches_no_node_without_a_problem() {
        let p = pod(json!({
            "containers": [container("100m")],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["x"]}]}]
            }}},
        }));
        assert!(p.problems.is_empty(), "{:?}", p.problems);
        let labels: Labels = [("gen".to_string(), "9".to_string())].into();
        assert!(!p.required_node_affinity.matches(&labels, "n1"));
        assert_eq!(p.requests.milli_cpu, 100);
    }

    #[test]
    fn a_bad_affinity_selector_selects_nothing_and_names_the_field() {
        let p = pod(json!({
            "containers": [container("250m")],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "topologyKey": "kubernetes.io/hostname",
                "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["web"]}]},
            }]}},
        }));
        assert_eq!(p.requests.milli_cpu, 250, "requests still count");
        assert_eq!(p.required_anti_affinity_terms.len(), 1);
        let labels: Labels = [("app".to_string(), "web".to_string())].into();
        assert!(
            !p.required_anti_affinity_terms[0].matches("ns", &Labels::new(), &labels),
            "selects nothing"
        );
        assert_eq!(p.problems.len(), 1, "{:?}", p.problems);
        assert_eq!(
            p.problems[0].field,
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0]"
        );
    }

    #[test]
    fn spread_constraints_read_as_upstream_reads_them() {
        let p = pod(json!({
            "containers": [container("1")],
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Sometimes",
                 "labelSelector": {"matchLabels": {"app": "web"}}},
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                 "nodeTaintsPolicy": "Maybe",
                 "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["x"]}]}},
            ],
        }));
        // The unknown whenUnsatisfiable counts for nothing; the bad selector is a problem.
        assert_eq!(p.topology_spread_constraints.len(), 1);
        let c = &p.topology_spread_constraints[0];
        assert_eq!(c.node_taints_policy, InclusionPolicy::Ignore);
        assert!(c.selector.matches_nothing);
        assert_eq!(p.problems.len(), 1);
        assert_eq!(
            p.problems[0].field,
            "spec.topologySpreadConstraints[1].labelSelector.matchExpressions[0]"
        );
    }

    #[test]
    fn unreadable_amounts_and_tolerations_never_drop_the_pod() {
        let p = pod(json!({
            "nodeName": "n1",
            "containers": [container("500m"), {"name": "d", "resources": {"requests": {"cpu": "a lot"}}}],
            "tolerations": [{"key": "k", "operator": "Sometimes"}, {"key": "k2", "operator": "Exists"}],
            "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 5, "preference": {"matchExpressions": [{"key": "gen", "operator": "Lt", "values": ["?"]}]}}
            ]}},
        }));
        assert_eq!(p.node_name.as_deref(), Some("n1"));
        assert_eq!(p.requests.milli_cpu, 500);
        assert_eq!(p.requests.memory, 1 << 30);
        assert_eq!(p.tolerations.len(), 1);
        let fields: Vec<&str> = p.problems.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0]",
                "spec.containers[1].resources[cpu]",
            ]
        );
    }
}

/// Clears a container's fields no part of kubesched reads; a macro because `Container`
/// and `EphemeralContainer` are two types with these same fields.
macro_rules! clear_unread_container_fields {
    ($c:expr) => {{
        let c = $c;
        c.command = None;
        c.args = None;
        c.env = None;
        c.env_from = None;
        c.liveness_probe = None;
        c.readiness_probe = None;
        c.startup_probe = None;
        c.lifecycle = None;
        c.security_context = None;
        c.working_dir = None;
        c.termination_message_path = None;
        c.termination_message_policy = None;
        c.image_pull_policy = None;
        c.stdin = None;
        c.stdin_once = None;
        c.tty = None;
    }};
}

/// The annotation `kubectl apply` keeps the whole applied object in.
const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops from a pod what no part of kubesched reads (the model, the plugins, the
/// simulator and its reports), so that a store of many pods keeps what scheduling needs
/// rather than whole API objects: `managedFields` and `kubectl apply`'s copy of the
/// object; each container's command, arguments, environment, probes, lifecycle hooks,
/// security context and terminal settings; volumes no plugin reads (see
/// `volume_is_read`); the kubelet's conditions; the status's container states and
/// addresses. Kept are identity, labels and the other annotations, owners, the
/// whole scheduling-relevant spec (containers' images, resources, ports, restart policy
/// and mounts; volumes, claims, affinity, tolerations, spread constraints, gates,
/// priority, overhead, pod-level resources) and the phase, conditions, nomination and
/// start time (preemption prefers the candidate whose victims started latest).
/// Container statuses keep only their name and resources (in-place resize reports them).
pub fn slim_pod(pod: &mut api::Pod) {
    let meta = &mut pod.metadata;
    meta.managed_fields = None;
    if let Some(a) = meta.annotations.as_mut() {
        a.remove(LAST_APPLIED_ANNOTATION);
        if a.is_empty() {
            meta.annotations = None;
        }
    }
    if let Some(spec) = pod.spec.as_mut() {
        for c in spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
        {
            slim_container(c);
        }
        for c in spec.ephemeral_containers.iter_mut().flatten() {
            clear_unread_container_fields!(c);
        }
        // A `Volume` is over 3 KB inline, and nearly every pod has a projected
        // service-account volume no plugin looks at.
        if let Some(volumes) = spec.volumes.as_mut() {
            volumes.retain(volume_is_read);
            if volumes.is_empty() {
                spec.volumes = None;
            } else {
                volumes.shrink_to_fit();
            }
        }
    }
    if let Some(status) = pod.status.as_mut() {
        if let Some(conditions) = status.conditions.as_mut() {
            conditions.retain(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()));
            if conditions.is_empty() {
                status.conditions = None;
            } else {
                conditions.shrink_to_fit();
            }
        }
        status.host_ip = None;
        status.host_ips = None;
        status.pod_ip = None;
        status.pod_ips = None;
        status.ephemeral_container_statuses = None;
        for statuses in [
            &mut status.container_statuses,
            &mut status.init_container_statuses,
        ] {
            let kept: Vec<api::ContainerStatus> = statuses
                .take()
                .into_iter()
                .flatten()
                .filter(|s| s.resources.is_some() || s.allocated_resources.is_some())
                .map(|s| api::ContainerStatus {
                    name: s.name,
                    resources: s.resources,
                    allocated_resources: s.allocated_resources,
                    ..Default::default()
                })
                .collect();
            *statuses = (!kept.is_empty()).then_some(kept);
        }
    }
}

/// Pod conditions the kubelet keeps; the scheduler reads only its own (`PodScheduled`)
/// and the disruption ones (`DisruptionTarget`).
const KUBELET_CONDITIONS: [&str; 4] = [
    "Ready",
    "ContainersReady",
    "Initialized",
    "PodReadyToStartContainers",
];

/// Whether some plugin reads this volume: claims (persistent and generic ephemeral),
/// inline CSI volumes (attach limits), image volumes (ImageLocality), and the in-tree
/// disks that VolumeRestrictions and the migrated volume limits look at. ConfigMaps,
/// secrets, projected and downward-API volumes, emptyDir and hostPath never affect
/// a decision.
fn volume_is_read(v: &api::Volume) -> bool {
    v.persistent_volume_claim.is_some()
        || v.ephemeral.is_some()
        || v.csi.is_some()
        || v.image.is_some()
        || v.gce_persistent_disk.is_some()
        || v.aws_elastic_block_store.is_some()
        || v.azure_disk.is_some()
        || v.cinder.is_some()
        || v.rbd.is_some()
        || v.iscsi.is_some()
}

fn slim_container(c: &mut api::Container) {
    clear_unread_container_fields!(c);
}

#[cfg(test)]
mod slim_tests {
    use super::*;
    use std::sync::Arc;

    /// A pod with every part the scheduling view reads, and the bulk a dump adds.
    fn rich_pod() -> api::Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "web-1", "namespace": "shop", "uid": "u1",
                "labels": {"app": "web"},
                "annotations": {LAST_APPLIED_ANNOTATION: "{...}", "team": "a"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "r1", "controller": true}],
                "managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}],
                "creationTimestamp": "2024-01-01T00:00:00Z",
            },
            "spec": {
                "containers": [{
                    "name": "app", "image": "nginx:1", "command": ["run"], "args": ["-v"],
                    "env": [{"name": "A", "value": "b"}],
                    "livenessProbe": {"httpGet": {"port": 80}},
                    "ports": [{"containerPort": 80, "hostPort": 8080}],
                    "resources": {"requests": {"cpu": "100m", "memory": "1Gi"}, "limits": {"cpu": "1"}},
                    "volumeMounts": [{"name": "data", "mountPath": "/d"}],
                }],
                "initContainers": [{"name": "init", "image": "busybox", "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "50m"}}, "env": [{"name": "X"}]}],
                "overhead": {"cpu": "10m"},
                "nodeSelector": {"disk": "ssd"},
                "affinity": {
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]},
                },
                "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}}}],
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-1"}},
                    {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
                    {"name": "cache", "emptyDir": {}},
                ],
                "schedulingGates": [{"name": "wait"}],
                "priority": 10,
                "nodeName": "n1",
            },
            "status": {
                "phase": "Running", "hostIP": "10.0.0.1", "podIP": "10.1.0.1",
                "startTime": "2024-01-01T00:01:00Z",
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
                "containerStatuses": [
                    {"name": "app", "image": "nginx:1", "imageID": "x", "ready": true, "restartCount": 0},
                    {"name": "resized", "image": "i", "imageID": "y", "ready": true, "restartCount": 3,
                        "resources": {"requests": {"cpu": "200m"}}},
                ],
                "nominatedNodeName": "n2",
            },
        }))
        .unwrap()
    }

    #[test]
    fn a_slim_pod_gives_the_same_scheduling_view() {
        let full = rich_pod();
        let mut slim = full.clone();
        slim_pod(&mut slim);
        let view = |p: api::Pod| {
            let mut info = PodInfo::new(Arc::new(p)).unwrap();
            info.pod = api::Pod::default().into();
            format!("{info:?}")
        };
        assert_eq!(view(full.clone()), view(slim.clone()));
        // The bulk is gone; what the reports and what-ifs read stays.
        assert!(slim.metadata.managed_fields.is_none());
        let annotations = slim.metadata.annotations.clone().unwrap();
        assert_eq!(annotations.keys().collect::<Vec<_>>(), ["team"]);
        assert_eq!(
            slim.metadata.owner_references,
            full.metadata.owner_references
        );
        let spec = slim.spec.as_ref().unwrap();
        let c = &spec.containers[0];
        assert!(c.env.is_none() && c.command.is_none() && c.liveness_probe.is_none());
        assert_eq!(
            c.volume_mounts,
            full.spec.as_ref().unwrap().containers[0].volume_mounts
        );
        let volumes: Vec<&str> = spec
            .volumes
            .iter()
            .flatten()
            .map(|v| v.name.as_str())
            .collect();
        assert_eq!(volumes, ["data"]);
        let status = slim.status.as_ref().unwrap();
        let conditions: Vec<&str> = status
            .conditions
            .iter()
            .flatten()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(conditions, ["PodScheduled"]);
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert_eq!(status.nominated_node_name.as_deref(), Some("n2"));
        assert!(status.pod_ip.is_none());
        assert_eq!(status.start_time, full.status.as_ref().unwrap().start_time);
        let statuses = status.container_statuses.as_ref().unwrap();
        assert_eq!(statuses.len(), 1);
        assert_eq!(statuses[0].name, "resized");
        assert!(statuses[0].resources.is_some());
    }
}
