//! A pod's claims as PreFilter sorts them (upstream's `GetPodVolumeClaims`), compiled so
//! that Filter's per-node work (upstream's `FindPodVolumes`) is label matching only: the
//! volumes each unbound claim could take and whether its class can provision are decided
//! once per pod, and only node affinity, allowed topologies and capacity pools are checked
//! per node.

use std::collections::BTreeSet;
use std::sync::Arc;

use kubesched_framework::ObjectStore;
use kubesched_framework::model::k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, Pod,
};
use kubesched_framework::model::k8s_openapi::api::storage::v1::CSIStorageCapacity;
use kubesched_framework::model::{LabelSelector, Labels};

use crate::assume_cache::AssumeCache;
use crate::volume::{
    AllowedTopologies, NOT_SUPPORTED_PROVISIONER, NodeAffinity, WAIT_FOR_FIRST_CONSUMER,
    access_modes_fit, attributes_class_mismatch, claim_class, claim_volume_name, has_claim_ref,
    is_fully_bound, is_volume_bound_to_claim, pinned_hostnames, pod_claims, quantity_nanos,
    requested_storage, requests_storage, selected_node, volume_capacity, volume_class,
    volume_mode_mismatch, volume_phase,
};
use crate::{
    ERR_REASON_BIND_CONFLICT, ERR_REASON_NODE_CONFLICT, ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
};

/// A claim bound to a volume.
#[derive(Debug)]
pub struct BoundClaim {
    /// The claim.
    pub pvc: Arc<PersistentVolumeClaim>,
    /// Its volume's node affinity; None when the volume does not exist.
    pub affinity: Option<NodeAffinity>,
}

/// A volume an unbound claim may take, with its compiled node affinity.
#[derive(Debug)]
pub struct Candidate {
    /// The volume as the assume cache had it in PreFilter.
    pub pv: Arc<PersistentVolume>,
    /// Its node affinity.
    pub affinity: NodeAffinity,
}

/// The volumes an unbound claim may take (upstream's `FindMatchingVolume` minus the
/// per-node checks).
#[derive(Debug, Default)]
pub struct Matching {
    /// Volumes already bound to this claim by their claimRef, in list order: the first
    /// one decides, whatever its size.
    pub prebound: Vec<Candidate>,
    /// Available volumes that fit the claim, smallest first (list order among equals).
    pub candidates: Vec<Candidate>,
}

/// Whether and where an unbound claim's class can provision a volume.
#[derive(Debug)]
pub enum Provisioning {
    /// The claim cannot be looked at (no class, or the class is gone): an error.
    Error(String),
    /// The class has no provisioner.
    Unsupported,
    /// The class provisions on nodes in `topology`; `capacity` lists the CSIStorageCapacity
    /// pools large enough, when the driver tracks capacity.
    Possible {
        /// `allowedTopologies`.
        topology: AllowedTopologies,
        /// None: no capacity check. Some: a node needs one pool whose topology it matches.
        capacity: Option<Vec<CapacityPool>>,
    },
}

/// A CSIStorageCapacity pool large enough for a claim.
#[derive(Debug)]
pub struct CapacityPool {
    /// The nodes that reach it (`nodeTopology`).
    pub topology: LabelSelector,
    /// Its `capacity` (nano units; zero when only `maximumVolumeSize` is set), which
    /// StorageCapacityScoring scores against.
    pub capacity: i128,
}

/// An unbound claim of a WaitForFirstConsumer class.
#[derive(Debug)]
pub struct DelayedClaim {
    /// The claim (as the assume cache had it).
    pub pvc: Arc<PersistentVolumeClaim>,
    /// `namespace/name`.
    pub key: String,
    /// The node it is already being provisioned for.
    pub selected_node: Option<String>,
    /// Volumes it may take; an error when its selector does not compile. Empty for
    /// claims with a selected node (they only provision).
    pub matching: Result<Matching, String>,
    /// How it provisions.
    pub provisioning: Provisioning,
}

