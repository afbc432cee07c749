//! Extended resources backed by DRA (DRAExtendedResource, GA in v1.37): a pod's
//! `resources.requests` for an extended resource a DeviceClass names get a claim of
//! their own on nodes that do not advertise the resource; in the spirit of upstream's
//! extended-resource cases of the plugin's tests.

use super::*;
use crate::extended::{EXTENDED_RESOURCE_CLAIM_ANNOTATION, IN_MEMORY_NAME, requests_and_mappings};
use kubesched_framework::features::{FeatureGates, Version};

/// Node `n1` with four GPUs, and the class `gpu` naming `example.com/gpu`.
fn gpu_store(extended_name: Option<&str>) -> Arc<ObjectStore> {
    let objects = store_with(&["n1"], vec![]);
    let mut spec =
        json!({"selectors": [{"cel": {"expression": format!("device.driver == '{DRIVER}'")}}]});
    if let Some(n) = extended_name {
        spec["extendedResourceName"] = json!(n);
    }
    objects.device_classes.upsert(de::<DeviceClass>(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu"}, "spec": spec,
    })));
    objects
}

fn gpu_pod(resource: &str, count: &str) -> Arc<PodInfo> {
    PodBuilder::new("p")
        .uid("uid-p")
        .container(&[("cpu", "1"), (resource, count)])
        .info()
}

fn plain_node() -> Arc<NodeInfo> {
    node_info(
        NodeBuilder::new("n1").capacity(&[("cpu", "8"), ("pods", "10")]),
        &[],
    )
}

fn extended_state(state: &CycleState) -> Arc<StateInner> {
    let DraState(inner) = state.read::<DraState>().expect("state").clone();
    inner
}

/// The requests of the node's claim, as `name:class:count`.
fn node_requests(state: &CycleState, node: &str) -> Option<Vec<String>> {
    let inner = extended_state(state);
    let ext = inner.extended.as_ref()?;
    let nodes = ext.nodes.lock();
    let (claim, _) = nodes.get(node)?;
    Some(
        claim
            .spec
            .as_ref()
            .and_then(|s| s.devices.as_ref())
            .and_then(|d| d.requests.as_ref())
            .into_iter()
            .flatten()
            .map(|r| {
                let e = r.exactly.as_ref().expect("exactly");
                format!(
                    "{}:{}:{}",
                    r.name,
                    e.device_class_name,
                    e.count.unwrap_or(0)
                )
            })
            .collect(),
    )
}

// Paused: PreBind polls the store for the created claim (NoopClient stores nothing).
#[tokio::test(start_paused = true)]
async fn a_class_naming_the_resource_gets_the_pod_a_claim_on_a_node_without_it() {
    let plugin = plugin_on(gpu_store(Some("example.com/gpu")));
    let pod = gpu_pod("example.com/gpu", "1");
    let nodes = vec![plain_node()];
    let mut state = CycleState::new();
    assert!(plugin.pre_filter(&mut state, &pod, &nodes).1.is_success());
    assert!(plugin.filter(&state, &pod, &nodes[0]).is_success());
    assert_eq!(
        node_requests(&state, "n1"),
        Some(vec!["container-0-request-1:gpu:1".to_string()])
    );
    assert!(plugin.reserve(&mut state, &pod, "n1").is_success());
    let inner = extended_state(&state);
    let ext = inner.extended.as_ref().expect("extended");
    assert!(plugin.manager().has_pending_allocation(&ext.initial_uid));
    assert!(plugin.pre_bind(&state, &pod, "n1").await.is_success());
    assert!(!plugin.manager().has_pending_allocation(&ext.initial_uid));
    let claim = ext.claim.lock().clone();
    // NoopClient names a generated claim with five zeros.
    assert_eq!(
        claim.metadata.name.as_deref(),
        Some("p-extended-resources-00000")
    );
    assert_eq!(
        claim
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION))
            .map(String::as_str),
        Some("true")
    );
    let owner = &claim.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str(),
            owner.controller
        ),
        ("Pod", "p", "uid-p", Some(true))
    );
    let status = claim.status.as_ref().expect("status");
    assert_eq!(
        status.reserved_for.as_ref().map(|r| r[0].uid.as_str()),
        Some("uid-p")
    );
    let results = status
        .allocation
        .as_ref()
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
        .expect("allocated");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].request, "container-0-request-1");
    let (_, mappings) = ext.reserved.lock().clone().expect("reserved");
    assert_eq!(
        mappings
            .iter()
            .map(|m| format!(
                "{}/{}/{}",
                m.container_name, m.resource_name, m.request_name
            ))
            .collect::<Vec<_>>(),
        ["c0/example.com/gpu/container-0-request-1"]
    );
}

