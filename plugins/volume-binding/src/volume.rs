//! What the plugin needs to know about PersistentVolumes, claims and StorageClasses, with the
//! semantics of upstream's storage helpers (component-helpers `storage/volume` and
//! `storage/ephemeral`): claim and volume classes, whether a volume is bound to a claim,
//! access and volume modes, node affinity and topology terms.

use kubesched_framework::model::k8s_openapi::api::core::v1::{
    ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod, TopologySelectorTerm,
};
use kubesched_framework::model::selector::Requirement;
pub use kubesched_framework::model::storage::{claim_class, volume_class};
use kubesched_framework::model::{Labels, NodeSelectorTerm, Quantity};

/// A claim bound by the PV controller carries this annotation; without it the claim is not
/// fully bound even when `spec.volumeName` is set.
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// Set on a volume the controller (or the scheduler) bound to a claim.
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// The node the scheduler chose for a claim that is to be provisioned.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// The deprecated class annotation, which wins over `storageClassName` when present.
/// The CSINode annotation listing the in-tree plugins migrated to CSI on the node.
pub const ANN_MIGRATED_PLUGINS: &str = "storage.alpha.kubernetes.io/migrated-plugins";
/// A StorageClass provisioner that provisions nothing (static volumes only).
pub const NOT_SUPPORTED_PROVISIONER: &str = "kubernetes.io/no-provisioner";
/// `volumeBindingMode` that delays binding until a pod is scheduled.
pub const WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";

/// The name of the claim of a generic ephemeral volume: `<pod>-<volume>`.
pub fn ephemeral_claim_name(pod: &Pod, volume_name: &str) -> String {
    format!(
        "{}-{volume_name}",
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The claims a pod's volumes name, in volume order: `(claim name, is ephemeral)`.
pub fn pod_claims(pod: &Pod) -> impl Iterator<Item = (String, bool)> + '_ {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter_map(move |v| {
            if let Some(c) = &v.persistent_volume_claim {
                Some((c.claim_name.clone(), false))
            } else if v.ephemeral.is_some() {
                Some((ephemeral_claim_name(pod, &v.name), true))
            } else {
                None
            }
        })
}

/// Whether the pod has a volume backed by a claim. Cheap: no allocation.
pub fn has_claims(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .is_some_and(|vs| {
            vs.iter()
                .any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some())
        })
}

/// `namespace/name` of a claim.
pub fn claim_key(pvc: &PersistentVolumeClaim) -> String {
    format!(
        "{}/{}",
        pvc.metadata.namespace.as_deref().unwrap_or_default(),
        pvc.metadata.name.as_deref().unwrap_or_default()
    )
}

fn annotation<'a>(meta_annotations: Option<&'a Labels>, key: &str) -> Option<&'a str> {
    meta_annotations
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// `spec.volumeName`, "" when unset.
pub fn claim_volume_name(pvc: &PersistentVolumeClaim) -> &str {
    pvc.spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or_default()
}

/// The node a claim to provision was given, if any.
pub fn selected_node(pvc: &PersistentVolumeClaim) -> Option<&str> {
    annotation(pvc.metadata.annotations.as_ref(), ANN_SELECTED_NODE)
}

/// Bound as the scheduler counts it: a volume name and the bind-completed annotation.
pub fn is_fully_bound(pvc: &PersistentVolumeClaim) -> bool {
    !claim_volume_name(pvc).is_empty()
        && pvc
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(ANN_BIND_COMPLETED))
}

/// Whether the claim lost its volume (`status.phase: Lost`).
pub fn is_lost(pvc: &PersistentVolumeClaim) -> bool {
    pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost")
}

/// The requested storage, zero when absent (or unreadable, which the API server refuses).
pub fn requested_storage(pvc: &PersistentVolumeClaim) -> i128 {
    pvc.spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map_or(0, |q| quantity_nanos(&q.0))
}

/// Whether the claim requests storage at all (capacity checks skip claims that do not).
pub fn requests_storage(pvc: &PersistentVolumeClaim) -> bool {
    pvc.spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .is_some_and(|r| r.contains_key("storage"))
}

/// A volume's storage capacity, zero when absent.
pub fn volume_capacity(pv: &PersistentVolume) -> i128 {
    pv.spec
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
        .map_or(0, |q| quantity_nanos(&q.0))
}