/// The pod's claims, sorted as upstream's `PodVolumeClaims`.
#[derive(Debug, Default)]
pub struct PodClaims {
    /// Fully bound claims, in volume order.
    pub bound: Vec<BoundClaim>,
    /// Unbound WaitForFirstConsumer claims, in volume order.
    pub delayed: Vec<DelayedClaim>,
    /// Indices into `delayed` of the claims without a selected node, by increasing request.
    pub to_match: Vec<usize>,
    /// Whether some claim is unbound with Immediate binding (PreFilter rejects the pod).
    pub unbound_immediate: bool,
}

/// What Filter found for a pod on one node: upstream's `PodVolumes`.
#[derive(Debug, Clone, Default)]
pub struct PodVolumes {
    /// `(index into delayed, volume)` for claims bound to existing volumes.
    pub static_bindings: Vec<(usize, Arc<PersistentVolume>)>,
    /// Indices into `delayed` of claims to provision.
    pub provisions: Vec<usize>,
    /// Aligned with `provisions`: the capacity of the pool each is provisioned from, when
    /// the driver tracks capacity (upstream's `DynamicProvision.NodeCapacity`).
    pub provision_capacities: Vec<Option<i128>>,
}

impl PodVolumes {
    /// Whether nothing is to be bound or provisioned.
    pub fn is_empty(&self) -> bool {
        self.static_bindings.is_empty() && self.provisions.is_empty()
    }
}

/// Upstream's `IsDelayBindingMode`: a claim without a class, or whose class does not exist,
/// binds immediately; a class without a binding mode is an error (the API server always
/// sets one).
fn delays_binding(pvc: &PersistentVolumeClaim, objects: &ObjectStore) -> Result<bool, String> {
    let class = claim_class(pvc);
    if class.is_empty() {
        return Ok(false);
    }
    let Some(sc) = objects.storage_classes.get(None, class) else {
        return Ok(false);
    };
    match sc.volume_binding_mode.as_deref() {
        None => Err(format!(
            "VolumeBindingMode not set for StorageClass {class:?}"
        )),
        Some(mode) => Ok(mode == WAIT_FOR_FIRST_CONSUMER),
    }
}

/// Sorts the pod's claims; an error (upstream's) for a claim that cannot be read.
pub fn pod_volume_claims(
    pod: &Pod,
    namespace: &str,
    pvcs: &AssumeCache<PersistentVolumeClaim>,
    pvs: &AssumeCache<PersistentVolume>,
    objects: &ObjectStore,
) -> Result<PodClaims, String> {
    let mut out = PodClaims::default();
    for (name, _) in pod_claims(pod) {
        let key = format!("{namespace}/{name}");
        let Some(pvc) = pvcs.get(&key) else {
            return Err(format!(
                "error getting PVC {key:?}: could not find v1.PersistentVolumeClaim {key:?}"
            ));
        };
        if is_fully_bound(&pvc) {
            let affinity = pvs
                .get(claim_volume_name(&pvc))
                .map(|pv| NodeAffinity::of(&pv));
            out.bound.push(BoundClaim { pvc, affinity });
            continue;
        }
        // A claim pre-bound to a volume by name is the PV controller's to finish.
        if delays_binding(&pvc, objects)? && claim_volume_name(&pvc).is_empty() {
            out.delayed.push(DelayedClaim {
                key,
                selected_node: selected_node(&pvc).map(str::to_string),
                pvc,
                matching: Ok(Matching::default()),
                provisioning: Provisioning::Unsupported,
            });
        } else {
            out.unbound_immediate = true;
        }
    }
    if out.unbound_immediate || out.delayed.is_empty() {
        return Ok(out);
    }
    // The volumes of the classes the unbound claims ask for, as one listing.
    let classes: BTreeSet<&str> = out.delayed.iter().map(|c| claim_class(&c.pvc)).collect();
    let volumes: Vec<Arc<PersistentVolume>> = pvs
        .list()
        .into_iter()
        .filter(|pv| classes.contains(volume_class(pv)))
        .collect();
    for claim in &mut out.delayed {
        claim.provisioning = provisioning(&claim.pvc, &claim.key, objects);
        if claim.selected_node.is_none() {
            claim.matching = matching(&claim.pvc, &claim.key, &volumes);
        }
    }
    let mut to_match: Vec<usize> = (0..out.delayed.len())
        .filter(|&i| out.delayed[i].selected_node.is_none())
        .collect();
    to_match.sort_by_key(|&i| requested_storage(&out.delayed[i].pvc));
    out.to_match = to_match;
    Ok(out)
}

