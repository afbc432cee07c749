//! Reserve, Unreserve and PreBind: upstream's `AssumePodVolumes`,
//! `RevertAssumedPodVolumes` and `BindPodVolumes`.
//!
//! Reserve lays the node's bindings over the assume cache so the next pod sees the volumes
//! taken and the claims given a node. PreBind writes them to the API (a volume's claimRef
//! for a static binding, a claim's `volume.kubernetes.io/selected-node` for provisioning)
//! and waits, watching the object store, until the PV controller has bound every claim.

use std::sync::Arc;
use std::time::Duration;

use kubesched_framework::model::Labels;
use kubesched_framework::model::k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim,
};
use kubesched_framework::{ClientError, ClusterClient, ObjectStore};

use crate::assume_cache::AssumeCache;
use crate::claims::{PodClaims, PodVolumes};
use crate::volume::{
    ANN_SELECTED_NODE, NodeAffinity, bind_volume_to_claim, claim_key, claim_volume_name,
    is_fully_bound, resource_version, selected_node,
};

/// Upstream's error when the wait for the PV controller runs out.
pub const ERR_BIND_TIMEOUT: &str = "binding volumes: context deadline exceeded";

/// How often the wait looks again when the store sends no news (upstream polls every second).
const RECHECK: Duration = Duration::from_secs(1);

/// A static binding as assumed: the volume with its claimRef set, and the claim.
#[derive(Debug, Clone)]
pub struct Binding {
    /// The volume as it is to be written.
    pub pv: Arc<PersistentVolume>,
    /// The claim it binds.
    pub pvc: Arc<PersistentVolumeClaim>,
}

/// What Reserve decided for the pod on its node.
#[derive(Debug, Clone, Default)]
pub struct Reserved {
    /// Every claim was already bound: PreBind has nothing to do.
    pub all_bound: bool,
    /// The node's labels when the pod was reserved (to check the bound volumes' affinity).
    pub node_labels: Option<Labels>,
    /// Volumes to bind.
    pub bindings: Vec<Binding>,
    /// Claims to provision, with the selected node set.
    pub provisions: Vec<Arc<PersistentVolumeClaim>>,
}

/// The two assume caches.
#[derive(Debug)]
pub struct Caches {
    /// PersistentVolumes.
    pub pvs: AssumeCache<PersistentVolume>,
    /// PersistentVolumeClaims.
    pub pvcs: AssumeCache<PersistentVolumeClaim>,
}

impl Caches {
    /// Caches over `objects`.
    pub fn new(objects: &Arc<ObjectStore>) -> Self {
        Self {
            pvs: AssumeCache::new("v1.PersistentVolume", objects.clone(), |o| {
                &o.persistent_volumes
            }),
            pvcs: AssumeCache::new("v1.PersistentVolumeClaim", objects.clone(), |o| {
                &o.persistent_volume_claims
            }),
        }
    }

    fn revert(&self, bindings: &[Binding], provisions: &[Arc<PersistentVolumeClaim>]) {
        for b in bindings {
            self.pvs
                .restore(b.pv.metadata.name.as_deref().unwrap_or_default());
        }
        for c in provisions {
            self.pvcs.restore(&claim_key(c));
        }
    }

    /// Upstream's `AssumePodVolumes`.
    pub fn assume(
        &self,
        claims: &PodClaims,
        volumes: &PodVolumes,
        node_name: &str,
    ) -> Result<Reserved, String> {
        let mut bindings = Vec::with_capacity(volumes.static_bindings.len());
        for (i, pv) in &volumes.static_bindings {
            let pvc = claims.delayed[*i].pvc.clone();
            let (new_pv, dirty) = bind_volume_to_claim(pv, &pvc);
            if dirty && let Err(e) = self.pvs.assume(new_pv.clone()) {
                self.revert(&bindings, &[]);
                return Err(e);
            }
            bindings.push(Binding {
                pv: Arc::new(new_pv),
                pvc,
            });
        }
        let mut provisions = Vec::with_capacity(volumes.provisions.len());
        for i in &volumes.provisions {
            let mut claim = (*claims.delayed[*i].pvc).clone();
            claim
                .metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(ANN_SELECTED_NODE.into(), node_name.into());
            if let Err(e) = self.pvcs.assume(claim.clone()) {
                self.revert(&bindings, &provisions);
                return Err(e);
            }
            provisions.push(Arc::new(claim));
        }
        Ok(Reserved {
            all_bound: false,
            node_labels: None,
            bindings,
            provisions,
        })
    }

    /// Upstream's `RevertAssumedPodVolumes`.
    pub fn unreserve(&self, reserved: &Reserved) {
        self.revert(&reserved.bindings, &reserved.provisions);
    }