/// A quantity in nano units; unreadable text (which the API server never stores) is zero.
pub fn quantity_nanos(text: &str) -> i128 {
    match Quantity::parse(text) {
        Ok(q) => q.nanos(),
        Err(e) => {
            tracing::debug!(quantity = text, error = %e, "unreadable quantity taken as zero");
            0
        }
    }
}

/// Upstream's `IsVolumeBoundToClaim`: the volume's claimRef names the claim (and its UID,
/// when the reference has one).
pub fn is_volume_bound_to_claim(pv: &PersistentVolume, pvc: &PersistentVolumeClaim) -> bool {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    if r.name.as_deref() != pvc.metadata.name.as_deref()
        || r.namespace.as_deref() != pvc.metadata.namespace.as_deref()
    {
        return false;
    }
    match r.uid.as_deref().filter(|u| !u.is_empty()) {
        Some(uid) => pvc.metadata.uid.as_deref() == Some(uid),
        None => true,
    }
}

/// Whether the volume has a claimRef at all.
pub fn has_claim_ref(pv: &PersistentVolume) -> bool {
    pv.spec.as_ref().is_some_and(|s| s.claim_ref.is_some())
}

/// Upstream's `CheckVolumeModeMismatches`: an unset mode is Filesystem on both sides.
pub fn volume_mode_mismatch(pvc: &PersistentVolumeClaim, pv: &PersistentVolume) -> bool {
    let claim = pvc
        .spec
        .as_ref()
        .and_then(|s| s.volume_mode.as_deref())
        .unwrap_or("Filesystem");
    let volume = pv
        .spec
        .as_ref()
        .and_then(|s| s.volume_mode.as_deref())
        .unwrap_or("Filesystem");
    claim != volume
}

/// Whether the VolumeAttributesClass names differ (the feature is GA in v1.34).
pub fn attributes_class_mismatch(pvc: &PersistentVolumeClaim, pv: &PersistentVolume) -> bool {
    let claim = pvc
        .spec
        .as_ref()
        .and_then(|s| s.volume_attributes_class_name.as_deref())
        .unwrap_or_default();
    let volume = pv
        .spec
        .as_ref()
        .and_then(|s| s.volume_attributes_class_name.as_deref())
        .unwrap_or_default();
    claim != volume
}

/// Upstream's `CheckAccessModes`: every mode the claim asks for is one the volume offers.
pub fn access_modes_fit(pvc: &PersistentVolumeClaim, pv: &PersistentVolume) -> bool {
    let offered = pv
        .spec
        .as_ref()
        .and_then(|s| s.access_modes.as_deref())
        .unwrap_or_default();
    pvc.spec
        .as_ref()
        .and_then(|s| s.access_modes.as_deref())
        .unwrap_or_default()
        .iter()
        .all(|m| offered.contains(m))
}

/// The volume's phase, "" when it has no status.
pub fn volume_phase(pv: &PersistentVolume) -> &str {
    pv.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// The claim reference the PV controller writes into a volume bound to `pvc`.
pub fn claim_reference(pvc: &PersistentVolumeClaim) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        namespace: pvc.metadata.namespace.clone(),
        name: pvc.metadata.name.clone(),
        uid: pvc.metadata.uid.clone(),
        resource_version: pvc.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// Upstream's `GetBindVolumeToClaim`: the volume with its claimRef pointing at the claim and
/// the bound-by-controller annotation when the scheduler made the choice, and whether
/// anything changed.
pub fn bind_volume_to_claim(
    pv: &PersistentVolume,
    pvc: &PersistentVolumeClaim,
) -> (PersistentVolume, bool) {
    let by_controller = !is_volume_bound_to_claim(pv, pvc);
    let mut out = pv.clone();
    let mut dirty = false;
    let current = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    let same = current.is_some_and(|r| {
        r.name == pvc.metadata.name
            && r.namespace == pvc.metadata.namespace
            && r.uid == pvc.metadata.uid
    });
    if !same {
        out.spec.get_or_insert_with(Default::default).claim_ref = Some(claim_reference(pvc));
        dirty = true;
    }
    if by_controller {
        let ann = out
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        if !ann.contains_key(ANN_BOUND_BY_CONTROLLER) {
            ann.insert(ANN_BOUND_BY_CONTROLLER.into(), "yes".into());
            dirty = true;
        }
    }
    (out, dirty)
}

/// A resourceVersion as the number the API server makes it (None when unset or not a
/// number, as with hand-written manifests).
pub fn resource_version(rv: Option<&str>) -> Option<u64> {
    rv.and_then(|v| v.parse().ok())
}

/// A volume's required node affinity, compiled. Matching follows upstream's
/// `CheckNodeAffinity`, which matches against a node made of the labels alone: a
/// `matchFields` requirement on `metadata.name` never matches there, and a term that does
/// not compile matches nothing while the other terms still count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeAffinity {
    /// No required node affinity: every node.
    Any,
    /// The terms, ORed.
    Terms(Vec<NodeSelectorTerm>),
}