/// The node names the bound claims' volumes pin by hostname (upstream's
/// `GetEligibleNodes`); None when they pin none or a volume is missing.
pub fn eligible_nodes(
    claims: &PodClaims,
    pvs: &AssumeCache<PersistentVolume>,
) -> Option<BTreeSet<String>> {
    let mut eligible: Option<BTreeSet<String>> = None;
    for b in &claims.bound {
        let pv = pvs.get(claim_volume_name(&b.pvc))?;
        if let Some(names) = pinned_hostnames(&pv) {
            let names: BTreeSet<String> = names.into_iter().collect();
            eligible = Some(match eligible {
                None => names,
                Some(prev) => prev.intersection(&names).cloned().collect(),
            });
        }
    }
    eligible
}

/// The volumes `pvc` may take among `volumes` (already those of its class), before node
/// affinity: upstream's `FindMatchingVolume` checks in its order.
fn matching(
    pvc: &PersistentVolumeClaim,
    key: &str,
    volumes: &[Arc<PersistentVolume>],
) -> Result<Matching, String> {
    let selector = match pvc.spec.as_ref().and_then(|s| s.selector.as_ref()) {
        None => None,
        Some(sel) => Some(
            LabelSelector::compile(Some(sel), "spec.selector").map_err(|e| {
                format!("error creating internal label selector for claim: {key}: {e}")
            })?,
        ),
    };
    let requested = requested_storage(pvc);
    let class = claim_class(pvc);
    let mut out = Matching::default();
    let mut sized: Vec<(i128, usize, Candidate)> = Vec::new();
    for (i, pv) in volumes.iter().enumerate() {
        if has_claim_ref(pv) && !is_volume_bound_to_claim(pv, pvc) {
            continue;
        }
        let capacity = volume_capacity(pv);
        if capacity < requested
            || volume_mode_mismatch(pvc, pv)
            || attributes_class_mismatch(pvc, pv)
            || pv.metadata.deletion_timestamp.is_some()
        {
            continue;
        }
        let candidate = Candidate {
            pv: pv.clone(),
            affinity: NodeAffinity::of(pv),
        };
        if is_volume_bound_to_claim(pv, pvc) {
            out.prebound.push(candidate);
            continue;
        }
        let labels = pv.metadata.labels.clone().unwrap_or_default();
        if volume_phase(pv) != "Available"
            || selector.as_ref().is_some_and(|s| !s.matches(&labels))
            || volume_class(pv) != class
            || !access_modes_fit(pvc, pv)
        {
            continue;
        }
        sized.push((capacity, i, candidate));
    }
    sized.sort_by_key(|(capacity, i, _)| (*capacity, *i));
    out.candidates = sized.into_iter().map(|(_, _, c)| c).collect();
    Ok(out)
}

/// `maximumVolumeSize` when set (it is the more precise), else `capacity`.
pub fn volume_limit(capacity: &CSIStorageCapacity) -> Option<i128> {
    capacity
        .maximum_volume_size
        .as_ref()
        .or(capacity.capacity.as_ref())
        .map(|q| quantity_nanos(&q.0))
}