#[test]
fn the_implicit_name_of_a_class_works_too() {
    let plugin = plugin_on(gpu_store(None));
    let pod = gpu_pod("deviceclass.resource.kubernetes.io/gpu", "2");
    let nodes = vec![plain_node()];
    let mut state = CycleState::new();
    assert!(plugin.pre_filter(&mut state, &pod, &nodes).1.is_success());
    assert!(plugin.filter(&state, &pod, &nodes[0]).is_success());
    // cpu sorts first, then deviceclass.resource.kubernetes.io/gpu.
    assert_eq!(
        node_requests(&state, "n1"),
        Some(vec!["container-0-request-1:gpu:2".to_string()])
    );
}

#[tokio::test]
async fn a_node_advertising_the_resource_keeps_it_to_its_device_plugin() {
    let plugin = plugin_on(gpu_store(Some("example.com/gpu")));
    let pod = gpu_pod("example.com/gpu", "1");
    let node = node_info(
        NodeBuilder::new("n1").capacity(&[("cpu", "8"), ("pods", "10"), ("example.com/gpu", "2")]),
        &[],
    );
    let mut state = CycleState::new();
    assert!(
        plugin
            .pre_filter(&mut state, &pod, std::slice::from_ref(&node))
            .1
            .is_success()
    );
    assert!(plugin.filter(&state, &pod, &node).is_success());
    assert_eq!(node_requests(&state, "n1"), None, "no claim for the node");
    assert!(plugin.reserve(&mut state, &pod, "n1").is_success());
    assert!(plugin.pre_bind(&state, &pod, "n1").await.is_success());
    let inner = extended_state(&state);
    let claim = inner
        .extended
        .as_ref()
        .expect("extended")
        .claim
        .lock()
        .clone();
    assert_eq!(
        claim.metadata.name.as_deref(),
        Some(IN_MEMORY_NAME),
        "never created"
    );
}

#[test]
fn filter_messages() {
    let plugin = plugin_on(gpu_store(Some("example.com/gpu")));
    let nodes = vec![plain_node()];
    let filter = |pod: &PodInfo| {
        let mut state = CycleState::new();
        assert!(plugin.pre_filter(&mut state, pod, &nodes).1.is_success());
        plugin.filter(&state, pod, &nodes[0])
    };
    // Four GPUs on the node.
    let s = filter(&gpu_pod("example.com/gpu", "5"));
    assert_eq!(
        s.code(),
        kubesched_framework::Code::UnschedulableAndUnresolvable
    );
    assert_eq!(s.reasons(), [ERR_REASON_CANNOT_ALLOCATE]);
    // A second extended resource nobody provides on the node.
    let both = PodBuilder::new("p")
        .uid("uid-p")
        .container(&[("example.com/gpu", "1"), ("example.com/fpga", "1")])
        .info();
    assert_eq!(filter(&both).reasons(), [ERR_REASON_CANNOT_FIT_RESOURCE]);
}

#[test]
fn gate_off_leaves_extended_resources_to_node_resources_fit() {
    let handle = Handle::builder()
        .objects(gpu_store(Some("example.com/gpu")))
        .features(FeatureGates::parse_at(Version::V1_35, []).expect("gates"))
        .build();
    let plugin = DynamicResources::new(&DynamicResourcesArgs::default(), &handle).expect("plugin");
    let mut state = CycleState::new();
    let (_, s) = plugin.pre_filter(
        &mut state,
        &gpu_pod("example.com/gpu", "1"),
        &[plain_node()],
    );
    assert!(s.is_skip());
}