    /// Upstream's `BindPodVolumes`: the API writes, then the wait for the PV controller.
    pub async fn bind(
        &self,
        client: &dyn ClusterClient,
        objects: &ObjectStore,
        reserved: &Reserved,
        node_name: &str,
        timeout: Duration,
    ) -> Result<(), String> {
        // Subscribe before writing so no change of ours or the controller's is missed.
        let mut pv_changes = objects.persistent_volumes.subscribe();
        let mut pvc_changes = objects.persistent_volume_claims.subscribe();
        let (bindings, provisions) = self.write(client, reserved).await?;
        if timeout.is_zero() {
            // Upstream's poll gives up before its first look.
            return Err(ERR_BIND_TIMEOUT.into());
        }
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match self.check(reserved, &bindings, &provisions, node_name) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => return Err(format!("binding volumes: {e}")),
            }
            tokio::select! {
                _ = pv_changes.changed() => {}
                _ = pvc_changes.changed() => {}
                _ = tokio::time::sleep(RECHECK) => {}
                _ = tokio::time::sleep_until(deadline) => return Err(ERR_BIND_TIMEOUT.into()),
            }
        }
    }

    /// Upstream's `bindAPIUpdate`: writes each volume's claimRef, then each claim's selected
    /// node, keeping what the API returned for the wait; on a failure the assumed changes
    /// not yet written are dropped.
    async fn write(
        &self,
        client: &dyn ClusterClient,
        reserved: &Reserved,
    ) -> Result<(Vec<Binding>, Vec<Arc<PersistentVolumeClaim>>), String> {
        let mut bindings = Vec::with_capacity(reserved.bindings.len());
        for (k, b) in reserved.bindings.iter().enumerate() {
            match client.update_persistent_volume(&b.pv).await {
                Ok(pv) => bindings.push(Binding {
                    pv: Arc::new(pv),
                    pvc: b.pvc.clone(),
                }),
                Err(e) => {
                    self.revert(&reserved.bindings[k..], &reserved.provisions);
                    return Err(api_message(&e));
                }
            }
        }
        let mut provisions = Vec::with_capacity(reserved.provisions.len());
        for (k, c) in reserved.provisions.iter().enumerate() {
            match client.update_persistent_volume_claim(c).await {
                Ok(pvc) => provisions.push(Arc::new(pvc)),
                Err(e) => {
                    self.revert(&[], &reserved.provisions[k..]);
                    return Err(api_message(&e));
                }
            }
        }
        Ok((bindings, provisions))
    }

    /// Upstream's `checkBindings`, on the API's objects: Ok(true) when every claim the pod
    /// waits for is fully bound, Ok(false) to wait on, an error when binding cannot succeed
    /// any more.
    fn check(
        &self,
        reserved: &Reserved,
        bindings: &[Binding],
        provisions: &[Arc<PersistentVolumeClaim>],
        node_name: &str,
    ) -> Result<bool, String> {
        let Some(labels) = &reserved.node_labels else {
            return Err(format!(
                "failed to get node {node_name:?}: node {node_name:?} not found"
            ));
        };
        for b in bindings {
            let name = b.pv.metadata.name.as_deref().unwrap_or_default();
            let pv = self.pvs.get_api(name).ok_or_else(|| {
                format!("failed to check binding: could not find v1.PersistentVolume {name:?}")
            })?;
            let key = claim_key(&b.pvc);
            let pvc = self.pvcs.get_api(&key).ok_or_else(|| {
                format!("failed to check binding: could not find v1.PersistentVolumeClaim {key:?}")
            })?;
            if older(
                &pv.metadata.resource_version,
                &b.pv.metadata.resource_version,
            ) {
                return Ok(false);
            }
            if !NodeAffinity::of(&pv).matches(labels) {
                return Err(format!(
                    "pv {name:?} node affinity doesn't match node {node_name:?}: no matching NodeSelectorTerms"
                ));
            }
            let claim_ref_uid = pv
                .spec
                .as_ref()
                .and_then(|s| s.claim_ref.as_ref())
                .and_then(|r| r.uid.as_deref());
            if claim_ref_uid.is_none_or(str::is_empty) {
                return Err(format!("ClaimRef got reset for pv {name:?}"));
            }
            if !is_fully_bound(&pvc) {
                return Ok(false);
            }
        }
        for c in provisions {
            let key = claim_key(c);
            let pvc = self.pvcs.get_api(&key).ok_or_else(|| {
                format!(
                    "failed to check provisioning pvc: could not find v1.PersistentVolumeClaim {key:?}"
                )
            })?;
            if older(&pvc.metadata.resource_version, &c.metadata.resource_version) {
                return Ok(false);
            }
            let name = pvc.metadata.name.as_deref().unwrap_or_default();
            if pvc.metadata.annotations.is_none() {
                return Err(format!("selectedNode annotation reset for PVC {name:?}"));
            }
            if selected_node(&pvc) != Some(node_name) {
                // The provisioner gave up and took the annotation away: schedule again.
                return Err(format!("provisioning failed for PVC {name:?}"));
            }
            let volume = claim_volume_name(&pvc);
            if !volume.is_empty() {
                // The volume may not have reached us yet; look again later.
                let Some(pv) = self.pvs.get_api(volume) else {
                    return Ok(false);
                };
                if !NodeAffinity::of(&pv).matches(labels) {
                    return Err(format!(
                        "pv {volume:?} node affinity doesn't match node {node_name:?}: no matching NodeSelectorTerms"
                    ));
                }
            }
            if !is_fully_bound(&pvc) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Whether the store's copy is older than the one the API returned to our write.
fn older(store: &Option<String>, written: &Option<String>) -> bool {
    match (
        resource_version(store.as_deref()),
        resource_version(written.as_deref()),
    ) {
        (Some(s), Some(w)) => w > s,
        _ => false,
    }
}

/// The API server's own words, as upstream passes a client error on.
fn api_message(e: &ClientError) -> String {
    e.message().to_string()
}
