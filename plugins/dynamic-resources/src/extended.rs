//! Extended resources backed by DRA (KEP-5004, `DRAExtendedResource`, GA in v1.37): a
//! pod's `resources.requests` for an extended resource a DeviceClass names
//! (`spec.extendedResourceName`, or the implicit `deviceclass.resource.kubernetes.io/<class>`)
//! are met by devices of that class on a node that does not advertise the resource. The
//! plugin allocates them as one claim per pod that exists only in memory until PreBind
//! creates it (generated name `<pod>-extended-resources-`, the pod as controller, the
//! annotation [`EXTENDED_RESOURCE_CLAIM_ANNOTATION`]) and records it in the pod's
//! `status.extendedResourceClaimStatus`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kubesched_framework::model::PodInfo;
use kubesched_framework::model::k8s_openapi::api::core::v1::{
    Container, ContainerExtendedResourceRequest,
};
use kubesched_framework::model::k8s_openapi::api::resource::v1::{
    DeviceClaim, DeviceClass, DeviceRequest, ExactDeviceRequest, ResourceClaim, ResourceClaimSpec,
};
use kubesched_framework::model::k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    ObjectMeta, OwnerReference,
};
use kubesched_framework::model::resource::is_extended_resource_name;
use kubesched_framework::model::resource::parse_quantity;

/// The name of the claim while it exists only in memory (not a valid object name, so it
/// cannot clash with a real claim).
pub const IN_MEMORY_NAME: &str = "<extended-resources>";
/// The annotation marking the claim made for a pod's extended resources.
pub const EXTENDED_RESOURCE_CLAIM_ANNOTATION: &str =
    "resource.kubernetes.io/extended-resource-claim";
/// Every DeviceClass's implicit extended resource name: this prefix and the class name.
pub const DEVICE_CLASS_RESOURCE_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// Whether `name` can be an extended resource backed by DRA (upstream's
/// `IsDRAExtendedResourceName`).
pub fn is_dra_extended_resource_name(name: &str) -> bool {
    is_extended_resource_name(name) || name.starts_with(DEVICE_CLASS_RESOURCE_PREFIX)
}

/// The class that provides the extended resource `name`: the class of the implicit name,
/// else the class naming it in `spec.extendedResourceName` (of several, the one created
/// last; of those created at the same time, the first by name).
pub fn class_for(classes: &[Arc<DeviceClass>], name: &str) -> Option<String> {
    if let Some(class) = name.strip_prefix(DEVICE_CLASS_RESOURCE_PREFIX)
        && classes
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some(class))
    {
        return Some(class.to_string());
    }
    classes
        .iter()
        .filter(|c| {
            c.spec
                .as_ref()
                .and_then(|s| s.extended_resource_name.as_deref())
                == Some(name)
        })
        .max_by(|a, b| {
            let created = |c: &DeviceClass| c.metadata.creation_timestamp.as_ref().map(|t| t.0);
            created(a).cmp(&created(b)).then_with(|| {
                // Reversed: the smaller name wins a tie.
                b.metadata.name.cmp(&a.metadata.name)
            })
        })
        .and_then(|c| c.metadata.name.clone())
}

/// The pod's extended resources a class provides, with their quantities and classes.
#[derive(Debug, Clone, Default)]
pub struct PodExtended {
    /// Every DRA-extended resource the pod requests (non-zero), by name, with the class
    /// that provides it (None: no class does).
    pub requests: BTreeMap<String, (i64, Option<String>)>,
}

impl PodExtended {
    /// What the pod asks for, or None when no class provides any of its requests.
    pub fn of(pod: &PodInfo, classes: &[Arc<DeviceClass>]) -> Option<Self> {
        let mut requests = BTreeMap::new();
        let mut backed = false;
        for (name, &q) in &pod.requests.scalar {
            if q == 0 || !is_dra_extended_resource_name(name) {
                continue;
            }
            let class = class_for(classes, name);
            backed |= class.is_some();
            requests.insert(name.clone(), (q, class));
        }
        backed.then_some(Self { requests })
    }
}

/// The claim a previous attempt created for the pod: annotated, with the pod as
/// controlling owner.
pub fn find_claim(claims: &[Arc<ResourceClaim>], pod: &PodInfo) -> Option<Arc<ResourceClaim>> {
    claims
        .iter()
        .find(|c| {
            c.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION))
                .is_some_and(|v| v == "true")
                && c.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.name == pod.name && o.controller == Some(true) && o.uid == pod.uid)
        })
        .cloned()
}

static TEMPORARY_UIDS: AtomicU64 = AtomicU64::new(0);

/// The claim in memory: no requests yet (Filter fills them per node), a temporary UID
/// for the in-flight bookkeeping.
pub fn in_memory_claim(pod: &PodInfo) -> ResourceClaim {
    let n = TEMPORARY_UIDS.fetch_add(1, Ordering::Relaxed);
    ResourceClaim {
        metadata: ObjectMeta {
            namespace: Some(pod.namespace.clone()),
            name: Some(IN_MEMORY_NAME.into()),
            uid: Some(format!("extended-resources-{}-{n}", pod.uid)),
            generate_name: Some(format!("{}-extended-resources-", pod.name)),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: pod.name.clone(),
                uid: pod.uid.clone(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            annotations: Some(BTreeMap::from([(
                EXTENDED_RESOURCE_CLAIM_ANNOTATION.to_string(),
                "true".to_string(),
            )])),
            ..Default::default()
        },
        spec: Some(ResourceClaimSpec::default()),
        status: None,
    }
}

/// Whether the claim is still the in-memory one.
pub fn is_in_memory(claim: &ResourceClaim) -> bool {
    claim.metadata.name.as_deref() == Some(IN_MEMORY_NAME)
}

/// Whether the claim has device requests (a claim made by an earlier attempt has).
pub fn has_requests(claim: &ResourceClaim) -> bool {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.devices.as_ref())
        .and_then(|d| d.requests.as_ref())
        .is_some()
}