#[tokio::test]
async fn an_earlier_attempts_claim_is_deleted_by_post_filter() {
    let objects = gpu_store(Some("example.com/gpu"));
    let mut old = claim("p-extended-resources-abcde", one_request(1, None));
    old.metadata.annotations = Some(
        [(
            EXTENDED_RESOURCE_CLAIM_ANNOTATION.to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    old.metadata.owner_references = Some(vec![de(json!({
        "apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p", "controller": true,
    }))]);
    objects.resource_claims.upsert(old);
    let plugin = plugin_on(objects);
    let pod = gpu_pod("example.com/gpu", "1");
    let nodes = vec![plain_node()];
    let mut state = CycleState::new();
    assert!(plugin.pre_filter(&mut state, &pod, &nodes).1.is_success());
    assert_eq!(
        plugin.filter(&state, &pod, &nodes[0]).reasons(),
        [ERR_REASON_EXTENDED_CLAIM]
    );
    let framework = PluginHarness::new(plugin_on(Arc::new(ObjectStore::default()))).framework();
    let (_, s) = plugin
        .post_filter(&framework, &state, &pod, &NodeToStatus::default())
        .await;
    assert_eq!(s.reasons(), [MSG_DELETED]);
}

#[test]
fn init_containers_share_one_request_and_reuse_what_runs_after_them() {
    let pod = PodBuilder::new("p")
        .init_container(&[("example.com/gpu", "1")], false)
        .init_container(&[("example.com/gpu", "3")], false)
        .init_container(&[("example.com/gpu", "1")], true)
        .container(&[("example.com/gpu", "1")])
        .info();
    let needed =
        std::collections::BTreeMap::from([("example.com/gpu".to_string(), "gpu".to_string())]);
    let (requests, mappings) = requests_and_mappings(&pod, &needed);
    let requests: Vec<String> = requests
        .iter()
        .map(|r| {
            format!(
                "{}:{}",
                r.name,
                r.exactly.as_ref().and_then(|e| e.count).unwrap_or(0)
            )
        })
        .collect();
    // The sidecar (2) and the container (3) run throughout; the second init container
    // reuses both and asks for one more, the first needs none of its own.
    assert_eq!(
        requests,
        [
            "container-1-request-0:1",
            "container-2-request-0:1",
            "container-3-request-0:1"
        ]
    );
    let mappings: Vec<String> = mappings
        .iter()
        .map(|m| format!("{}->{}", m.container_name, m.request_name))
        .collect();
    assert_eq!(
        mappings,
        [
            "init2->container-2-request-0",
            "c0->container-3-request-0",
            "init0->container-2-request-0",
            "init1->container-2-request-0",
            "init1->container-3-request-0",
            "init1->container-1-request-0",
        ]
    );
}

/// v1.37: Filter tells NodeResourcesFit's Score how many devices of the providing class a
/// feasible node has and how many claims hold, per DRA-backed extended resource.
#[test]
fn filter_counts_the_class_devices_for_node_resources_fit() {
    use kubesched_framework::dra_devices::{DeviceTally, DraExtendedDevices};
    let objects = gpu_store(Some("example.com/gpu"));
    let mut taken = claim("other", one_request(1, None));
    taken.status = Some(de(json!({"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0"},
    ]}}})));
    objects.resource_claims.upsert(taken);
    let plugin = plugin_on(objects);
    let pod = gpu_pod("example.com/gpu", "2");
    let nodes = vec![plain_node()];
    let mut state = CycleState::new();
    assert!(plugin.pre_filter(&mut state, &pod, &nodes).1.is_success());
    assert!(plugin.filter(&state, &pod, &nodes[0]).is_success());
    let record = state
        .read::<DraExtendedDevices>()
        .expect("written at PreFilter");
    assert_eq!(
        record.get("n1", "example.com/gpu"),
        Some(DeviceTally {
            allocatable: 4,
            allocated: 1
        })
    );

    // A pod without DRA-backed requests leaves no record.
    let plain = PodBuilder::new("q").container(&[("cpu", "1")]).info();
    let mut state = CycleState::new();
    let _ = plugin.pre_filter(&mut state, &plain, &nodes);
    assert!(state.read::<DraExtendedDevices>().is_none());
}