/// How `pvc`'s class provisions (upstream's `checkVolumeProvisions` and
/// `hasEnoughCapacity` before the per-node checks).
fn provisioning(pvc: &PersistentVolumeClaim, key: &str, objects: &ObjectStore) -> Provisioning {
    let class = claim_class(pvc);
    if class.is_empty() {
        return Provisioning::Error(format!("no class for claim {key:?}"));
    }
    let Some(sc) = objects.storage_classes.get(None, class) else {
        return Provisioning::Error(format!("failed to find storage class {class:?}"));
    };
    let provisioner = sc.provisioner.as_str();
    if provisioner.is_empty() || provisioner == NOT_SUPPORTED_PROVISIONER {
        return Provisioning::Unsupported;
    }
    let topology = AllowedTopologies::compile(sc.allowed_topologies.as_deref());
    let tracks_capacity = requests_storage(pvc)
        && objects
            .csi_drivers
            .get(None, provisioner)
            .is_some_and(|d| d.spec.storage_capacity == Some(true));
    let capacity = tracks_capacity.then(|| {
        let size = requested_storage(pvc);
        objects
            .csi_storage_capacities
            .list()
            .iter()
            .filter(|c| c.storage_class_name == class)
            .filter(|c| volume_limit(c).is_some_and(|limit| limit >= size))
            .filter_map(|c| {
                // A pool without a topology is reachable from no node.
                let topology = c.node_topology.as_ref()?;
                let topology = LabelSelector::compile(Some(topology), "nodeTopology")
                    .inspect_err(|e| {
                        tracing::warn!(capacity = ?c.metadata.name, error = %e, "unusable CSIStorageCapacity nodeTopology");
                    })
                    .ok()?;
                let capacity = c.capacity.as_ref().map_or(0, |q| quantity_nanos(&q.0));
                Some(CapacityPool { topology, capacity })
            })
            .collect()
    });
    Provisioning::Possible { topology, capacity }
}

/// The reasons a node fails the pod's claims, in upstream's order.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Conflicts {
    /// A bound claim's volume does not accept the node.
    pub node_conflict: bool,
    /// An unbound claim has neither a volume nor a way to provision on the node.
    pub bind_conflict: bool,
    /// A capacity pool reachable from the node is too small.
    pub not_enough_space: bool,
    /// A bound claim's volume does not exist.
    pub pv_not_exist: bool,
}

impl Conflicts {
    /// The reason strings, in upstream's order.
    pub fn reasons(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.node_conflict {
            out.push(ERR_REASON_NODE_CONFLICT);
        }
        if self.bind_conflict {
            out.push(ERR_REASON_BIND_CONFLICT);
        }
        if self.not_enough_space {
            out.push(ERR_REASON_NOT_ENOUGH_SPACE);
        }
        if self.pv_not_exist {
            out.push(ERR_REASON_PV_NOT_EXIST);
        }
        out
    }

    /// Whether the node is fine.
    pub fn none(&self) -> bool {
        *self == Self::default()
    }
}