/// The whole number a container asks for of `resource` (0 when none or not whole).
fn container_request(container: &Container, resource: &str) -> i64 {
    container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get(resource))
        .and_then(|q| parse_quantity(q, "").ok())
        .filter(|q| q.milli_value() % 1000 == 0)
        .map_or(0, |q| q.value())
}

/// One container's request for `resource` and its mappings: it uses `reusable` requests
/// (of containers that run at the same time as it, later in the list) before asking for
/// its own `container-<index>-request-<position of the resource in its sorted requests>`.
fn container_request_and_mappings(
    index: usize,
    container: &Container,
    resource: &str,
    class: &str,
    reusable: &[Option<DeviceRequest>],
) -> (Option<DeviceRequest>, Vec<ContainerExtendedResourceRequest>) {
    let want = container_request(container, resource);
    if want == 0 {
        return (None, Vec::new());
    }
    let mut mappings = Vec::new();
    let mut sum = 0;
    for r in reusable.iter().flatten() {
        sum += r.exactly.as_ref().and_then(|e| e.count).unwrap_or(0);
        mappings.push(ContainerExtendedResourceRequest {
            container_name: container.name.clone(),
            resource_name: resource.to_string(),
            request_name: r.name.clone(),
        });
        if sum >= want {
            return (None, mappings);
        }
    }
    let position = container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.keys().position(|k| k == resource))
        .unwrap_or(0);
    let name = format!("container-{index}-request-{position}");
    mappings.push(ContainerExtendedResourceRequest {
        container_name: container.name.clone(),
        resource_name: resource.to_string(),
        request_name: name.clone(),
    });
    let request = DeviceRequest {
        name,
        exactly: Some(ExactDeviceRequest {
            device_class_name: class.to_string(),
            allocation_mode: Some("ExactCount".into()),
            count: Some(want - sum),
            ..Default::default()
        }),
        first_available: None,
    };
    (Some(request), mappings)
}

/// The device requests for the resources in `needed` (resource → class) and which
/// container request each maps to, as upstream's `createRequestsAndMappings`: init
/// containers that run alone share one request (the largest) and reuse the requests of
/// containers already running; requests sorted by name.
pub fn requests_and_mappings(
    pod: &PodInfo,
    needed: &BTreeMap<String, String>,
) -> (Vec<DeviceRequest>, Vec<ContainerExtendedResourceRequest>) {
    let spec = pod.pod.spec.as_ref();
    let init = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default();
    let regular = spec.map(|s| s.containers.as_slice()).unwrap_or_default();
    let containers: Vec<&Container> = init.iter().chain(regular).collect();
    let short_lived =
        |i: usize| i < init.len() && containers[i].restart_policy.as_deref() != Some("Always");
    let mut requests = Vec::new();
    let mut mappings = Vec::new();
    for (resource, class) in needed {
        let mut long_requests: Vec<Option<DeviceRequest>> = vec![None; containers.len()];
        let mut long_mappings = Vec::new();
        for (i, c) in containers.iter().enumerate() {
            if short_lived(i) {
                continue;
            }
            let (r, m) = container_request_and_mappings(i, c, resource, class, &[]);
            long_requests[i] = r;
            long_mappings.extend(m);
        }
        let mut short_mappings: Vec<ContainerExtendedResourceRequest> = Vec::new();
        let mut short_names = Vec::new();
        let mut largest: Option<DeviceRequest> = None;
        for (i, c) in containers.iter().enumerate() {
            if !short_lived(i) {
                continue;
            }
            let (r, m) = container_request_and_mappings(i, c, resource, class, &long_requests[i..]);
            if let Some(r) = r {
                short_names.push(r.name.clone());
                let count = |r: &DeviceRequest| r.exactly.as_ref().and_then(|e| e.count);
                if largest.as_ref().is_none_or(|l| count(l) < count(&r)) {
                    largest = Some(r);
                }
            }
            short_mappings.extend(m);
        }
        if let Some(l) = &largest
            && short_names.len() > 1
        {
            for m in &mut short_mappings {
                if m.request_name != l.name && short_names.contains(&m.request_name) {
                    m.request_name = l.name.clone();
                }
            }
        }
        requests.extend(largest);
        requests.extend(long_requests.into_iter().flatten());
        mappings.extend(long_mappings);
        mappings.extend(short_mappings);
    }
    requests.sort_by(|a, b| a.name.cmp(&b.name));
    (requests, mappings)
}

/// The claim for one node: the in-memory claim with the requests `needed` there.
pub fn node_claim(
    claim: &ResourceClaim,
    pod: &PodInfo,
    needed: &BTreeMap<String, String>,
) -> (ResourceClaim, Vec<ContainerExtendedResourceRequest>) {
    let (requests, mappings) = requests_and_mappings(pod, needed);
    let mut claim = claim.clone();
    claim.spec.get_or_insert_with(Default::default).devices = Some(DeviceClaim {
        requests: Some(requests),
        ..Default::default()
    });
    (claim, mappings)
}