impl NodeAffinity {
    /// Compiles the volume's `spec.nodeAffinity.required`.
    pub fn of(pv: &PersistentVolume) -> Self {
        let Some(required) = pv
            .spec
            .as_ref()
            .and_then(|s| s.node_affinity.as_ref())
            .and_then(|a| a.required.as_ref())
        else {
            return Self::Any;
        };
        let name = pv.metadata.name.as_deref().unwrap_or_default();
        let terms = required
            .node_selector_terms
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                let field = format!("spec.nodeAffinity.required.nodeSelectorTerms[{i}]");
                NodeSelectorTerm::compile(t, &field)
                    .inspect_err(|e| {
                        tracing::debug!(pv = name, error = %e, "node affinity term matches no node");
                    })
                    .ok()
            })
            .collect();
        Self::Terms(terms)
    }

    /// Whether a node with these labels satisfies the affinity.
    pub fn matches(&self, labels: &Labels) -> bool {
        match self {
            Self::Any => true,
            // The node name is deliberately empty: see the type's documentation.
            Self::Terms(terms) => terms.iter().any(|t| t.matches(labels, "")),
        }
    }
}

/// Upstream's `GetLocalPersistentVolumeNodeNames`: the node names a volume's affinity pins
/// through `kubernetes.io/hostname In` (intersected within a term, united across terms);
/// None when it pins none.
pub fn pinned_hostnames(pv: &PersistentVolume) -> Option<Vec<String>> {
    let required = pv
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())?;
    let mut all: std::collections::BTreeSet<String> = Default::default();
    for term in &required.node_selector_terms {
        let mut names: Option<std::collections::BTreeSet<String>> = None;
        for e in term.match_expressions.iter().flatten() {
            if e.key != "kubernetes.io/hostname" || e.operator != "In" {
                continue;
            }
            let values = e.values.iter().flatten().cloned().collect();
            names = Some(match names {
                None => values,
                Some(prev) => prev.intersection(&values).cloned().collect(),
            });
        }
        all.extend(names.into_iter().flatten());
    }
    (!all.is_empty()).then(|| all.into_iter().collect())
}

/// A StorageClass's `allowedTopologies`, compiled. Upstream's `MatchTopologySelectorTerms`:
/// no term matches every node; a term without expressions, or one that does not compile,
/// matches nothing; otherwise every expression's key must have one of its values.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AllowedTopologies {
    /// None: no terms (every node). Some: the compiled terms, ORed.
    terms: Option<Vec<Vec<Requirement>>>,
}

impl AllowedTopologies {
    /// Compiles the terms.
    pub fn compile(terms: Option<&[TopologySelectorTerm]>) -> Self {
        let Some(terms) = terms.filter(|t| !t.is_empty()) else {
            return Self { terms: None };
        };
        let compiled = terms
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                let exprs = t.match_label_expressions.as_deref().unwrap_or_default();
                if exprs.is_empty() {
                    return None;
                }
                exprs
                    .iter()
                    .enumerate()
                    .map(|(j, e)| {
                        Requirement::new(
                            &e.key,
                            "In",
                            &e.values,
                            false,
                            &format!("allowedTopologies[{i}].matchLabelExpressions[{j}]"),
                        )
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .ok()
            })
            .collect();
        Self {
            terms: Some(compiled),
        }
    }

    /// Whether a node with these labels is in the allowed topology.
    pub fn matches(&self, labels: &Labels) -> bool {
        match &self.terms {
            None => true,
            Some(terms) => terms.iter().any(|t| t.iter().all(|r| r.matches(labels))),
        }
    }
}
