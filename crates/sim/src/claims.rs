//! The in-memory cluster's part of dynamic resource allocation: it plays the
//! resource-claim controller (a pod's `resourceClaimTemplateName` entry gets a claim named
//! as the controller names it, `<pod>-<claim>-<5 random characters>`, recorded in the pod's
//! `status.resourceClaimStatuses`) and applies the scheduler's writes to claims the way the
//! API server would (resourceVersion checks, status and metadata kept apart).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kubesched_framework::ObjectStore;
use kubesched_framework::events::{ActionType, EventObject, EventResource};
use kubesched_scheduler::ClusterChange;

/// The annotation the controller puts on a generated claim: the pod's claim entry name.
pub const POD_CLAIM_NAME_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";

/// The API server's alphabet for generated name suffixes.
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Gives a claim read from a manifest what the API server would have given it.
pub fn fill_identity(claim: &mut ResourceClaim) {
    let ns = claim
        .metadata
        .namespace
        .get_or_insert_with(|| "default".into())
        .clone();
    let name = claim.metadata.name.clone().unwrap_or_default();
    if claim.metadata.uid.as_deref().is_none_or(str::is_empty) {
        claim.metadata.uid = Some(format!("claim-{ns}-{name}"));
    }
    if claim.metadata.resource_version.is_none() {
        claim.metadata.resource_version = Some("1".into());
    }
}

fn fnv(text: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// The name the controller generates: `<pod>-<claim>-` (both truncated in proportion when
/// longer than 57 characters) and five characters from the API server's alphabet, here
/// derived from the pod's UID so runs are reproducible.
pub fn generated_claim_name(pod_name: &str, claim_name: &str, pod_uid: &str) -> String {
    let mut base = format!("{pod_name}-{claim_name}-");
    const MAX_BASE: usize = 57;
    if base.len() > MAX_BASE {
        let total = base.len();
        let p = &pod_name[..floor_char_boundary(pod_name, pod_name.len() * MAX_BASE / total)];
        let c = &claim_name[..floor_char_boundary(claim_name, claim_name.len() * MAX_BASE / total)];
        base = format!("{p}-{c}-");
    }
    let mut h = fnv(&format!("{pod_uid}/{claim_name}"));
    for _ in 0..5 {
        base.push(SUFFIX_ALPHABET[(h % SUFFIX_ALPHABET.len() as u64) as usize] as char);
        h /= SUFFIX_ALPHABET.len() as u64;
    }
    base
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn pod_uid(pod: &api::Pod) -> String {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    pod.metadata
        .uid
        .clone()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| format!("{ns}/{name}"))
}

/// Creates the missing template claims of `pod` in `objects` and records their names in
/// the pod's status. Returns the changes to deliver (one per claim created), or None when
/// the pod needed nothing. Entries whose template does not exist yet are left for later.
pub fn generate_claims(pod: &mut api::Pod, objects: &ObjectStore) -> Option<Vec<ClusterChange>> {
    let entries = pod.spec.as_ref()?.resource_claims.clone()?;
    let ns = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let uid = pod_uid(pod);
    let mut changes = Vec::new();
    for entry in entries {
        let Some(template_name) = &entry.resource_claim_template_name else {
            continue;
        };
        let statuses = pod
            .status
            .get_or_insert_with(Default::default)
            .resource_claim_statuses
            .get_or_insert_with(Vec::new);
        if statuses.iter().any(|s| s.name == entry.name) {
            continue;
        }
        let Some(template) = objects
            .resource_claim_templates
            .get(Some(&ns), template_name)
        else {
            continue;
        };
        let claim = claim_from_template(&template, &entry.name, &ns, &pod_name, &uid);
        let claim_name = claim.metadata.name.clone().unwrap_or_default();
        statuses.push(api::PodResourceClaimStatus {
            name: entry.name.clone(),
            resource_claim_name: Some(claim_name),
        });
        let new = Arc::new(claim.clone());
        objects.resource_claims.upsert(claim);
        changes.push(ClusterChange::Other {
            resource: EventResource::ResourceClaim,
            action: ActionType::ADD,
            old: None,
            new: Some(EventObject::Object(new)),
        });
    }
    (!changes.is_empty()).then_some(changes)
}

fn claim_from_template(
    template: &ResourceClaimTemplate,
    entry: &str,
    ns: &str,
    pod_name: &str,
    pod_uid: &str,
) -> ResourceClaim {
    let tspec = template.spec.clone().unwrap_or_default();
    let tmeta = tspec.metadata.unwrap_or_default();
    let name = generated_claim_name(pod_name, entry, pod_uid);
    let mut annotations = tmeta.annotations.unwrap_or_default();
    annotations.insert(POD_CLAIM_NAME_ANNOTATION.into(), entry.to_string());
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.to_string()),
            uid: Some(format!("claim-{ns}-{name}")),
            resource_version: Some("1".into()),
            labels: tmeta.labels,
            annotations: Some(annotations.into_iter().collect::<BTreeMap<_, _>>()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: pod_name.to_string(),
                uid: pod_uid.to_string(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        spec: tspec.spec,
        status: None,
    }
}

/// The API server's answer to a write based on a stale copy.
pub fn conflict_message(name: &str) -> String {
    format!(
        "Operation cannot be fulfilled on resourceclaims.resource.k8s.io \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
    )
}

/// The next resourceVersion after `claim`'s.
pub fn next_version(claim: &ResourceClaim) -> String {
    let v: u64 = claim
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (v + 1).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_follow_the_controller() {
        let n = generated_claim_name("train-0", "gpus", "uid-1");
        assert!(n.starts_with("train-0-gpus-"), "{n}");
        assert_eq!(n.len(), "train-0-gpus-".len() + 5);
        assert_eq!(
            n,
            generated_claim_name("train-0", "gpus", "uid-1"),
            "reproducible"
        );
        let long = generated_claim_name(&"p".repeat(60), &"c".repeat(20), "u");
        assert!(long.len() <= 63, "{long}");
        assert!(long.contains("-ccc"), "both parts keep a share: {long}");
    }
}