impl PodClaims {
    /// Upstream's `FindPodVolumes` on one node: what would be bound or provisioned there,
    /// or why the node does not fit; an error for a claim that cannot be looked at.
    pub fn find_pod_volumes(
        &self,
        node_name: &str,
        labels: &Labels,
    ) -> Result<(PodVolumes, Conflicts), String> {
        let mut conflicts = Conflicts::default();
        let mut volumes = PodVolumes::default();
        for b in &self.bound {
            match &b.affinity {
                None => {
                    conflicts.pv_not_exist = true;
                    break;
                }
                Some(a) if !a.matches(labels) => {
                    conflicts.node_conflict = true;
                    break;
                }
                Some(_) => {}
            }
        }
        if self.delayed.is_empty() {
            return Ok((volumes, conflicts));
        }
        // A claim already being provisioned for another node rules this one out.
        if self
            .delayed
            .iter()
            .any(|c| c.selected_node.as_deref().is_some_and(|n| n != node_name))
        {
            conflicts.bind_conflict = true;
            return Ok((volumes, conflicts));
        }
        let mut to_provision: Vec<usize> = (0..self.delayed.len())
            .filter(|&i| self.delayed[i].selected_node.is_some())
            .collect();
        let mut all_matched = true;
        for &i in &self.to_match {
            let matching = self.delayed[i].matching.as_ref().map_err(Clone::clone)?;
            match self.find_matching_volume(matching, &volumes, labels) {
                Some(pv) => volumes.static_bindings.push((i, pv)),
                None => {
                    all_matched = false;
                    to_provision.push(i);
                }
            }
        }
        conflicts.bind_conflict = !all_matched;
        if !to_provision.is_empty() {
            let (provisionable, enough, capacities) =
                self.check_provisions(&to_provision, labels)?;
            conflicts.bind_conflict = !provisionable;
            conflicts.not_enough_space = !enough;
            if provisionable && enough {
                volumes.provisions = to_provision;
                volumes.provision_capacities = capacities;
            }
        }
        Ok((volumes, conflicts))
    }

    /// The volume a claim takes on a node, skipping volumes already chosen for the pod's
    /// other claims.
    fn find_matching_volume(
        &self,
        matching: &Matching,
        chosen: &PodVolumes,
        labels: &Labels,
    ) -> Option<Arc<PersistentVolume>> {
        let taken = |c: &Candidate| {
            chosen
                .static_bindings
                .iter()
                .any(|(_, pv)| pv.metadata.name == c.pv.metadata.name)
        };
        // A volume bound to the claim decides alone: if the node does not suit it, nothing
        // matches.
        if let Some(c) = matching.prebound.iter().find(|c| !taken(c)) {
            return c.affinity.matches(labels).then(|| c.pv.clone());
        }
        matching
            .candidates
            .iter()
            .find(|c| !taken(c) && c.affinity.matches(labels))
            .map(|c| c.pv.clone())
    }

    /// Upstream's `checkVolumeProvisions` on one node: (provisionable, enough capacity,
    /// the capacity of the pool each claim would use), the first claim that fails deciding.
    fn check_provisions(
        &self,
        claims: &[usize],
        labels: &Labels,
    ) -> Result<(bool, bool, Vec<Option<i128>>), String> {
        let mut capacities = Vec::with_capacity(claims.len());
        for &i in claims {
            match &self.delayed[i].provisioning {
                Provisioning::Error(e) => return Err(e.clone()),
                Provisioning::Unsupported => return Ok((false, true, Vec::new())),
                Provisioning::Possible { topology, capacity } => {
                    if !topology.matches(labels) {
                        return Ok((false, true, Vec::new()));
                    }
                    match capacity {
                        None => capacities.push(None),
                        // The first reachable pool, as upstream's `hasEnoughCapacity`.
                        Some(pools) => match pools.iter().find(|p| p.topology.matches(labels)) {
                            Some(pool) => capacities.push(Some(pool.capacity)),
                            None => return Ok((true, false, Vec::new())),
                        },
                    }
                }
            }
        }
        Ok((true, true, capacities))
    }
}

/// The claim keys a pod's volumes name, for the queueing hints.
pub fn claim_names(pod: &Pod) -> impl Iterator<Item = String> + '_ {
    pod_claims(pod).map(|(name, _)| name)
}

/// Whether every claim of the pod is fully bound in the assume cache (upstream's
/// `arePodVolumesBound`; a claim that cannot be read counts as unbound).
pub fn all_bound(pod: &Pod, namespace: &str, pvcs: &AssumeCache<PersistentVolumeClaim>) -> bool {
    pod_claims(pod).all(|(name, _)| {
        pvcs.get(&format!("{namespace}/{name}"))
            .is_some_and(|c| is_fully_bound(&c))
    })
}
